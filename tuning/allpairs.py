"""All-pairs distances (seed 004, Sarje & Aluru 2013): polygpu against ``torch.cdist`` in the
same run, and the paper's sensitivity to its decomposition ``<c, r, s, d'>``.

Kernels: ``kernels/allpairs/l1dist.c`` (p = 1), ``l2dist.c`` (p = 2: a scalar temporary,
the square root at the end) and ``lpdist.c -D P=3`` (p = 3: ``powf(|a - b|, 3)``, which
polygpu multiplies out), in float (fp32) or, with ``-D DATA_TYPE=double`` and the double
math functions, fp64.  Shapes: the paper's n = 2000, d = 5419 and n = 1000, d = 40000,
and n = 6000, d = 5419 (n1 = n2 = n, two random point sets).

For each configuration:

1. **default** -- the cost model's plan at these sizes (``polygpu compile -p``: its sizes
   baked in), checked against the original loop nest on the device at odd sizes
   (n1 = 101, n2 = 67, d = 203: partial tiles and slices; the same variant generated for
   those sizes, as the tuner checks), then timed at full size with CUDA events (one
   warm-up, median of ``--repeats``);
2. **tuned** (``--tune B``) -- ``polygpu.optimize(tune=True, budget=B)`` (the model
   strategy; every candidate checked), its best variant timed again here;
3. **torch.cdist** in the same run: the direct mode
   (``compute_mode="donot_use_mm_for_euclid_dist"``) for every p, and for p = 2 the
   matrix-product mode (``"use_mm_for_euclid_dist"``) too;
4. the **issue bound**: pair-dimensions (n1 n2 d) times the FP32/FP64 instructions one
   needs (p = 1: subtract, add of the absolute value; p = 2: subtract, fused multiply-
   add; p = 3: subtract, multiply, fused multiply-add), at half the cuBLAS GEMM rate
   measured in this run (one instruction is a fused multiply-add, two flops).

``--sweep`` times the paper's decomposition over a grid instead: block r x c threads,
tile (r s) x c (s subtiles: rows cyclic over the threads, one after another), slices
of d' (``time_tile``; shared-memory staging of both vectors per slice), no register
tiles (the paper's scheme), each variant checked at odd sizes before it is timed.

    python tuning/allpairs.py --tune 8 --out tuning/results/<gpu>   # GPU machine
    python tuning/allpairs.py --sweep --out tuning/results/<gpu>
    python tuning/allpairs.py --backend cpu --small                  # dry run
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import itertools
import json
import multiprocessing
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tuning"))

from polybench import _median_ms, _torch, gemm_gflops  # noqa: E402

from polygpu.pipeline import compile_variant, prepare  # noqa: E402
from polygpu.runtime.check import check_program  # noqa: E402
from polygpu.runtime.device import get_device  # noqa: E402
from polygpu.schedule.variant import Variant  # noqa: E402
from polygpu.search import plan_model  # noqa: E402

SHAPES = ((2000, 5419), (1000, 40000), (6000, 5419))
CHECK = {"n1": 101, "n2": 67, "d": 203}
SMALL = {"n1": 37, "n2": 23, "d": 101}
# FP32/FP64 instructions per pair-dimension (see the module doc)
INSTRUCTIONS = {1: 2, 2: 2, 3: 3}
DOUBLE = ("DATA_TYPE=double", "FABS=fabs", "POW=pow", "SQRT=sqrt")
# torch calls: one warm-up, then up to 20 timed runs, stopping at 2 s (at least 3)
TORCH_TIMING = {"repeats": 20, "warmup": 1, "budget_ms": 2000.0}


def kernel_of(p: float, dtype: str) -> tuple[str, str, tuple[str, ...]]:
    """(spec, function, defines) of the L_p kernel in ``dtype`` (p = 1, 2: their own
    kernels; any other p: ``lpdist.c`` with ``-D P=p``, multiplied out when an
    integer)."""
    name = {1: "l1dist", 2: "l2dist"}.get(p, "lpdist")
    defines = () if p in (1, 2) else (f"P={p:g}",)
    if dtype == "float64":
        defines += DOUBLE
    return str(ROOT / "kernels" / "allpairs" / f"{name}.c"), name, defines


def inputs(program, sizes: dict, rng) -> dict:
    """Two random point sets in [0, 1) (the timing does not depend on the values)."""
    values = {}
    for a in program.arguments:
        if a.kind == "scalar":
            values[a.name] = sizes.get(a.name, 3.0)
        elif a.kind == "array":
            from polygpu.runtime import grid

            shape = tuple(grid.evaluate(e, sizes) for e in a.shape)
            values[a.name] = rng.random(shape).astype(np.dtype(a.dtype))
    return values


def checked(spec, function, defines, variant, device, check_sizes) -> dict:
    """``variant`` checked against the original nest at ``check_sizes`` on ``device``: a
    specialized variant as the tuner checks it, generated for those sizes (the same
    transformation, its sizes baked in), a parametric one as the very program timed."""
    prepared = prepare(spec, function, defines=defines, params=check_sizes)
    program = compile_variant(prepared, variant, check_sizes).program
    result = check_program(program, prepared.source_scop, spec, check_sizes,
                           backend=device, seed=11, defines=defines)
    return {"ok": result.ok, "sizes": check_sizes,
            "message": result.message.splitlines()[0][:200]}


def cell(x: float | None, digits: int = 3) -> str:
    """A table cell: ``x`` to ``digits`` decimals, empty where there is no number."""
    return f"{x:.{digits}f}" if x is not None else ""


def time_program(device, program, sizes, repeats: int) -> float:
    values = inputs(program, sizes, np.random.default_rng(7))
    return statistics.median(device.time(program, [values], repeats, 1, 1000.0))


# --------------------------------------------------------------------------------------
# torch
# --------------------------------------------------------------------------------------


def time_torch(n1: int, n2: int, d: int, p: int, dtype: str, same: bool = False) -> dict:
    """torch.cdist's direct mode (and for p = 2 its matrix-product mode) on two random
    point sets, or with ``same`` on one (``cdist(x, x)``: torch has no symmetric mode)."""
    torch = _torch()
    if torch is None:
        return {}
    torch.backends.cuda.matmul.allow_tf32 = False
    t = getattr(torch, dtype)
    g = torch.Generator(device="cuda").manual_seed(7)
    x1 = torch.rand(n1, d, dtype=t, device="cuda", generator=g)
    x2 = x1 if same else torch.rand(n2, d, dtype=t, device="cuda", generator=g)
    out = {"torch": torch.__version__}
    out["direct_ms"] = _median_ms(torch, lambda: torch.cdist(
        x1, x2, p=float(p), compute_mode="donot_use_mm_for_euclid_dist"), **TORCH_TIMING)
    if p == 2:
        out["mm_ms"] = _median_ms(torch, lambda: torch.cdist(
            x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist"), **TORCH_TIMING)
    return out


def gemm_instructions_per_s(dtype: str) -> float | None:
    """Half the cuBLAS GEMM rate at 4096^3 in this run: fused multiply-adds per second."""
    gflops = gemm_gflops(dtype)
    return None if gflops is None else gflops * 1e9 / 2


# --------------------------------------------------------------------------------------
# One configuration
# --------------------------------------------------------------------------------------


def default_and_tuned(spec, function, defines, sizes, check_sizes, dtype, args,
                      device, tune: bool = True) -> dict:
    """The default plan (checked at ``check_sizes``, then timed at ``sizes``) and, with
    ``--tune`` (and ``tune``), the tuned one: the ``default`` and ``tuned`` entries of a
    row."""
    row = {}
    prepared = prepare(spec, function, defines=defines, params=sizes)
    choice = plan_model.choose(prepared, sizes)
    # what `polygpu compile -p` gives (with --fast-math: `compile -p --fast-math`)
    variant = replace(choice.variant, fast_math=args.fast_math)
    program = compile_variant(prepared, variant, sizes).program
    row["default"] = {"variant": variant.to_json()}
    check = checked(spec, function, defines, variant, device, check_sizes)
    row["default"]["check"] = check
    if check["ok"]:
        row["default"]["ms"] = time_program(device, program, sizes, args.repeats)
    if tune and args.tune and not (args.tune_fp32_only and dtype != "float32"):
        from polygpu.api import optimize

        t0 = time.time()
        try:
            kernel = optimize(spec, params=sizes, function=function, tune=True,
                              budget=args.tune, database=False, backend=args.backend,
                              defines=defines, fast_math=args.fast_math)
            row["tuned"] = {"variant": kernel.variant.to_json(), "budget": args.tune,
                            "tune_s": round(time.time() - t0, 1),
                            "ms": time_program(device, kernel.program, sizes, args.repeats)}
        except Exception as err:  # noqa: BLE001 -- recorded, the other rows go on
            row["tuned"] = {"error": str(err).splitlines()[0][:300]}
    return row


def run_config(n: int, d: int, p: int, dtype: str, args, device, rates: dict) -> dict:
    spec, function, defines = kernel_of(p, dtype)
    sizes = dict(SMALL) if args.small else {"n1": n, "n2": n, "d": d}
    row = {"p": p, "dtype": dtype, "sizes": sizes, "kernel": Path(spec).name,
           "defines": list(defines), "fast_math": args.fast_math}
    started = time.time()
    row.update(default_and_tuned(spec, function, defines, sizes,
                                 SMALL if args.small else CHECK, dtype, args, device))
    if args.backend == "gpu" and not args.small:
        row["torch"] = time_torch(n, n, d, p, dtype)
    pair_dims = sizes["n1"] * sizes["n2"] * sizes["d"]
    rate = rates.get(dtype)
    if rate and p in INSTRUCTIONS:  # a non-integer p is bound by its powers (MUFU)
        row["issue_bound_ms"] = pair_dims * INSTRUCTIONS[p] / rate * 1e3
    row["seconds"] = round(time.time() - started, 1)
    print(summary(row), file=sys.stderr, flush=True)
    return row


SELF = ROOT / "kernels" / "allpairs" / "l1self.c"


def run_self(n: int, d: int, dtype: str, args, device, rates: dict) -> dict:
    """The symmetric self-distance (``l1self.c``: one point set, pairs j <= i computed
    once and mirrored) against the full ``l1dist.c`` on n x n pairs (its default plan)
    and ``torch.cdist(x, x)`` direct, p = 1.  The triangle is half the pairs, so the
    ratio to the full product shows how well the triangle's blocks are balanced."""
    defines = DOUBLE if dtype == "float64" else ()
    sizes = {"n": 37, "d": 101} if args.small else {"n": n, "d": d}
    check_sizes = {"n": 37, "d": 101} if args.small else {"n": 101, "d": 203}
    started = time.time()
    row = {"p": 1, "dtype": dtype, "sizes": sizes, "kernel": SELF.name,
           "defines": list(defines), "fast_math": args.fast_math}
    row.update(default_and_tuned(str(SELF), "l1self", defines, sizes, check_sizes, dtype,
                                 args, device))
    spec, function, full_defines = kernel_of(1, dtype)
    full_sizes = {"n1": sizes["n"], "n2": sizes["n"], "d": sizes["d"]}
    full_check = SMALL if args.small else CHECK
    row["full"] = default_and_tuned(spec, function, full_defines, full_sizes, full_check,
                                    dtype, args, device, tune=False)["default"]
    if args.backend == "gpu" and not args.small:
        row["torch"] = time_torch(n, n, d, 1, dtype, same=True)
    rate = rates.get(dtype)
    if rate:
        pairs = sizes["n"] * (sizes["n"] + 1) // 2
        row["issue_bound_ms"] = pairs * sizes["d"] * INSTRUCTIONS[1] / rate * 1e3
    row["seconds"] = round(time.time() - started, 1)
    print(summary({**row, "sizes": full_sizes}), file=sys.stderr, flush=True)
    return row


def self_markdown(data: dict) -> str:
    lines = ["## Symmetric self-distance (p = 1): `l1self.c` against the full product",
             "", "`l1self.c` computes each pair j <= i once and writes both D[i][j] and "
             "D[j][i]; `full` is `l1dist.c` (every pair, default plan) at n1 = n2 = n; "
             "torch is `cdist(x, x)` direct (no symmetric mode). Each program was "
             "checked against its loop nest at odd sizes on the device first. Half the "
             "pairs: `full / self` = 2 is a perfectly balanced triangle.", "",
             "| dtype | n | d | self default ms | self tuned ms | tune s | full default ms "
             "| full / self | torch direct ms | x direct (best) | issue bound ms | "
             "of bound (best) |",
             "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]

    for r in data["self_rows"]:
        s = r["sizes"]
        default = r.get("default", {}).get("ms")
        tuned = r.get("tuned", {}).get("ms")
        full = r.get("full", {}).get("ms")
        direct = r.get("torch", {}).get("direct_ms")
        best = min((x for x in (default, tuned) if x is not None), default=None)
        bound = r.get("issue_bound_ms")
        lines.append(
            f"| {r['dtype']} | {s['n']} | {s['d']} | {cell(default)} | {cell(tuned)} | "
            f"{r.get('tuned', {}).get('tune_s', '')} | {cell(full)} | "
            f"{cell(full / best if full and best else None, 2)} | {cell(direct)} | "
            f"{cell(direct / best if direct and best else None, 2)} | {cell(bound)} | "
            f"{cell(bound / best if bound and best else None, 2)} |")
    for r in data["self_rows"]:
        for key in ("default", "full"):
            check = r.get(key, {}).get("check", {})
            if not check.get("ok", True):
                lines += ["", f"- {key} {r['dtype']} {r['sizes']}: {check['message']}"]
        if "error" in r.get("tuned", {}):
            lines += ["", f"- tuned {r['dtype']} {r['sizes']}: {r['tuned']['error']}"]
    return "\n".join(lines) + "\n"


def summary(row: dict) -> str:
    s = row["sizes"]
    parts = [f"p={row['p']} {row['dtype']} n={s['n1']} d={s['d']}:"]
    for key in ("default", "tuned"):
        ms = row.get(key, {}).get("ms")
        if ms is not None:
            parts.append(f"{key} {ms:.3f} ms")
    for key in ("direct_ms", "mm_ms"):
        ms = row.get("torch", {}).get(key)
        if ms is not None:
            parts.append(f"torch {key[:-3]} {ms:.3f} ms")
    return " ".join(parts)


# --------------------------------------------------------------------------------------
# The <c, r, s, d'> sweep
# --------------------------------------------------------------------------------------


def sweep_variants(cs, rs, ss, ds, fast_math: bool = False,
                   min_block: int = 32) -> list[tuple[dict, Variant]]:
    """The paper's decomposition as variants: threads r x c, tile (r s) x c, slices d';
    no register tiles (``jam`` off: each thread's s rows one after another).  Blocks of
    ``min_block`` to 1024 threads."""
    out = []
    for c, r, s, dp in itertools.product(cs, rs, ss, ds):
        if r * c > 1024 or r * c < min_block:
            continue
        out.append(({"c": c, "r": r, "s": s, "dp": dp},
                    Variant(tile=(r * s, c), threads=(r, c), time_tile=dp,
                            fast_math=fast_math)))
    return out


_PREPARED = None


def _compile(args):
    variant, sizes = args
    try:
        return compile_variant(_PREPARED, variant, sizes).program
    except Exception as err:  # noqa: BLE001 -- reported per variant
        return f"{type(err).__name__}: {err}"


def run_sweep(args, device, rates: dict) -> dict:
    global _PREPARED
    n, d = SHAPES[0]
    p, dtype = args.sweep_p, "float32"
    spec, function, defines = kernel_of(p, dtype)
    sizes = dict(SMALL) if args.small else {"n1": n, "n2": n, "d": d}
    _PREPARED = prepare(spec, function, defines=defines, params=sizes)
    grid = sweep_variants(args.c, args.r, args.s, args.dp, args.fast_math, args.min_block)
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    with concurrent.futures.ProcessPoolExecutor(
            args.jobs, mp_context=multiprocessing.get_context(method)) as pool:
        programs = list(pool.map(_compile, [(v, sizes) for _, v in grid]))
    rows = []
    for (params, variant), program in zip(grid, programs, strict=True):
        row = {**params, "variant": variant.to_json()}
        if isinstance(program, str):
            row["error"] = program[:200]
        else:
            check = checked(spec, function, defines, variant, device,
                            SMALL if args.small else CHECK)
            row["check"] = check["ok"]
            if check["ok"]:
                row["ms"] = time_program(device, program, sizes, args.repeats)
            else:
                row["error"] = check["message"]
        rows.append(row)
        print(f"  {params}: {row.get('ms', row.get('error'))}", file=sys.stderr, flush=True)
    out = {"p": p, "dtype": dtype, "sizes": sizes, "rows": rows}
    if args.backend == "gpu" and not args.small:
        out["torch"] = time_torch(n, n, d, p, dtype)
    rate = rates.get(dtype)
    if rate:
        out["issue_bound_ms"] = sizes["n1"] * sizes["n2"] * sizes["d"] * INSTRUCTIONS[p] \
            / rate * 1e3
    return out


# --------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------


def markdown(data: dict) -> str:
    lines = [f"# All-pairs distances on the {data['gpu']}: polygpu vs torch.cdist "
             f"({data['date']})", "",
             "`tuning/allpairs.py`. Times: CUDA events, median (polygpu: one warm-up, then "
             "runs up to 1 s, at least 3; torch: one warm-up, then up to 2 s, at least 3). "
             "Every polygpu program was checked against the original loop nest on the "
             f"device at n1 = {CHECK['n1']}, n2 = {CHECK['n2']}, d = {CHECK['d']} first. "
             "`issue` = the FP32/FP64 instruction bound (see the script) at half the "
             "cuBLAS GEMM rate measured in this run; `x direct` = torch.cdist's direct "
             "mode time / polygpu's.", ""]
    if any(r.get("fast_math") for r in data["rows"]):
        lines += ["polygpu's programs use `--fast-math` (CUDA's intrinsics for expf, logf, "
                  "sinf, cosf, powf); each passed the usual check.", ""]
    if data.get("rates"):
        lines.append("GEMM rates in this run (fused multiply-adds/s): " + ", ".join(
            f"{k} {v / 1e12:.1f} T" for k, v in data["rates"].items()) + ".")
        lines.append("")
    lines += ["| p | dtype | n | d | default ms | tuned ms | tune s | torch direct ms | "
              "torch mm ms | x direct (default) | x direct (tuned) | issue bound ms | "
              "of bound (best) |",
              "|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in data["rows"]:
        s = r["sizes"]
        default = r.get("default", {}).get("ms")
        tuned = r.get("tuned", {}).get("ms")
        direct = r.get("torch", {}).get("direct_ms")
        mm = r.get("torch", {}).get("mm_ms")
        best = min(x for x in (default, tuned) if x is not None) if (default or tuned) \
            else None
        bound = r.get("issue_bound_ms")
        lines.append(
            f"| {r['p']} | {r['dtype']} | {s['n1']} | {s['d']} | {cell(default)} | {cell(tuned)} | "
            f"{r.get('tuned', {}).get('tune_s', '')} | {cell(direct)} | {cell(mm)} | "
            f"{cell(direct / default if direct and default else None, 2)} | "
            f"{cell(direct / tuned if direct and tuned else None, 2)} | {cell(bound)} | "
            f"{cell(bound / best if bound and best else None, 2)} |")
    errors = [r for r in data["rows"] if "error" in r.get("tuned", {})
              or not r.get("default", {}).get("check", {}).get("ok", True)]
    for r in errors:
        lines.append("")
        lines.append(f"- p = {r['p']} {r['dtype']} {r['sizes']}: "
                     f"{r.get('tuned', {}).get('error') or r['default']['check']['message']}")
    return "\n".join(lines) + "\n"


def sweep_markdown(data: dict) -> str:
    rows = [r for r in data["rows"] if "ms" in r]
    if not rows:
        return "no variant of the sweep ran\n"
    best, worst = min(rows, key=lambda r: r["ms"]), max(rows, key=lambda r: r["ms"])
    lines = [f"## <c, r, s, d'> sweep, p = {data['p']}, {data['dtype']}, "
             f"n = {data['sizes']['n1']}, d = {data['sizes']['d']}", "",
             f"{len(rows)} variants timed of {len(data['rows'])}; best {best['ms']:.3f} ms "
             f"at c = {best['c']}, r = {best['r']}, s = {best['s']}, d' = {best['dp']}; "
             f"worst {worst['ms']:.3f} ms: worst / best = {worst['ms'] / best['ms']:.1f}.", ""]
    direct = data.get("torch", {}).get("direct_ms")
    if direct:
        lines.append(f"torch.cdist direct in the same run: {direct:.3f} ms "
                     f"(best of the sweep: {direct / best['ms']:.2f}x).")
        lines.append("")
    lines += ["| c | r | s | d' | ms |", "|--:|--:|--:|--:|--:|"]
    for r in sorted(rows, key=lambda r: r["ms"]):
        lines.append(f"| {r['c']} | {r['r']} | {r['s']} | {r['dp']} | "
                     f"{r['ms']:.3f} |")
    failed = [r for r in data["rows"] if "error" in r]
    if failed:
        lines += ["", f"Not timed ({len(failed)}): " + "; ".join(
            f"c={r['c']} r={r['r']} s={r['s']} d'={r['dp']}: {r['error'][:80]}"
            for r in failed[:10])]
    return "\n".join(lines) + "\n"


# the model-versus-exhaustive space: one scheduler candidate, blocks of 256 or 128 threads
# (x 16 or 32), register tiles up to 4 x 4 in runs of 4, slices of 16 or 32, staged
REDUCED = dict(candidates=1, thread_totals=(256, 128), x_threads=(16, 32),
               factors=(1, 2, 4), time_tiles=(16, 32), unrolls=(1,), chunks=(4,),
               shared=(True,), blocked=(False,), wide_factors=())


def run_exhaustive(args) -> dict:
    """The model strategy (budget ``--tune``, default 8) against every variant of the
    reduced space (:data:`REDUCED`), both timed in full (no race) through the tuner, on
    fp32 at the first ``--shape`` (default the paper's 2000 x 5419; ``--small``: the odd
    small sizes) for ``--sweep-p``: where the model's pick lands among the exhaustive
    times (issue 20: within 10 % of the best).  The space at 2000 holds tiles that do not
    divide it (``space.MAX_IDLE``): 72 variants, as at 2048."""
    from polygpu.search.runner import ProcessRunner
    from polygpu.search.space import SpaceOptions
    from polygpu.search.tuner import TuneOptions, tune

    p = args.sweep_p
    spec, function, defines = kernel_of(p, "float32")
    n, d = tuple(int(x) for x in args.shape[0].lower().split("x")) if args.shape \
        else SHAPES[0]
    sizes = dict(SMALL) if args.small else {"n1": n, "n2": n, "d": d}
    space = SpaceOptions(**REDUCED, fast_math=args.fast_math)
    found = {}
    with ProcessRunner(args.backend) as runner:
        for strategy, budget in (("exhaustive", None), ("model", args.tune or 8)):
            t0 = time.time()
            result = tune(spec, sizes, runner, function=function, options=TuneOptions(
                strategy=strategy, budget=budget, space=space, race=None, defines=defines))
            timed = {c.key: c.measurement.time_ms for c in result.candidates
                     if c.measurement is not None and c.measurement.time_ms is not None
                     and c.measurement.status == "ok"}
            best = result.best
            found[strategy] = {"timed": len(timed), "space": len(result.candidates),
                               "seconds": round(time.time() - t0, 1),
                               "best": best.key if best else None,
                               "best_ms": best.measurement.time_ms if best else None,
                               "times": timed}
    full, model = found["exhaustive"], found["model"]
    out = {"p": p, "sizes": sizes, "space": REDUCED, "exhaustive": full, "model": model}
    if full["best_ms"] and model["best_ms"]:
        ranked = sorted(full["times"].values())
        out["gap"] = model["best_ms"] / full["best_ms"] - 1
        out["model_rank_in_exhaustive"] = sum(t < model["best_ms"] for t in ranked) + 1
    return out


def sweep_plot(sweep: dict, path: Path) -> None:
    """The paper's Figures 6-9 as one figure: the time against each of c, r, s and d',
    every variant of the sweep a grey point, the best at each value a line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in sweep["rows"] if "ms" in r]
    if not rows:
        return
    fig, axes = plt.subplots(1, 4, figsize=(14, 3.6), sharey=True)
    for ax, (key, label) in zip(axes, (("c", "c (columns)"), ("r", "r (rows)"),
                                       ("s", "s (subtiles)"), ("dp", "d' (slice width)")),
                                strict=True):
        values = sorted({r[key] for r in rows})
        ax.scatter([r[key] for r in rows], [r["ms"] for r in rows], s=8, color="0.7")
        ax.plot(values, [min(r["ms"] for r in rows if r[key] == v) for v in values],
                marker="o", color="C0", label="best at this value")
        ax.set_xscale("log", base=2)
        ax.set_xticks(values)
        ax.set_xticklabels([str(v) for v in values])
        ax.set_xlabel(label)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("ms (lower is better)")
    axes[0].legend(fontsize=8)
    s = sweep["sizes"]
    fig.suptitle(f"<c, r, s, d'> sweep, p = {sweep['p']}, {sweep['dtype']}, n = {s['n1']}, "
                 f"d = {s['d']} (the paper's scheme, no register tiles)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=("gpu", "cpu"), default="gpu")
    p.add_argument("--small", action="store_true", help="odd small sizes (a dry run)")
    p.add_argument("--shape", action="append", default=[], metavar="NxD",
                   help="n x d (repeatable; default: the paper's two shapes and 6000x5419)")
    p.add_argument("--p", type=float, action="append", default=[],
                   help="the exponent (repeatable; default 1, 2, 3; others through "
                   "lpdist.c -D P=p)")
    p.add_argument("--fast-math", action="store_true",
                   help="polygpu's programs with --fast-math (CUDA's intrinsics)")
    p.add_argument("--dtype", action="append", default=[], choices=("float32", "float64"))
    p.add_argument("--tune", type=int, default=0, metavar="B",
                   help="also tune with budget B (default: no)")
    p.add_argument("--tune-fp32-only", action="store_true")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--sweep", action="store_true", help="the <c, r, s, d'> sweep instead")
    p.add_argument("--sweep-p", type=int, default=1, choices=(1, 2, 3))
    p.add_argument("--c", type=int, nargs="+", default=[16, 32, 64], help="sweep: columns")
    p.add_argument("--r", type=int, nargs="+", default=[1, 2, 4, 8, 16], help="sweep: rows")
    p.add_argument("--s", type=int, nargs="+", default=[1, 2, 4, 8], help="sweep: subtiles")
    p.add_argument("--dp", type=int, nargs="+", default=[16, 32, 64, 128],
                   help="sweep: slice widths d'")
    p.add_argument("--jobs", type=int, default=8, help="sweep: compile processes")
    p.add_argument("--min-block", type=int, default=32,
                   help="sweep: the fewest threads a block (the paper's grid goes below "
                   "one warp: 1)")
    p.add_argument("--self", action="store_true",
                   help="the symmetric self-distance (l1self.c) against the full product")
    p.add_argument("--exhaustive", action="store_true",
                   help="the model strategy against every variant of a reduced space")
    p.add_argument("--plot", metavar="SWEEP_JSON",
                   help="only draw the plot of a recorded sweep (next to it, .png)")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    if args.plot:
        recorded = Path(args.plot)
        sweep_plot(json.loads(recorded.read_text())["sweep"], recorded.with_suffix(".png"))
        return 0

    device = get_device(args.backend)
    rates = {}
    if args.backend == "gpu":
        for dt in ("float32", "float64"):
            rate = gemm_instructions_per_s(dt)
            if rate:
                rates[dt] = rate
    data = {"gpu": getattr(device, "name", args.backend),
            "date": datetime.date.today().isoformat(), "rates": rates}
    out = Path(args.out) if args.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    if args.exhaustive:
        data["exhaustive"] = run_exhaustive(args)
        e = data["exhaustive"]
        text = (f"model vs exhaustive, p = {e['p']}, {e['sizes']}: exhaustive best "
                f"{e['exhaustive']['best_ms']} ms of {e['exhaustive']['timed']} timed; model "
                f"{e['model']['best_ms']} ms of {e['model']['timed']} timed, gap "
                f"{e.get('gap', float('nan')):.1%}, rank {e.get('model_rank_in_exhaustive')}\n")
        name = f"allpairs_exhaustive_vs_model_p{e['p']}"
    elif args.self:
        shapes = [tuple(int(x) for x in s.lower().split("x")) for s in args.shape] \
            or (SHAPES[:1] if args.small else SHAPES)
        data["self_rows"] = [run_self(n, d, dtype, args, device, rates) for (n, d), dtype
                             in itertools.product(shapes, args.dtype or ["float32"])]
        text = self_markdown(data)
        name = "allpairs_self"
    elif args.sweep:
        data["sweep"] = run_sweep(args, device, rates)
        text = sweep_markdown(data["sweep"])
        name = f"allpairs_sweep_p{args.sweep_p}"
        if out:
            sweep_plot(data["sweep"], out / f"{name}.png")
    else:
        shapes = [tuple(int(x) for x in s.lower().split("x")) for s in args.shape] or SHAPES
        rows = []
        exponents = [int(x) if float(x).is_integer() else x for x in args.p] or [1, 2, 3]
        for (n, d), dtype, pp in itertools.product(shapes, args.dtype or ["float32", "float64"],
                                                   exponents):
            rows.append(run_config(n, d, pp, dtype, args, device, rates))
        data["rows"] = rows
        text = markdown(data)
        name = "allpairs"
    print(text)
    if out:
        (out / f"{name}.json").write_text(json.dumps(data, indent=1) + "\n")
        (out / f"{name}.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
