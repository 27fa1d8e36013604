# GPU calls of 2026-12-08 (forty-third session): a recursive trsm's leaves with the
# column spread over a warp's lanes in registers (Variant.lanes with full_unroll,
# codegen/lane_registers.py; tuning/triangular.py --leaves rLxC) against the leaves on
# lanes with the column in shared memory (SOLVE_LEAF, 32x8) and cuBLAS in the same run.
# The probe tuning/probes/solve_leaf_registers.cu (hand-written, one 64-row leaf) timed
# the form first: 9.3 us against 19.2 on one H100.  The plans and their cubins are
# compiled off the device first (two cores), with the arguments of each case below and
#   --no-default --no-mm --jobs 2 --build-only build/built/CASE.pkl --arch sm_90
# carried (gzipped) to the device in build/ (git-ignored), where each run only checks
# and times.
# Usage: bash tuning/gpu_session_calls_2026-12-08.sh CASE...
. tuning/gpu_session_run.sh  # the wheels, tri()
for case in "$@"; do
  case "$case" in
  probe) nvcc -O3 -arch=sm_90 -o /tmp/leaf tuning/probes/solve_leaf_registers.cu 2>/dev/null && /tmp/leaf ;;
  # float, 512 right-hand sides, stop 64: the lanes' registers on 32, 16 and 8 lanes
  # against the default leaf (2:14 to build)
  r2) tri r2 150 --op trsm --sizes 2048 --rhs 512 --dtype float32 --stops 64 --leaves r32x8 r16x8 r8x8 32x8 ;;
  # 4096 (3:54 to build) and stop 128 there
  r4) tri r4 150 --op trsm --sizes 4096 --rhs 512 --dtype float32 --stops 64 --leaves r32x8 32x8 ;;
  r4b) tri r4b 150 --op trsm --sizes 4096 --rhs 512 --dtype float32 --stops 128 --leaves r32x8 32x8 ;;
  # double at 2048, stop 64
  rd) tri rd 150 --op trsm --sizes 2048 --rhs 512 --dtype float64 --stops 64 --leaves r32x8 32x8 ;;
  # square (n = m), stop 64
  rs2) tri rs2 150 --op trsm --sizes 2048 --dtype float32 --stops 64 --leaves r32x8 32x8 ;;
  rs4) tri rs4 200 --op trsm --sizes 4096 --dtype float32 --stops 64 --leaves r32x8 32x8 ;;
  # 8192, stop 64 (the lanes' registers only; 8 minutes to build)
  r8) tri r8 300 --op trsm --sizes 8192 --rhs 512 --dtype float32 --stops 64 --leaves r32x8 ;;
  # (not run yet) 8192 at stop 128 with polygpu's default leaf (REGISTER_LEAF there),
  # the stop that won at 4096
  r8b) tri r8b 300 --op trsm --sizes 8192 --rhs 512 --dtype float32 --stops 128 --leaves default ;;
  esac
done
