# GPU calls of 2026-12-07 (thirty-seventh session), one H100: the interleaved (SoA)
# Cholesky timed for the first time, every plan its default ranks beside it (the model
# picks a launched thread per element: its traffic model counts an element's re-reads
# once, a perfect per-block cache); the products (gemm, gemv, dot) on the H100 at 1.5 GB,
# not swept there since 2026-11-27, each default checked at the timed sizes too.
# Usage: bash tuning/gpu_session_calls_2026-12-07.sh CASE...
. tuning/gpu_session_run.sh  # the wheels, run()
for case in "$@"; do
  case "$case" in
  # (the thread per element, the pick before memory/self_reuse.py, as --also: the
  # ranking no longer holds it among each candidate's two best)
  soa) run soa 220 --op cholesky_soa --n 16 32 64 --dtype float64 --megabytes 1536 --mappings --per-candidate 2 --no-square --repeats 5 --also tuning/probes/batched_cholesky_soa_thread_2026-12-07.json ;;
  # with four double tensor-core plans of a warp tile of 32 x 64 (4 rows a thread: 16
  # instructions a step for 4 + 8 fragment loads, against the default's 8 for 2 + 8),
  # three without the register prefetch that would hold them over 230 registers
  p64) run p64 220 --op gemm --op gemv --op dot --dtype float64 --n 16 32 64 128 --megabytes 1536 --no-square --check-full --repeats 10 --also tuning/probes/batched_mma_warp_tiles_2026-12-07.json ;;
  p32) run p32 150 --op gemm --op gemv --op dot --dtype float32 --n 16 32 64 128 --megabytes 1536 --no-square --check-full --repeats 10 ;;
  # the small elements, both precisions
  small) run small 200 --op gemm --op gemv --op dot --dtype float32 --dtype float64 --n 2 4 8 --megabytes 1536 --no-square --check-full --repeats 10 ;;
  # the interleaved products, fp32
  psoa) run psoa 200 --op gemm_soa --op gemv_soa --op dot_soa --n 2 8 16 32 64 128 --megabytes 1536 --no-square --check-full --repeats 10 ;;
  # the Cholesky defaults at every n of the mark, both precisions
  chol) run chol 180 --op cholesky --n 8 16 32 64 --dtype float32 --dtype float64 --megabytes 1536 --no-square --check-full --repeats 10 ;;
  esac
done
# (the session's last call) the interleaved Cholesky with a block's copies of its
# elements element-fastest (codegen/staging.interleaved), against the tree before it
# (c9f3a18, unpacked into the untracked base/) in the same call: the defaults at n = 16,
# 32, 64 and, at 64, a warp per element four a block and the 8 x 8 block
# (tuning/probes/batched_cholesky_soa_groups_2026-12-07.json)
case " $* " in *" groups "*)
  mkdir -p $OUT/base
  (cd base && PYTHONPATH=/tmp/site:$PWD timeout 80 python tuning/batched.py --op cholesky_soa --n 32 64 --dtype float64 --megabytes 1536 --no-square --repeats 5 --also ../tuning/probes/batched_cholesky_soa_groups_2026-12-07.json --out $OUT/base > $OUT/log_base.txt 2>&1)
  grep -h "^{" $OUT/log_base.txt | cut -c1-700
  run groups 120 --op cholesky_soa --n 16 32 64 --dtype float64 --megabytes 1536 --no-square --repeats 5 --also tuning/probes/batched_cholesky_soa_groups_2026-12-07.json ;;
esac
# (what the last 258 s of device time could hold) the same, trimmed: the tree before at
# n = 32 alone, then the defaults at n = 32, 64 and the probe plans at 64
case " $* " in *" groups_short "*)
  mkdir -p $OUT/base
  (cd base && PYTHONPATH=/tmp/site:$PWD timeout 30 python tuning/batched.py --op cholesky_soa --n 32 --dtype float64 --megabytes 1536 --no-square --repeats 5 --out $OUT/base > $OUT/log_base.txt 2>&1)
  grep -h "^{" $OUT/log_base.txt | cut -c1-400
  run groups 75 --op cholesky_soa --n 32 64 --dtype float64 --megabytes 1536 --no-square --repeats 5 --also tuning/probes/batched_cholesky_soa_groups_2026-12-07.json ;;
esac
