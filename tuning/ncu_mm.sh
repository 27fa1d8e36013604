# What limits polygpu's FP32 mm against cuBLAS SGEMM (n = 4096), under Nsight Compute:
# issue rates, stall reasons, occupancy, shared-memory wavefronts of both kernels, the
# clocks they ran at, and the SASS instruction mix of polygpu's kernel.
# Usage (GPU machine): bash tuning/ncu_mm.sh OUTDIR ['VARIANT_JSON']
set -u
O=${1:?OUTDIR}
V=${2:-'{"tile":[128,128],"threads":[16,16],"jam":true,"time_tile":8,"unroll":8,"chunk":4,"prefetch":true,"specialize":true}'}
mkdir -p "$O"
T=$(mktemp -d)
python -m polygpu compile kernels/mm.c -p n=4096 --variant "$V" -o "$T" >/dev/null
nvcc -arch=sm_90 -O3 -cubin -Xptxas -v "$T/mm.cu" -o "$T/mm.cubin" 2>"$O/ptxas.txt"
cuobjdump -sass "$T/mm.cubin" >"$O/mm.sass"
# instruction mix of the whole kernel (opcode without modifiers)
grep -oE '^\s+/\*[0-9a-f]{4}\*/\s+(@!?U?P[0-9T] )?[A-Z][A-Z0-9]*' "$O/mm.sass" \
  | awk '{print $NF}' | sort | uniq -c | sort -rn >"$O/sass_mix.txt"
S="--section SpeedOfLight --section ComputeWorkloadAnalysis --section SchedulerStats --section WarpStateStats --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis_Tables"
M="--metrics sm__cycles_elapsed.avg.per_second,smsp__inst_executed_pipe_fma.sum,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"
ncu $S $M -k regex:mm_kernel -c 1 python tuning/traffic_ncu.py --run kernels/mm.c 4096 "$V" >"$O/ncu_polygpu.txt" 2>&1
ncu $S $M -k regex:gemm -c 1 python -c "
import torch
torch.backends.cuda.matmul.allow_tf32 = False
a = torch.rand(4096, 4096, device='cuda'); b = torch.rand(4096, 4096, device='cuda')
for _ in range(3): c = a @ b
torch.cuda.synchronize()" >"$O/ncu_cublas.txt" 2>&1
for f in ncu_polygpu ncu_cublas; do
  echo "== $f"
  grep -E "^\s+(Duration|SM Frequency|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|Issued Warp Per|No Eligible|Warp Cycles Per Issued|Block Limit|Shared Memory Configuration|Dynamic Shared|Static Shared|Threads|Grid Size|Block Size|smsp__inst_executed_pipe_fma|smsp__inst_executed.sum|smsp__issue_active|l1tex__data|sm__cycles_elapsed|Compute \(SM\) Throughput|Memory Throughput|Eligible Warps|Active Warps)" "$O/$f.txt" | sed 's/  */ /g'
  grep -E "^\s+(Stall|stall)" "$O/$f.txt" | head -5
done
head -3 "$O/ptxas.txt" | cut -c1-200; head -25 "$O/sass_mix.txt"
