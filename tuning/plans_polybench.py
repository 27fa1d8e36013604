"""PolyBench kernels in their classic textbook forms (``kernels/polybench/``): polygpu's
default plan and the best of a small plan search, against PPCG's recorded default.

For each kernel, at PolyBench's EXTRALARGE sizes (the ``gpu`` sizes of
``kernels/catalog.json``), in double:

1. **default** -- ``compile -p`` at these sizes without variant options: the cost
   model's top plan (:func:`polygpu.search.plan_model.choose`);
2. **plan search** -- every plan the model ranked (the best scheduler candidates, each
   with a few block shapes, host loops launched from the host and, where there are
   host loops, run on the device in one block), plus the fixed default (candidate 0,
   tile 4x128) that ``compile`` used before the model chose.  Each row records the
   model's predicted time beside the measured one (the data that
   ``tests/test_plan_model.py`` replays).  Each plan is first
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
from polygpu.search import plan_model  # noqa: E402

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


def label(prepared, v: Variant) -> str:
    tr = prepared.candidates[v.candidate]
    text = f"candidate {v.candidate} ({tr.origin}), tile {list(v.tile)}"
    text += f" threads {list(v.threads)}" if v.threads != v.tile else ""
    text += ", jam" if v.jam else ""
    text += f", chunk {v.chunk}" if v.chunk > 1 else ""
    return text + (", device steps" if v.device_steps else "")


def plans(prepared, sizes):
    """The rows: the model's choice first, then every plan it ranked and the fixed
    default: (label, variant, predicted ms or None)."""
    choice = plan_model.choose(prepared, sizes)
    out = [("default", choice.variant, round(choice.ranking[0].seconds * 1e3, 4))]
    for e in choice.ranking:
        ms = None if e.error else round(e.seconds * 1e3, 4)
        out.append((label(prepared, e.variant), e.variant, ms))
    if all(v != Variant() for _, v, _ in out):
        out.append(("fixed default " + label(prepared, Variant()), Variant(), None))
    return out


def measure(device, program, sizes, repeats):
    rng = np.random.default_rng(7)
    values = inputs(program, sizes, rng)
    times = device.time(program, [values], repeats=repeats, warmup=1)
    return statistics.median(times)


def run_kernel(name, entry, args, device, backend, previous=None):
    spec = str(ROOT / "kernels" / "polybench" / f"{name}.c")
    sizes = dict(entry["small" if args.small else "gpu"])
    small = {k: max(3, v // args.check_scale) | 1 for k, v in sizes.items()}
    if args.small:
        small = sizes
    started = time.time()
    prepared = prepare(spec, entry["function"], params=sizes)
    checked_prepared = prepare(spec, entry["function"], params=small)
    rows = []
    found = plans(prepared, sizes)
    if args.tune_only:  # the default alone, timed again beside the tune in this run
        found = found[:1]
    fastest = min(p for _, _, p in found if p is not None)
    done = {}  # variant JSON -> its row (the default is also in the ranking)
    for name_, variant, predicted in found:
        row = {"plan": name_, "variant": variant.to_json(), "predicted_ms": predicted}
        key = json.dumps(row["variant"], sort_keys=True)
        if key in done:
            row.update({k: v for k, v in done[key].items()
                        if k not in ("plan", "predicted_ms")})
            rows.append(row)
            continue
        done[key] = row
        if predicted is not None and predicted > args.predicted_limit * fastest:
            row["skipped"] = (f"predicted {predicted:.1f} ms, more than "
                              f"{args.predicted_limit:g}x the model's best")
            rows.append(row)
            continue
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
        print(f"  {name}: {name_}: {row['launches']} launches, {row['ms']:.3f} ms",
              file=sys.stderr, flush=True)
    timed = [r for r in rows if "ms" in r]
    best = min(timed, key=lambda r: r["ms"]) if timed else None
    default = rows[0]
    tuned = tune_row(spec, entry["function"], sizes, args, device, backend) \
        if args.tune else None
    if tuned is not None and "ms" in default:
        tuned["default_ms_same_run"] = default["ms"]
    result = {"kernel": name, "sizes": sizes, "rows": rows, "default": default,
              "best": best, "tuned": tuned, "seconds": time.time() - started}
    if args.tune_only and previous is not None:
        # the recorded plan search stays; the tune and the default timed beside it join
        result = dict(previous, tuned=tuned, tuned_date=datetime.date.today().isoformat())
    return result


def tune_row(spec, function, sizes, args, device, backend):
    """``polygpu tune`` at these sizes (the model strategy, ``--tune`` timed variants,
    each checked against the original first), through the API; its best variant is
    timed again here like every other row."""
    from polygpu.api import optimize

    started = time.time()
    try:
        kernel = optimize(spec, params=sizes, function=function, tune=True,
                          strategy=args.strategy, budget=args.tune, database=False,
                          backend=backend)
    except Exception as err:  # noqa: BLE001 -- recorded, the other kernels go on
        return {"plan": f"tune, budget {args.tune}", "strategy": args.strategy,
                "error": str(err).splitlines()[0]}
    row = {"plan": f"tune, budget {args.tune}", "strategy": args.strategy,
           "budget": args.tune, "variant": kernel.variant.to_json(),
           "tuner_ms": kernel.measurement.time_ms, "tune_seconds": time.time() - started,
           "launches": len(kernel.program.steps(sizes))}
    row["ms"] = measure(device, kernel.program, sizes, args.repeats)
    print(f"  tuned: {row['ms']:.3f} ms in {row['tune_seconds']:.0f} s", file=sys.stderr,
          flush=True)
    return row


def ratio(ppcg, ms, name):
    if ms is None:
        return None
    if ppcg is None:
        return f"> {PPCG_LIMIT_MS[name] / ms:.0f}"
    return f"{ppcg / ms:.2f}"


def markdown(results, gpu, date):
    lines = [f"# PolyBench classic forms: polygpu plans vs PPCG ({gpu}, {date})", "",
             "Sizes: EXTRALARGE, double (floyd-warshall: int). `default` = the model's "
             "top plan at these sizes; `plan search` = the best of every plan the model "
             "ranked and the fixed default (`tuning/plans_polybench.py`), each "
             "checked on the GPU against the original at reduced sizes first. PPCG ms "
             "from `../shared/anchors/ppcg_polybench_h100.md` (recorded 2026-11-22, not "
             "rerun); `vs PPCG` = PPCG ms / polygpu ms (> 1: polygpu faster; '> x' where "
             "PPCG did not finish in its limit).", "",
             "`tuned` = `polygpu tune` (model strategy) with the budget in its row's JSON.",
             "",
             "| kernel | default ms | launches | vs PPCG | plan search ms | launches | "
             "vs PPCG | best plan | tuned ms | vs PPCG | PPCG ms |",
             "|---|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|"]
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
        t = r.get("tuned") or {}
        cells += [f"{t['ms']:.3f}", ratio(ppcg, t["ms"], name)] if "ms" in t else [
            t.get("error", "")[:60], ""]
        cells.append(str(ppcg) if ppcg else f"> {PPCG_LIMIT_MS[name]:.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    tuned = [r for r in results if (r.get("tuned") or {}).get("ms") is not None]
    if tuned:
        lines += ["", "## Tuned plans", "",
                  "`polygpu tune` through `polygpu.optimize(tune=True)`, no database; its "
                  "best variant timed again like every row; `default (same run)` = the "
                  "default plan timed in the same run as the tune.", "",
                  "| kernel | strategy | budget | tune s | tuned ms | launches | "
                  "default (same run) ms | default / tuned | vs PPCG | date |",
                  "|---|---|--:|--:|--:|--:|--:|--:|--:|---|"]
        for r in tuned:
            t = r["tuned"]
            same = t.get("default_ms_same_run")
            lines.append(
                f"| {r['kernel']} | {t.get('strategy', 'model')} | {t.get('budget', '')} | "
                f"{t.get('tune_seconds', 0):.0f} | {t['ms']:.3f} | {t.get('launches', '')} | "
                + (f"{same:.3f} | {same / t['ms']:.2f}" if same else " | ")
                + f" | {ratio(PPCG_MS[r['kernel']], t['ms'], r['kernel'])} | "
                f"{r.get('tuned_date', '')} |")
    lines += ["", "## Every plan: the model's prediction beside the measurement", ""]
    for r in results:
        lines += [f"### {r['kernel']} {r['sizes']}", "",
                  "| plan | predicted ms | measured ms | launches |", "|---|--:|--:|--:|"]
        for row in r["rows"]:
            measured = f"{row['ms']:.3f}" if "ms" in row else (
                row.get("skipped") or row.get("error", ""))[:90]
            lines.append(f"| {row['plan']} | {row.get('predicted_ms')} | {measured} | "
                         f"{row.get('launches', '')} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def redefault(path: Path) -> None:
    """Without a GPU: the model chooses again (the current code) for every recorded
    kernel, and where its plan was measured in that run, that row becomes the kernel's
    ``default`` (marked ``"default_from": "recomputed"``); the Markdown is rewritten.  For
    a model change after the GPU run that picks a plan the run already timed."""
    data = json.loads(path.read_text())
    for r in data["results"]:
        spec = str(ROOT / "kernels" / "polybench" / f"{r['kernel']}.c")
        chosen = plan_model.choose(prepare(spec, params=r["sizes"]), r["sizes"]).variant
        key = json.dumps(chosen.to_json(), sort_keys=True)
        same = [row for row in r["rows"] if "ms" in row and json.dumps(
            Variant.from_json(row["variant"]).to_json(), sort_keys=True) == key]
        if same and same[0] is not r["rows"][0]:
            r["default"] = dict(same[0], plan="default", default_from="recomputed")
            r["rows"][0] = r["default"]
    path.write_text(json.dumps(data, indent=1, default=str))
    path.with_suffix(".md").write_text(markdown(data["results"], data["gpu"], data["date"]))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--redefault", metavar="JSON",
                   help="no GPU: make the current model's plan each kernel's default row "
                   "where that run measured it, and rewrite the Markdown")
    p.add_argument("--backend", default="gpu")
    p.add_argument("--small", action="store_true", help="catalog small sizes (dry run)")
    p.add_argument("--kernel", action="append", choices=KERNELS)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--check-scale", type=int, default=8)
    p.add_argument("--predicted-limit", type=float, default=40.0,
                   help="skip plans the model predicts this many times slower than its best")
    p.add_argument("--out", default=None)
    p.add_argument("--tune", type=int, default=0, metavar="BUDGET",
                   help="also run polygpu tune (model strategy) with this budget")
    p.add_argument("--strategy", default="model", help="the tune's strategy")
    p.add_argument("--tune-only", action="store_true",
                   help="with --tune and --keep: time the default plan and the tune only, "
                   "keeping the recorded plan search of each kernel")
    p.add_argument("--keep", action="store_true",
                   help="keep the recorded results of the kernels not run now")
    args = p.parse_args(argv)
    if args.redefault:
        redefault(Path(args.redefault))
        return 0
    catalog = json.loads((ROOT / "kernels" / "catalog.json").read_text())
    device = get_device(args.backend)
    gpu = device.name() if callable(device.name) else device.name
    date = datetime.date.today().isoformat()
    out = Path(args.out) if args.out else ROOT / "tuning" / "results" / \
        str(gpu).replace(" ", "-")
    out.mkdir(parents=True, exist_ok=True)
    results, recorded = [], {}
    previous = out / "plans_polybench.json"
    if args.keep and previous.exists():  # kernels not rerun keep their recorded rows
        recorded = {r["kernel"]: r for r in json.loads(previous.read_text())["results"]}
        results = [r for r in recorded.values() if r["kernel"] not in (args.kernel or KERNELS)]
    for name in args.kernel or KERNELS:
        print(f"{name} ...", file=sys.stderr, flush=True)
        results.append(run_kernel(name, catalog[f"polybench/{name}.c"], args, device,
                                  args.backend, recorded.get(name)))
        # written after every kernel: a run stopped midway keeps what it measured
        (out / "plans_polybench.json").write_text(json.dumps(
            {"gpu": str(gpu), "date": date, "results": results}, indent=1, default=str))
        (out / "plans_polybench.md").write_text(markdown(results, gpu, date))
    print(markdown(results, gpu, date))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
