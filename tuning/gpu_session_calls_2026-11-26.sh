# The GPU calls of the 2026-11-26 session (issue 18): GPU checks of floyd-warshall's split
# plan and of the kernels whose CUDA changed, the plans of floyd-warshall timed, and the
# tuned column (polygpu tune at EXTRALARGE) of atax, bicg, symm, lu, cholesky, trisolv.
# Run on the GPU machine from the checkout with OUT set and the wheels installed.
set -u
export PYTHONPATH=/tmp/site:$PWD
R=tuning/results/NVIDIA-H100-80GB-HBM3
mkdir -p $OUT/r && cp $R/plans_polybench.json $OUT/r/
for spec in "kernels/polybench/floyd_warshall.c -p n=37" "kernels/polybench/floyd_warshall.c -p n=64" \
            "kernels/floyd_warshall.c -p n=37" "kernels/polybench/floyd_warshall.c -p n=37 --variant {\"device_steps\":true}"; do
  timeout 120 python -m polygpu check $spec --backend gpu 2>&1 | grep -v "warning\|tz\|\^\|^$" | tail -2
done | tee $OUT/r/gpu_checks_2026-11-26.txt
timeout 240 python tuning/plans_polybench.py --repeats 5 --keep --kernel floyd_warshall \
    --out $OUT/r 2>&1 | grep -E "^  |^\| floyd" | head -20
for k in ${KERNELS:-atax bicg trisolv symm lu cholesky}; do
  timeout ${TUNE_LIMIT:-150} python tuning/plans_polybench.py --repeats 5 --keep --tune-only \
      --tune ${BUDGET:-8} --strategy ${STRATEGY:-model} --kernel $k --out $OUT/r 2>&1 \
      | grep -E "^  |tuned" | head -6
done
