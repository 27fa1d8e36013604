"""Bind concrete values to a KernelProgram's arguments, checking them before any backend
hands raw pointers to native code (a wrong dtype or a short array there would be a silent
memory error, not an exception)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from polygpu.codegen.program import Argument, KernelProgram
from polygpu.runtime import grid


@dataclass(frozen=True)
class Bound:
    """One argument with its value: a numpy scalar of the argument's dtype, or the array."""

    argument: Argument
    value: np.generic | np.ndarray


def bind(program: KernelProgram, values: Mapping[str, object]) -> tuple[Bound, ...]:
    """The program's arguments, in signature order, bound to ``values`` (name -> value).

    Scalars are converted to their dtype; arrays must be C-contiguous numpy arrays of exactly
    the argument's dtype (no silent copy: the backends write results into them).  When an
    array's shape expressions are grid expressions (see :mod:`polygpu.runtime.grid`), its
    size is checked too.
    """
    missing = [a.name for a in program.arguments if a.name not in values]
    if missing:
        raise ValueError(f"{program.function}: no value for {', '.join(missing)}")
    params = program.parameter_values(values)
    out = []
    for a in program.arguments:
        v = values[a.name]
        dtype = np.dtype(a.dtype)
        if a.kind == "scalar":
            out.append(Bound(a, dtype.type(v)))
            continue
        if not isinstance(v, np.ndarray):
            raise TypeError(f"{program.function}: argument {a.name} must be a numpy array")
        if v.dtype != dtype:
            raise TypeError(f"{program.function}: {a.name} is {v.dtype}, the kernel takes {dtype}")
        if not v.flags.c_contiguous or not v.flags.writeable:
            raise ValueError(f"{program.function}: {a.name} must be C-contiguous and writeable")
        size = _size(a, params)
        if size is not None and v.size != size:
            raise ValueError(
                f"{program.function}: {a.name} has {v.size} elements, its shape "
                f"[{']['.join(a.shape)}] needs {size}"
            )
        out.append(Bound(a, v))
    return tuple(out)


def _size(a: Argument, params: Mapping[str, int]) -> int | None:
    try:
        return math.prod(grid.evaluate(e, params) for e in a.shape)
    except grid.GridExpressionError:
        return None  # an extent outside the grid language: the caller vouches for the size


def parameter_values(program: KernelProgram, values: Mapping[str, object]) -> dict[str, int]:
    return program.parameter_values(values)
