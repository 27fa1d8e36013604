# GPU calls of 2026-12-07 (thirty-eighth session), one H100 or H200: the interleaved
# (SoA) Cholesky's element-fastest copies (codegen/staging.interleaved, 4da2c96) against
# the tree before them (c9f3a18, unpacked into the untracked base/), and its triangles
# packed (footprints.triangle_pair: the triangle before the element's unit dimension),
# and groups of several warps an element, several elements a block (named barriers),
# first built this session.
# Usage: bash tuning/gpu_session_calls_2026-12-07b.sh CASE...
. tuning/gpu_session_run.sh  # the wheels, run()
for case in "$@"; do
  case "$case" in
  # the tree before the element-fastest copies: its defaults at n = 32, 64, and at 64 a
  # warp per element four a block and the 8 x 8 block, unpacked (they could not pack)
  base) mkdir -p $OUT/base
    (cd base && PYTHONPATH=/tmp/site:$PWD timeout 90 python tuning/batched.py --op cholesky_soa --n 32 64 --dtype float64 --megabytes 1536 --no-square --repeats 5 --also ../tuning/probes/batched_cholesky_soa_groups_2026-12-07.json --out $OUT/base > $OUT/log_base.txt 2>&1)
    grep -h "^{" $OUT/log_base.txt | cut -c1-700; tail -2 $OUT/log_base.txt | cut -c1-300 ;;
  # this tree: the defaults at n = 16, 32, 64 (checked at the timed sizes too), the same
  # two plans unpacked, and packed: a warp per element four a block (n = 32, 64), 8 x 8
  # and 8 x 16 threads an element (n = 64)
  soa) run soa 260 --op cholesky_soa --n 16 32 64 --dtype float64 --megabytes 1536 --no-square --check-full --repeats 5 --also tuning/probes/batched_cholesky_soa_packed_2026-12-07.json ;;
  # (what 779 s of device time could hold after 11 refused starts) the same at n = 32, 64,
  # with three probe plans at 64: a warp per element four a block packed, 8 x 8 threads
  # an element alone packed, 8 x 16 threads an element two a block packed
  soa_short) run soa 200 --op cholesky_soa --n 32 64 --dtype float64 --megabytes 1536 --no-square --check-full --repeats 5 --also tuning/probes/batched_cholesky_soa_short_2026-12-07.json ;;
  # (the least that answers the question) n = 64 alone: the default, four elements a
  # block, against 8 x 8 threads an element alone, both packed
  soa_one) run soa 130 --op cholesky_soa --n 64 --dtype float64 --megabytes 1536 --no-square --check-full --repeats 5 --also tuning/probes/batched_cholesky_soa_one_2026-12-07.json ;;
  # the interleaved Cholesky in float, not timed before: the default and each scheduler
  # candidate's best plan (a launched thread per element, resident blocks) at n = 8..64
  soa32) run soa32 170 --op cholesky_soa --n 8 16 32 64 --dtype float32 --megabytes 1536 --mappings --per-candidate 1 --no-square --repeats 5 ;;
  # the AoS Cholesky defaults at every n of the mark, both precisions
  chol) run chol 180 --op cholesky --n 8 16 32 64 --dtype float32 --dtype float64 --megabytes 1536 --no-square --check-full --repeats 10 ;;
  esac
done
# (for the next session) the interleaved elements' rows padded (d08522c: 33 words at
# n = 32, where 32 conflicted) against the tree before (base/ = 57cada2 unpacked:
# git archive 57cada2 polygpu tuning kernels | tar -x -C base), the defaults at
# n = 16, 32 in both precisions
case " $* " in *" pad "*)
  mkdir -p $OUT/base
  (cd base && PYTHONPATH=/tmp/site:$PWD timeout 90 python tuning/batched.py --op cholesky_soa --n 16 32 --dtype float32 --dtype float64 --megabytes 1536 --no-square --repeats 5 --out $OUT/base > $OUT/log_base.txt 2>&1)
  grep -h "^{" $OUT/log_base.txt | cut -c1-500
  run pad 120 --op cholesky_soa --n 16 32 --dtype float32 --dtype float64 --megabytes 1536 --no-square --check-full --repeats 5 ;;
esac
