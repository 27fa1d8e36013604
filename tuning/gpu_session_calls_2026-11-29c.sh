# GPU calls of 2026-11-29 (fourteenth session, one H200): batched dot, gemv and gemm at
# n = 16..128 -- the default against specialized staged / register-tiled / atomic variants
# (tuning/probes/batched_blas_2026-11-29.json); per-element Cholesky with isl's steps
# inside an element (the batch_isl prototype) and fp64 n = 64 after the shared-memory fix
bash .whl/install.sh >/dev/null 2>&1; export PYTHONPATH=/tmp/site:$PWD; export OUT
case "$1" in
blas)  # $2..: ops
  shift; mkdir -p $OUT/blas
  timeout 570 python tuning/batched.py $(for op in "$@"; do echo --op $op; done) --n 16 32 64 128 \
    --also tuning/probes/batched_blas_2026-11-29.json --out $OUT/blas > $OUT/log_blas.txt 2>&1
  grep -h "^| \(dot\|gemv\|gemm\)" $OUT/blas/batched.md; tail -3 $OUT/log_blas.txt | cut -c1-300 ;;
cholesky_isl)  # the prototype host schedule (branch batch-isl-prototype), fp32, n = 32, 64;
  # needs `git show batch-isl-prototype:polygpu/schedule/host.py > tuning/probes/
  # host_batch_isl_prototype.py` first.  Run 2026-11-29: the prototype's candidate was
  # not among the plans ranked (CANDIDATES = 3), so this measured main's plans again
  cp tuning/probes/host_batch_isl_prototype.py polygpu/schedule/host.py
  mkdir -p $OUT/chol_isl
  timeout 400 python tuning/batched.py --op cholesky --n 32 64 --mappings --out $OUT/chol_isl > $OUT/log_chol_isl.txt 2>&1
  grep -h "^| cholesky\|pick" $OUT/chol_isl/batched.md; tail -3 $OUT/log_chol_isl.txt | cut -c1-300
  git checkout polygpu/schedule/host.py ;;
fp64_64)  # main's tree: fp64 n = 64 (8 x 33 kB of shared memory refused before 577f5bd)
  mkdir -p $OUT/fp64_64
  timeout 170 python tuning/batched.py --op cholesky --dtype float64 --n 64 --mappings --out $OUT/fp64_64 > $OUT/log_fp64_64.txt 2>&1
  grep -h "^| cholesky\|pick" $OUT/fp64_64/batched.md; tail -3 $OUT/log_fp64_64.txt | cut -c1-300 ;;
esac
# the defaults after element_variants (space.py) at n = 2..128, against the plans before
# and a few others: ALSO=tuning/probes/batched_blas_final2_2026-11-29.json for the time
# tiles fitted to the element (the recorded batched_blas.json), the default file for the
# time tile of 32 before (batched_blas_time_tile_32.json)
case "$1" in
final)  # $2: ops
  shift; mkdir -p $OUT/final
  timeout 570 python tuning/batched.py $(for op in "$@"; do echo --op $op; done) --n 2 4 8 16 32 64 128 \
    --also ${ALSO:-tuning/probes/batched_blas_final_2026-11-29.json} --out $OUT/final > $OUT/log_final.txt 2>&1
  grep -h "^| \(dot\|gemv\|gemm\)" $OUT/final/batched.md; tail -3 $OUT/log_final.txt | cut -c1-300 ;;
esac
# tiny elements (n = 2, 4): the contiguous 16-byte copies of a block's elements
# (staging.contiguous_width), staged rows against the unstaged defaults
case "$1" in
tiny)
  mkdir -p $OUT/tiny
  timeout 200 python tuning/batched.py --op gemm --op gemv --op dot --n 2 4 --repeats 10 \
    --also tuning/probes/batched_blas_tiny_2026-11-29.json --out $OUT/tiny > $OUT/log_tiny.txt 2>&1
  grep -h "^| \(dot\|gemv\|gemm\)" $OUT/tiny/batched.md; grep '^{' $OUT/log_tiny.txt | cut -c1-400 ;;
esac
