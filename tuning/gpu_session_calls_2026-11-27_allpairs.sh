# GPU calls of 2026-11-27 (eighth session): issue 20's remaining measurements -- the sweep
# down to blocks under one warp, the model against the exhaustive space, the symmetric
# self-distance, tuned rows at HEAD; and the __noinline__ halves (bc6bc64) against the
# inline ones before them (adaa556, unpacked from .whl/base_adaa556.tgz), same GPU, same run
BASE=adaa556; PROBE_LIMIT=200; . tuning/gpu_base_probe.sh
case "$1" in
sweep)  # GPU 0: the sweep with blocks from 4 threads; GPU 1: the model against the exhaustive space
  mkdir -p $OUT/s $OUT/e
  (lane 0 timeout 580 python tuning/allpairs.py --sweep --c 4 8 16 32 64 --r 1 4 8 --s 1 2 4 8 --dp 32 64 --min-block 4 --jobs 16 --out $OUT/s > $OUT/log0.txt 2>&1) &
  (lane 1 timeout 580 python tuning/allpairs.py --exhaustive --tune 8 --out $OUT/e > $OUT/log1.txt 2>&1) &
  wait; tail -3 $OUT/log0.txt $OUT/log1.txt; head -8 $OUT/s/*.md; cat $OUT/e/*.md
  tar czf $OUT/sweep.tgz -C $OUT s e log0.txt log1.txt; rm -rf $OUT/s $OUT/e $OUT/log*.txt ;;
tuned)  # GPU 0: self-distance, then l2dist and l1dist probes new vs base; GPU 1: fp32 rows tuned (budget 12)
  base; mkdir -p $OUT/t $OUT/self; sz="-p n1=2000 -p n2=2000 -p d=5419"; V=tuning/probe_variants_allpairs.json
  (lane 0 timeout 200 python tuning/allpairs.py --self --shape 2000x5419 --tune 8 --out $OUT/self > $OUT/log0.txt 2>&1
   export CUDA_VISIBLE_DEVICES=0; probe kernels/allpairs/l2dist.c l2dist_2000 $V $sz >> $OUT/log0.txt 2>&1) &
  (lane 1 timeout 580 python tuning/allpairs.py --shape 2000x5419 --dtype float32 --tune 12 --out $OUT/t > $OUT/log1.txt 2>&1) &
  wait; tail -25 $OUT/log0.txt; tail -4 $OUT/log1.txt; cat $OUT/self/*.md | grep "^| f"; grep "^| [0-9]" $OUT/t/*.md
  tar czf $OUT/tuned.tgz -C $OUT t self log0.txt log1.txt probe_l2dist_2000_new.json probe_l2dist_2000_base.json
  rm -rf $OUT/t $OUT/self $OUT/log*.txt $OUT/probe_* ;;
partial)  # the partial halves' register loops left to nvcc: mm 2000 new vs base, tune times
  base; mkdir -p $OUT/t
  (export CUDA_VISIBLE_DEVICES=0; LIMIT=150 probe kernels/mm.c mm_2000 tuning/probe_variants_full_tiles_mm.json -p n=2000 > $OUT/log0.txt 2>&1
   LIMIT=170 lane 0 bash tuning/gpu_session_calls_2026-11-27.sh tune syr2k >> $OUT/log0.txt 2>&1) &
  (LIMIT=170 lane 1 bash tuning/gpu_session_calls_2026-11-27.sh tune mm3 > $OUT/log1.txt 2>&1
   lane 1 timeout 240 python tuning/allpairs.py --shape 2000x5419 --dtype float32 --p 2 --tune 12 --out $OUT/t >> $OUT/log1.txt 2>&1) &
  wait; cat $OUT/log0.txt | cut -c1-250 | tail -40; cat $OUT/log1.txt | cut -c1-250 | tail -30
  tar czf $OUT/partial.tgz -C $OUT t log0.txt log1.txt $(cd $OUT && ls probe_*.json tune_profile_*.txt 2>/dev/null)
  rm -rf $OUT/t $OUT/log*.txt $OUT/probe_* $OUT/tune_* ;;
limit)  # tune with budget 10 under a time limit of 55 s (TuneOptions.time_limit_s), two kernels a GPU
  one() { k=$1; args=$(python3 -c "import json;e=json.load(open('kernels/catalog.json'))['polybench/$k.c'];print(' '.join(f'-p {a}={b}' for a,b in e['gpu'].items()))")
    timeout 150 python tuning/tune_profile.py kernels/polybench/$k.c $args --budget 10 --time-limit 55 --top 20 -o $OUT/tune_profile_limit_$k.txt > /dev/null 2>&1; head -2 $OUT/tune_profile_limit_$k.txt | cut -c1-400; }
  (export CUDA_VISIBLE_DEVICES=0; one mm3; one floyd_warshall) > $OUT/log0.txt 2>&1 &
  (export CUDA_VISIBLE_DEVICES=1; one syr2k; one trmm) > $OUT/log1.txt 2>&1 &
  wait; cat $OUT/log0.txt $OUT/log1.txt; rm $OUT/log*.txt ;;
esac
