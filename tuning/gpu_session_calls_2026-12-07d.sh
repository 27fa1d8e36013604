# GPU calls of 2026-12-07 (forty-first session): a recursive trsm's leaves as a thread a
# column held in registers, unrolled whole and right-looking (Variant.full_unroll,
# tuning/triangular.py --leaves u32), against the leaves on lanes (SOLVE_LEAF, 32x8) and
# cuBLAS in the same run.  The plans and their cubins are compiled off the device first
# (two cores), with the arguments of each case below and
#   --no-default --no-mm --jobs 2 --build-only build/built/CASE.pkl --arch sm_90
# carried to the device in build/ (git-ignored), where each run only checks and times.
# Usage: bash tuning/gpu_session_calls_2026-12-07d.sh CASE...
. tuning/gpu_session_run.sh  # the wheels, tri()
for case in "$@"; do
  case "$case" in
  # float, 512 right-hand sides: the unrolled leaves and the leaves on lanes (the
  # default before) at stops 64 and 128
  # (at 4096 stop 64 isl's scheduler took more than 10 minutes on the split region,
  # until the forty-second session: the split region no longer asks it; 4:29 to build)
  u4s) tri u4s 150 --op trsm --sizes 4096 --rhs 512 --dtype float32 --stops 64 --leaves u32 32x8 ;;
  u1) tri u1 150 --op trsm --sizes 2048 --rhs 512 --dtype float32 --stops 64 128 --leaves u32 32x8 ;;
  u4) tri u4 150 --op trsm --sizes 4096 --rhs 512 --dtype float32 --stops 128 --leaves u32 32x8 ;;
  u8) tri u8 150 --op trsm --sizes 8192 --rhs 512 --dtype float32 --stops 64 128 --leaves u32 ;;
  # double at stop 64 (a 64-row column: 128 registers), beside the leaves on lanes
  ud) tri ud 150 --op trsm --sizes 2048 --rhs 512 --dtype float64 --stops 64 --leaves u32 32x8 ;;
  # square
  us) tri us 200 --op trsm --sizes 2048 4096 --dtype float32 --stops 64 128 --leaves u32 ;;
  esac
done
