# What limits the batched double product on the tensor cores (Variant.mma, n = 128,
# nb = 3906: 1.5 GB) against torch.bmm (cuBLAS's batched DGEMM), under Nsight Compute:
# issue, stall reasons, occupancy, pipe utilization, shared-memory wavefronts and bank
# conflicts of both kernels, and the SASS instruction mix of polygpu's.
# Usage (GPU machine, wheels installed): bash tuning/ncu_batched_mma.sh OUTDIR
set -u
O=${1:?OUTDIR}
mkdir -p "$O"
S="--section SpeedOfLight --section ComputeWorkloadAnalysis --section SchedulerStats --section WarpStateStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis_Tables"
M="--metrics smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"
cat > "$O/run_polygpu.py" <<'PY'
import sys
sys.path.insert(0, "tuning")
import batched  # noqa: E402
from allpairs import time_program  # noqa: E402
from polygpu.pipeline import compile_variant, prepare  # noqa: E402
from polygpu.runtime.device import get_device  # noqa: E402
from polygpu.search import plan_model  # noqa: E402
sizes = {"nb": 3906, "n": 128}
p = prepare("kernels/batched_mm.c", defines=batched.DOUBLE, params=sizes)
v = plan_model.choose(p, sizes).variant
print(v.to_json(), file=sys.stderr)
compiled = compile_variant(p, v, sizes)
open(sys.argv[1], "w").write(compiled.program.source)
time_program(get_device("gpu"), compiled.program, sizes, 1)
PY
ncu $S $M -k regex:batched_mm -c 1 python "$O/run_polygpu.py" "$O/polygpu.cu" >"$O/ncu_polygpu.txt" 2>&1
nvcc -arch=sm_90 -O3 -cubin -Xptxas -v "$O/polygpu.cu" -o "$O/polygpu.cubin" 2>"$O/ptxas.txt"
cuobjdump -sass "$O/polygpu.cubin" >"$O/polygpu.sass"
grep -oE '^\s+/\*[0-9a-f]{4}\*/\s+(@!?U?P[0-9T] )?[A-Z][A-Z0-9]*' "$O/polygpu.sass" \
  | awk '{print $NF}' | sort | uniq -c | sort -rn >"$O/sass_mix.txt"
ncu $S $M -k regex:gemm -c 1 python -c "
import torch
a = torch.rand(3906, 128, 128, device='cuda', dtype=torch.float64)
b = torch.rand(3906, 128, 128, device='cuda', dtype=torch.float64)
for _ in range(3): c = torch.bmm(a, b)
torch.cuda.synchronize()" >"$O/ncu_torch.txt" 2>&1
for f in ncu_polygpu ncu_torch; do
  echo "== $f"
  grep -E "^\s+(Duration|SM Frequency|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|Issued Warp Per|No Eligible|Warp Cycles Per Issued|Block Limit|Dynamic Shared|Grid Size|Block Size|smsp__inst_executed.sum|smsp__issue_active|l1tex__data|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|Eligible Warps|Active Warps|L1/TEX Hit|L2 Hit)" "$O/$f.txt" | sed 's/  */ /g'
  grep -iE "stall|pipe" "$O/$f.txt" | head -8 | cut -c1-220
done
head -3 "$O/ptxas.txt" | cut -c1-200; head -20 "$O/sass_mix.txt"
