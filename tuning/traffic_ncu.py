"""The traffic model (paper §4.6) against Nsight Compute's counters.

For each case (kernel, variant, n) the model's global loads -- per tile for arrays staged
in shared memory, per block otherwise (``polygpu/memory/traffic.py``) -- are compared
with what ``ncu`` counts for the same kernel:

* ``l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum``: 32-byte sectors the SM's global
  loads request (the model's quantity when every array is staged or read once);
* ``lts__t_sectors_srcunit_tex_op_read.sum``: sectors L2 serves to L1 (after L1 hits);
* ``dram__bytes_read.sum``: bytes read from HBM (after L2 hits).

The program is checked on the GPU first (poisoned outputs, reference run) and then run
once under ``ncu`` in a child process.

Usage (GPU machine with ncu): ``python tuning/traffic_ncu.py`` ->
``tuning/results/<gpu>/traffic_vs_ncu.{csv,md}``.
"""

from __future__ import annotations

import csv
import datetime
import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from polygpu.frontend import load  # noqa: E402
from polygpu.memory.traffic import kernel_traffic  # noqa: E402
from polygpu.pipeline import compile_region  # noqa: E402
from polygpu.runtime import gpu, inputs  # noqa: E402
from polygpu.runtime.check import check_program  # noqa: E402
from polygpu.schedule.variant import Variant  # noqa: E402

METRICS = ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
           "lts__t_sectors_srcunit_tex_op_read.sum", "dram__bytes_read.sum")
CASES = [
    ("kernels/mv.c", 4096, {"tile": [128], "threads": [128], "time_tile": 32}),
    ("kernels/mv.c", 4096, {"tile": [128], "threads": [128], "time_tile": 64}),
    ("kernels/mv.c", 4096, {"tile": [128], "threads": [128], "time_tile": 32,
                            "shared": False}),
    ("kernels/tmv.c", 4096, {"tile": [128], "threads": [128], "time_tile": 32}),
    ("kernels/tmv.c", 4096, {"tile": [512], "threads": [128], "time_tile": 32}),
    ("kernels/mm.c", 1024, {"tile": [16, 64], "threads": [4, 64], "time_tile": 16,
                            "jam": True}),
    ("kernels/mm.c", 1024, {"tile": [32, 32], "threads": [8, 32], "time_tile": 32,
                            "jam": True}),
]


def run_once(spec: str, n: int, variant: dict) -> None:
    # the sizes too: a variant may be specialized to them
    compiled = compile_region(spec, variant=Variant.from_json(variant), params={"n": n})
    source = load(spec)
    ints = inputs.integer_parameters(source, {"n": n})
    values = inputs.random_values(source, ints, inputs.array_shapes(source, ints),
                                  np.random.default_rng(0))
    gpu.run_program(compiled.program, values)


def model_loads(spec: str, n: int, variant: dict) -> tuple[int, str]:
    compiled = compile_region(spec, variant=Variant.from_json(variant))
    total, parts = 0, []
    for launch, k in zip(compiled.program.launches, compiled.kernels, strict=True):
        for t in kernel_traffic(compiled.analysis.scop, k, launch.kernel, {"n": n},
                                compiled.memory):
            total += t.loads * t.element_size
            where = next((b.space for b in compiled.memory.buffers
                          if b.array == t.array and b.kernel == k.index), "global")
            parts.append(f"{t.array}({where}):{t.loads * t.element_size}")
    check = check_program(compiled.program, compiled.source_scop, spec, {"n": n},
                          backend="gpu", seed=n)
    if not check.ok:
        raise SystemExit(f"{spec} {variant}: {check.message}")
    return total, " ".join(parts)


def measure(spec: str, n: int, variant: dict) -> dict[str, float]:
    cmd = [shutil.which("ncu") or "ncu", "--csv", "--metrics", ",".join(METRICS),
           sys.executable, __file__, "--run", spec, str(n), json.dumps(variant)]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith('"')]
    if not lines:
        raise SystemExit(f"ncu gave no CSV:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    totals = dict.fromkeys(METRICS, 0.0)
    for row in csv.DictReader(io.StringIO("\n".join(lines))):
        if row["Metric Name"] in totals:
            totals[row["Metric Name"]] += float(row["Metric Value"].replace(",", ""))
    return totals


def main() -> int:
    out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip().splitlines()[0]
    out_dir = ROOT / "tuning" / "results" / re.sub(r"[^A-Za-z0-9]+", "-", out).strip("-")
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for spec, n, variant in CASES:
        model, parts = model_loads(spec, n, variant)
        m = measure(spec, n, variant)
        l1 = m[METRICS[0]] * 32
        l2 = m[METRICS[1]] * 32
        rows.append({"kernel": spec, "n": n, "variant": json.dumps(variant),
                     "model_load_bytes": model, "model_by_array": parts,
                     "ncu_l1_global_load_bytes": int(l1), "ncu_l2_to_l1_bytes": int(l2),
                     "ncu_dram_read_bytes": int(m[METRICS[2]]),
                     "error_vs_l1": round((l1 - model) / model, 4),
                     "error_vs_l2": round((l2 - model) / model, 4)})
        print(rows[-1], flush=True)
    with (out_dir / "traffic_vs_ncu.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    keys = ["kernel", "n", "variant", "model_load_bytes", "ncu_l1_global_load_bytes",
            "error_vs_l1", "ncu_l2_to_l1_bytes", "error_vs_l2", "ncu_dram_read_bytes",
            "model_by_array"]
    lines = [f"# Traffic model vs Nsight Compute on {out} ({datetime.date.today()})", "",
             "error = (measured - model) / model; bytes = sectors x 32.", "",
             "| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(r[k]) for k in keys) + " |" for r in rows]
    (out_dir / "traffic_vs_ncu.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--run":
        run_once(sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4]))
    else:
        raise SystemExit(main())
