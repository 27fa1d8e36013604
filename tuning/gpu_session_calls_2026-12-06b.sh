# GPU calls of 2026-12-06 (thirty-sixth session): the batched Cholesky with its thread
# loops split at the packed triangle's fold (codegen/fold_pieces.py) against the tree
# before (2336cb3, unpacked into the untracked base/ by `git archive 2336cb3 polygpu
# tuning kernels | tar -x -C base`) in the same call; a block of 64 or 128 threads per
# element (one element a block, __syncthreads its barriers: twice the warps a packed
# element gets in the default's warp plan); the upper triangle's Cholesky (not timed in
# the thirty-fifth session).
# Usage: bash tuning/gpu_session_calls_2026-12-06b.sh CASE...
. tuning/gpu_session_run.sh  # the wheels, run()
for case in "$@"; do
  case "$case" in
  # the tree before: its defaults at n = 32, 64
  base) mkdir -p $OUT/base
        (cd base && PYTHONPATH=/tmp/site:$PWD timeout 150 python tuning/batched.py --op cholesky --n 32 64 --dtype float64 --dtype float32 --megabytes 1536 --no-square --repeats 10 --out $OUT/base > $OUT/log_base.txt 2>&1)
        grep -h "^| cholesky" $OUT/base/batched.md; tail -2 $OUT/log_base.txt | cut -c1-300 ;;
  # the defaults at n = 32, 64 with the probe's block-per-element plans beside them
  blocks) run blocks 270 --op cholesky --n 32 64 --dtype float64 --dtype float32 --megabytes 1536 --no-square --also tuning/probes/batched_cholesky_block_per_element_2026-12-06.json --repeats 10 ;;
  # the upper triangle's Cholesky (U^T U, packed as its transpose's lower triangle) beside
  # the lower one, torch upper=True in the same run
  upper) run upper 150 --op cholesky --op cholesky_upper --n 64 --dtype float32 --dtype float64 --megabytes 1536 --no-square --check-full --repeats 10 ;;
  # after the space's element blocks (space.element_blocks) and the refitted resident
  # round (plan_model.RESIDENT_ROUND_SECONDS): the default at n = 64 beside every
  # resident plan of the batch candidate the default ranks (warp per element, 8 x 8,
  # 8 x 16, 16 x 16; packed and not: tuning/probes/
  # batched_cholesky_element_blocks_ranked_2026-12-06.json, written from the ranking)
  ranked) run ranked 260 --op cholesky --n 64 --dtype float64 --dtype float32 --megabytes 1536 --no-square --also tuning/probes/batched_cholesky_element_blocks_ranked_2026-12-06.json --repeats 10 ;;
  # the same in double alone (what the session's last device time had room for)
  ranked64) run ranked64 150 --op cholesky --n 64 --dtype float64 --megabytes 1536 --no-square --also tuning/probes/batched_cholesky_element_blocks_ranked_2026-12-06.json --repeats 10 ;;
  # (for the next session) the interleaved Cholesky, never timed: its default at n = 64
  # is a thread per element launched (predicted 0.78 ms: the traffic model's perfect
  # per-block cache keeps a 4 MB block footprint), beside every plan the default ranks
  soa) run soa 400 --op cholesky_soa --n 16 32 64 --dtype float64 --megabytes 1536 --mappings --per-candidate 3 --no-square --repeats 5 ;;
  # the default (8 x 8 since the refit) beside 8 x 16 and the warp per element, packed,
  # in double at n = 64: what a call with two minutes of device time can hold
  short64) run short64 120 --op cholesky --n 64 --dtype float64 --megabytes 1536 --no-square --also tuning/probes/batched_cholesky_element_blocks_short_2026-12-06.json --repeats 5 ;;
  # the defaults at every n of the mark (8 .. 64), each checked at the timed sizes
  all) run all 300 --op cholesky --n 8 16 32 64 --dtype float32 --dtype float64 --megabytes 1536 --no-square --check-full --repeats 10 ;;
  esac
done
