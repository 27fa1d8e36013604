# GPU calls of 2026-11-29 (sixteenth session, one H200): per-element Cholesky + solve.
# "sums" ran on the tree of branch batch-sums-experiment (the substitutions' rows as
# device steps, their terms added atomically: dropped, 2x slower); "acc" on main with
# codegen/accumulator.py's register accumulator (not yet unrolled) and the source order
# for groups without parallelism; "coop", "coop64", "epb", "epb_small" on main with the
# sums split over a warp's lanes.  Probe before them: tuning/probes/cholesky/anatomy.py.
# Usage: CASE [ARGS]
bash .whl/install.sh >/dev/null 2>&1; export PYTHONPATH=/tmp/site:$PWD; export OUT
run() {  # $1: name, $2: timeout, rest: tuning/batched.py arguments
  name=$1; limit=$2; shift 2; mkdir -p $OUT/$name
  timeout $limit python tuning/batched.py "$@" --out $OUT/$name > $OUT/log_$name.txt 2>&1
  grep -h "^| cholesky" $OUT/$name/batched.md; grep '^{' $OUT/log_$name.txt | cut -c1-600
  tail -2 $OUT/log_$name.txt | cut -c1-300
}
for case in "$@"; do
  case "$case" in
  sums) run sums 560 --op cholesky --n 64 32 16 8 --mappings --per-candidate 3 --repeats 10 ;;
  # after the experiment above was dropped: one thread's substitution rows keep their
  # running value in a register (codegen/accumulator.py), in the source's row order
  acc) run acc 400 --op cholesky --n 64 32 16 8 --mappings --per-candidate 2 --repeats 10 ;;
  acc64) run acc64 400 --op cholesky --dtype float64 --n 64 32 16 8 --mappings --per-candidate 2 --repeats 10 ;;
  # then: a one-thread step's sums split over a warp's lanes (codegen/accumulator.py),
  # 1.5 GB of arrays, the default also checked at the timed sizes
  coop) run coop 580 --op cholesky --n 64 32 16 8 --mappings --per-candidate 2 --repeats 10 --megabytes 1536 --check-full ;;
  # n = 64: fewer elements a block, more of them resident per SM (16.9 / 33.3 kB each)
  epb) run epb 300 --op cholesky --n 64 --repeats 10 --megabytes 1536 --also tuning/probes/cholesky/elements_per_block_2026-11-29.json
       run epb64 300 --op cholesky --dtype float64 --n 64 --repeats 10 --megabytes 1536 --also tuning/probes/cholesky/elements_per_block_2026-11-29.json ;;
  epb_small) run epb_small 200 --op cholesky --n 32 16 8 --repeats 10 --megabytes 1536 --also tuning/probes/cholesky/elements_per_block_small_2026-11-29.json ;;
  coop64) run coop64 400 --op cholesky --dtype float64 --n 64 32 16 8 --repeats 10 --megabytes 1536 --check-full ;;
  esac
done
