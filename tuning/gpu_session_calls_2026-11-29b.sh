# GPU calls of 2026-11-29 (thirteenth session, one H200): per-element Cholesky with the
# element resident in shared memory for the block's life (Variant.resident,
# memory/residence.py), every plan the default ranks checked and timed, torch in the same run
bash .whl/install.sh >/dev/null 2>&1; export PYTHONPATH=/tmp/site:$PWD; export OUT
case "$1" in
cholesky)  # $2: float32 or float64 (the paper's), n = 8..64, 768 MB of arrays
  mkdir -p $OUT/$2
  timeout 580 python tuning/batched.py --op cholesky --n 8 16 32 64 --mappings --dtype $2 --out $OUT/$2 > $OUT/log_$2.txt 2>&1
  grep -h "^| cholesky\|pick" $OUT/$2/batched.md; tail -3 $OUT/log_$2.txt | cut -c1-300 ;;
soa)  # not run yet (the session's device time was spent): the interleaved layout, $2 a dtype
  mkdir -p $OUT/soa_$2
  timeout 580 python tuning/batched.py --op cholesky_soa --n 8 16 32 64 --mappings --dtype $2 --out $OUT/soa_$2 > $OUT/log_soa_$2.txt 2>&1
  grep -h "^| cholesky\|pick" $OUT/soa_$2/batched.md; tail -3 $OUT/log_soa_$2.txt | cut -c1-300 ;;
esac
