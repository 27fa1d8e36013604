"""Concrete inputs for one run of a region: parameter values, array shapes, random data.

Shapes come from the frontend's declarations (``ir.ArrayDecl.shape``, integer expressions
over earlier parameters), evaluated here with the source language's own division: C ``/``
truncates toward zero (``truncdiv``), Python ``//`` floors (``floordiv``).

Random data is drawn in the *kernel's* dtype: floats uniform in [0.5, 1.5) (rounded to the
dtype, so the float64 reference and a float32 kernel see identical values; positive values
away from zero keep sums free of cancellation, so relative errors stay meaningful), integers
uniform in [1, 9] (never zero, so integer division by an element is defined).
"""

from __future__ import annotations

import math
import operator
import os
from collections.abc import Mapping

import numpy as np

from polygpu.errors import PolygpuError
from polygpu.frontend import ir
from polygpu.model.scop import fix_parameters

FLOAT_LOW, FLOAT_HIGH = 0.5, 1.5
INT_LOW, INT_HIGH = 1, 9
INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
C_TYPES = {"int32": "int", "int64": "long long", "float32": "float", "float64": "double"}


def integer_parameters(program: ir.Program, params: Mapping[str, int]) -> dict[str, int]:
    """The values of ``program``'s integer parameters, taken from ``params``: all of them,
    each an integer that fits its C type, and no other name."""
    integer = [p.name for p in program.params if p.dtype in INT_RANGES]
    unknown = [name for name in params if name not in integer]
    if unknown:
        raise PolygpuError(
            f"{program.name} has no integer parameter {', '.join(unknown)} "
            f"(its integer parameters: {', '.join(integer) or 'none'})", program.loc
        )
    return parameter_values(program, params, need_all=True)[0]


def parameter_values(
    program: ir.Program, params: Mapping[str, object], need_all: bool = False,
    context=None,
) -> tuple[dict[str, int], dict[str, float]]:
    """``params`` (``-p NAME=VALUE``) checked against ``program``'s scalar parameters:
    (the integer parameters, the float scalars).  Every name must be a scalar parameter;
    an integer parameter needs an integer that fits its C type (``int n``: int32), a
    float scalar any real number.  ``need_all``: every integer parameter must be given.
    ``context`` (the region's isl parameter set): the given values must satisfy it.
    The one check that ``compile``, ``check``, ``analyze --traffic`` and ``tune`` share."""
    decls = {p.name: p for p in program.params}
    unknown = [name for name in params if name not in decls]
    if unknown:
        listed = ", ".join(f"{C_TYPES.get(p.dtype, p.dtype)} {p.name}" for p in program.params)
        raise PolygpuError(
            f"{program.name} has no parameter {', '.join(unknown)} "
            f"(its scalar parameters: {listed or 'none'})", program.loc)
    ints: dict[str, int] = {}
    scalars: dict[str, float] = {}
    for p in program.params:
        ctype = C_TYPES.get(p.dtype, p.dtype)
        if p.name not in params:
            if need_all and p.dtype in INT_RANGES:
                raise PolygpuError(f"missing parameter {p.name} of {program.name}; give it "
                                   f"with -p {p.name}=VALUE", p.loc)
            continue
        v = params[p.name]
        if p.dtype in INT_RANGES:
            if isinstance(v, bool | np.bool_) or not is_integer(v):
                raise PolygpuError(f"parameter {p.name} ({ctype} {p.name}) needs an integer, "
                                   f"got {v!r}", p.loc)
            low, high = INT_RANGES[p.dtype]
            if not low <= operator.index(v) <= high:
                raise PolygpuError(f"parameter {p.name} = {v} does not fit its C type "
                                   f"({ctype} {p.name}: {low} to {high})", p.loc)
            ints[p.name] = operator.index(v)
        else:
            if isinstance(v, bool | np.bool_) or not isinstance(
                    v, int | float | np.integer | np.floating):
                raise PolygpuError(f"parameter {p.name} ({ctype} {p.name}) needs a number, "
                                   f"got {v!r}", p.loc)
            if not math.isfinite(float(v)) or (
                    p.dtype == "float32" and abs(float(v)) > float(np.finfo(np.float32).max)):
                raise PolygpuError(f"parameter {p.name} = {v} is not a finite {ctype}", p.loc)
            scalars[p.name] = float(np.dtype(p.dtype).type(v))
    if context is not None:
        require_context(program, context, ints)
    return ints, scalars


def require_context(program: ir.Program, context, ints: Mapping[str, int]) -> None:
    """The (possibly partial) integer parameters ``ints`` must satisfy ``context``, the
    region's assumptions on its parameters (every array extent at least 1, ...)."""
    if fix_parameters(context, ints).is_empty():
        given = ", ".join(f"{k}={v}" for k, v in ints.items())
        raise PolygpuError(f"the parameters {given} violate the region's assumptions "
                           f"{context}", program.loc)


def is_integer(v: object) -> bool:
    """An int, a NumPy integer or anything with ``__index__`` (not a float)."""
    try:
        operator.index(v)
    except TypeError:
        return False
    return True


# bytes per element that ``check`` keeps alive on top of the drawn inputs: a float64
# reference copy (or a same-dtype one for integers), the poisoned kernel copy, its red-zone
# buffer, the written / poisoned masks; and, one array at a time, the comparison's float64
# temporaries (got and reference as float64, the error and its intermediates)
_MASK_BYTES = 2
_COMPARE_BYTES = 6 * 8


def check_bytes(program: ir.Program, shapes: Mapping[str, tuple[int, ...]]) -> int:
    """An estimate of the host memory ``check`` needs for these arrays."""
    total, peak = 0, 0
    for a in program.arrays:
        size = math.prod(shapes[a.name])
        item = np.dtype(a.dtype).itemsize
        ref = 8 if np.dtype(a.dtype).kind == "f" else item
        total += size * (3 * item + ref + _MASK_BYTES)
        peak = max(peak, size * _COMPARE_BYTES)
    return total + peak


def available_host_memory() -> int | None:
    """Bytes of host memory available now (MemAvailable, bounded by a cgroup limit), or
    None when it cannot be told."""
    available = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    if available is None:
        try:
            available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, AttributeError):
            return None
    try:  # cgroup v2: the container's own limit
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
        if limit != "max":
            with open("/sys/fs/cgroup/memory.current") as f:
                used = int(f.read().strip())
            available = min(available, max(0, int(limit) - used))
    except (OSError, ValueError):
        pass
    return available


def require_host_memory(program: ir.Program, ints: Mapping[str, int], needed: int,
                        what: str) -> None:
    """Refuse (``PolygpuError``) when ``needed`` bytes exceed the available host memory."""
    available = available_host_memory()
    if available is not None and needed > available:
        at = ", ".join(f"{k}={v}" for k, v in ints.items()) or "these sizes"
        raise PolygpuError(
            f"{what} at {at} needs about {_bytes_text(needed)} of host memory, but only "
            f"{_bytes_text(available)} is available: use smaller sizes", program.loc)


def _bytes_text(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} EiB"


def array_shapes(program: ir.Program, ints: Mapping[str, int]) -> dict[str, tuple[int, ...]]:
    shapes = {}
    for a in program.arrays:
        shape = tuple(eval_int(e, ints) for e in a.shape)
        if any(n < 1 for n in shape):
            raise PolygpuError(
                f"array {a.name} would have shape {list(shape)} with these parameters", a.loc
            )
        shapes[a.name] = shape
    return shapes


def random_values(
    program: ir.Program,
    ints: Mapping[str, int],
    shapes: Mapping[str, tuple[int, ...]],
    rng: np.random.Generator,
    scalars: Mapping[str, object] | None = None,
    copies: int | None = None,
) -> dict[str, object]:
    """Every argument of ``program``: integer parameters from ``ints``, float scalars from
    ``scalars`` where given there (other names in it are ignored, so the ``-p`` mapping
    itself may be passed) and random otherwise, arrays random (numpy arrays of their
    declared dtype, Python scalars).

    Before anything is allocated the host memory is checked: ``copies`` None budgets
    what ``check`` keeps alive (:func:`check_bytes`), an integer that many further
    copies of the arrays (a timing run's rotated inputs)."""
    if copies is None:
        needed, what = check_bytes(program, shapes), "checking " + program.name
    else:
        needed = (1 + copies) * sum(
            math.prod(shapes[a.name]) * np.dtype(a.dtype).itemsize for a in program.arrays)
        what = "running " + program.name
    require_host_memory(program, ints, needed, what)
    values: dict[str, object] = dict(ints)
    given = scalars or {}
    for p in program.params:
        if p.name in ints:
            continue
        if p.name in given:
            values[p.name] = float(np.dtype(p.dtype).type(given[p.name]))
        else:
            values[p.name] = float(np.dtype(p.dtype).type(rng.uniform(FLOAT_LOW, FLOAT_HIGH)))
    try:
        for a in program.arrays:
            dtype = np.dtype(a.dtype)
            if dtype.kind == "f":
                values[a.name] = rng.uniform(FLOAT_LOW, FLOAT_HIGH,
                                             shapes[a.name]).astype(dtype)
            else:
                values[a.name] = rng.integers(INT_LOW, INT_HIGH, shapes[a.name],
                                              endpoint=True).astype(dtype)
    except (MemoryError, ValueError) as err:
        if isinstance(err, ValueError) and "too big" not in str(err):
            raise
        raise PolygpuError(f"{what}: not enough host memory for the arrays at "
                           f"{', '.join(f'{k}={v}' for k, v in ints.items())} ({err})",
                           program.loc) from None
    return values


def eval_int(e: ir.IntExpr, env: Mapping[str, int]) -> int:
    """The value of integer expression ``e`` with variables bound by ``env``."""
    if isinstance(e, ir.IntConst):
        return e.value
    if isinstance(e, ir.IntVar):
        if e.name not in env:
            raise PolygpuError(f"missing parameter {e.name}; give it with -p {e.name}=VALUE")
        return int(env[e.name])
    if isinstance(e, ir.IntNeg):
        return -eval_int(e.arg, env)
    if isinstance(e, ir.IntMinMax):
        args = [eval_int(a, env) for a in e.args]
        return min(args) if e.op == "min" else max(args)
    if isinstance(e, ir.IntSelect):
        return eval_int(e.then if eval_cond(e.cond, env) else e.else_, env)
    if isinstance(e, ir.IntBinOp):
        a, b = eval_int(e.lhs, env), eval_int(e.rhs, env)
        if e.op == "+":
            return a + b
        if e.op == "-":
            return a - b
        if e.op == "*":
            return a * b
        if b == 0:
            raise PolygpuError(f"division by zero in {e}")
        if e.op == "floordiv":
            return a // b
        if e.op == "mod":
            return a % b
        quotient = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)  # C truncation
        if e.op == "truncdiv":
            return quotient
        if e.op == "rem":
            return a - b * quotient
    raise TypeError(f"not an integer expression: {e!r}")


def eval_cond(c: ir.Cond, env: Mapping[str, int]) -> bool:
    if isinstance(c, ir.BoolConst):
        return c.value
    if isinstance(c, ir.Not):
        return not eval_cond(c.arg, env)
    if isinstance(c, ir.BoolOp):
        results = [eval_cond(a, env) for a in c.args]
        return all(results) if c.op == "and" else any(results)
    if isinstance(c, ir.Compare):
        a, b = eval_int(c.lhs, env), eval_int(c.rhs, env)
        return {
            "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b
        }[c.op]
    raise TypeError(f"not a condition: {c!r}")
