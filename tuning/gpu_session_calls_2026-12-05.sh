# GPU calls of 2026-12-05 (thirty-first session, one H200): the batched Cholesky's
# defaults with the forward substitution of device steps turned right-looking
# (schedule/tiling.py _steps_on_lanes: one FMA a lane a row instead of a split sum's
# butterfly), and the same sizes from the code before it (d755cad, unpacked into the
# untracked old/ by `git archive d755cad polygpu tuning | tar -x -C old`) in the same call;
# Nsight Compute on the double default at n = 64.
# Usage: bash tuning/gpu_session_calls_2026-12-05.sh CASE...
. tuning/gpu_session_run.sh  # the wheels, run()
for case in "$@"; do
  case "$case" in
  chol) run chol 330 --op cholesky --n 16 32 64 --dtype float32 --dtype float64 --megabytes 1536 --check-full --repeats 10 ;;
  # the same sizes from an earlier commit's tree unpacked into the untracked old/ or
  # base/ (`git archive COMMIT polygpu tuning kernels | tar -x -C DIR`)
  cholold|cholbase) dir=${case#chol}; mkdir -p $OUT/$case
           (cd $dir && PYTHONPATH=/tmp/site:$PWD timeout 200 python tuning/batched.py --op cholesky --n 32 64 --dtype float32 --dtype float64 --megabytes 1536 --repeats 10 --out $OUT/$case > $OUT/log_$case.txt 2>&1)
           grep -h "^| cholesky" $OUT/$case/batched.md; tail -2 $OUT/log_$case.txt | cut -c1-300 ;;
  # resident triangles packed (Variant.packed, memory/residence.py) beside the defaults
  packed) run packed 420 --op cholesky --n 32 64 --dtype float32 --dtype float64 --megabytes 1536 --also tuning/probes/batched_cholesky_packed_2026-12-05.json --check-full --repeats 10 ;;
  # the thirty-second session's probe: the update loops unrolled (Variant.unroll 4), packed
  # triangles with them, at n = 64 beside the defaults
  unrollpacked) run unrollpacked 500 --op cholesky --n 64 --dtype float32 --dtype float64 --megabytes 1536 --also tuning/probes/batched_cholesky_unroll_packed_2026-12-05.json --check-full --repeats 10 ;;
  # the thirty-third session: the new defaults (packed at n = 64) at every n of issue 21's
  # Cholesky mark
  defaults) run defaults 560 --op cholesky --n 8 16 32 64 --dtype float32 --dtype float64 --megabytes 1536 --no-square --check-full --repeats 10 ;;
  # every plan the default ranks (packed twins among them) at n = 32, 64: the model's
  # pick against the best measured (issue 21)
  mapfp32) run mapfp32 560 --op cholesky --n 32 64 --dtype float32 --megabytes 1536 --mappings --per-candidate 10 --no-square --check-full --repeats 10 ;;
  mapfp64) run mapfp64 560 --op cholesky --n 32 64 --dtype float64 --megabytes 1536 --mappings --per-candidate 10 --no-square --check-full --repeats 10 ;;
  chol3264) run chol3264 250 --op cholesky --n 32 64 --dtype float32 --dtype float64 --megabytes 1536 --check-full --repeats 10 ;;
  # where the double default's time goes (the float one's: ncu_batched_cholesky_fp32_n64.txt)
  ncu64) timeout 300 bash tuning/ncu_batched_cholesky.sh $OUT/ncu64 float64 > $OUT/ncu64.txt 2>&1
         head -75 $OUT/ncu64.txt ;;
  esac
done
