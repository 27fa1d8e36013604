"""GPU checks of the device layer that a CPU machine cannot make (issue 17).

Usage (on a machine with a GPU, PyCUDA, PyTorch and CuPy): ``python tuning/gpu_api_smoke.py``.
Prints one JSON object per check and writes them to ``tuning/results/<gpu>/gpu_api_smoke.json``
(or ``--out DIR``):

* ``host_steps``: jacobi1d_steps (1000 time steps) through ``polygpu.optimize`` with torch
  tensors, timed with CUDA events around the call, against the same program timed by the
  device layer's ``time`` (what ``check``/``tune`` run) -- the API's time must be of the
  same order (it skipped the steps before: 0.4 ms against 130 ms), and its result must
  equal the emulator's on the same inputs;
* ``two_host_loops``: lu (two host loops) through the API on the GPU against the CPU
  emulator;
* ``cupy``: mv on CuPy arrays (primary context, no PyCUDA import first);
* ``memory``: NumPy arrays larger than the free GPU memory are refused with a sentence;
* ``aliasing``: the same torch tensor for two arguments, one written, is refused.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import polygpu  # noqa: E402
from polygpu.errors import PolygpuError  # noqa: E402


def host_steps() -> dict:
    import torch

    from polygpu.runtime.device import get_device

    tsteps, n = 1000, 1 << 20
    kernel = polygpu.optimize("kernels/jacobi1d_steps.c", backend="gpu")
    rng = np.random.default_rng(1)
    a0 = rng.uniform(0.5, 1.5, n).astype(np.float32)
    b0 = rng.uniform(0.5, 1.5, n).astype(np.float32)
    a, b = torch.from_numpy(a0.copy()).cuda(), torch.from_numpy(b0.copy()).cuda()
    kernel(tsteps, n, a, b)  # warm up (compiles nothing more: compiled in optimize)
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.copy_(torch.from_numpy(a0))
        b.copy_(torch.from_numpy(b0))
        torch.cuda.synchronize()
        start.record()
        kernel(tsteps, n, a, b)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    values = {"tsteps": tsteps, "n": n, "a": a0.copy(), "b": b0.copy()}
    layer = get_device("gpu").time(kernel.program, [values], repeats=5, warmup=1)
    # the result against the emulator at a smaller size (the emulator is slow)
    small = {"tsteps": 50, "n": 4099}
    cpu = polygpu.optimize("kernels/jacobi1d_steps.c", backend="cpu")
    sa = rng.uniform(0.5, 1.5, small["n"]).astype(np.float32)
    sb = rng.uniform(0.5, 1.5, small["n"]).astype(np.float32)
    ga, gb = torch.from_numpy(sa.copy()).cuda(), torch.from_numpy(sb.copy()).cuda()
    kernel(small["tsteps"], small["n"], ga, gb)
    ca, cb = sa.copy(), sb.copy()
    cpu(small["tsteps"], small["n"], ca, cb)
    diff = max(float(np.abs(ga.cpu().numpy() - ca).max()),
               float(np.abs(gb.cpu().numpy() - cb).max()))
    return {"check": "host_steps", "steps": len(kernel.program.steps({"tsteps": tsteps,
                                                                     "n": n})),
            "api_ms_median": float(np.median(times)), "api_ms": times,
            "device_layer_ms_median": float(np.median(layer)),
            "gpu_vs_emulator_max_abs_diff": diff,
            "ok": bool(diff < 1e-5 and np.median(times) > 0.5 * np.median(layer))}


def two_host_loops() -> dict:
    import torch

    n = 256
    gpu = polygpu.optimize("kernels/lu.c", backend="gpu")
    cpu = polygpu.optimize("kernels/lu.c", backend="cpu")
    rng = np.random.default_rng(2)
    a0 = rng.uniform(0.5, 1.5, (n, n)) + n * np.eye(n)  # diagonally dominant
    a0 = a0.astype(np.dtype(gpu.program.arguments[1].dtype))
    ga = torch.from_numpy(a0.copy()).cuda()
    gpu(n, ga)
    ca = a0.copy()
    cpu(n, ca)
    got = ga.cpu().numpy()
    err = float(np.max(np.abs(got - ca) / (np.abs(ca) + 1e-3)))
    return {"check": "two_host_loops", "kernel": "lu", "n": n,
            "steps": len(gpu.program.steps({"n": n})), "max_rel_diff": err,
            "ok": bool(err < 1e-3)}


def cupy_arrays() -> dict:
    import cupy as cp

    n = 1024
    kernel = polygpu.optimize("kernels/mv.c", backend="gpu")
    a = cp.random.rand(n, n, dtype=cp.float32)
    x = cp.zeros(n, cp.float32)
    y = cp.ones(n, cp.float32)
    kernel(n, a, x, y)
    err = float(cp.abs(x - a.sum(1)).max())
    return {"check": "cupy", "max_abs_err": err, "ok": bool(err < 1e-2)}


def memory() -> dict:
    import torch

    free, _ = torch.cuda.mem_get_info()
    n = int((free / 4) ** 0.5) + 4096  # a alone is larger than the free memory
    # compiled for that size: 64-bit offsets, so the launch is not refused for its width
    kernel = polygpu.optimize("kernels/mv.c", {"n": n}, backend="gpu", database=False)
    a = np.zeros((n, n), np.float32)  # lazily mapped: never touched
    x, y = np.zeros(n, np.float32), np.ones(n, np.float32)
    try:
        kernel(n, a, x, y)
    except PolygpuError as e:
        return {"check": "memory", "n": n, "message": str(e),
                "ok": "on the GPU" in str(e)}
    return {"check": "memory", "n": n, "ok": False, "message": "not refused"}


def aliasing() -> dict:
    import torch

    n = 64
    kernel = polygpu.optimize("kernels/mv.c", backend="gpu")
    a = torch.ones((n, n), device="cuda")
    v = torch.ones(n, device="cuda")
    try:
        kernel(n, a, v, v)  # x (written) and y the same memory
    except PolygpuError as e:
        return {"check": "aliasing", "message": str(e), "ok": True}
    return {"check": "aliasing", "ok": False, "message": "not refused"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    name = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                          capture_output=True, text=True).stdout.splitlines()[0].strip()
    out = Path(args.out) if args.out else ROOT / "tuning" / "results" / re.sub(
        r"[^A-Za-z0-9]+", "-", name).strip("-")
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for check in (cupy_arrays, host_steps, two_host_loops, memory, aliasing):
        t0 = time.perf_counter()
        try:
            r = check()
        except Exception as e:
            r = {"check": check.__name__, "ok": False, "error": f"{type(e).__name__}: {e}",
                 "traceback": traceback.format_exc()[-2000:]}
        r["seconds"] = round(time.perf_counter() - t0, 1)
        print(json.dumps(r), flush=True)
        results.append(r)
    (out / "gpu_api_smoke.json").write_text(json.dumps(
        {"gpu": name, "date": time.strftime("%Y-%m-%d"), "checks": results}, indent=2) + "\n")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
