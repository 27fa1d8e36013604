"""The arguments several commands share, and what they mean once parsed.

Public so that every command module (and ``polygpu tune``, ``polygpu db``) reads a
FILE, ``-p``, ``--variant`` or ``--seed`` the same way; ``-p NAME=VALUE`` itself is
parsed by :mod:`polygpu.params`, which the search can import without the CLI.
"""

from __future__ import annotations

import argparse
import dataclasses

from polygpu.errors import PolygpuError
from polygpu.params import parse_params
from polygpu.schedule.variant import Variant

__all__ = ["add_fast_math_argument", "add_input_arguments", "add_variant_arguments",
           "count_value", "given_params", "nonnegative_float", "parse_params",
           "positive_float", "seed_value", "variant_from_args"]


def add_input_arguments(p: argparse.ArgumentParser) -> None:
    """FILE, ``--function``, ``-D``, ``-I`` and ``--debug``: which region to read."""
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


def add_variant_arguments(p: argparse.ArgumentParser) -> None:
    """``-p`` and the variant options of ``analyze``, ``compile`` and ``check``."""
    p.add_argument("-p", "--param", dest="params", action="append", default=[],
                   metavar="NAME=VALUE", help="value of a scalar parameter: an integer "
                   "size (-p n=1024) or a float scalar (-p alpha=1.5) (repeatable)")
    p.add_argument("--variant", metavar="JSON",
                   help="the variant as JSON, e.g. '{\"tile\": [4, 128], \"threads\": "
                   "[4, 32], \"jam\": true}' (fields: "
                   + ", ".join(f.name for f in dataclasses.fields(Variant))
                   + "; \"kernels\": {\"K\": {...}} gives kernel K its own; see "
                   "docs/scheduling.md for chunk, cuts, splits, device_steps, "
                   "elements_per_block, lanes, full_unroll, mma, mma_k and min_blocks, "
                   "docs/memory.md "
                   "for resident, "
                   "docs/transform.md for relayout and recursion, docs/input-language.md "
                   "for fast_math, and docs/search.md for specialize, which needs -p for "
                   "every parameter)")
    p.add_argument("--tile", metavar="T[,T..]",
                   help="block tile per space dimension, innermost last (sets 'tile')")
    p.add_argument("--threads", metavar="T[,T..]",
                   help="threads per block per space dimension, innermost last")
    p.add_argument("--candidate", type=count_value(0), metavar="K",
                   help="which scheduler candidate to use (0 = best)")
    add_fast_math_argument(p)


def add_fast_math_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fast-math", action="store_true",
                   help="float expf, logf, sinf, cosf and powf through CUDA's fast "
                   "intrinsics (__expf, ...): a few ulp for moderate arguments, more for "
                   "large ones; the check holds them to the usual tolerance and says so")


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


def given_params(args: argparse.Namespace, need_all: bool = False, option: str = "-p",
                 items: list[str] | None = None):
    """(the source program, its integer parameters, its float scalars) from ``-p``:
    names, types and C-type ranges checked against the function (the context, which
    needs the model, is checked by the caller with ``inputs.require_context``)."""
    from polygpu.frontend import load
    from polygpu.runtime import inputs

    raw = parse_params(args.params if items is None else items, option)
    program = load(args.file, args.function, args.defines, args.include_dirs)
    ints, scalars = inputs.parameter_values(program, raw, need_all=need_all)
    return program, ints, scalars


def variant_from_args(args: argparse.Namespace):
    """The :class:`~polygpu.schedule.variant.Variant` that ``--variant``, ``--tile``,
    ``--threads`` and ``--candidate`` describe (the later ones override the JSON)."""
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
    if getattr(args, "fast_math", False):
        fields["fast_math"] = True
    return Variant.from_json(fields)
