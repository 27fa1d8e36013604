# GPU calls of 2026-11-29 (fifteenth session, one H200): a thread per element for tiny
# AoS products, and the interleaved (SoA) gemm, gemv and dot against their defaults
# (tuning/probes/batched_soa_2026-11-29.json), fp32 and fp64.  Usage: CASE [ARGS]
bash .whl/install.sh >/dev/null 2>&1; export PYTHONPATH=/tmp/site:$PWD; export OUT
run() {  # $1: name, $2: timeout, rest: tuning/batched.py arguments
  name=$1; limit=$2; shift 2; mkdir -p $OUT/$name
  timeout $limit python tuning/batched.py "$@" --out $OUT/$name > $OUT/log_$name.txt 2>&1
  grep -h "^| \(dot\|gemv\|gemm\)" $OUT/$name/batched.md; grep '^{' $OUT/log_$name.txt | cut -c1-600
  tail -2 $OUT/log_$name.txt | cut -c1-300
}
PROBE=tuning/probes/batched_soa_2026-11-29.json
for case in "$@"; do
  case "$case" in
  tiny) run tiny 150 --op gemm --n 2 4 --repeats 10 --also $PROBE ;;
  tiny64) run tiny64 150 --op gemm --dtype float64 --n 2 4 --repeats 10 --also $PROBE ;;
  gemm_soa) run gemm_soa 420 --op gemm_soa --n 2 4 8 16 32 64 128 --repeats 10 --also $PROBE ;;
  gemv_dot_soa) run gemv_dot_soa 400 --op gemv_soa --op dot_soa --n 2 4 8 16 32 64 128 --repeats 10 --also $PROBE ;;
  fp64) run fp64 400 --op gemm --op gemv --op dot --dtype float64 --n 2 4 8 16 32 64 128 --repeats 10 ;;
  # the defaults of the tree that records them, 1.5 GB of arrays: AoS fp32 against the
  # plans before (tuning/probes/batched_final_2026-11-29d.json), then SoA fp32 and AoS fp64
  final_aos) run final_aos 560 --op gemm --op gemv --op dot --n 2 4 8 16 32 64 128 --repeats 10 --megabytes 1536 --also tuning/probes/batched_final_2026-11-29d.json ;;
  final_soa) run final_soa 300 --op gemm_soa --op gemv_soa --op dot_soa --n 2 4 8 16 32 64 128 --repeats 10 --megabytes 1536 ;;
  final_fp64) run final_fp64 260 --op gemm --op gemv --op dot --dtype float64 --n 2 4 8 16 32 64 128 --repeats 10 --megabytes 1536 ;;
  # after final_*: the picks those runs showed wrong, changed, measured again
  recheck) run recheck32 140 --op gemm_soa --op gemv_soa --n 16 64 128 --repeats 10 --megabytes 1536
           run recheck64 140 --op gemm --op dot --dtype float64 --n 32 64 128 --repeats 10 --megabytes 1536 ;;
  esac
done
