"""Run every kernel of ``kernels/catalog.json`` through :func:`polygpu.optimize` on the GPU
with PyTorch tensors (and NumPy arrays) and compare with the reference ``check`` uses.

Usage (on a machine with a GPU, PyCUDA and PyTorch)::

    python tuning/api_check.py [--kernel FILE]... [--large] [--batched]

Per kernel and size set (the catalog's ``small`` sizes, odd and partial-tile, and
``mid`` sizes: the ``gpu`` sizes capped at 300): draw random inputs as ``check`` does
(:func:`polygpu.runtime.inputs.random_values`), run the original function in float64
(:func:`polygpu.runtime.reference.run_reference`), run the kernel returned by
``polygpu.optimize(..., backend="gpu")`` on CUDA tensors made from the same inputs and
on the NumPy arrays themselves, and judge every array as ``check`` does
(:func:`polygpu.runtime.check.judge_outputs`: the fixed tolerance, then the
conditioning bound; unwritten elements bit-identical).  ``check_program`` (``--backend
gpu``) runs on the same program too, and its verdict is recorded beside.

``--large``: tmv at n = 46400 (a is 2.15e9 elements, 8.6 GB: offsets pass 2^31) against
torch's float64 product on the GPU.  ``--batched``: a 4x4 batched product with 10^6
elements against ``torch.bmm``, and ``check`` at that size.  These two compare with
``check``'s fixed tolerance alone: sums of products of inputs in [0.5, 1.5) have no
cancellation, so the conditioning bound (which only re-judges elements beyond the fixed
tolerance, by how far rounding moves them) could accept nothing more, and its long
double reference of an 8.6 GB array would not fit the host.

Results: ``tuning/results/<gpu>/api_check.md`` (and ``.json``).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import multiprocessing
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
from polygpu.frontend import load  # noqa: E402
from polygpu.runtime import inputs  # noqa: E402
from polygpu.runtime.check import TOLERANCES, check_program, judge_outputs  # noqa: E402

CAP = 300


def gpu_identity() -> tuple[str, str]:
    out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                          "--format=csv,noheader"], capture_output=True, text=True).stdout
    name, driver = (x.strip() for x in out.splitlines()[0].split(","))
    return name, driver


def mid_sizes(gpu: dict[str, int]) -> dict[str, int]:
    return {k: min(v, CAP) for k, v in gpu.items()}


def run_one(spec: str, function: str, params: dict[str, int], seed: int = 1) -> dict:
    import torch

    row = {"kernel": spec, "params": params}
    t0 = time.perf_counter()
    try:
        kernel = polygpu.optimize(spec, params, function=function, backend="gpu",
                                  database=False)
        source = load(spec, function)
        ints = inputs.integer_parameters(source, params)
        shapes = inputs.array_shapes(source, ints)
        values = inputs.random_values(source, ints, shapes, np.random.default_rng(seed))
        row["launches"] = len(kernel.launches)
        row["host_steps"] = len(kernel.program.steps(ints))
        for mode in ("torch", "numpy"):
            args = {}
            for name, v in values.items():
                if isinstance(v, np.ndarray):
                    args[name] = (torch.from_numpy(v.copy()).cuda() if mode == "torch"
                                  else v.copy())
                else:
                    args[name] = v
            if mode == "torch":
                torch.cuda.synchronize()
            t1 = time.perf_counter()
            kernel(**args)
            if mode == "torch":
                torch.cuda.synchronize()
            call_ms = (time.perf_counter() - t1) * 1e3
            outputs = {a.name: args[a.name].cpu().numpy() if mode == "torch"
                       else args[a.name] for a in source.arrays}
            # check's judgement: fixed tolerance, then the conditioning bound
            judged = judge_outputs(kernel.compiled.source_scop, spec, params, values,
                                   outputs, seed=seed, where=f"the API ({mode})")
            lines = judged.message.splitlines()
            row[mode] = {"ok": judged.ok, "inconclusive": judged.inconclusive,
                         "worst": max(judged.max_relative_error.values(), default=0.0),
                         "threshold": judged.threshold,
                         "first": "" if judged.ok else (lines[1:] or lines)[0].strip(),
                         "call_ms": call_ms}
        result = check_program(kernel.program, kernel.compiled.source_scop, spec, params,
                               backend="gpu", seed=seed)
        row["check"] = {"ok": result.ok, "inconclusive": result.inconclusive,
                        "message": result.message.splitlines()[0]}
        row["ok"] = row["torch"]["ok"] and row["numpy"]["ok"] and result.ok
    except Exception as e:  # recorded, the run goes on
        row["ok"] = False
        row["error"] = f"{type(e).__name__}: {e}"
        row["traceback"] = traceback.format_exc()[-3000:]
    row["seconds"] = round(time.perf_counter() - t0, 1)
    return row


def run_large(seed: int = 1) -> dict:
    """tmv at n = 46400: a[j][i] with j * n + i up to 2.15e9 > 2^31 - 1."""
    import torch

    n = 46400
    row = {"kernel": "kernels/tmv.c (large)", "params": {"n": n}}
    t0 = time.perf_counter()
    try:
        kernel = polygpu.optimize("kernels/tmv.c", {"n": n}, backend="gpu", database=False)
        g = torch.Generator(device="cuda").manual_seed(seed)
        a = torch.rand((n, n), generator=g, device="cuda", dtype=torch.float32) + 0.5
        y = torch.rand(n, generator=g, device="cuda", dtype=torch.float32) + 0.5
        x = torch.full((n,), float("nan"), device="cuda", dtype=torch.float32)
        kernel(n, a, x, y)
        torch.cuda.synchronize()
        want = torch.zeros(n, dtype=torch.float64, device="cuda")
        for j0 in range(0, n, 4096):  # a^T y in float64, a slab of rows at a time
            want += a[j0:j0 + 4096].double().t() @ y[j0:j0 + 4096].double()
        rtol, atol = TOLERANCES["float32"]
        err = ((x.double() - want).abs() / (want.abs() + atol / rtol))
        worst = float(torch.nan_to_num(err, nan=float("inf")).max())
        row["torch"] = {"ok": worst <= rtol, "worst": worst, "first": ""}
        row["elements"] = n * n
        row["ok"] = worst <= rtol
        row["source_has_64bit"] = bool(re.search(r"long long|int64_t|size_t", kernel.source))
    except Exception as e:
        row["ok"] = False
        row["error"] = f"{type(e).__name__}: {e}"
        row["traceback"] = traceback.format_exc()[-3000:]
    row["seconds"] = round(time.perf_counter() - t0, 1)
    return row


def run_batched(seed: int = 1) -> list[dict]:
    """A 4x4 product per element, 10^6 elements: against torch.bmm, and check."""
    import torch

    spec, nb = "kernels/batched_mm.c", 1_000_000
    rows = []
    row = {"kernel": f"{spec} (torch.bmm)", "params": {"nb": nb, "n": 4}}
    t0 = time.perf_counter()
    try:
        kernel = polygpu.optimize(spec, {"nb": nb, "n": 4}, backend="gpu", database=False)
        g = torch.Generator(device="cuda").manual_seed(seed)
        a = torch.rand((nb, 4, 4), generator=g, device="cuda") + 0.5
        b = torch.rand((nb, 4, 4), generator=g, device="cuda") + 0.5
        c = torch.full((nb, 4, 4), float("nan"), device="cuda")
        kernel(nb, 4, a, b, c)
        torch.cuda.synchronize()
        want = torch.bmm(a.double(), b.double())
        rtol, atol = TOLERANCES["float32"]
        err = (c.double() - want).abs() / (want.abs() + atol / rtol)
        worst = float(torch.nan_to_num(err, nan=float("inf")).max())
        row["torch"] = {"ok": worst <= rtol, "worst": worst, "first": ""}
        row["launches"] = len(kernel.launches)
        row["grid"] = [list(launch.grid) for launch in kernel.launches]
        row["ok"] = worst <= rtol
    except Exception as e:
        row["ok"] = False
        row["error"] = f"{type(e).__name__}: {e}"
        row["traceback"] = traceback.format_exc()[-3000:]
    row["seconds"] = round(time.perf_counter() - t0, 1)
    rows.append(row)
    rows.append(run_one(spec, "batched_mm", {"nb": nb, "n": 4}, seed))
    return rows


def write(out: Path, name: str, driver: str, rows: list[dict]) -> None:
    date = datetime.date.today().isoformat()
    (out / "api_check.json").write_text(json.dumps(
        {"gpu": name, "driver": driver, "date": date, "rows": rows}, indent=2) + "\n")
    lines = [f"# `polygpu.optimize` on the GPU with torch tensors and NumPy arrays, {name}",
             "", f"Date {date}, driver {driver}; `python tuning/api_check.py` "
             "(see its docstring for the method). Each kernel: the default variant, "
             "inputs as `check` draws them (seed 1), the original function in float64 as "
             "the reference, judged as `check` judges (fixed tolerance, then the "
             "conditioning bound); `check` (GPU backend) on the same "
             "program beside it.", "",
             "| kernel | sizes | launches (host steps) | torch | numpy | check | worst | "
             "torch call ms | s |",
             "|---|---|--:|---|---|---|--:|--:|--:|"]
    for r in rows:
        sizes = " ".join(f"{k}={v}" for k, v in r["params"].items())
        if "error" in r:
            lines.append(f"| {r['kernel']} | {sizes} | | ERROR | | | "
                         f"{r['error'][:120]} | | {r['seconds']} |")
            continue

        def verdict(key, r=r):
            v = r.get(key)
            return "" if v is None else ("ok" if v["ok"] else "INCONCLUSIVE"
                                         if v.get("inconclusive") else "WRONG")
        worst = max((r[k]["worst"] for k in ("torch", "numpy") if k in r), default=0.0)
        launches = f"{r.get('launches', '')} ({r.get('host_steps', '')})"
        call = r.get("torch", {}).get("call_ms")
        lines.append(f"| {r['kernel']} | {sizes} | {launches} | {verdict('torch')} | "
                     f"{verdict('numpy')} | {verdict('check')} | {worst:.2g} | "
                     f"{'' if call is None else f'{call:.3g}'} | {r['seconds']} |")
    passed = sum(r["ok"] for r in rows)
    lines += ["", f"{passed} of {len(rows)} rows passed."]
    (out / "api_check.md").write_text("\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", action="append", default=[])
    parser.add_argument("--large", action="store_true")
    parser.add_argument("--batched", action="store_true")
    parser.add_argument("--no-catalog", action="store_true")
    parser.add_argument("--out", default=None)
    parser.add_argument("--jobs", type=int, default=8,
                        help="kernels checked at once, each in its own process")
    args = parser.parse_args()
    name, driver = gpu_identity()
    out = Path(args.out) if args.out else ROOT / "tuning" / "results" / re.sub(
        r"[^A-Za-z0-9]+", "-", name).strip("-")
    out.mkdir(parents=True, exist_ok=True)
    catalog = json.loads((ROOT / "kernels" / "catalog.json").read_text())
    rows = []
    if not args.no_catalog:
        tasks = []
        for file, entry in catalog.items():
            if args.kernel and file not in args.kernel:
                continue
            sizes = [entry["small"]]
            if mid_sizes(entry["gpu"]) != entry["small"]:
                sizes.append(mid_sizes(entry["gpu"]))
            tasks += [(f"kernels/{file}", entry["function"], params) for params in sizes]
        # each kernel in a process of its own (spawned: no CUDA state is inherited)
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(args.jobs, mp_context=context) as pool:
            futures = [pool.submit(run_one, *task) for task in tasks]
            for future in futures:
                r = future.result()
                rows.append(r)
                print("ok " if r["ok"] else "BAD", r["kernel"], r["params"],
                      r.get("error", ""), r.get("seconds"), flush=True)
                write(out, name, driver, rows)
    if args.batched:
        for r in run_batched():
            rows.append(r)
            print("ok " if r["ok"] else "BAD", r["kernel"], r.get("error", ""),
                  r.get("seconds"), flush=True)
            write(out, name, driver, rows)
    if args.large:
        rows.append(run_large())
        r = rows[-1]
        print("ok " if r["ok"] else "BAD", r["kernel"], r.get("error", ""), r.get("seconds"),
              flush=True)
        write(out, name, driver, rows)
    for r in rows:
        if not r["ok"]:
            print(r["kernel"], r["params"], r.get("error"), r.get("traceback", ""),
                  {k: r.get(k) for k in ("torch", "numpy", "check")}, flush=True)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
