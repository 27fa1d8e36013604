# GPU calls of 2026-12-07 (thirty-ninth session), one H100 or H200: the interleaved
# (SoA) Cholesky's rows padded (d08522c: 33 words at n = 32, where 32 conflicted) against
# the tree before (base/ = 57cada2 unpacked: git archive 57cada2 polygpu tuning kernels
# | tar -x -C base), and the model's picks after write-backs were priced
# (memory/self_reuse.py: a thread per element's re-writes; float n = 16 now picks four
# resident warps a block) against every scheduler candidate's best plan.
# Usage: bash tuning/gpu_session_calls_2026-12-07c.sh CASE...
. tuning/gpu_session_run.sh  # the wheels, run()
run_base() {  # $1: timeout, rest: sizes; the SoA Cholesky defaults of the tree in base/
  limit=$1; shift; mkdir -p $OUT/base
  (cd base && PYTHONPATH=/tmp/site:$PWD timeout $limit python tuning/batched.py --op cholesky_soa "$@" --megabytes 1536 --no-square --repeats 5 --out $OUT/base > $OUT/log_base.txt 2>&1)
  grep -h "^{" $OUT/log_base.txt | cut -c1-500; tail -2 $OUT/log_base.txt | cut -c1-300
}
for case in "$@"; do
  case "$case" in
  # the tree before the padding: its defaults at n = 16, 32 in both precisions
  base) run_base 100 --n 16 32 --dtype float32 --dtype float64 ;;
  # (what the device time left after refused starts held) the tree before at n = 32 in
  # float alone, where the padding changed most (rows of 32 words, now 37)
  base32) run_base 60 --n 32 --dtype float32 ;;
  # ... and in double at n = 8 alone, never timed on the H100 (the pick, a thread per
  # element, against each scheduler candidate's best)
  soa64_8) run soa64 100 --op cholesky_soa --n 8 --dtype float64 --megabytes 1536 --mappings --per-candidate 1 --no-square --check-full --repeats 5 ;;
  # this tree in float: the default and each scheduler candidate's best plan, n = 8..64,
  # and at 16..64 the default's warps eight a block (copies of whole sectors in float)
  soa32) run soa32 200 --op cholesky_soa --n 8 16 32 64 --dtype float32 --megabytes 1536 --mappings --per-candidate 1 --no-square --repeats 5 --also tuning/probes/batched_cholesky_soa_eight_2026-12-07.json ;;
  # ... in double at n = 8, 16, 32 (n = 8 not timed on the H100 before; the defaults
  # also checked at the timed sizes)
  soa64) run soa64 190 --op cholesky_soa --n 8 16 32 --dtype float64 --megabytes 1536 --mappings --per-candidate 1 --no-square --check-full --repeats 5 ;;
  # the products in float, every scheduler candidate's best plan beside the default:
  # the model's pick against the best timed on the H100 (last swept on the H200)
  # (what a warm machine's device time left can hold) n = 4, 16, 64
  products_short) run products 380 --op gemm --op gemv --op dot --n 4 16 64 --dtype float32 --megabytes 1536 --mappings --per-candidate 1 --no-square --repeats 10 ;;
  products) run products 560 --op gemm --op gemv --op dot --n 2 4 8 16 32 64 128 --dtype float32 --megabytes 1536 --mappings --per-candidate 1 --no-square --repeats 10 ;;
  # (fortieth session: the float sweep and the Cholesky picks are done) the products in
  # double, never swept on the H100: gemm at n = 128 ran at 79.6 % of the roofline, the
  # one size where a rival could beat the pick by more than 10 %; then the small sizes
  gemm64_128) run products64 200 --op gemm --n 128 64 --dtype float64 --megabytes 1536 --mappings --per-candidate 2 --no-square --repeats 10 ;;
  # (forty-second session: gemm n = 8, 64, 128, dot and gemv n = 4 timed, picks 1.00)
  # the double sizes still not timed against their rivals on the H100, ~45 s a size warm
  gemm64_rest) run products64g 250 --op gemm --n 2 4 16 32 --dtype float64 --megabytes 1536 --mappings --per-candidate 1 --no-square --repeats 5 ;;
  vec64_rest) run products64v 250 --op gemv --op dot --n 2 8 --dtype float64 --megabytes 1536 --mappings --per-candidate 1 --no-square --repeats 5 ;;
  products64_small) run products64s 400 --op gemm --op gemv --op dot --n 2 4 8 --dtype float64 --megabytes 1536 --mappings --per-candidate 1 --no-square --repeats 10 ;;
  esac
done
