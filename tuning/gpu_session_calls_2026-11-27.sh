# GPU calls of 2026-11-27 (tuning/results/NVIDIA-H100-80GB-HBM3/tune_time.md, stencil probes)
[ -n "${PG_INSTALLED:-}" ] || bash .whl/install.sh >/dev/null 2>&1; export PYTHONPATH=/tmp/site:$PWD PG_INSTALLED=1
V=tuning/probe_variants_stencil.json
case "$1" in
bench)  # tuning/polybench.py on the kernels given (default plans, 5 repeats)
  shift; mkdir -p $OUT/r; [ -f $OUT/r/polybench.json ] || cp tuning/results/NVIDIA-H100-80GB-HBM3/polybench.json $OUT/r/
  timeout ${LIMIT:-570} python tuning/polybench.py --repeats 5 --keep ${TUNE:+--tune $TUNE} --out $OUT/r $(for k in "$@"; do echo --kernel $k; done) 2>&1 | grep -v "^ *$" | tail -40 ;;
heat)  timeout 200 python tuning/variant_probe.py kernels/polybench/heat_3d.c -p tsteps=200 -p n=200 --variants tuning/probe_variants_heat3d.json --repeats 5 -o $OUT/probe_heat_3d.json 2>&1 | grep -v "^ " | cut -c1-300 ;;
probe)  # stencil variants at 200 time steps (per-step time is what matters)
  timeout 170 python tuning/variant_probe.py kernels/polybench/jacobi_2d.c -p tsteps=200 -p n=2800 --variants $V --repeats 5 -o $OUT/probe_jacobi_2d.json 2>&1 | grep -v "^ " | cut -c1-300
  timeout 200 python tuning/variant_probe.py kernels/polybench/fdtd_2d.c -p tmax=200 -p nx=2600 -p ny=3000 --variants $V --repeats 5 -o $OUT/probe_fdtd_2d.json 2>&1 | grep -v "^ " | cut -c1-300 ;;
tune)  # where a tune's time goes, per kernel given
  shift
  for k in "$@"; do
    args=$(python3 -c "import json;e=json.load(open('kernels/catalog.json'))['polybench/$k.c'];print(' '.join(f'-p {a}={b}' for a,b in e['gpu'].items()))")
    timeout ${LIMIT:-250} python tuning/tune_profile.py kernels/polybench/$k.c $args --budget 10 --top 30 -o $OUT/tune_profile_$k.txt > $OUT/tune_$k.log 2>&1; head -3 $OUT/tune_profile_$k.txt | cut -c1-400; grep -E "^prepare|measured in" $OUT/tune_$k.log | cut -c1-260; tail -2 $OUT/tune_$k.log | cut -c1-300
  done ;;
tunes)  # "tune" for each kernel given at once, each on its own GPU and 16 cores
  shift; i=0
  for k in "$@"; do
    pin="taskset -c $((16*i))-$((16*i+15))"; command -v taskset >/dev/null || pin=""
    (CUDA_VISIBLE_DEVICES=$i $pin bash $0 tune $k > $OUT/summary_$k.txt 2>&1) &
    i=$((i+1))
  done; wait; for k in "$@"; do echo "== $k"; cat $OUT/summary_$k.txt; rm $OUT/summary_$k.txt; done ;;
lanes)  # "tune" for comma-separated kernels in turn, one list per GPU (16 cores each)
  shift; i=0
  for s in "$@"; do
    pin="taskset -c $((16*i))-$((16*i+15))"; command -v taskset >/dev/null || pin=""
    (CUDA_VISIBLE_DEVICES=$i $pin bash $0 tune ${s//,/ } > $OUT/summary_$i.txt 2>&1) &
    i=$((i+1))
  done; wait; i=0; for s in "$@"; do echo "== $s"; cat $OUT/summary_$i.txt; rm $OUT/summary_$i.txt; i=$((i+1)); done ;;
figure5)  # figures.py for the kernels and sizes given (tune, cuBLAS in the same run)
  timeout ${LIMIT:-300} python tuning/figures.py --kernels $2 --sizes $3 --budget 12 --out $OUT/figure5 2>&1 | tail -20 ;;
mmprobe)  # register tiles of 8 x 16 points (cuBLAS's shape) against cuBLAS SGEMM
  for n in 2048 4096 8192; do timeout 170 python tuning/variant_probe.py kernels/mm.c -p n=$n --variants tuning/probe_mm_register_tile_8x16.json --repeats 20 -o $OUT/probe_mm_$n.json 2>&1 | grep -v "^ " | cut -c1-250; done ;;
ncu_mm)  # what limits mm against cuBLAS SGEMM (tuning/ncu_mm.sh)
  bash tuning/ncu_mm.sh $OUT/ncu_mm ;;
shards)  # polybench.py over 4 GPUs, one shard each (16 cores, its own GPU), then merged
  shift; i=0
  for s in "$@"; do
    mkdir -p $OUT/s$i
    pin="taskset -c $((16*i))-$((16*i+15))"; command -v taskset >/dev/null || pin=""
    (CUDA_VISIBLE_DEVICES=$i $pin timeout ${LIMIT:-570} python tuning/polybench.py --repeats 5 ${TUNE:+--tune $TUNE} --out $OUT/s$i $(for k in ${s//,/ }; do echo --kernel $k; done) > $OUT/s$i/log.txt 2>&1) &
    i=$((i+1))
  done; wait
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' ' '-')
  mkdir -p $OUT/r; cp tuning/results/$gpu/polybench.json $OUT/r/ 2>/dev/null
  python tuning/polybench.py --merge $OUT/s*/polybench.json --keep --out $OUT/r | tail -32
  for d in $OUT/s*; do echo "== $d"; cat $d/log.txt; done > $OUT/r/shard_logs.txt; rm -rf $OUT/s*
  grep -hE "tuned:|error|^[a-z_0-9]+ [.][.][.]" $OUT/r/shard_logs.txt | head -60 ;;
allpairs)  # tuning/allpairs.py on four GPUs: fp32 tuned, fp64, the other shapes, the sweep
  run() { i=$1; shift; pin="taskset -c $((16*i))-$((16*i+15))"; command -v taskset >/dev/null || pin=""
    CUDA_VISIBLE_DEVICES=$i $pin timeout ${LIMIT:-540} python tuning/allpairs.py "$@" >> $OUT/allpairs_log$i.txt 2>&1; }
  mkdir -p $OUT/a $OUT/b $OUT/c $OUT/d $OUT/s
  run 0 --shape 2000x5419 --dtype float32 --tune 8 --out $OUT/a &
  (run 1 --shape 2000x5419 --dtype float64 --out $OUT/b; run 1 --shape 1000x40000 --out $OUT/c) &
  run 2 --shape 6000x5419 --out $OUT/d &
  run 3 --sweep --c 16 32 64 --r 1 4 8 --s 1 2 4 8 --dp 16 32 64 --jobs 16 --out $OUT/s &
  wait; tail -4 $OUT/allpairs_log*.txt; cat $OUT/*/allpairs*.md | grep -v "^$" | head -80
  tar czf $OUT/allpairs.tgz -C $OUT a b c d s allpairs_log0.txt allpairs_log1.txt allpairs_log2.txt allpairs_log3.txt
  rm -rf $OUT/a $OUT/b $OUT/c $OUT/d $OUT/s $OUT/allpairs_log*.txt ;;
allpairs2)  # the default plan specialized as `compile -p` gives it, tuned; wider register tiles
  run() { i=$1; shift; pin="taskset -c $((16*i))-$((16*i+15))"; command -v taskset >/dev/null || pin=""
    CUDA_VISIBLE_DEVICES=$i $pin timeout ${LIMIT:-300} "$@" >> $OUT/allpairs_log$i.txt 2>&1; }
  mkdir -p $OUT/a $OUT/b; sz="-p n1=2000 -p n2=2000 -p d=5419"; V=tuning/probe_variants_allpairs.json
  run 0 python tuning/allpairs.py --shape 2000x5419 --dtype float32 --tune 8 --out $OUT/a &
  run 1 python tuning/variant_probe.py kernels/allpairs/l2dist.c $sz --variants $V --repeats 10 -o $OUT/probe_l2dist.json &
  run 2 python tuning/variant_probe.py kernels/allpairs/l1dist.c $sz --variants $V --repeats 10 -o $OUT/probe_l1dist.json &
  run 3 python tuning/allpairs.py --shape 2000x5419 --dtype float64 --out $OUT/b &
  wait; grep -hE "ms|rror" $OUT/allpairs_log1.txt $OUT/allpairs_log2.txt | cut -c1-250 | head -30; cat $OUT/*/allpairs.md | grep "^| [0-9]"
  tar czf $OUT/allpairs2.tgz -C $OUT a b probe_l2dist.json probe_l1dist.json allpairs_log0.txt allpairs_log1.txt allpairs_log2.txt allpairs_log3.txt
  rm -rf $OUT/a $OUT/b $OUT/probe_*.json $OUT/allpairs_log*.txt ;;
esac
