"""PolyBench kernels in their classic textbook forms (``kernels/polybench/``): polygpu's
default plan and the best of a small plan search, against PPCG's recorded default.

For each kernel, at PolyBench's EXTRALARGE sizes (the ``gpu`` sizes of
``kernels/catalog.json``), in double:

1. **default** -- ``compile`` without options: the model's top plan;
2. **plan search** -- the best of a few plans: the first scheduler candidates, each
   with host loops launched from the host and (where there are host loops) run on the
   device in one block (``device_steps``), and two tile shapes.  Each plan is first
   checked against the original loop nest on the GPU at reduced sizes (``--check-scale``,
   the reference runs on the host in float64), then timed at full size;
3. timing: CUDA events around all launches of one run, 1 warm-up, median of
   ``--repeats``, through the one device layer (:mod:`polygpu.runtime.device`);
4. ``launches``: kernel launches per run at those sizes; ``vs PPCG``: PPCG's time in
   ``../shared/anchors/ppcg_polybench_h100.md`` (same H100, recorded 2026-11-22, not rerun
   here) divided by ours (> 1: polygpu faster).

A plan that runs a whole loop nest on one thread at these sizes is not timed (it would
take minutes); the table says so.

    python tuning/plans_polybench.py --repeats 5          # on the GPU machine
    python tuning/plans_polybench.py --backend cpu --small  # a dry run of the script
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from pathlib import Path

import islpy as isl
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from polygpu.pipeline import compile_variant, prepare  # noqa: E402
from polygpu.runtime import grid  # noqa: E402
from polygpu.runtime.check import check_program  # noqa: E402
from polygpu.runtime.device import get_device  # noqa: E402
from polygpu.schedule.variant import Variant  # noqa: E402

# PPCG default, EXTRALARGE, double, H100 (../shared/anchors/ppcg_polybench_h100.md);
# None: did not finish within its 25 s / 120 s limit there
PPCG_MS = {"atax": 0.666, "bicg": 0.70, "symm": 7.27, "doitgen": 1097.0, "lu": None,
           "cholesky": None, "trisolv": 30.7, "floyd_warshall": None}
PPCG_LIMIT_MS = {"lu": 25000.0, "cholesky": 120000.0, "floyd_warshall": 25000.0}
KERNELS = ["atax", "bicg", "symm", "doitgen", "lu", "cholesky", "trisolv",
           "floyd_warshall"]
SERIAL_LIMIT = 10**7  # instances one thread may run in a timed plan


def inputs(program, sizes, rng):
    """Random arguments for a program: integer sizes, float scalars 1.5, arrays in
    [0.5, 1.5) -- diagonals raised so factorizations stay finite."""
    values = {}
    for a in program.arguments:
        if a.kind == "scalar":
            values[a.name] = sizes[a.name] if a.name in sizes else 1.5
        elif a.kind == "array":  # scratch arrays: the device layer allocates them
            shape = tuple(grid.evaluate(e, sizes) for e in a.shape)
            dtype = np.dtype(a.dtype)
            v = rng.uniform(0.5, 1.5, shape).astype(dtype)
            if len(shape) == 2 and shape[0] == shape[1] and dtype.kind == "f":
                v += np.eye(shape[0], dtype=dtype) * shape[0]
            values[a.name] = v
    return values


def serial_work(compiled, sizes) -> int:
    """An upper bound of the instances one thread runs in one launch of a one-thread
    kernel (the box of each statement's domain at ``sizes``, host iterators at their
    worst)."""
    from polygpu.model.scop import fix_parameters
    scop = compiled.kernel_scop
    worst = 0
    for kernel in compiled.kernels:
        if kernel.n_mapped:
            continue
        for name in kernel.statements:
            dom = fix_parameters(scop.statement(name).domain, sizes)
            if dom.is_empty():
                continue
            points = 1
            for d in range(dom.dim(isl.dim_type.set)):
                extent = dom.dim_max(d).sub(dom.dim_min(d)).max_val().to_python() + 1
                points *= max(1, int(extent))
            worst += points
    return worst


def plans(prepared, limit: int):
    """The plans of the small search: (label, variant)."""
    out = []
    for c, tr in enumerate(prepared.candidates[:limit]):
        for tile, threads in (((4, 128), (4, 128)), ((32, 32), (8, 32))):
            label = f"candidate {c} ({tr.origin}), tile {list(tile)}"
            out.append((label, Variant(candidate=c, tile=tile, threads=threads)))
            if tr.host is not None:
                out.append((label + ", device steps",
                            Variant(candidate=c, tile=tile, threads=threads,
                                    device_steps=True)))
    return out


def measure(device, program, sizes, repeats):
    rng = np.random.default_rng(7)
    values = inputs(program, sizes, rng)
    times = device.time(program, [values], repeats=repeats, warmup=1)
    return statistics.median(times)


def run_kernel(name, entry, args, device, backend):
    spec = str(ROOT / "kernels" / "polybench" / f"{name}.c")
    sizes = dict(entry["small" if args.small else "gpu"])
    small = {k: max(3, v // args.check_scale) | 1 for k, v in sizes.items()}
    if args.small:
        small = sizes
    started = time.time()
    prepared = prepare(spec, entry["function"], params=sizes)
    checked_prepared = prepare(spec, entry["function"], params=small)
    rows = []
    default_label = "default"
    candidates = [(default_label, Variant())] + plans(prepared, args.candidates)
    for label, variant in candidates:
        row = {"plan": label, "variant": variant.to_json()}
        try:
            compiled = compile_variant(prepared, variant, sizes)
        except Exception as err:  # noqa: BLE001 -- a plan the variant cannot take
            row["error"] = str(err).splitlines()[0][:200]
            rows.append(row)
            continue
        program = compiled.program
        row["launches"] = len(program.steps(sizes))
        row["kernels"] = [list(k.statements) for k in compiled.kernels]
        row["host_loops"] = list(compiled.transformation.host.names) \
            if compiled.transformation.host else []
        serial = serial_work(compiled, sizes)
        if serial >= SERIAL_LIMIT:
            row["skipped"] = f"one thread runs ~{serial:.2e} instances per launch"
            rows.append(row)
            continue
        small_compiled = compile_variant(checked_prepared, variant, small)
        result = check_program(small_compiled.program, small_compiled.source_scop, spec,
                               small, backend=device, seed=11)
        row["check"] = {"ok": result.ok, "sizes": small,
                        "worst": max(result.max_relative_error.values(), default=0.0)}
        if not result.ok:
            row["error"] = "check failed: " + result.message[:300]
            rows.append(row)
            continue
        row["ms"] = measure(device, program, sizes, args.repeats)
        rows.append(row)
        print(f"  {name}: {label}: {row['launches']} launches, {row['ms']:.3f} ms",
              file=sys.stderr, flush=True)
    timed = [r for r in rows if "ms" in r]
    best = min(timed, key=lambda r: r["ms"]) if timed else None
    default = rows[0]
    return {"kernel": name, "sizes": sizes, "rows": rows,
            "default": default, "best": best, "seconds": time.time() - started}


def ratio(ppcg, ms, name):
    if ms is None:
        return None
    if ppcg is None:
        return f"> {PPCG_LIMIT_MS[name] / ms:.0f}"
    return f"{ppcg / ms:.2f}"


def markdown(results, gpu, date):
    lines = [f"# PolyBench classic forms: polygpu plans vs PPCG ({gpu}, {date})", "",
             "Sizes: EXTRALARGE, double (floyd-warshall: int). `default` = the model's "
             "top plan; `plan search` = best of the small plan search in "
             "`tuning/plans_polybench.py` (candidates x host/device steps x 2 tiles, each "
             "checked on the GPU against the original at reduced sizes first). PPCG ms "
             "from `../shared/anchors/ppcg_polybench_h100.md` (recorded 2026-11-22, not "
             "rerun); `vs PPCG` = PPCG ms / polygpu ms (> 1: polygpu faster; '> x' where "
             "PPCG did not finish in its limit).", "",
             "| kernel | default ms | launches | vs PPCG | plan search ms | launches | "
             "vs PPCG | best plan | PPCG ms |", "|---|--:|--:|--:|--:|--:|--:|---|--:|"]
    for r in results:
        name = r["kernel"]
        d, b = r["default"], r["best"]
        ppcg = PPCG_MS[name]
        dms = d.get("ms")
        if dms is None:
            default = f"not timed ({d.get('skipped') or d.get('error', '')})"
        else:
            default = f"{dms:.3f}"
        cells = [name, default, str(d.get("launches", "")), ratio(ppcg, dms, name) or ""]
        if b is None:
            cells += ["", "", "", ""]
        else:
            cells += [f"{b['ms']:.3f}", str(b["launches"]), ratio(ppcg, b["ms"], name),
                      b["plan"]]
        cells.append(str(ppcg) if ppcg else f"> {PPCG_LIMIT_MS[name]:.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="gpu")
    p.add_argument("--small", action="store_true", help="catalog small sizes (dry run)")
    p.add_argument("--kernel", action="append", choices=KERNELS)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--candidates", type=int, default=2)
    p.add_argument("--check-scale", type=int, default=8)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    catalog = json.loads((ROOT / "kernels" / "catalog.json").read_text())
    device = get_device(args.backend)
    gpu = device.name() if callable(device.name) else device.name
    date = datetime.date.today().isoformat()
    out = Path(args.out) if args.out else ROOT / "tuning" / "results" / \
        str(gpu).replace(" ", "-")
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for name in args.kernel or KERNELS:
        print(f"{name} ...", file=sys.stderr, flush=True)
        results.append(run_kernel(name, catalog[f"polybench/{name}.c"], args, device,
                                  args.backend))
        # written after every kernel: a run stopped midway keeps what it measured
        (out / "plans_polybench.json").write_text(json.dumps(
            {"gpu": str(gpu), "date": date, "results": results}, indent=1, default=str))
        (out / "plans_polybench.md").write_text(markdown(results, gpu, date))
    print(markdown(results, gpu, date))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
