"""``polygpu tune``: the search from the command line, with a live progress bar.

It prints a table of the best variants (time, GFLOP/s, achieved bandwidth, fraction of
the roofline and, for regions that are a BLAS call, the ratio to cuBLAS timed in the
same run), writes the best kernel as ``OUTDIR/FUNCTION.cu`` + ``.json`` (as ``compile``
does, plus the tuning record) and optionally a report (``--report DIR``).
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from pathlib import Path

from polygpu.cli.arguments import (
    add_fast_math_argument,
    add_input_arguments,
    count_value,
    given_params,
    nonnegative_float,
    positive_float,
    seed_value,
)
from polygpu.errors import PolygpuError
from polygpu.search.strategies import STRATEGIES

TOP = 10


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "tune",
        help="search for the fastest variant on the GPU and write it",
        description="Model-pruned empirical search (docs/search.md): enumerate variants "
        "(scheduler candidates x block/thread tiles x time tiles x unroll/register tiles), "
        "prune by modelled traffic and by occupancy from ptxas' register and shared-memory "
        "report, check every candidate against the original loop nest, time the survivors "
        "with CUDA events in child processes, record every measurement in the tuning "
        "database, and write the best kernel to OUTDIR.",
    )
    add_input_arguments(p)
    p.add_argument("-p", "--param", dest="params", action="append", default=[],
                   metavar="NAME=VALUE", help="value of a scalar parameter: an integer size "
                   "(all are needed) or a float scalar (repeatable)")
    p.add_argument("-o", "--output", metavar="OUTDIR", required=True,
                   help="directory for the best kernel's FUNCTION.cu and FUNCTION.json")
    p.add_argument("--strategy", choices=tuple(STRATEGIES), default="model",
                   help="model: the paper's pruned search (default); exhaustive: every "
                   "variant; random: a seeded random sample (use --budget); per-kernel: "
                   "the model's plan, then each of its kernels tuned in turn by its own "
                   "launch time and the best combined")
    p.add_argument("--budget", type=count_value(1), metavar="N",
                   help="time at most N candidates (default: all the strategy keeps)")
    p.add_argument("--time-limit", type=positive_float, metavar="S",
                   help="stop timing new candidates once the search has taken S seconds "
                   "(and one was timed); the step in progress ends first (default: none)")
    p.add_argument("--traffic-slack", type=nonnegative_float, default=50.0, metavar="P",
                   help="model: drop structures with more than P%% more modelled global "
                   "traffic than the fewest (default 50)")
    p.add_argument("--min-concurrency", type=nonnegative_float, default=0.25, metavar="F",
                   help="model: drop variants below F times the best concurrency "
                   "(default 0.25)")
    p.add_argument("--db", metavar="PATH",
                   help="tuning database (default: $POLYGPU_TUNING_DB or "
                   "~/.cache/polygpu/tuning.sqlite)")
    p.add_argument("--no-db", action="store_true",
                   help="neither reuse nor record measurements")
    p.add_argument("--report", metavar="DIR",
                   help="write report.md, report.html and PNG plots to DIR")
    p.add_argument("--backend", choices=("gpu", "cpu"), default="gpu",
                   help="gpu: PyCUDA and CUDA events (default); cpu: the host emulator "
                   "(small sizes; its times are not GPU times)")
    p.add_argument("--gpus", metavar="LIST",
                   help="measure on several GPUs of this machine at once, one Dask worker "
                   "each: 'all' or indices such as 0,1 (with --backend cpu: emulator "
                   "workers, as many as listed; docs/distributed.md)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="measure on the workers of a running Dask cluster, e.g. "
                   "tcp://HOST:8786 (each started with --nthreads 1 --resources GPU=1 and "
                   "one GPU; docs/distributed.md)")
    p.add_argument("--replay", metavar="FILE",
                   help="take measurements from a recorded replay file instead of running "
                   "anything (for tests and CI)")
    p.add_argument("--check-param", dest="check_params", action="append", default=[],
                   metavar="NAME=VALUE", help="parameters of the reference check (default: "
                   "at most two tiles plus a remainder)")
    p.add_argument("--timeout", type=positive_float, default=120.0, metavar="S",
                   help="seconds one candidate may take, check and timing (default 120)")
    p.add_argument("--repeats", type=count_value(1), metavar="N", help="timed runs per candidate "
                   "(default 20 on the GPU)")
    p.add_argument("--time-budget", type=nonnegative_float, default=None, metavar="MS",
                   help="milliseconds of timed runs per candidate after which fewer than "
                   "--repeats are taken, at least 3 (default 1000; 0: always --repeats)")
    p.add_argument("--race", type=nonnegative_float, default=1.25, metavar="F",
                   help="stop timing a candidate once more than half of its runs (2 at "
                   "least) are over F times the best median so far, after 1 once it is "
                   "over 2F: it cannot "
                   "win; a check at the timed sizes is given up once its run is over 4 "
                   "times the best, and 50 ms (default 1.25; 0: time every candidate in "
                   "full)")
    p.add_argument("--seed", type=seed_value, default=0,
                   help="random strategy and inputs (0 to 2**32-1)")
    p.add_argument("--jobs", type=count_value(1), metavar="N",
                   help="parallel compile processes (default: CPUs)")
    p.add_argument("--no-peer", action="store_true",
                   help="do not time the matching cuBLAS call")
    add_fast_math_argument(p)
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    p.set_defaults(run=run)
    return p


def _runner(args):
    from polygpu.search.runner import DEFAULT_BUDGET_MS, ProcessRunner, ReplayRunner

    if args.replay:
        return _replay_runner(ReplayRunner, args.replay)
    budget = DEFAULT_BUDGET_MS if args.time_budget is None else (args.time_budget or None)
    if args.gpus is not None or args.scheduler is not None:
        from polygpu.search.distributed import runner_for

        return runner_for(gpus=args.gpus, scheduler=args.scheduler, backend=args.backend,
                          timeout_s=args.timeout, repeats=args.repeats, budget_ms=budget)
    return ProcessRunner(args.backend, timeout_s=args.timeout, repeats=args.repeats,
                         budget_ms=budget)


def _replay_runner(cls, path: str):
    """The replay file read now, before any work: a clear error when it is not one."""
    import json

    if not Path(path).is_file():
        raise PolygpuError(f"{path}: no such replay file (--replay)"
                           if not Path(path).exists() else
                           f"{path}: the replay file (--replay) is not a file")
    try:
        return cls(path)
    except OSError as err:
        raise PolygpuError(f"{path}: cannot read the replay file ({err.strerror or err})"
                           ) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise PolygpuError(f"{path}: the replay file is not JSON ({err})") from None
    except (KeyError, TypeError, AttributeError, ValueError) as err:
        raise PolygpuError(f"{path}: not a replay file written by polygpu "
                           f"(bad or missing field {err})") from None


def _validate(args: argparse.Namespace):
    """Every user mistake that can be seen before the search, seen now: the output,
    report, database and cache directories writable, the parameters those of the
    function (types, C-type ranges, the region's assumptions).  Returns (integer
    parameters, float scalars, check parameters)."""
    from polygpu.output import require_writable_dir, require_writable_file
    from polygpu.runtime import compiler, inputs
    from polygpu.search.database import default_path

    program, params, scalars = given_params(args)
    _, check_params, _ = given_params(args, option="--check-param",
                                       items=args.check_params)
    from polygpu.model.build import build_scop

    scop = build_scop(program)
    missing = [p for p in scop.parameters if p not in params]
    if missing:
        raise PolygpuError(f"tune needs a value for {', '.join(missing)} "
                           f"(e.g. -p {missing[0]}=4096)", scop.loc)
    inputs.require_context(program, scop.context, params)
    if check_params:
        inputs.require_context(program, scop.context, check_params)
    require_writable_dir(args.output, "output directory (-o)")
    if args.report:
        require_writable_dir(args.report, "report directory (--report)")
    if not args.no_db:
        require_writable_file(args.db or default_path(),
                              "tuning database" + (" (--db)" if args.db else ""))
    if not args.replay:
        compiler.cache_dir()
    if args.replay and (args.gpus is not None or args.scheduler is not None):
        raise PolygpuError("--replay measures nothing: it takes no --gpus or --scheduler")
    if args.gpus is not None and args.scheduler is not None:
        raise PolygpuError("--gpus and --scheduler: one of them (a cluster's workers have "
                           "their GPUs already)")
    if args.gpus is not None and args.backend == "gpu":
        from polygpu.search.distributed import parse_gpus

        parse_gpus(args.gpus)  # a GPU that is not there: said before any work
    return params, scalars, check_params


def run(args: argparse.Namespace) -> int:
    from polygpu.search.database import TuningDatabase
    from polygpu.search.occupancy import SM_90, device_limits
    from polygpu.search.tuner import TuneOptions, tune

    params, scalars, check_params = _validate(args)
    runner = _runner(args)
    options = TuneOptions(
        strategy=args.strategy, budget=args.budget, traffic_slack=args.traffic_slack,
        min_concurrency=args.min_concurrency, seed=args.seed, jobs=args.jobs,
        check_params=check_params or None,
        defines=tuple(args.defines), include_dirs=tuple(args.include_dirs),
        scalars=scalars, race=args.race or None, time_limit_s=args.time_limit)
    if args.fast_math:  # every variant of the space, the plans too
        options = replace(options, space=replace(options.space, fast_math=True))
    out = Path(args.output)
    gpu = args.backend == "gpu" and not args.replay
    limits_of = getattr(runner, "limits", None)  # a cluster's: asked of a worker
    limits = (limits_of() if limits_of is not None else device_limits()) if gpu else SM_90
    database = None if args.no_db else TuningDatabase(args.db)
    try:
        with ProgressDisplay(args.quiet) as show:
            result = tune(args.file, params, runner, function=args.function,
                          options=options, database=database, limits=limits,
                          progress=show)
    finally:
        if database is not None:
            database.close()
        close = getattr(runner, "close", None)
        if close is not None:  # the measuring child ends before the summary's peer runs
            close()
    from polygpu.search.summary import summarize

    summary = summarize(result, peer=not args.no_peer and gpu)
    _print_table(result, summary)
    best = result.best
    if best is None:
        print("no candidate passed the check: nothing written", file=sys.stderr)
        return 1
    paths = _write_best(args, result, summary, out)
    print("wrote " + " and ".join(str(p) for p in paths))
    if args.report:
        from polygpu.search.report import write_report

        written = write_report(result, Path(args.report), workload=summary.workload,
                               roofline=summary.roofline, peer_ms=summary.peer_ms,
                               peer_name=summary.peer_name)
        print(f"report: {written[0]}")
    return 0


class ProgressDisplay:
    """A rich progress bar on a terminal: candidates done / pruned / failed and the best
    so far.  When stderr is not a terminal (CI logs, ``| tee``), plain lines instead: one
    at each phase and one per measured candidate."""

    def __init__(self, quiet: bool, stream=None):
        self.stream = stream if stream is not None else sys.stderr
        self.quiet = quiet
        self.plain = not _isatty(self.stream)
        self._bar = None
        self._task = None
        self._phase = ""
        self._done = -1

    def __enter__(self):
        if not self.quiet and not self.plain:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), TextColumn("{task.fields[status]}"),
                                 console=Console(file=self.stream), transient=False)
            self._bar.__enter__()
            self._task = self._bar.add_task("compiling", total=None, status="")
        return self

    def __exit__(self, *exc):
        if self._bar is not None:
            self._bar.__exit__(*exc)

    def __call__(self, p) -> None:
        status = (f"pruned {p.pruned}  failed {p.failed}  reused {p.reused}  best "
                  + (f"{p.best_ms:.4g} ms" if p.best_ms is not None else "-"))
        if self._bar is None:
            if not self.quiet:
                self._plain_line(p, status)
            return
        names = {"compile": "compiling variants", "nvcc": "nvcc + occupancy",
                 "measure": "measuring", "done": "done"}
        total = p.total if p.phase in ("measure", "done") else None
        self._bar.update(self._task, description=names.get(p.phase, p.phase), total=total,
                         completed=p.done, status=status)

    def _plain_line(self, p, status: str) -> None:
        if p.phase != self._phase:
            line = f"{p.phase}: {status}"
            if p.phase in ("measure", "done"):
                line = f"{p.phase}: {p.done}/{p.total}  {status}"
        elif p.phase == "measure" and p.done != self._done:
            line = f"measured {p.done}/{p.total}  {status}"
        else:
            return
        self._phase, self._done = p.phase, p.done
        print(line, file=self.stream, flush=True)


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _print_table(result, summary) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 140)
    counts = result.counts()
    console.print(f"{result.function} at {_params(result.params)} on "
                  f"{result.environment.gpu_name}: strategy {result.strategy}, "
                  + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    if summary.peer_ms is not None:
        console.print(f"{summary.peer_name}: {summary.peer_ms:.4g} ms in the same run")
    elif summary.peer_note:
        console.print(summary.peer_note)
    from polygpu.search.report import timed_on

    table = Table(title=f"Top variants of {result.function}", title_justify="left")
    on = any(timed_on(row.candidate) for row in summary.rows[:TOP])  # several GPUs
    for col in ("#", "variant", "ms", "GFLOP/s", "GB/s", "roofline", "× peer", "status") \
            + (("timed on",) if on else ()):
        table.add_column(col, justify="left" if col in ("variant", "status", "timed on")
                         else "right", no_wrap=col != "variant")
    for rank, row in enumerate(summary.rows[:TOP], 1):
        table.add_row(str(rank), _variant_cell(row.candidate.variant),
                      _f(row.time_ms, ".4g"), _f(row.gflops, ".1f"), _f(row.gbs, ".1f"),
                      _f(row.fraction, ".1%"), _f(row.vs_peer, ".2f"), row.status,
                      *((timed_on(row.candidate) or "-",) if on else ()))
    console.print(table)


def _variant_cell(variant) -> str:
    """A variant's fields that differ from the defaults, then each kernel's own
    (``kernel 1: tile=32,32 threads=8,32``) where a per-kernel variant sets them."""
    from polygpu.search.summary import variant_text

    return variant_text(variant)


def _f(x, fmt: str) -> str:
    return "" if x is None or (isinstance(x, float) and not math.isfinite(x)) \
        else format(x, fmt)


def _params(params) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def _write_best(args, result, summary, out: Path):
    from polygpu.output import compile_json, write_outputs
    from polygpu.pipeline import compile_region

    best = result.best
    compiled = compile_region(args.file, args.function, best.variant, args.defines,
                              args.include_dirs, result.params)
    if compiled.program.source != result.programs.get(best.key, compiled.program).source:
        raise PolygpuError("internal: the recompiled best variant differs from the tuned one")
    description = compile_json(compiled, dict(result.params))
    description["tuning"] = summary.best_json()
    return write_outputs(out, compiled, description)

