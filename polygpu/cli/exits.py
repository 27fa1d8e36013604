"""Exceptions to exit statuses: what the user did wrong (2), what polygpu did (3).

One place decides this for every command, so a ``PolygpuError`` raised anywhere prints
the same way (its message, one line or a compiler's diagnostic in full) and any other
exception is reported as a polygpu bug rather than a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback

from polygpu.errors import PolygpuError

EXIT_INPUT_ERROR = 2
EXIT_INTERNAL_ERROR = 3
EXIT_INTERRUPTED = 130


def error_text(err: PolygpuError) -> str:
    """What the CLI prints for ``err``: its message in full (a one-line input error stays
    one line; a compiler's diagnostic keeps its lines), never empty."""
    text = str(err).rstrip()
    return text or "polygpu: error"


def run_command(args: argparse.Namespace) -> int:
    """``args.run(args)``, its exceptions printed on stderr and mapped to exit statuses
    (``--debug``: with the traceback)."""
    debug = getattr(args, "debug", False)
    try:
        return args.run(args)
    except PolygpuError as err:
        if debug:
            traceback.print_exc()
        print(error_text(err), file=sys.stderr)
        return EXIT_INPUT_ERROR
    except MemoryError as err:
        # sizes beyond the host's memory that no earlier estimate caught
        if debug:
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
        return EXIT_INTERRUPTED
    except Exception as err:  # a bug in polygpu, not in the input
        if debug:
            traceback.print_exc()
        print(f"polygpu: internal error: {type(err).__name__}: {err} "
              "(rerun with --debug for the traceback, and please report it)", file=sys.stderr)
        return EXIT_INTERNAL_ERROR
