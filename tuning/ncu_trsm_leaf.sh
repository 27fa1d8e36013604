# What limits a recursive trsm's leaf on lanes (right-looking, tuning/triangular.py
# --leaves), under Nsight Compute: stall reasons, issue, shared-memory wavefronts and bank
# conflicts of one leaf kernel (the second launch: the first leaf), and its SASS.
# Usage (GPU machine, wheels installed): bash tuning/ncu_trsm_leaf.sh PICKLE PLAN OUTDIR
#   PICKLE: a triangular.py --build-only file, PLAN: its plan's index in it
set -u
P=${1:?PICKLE}; K=${2:?PLAN}; O=${3:?OUTDIR}
mkdir -p "$O"
S="--section SpeedOfLight --section SchedulerStats --section WarpStateStats --section Occupancy --section LaunchStats --section SourceCounters"
M="--metrics smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"
cat > "$O/run_leaf.py" <<'PY'
import pickle, sys
sys.path.insert(0, "tuning")
from triangular import _inputs, _values  # noqa: E402
from polygpu.runtime.device import get_device  # noqa: E402
built, _ = pickle.load(open(sys.argv[1], "rb"))
job = built[int(sys.argv[2])]
print(job["m"], job["n"], job["stop"], job["leaf"], file=sys.stderr)
open(sys.argv[3], "w").write(job["program"].source)
device = get_device("gpu")
device.use_module(job["program"], device.load_binary(job["binaries"]["program"]))
device.run(job["program"], _values(job["program"], _inputs(job["m"], job["n"], job["dtype"])))
PY
ncu $S $M -k regex:trsm_kernel1$ -c 1 python "$O/run_leaf.py" "$P" "$K" "$O/leaf.cu" >"$O/ncu_leaf.txt" 2>&1
nvcc -arch=sm_90 -O3 -std=c++17 -cubin "$O/leaf.cu" -o "$O/leaf.cubin" 2>"$O/nvcc.txt"
# the leaf kernel's SASS (C++ names are mangled: the functions whose name holds it)
cuobjdump -sass "$O/leaf.cubin" | awk '/Function : /{keep = /trsm_kernel1[^0-9]/} keep' \
  >"$O/leaf.sass"
grep -E "Warp Cycles Per Issued|Stall|Issued Ipc|Duration|bank_conflicts|wavefronts|smsp__inst" "$O/ncu_leaf.txt" | head -60
