"""Speed of every kernel in ``kernels/``: polygpu's tuned variant against a naive mapping.

For each C kernel of ``kernels/catalog.json`` (at its ``gpu`` sizes, or ``--sizes small``):

1. **tuned** -- ``polygpu.search.tune`` with the model strategy, a small space
   (:data:`QUICK_SPACE`) and ``--budget`` timed candidates; every timed candidate was
   checked against the original loop nest by the runner first;
2. **naive** -- the mapping a first CUDA port would use: the original loop order, one
   thread per point of the parallel loops (blocks of 256 threads along the innermost,
   no tiling, no shared memory, no registers); host loops where the region needs them;
3. both programs run **in this process on the same inputs**, timed with CUDA events
   (warm-up, median of ``--repeats``), and their outputs are compared with each other;
4. the tuned program passes ``check`` against the sequential original at the same sizes
   (``--no-check`` skips this; the reference runs on the host in float64, minutes for
   O(n^3) kernels at large n).

Results: ``tuning/results/<gpu>/speed_report.{json,md}`` with the GPU, date, time,
GFLOP/s, speedup over naive and fraction of the roofline (3.0 TB/s, 51 TFLOP/s FP32 on
the H100).  Kernels run one after another, results merged into the existing JSON, so a
long list can be split over several invocations (``--kernel`` repeated).

``--jobs N`` measures N kernels at once in worker processes: their CPU work (scheduling,
code generation, nvcc) overlaps, while everything that runs on the GPU -- the tuner's
measurements and the timing here -- holds one lock file, so no two timings share the GPU.

    python tuning/speed_report.py --budget 3                      # all, on the GPU
    python tuning/speed_report.py --backend cpu --sizes small --kernel gemm.c   # a dry run
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import fcntl
import json
import os
import re
import sys
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

NAIVE_THREADS = 256
GPU_LOCK = os.environ.get("POLYGPU_GPU_LOCK", "/tmp/polygpu-speed-report.lock")


@contextlib.contextmanager
def gpu_lock():
    """Hold the GPU alone (across the worker processes of ``--jobs``)."""
    with open(GPU_LOCK, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


class LockedRunner:
    """A runner whose measurements hold :func:`gpu_lock`."""

    def __init__(self, runner):
        self.runner = runner

    def environment(self):
        with gpu_lock():
            return self.runner.environment()

    def measure(self, job):
        with gpu_lock():
            return self.runner.measure(job)


def quick_space():
    """A small space per kernel: a few block shapes and register tiles, both memory
    placements, the best two scheduler candidates."""
    from polygpu.search.space import SpaceOptions

    return SpaceOptions(candidates=2, thread_totals=(256,), x_threads=(32,),
                        factors=(1, 4), time_tiles=(32,), unrolls=(1,), shared=(True, False),
                        blocked=(False,), reduction_factors=(32,), reduction_jam=(16,))


def naive_variant(prepared):
    """One thread per point of the original order's parallel loops, no tiling/staging."""
    from polygpu.schedule.variant import Variant

    index = next((k for k, tr in enumerate(prepared.candidates)
                  if tr.origin.startswith("original")), 0)
    return Variant(candidate=index, tile=(NAIVE_THREADS,), threads=(NAIVE_THREADS,),
                   jam=False, time_tile=0, unroll=1, shared=False, registers=False)


def gpu_identity(backend: str) -> str:
    if backend == "cpu":
        return "cpu-emulator"
    from polygpu.runtime import gpu

    return gpu.device().name  # device 0, in its primary context (the device layer)


def _values(source, params, seed):
    from polygpu.runtime import inputs

    ints = inputs.integer_parameters(source, params)
    shapes = inputs.array_shapes(source, ints)
    return inputs.random_values(source, ints, shapes, np.random.default_rng(seed))


def _copy(values):
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in values.items()}


def _time(program, values, backend, repeats):
    if backend == "cpu":
        from polygpu.runtime.device import get_device

        times = get_device("cpu").time(program, [values], max(1, repeats // 5), 0)
        return float(np.median(times))
    from polygpu.runtime import gpu

    return gpu.time_program(program, values, repeats=repeats, warmup=3).median_ms


def _max_difference(a, b, written):
    worst = 0.0
    for name in written:
        x, y = np.asarray(a[name], dtype=np.float64), np.asarray(b[name], dtype=np.float64)
        worst = max(worst, float(np.max(np.abs(x - y) / (np.abs(y) + 1e-3))) if x.size else 0)
    return worst


def measure(path: str, function: str, params: dict[str, int], args) -> dict:
    from polygpu.frontend import load
    from polygpu.pipeline import compile_variant, prepare
    from polygpu.runtime.check import check_program
    from polygpu.search.metrics import Roofline, workload
    from polygpu.search.runner import ProcessRunner
    from polygpu.search.tuner import TuneOptions, tune

    spec = str(ROOT / "kernels" / path)
    row: dict = {"kernel": path, "function": function, "params": params,
                 "budget": args.budget}
    prepared = prepare(spec, function)
    scop = prepared.source_scop  # the original: its arrays are the outputs
    work = workload(scop, params)
    row.update(flops=work.flops, compulsory_bytes=work.bytes)

    started = time.perf_counter()
    runner = LockedRunner(ProcessRunner(args.backend, timeout_s=args.timeout))
    result = tune(spec, params, runner,
                  function=function,
                  options=TuneOptions(strategy="model", budget=args.budget,
                                      space=quick_space(), seed=1,
                                      jobs=max(1, (os.cpu_count() or 1) // args.jobs)))
    row["tune_seconds"] = round(time.perf_counter() - started, 1)
    best = result.best
    if best is None:
        row["error"] = "the search found no working variant: " + "; ".join(
            sorted({c.reason for c in result.candidates if c.reason})[:3])
        return row
    tuned_variant, naive = best.variant, naive_variant(prepared)
    row["tuned_variant"] = tuned_variant.to_json()
    row["naive_variant"] = naive.to_json()
    row["tuned_origin"] = prepared.candidates[tuned_variant.candidate].origin
    row["naive_origin"] = prepared.candidates[naive.candidate].origin
    tuned = compile_variant(prepared, tuned_variant, params).program
    plain = compile_variant(prepared, naive, params).program
    row["host_loops"] = list(tuned.host_iterators)
    row["launches_per_run"] = len(tuned.steps(params))

    source = load(spec, function)
    values = _values(source, params, seed=7)
    written = sorted(scop.written_arrays() & {a.name for a in scop.program_arrays})
    outputs = {}
    for label, program in (("naive", plain), ("tuned", tuned)):
        run = _copy(values)
        with gpu_lock():
            ms = _time(program, run, args.backend, args.repeats)
            # the timed runs repeat the region on their own output: compare a single run
            single = _copy(values)
            _run_once(program, single, args.backend)
            split = (_time_by_kernel(program, _copy(values), args.backend)
                     if len(program.launches) > 1 else None)
        outputs[label] = single
        perf = Roofline().evaluate(ms, work.flops, work.bytes)
        row[label] = {"ms": ms, "gflops": perf.gflops, "gbs": perf.gbs,
                      "roofline_fraction": perf.fraction, "bound": perf.bound}
        if split:
            row[label]["ms_by_kernel"] = split
    row["speedup"] = row["naive"]["ms"] / row["tuned"]["ms"]
    row["naive_vs_tuned_max_rel_difference"] = _max_difference(
        outputs["naive"], outputs["tuned"], written)
    if args.check:
        with gpu_lock():
            checked = check_program(tuned, scop, spec, params, backend=args.backend, seed=1)
        row["check"] = {"ok": checked.ok, "message": checked.message}
    return row


def _measured_row(job) -> dict:
    """measure(), with a failure as the row's result (not the end of the report)."""
    key, function, params, args = job
    print(f"{key} {params} ...", flush=True)
    try:
        row = measure(key, function, params, args)
    except Exception as e:  # noqa: BLE001
        row = {"kernel": key, "function": function, "params": params,
               "error": f"{type(e).__name__}: {e}".splitlines()[0],
               "traceback": traceback.format_exc()}
    row["date"] = datetime.date.today().isoformat()
    return row


def _time_by_kernel(program, values, backend):
    if backend == "cpu":
        return None  # the emulator's wall clock says nothing per kernel
    from polygpu.runtime import gpu

    return gpu.time_by_kernel(program, values)


def _run_once(program, values, backend):
    if backend == "cpu":
        from polygpu.runtime import cpu

        cpu.run_program(program, values)
    else:
        from polygpu.runtime import gpu

        gpu.run_program(program, values)


def _markdown(gpu: str, rows: list[dict]) -> str:
    lines = [f"# Speed report: tuned vs naive mapping on {gpu}", "",
             "Written by `tuning/speed_report.py`.  naive = one thread per point of the "
             "original order's parallel loops (256-thread blocks, no tiling, no shared "
             "memory); tuned = `tune` (model strategy, small space).  Same process, same "
             "inputs, CUDA events, median.  Roofline: 3.0 TB/s, 51 TFLOP/s FP32.", "",
             "| kernel | sizes | naive ms | tuned ms | speedup | GFLOP/s | % roofline "
             "| bound | host steps | budget | check |",
             "|---|---|--:|--:|--:|--:|--:|---|--:|--:|---|"]
    for r in sorted(rows, key=lambda r: r["kernel"]):
        sizes = " ".join(f"{k}={v}" for k, v in r["params"].items())
        if "error" in r:
            lines.append(f"| {r['kernel']} | {sizes} | | | | | | | | | {r['error']} |")
            continue
        check = r.get("check", {}).get("ok")
        lines.append(
            f"| {r['kernel']} | {sizes} | {r['naive']['ms']:.3f} | {r['tuned']['ms']:.3f} | "
            f"{r['speedup']:.2f} | {r['tuned']['gflops']:.1f} | "
            f"{100 * r['tuned']['roofline_fraction']:.1f} | {r['tuned']['bound']} | "
            f"{r['launches_per_run']} | {r.get('budget', '')} | "
            f"{'ok' if check else 'not run' if check is None else 'FAIL'} |")
    slow = sorted((r for r in rows if "error" not in r),
                  key=lambda r: r["tuned"]["roofline_fraction"])[:5]
    split = [r for r in sorted(rows, key=lambda r: r["kernel"])
             if "error" not in r and "ms_by_kernel" in r["tuned"]]
    if split:
        lines += ["", "Where the time goes (several kernels; ms per run, CUDA events "
                  "around each launch):", ""]
        for r in split:
            parts = []
            for label in ("naive", "tuned"):
                by = r[label].get("ms_by_kernel")
                parts.append(f"{label} " + (", ".join(f"`{k}` {v:.3f}" for k, v in by.items())
                                            if by else "one kernel"))
            lines.append(f"- {r['kernel']}: " + "; ".join(parts))
    notes = [r for r in sorted(rows, key=lambda r: r["kernel"]) if r.get("note")]
    if notes:
        lines += ["", "Notes:", ""] + [f"- {r['kernel']}: {r['note']}" for r in notes]
    catalog = json.loads((ROOT / "kernels" / "catalog.json").read_text())
    missing = sorted(k for k in catalog if k.endswith(".c")
                     and k not in {r["kernel"] for r in rows})
    if missing:
        lines += ["", "Not measured yet: " + ", ".join(missing)]
    lines += ["", "Slowest relative to the roofline: " + ", ".join(
        f"{r['kernel']} ({100 * r['tuned']['roofline_fraction']:.2f} %)" for r in slow)]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--catalog", default=str(ROOT / "kernels" / "catalog.json"))
    p.add_argument("--kernel", action="append", default=[],
                   help="a catalog key, e.g. gemm.c (repeat; default: all)")
    p.add_argument("--sizes", choices=("gpu", "small"), default="gpu")
    p.add_argument("--backend", choices=("gpu", "cpu"), default="gpu")
    p.add_argument("--budget", type=int, default=3, help="timed candidates per kernel")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--timeout", type=float, default=120.0, help="per candidate, seconds")
    p.add_argument("--no-check", dest="check", action="store_false")
    p.add_argument("--jobs", type=int, default=1,
                   help="kernels measured at once (their GPU work still one at a time)")
    p.add_argument("-o", "--output", help="directory (default tuning/results/<gpu>/)")
    args = p.parse_args(argv)

    catalog = json.loads(Path(args.catalog).read_text())
    # the Python twins compute what their C files do: timed once, as C
    wanted = args.kernel or [k for k in catalog if k.endswith(".c")]
    unknown = [k for k in wanted if k not in catalog]
    if unknown:
        p.error(f"not in the catalog: {', '.join(unknown)}")
    gpu = gpu_identity(args.backend)
    out = Path(args.output) if args.output else (
        ROOT / "tuning" / "results" / re.sub(r"[^A-Za-z0-9]+", "-", gpu).strip("-"))
    out.mkdir(parents=True, exist_ok=True)
    store = out / "speed_report.json"
    rows = json.loads(store.read_text())["kernels"] if store.exists() else []
    jobs = [(key, catalog[key]["function"], catalog[key][args.sizes], args) for key in wanted]
    if args.jobs > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn"))
        results = pool.map(_measured_row, jobs)
    else:
        pool, results = None, map(_measured_row, jobs)
    for (key, *_), row in zip(jobs, results, strict=True):
        print(json.dumps({k: v for k, v in row.items() if k != "traceback"}), flush=True)
        rows = [r for r in rows if r["kernel"] != key] + [row]
        store.write_text(json.dumps({"gpu": gpu, "kernels": rows}, indent=1) + "\n")
        (out / "speed_report.md").write_text(_markdown(gpu, rows))
    if pool is not None:
        pool.shutdown()
    failed = [r["kernel"] for r in rows if "error" in r or not r.get("check", {"ok": True})["ok"]]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
