# The GPU calls of the 2026-11-25 session (issue 18): the model's default plans of symm and
# trisolv timed again, the cost of per-launch events, and per-kernel against model tuning
# of atax at EXTRALARGE.  Run on the GPU machine from an extracted `git archive` with OUT set.
set -u
export PYTHONPATH=/tmp/site:$PWD
R=tuning/results/NVIDIA-H100-80GB-HBM3
mkdir -p $OUT/r && cp $R/plans_polybench.json $OUT/r/
timeout 200 python tuning/plans_polybench.py --repeats 5 --keep --kernel symm --kernel trisolv \
    --out $OUT/r 2>&1 | grep -E "^  |^\| (symm|trisolv)" | head -30
python - <<'PY' 2>&1 | grep -v "warning\|tz\|\^\|^$" | tee $OUT/r/launch_events.txt
import statistics as s
from polygpu.pipeline import compile_region
from polygpu.runtime.device import get_device
from tests.test_device import random_inputs
d = get_device("gpu")
for spec, p in [("kernels/polybench/atax.c", {"m": 4096, "n": 4096}),
                ("kernels/polybench/lu.c", {"n": 2000})]:
    prog = compile_region(spec, None, None, (), (), p).program
    _, v = random_inputs(spec, None, p)
    a = d.time(prog, [v], 20, 3)
    b = d.time_launches(prog, [v], 20, 3)
    print(f"{spec} {p}: time() median {s.median(a):.4f} ms; time_launches() total median "
          f"{s.median(b.times_ms):.4f} ms, sum of per-launch medians {sum(b.medians()):.4f} ms")
PY
for strategy in model per-kernel; do
  start=$(date +%s)
  timeout 150 python -m polygpu tune kernels/polybench/atax.c -p m=1900 -p n=2100 --strategy $strategy \
      --budget 12 --db $OUT/r/tune_atax.sqlite -o $OUT/r/atax_$strategy > $OUT/r/tune_atax_$strategy.txt 2>&1
  echo "atax $strategy rc=$? $(( $(date +%s) - start )) s"; grep -iE "best|ms" $OUT/r/tune_atax_$strategy.txt | grep -v warning | tail -4
done
