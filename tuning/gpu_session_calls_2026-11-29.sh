# GPU calls of 2026-11-29 (twelfth session, one H200): the walk costs a tile's thread layouts
# together (explore.layout_family), against the tree before (3e6f9dc, unpacked from
# .whl/base_3e6f9dc.tgz), same GPU, same run
BASE=3e6f9dc; PROBE_LIMIT=240; . tuning/gpu_base_probe.sh; export OUT
case "$1" in
mm)  # mm at 2048 tuned (budget 12) with this tree, then with the base tree
  base; mkdir -p $OUT/mm_new $OUT/mm_base
  timeout 285 python -m polygpu tune kernels/mm.c -p n=2048 --budget 12 --no-db -o $OUT/mm_new --report $OUT/mm_new > $OUT/log0.txt 2>&1
  (cd /tmp/base && PYTHONPATH=/tmp/site:/tmp/base timeout 285 python -m polygpu tune kernels/mm.c -p n=2048 --budget 12 --no-db -o $OUT/mm_base --report $OUT/mm_base > $OUT/log1.txt 2>&1)
  for f in log0 log1; do grep -A24 "^mm at n" $OUT/$f.txt | grep -v "specialize=True  *│  *│\|^ *│  *│" | cut -c1-170; done
  tar czf $OUT/layouts_mm.tgz -C $OUT mm_new mm_base log0.txt log1.txt; rm -rf $OUT/mm_new $OUT/mm_base $OUT/log*.txt ;;
allpairs)  # the fp32 rows at the paper's shape tuned (budget 12), p = 2 first, torch's cdist in the same run
  mkdir -p $OUT/t
  timeout 585 python tuning/allpairs.py --shape 2000x5419 --dtype float32 --p 2 --p 1 --p 3 --tune 12 --out $OUT/t > $OUT/log0.txt 2>&1
  tail -4 $OUT/log0.txt; grep "^| [0-9]" $OUT/t/*.md
  tar czf $OUT/layouts_allpairs.tgz -C $OUT t log0.txt; rm -rf $OUT/t $OUT/log*.txt ;;
round2)  # after the first round: layouts costed together but a tile's second layout timed
         # behind the other tiles (explore.LAYOUT_TIMED) -- mm as in `mm`, then p = 2 alone
  bash $0 mm; mv $OUT/layouts_mm.tgz $OUT/layouts2_mm.tgz
  mkdir -p $OUT/t
  timeout 300 python tuning/allpairs.py --shape 2000x5419 --dtype float32 --p 2 --tune 12 --out $OUT/t > $OUT/log0.txt 2>&1
  tail -4 $OUT/log0.txt; grep "^| [0-9]" $OUT/t/*.md
  tar czf $OUT/layouts2_allpairs.tgz -C $OUT t log0.txt; rm -rf $OUT/t $OUT/log*.txt ;;
exhaustive)  # the model strategy (budget 8) against the exhaustive reduced space, p = 1 and p = 2
  mkdir -p $OUT/e
  for p in 1 2; do timeout 280 python tuning/allpairs.py --exhaustive --sweep-p $p --tune 8 --out $OUT/e >> $OUT/log0.txt 2>&1; done
  grep "model vs exhaustive" $OUT/log0.txt; tar czf $OUT/exhaustive.tgz -C $OUT e log0.txt; rm -rf $OUT/e $OUT/log0.txt ;;
esac
