# GPU calls of 2026-11-29 (seventeenth session, one H200): interleaved batches relaid
# element-outermost (transform/layout.py, the transposes counted) against their
# interleaved plans and torch on both layouts; the BLAS defaults checked at full size.
# Usage: CASE [ARGS]
bash .whl/install.sh >/dev/null 2>&1; export PYTHONPATH=/tmp/site:$PWD; export OUT
run() {  # $1: name, $2: timeout, rest: tuning/batched.py arguments
  name=$1; limit=$2; shift 2; mkdir -p $OUT/$name
  timeout $limit python tuning/batched.py "$@" --out $OUT/$name > $OUT/log_$name.txt 2>&1
  grep -h "^| \(gemm\|gemv\|dot\)" $OUT/$name/batched.md; grep '^{' $OUT/log_$name.txt | cut -c1-400
  grep -h "checked at the timed" -A40 $OUT/$name/batched.md | grep -v ": ok" | head -20
  tail -2 $OUT/log_$name.txt | cut -c1-300
}
for case in "$@"; do
  case "$case" in
  # SoA products: the default (relaid from n = 32 by the model), the best plan of the other
  # layout, torch on AoS and on the interleaved layout; the default checked at full size
  soa) run soa 560 --op gemm_soa --n 16 32 64 128 --layouts --megabytes 1536 --check-full --repeats 10 ;;
  soa64) run soa64 400 --op gemm_soa --dtype float64 --n 16 32 64 128 --layouts --megabytes 1536 --check-full --repeats 10 ;;
  # the AoS BLAS defaults checked against the loop nest at the timed sizes (1.5 GB)
  # (a first call with timing and torch ran out of its 580 s after dot n = 32, its checks
  # unprinted: the checks alone since)
  full) run full 560 --op gemm --op gemv --op dot --n 2 4 8 16 32 64 128 --megabytes 1536 --check-only ;;
  esac
done
