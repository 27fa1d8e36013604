# GPU calls of 2026-11-30 (eighteenth session, one H200): batched products' plans beyond
# the defaults (tuning/probes/batched_products_2026-11-30.json) timed beside them and torch;
# Cholesky's steps with per-kernel threads; the new defaults checked at full size.
# Usage: CASE [ARGS]
. tuning/gpu_session_run.sh  # the wheels, run()
PROBE=tuning/probes/batched_products_2026-11-30.json
for case in "$@"; do
  case "$case" in
  # AoS products: wider register tiles and double-precision tiles beside the defaults
  prod32) run prod32 250 --op gemm --n 64 128 --megabytes 1536 --also $PROBE --repeats 10 ;;
  prod64) run prod64 280 --op gemm --dtype float64 --n 32 64 128 --megabytes 1536 --also $PROBE --repeats 10 ;;
  # per-element Cholesky: a warp per element with its 1-d step (the column's scaling) on
  # all 32 lanes and the trailing update's warp shaped otherwise (per-kernel threads)
  chol) run chol 200 --op cholesky --n 32 64 --megabytes 1536 --also tuning/probes/batched_cholesky_steps_2026-11-30.json --repeats 10 ;;
  # the new defaults (element plans of 2026-11-30, explicit point coordinates) timed
  # and checked against the loop nest at the timed sizes
  gemm32) run gemm32 200 --op gemm --n 2 4 8 16 32 64 128 --megabytes 1536 --check-full --repeats 10 ;;
  gemm64) run gemm64 120 --op gemm --dtype float64 --n 32 64 128 --megabytes 1536 --check-full --repeats 10 ;;
  soa32) run soa32 120 --op gemm_soa --n 32 64 128 --megabytes 1536 --check-full --repeats 10 ;;
  # (the two above ran out of their limits -- the full-size checks of n = 2 on the CPU
  # reference, the square plan on interleaved elements): what they had left
  gemm32b) run gemm32b 150 --op gemm --n 64 128 --megabytes 1536 --check-full --repeats 10 ;;
  soa32b) run soa32b 120 --op gemm_soa --n 128 --megabytes 1536 --check-full --repeats 10 ;;
  esac
done
