# GPU calls of 2026-12-06 (thirty-fourth session): shared-memory reads that do not move
# with a loop loaded once before it (codegen/invariant_reads.py: the trailing update's
# row factor a[i][k], the substitutions' pivot b[j]), against the tree before it
# (4ffdcb7, unpacked into the untracked base/ by
# `git archive 4ffdcb7 polygpu tuning kernels | tar -x -C base`) in the same call.
# Usage: bash tuning/gpu_session_calls_2026-12-06.sh CASE...
. tuning/gpu_session_run.sh  # the wheels, run()
for case in "$@"; do
  case "$case" in
  # the defaults at every n of issue 21's Cholesky mark, every plan checked at full size
  hoist) run hoist 330 --op cholesky --n 8 16 32 64 --dtype float32 --dtype float64 --megabytes 1536 --no-square --check-full --repeats 10 ;;
  # the same from the tree before (n = 32, 64)
  base) mkdir -p $OUT/base
        (cd base && PYTHONPATH=/tmp/site:$PWD timeout 200 python tuning/batched.py --op cholesky --n 32 64 --dtype float32 --dtype float64 --megabytes 1536 --no-square --repeats 10 --out $OUT/base > $OUT/log_base.txt 2>&1)
        grep -h "^| cholesky" $OUT/base/batched.md; tail -2 $OUT/log_base.txt | cut -c1-300 ;;
  # every plan the default ranks (packed twins among them) at n = 32, 64: the model's
  # pick against the best measured (issue 21)
  mapfp32) run mapfp32 560 --op cholesky --n 32 64 --dtype float32 --megabytes 1536 --mappings --per-candidate 10 --no-square --check-full --repeats 10 ;;
  mapfp64) run mapfp64 560 --op cholesky --n 32 64 --dtype float64 --megabytes 1536 --mappings --per-candidate 10 --no-square --check-full --repeats 10 ;;
  # the same in double at n = 64 alone (what a short call has room for)
  map64) run map64 380 --op cholesky --n 64 --dtype float64 --megabytes 1536 --mappings --per-candidate 10 --no-square --check-full --repeats 10 ;;
  # where the double default's time goes now (packed warp plan, invariant reads):
  # Nsight Compute's stall samples per SASS instruction, and the SASS itself
  ncu64) timeout 300 bash tuning/ncu_batched_cholesky.sh $OUT/ncu64 float64 > $OUT/ncu64.txt 2>&1
         head -80 $OUT/ncu64.txt ;;
  # (thirty-fifth session) point loops printed loads-first (codegen/loads_first.py of
  # dd058d8, reverted by the next commit: slower; see batched.md): run from a checkout of
  # dd058d8, with the tree before (032ed92) unpacked into base/ as above; the defaults at
  # n = 64 with the probe's group sizes and thread shapes, in one call
  base35) mkdir -p $OUT/base35
          (cd base && PYTHONPATH=/tmp/site:$PWD timeout 150 python tuning/batched.py --op cholesky --n 64 --dtype float32 --dtype float64 --megabytes 1536 --no-square --repeats 10 --out $OUT/base35 > $OUT/log_base35.txt 2>&1)
          grep -h "^| cholesky" $OUT/base35/batched.md; tail -2 $OUT/log_base35.txt | cut -c1-300 ;;
  first) run first 380 --op cholesky --n 64 --dtype float32 --dtype float64 --megabytes 1536 --no-square --also tuning/probes/batched_cholesky_loads_first_2026-12-06.json --check-full --repeats 10 ;;
  # PolyBench's symm, the one other catalog kernel whose default had such loops (its
  # C_sh updates), before (base/) and after (dd058d8), one call
  symm) mkdir -p $OUT/symm_base $OUT/symm_new
        (cd base && PYTHONPATH=/tmp/site:$PWD timeout 100 python tuning/polybench.py --kernel symm --repeats 5 --out $OUT/symm_base > $OUT/log_symm_base.txt 2>&1)
        timeout 100 python tuning/polybench.py --kernel symm --repeats 5 --out $OUT/symm_new > $OUT/log_symm_new.txt 2>&1
        grep -h "^| symm" $OUT/symm_base/polybench.md $OUT/symm_new/polybench.md; tail -n 2 $OUT/log_symm_new.txt | cut -c1-300 ;;
  # (thirty-fifth session, after the revert) every ranked plan in double at n = 32:
  # with map64 and mapfp32 (run with a 200 s limit), the model's pick at 32 and 64
  mapfp64b) run mapfp64b 150 --op cholesky --n 32 --dtype float64 --megabytes 1536 --mappings --per-candidate 10 --no-square --check-full --repeats 10 ;;
  # (thirty-fifth session) the upper triangle's Cholesky (U^T U, packed as its
  # transpose's lower triangle) beside the lower one, torch upper=True in the same run
  upper) run upper 250 --op cholesky --op cholesky_upper --n 64 --dtype float32 --dtype float64 --megabytes 1536 --no-square --check-full --repeats 10 ;;
  # the defaults at every n of the mark (8 .. 64), every one checked at full size
  firstall) run firstall 400 --op cholesky --n 8 16 32 64 --dtype float32 --dtype float64 --megabytes 1536 --no-square --check-full --repeats 10 ;;
  esac
done
