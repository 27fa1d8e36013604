"""Shared-memory bank conflicts on today's GPU: the paper's Figures 2 and 4, and the fit
of the padding solver's cost model ``t_start + t_request * degree``.

Every warp of a full grid reads shared memory at ``buf[lane * stride]`` (through a
volatile pointer, so each iteration issues a load) for strides 0..32, with 4- and
8-byte elements; CUDA events time the kernel (warm-up, median of repeats).  The time per
warp access is fitted against the degree of conflicts the solver's bank model predicts
(``polygpu/memory/padding.py``); a good fit supports the model, and the fitted
``t_start``/``t_request`` (ns per warp access) are recorded for the solver.

Usage (GPU machine, CuPy): ``python tuning/bank_conflicts.py`` -> tuning/results/<gpu>/
bank_calibration.{json,md}.
"""

from __future__ import annotations

import datetime
import json
import re
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from polygpu.memory.padding import conflict_degree  # noqa: E402

SOURCE = r"""
template <typename T>
__device__ void run(T *out, int stride, int iters) {
  __shared__ T buf[32 * 33];
  for (int i = threadIdx.x; i < 32 * 33; i += blockDim.x) buf[i] = (T)i;
  __syncthreads();
  volatile T *v = buf;
  int lane = threadIdx.x & 31;
  int idx = lane * stride;
  T acc = 0;
  for (int k = 0; k < iters; k++) acc += v[idx];
  out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
}
extern "C" __global__ void bank4(float *out, int stride, int iters) { run(out, stride, iters); }
extern "C" __global__ void bank8(double *out, int stride, int iters) { run(out, stride, iters); }
"""


def main() -> int:
    import cupy as cp

    dev = cp.cuda.Device()
    name = cp.cuda.runtime.getDeviceProperties(dev.id)["name"].decode()
    sms = cp.cuda.runtime.getDeviceProperties(dev.id)["multiProcessorCount"]
    module = cp.RawModule(code=SOURCE, options=("-std=c++17",))
    blocks, threads, iters, repeats = sms * 8, 256, 4096, 15
    warps = blocks * threads // 32
    rows = []
    for size, kname, dtype in ((4, "bank4", cp.float32), (8, "bank8", cp.float64)):
        kernel = module.get_function(kname)
        out = cp.zeros(blocks * threads, dtype=dtype)
        for stride in range(0, 33):
            args = (out, np.int32(stride), np.int32(iters))
            for _ in range(3):
                kernel((blocks,), (threads,), args)
            times = []
            for _ in range(repeats):
                start, stop = cp.cuda.Event(), cp.cuda.Event()
                start.record()
                kernel((blocks,), (threads,), args)
                stop.record()
                stop.synchronize()
                times.append(cp.cuda.get_elapsed_time(start, stop))
            ms = statistics.median(times)
            per_access_ns = ms * 1e6 / (warps * iters / (sms * 4))  # per SM sub-partition
            rows.append({"element_bytes": size, "stride": stride,
                         "degree": conflict_degree(stride, size), "median_ms": ms,
                         "ns_per_warp_access": per_access_ns})
            print(size, stride, rows[-1]["degree"], f"{ms:.3f} ms", flush=True)
    fits = {}
    for size in (4, 8):
        pts = [r for r in rows if r["element_bytes"] == size]
        x = np.array([r["degree"] for r in pts], float)
        y = np.array([r["ns_per_warp_access"] for r in pts])
        t_request, t_start = np.polyfit(x, y, 1)
        pred = t_start + t_request * x
        r2 = 1 - ((y - pred) ** 2).sum() / ((y - y.mean()) ** 2).sum()
        fits[size] = {"t_start": float(t_start), "t_request": float(t_request),
                      "r2": float(r2), "max_rel_error": float(np.max(np.abs(pred - y) / y))}
    out_dir = (Path(__file__).resolve().parent / "results" /
               re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    date = datetime.date.today().isoformat()
    (out_dir / "bank_calibration.json").write_text(json.dumps(
        {"gpu": name, "date": date, "unit": "ns per warp access per SM sub-partition",
         "fit": fits, "measurements": rows}, indent=2) + "\n")
    # the copy the padding solver reads (polygpu.memory.padding.DEFAULT_CALIBRATION)
    shipped = Path(__file__).resolve().parent.parent / "polygpu" / "memory"
    (shipped / "bank_calibration.json").write_text(json.dumps(
        {"gpu": name, "date": date, "unit": "ns per warp access per SM sub-partition",
         "source": f"tuning/results/{out_dir.name}/bank_calibration.json "
                   "(tuning/bank_conflicts.py)", "fit": fits}, indent=2) + "\n")
    lines = [f"# Shared-memory bank conflicts on {name} ({date})", "",
             "Time per warp access vs stride (paper Fig. 2) and vs the predicted number of "
             "serialized requests (Fig. 4); fit `t_start + t_request * degree`.", "",
             "| bytes | t_start (ns) | t_request (ns) | R^2 | max rel. error |",
             "|---|---|---|---|---|"]
    for size, f in fits.items():
        lines.append(f"| {size} | {f['t_start']:.3f} | {f['t_request']:.3f} | {f['r2']:.4f} "
                     f"| {f['max_rel_error']:.3f} |")
    lines += ["", "| bytes | stride | degree | median ms | ns per warp access |",
              "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['element_bytes']} | {r['stride']} | {r['degree']} | "
                     f"{r['median_ms']:.4f} | {r['ns_per_warp_access']:.3f} |")
    (out_dir / "bank_calibration.md").write_text("\n".join(lines) + "\n")
    print(json.dumps(fits, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
