"""The ``polygpu`` command line.

Errors in the user's input are printed as one line ``FILE:LINE: message`` on
stderr with exit status 2; ``--debug`` shows the traceback instead.  Any other
exception is a polygpu bug and says so (exit status 3).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback

from polygpu import __version__
from polygpu.errors import PolygpuError

EXIT_INPUT_ERROR = 2
EXIT_INTERNAL_ERROR = 3


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
    analyze.set_defaults(run=_run_analyze)
    return parser


def _run_analyze(args: argparse.Namespace) -> int:
    from polygpu.frontend import load
    from polygpu.model.analysis import analyze
    from polygpu.model.build import build_scop
    from polygpu.model.report import render, to_json

    program = load(args.file, args.function, args.defines, args.include_dirs)
    result = analyze(build_scop(program))
    for warning in result.warnings:
        print(warning, file=sys.stderr)
    if args.json:
        print(json.dumps(to_json(result), indent=2))
    else:
        from rich.console import Console

        render(result, Console())
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except PolygpuError as err:
        if args.debug:
            traceback.print_exc()
        print(str(err).splitlines()[0] if str(err) else "error", file=sys.stderr)
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
