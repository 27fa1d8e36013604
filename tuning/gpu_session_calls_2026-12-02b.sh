# GPU calls of 2026-12-02 (twenty-third session, one H200): double products with the
# larger tensor-core shapes (Variant.mma_k 8 / 16: mma.sync.m16n8k8 / m16n8k16, sm_90;
# tuning/probes/batched_mma_k_2026-12-02.json) beside the default (m16n8k4), each checked
# at the timed sizes; and the SASS of cubins compiled off the device (build/sass,
# git-ignored, carried): which DMMA shapes ptxas emitted, and the batched Cholesky's
# inner loops; then the larger shapes with their registers held for 3 blocks an SM
# (Variant.min_blocks, tuning/probes/batched_mma_min_blocks_2026-12-02.json), and the
# batched Cholesky's defaults with the update's triangle of points rolled (codegen/cuda.py;
# tuning/probes/cholesky/pipelined.py measured the rewrite by hand first).
# Usage: bash tuning/gpu_session_calls_2026-12-02b.sh CASE...
. tuning/gpu_session_run.sh  # the wheels, run()
for case in "$@"; do
  case "$case" in
  mmak) run mmak 420 --op gemm --dtype float64 --n 64 128 --megabytes 1536 --also tuning/probes/batched_mma_k_2026-12-02.json --check-full --repeats 10 ;;
  mmamb) run mmamb 420 --op gemm --dtype float64 --n 64 128 --megabytes 1536 --also tuning/probes/batched_mma_min_blocks_2026-12-02.json --check-full --repeats 10 ;;
  # wider tiles (a whole element a block, 8 warps) and a time tile of 8 (128 registers: 4
  # blocks an SM) for the double products
  mmatiles) run mmatiles 300 --op gemm --dtype float64 --n 64 128 --megabytes 1536 --also tuning/probes/batched_mma_tiles_2026-12-02.json --repeats 10 ;;
  chol) run chol 300 --op cholesky --n 32 64 --dtype float32 --dtype float64 --megabytes 1536 --check-full --repeats 10 ;;
  sass) mkdir -p $OUT/sass
        for f in build/sass/*.cubin; do
          b=$(basename $f .cubin); cuobjdump -sass $f > $OUT/sass/$b.sass 2>&1
          echo "$b: $(grep -o 'DMMA[.0-9A-Zx]*' $OUT/sass/$b.sass | sort | uniq -c | tr '\n' ' ')"
        done ;;
  esac
done
