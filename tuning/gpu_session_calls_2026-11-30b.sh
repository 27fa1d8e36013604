# GPU calls of 2026-11-30, second session (nineteenth, one H200): double products on the
# tensor cores (Variant.mma, tuning/probes/batched_mma_2026-11-30.json) timed beside the
# default, the same plan in FMA code and torch, each checked at the timed sizes; the
# model's Cholesky picks at n = 16 / 32 beside the best plans measured before
# (tuning/probes/batched_cholesky_best_2026-11-30.json); then, once the operands' buffers
# were padded for the instruction's lanes (memory/placement.py mma_lanes), the tensor-core
# plans again with wider tiles and without prefetching; gemv / dot defaults re-checked;
# then with the row factor's rows dealt cyclically (schedule/tiling.py: no runs along y
# under mma), tuning/probes/batched_mma_rows_2026-11-30.json.
# Usage: CASE [ARGS]
. tuning/gpu_session_run.sh  # the wheels, run()
for case in "$@"; do
  case "$case" in
  mma64) run mma64 330 --op gemm --dtype float64 --n 32 64 128 --megabytes 1536 --also tuning/probes/batched_mma_2026-11-30.json --check-full --repeats 10 ;;
  cholp) run cholp 170 --op cholesky --n 16 32 --megabytes 1536 --also tuning/probes/batched_cholesky_best_2026-11-30.json --repeats 10 ;;
  mmapad) run mmapad 330 --op gemm --dtype float64 --n 32 64 128 --megabytes 1536 --also tuning/probes/batched_mma_padded_2026-11-30.json --check-full --repeats 10 ;;
  mmarows) run mmarows 330 --op gemm --dtype float64 --n 32 64 128 --megabytes 1536 --also tuning/probes/batched_mma_rows_2026-11-30.json --check-full --repeats 10 ;;
  # (mmarows ran out of its limit in n = 128's full-size checks: n = 128 again, the
  # default -- now the 64 x 64 tensor-core plan -- and the two wider tiles)
  mmarows128) run mmarows128 300 --op gemm --dtype float64 --n 128 --megabytes 1536 --also tuning/probes/batched_mma_rows_128_2026-11-30.json --check-full --repeats 10 ;;
  # two rows' fragments as one mma.sync.m16n8k4 (sm_90; ncu: the DMMA pipe was the
  # limit at 72 % with m8n8k4, tuning/ncu_batched_mma.sh): the default and wider tiles
  mma16) run mma16 300 --op gemm --dtype float64 --n 64 128 --megabytes 1536 --also tuning/probes/batched_mma_rows_128_2026-11-30.json --check-full --repeats 10 ;;
  gemvdot) run gemvdot 170 --op gemv --op dot --n 16 64 --megabytes 1536 --check-full --repeats 10 ;;
  esac
done
