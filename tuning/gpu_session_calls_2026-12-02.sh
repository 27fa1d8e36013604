# GPU calls of 2026-12-02 (twenty-second session, one H200): a recursive trsm's leaves on
# lanes (Variant.lanes; search/recursion_plans.SOLVE_LEAF), right-looking
# (schedule/lane_loops.py).  The plans and their cubins are compiled off the device
# first (2 cores, ~1 min a plan at 4096), e.g.
#   python tuning/triangular.py --op trsm --sizes 2048 4096 --rhs 512 --dtype float32 \
#       --stops 128 --leaves 32x8 32x4 16x16 --no-default --no-mm --jobs 2 \
#       --build-only build/built/a4.pkl --arch sm_90
# (the arguments of each run below, with --build-only; c4 and u4 were built before
# SOLVE_LEAF was prefetched and double-buffered, d4 after), carried to the device in build/
# (git-ignored), where each run only checks and times them.
# Usage: bash tuning/gpu_session_calls_2026-12-02.sh CASE...
. tuning/gpu_session_run.sh  # the wheels, tri()
for case in "$@"; do
  case "$case" in
  a4) tri a4 200 --op trsm --sizes 2048 4096 --rhs 512 --dtype float32 --stops 128 --leaves 32x8 32x4 16x16 ;;
  # the lane loop unrolled by 4 (a4's leaves were not), and the copies prefetched
  # through registers (p), double-buffered too (d)
  a5) tri a5 200 --op trsm --sizes 2048 4096 --rhs 512 --dtype float32 --stops 128 --leaves 32x8 32x8p 32x8pd ;;
  b4) tri b4 150 --op trsm --sizes 2048 4096 --rhs 512 --dtype float64 --stops 128 --leaves 32x8 ;;
  e4) tri e4 150 --op trsm --sizes 2048 4096 --rhs 512 --dtype float32 --stops 64 256 --leaves 32x8 ;;
  c4) tri c4 150 --op trsm --sizes 2048 4096 --dtype float32 --stops 128 --leaves 32x8 ;;
  u4) tri u4 100 --op trsm_upper --sizes 2048 --rhs 512 --dtype float32 --stops 128 --leaves 32x8 ;;
  d4) tri d4 200 --op trsm --sizes 8192 --rhs 512 --dtype float32 --stops 256 --leaves 32x8 ;;
  # a leaf kernel under Nsight Compute (a5's plan 2: 2048, leaves 32 x 8, prefetched)
  ncu) bash tuning/ncu_trsm_leaf.sh build/built/a5.pkl 2 $OUT/ncu_leaf ;;
  # the batched Cholesky's default after the split sums' loops were unrolled by 4
  chol) timeout 240 python tuning/batched.py --op cholesky --n 32 64 --dtype float32 \
          --dtype float64 --megabytes 1536 --repeats 10 --out $OUT/chol > $OUT/chol.log 2>&1
        grep -h "^| cholesky" $OUT/chol/batched.md; tail -2 $OUT/chol.log | cut -c1-300 ;;
  esac
done
