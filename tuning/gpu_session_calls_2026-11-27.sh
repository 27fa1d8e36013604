# GPU calls of 2026-11-27 (tuning/results/NVIDIA-H100-80GB-HBM3/tune_time.md, stencil probes)
bash .whl/install.sh >/dev/null 2>&1; export PYTHONPATH=/tmp/site:$PWD
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
    timeout 250 python tuning/tune_profile.py kernels/polybench/$k.c $args --budget 10 --top 30 -o $OUT/tune_profile_$k.txt > $OUT/tune_$k.log 2>&1; head -3 $OUT/tune_profile_$k.txt | cut -c1-400; tail -2 $OUT/tune_$k.log
  done ;;
esac
