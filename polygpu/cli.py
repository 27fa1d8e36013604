"""The ``polygpu`` command line.

Errors in the user's input are printed as one line ``FILE:LINE: message`` on
stderr with exit status 2 (a compiler's diagnostic keeps its lines below the first);
``--debug`` shows the traceback too.  Every user mistake that can be seen before the
work (parameter values, writable directories, host memory, option ranges) is checked
before it starts.  Any other exception is a polygpu bug and says so (exit status 3).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from dataclasses import replace

from polygpu import __version__
from polygpu.errors import PolygpuError

EXIT_INPUT_ERROR = 2
EXIT_INTERNAL_ERROR = 3
# isl operations --traffic may spend counting (isl does about half a million a second)
TRAFFIC_OPERATIONS = 20_000_000


def _add_input_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE",
                   help="a C file with a #pragma scop region (FILE.c or FILE.c:FUNCTION), "
                   "or MODULE.py:FUNCTION")
    p.add_argument("--function", "-f", metavar="NAME",
                   help="function to read: needed when a C file has several regions, "
                   "or instead of the :FUNCTION suffix of a Python file")
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME[=VALUE]",
                   help="define a macro for the C preprocessor (repeatable)")
    p.add_argument("-I", dest="include_dirs", action="append", default=[], metavar="DIR",
                   help="add a directory to the C preprocessor's include path (repeatable)")
    # also accepted after the subcommand; SUPPRESS keeps a --debug given before it
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                   help="show the full traceback of errors")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="polygpu",
        description="Polyhedral loop-nest optimizer for CUDA.",
    )
    parser.add_argument("--version", action="version", version=f"polygpu {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show the full traceback of errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    analyze = sub.add_parser(
        "analyze",
        help="explain the polyhedral model of a loop nest",
        description="Build the exact polyhedral model of the affine region of FILE and "
        "report its statements, accesses with their reuse class, exact dependences "
        "(flow, anti, output) and the parallel loops.",
    )
    _add_input_arguments(analyze)
    analyze.add_argument("--json", action="store_true",
                         help="print exactly one JSON object instead of tables")
    analyze.add_argument("--traffic", action="store_true",
                         help="also model global-memory traffic per kernel and array for "
                         "the compiled variant (needs -p for every parameter)")
    _add_variant_arguments(analyze)
    analyze.set_defaults(run=_run_analyze)

    compile_ = sub.add_parser(
        "compile",
        help="generate CUDA for a loop nest",
        description="Schedule FILE's region for coalescing (Algorithm 1, isl fallback), tile "
        "and map it to blocks and threads, prove the result legal with isl, place data in "
        "shared memory (padded by Algorithm 2), registers and constant memory, and write "
        "OUTDIR/FUNCTION.cu and OUTDIR/FUNCTION.json (variant, launch plan, schedule, "
        "per-reference placement, buffers).",
    )
    _add_input_arguments(compile_)
    _add_variant_arguments(compile_)
    compile_.add_argument("-o", "--output", metavar="OUTDIR", required=True,
                          help="directory for FUNCTION.cu and FUNCTION.json")
    compile_.add_argument("--json", action="store_true",
                          help="also print the JSON description on stdout")
    compile_.set_defaults(run=_run_compile)

    check = sub.add_parser(
        "check",
        help="run the generated code and compare it with the original loop nest",
        description="Compile FILE's region like 'compile', run the result (the emitted CUDA "
        "text, emulated on the host with --backend cpu, or on the GPU through PyCUDA) and "
        "the original function (C compiled with the host compiler, or the Python function) "
        "on the same fresh random inputs, with the outputs poisoned first; exit 0 only "
        "if every array matches (see docs/runtime.md for the tolerances).",
    )
    _add_input_arguments(check)
    _add_variant_arguments(check)
    check.add_argument("--backend", choices=("cpu", "gpu"), default="cpu",
                       help="cpu: emulate the CUDA text on the host (small sizes, no GPU "
                       "needed); gpu: run it through PyCUDA (default: cpu)")
    check.add_argument("--seed", type=seed_value, help="seed of the random inputs "
                       "(0 to 2**32-1)")
    check.set_defaults(run=_run_check)

    from polygpu.search import db_cli, tune_cli

    tune_cli.add_parser(sub)
    db_cli.add_parser(sub)
    return parser


def seed_value(text: str) -> int:
    """argparse type of ``--seed``: NumPy seeds are 0 to 2**32-1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"{value} is not between 0 and 2**32-1 = "
                                         f"{2**32 - 1}")
    return value


def count_value(low: int):
    """argparse type: an integer of at least ``low``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"{value}: must be at least {low}")
        return value
    parse.__name__ = "integer"
    return parse


def positive_float(text: str) -> float:
    """argparse type: a finite number greater than 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text}: must be a number greater than 0")
    return value


def nonnegative_float(text: str) -> float:
    """argparse type: a finite number of at least 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text}: must be a number of at least 0")
    return value


def _add_variant_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-p", "--param", dest="params", action="append", default=[],
                   metavar="NAME=VALUE", help="value of a scalar parameter: an integer "
                   "size (-p n=1024) or a float scalar (-p alpha=1.5) (repeatable)")
    p.add_argument("--variant", metavar="JSON",
                   help="the variant as JSON, e.g. '{\"tile\": [4, 128], \"threads\": "
                   "[4, 32], \"jam\": true}' (fields: candidate, tile, threads, jam, "
                   "time_tile, unroll, blocked, chunk, prefetch, shared, padding, registers, "
                   "specialize; see docs/scheduling.md for chunk, "
                   "docs/memory.md, and docs/search.md for specialize, which needs -p "
                   "for every parameter)")
    p.add_argument("--tile", metavar="T[,T..]",
                   help="block tile per space dimension, innermost last (sets 'tile')")
    p.add_argument("--threads", metavar="T[,T..]",
                   help="threads per block per space dimension, innermost last")
    p.add_argument("--candidate", type=count_value(0), metavar="K",
                   help="which scheduler candidate to use (0 = best)")


def _parse_params(items: list[str], option: str = "-p", integers: bool = False
                  ) -> dict[str, int | float]:
    """``NAME=VALUE`` items: an integer value stays an int, any other number a float
    (whether the parameter takes it is checked against the function later);
    ``integers``: integers only (the tuning database's keys)."""
    params: dict[str, int | float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if integers:
            try:
                if not sep or not name.isidentifier():
                    raise ValueError
                params[name] = int(value)
            except ValueError:
                raise PolygpuError(f"{option} {item}: expected NAME=INTEGER, e.g. "
                                   f"{option} n=4096") from None
            continue
        if not sep or not name.isidentifier():
            raise PolygpuError(f"{option} {item}: expected NAME=VALUE, e.g. {option} n=4096")
        try:
            params[name] = int(value)
        except ValueError:
            try:
                params[name] = float(value)
            except ValueError:
                raise PolygpuError(f"{option} {item}: {value!r} is not a number (expected "
                                   f"NAME=VALUE, e.g. {option} n=4096 or {option} alpha=1.5)"
                                   ) from None
    return params


def _given_params(args: argparse.Namespace, need_all: bool = False, option: str = "-p",
                  items: list[str] | None = None):
    """(the source program, its integer parameters, its float scalars) from ``-p``:
    names, types and C-type ranges checked against the function (the context, which
    needs the model, is checked by the caller with ``inputs.require_context``)."""
    from polygpu.frontend import load
    from polygpu.runtime import inputs

    raw = _parse_params(args.params if items is None else items, option)
    program = load(args.file, args.function, args.defines, args.include_dirs)
    ints, scalars = inputs.parameter_values(program, raw, need_all=need_all)
    return program, ints, scalars


def _variant(args: argparse.Namespace):
    from polygpu.errors import PolygpuError
    from polygpu.schedule.variant import Variant

    fields = Variant().to_json() if not args.variant else Variant.from_json(
        args.variant).to_json()
    for name in ("tile", "threads"):
        text = getattr(args, name)
        if text:
            try:
                fields[name] = [int(x) for x in text.split(",")]
            except ValueError:
                raise PolygpuError(f"--{name} {text}: expected integers such as 4,128"
                                   ) from None
    if args.tile and not args.threads:
        # one thread per point, at most 256 along x and 4 along the other axes
        caps = [4] * (len(fields["tile"]) - 1) + [256]
        fields["threads"] = [min(t, cap) for t, cap in zip(fields["tile"], caps, strict=True)]
    if args.candidate is not None:
        fields["candidate"] = args.candidate
    return Variant.from_json(fields)


def _run_compile(args: argparse.Namespace) -> int:
    from polygpu.output import compile_json, require_writable_dir, write_outputs
    from polygpu.pipeline import compile_region
    from polygpu.runtime import inputs

    require_writable_dir(args.output, "output directory (-o)")
    variant = _variant(args)
    program, params, _ = _given_params(args)  # float scalars do not change the code
    compiled = compile_region(args.file, args.function, variant, args.defines,
                              args.include_dirs, params)
    inputs.require_context(program, compiled.analysis.scop.context, params)
    description = compile_json(compiled, params)
    paths = write_outputs(args.output, compiled, description)
    if args.json:
        print(json.dumps(description, indent=2))
    else:
        print("wrote " + " and ".join(str(p) for p in paths))
    return 0


def _run_analyze(args: argparse.Namespace) -> int:
    from polygpu.frontend import load
    from polygpu.model.analysis import analyze
    from polygpu.model.build import build_scop
    from polygpu.model.report import render, to_json

    program = load(args.file, args.function, args.defines, args.include_dirs)
    result = analyze(build_scop(program))
    traffic = _traffic(args, result) if args.traffic else None
    for warning in result.warnings:
        print(warning, file=sys.stderr)
    if args.json:
        data = to_json(result)
        if traffic is not None:
            data["traffic"] = [
                {"kernel": t.kernel, "array": t.array, "loads": t.loads, "stores": t.stores,
                 "bytes": t.bytes} for t in traffic]
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
    return 0


def _traffic(args: argparse.Namespace, result):
    from polygpu.memory.traffic import kernel_traffic
    from polygpu.model.isl_budget import OutOfBudget, isl_operation_budget
    from polygpu.pipeline import compile_region
    from polygpu.runtime import inputs

    program, params, _ = _given_params(args)
    missing = [p for p in result.scop.parameters if p not in params]
    if missing:
        raise PolygpuError(f"--traffic needs a value for {', '.join(missing)} "
                           f"(e.g. -p {missing[0]}=4096)", result.scop.loc)
    inputs.require_context(program, result.scop.context, params)
    compiled = compile_region(args.file, args.function, _variant(args), args.defines,
                              args.include_dirs, params)
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


def _run_check(args: argparse.Namespace) -> int:
    from polygpu.pipeline import compile_region
    from polygpu.runtime import compiler, inputs
    from polygpu.runtime.check import check_program

    compiler.cache_dir()  # writable, before any work
    variant = _variant(args)
    program, params, scalars = _given_params(args, need_all=True)
    compiled = compile_region(args.file, args.function, variant, args.defines,
                              args.include_dirs, params)
    inputs.require_context(program, compiled.analysis.scop.context, params)
    result = check_program(compiled.program, compiled.analysis.scop, args.file, params,
                           backend=args.backend, seed=args.seed, defines=args.defines,
                           include_dirs=args.include_dirs, scalars=scalars)
    kernels = len(compiled.program.launches)
    print(f"{'ok' if result.ok else 'MISMATCH'}: {compiled.program.function} "
          f"({kernels} kernel{'s' if kernels > 1 else ''}, {args.backend} backend, "
          f"{', '.join(f'{k}={v}' for k, v in params.items())}, seed {result.seed})")
    print(result.message)
    return 0 if result.ok else 1


def error_text(err: PolygpuError) -> str:
    """What the CLI prints for ``err``: its message in full (a one-line input error stays
    one line; a compiler's diagnostic keeps its lines), never empty."""
    text = str(err).rstrip()
    return text or "polygpu: error"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except PolygpuError as err:
        if args.debug:
            traceback.print_exc()
        print(error_text(err), file=sys.stderr)
        return EXIT_INPUT_ERROR
    except MemoryError as err:
        # sizes beyond the host's memory that no earlier estimate caught
        if args.debug:
            traceback.print_exc()
        print(f"polygpu: out of host memory{': ' + str(err) if str(err) else ''} "
              "(use smaller sizes)", file=sys.stderr)
        return EXIT_INPUT_ERROR
    except BrokenPipeError:
        # the reader went away (``polygpu analyze ... | head``): not an error of ours
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        return 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # a bug in polygpu, not in the input
        if args.debug:
            traceback.print_exc()
        print(f"polygpu: internal error: {type(err).__name__}: {err} "
              "(rerun with --debug for the traceback, and please report it)", file=sys.stderr)
        return EXIT_INTERNAL_ERROR


if __name__ == "__main__":
    sys.exit(main())
