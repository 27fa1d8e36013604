# GPU calls of 2026-11-29 (thirteenth session, one H200): per-element Cholesky with the
# element resident in shared memory for the block's life (Variant.resident,
# memory/residence.py), every plan the default ranks checked and timed, torch in the same run
bash .whl/install.sh >/dev/null 2>&1; export PYTHONPATH=/tmp/site:$PWD; export OUT
case "$1" in
cholesky)  # fp32 and fp64 (the paper's), n = 8..64, 768 MB of arrays
  mkdir -p $OUT/f32 $OUT/f64
  timeout 290 python tuning/batched.py --op cholesky --n 8 16 32 64 --mappings --out $OUT/f32 > $OUT/log32.txt 2>&1
  timeout 290 python tuning/batched.py --op cholesky --n 8 16 32 64 --mappings --dtype float64 --out $OUT/f64 > $OUT/log64.txt 2>&1
  grep -h "^| cholesky\|pick" $OUT/f32/batched.md $OUT/f64/batched.md; tail -3 $OUT/log32.txt $OUT/log64.txt | cut -c1-300 ;;
esac
