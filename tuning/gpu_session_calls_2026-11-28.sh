# GPU calls of 2026-11-28 (tenth session): register buffers without dead copies
# (polygpu/memory/liveness.py) against the tree before them (4994d90, unpacked from
# .whl/base_4994d90.tgz), same GPU, same run
BASE=4994d90; PROBE_LIMIT=240; . tuning/gpu_base_probe.sh
case "$1" in
liveness)  # GPU 0: l2dist shapes new vs base; GPU 1: the fp32 rows tuned (budget 12) at this tree
  base; mkdir -p $OUT/t; sz="-p n1=2000 -p n2=2000 -p d=5419"; V=tuning/probe_variants_l2dist_registers.json
  (export CUDA_VISIBLE_DEVICES=0; probe kernels/allpairs/l2dist.c l2dist_2000 $V $sz > $OUT/log0.txt 2>&1) &
  (lane 1 timeout 560 python tuning/allpairs.py --shape 2000x5419 --dtype float32 --tune 12 --out $OUT/t > $OUT/log1.txt 2>&1) &
  wait; tail -30 $OUT/log0.txt; tail -6 $OUT/log1.txt; grep "^| [0-9]" $OUT/t/*.md
  tar czf $OUT/liveness.tgz -C $OUT t log0.txt log1.txt $(cd $OUT && ls probe_*.json 2>/dev/null)
  rm -rf $OUT/t $OUT/log*.txt ;;
slices)  # GPU 0: the fp32 rows tuned (budget 12) with full slices; GPU 1: PolyBench defaults of the kernels
         # the two changes touch (register accumulators, time tiles), this tree then the base tree
  base; mkdir -p $OUT/t $OUT/pb_new $OUT/pb_base
  ks="--kernel gemm --kernel mm2 --kernel mm3 --kernel syrk --kernel covariance --kernel gesummv"
  (lane 0 timeout 540 python tuning/allpairs.py --shape 2000x5419 --dtype float32 --tune 12 --out $OUT/t > $OUT/log0.txt 2>&1) &
  (lane 1 timeout 260 python tuning/polybench.py $ks --out $OUT/pb_new > $OUT/log1.txt 2>&1
   cd /tmp/base && PYTHONPATH=/tmp/site:/tmp/base CUDA_VISIBLE_DEVICES=1 timeout 260 python tuning/polybench.py $ks --out $OUT/pb_base >> $OUT/log1.txt 2>&1) &
  wait; tail -5 $OUT/log0.txt; grep "^| [0-9]" $OUT/t/*.md; tail -3 $OUT/log1.txt
  for d in pb_new pb_base; do echo $d; grep "^| [a-z]" $OUT/$d/polybench.md | cut -d'|' -f2,4; done
  tar czf $OUT/slices.tgz -C $OUT t pb_new pb_base log0.txt log1.txt
  rm -rf $OUT/t $OUT/pb_new $OUT/pb_base $OUT/log*.txt ;;
p2)  # p = 2 tuned once more on each GPU: two more samples of ours against torch's matmul cdist
  mkdir -p $OUT/g0 $OUT/g1
  (lane 0 timeout 300 python tuning/allpairs.py --shape 2000x5419 --dtype float32 --p 2 --tune 12 --out $OUT/g0 > $OUT/log0.txt 2>&1) &
  (lane 1 timeout 300 python tuning/allpairs.py --shape 2000x5419 --dtype float32 --p 2 --tune 12 --out $OUT/g1 > $OUT/log1.txt 2>&1) &
  wait; grep "^| [0-9]" $OUT/g0/*.md $OUT/g1/*.md
  tar czf $OUT/p2.tgz -C $OUT g0 g1 log0.txt log1.txt; rm -rf $OUT/g0 $OUT/g1 $OUT/log*.txt ;;
barriers)  # eleventh session: l2dist's barriers -- double buffers, longer slices, 256-thread blocks (two a
           # multiprocessor) -- probed on both GPUs, and torch's cdist in the same call
  sz="-p n1=2000 -p n2=2000 -p d=5419"
  (lane 0 timeout 470 python tuning/variant_probe.py kernels/allpairs/l2dist.c $sz --variants tuning/probe_variants_l2dist_barriers_a.json --repeats 20 -o $OUT/probe_l2dist_barriers_a.json > $OUT/log0.txt 2>&1
   lane 0 python -c "import sys; sys.path.insert(0, 'tuning'); import allpairs; print('torch', allpairs.time_torch(2000, 2000, 5419, 2, 'float32'))" >> $OUT/log0.txt 2>&1) &
  (lane 1 timeout 470 python tuning/variant_probe.py kernels/allpairs/l2dist.c $sz --variants tuning/probe_variants_l2dist_barriers_b.json --repeats 20 -o $OUT/probe_l2dist_barriers_b.json > $OUT/log1.txt 2>&1
   lane 1 python -c "import sys; sys.path.insert(0, 'tuning'); import allpairs; print('torch', allpairs.time_torch(2000, 2000, 5419, 2, 'float32'))" >> $OUT/log1.txt 2>&1) &
  wait; grep -v "^ " $OUT/log0.txt | cut -c1-400; grep -v "^ " $OUT/log1.txt | cut -c1-400 ;;
dbtune)  # eleventh session: barriers in the model, double buffers in the space. GPU 0: the fp32 rows tuned
         # (budget 12); GPU 1: mm at 2048 tuned (budget 12) with this tree, then the tree before (20b60bb)
  BASE=20b60bb; base; mkdir -p $OUT/t $OUT/mm_new $OUT/mm_base
  (lane 0 timeout 560 python tuning/allpairs.py --shape 2000x5419 --dtype float32 --p 2 --p 1 --p 3 --tune 12 --out $OUT/t > $OUT/log0.txt 2>&1) &
  (lane 1 timeout 270 python -m polygpu tune kernels/mm.c -p n=2048 --budget 12 --no-db -o $OUT/mm_new --report $OUT/mm_new > $OUT/log1.txt 2>&1
   cd /tmp/base && PYTHONPATH=/tmp/site:/tmp/base CUDA_VISIBLE_DEVICES=1 timeout 270 python -m polygpu tune kernels/mm.c -p n=2048 --budget 12 --no-db -o $OUT/mm_base --report $OUT/mm_base >> $OUT/log1.txt 2>&1) &
  wait; tail -4 $OUT/log0.txt; grep "^| [0-9]" $OUT/t/*.md; grep -v "^ *[0-9]*/" $OUT/log1.txt | tail -40 | cut -c1-200
  tar czf $OUT/dbtune.tgz -C $OUT t mm_new mm_base log0.txt log1.txt; rm -rf $OUT/t $OUT/mm_new $OUT/mm_base $OUT/log*.txt ;;
dbtune2)  # eleventh session: GPU 0: l2dist's 128 x 128 tile with threads 16 x 32 and 32 x 16, one and two buffers,
          # in one run, then p = 2 tuned again; GPU 1: mm at 2048 tuned (budget 12), this tree, then 20b60bb
  BASE=20b60bb; base; mkdir -p $OUT/t $OUT/mm_new $OUT/mm_base; sz="-p n1=2000 -p n2=2000 -p d=5419"
  (lane 0 timeout 200 python tuning/variant_probe.py kernels/allpairs/l2dist.c $sz --variants tuning/probe_variants_l2dist_threads_db.json --repeats 20 -o $OUT/probe_l2dist_threads_db.json > $OUT/log0.txt 2>&1
   lane 0 timeout 330 python tuning/allpairs.py --shape 2000x5419 --dtype float32 --p 2 --tune 12 --out $OUT/t >> $OUT/log0.txt 2>&1) &
  (lane 1 timeout 280 python -m polygpu tune kernels/mm.c -p n=2048 --budget 12 --no-db -o $OUT/mm_new --report $OUT/mm_new > $OUT/log1.txt 2>&1
   cd /tmp/base && PYTHONPATH=/tmp/site:/tmp/base CUDA_VISIBLE_DEVICES=1 timeout 280 python -m polygpu tune kernels/mm.c -p n=2048 --budget 12 --no-db -o $OUT/mm_base --report $OUT/mm_base >> $OUT/log1.txt 2>&1) &
  wait; grep -v "^ " $OUT/log0.txt | grep "ms\|torch" | cut -c1-300; grep "^| [0-9]" $OUT/t/*.md; grep -v "^ *[0-9]*/" $OUT/log1.txt | tail -40 | cut -c1-200
  tar czf $OUT/dbtune2.tgz -C $OUT t mm_new mm_base log0.txt log1.txt; rm -rf $OUT/t $OUT/mm_new $OUT/mm_base $OUT/log*.txt ;;
dbtune3)  # eleventh session, after the tie-break and the tune table's fix: mm at 2048 tuned (budget 12) with this
          # tree on GPU 0 and with 20b60bb on GPU 1 at once; then p = 2 tuned again on GPU 0
  BASE=20b60bb; base; mkdir -p $OUT/t $OUT/mm_new $OUT/mm_base
  (lane 0 timeout 280 python -m polygpu tune kernels/mm.c -p n=2048 --budget 12 --no-db -o $OUT/mm_new --report $OUT/mm_new > $OUT/log0.txt 2>&1
   lane 0 timeout 280 python tuning/allpairs.py --shape 2000x5419 --dtype float32 --p 2 --tune 12 --out $OUT/t >> $OUT/log0.txt 2>&1) &
  (cd /tmp/base && PYTHONPATH=/tmp/site:/tmp/base CUDA_VISIBLE_DEVICES=1 timeout 280 python -m polygpu tune kernels/mm.c -p n=2048 --budget 12 --no-db -o $OUT/mm_base --report $OUT/mm_base > $OUT/log1.txt 2>&1) &
  wait; grep "^| [0-9]" $OUT/t/*.md; for f in log0 log1; do grep -A24 "^mm at n" $OUT/$f.txt | grep -v "specialize=True  *│  *│\|^ *│  *│" | cut -c1-170; done
  tar czf $OUT/dbtune3.tgz -C $OUT t mm_new mm_base log0.txt log1.txt; rm -rf $OUT/t $OUT/mm_new $OUT/mm_base $OUT/log*.txt ;;
esac
