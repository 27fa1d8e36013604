"""The ``polygpu`` command line: one module per command, shared arguments in
:mod:`~polygpu.cli.arguments`, exit statuses in :mod:`~polygpu.cli.exits`.

Errors in the user's input are printed as one line ``FILE:LINE: message`` on
stderr with exit status 2 (a compiler's diagnostic keeps its lines below the first);
``--debug`` shows the traceback too.  Every user mistake that can be seen before the
work (parameter values, writable directories, host memory, option ranges) is checked
before it starts.  Any other exception is a polygpu bug and says so (exit status 3).

The CLI imports the compiler and the search, never the reverse: what both need (``-p``
parsing, writable directories) lives below them, in :mod:`polygpu.params` and
:mod:`polygpu.output`.
"""

from __future__ import annotations

import argparse
import sys

from polygpu import __version__
from polygpu.cli import analyze, check, db, tune
from polygpu.cli import compile as compile_
from polygpu.cli.exits import EXIT_INPUT_ERROR, EXIT_INTERNAL_ERROR, error_text, run_command

__all__ = ["EXIT_INPUT_ERROR", "EXIT_INTERNAL_ERROR", "build_parser", "error_text", "main"]

COMMANDS = (analyze, compile_, check, tune, db)  # in the order --help lists them


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="polygpu",
        description="Polyhedral loop-nest optimizer for CUDA.",
    )
    parser.add_argument("--version", action="version", version=f"polygpu {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show the full traceback of errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The console entry point (``polygpu``, ``python -m polygpu``): the exit status."""
    args = build_parser().parse_args(argv)
    return run_command(args)


if __name__ == "__main__":
    sys.exit(main())
