# Where the batched Cholesky + solve's default plan spends its time (issue 21; n = 64,
# 1.5 GB), under Nsight Compute: issue and stall statistics of the one device-steps
# kernel, and warp-state samples per SASS instruction (the source page), the 40 most
# sampled instructions and the samples summed over the SASS in address order (to cut the
# kernel into its copy-in, factor steps, substitutions and copy-out by hand).
# Usage (GPU machine, wheels installed): bash tuning/ncu_batched_cholesky.sh OUTDIR [DTYPE]
set -u
O=${1:?OUTDIR}; DT=${2:-float32}
mkdir -p "$O"
cat > "$O/run_polygpu.py" <<'PY'
import sys
sys.path.insert(0, "tuning")
import batched  # noqa: E402
from allpairs import time_program  # noqa: E402
from polygpu.pipeline import compile_variant, prepare  # noqa: E402
from polygpu.runtime.device import get_device  # noqa: E402
from polygpu.search import plan_model  # noqa: E402
double = sys.argv[2] == "float64"
sizes = {"nb": 23076 if double else 46153, "n": 64}
defines = ("DATA_TYPE=double", "SQRT_FUN=sqrt") if double else ()
p = prepare("kernels/batched_cholesky.c", defines=defines, params=sizes)
v = plan_model.choose(p, sizes).variant
print(v.to_json(), file=sys.stderr)
compiled = compile_variant(p, v, sizes)
open(sys.argv[1], "w").write(compiled.program.source)
time_program(get_device("gpu"), compiled.program, sizes, 1)
PY
ncu --section SpeedOfLight --section SchedulerStats --section WarpStateStats \
    --section Occupancy --section LaunchStats --section SourceCounters \
    --import-source no -k regex:batched_cholesky -c 1 -o "$O/chol" -f \
    python "$O/run_polygpu.py" "$O/polygpu.cu" "$DT" >"$O/ncu_run.txt" 2>&1
ncu -i "$O/chol.ncu-rep" >"$O/ncu_details.txt" 2>&1
ncu -i "$O/chol.ncu-rep" --page source --csv --print-source sass >"$O/source.csv" 2>&1
grep -E "^\s+(Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|Issued Warp Per|No Eligible|Warp Cycles Per Issued|Block Limit|Eligible Warps|Active Warps|Executed Ipc)" "$O/ncu_details.txt" | sed 's/  */ /g'
python - "$O/source.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head = next(i for i, r in enumerate(rows) if any("Source" == c for c in r))
cols = rows[head]
def col(name):
    return next((i for i, c in enumerate(cols) if c.startswith(name)), None)
src, addr = col("Source"), col("Address")
samp = col("Warp Stall Sampling (All")
inst = col("Instructions Executed")
body = [r for r in rows[head + 1:] if len(r) == len(cols)]
def num(x):
    try: return float(x.replace(",", ""))
    except ValueError: return 0.0
total = sum(num(r[samp]) for r in body)
print("columns:", [cols[i] for i in (addr, src, samp, inst) if i is not None])
print(f"instructions {len(body)}, samples {total:.0f}, executed {sum(num(r[inst]) for r in body):.0f}")
print("-- top 40 by samples")
for r in sorted(body, key=lambda r: -num(r[samp]))[:40]:
    print(f"{r[addr]:>8} {num(r[samp]) / total:6.2%} {num(r[inst]):>12.0f}  {r[src][:70]}")
print("-- cumulative by 64 instructions")
acc = 0
for k in range(0, len(body), 64):
    part = sum(num(r[samp]) for r in body[k:k + 64]); acc += part
    print(f"{body[k][addr]:>8} {part / total:6.2%} {acc / total:6.2%}  {body[k][src][:50]}")
PY
