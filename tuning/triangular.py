"""In-place triangular products and solves (seed 002, KBLAS; issue 22): polygpu's plans
for trmm and trsm against cuBLAS in the same run.

The loop nest is PolyBench's trmm as users write it -- ``B := alpha A^T B`` in place, A
unit lower triangular (``kernels/trmm.c`` in float, ``kernels/polybench/trmm.c`` in
double) -- at m = n.  Per precision and size:

* **default** -- what ``polygpu compile -p`` gives (the cost model's top plan: today the
  entry values of ``B`` read from a snapshot, a second m x n array);
* **rec S** -- the recursion variant with leaves of at most S rows
  (``Variant.recursion``, transform/recursion.py), in place, each product with the
  model's mm plan for its size (``search/recursion_plans.py``): the stop-size sweep;
* **cuBLAS** in place (``C = B``) and out of place (``C`` a third array), ``cublasStrmm_v2``
  / ``cublasDtrmm_v2`` called through ctypes on torch's stream (right, upper, transposed,
  unit: the row-major problem seen column-major), checked against numpy first;
* **mm** -- polygpu's matrix product at the same size (``kernels/mm.c`` with the tuned
  plan of ``figure5_mm.md`` in float; PolyBench's gemm with its default plan in double),
  and cuBLAS GEMM through torch: the rates the acceptance compares with.

Every polygpu plan is checked twice before it is timed: against the original loop nest
on the device at an odd size with the same stop size (m = 3 S + 37, n = 23: several
recursion levels, partial tiles; the plan built for those sizes by the same rules), and
at the timed size against cuBLAS's out-of-place result (largest relative error per
element, 1e-3 in float, 1e-9 in double).  Times: CUDA events around a whole run (every
launch), one warm-up, the median of ``--repeats``; TRMM counts m^2 n flops, GEMM 2 n^3.
Plans are compiled first, in a process pool (``--jobs``), then timed one at a time.

    python tuning/triangular.py --sizes 2048 4096 8192 --dtype float32 float64 \\
        --stops 128 256 512 --out tuning/results/<gpu>
    python tuning/triangular.py --backend cpu --small          # dry run on the emulator

``--op trsm`` does the same for ``kernels/trsm.c`` (``-D DATA_TYPE=double`` in double) (``B := alpha
L^-1 B`` in place, L lower with the diagonal shifted by m; ``--rhs 512`` for 512
right-hand sides) against ``cublas?trsm`` in place (it has no out-of-place form), its
result checked against numpy's solve at 2048 and below.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import ctypes
import ctypes.util
import datetime
import functools
import glob
import json
import os
import pickle
import statistics
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tuning"))

from polybench import _median_ms  # noqa: E402

from polygpu.pipeline import compile_variant, prepare  # noqa: E402
from polygpu.runtime.check import check_program  # noqa: E402
from polygpu.runtime.device import device_source, get_device  # noqa: E402
from polygpu.schedule.variant import Variant  # noqa: E402
from polygpu.search import plan_model  # noqa: E402
from polygpu.search.recursion_plans import SOLVE_LEAF, recursion_plan  # noqa: E402
from polygpu.search.runner import compile_cubins  # noqa: E402

DEFAULT_LEAF = "default"  # recursion_plans.solve_leaf: by the leaf's rows

KERNELS = {"trmm": {"float32": str(ROOT / "kernels" / "trmm.c"),
                    "float64": str(ROOT / "kernels" / "polybench" / "trmm.c")},
           "trsm": {"float32": str(ROOT / "kernels" / "trsm.c"),
                    "float64": str(ROOT / "kernels" / "trsm.c")},
           # backward substitution: the recursion re-associates its sums
           "trsm_upper": {"float32": str(ROOT / "kernels" / "trsm_upper.c")}}
MM = {"float32": (str(ROOT / "kernels" / "mm.c"), lambda n: {"n": n}),
      "float64": (str(ROOT / "kernels" / "polybench" / "gemm.c"),
                  lambda n: {"ni": n, "nj": n, "nk": n})}
# mm's tuned plan at 2048-8192 on the H200 (figure5_mm.md)
MM_FLOAT = Variant(tile=(128, 128), threads=(16, 16), jam=True, time_tile=16, unroll=4,
                   chunk=4, prefetch=True, specialize=True)
TOLERANCE = {"float32": 1e-3, "float64": 1e-9}
ALPHA = 1.5


def _defines(op: str, dtype: str) -> tuple[str, ...]:
    """kernels/trsm.c takes its type from DATA_TYPE (float by default)."""
    return ("DATA_TYPE=double",) if op == "trsm" and dtype == "float64" else ()


def leaf_plan(text: str) -> Variant | None:
    """A solve leaf's plan from ``--leaves``: ``default`` -- the plan polygpu takes at the
    stop size (``recursion_plans.solve_leaf``; None) -- or ``LxC`` -- ``L`` lanes a
    column, ``C`` columns a block (``Variant.lanes``), the column in shared memory, with
    a suffix ``p``: its copies prefetched, ``d``:
    and double-buffered -- or ``serial``: a thread a column, 32 a block, the rows' sums on
    that thread (the plan before lanes) -- or ``uC``: a thread a column, ``C`` a block,
    its column held in registers, the leaf unrolled whole and right-looking
    (``Variant.full_unroll``) -- or ``rLxC``: ``L`` lanes a column, ``C`` columns a
    block, the column spread over the lanes' registers, unrolled whole
    (codegen/lane_registers.py)."""
    if text == DEFAULT_LEAF:
        return None
    if text == "serial":
        return Variant(tile=(32,), threads=(32,))
    if text.startswith("u"):
        columns = int(text[1:])
        return Variant(tile=(columns,), threads=(columns,), full_unroll=True, time_tile=0)
    if text.startswith("r"):
        lanes, columns = (int(x) for x in text[1:].split("x"))
        return Variant(tile=(columns,), threads=(columns,), lanes=lanes, full_unroll=True,
                       time_tile=0)
    shape = text.rstrip("pd")
    lanes, columns = (int(x) for x in shape.split("x"))
    return replace(SOLVE_LEAF, tile=(columns,), threads=(columns,), lanes=lanes,
                   prefetch="p" in text[len(shape):] or SOLVE_LEAF.prefetch,
                   double_buffer="d" in text[len(shape):] or SOLVE_LEAF.double_buffer)


def _plan(op: str, dtype: str, m: int, n: int, stop: int, leaf: str = DEFAULT_LEAF
          ) -> Variant:
    """The plan of ``stop`` ("default": the model's top plan) at m x n, a solve's leaves
    with ``leaf`` (:func:`leaf_plan`)."""
    sizes = {"m": m, "n": n}
    prepared = prepare(KERNELS[op][dtype], None, _defines(op, dtype), params=sizes)
    if stop == 0:
        return plan_model.choose(prepared, sizes).variant
    return recursion_plan(prepared, sizes, stop, leaf=leaf_plan(leaf)).variant


def _compile(job: tuple) -> dict:
    """One plan built, compiled at its size and, for the check, at the odd size (in a
    worker process: the model's sketches and isl's proofs take seconds each)."""
    op, dtype, m, n, stop, leaf = job
    out = {"op": op, "dtype": dtype, "m": m, "n": n, "stop": stop, "leaf": leaf}
    spec, defines = KERNELS[op][dtype], _defines(op, dtype)
    try:
        variant = _plan(op, dtype, m, n, stop, leaf)
        sizes = {"m": m, "n": n}
        out["variant"] = variant.to_json()
        out["program"] = compile_variant(prepare(spec, None, defines, params=sizes), variant,
                                         sizes).program
        small = {"m": 3 * stop + 37 if stop else 101, "n": 23}
        small_variant = _plan(op, dtype, small["m"], small["n"], stop, leaf)
        out["check_sizes"] = small
        out["check_program"] = compile_variant(
            prepare(spec, None, defines, params=small), small_variant, small).program
    except Exception as e:  # recorded, the other plans go on
        out["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
    return out


def _compile_mm(job: tuple) -> dict:
    dtype, n = job
    spec, sizes_of = MM[dtype]
    sizes = sizes_of(n)
    prepared = prepare(spec, params=sizes)
    variants = {"default": plan_model.choose(prepared, sizes).variant}
    if dtype == "float32":
        variants["tuned"] = MM_FLOAT
    return {"dtype": dtype, "n": n, "programs": {
        k: (v.to_json(), compile_variant(prepared, v, sizes).program)
        for k, v in variants.items()}}


# --------------------------------------------------------------------------------------
# cuBLAS through ctypes
# --------------------------------------------------------------------------------------


def _cublas():
    """libcublas (torch's own where it ships one, else the toolkit's)."""
    import torch

    here = Path(torch.__file__).parent
    found = sorted(glob.glob(str(here.parent / "nvidia" / "cublas" / "lib" / "libcublas.so*"))
                   + glob.glob(str(here / "lib" / "libcublas.so*"))
                   + glob.glob("/usr/local/cuda/lib64/libcublas.so*"))
    path = found[0] if found else ctypes.util.find_library("cublas")
    lib = ctypes.CDLL(path)
    handle = ctypes.c_void_p()
    if lib.cublasCreate_v2(ctypes.byref(handle)):
        raise RuntimeError("cublasCreate failed")
    lib.cublasSetStream_v2(handle, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream))
    return lib, handle, path


def cublas_trmm(lib, handle, dtype: str, a, b, c, alpha: float) -> None:
    """``c = alpha (I + strict_lower(a))^T b`` for row-major ``a`` (m x m) and ``b``
    (m x n), torch tensors (``c`` may be ``b``: in place).  Column-major, ``b`` is its
    transpose ``B^T`` (n x m) and ``a`` is ``A^T``: ``B^T := alpha B^T L`` with
    ``L = (A^T)^T`` -- right side, upper (``A^T``'s stored triangle), transposed, unit."""
    m, n = b.shape
    scalar = ctypes.c_float(alpha) if dtype == "float32" else ctypes.c_double(alpha)
    fn = lib.cublasStrmm_v2 if dtype == "float32" else lib.cublasDtrmm_v2
    status = fn(handle, 1, 1, 1, 1, n, m, ctypes.byref(scalar),
                ctypes.c_void_p(a.data_ptr()), m, ctypes.c_void_p(b.data_ptr()), n,
                ctypes.c_void_p(c.data_ptr()), n)
    if status:
        raise RuntimeError(f"cublas trmm status {status}")


def cublas_trsm(lib, handle, dtype: str, a, b, alpha: float, upper: bool = False) -> None:
    """``b := alpha L^-1 b`` in place for row-major ``a`` (m x m, ``L`` its lower
    triangle, the diagonal as stored: pass ``kernels/trsm.c``'s shifted one) and ``b``
    (m x n), torch tensors.  Column-major, ``b`` is ``B^T`` (n x m) and ``a`` is
    ``A^T``: ``X^T L^T = alpha B^T`` -- right side, upper (``A^T``'s stored triangle),
    not transposed, non-unit; ``upper``: ``U`` the upper triangle, ``U^T`` the lower one
    of ``A^T``.  (cuBLAS's trsm has no out-of-place form.)"""
    m, n = b.shape
    scalar = ctypes.c_float(alpha) if dtype == "float32" else ctypes.c_double(alpha)
    fn = lib.cublasStrsm_v2 if dtype == "float32" else lib.cublasDtrsm_v2
    status = fn(handle, 1, 0 if upper else 1, 0, 0, n, m, ctypes.byref(scalar),
                ctypes.c_void_p(a.data_ptr()), m, ctypes.c_void_p(b.data_ptr()), n)
    if status:
        raise RuntimeError(f"cublas trsm status {status}")


def _shifted(a: np.ndarray) -> np.ndarray:
    """``a`` with the diagonal ``kernels/trsm.c`` divides by (``a[i][i] + m``)."""
    return a + a.shape[0] * np.eye(a.shape[0], dtype=a.dtype)


def _reference(op: str, a: np.ndarray, b: np.ndarray, alpha: float) -> np.ndarray:
    if op.startswith("trsm"):
        shifted = _shifted(a).astype(np.float64)
        triangle = np.triu(shifted) if op == "trsm_upper" else np.tril(shifted)
        return np.linalg.solve(triangle, alpha * b.astype(np.float64))
    return alpha * ((np.eye(a.shape[0]) + np.tril(a.astype(np.float64), -1)).T
                    @ b.astype(np.float64))


# --------------------------------------------------------------------------------------
# the run
# --------------------------------------------------------------------------------------


def _inputs(m: int, n: int, dtype: str, seed: int = 7) -> dict:
    rng = np.random.default_rng(seed)
    return {"m": m, "n": n, "alpha": ALPHA,
            "a": rng.random((m, m)).astype(dtype), "b": rng.random((m, n)).astype(dtype)}


def _values(program, base: dict) -> dict:
    """``base`` under the names the program's arguments take (``a``/``A``, ...)."""
    out = {}
    for arg in program.arguments:
        key = arg.name.lower()
        if arg.kind == "scratch":
            continue
        value = base[key]
        out[arg.name] = value.copy() if isinstance(value, np.ndarray) else value
    return out


def run(args) -> dict:
    device = get_device(args.backend)
    rhs = {m: args.rhs or m for m in args.sizes}
    dtypes = [d for d in args.dtype if d in KERNELS[args.op]]
    leaves = args.leaves if args.op.startswith("trsm") else [DEFAULT_LEAF]
    jobs = [(args.op, dtype, m, rhs[m], 0, DEFAULT_LEAF) for dtype in dtypes
            for m in args.sizes if args.default]
    jobs += [(args.op, dtype, m, rhs[m], stop, leaf) for dtype in dtypes for m in args.sizes
             for stop in args.stops if stop < m for leaf in leaves]
    mm_jobs = [(dtype, m) for dtype in dtypes for m in args.sizes] if args.mm else []
    if args.built:  # compiled before, elsewhere (--build-only): the device only runs
        built, mm_built = pickle.loads(Path(args.built).read_bytes())
    else:
        with concurrent.futures.ProcessPoolExecutor(args.jobs) as pool:
            built = list(pool.map(_compile, jobs))
            mm_built = list(pool.map(_compile_mm, mm_jobs))
    if args.build_only:
        if args.arch:  # nvcc here too: the device then loads the binaries
            programs = [job[key] for job in built for key in ("program", "check_program")
                        if key in job]
            programs += [p for job in mm_built for _, p in job["programs"].values()]
            cubins = compile_cubins(programs, args.arch, args.jobs)
            bad = [c for c in cubins if isinstance(c, Exception)]
            if bad:
                print(f"nvcc failed on {len(bad)} programs: {bad[0]}", file=sys.stderr)
            binaries = {device_source(p): c.binary for p, c in zip(programs, cubins,
                                                                   strict=True)
                        if not isinstance(c, Exception)}
            for job in built:
                job["binaries"] = {key: binaries.get(device_source(job[key]))
                                   for key in ("program", "check_program") if key in job}
            for job in mm_built:
                job["binaries"] = {key: binaries.get(device_source(p))
                                   for key, (_, p) in job["programs"].items()}
        Path(args.build_only).write_bytes(pickle.dumps((built, mm_built)))
        print(f"wrote {len(built)} plans and {len(mm_built)} mm programs to "
              f"{args.build_only}", file=sys.stderr)
        return {}
    gpu = args.backend == "gpu"
    if gpu:  # binaries compiled with the plans (--build-only --arch): no nvcc here
        for job in built + mm_built:
            programs = {"program": job.get("program"),
                        "check_program": job.get("check_program")} if "stop" in job \
                else {k: p for k, (_, p) in job["programs"].items()}
            for key, binary in job.get("binaries", {}).items():
                if binary is not None:
                    device.use_module(programs[key], device.load_binary(binary))
    torch = None
    if gpu:
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False
        lib, handle, path = _cublas()
    result = {"date": datetime.date.today().isoformat(), "device": getattr(device, "name",
                                                                           "cpu emulator"),
              "op": args.op, "cublas": path if gpu else None, "rows": [], "mm": []}
    op = args.op
    for dtype in dtypes:
        for m in args.sizes:
            n = rhs[m]
            base = _inputs(m, n, dtype)
            row = {"dtype": dtype, "m": m, "n": n, "flops": m * m * n, "plans": []}
            expected = None
            if gpu:
                tdt = getattr(torch, dtype)
                b0 = torch.from_numpy(base["b"]).cuda()
                c = torch.empty_like(b0)
                if op.startswith("trsm"):
                    a = torch.from_numpy(_shifted(base["a"])).cuda()
                    c.copy_(b0)
                    cublas_trsm(lib, handle, dtype, a, c, ALPHA, op == "trsm_upper")
                else:
                    a = torch.from_numpy(base["a"]).cuda()
                    cublas_trmm(lib, handle, dtype, a, b0, c, ALPHA)
                torch.cuda.synchronize()
                expected = c.double().cpu().numpy()
                if m <= 2048 or op.startswith("trsm"):  # cuBLAS's own call checked against numpy
                    ref = _reference(op, base["a"], base["b"], ALPHA)
                    row["cublas_error"] = float(np.max(np.abs(expected - ref) / np.abs(ref))
                                                if op == "trmm" else
                                                np.max(np.abs(expected - ref))
                                                / np.max(np.abs(ref)))
                    if op.startswith("trsm"):  # polygpu's plans against numpy's solve
                        expected = ref
                b = b0.clone()
                if op.startswith("trsm"):
                    row["cublas_inplace_ms"] = _median_ms(torch, functools.partial(
                        cublas_trsm, lib, handle, dtype, a, b, 1.0, op == "trsm_upper"),
                        args.repeats, 1)
                else:
                    row["cublas_inplace_ms"] = _median_ms(torch, functools.partial(
                        cublas_trmm, lib, handle, dtype, a, b, b, 1.0), args.repeats, 1)
                    row["cublas_outofplace_ms"] = _median_ms(torch, functools.partial(
                        cublas_trmm, lib, handle, dtype, a, b0, c, ALPHA), args.repeats, 1)
                x = torch.rand(m, m, dtype=tdt, device="cuda")
                y = torch.empty_like(x)
                row["cublas_gemm_ms"] = _median_ms(
                    torch, functools.partial(torch.mm, x, x, out=y), args.repeats, 1)
                del a, b, b0, c, x, y
            else:
                expected = _reference(op, base["a"], base["b"], ALPHA)
            for job in built:
                if (job["dtype"], job["m"]) != (dtype, m):
                    continue
                plan = f"rec {job['stop']}" if job["stop"] else "default"
                if job["stop"] and op.startswith("trsm"):
                    plan += f" leaf {job['leaf']}"
                entry = {"plan": plan, "variant": job.get("variant")}
                row["plans"].append(entry)
                if "error" in job:
                    entry["error"] = job["error"]
                    print(json.dumps(entry), file=sys.stderr, flush=True)
                    continue
                small = job["check_sizes"]
                spec, defines = KERNELS[op][dtype], _defines(op, dtype)
                check = check_program(job["check_program"],
                                      prepare(spec, None, defines, params=small).source_scop,
                                      spec, small, backend=device, seed=11, defines=defines)
                entry["check"] = {"ok": check.ok, "sizes": small,
                                  "message": check.message.splitlines()[0][:200]}
                if not check.ok:
                    print(json.dumps(entry), file=sys.stderr, flush=True)
                    continue
                program = job["program"]
                values = _values(program, base)
                device.run(program, values)
                out = values[next(k for k in values if k.lower() == "b")].astype(np.float64)
                # trmm: per element (all positive, no cancellation); trsm: against the
                # largest element (a solve's cancellations leave elements near zero)
                error = float(np.max(np.abs(out - expected) / np.abs(expected))) \
                    if op == "trmm" else float(np.max(np.abs(out - expected))
                                               / np.max(np.abs(expected)))
                entry["full_error"] = error
                entry["full_ok"] = error <= TOLERANCE[dtype]
                if entry["full_ok"] and gpu:
                    values = _values(program, base)
                    entry["ms"] = statistics.median(device.time(
                        program, [values], args.repeats, 1, 2000.0))
                    entry["launches"] = len(program.launches)
                    # per launch (events between launches): where a recursion's time goes
                    values = _values(program, base)
                    parts = device.time_launches(program, [values], 3, 1)
                    entry["launch_ms"] = [round(x, 4) for x in parts.medians()]
                print(json.dumps({k: v for k, v in entry.items() if k != "variant"}),
                      file=sys.stderr, flush=True)
            result["rows"].append(row)
            if args.out:  # what is done so far, in case the run is cut short
                out = Path(args.out) / (f"triangular_{args.tag}" if args.tag else "triangular")
                out.parent.mkdir(parents=True, exist_ok=True)
                out.with_suffix(".partial.json").write_text(
                    json.dumps(result, indent=1, default=_plain) + "\n")
    for job in mm_built:
        for key, (variant, program) in job["programs"].items():
            entry = {"dtype": job["dtype"], "n": job["n"], "plan": key, "variant": variant}
            if gpu:
                sizes = {p: job["n"] for p in program.parameters}
                rng = np.random.default_rng(3)
                values = {}
                for arg in program.arguments:
                    if arg.kind == "scalar":
                        values[arg.name] = sizes.get(arg.name, 1.0)
                    elif arg.kind == "array":
                        values[arg.name] = rng.random((job["n"], job["n"])).astype(
                            job["dtype"])
                entry["ms"] = statistics.median(device.time(program, [values],
                                                            args.repeats, 1, 2000.0))
            result["mm"].append(entry)
            print(json.dumps(entry), file=sys.stderr, flush=True)
    return result


def _plain(x) -> object:
    """JSON for what is not: a compiled program (left out), anything else as text."""
    return None if hasattr(x, "launches") else str(x)


def _ratio(other: float | None, ms: float) -> str:
    return f"{other / ms:.2f}" if other else ""


def markdown(data: dict) -> str:
    """The results as tables: per precision and size every plan's time, its TFLOP/s
    (m^2 n flops), and its ratio to cuBLAS in and out of place, to polygpu's mm rate
    and to cuBLAS GEMM's (the roofline: what the vendor's product reaches here)."""
    mm_rate = {}
    for e in data["mm"]:
        if "ms" in e:
            rate = 2 * e["n"] ** 3 / (e["ms"] * 1e-3)
            mm_rate[e["dtype"], e["n"]] = max(mm_rate.get((e["dtype"], e["n"]), 0), rate)
    lines = [f"# {data.get('op', 'trmm')} in place on {data['device']} ({data['date']})",
             "",
             "| dtype | m x n | plan | launches | ms | TFLOP/s | x cuBLAS in place | "
             "x cuBLAS out of place | x polygpu mm rate | x cuBLAS GEMM rate | check |",
             "|---|--:|---|--:|--:|--:|--:|--:|--:|--:|---|"]
    for row in data["rows"]:
        flops = row["flops"]
        size = f"{row['m']} x {row['n']}"
        gemm = 2 * row["m"] ** 3 / (row["cublas_gemm_ms"] * 1e-3) \
            if row.get("cublas_gemm_ms") else None
        for name, key in (("cuBLAS in place", "cublas_inplace_ms"),
                          ("cuBLAS out of place", "cublas_outofplace_ms")):
            if row.get(key):
                ms = row[key]
                lines.append(f"| {row['dtype']} | {size} | {name} | 1 | {ms:.3f} | "
                             f"{flops / ms / 1e9:.1f} | | | | "
                             f"{flops / (ms * 1e-3) / gemm:.2f} | |")
        for e in row["plans"]:
            check = "error: " + e["error"] if "error" in e else (
                f"ok (odd size {e['check']['sizes']['m']}, full size "
                f"{e.get('full_error', 0):.1e})" if e.get("full_ok") else
                e.get("check", {}).get("message", ""))
            if "ms" not in e:
                lines.append(f"| {row['dtype']} | {size} | {e['plan']} | | | | | | | | "
                             f"{check} |")
                continue
            ms, rate = e["ms"], flops / (e["ms"] * 1e-3)
            mm = mm_rate.get((row["dtype"], row["m"]))
            lines.append(
                f"| {row['dtype']} | {size} | {e['plan']} | {e['launches']} | {ms:.3f} | "
                f"{rate / 1e12:.1f} | {_ratio(row.get('cublas_inplace_ms'), ms)} | "
                f"{_ratio(row.get('cublas_outofplace_ms'), ms)} | "
                f"{f'{rate / mm:.2f}' if mm else ''} | "
                f"{f'{rate / gemm:.2f}' if gemm else ''} | {check} |")
    if data["mm"]:
        lines += ["", "polygpu mm at the same sizes (2 n^3 flops):", "",
                  "| dtype | n | plan | ms | TFLOP/s |", "|---|--:|---|--:|--:|"]
        for e in data["mm"]:
            if "ms" in e:
                lines.append(f"| {e['dtype']} | {e['n']} | {e['plan']} | {e['ms']:.3f} | "
                             f"{2 * e['n'] ** 3 / (e['ms'] * 1e-3) / 1e12:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--op", choices=sorted(KERNELS), default="trmm",
                   help="trmm (PolyBench's, in place), trsm (kernels/trsm.c) or "
                        "trsm_upper (kernels/trsm_upper.c, float only)")
    p.add_argument("--sizes", type=int, nargs="+", default=[2048, 4096, 8192])
    p.add_argument("--rhs", type=int, default=0,
                   help="columns of B (right-hand sides); default: n = m")
    p.add_argument("--dtype", nargs="+", default=["float32", "float64"],
                   choices=("float32", "float64"))
    p.add_argument("--stops", type=int, nargs="+", default=[128, 256, 512])
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--jobs", type=int, default=os.cpu_count())
    p.add_argument("--no-mm", dest="mm", action="store_false",
                   help="skip polygpu's mm at the same sizes")
    p.add_argument("--no-default", dest="default", action="store_false",
                   help="skip the model's default plan (a solve's takes 0.07-0.5 s a run)")
    p.add_argument("--leaves", nargs="+", default=[DEFAULT_LEAF],
                   help="a solve's leaf plans to time: default (polygpu's at the stop "
                        "size), LxC (L lanes a column, C columns "
                        "a block), rLxC (the same, the column in the lanes' registers, "
                        "the leaf unrolled), uC (a thread a column in registers, C a "
                        "block, the leaf unrolled) or serial (a thread a column); default: "
                        f"{DEFAULT_LEAF}")
    p.add_argument("--build-only", metavar="FILE",
                   help="compile the plans and write them (pickled) to FILE, run nothing")
    p.add_argument("--arch", help="with --build-only: also compile the programs with nvcc "
                                  "for this architecture (sm_90), so the device loads them")
    p.add_argument("--built", metavar="FILE",
                   help="the plans of an earlier --build-only with the same arguments")
    p.add_argument("--backend", choices=("gpu", "cpu"), default="gpu")
    p.add_argument("--small", action="store_true",
                   help="a dry run: m = 100 with stops 16 and 32, no mm")
    p.add_argument("--out", help="write triangular.json and triangular.md here")
    p.add_argument("--tag", default="", help="suffix of the output files' names")
    args = p.parse_args(argv)
    if args.small:
        args.sizes, args.stops, args.mm = [100], [16, 32], False
    data = run(args)
    if args.build_only:
        return 0
    text = markdown(data)
    print(text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        name = "triangular" + (f"_{args.tag}" if args.tag else "")
        (out / f"{name}.json").write_text(json.dumps(data, indent=1, default=_plain) + "\n")
        (out / f"{name}.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
