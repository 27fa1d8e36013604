# GPU calls of 2026-11-27 (seventh session): whole tiles without guards (codegen/full_tiles.py)
# against the code before it (de7cae7, unpacked from .whl/base_de7cae7.tgz), same GPU, same run
BASE=de7cae7; PROBE_LIMIT=250; . tuning/gpu_base_probe.sh
case "$1" in
probes)  # three probes on three GPUs, all-pairs tuned on the fourth
  base
  (export CUDA_VISIBLE_DEVICES=0; probe kernels/mm.c mm_2000 tuning/probe_variants_full_tiles_mm.json -p n=2000 > $OUT/log0.txt 2>&1) &
  (export CUDA_VISIBLE_DEVICES=1; probe kernels/polybench/gemm.c gemm_xl tuning/probe_variants_full_tiles_gemm.json -p ni=2000 -p nj=2300 -p nk=2600 > $OUT/log1.txt 2>&1) &
  (export CUDA_VISIBLE_DEVICES=2; probe kernels/allpairs/l1dist.c l1dist_2000 tuning/probe_variants_allpairs.json -p n1=2000 -p n2=2000 -p d=5419 > $OUT/log2.txt 2>&1) &
  (export CUDA_VISIBLE_DEVICES=3; mkdir -p $OUT/a; timeout 540 python tuning/allpairs.py --shape 2000x5419 --dtype float32 --tune 8 --out $OUT/a > $OUT/log3.txt 2>&1) &
  wait; for i in 0 1 2 3; do echo "== lane $i"; cat $OUT/log$i.txt | tail -40; done; cat $OUT/a/allpairs.md 2>/dev/null | grep "^| [0-9]"
  tar czf $OUT/probes.tgz -C $OUT a log0.txt log1.txt log2.txt log3.txt; rm -rf $OUT/a $OUT/log*.txt ;;
probes2)  # syr2k and trmm (tuned slower on the H200 after adae48d) and mm at 2000, base vs new
  base
  (export CUDA_VISIBLE_DEVICES=0; probe kernels/polybench/syr2k.c syr2k_xl tuning/probe_variants_full_tiles_syr2k.json -p n=2600 -p m=2000 > $OUT/log0.txt 2>&1) &
  (export CUDA_VISIBLE_DEVICES=1; probe kernels/polybench/trmm.c trmm_xl tuning/probe_variants_full_tiles_trmm.json -p m=2000 -p n=2600 > $OUT/log1.txt 2>&1) &
  (export CUDA_VISIBLE_DEVICES=2; probe kernels/mm.c mm_2000 tuning/probe_variants_full_tiles_mm.json -p n=2000 > $OUT/log2.txt 2>&1) &
  wait; for i in 0 1 2; do echo "== lane $i"; grep -iE "error|fail" $OUT/log$i.txt | head -5; done ;;
shards)  # tuning/polybench.py over 4 GPUs, merged: the earlier session script's mode
  shift; bash tuning/gpu_session_calls_2026-11-27.sh shards "$@" ;;
esac
