"""``polygpu analyze``: the polyhedral model of a region, as tables or one JSON object,
optionally with the modelled global-memory traffic of a compiled variant."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

from polygpu.cli.arguments import (
    add_input_arguments,
    add_variant_arguments,
    given_params,
    variant_from_args,
)
from polygpu.errors import PolygpuError

# isl operations --traffic may spend counting (isl does about half a million a second)
TRAFFIC_OPERATIONS = 20_000_000


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "analyze",
        help="explain the polyhedral model of a loop nest",
        description="Build the exact polyhedral model of the affine region of FILE and "
        "report its statements, accesses with their reuse class, exact dependences "
        "(flow, anti, output) and the parallel loops.",
    )
    add_input_arguments(p)
    p.add_argument("--json", action="store_true",
                   help="print exactly one JSON object instead of tables")
    p.add_argument("--traffic", action="store_true",
                   help="also model global-memory traffic per kernel and array for "
                   "the compiled variant (needs -p for every parameter)")
    p.add_argument("--plan", action="store_true",
                   help="also rank the default plans with the cost model at the -p sizes "
                   "(every parameter needed), as compile -p chooses: per plan the "
                   "scheduler candidate, block shape, host or device steps, launches and "
                   "predicted time; and the temporaries expanded before scheduling")
    add_variant_arguments(p)
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    from polygpu.frontend import load
    from polygpu.model.analysis import analyze
    from polygpu.model.build import build_scop
    from polygpu.model.report import render, to_json

    program = load(args.file, args.function, args.defines, args.include_dirs)
    result = analyze(build_scop(program))
    traffic = modelled_traffic(args, result) if args.traffic else None
    plan = ranked_plans(args, result) if args.plan else None
    for warning in result.warnings:
        print(warning, file=sys.stderr)
    if args.json:
        data = to_json(result)
        if traffic is not None:
            data["traffic"] = [
                {"kernel": t.kernel, "array": t.array, "loads": t.loads, "stores": t.stores,
                 "bytes": t.bytes} for t in traffic]
        if plan is not None:
            data["plan_choice"], data["expansion"] = plan[0].to_json(), plan[1]
        print(json.dumps(data, indent=2))
    else:
        from rich.console import Console
        from rich.table import Table

        console = Console()
        render(result, console)
        if traffic is not None:
            table = Table(title="Modelled global-memory traffic (paper §4.6)",
                          title_justify="left")
            for col in ("kernel", "array", "loads", "stores", "bytes"):
                table.add_column(col, justify="right" if col != "array" else "left")
            for t in traffic:
                table.add_row(t.kernel, t.array, f"{t.loads:,}", f"{t.stores:,}",
                              f"{t.bytes:,}")
            console.print(table)
        if plan is not None:
            render_plans(plan, console)
    return 0


def ranked_plans(args: argparse.Namespace, result):
    """``--plan``: the cost model's ranking of the default plans at the ``-p`` sizes
    (:func:`polygpu.search.plan_model.choose`) and the expansion of temporaries the
    scheduler saw, as ``(PlanChoice, [{array, copy, loops}...])``."""
    from polygpu.pipeline import prepare
    from polygpu.runtime import inputs
    from polygpu.search import plan_model

    program, params, _ = given_params(args)
    missing = [p for p in result.scop.parameters if p not in params]
    if missing:
        raise PolygpuError(f"--plan needs a value for {', '.join(missing)} "
                           f"(e.g. -p {missing[0]}=4096)", result.scop.loc)
    inputs.require_context(program, result.scop.context, params)
    prepared = prepare(args.file, args.function, args.defines, args.include_dirs, params)
    expansion = prepared.expansion.to_json() if prepared.expansion is not None else []
    return plan_model.choose(prepared, params), expansion


def render_plans(plan, console) -> None:
    from rich.table import Table

    choice, expansion = plan
    if expansion:
        table = Table(title="Temporaries expanded before scheduling (transform/expand.py)",
                      title_justify="left")
        for col in ("array", "expanded along", "copy", "why"):
            table.add_column(col)
        for e in expansion:
            table.add_row(e["array"], ", ".join(e.get("loops", [])) or "-",
                          e.get("copy", "-"), e.get("reason") or e.get("refused", ""))
        console.print(table)
    table = Table(title="Default plans ranked by the cost model (search/plan_model.py)",
                  title_justify="left")
    for col in ("rank", "candidate", "tile", "threads", "steps", "launches",
                "predicted ms", "why"):
        table.add_column(col, justify="right" if col in ("rank", "launches",
                                                         "predicted ms") else "left")
    for k, e in enumerate(choice.ranking):
        v = e.variant
        table.add_row(str(k), str(v.candidate), "x".join(map(str, v.tile)) +
                      (" jam" if v.jam else ""), "x".join(map(str, v.threads)),
                      ("device" if v.device_steps else "host")
                      + (f", split at {','.join(map(str, v.splits))}" if v.splits else "")
                      + (f", cut at {','.join(map(str, v.cuts))}" if v.cuts else ""),
                      f"{e.launches:,}" if not e.error else "",
                      "" if e.error else f"{e.seconds * 1e3:,.3f}", e.error or e.detail)
    console.print(table)


def modelled_traffic(args: argparse.Namespace, result):
    """``--traffic``: per launch and array, the exact loads and stores of the variant
    the arguments describe, at the sizes ``-p`` gives (all of them needed)."""
    from polygpu.memory.traffic import kernel_traffic
    from polygpu.model.isl_budget import OutOfBudget, isl_operation_budget
    from polygpu.pipeline import compile_region
    from polygpu.runtime import inputs

    program, params, _ = given_params(args)
    missing = [p for p in result.scop.parameters if p not in params]
    if missing:
        raise PolygpuError(f"--traffic needs a value for {', '.join(missing)} "
                           f"(e.g. -p {missing[0]}=4096)", result.scop.loc)
    inputs.require_context(program, result.scop.context, params)
    compiled = compile_region(args.file, args.function, variant_from_args(args),
                              args.defines, args.include_dirs, params)
    # the counts are symbolic (barvinok, memory/traffic.py); an isl operation budget
    # still bounds a count that would not end soon (a fallback that scans points)
    ctx = compiled.kernel_scop.context.get_ctx()
    too_long = PolygpuError(
        f"--traffic at {', '.join(f'{k}={v}' for k, v in params.items())}: counting the "
        "traffic exactly would take too long at these sizes (isl enumerates the tiles); "
        "use smaller sizes (the traffic scales with them)", result.scop.loc)
    try:
        with isl_operation_budget(ctx, TRAFFIC_OPERATIONS):
            try:
                return [replace(t, loads=t.loads * times, stores=t.stores * times)
                        for k, name, values, times in compiled.modelled_launches(params)
                        for t in kernel_traffic(compiled.kernel_scop, k, name, values,
                                                compiled.memory)]
            except TypeError:
                # a count cut short by the budget comes back as NaN, not as an isl error
                import islpy as isl

                isl.Set.universe(isl.Space.set_alloc(ctx, 0, 1)).lexmin()  # OutOfBudget?
                raise
    except OutOfBudget:
        raise too_long from None
