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

from collections.abc import Mapping

import numpy as np

from polygpu.errors import PolygpuError
from polygpu.frontend import ir

FLOAT_LOW, FLOAT_HIGH = 0.5, 1.5
INT_LOW, INT_HIGH = 1, 9


def integer_parameters(program: ir.Program, params: Mapping[str, int]) -> dict[str, int]:
    """The values of ``program``'s integer parameters, taken from ``params``."""
    out = {}
    for p in program.params:
        if p.dtype in ("int32", "int64"):
            if p.name not in params:
                raise PolygpuError(f"missing parameter {p.name} of {program.name}; give it "
                                   f"with -p {p.name}=VALUE", p.loc)
            out[p.name] = int(params[p.name])
    unknown = sorted(set(params) - set(out))
    if unknown:
        raise PolygpuError(
            f"{program.name} has no integer parameter {', '.join(unknown)} "
            f"(its parameters: {', '.join(out) or 'none'})", program.loc
        )
    return out


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
) -> dict[str, object]:
    """Every argument of ``program``: integer parameters from ``ints``, float scalars and
    arrays random (numpy arrays of their declared dtype, Python scalars)."""
    values: dict[str, object] = dict(ints)
    for p in program.params:
        if p.name not in ints:
            values[p.name] = float(np.dtype(p.dtype).type(rng.uniform(FLOAT_LOW, FLOAT_HIGH)))
    for a in program.arrays:
        dtype = np.dtype(a.dtype)
        if dtype.kind == "f":
            values[a.name] = rng.uniform(FLOAT_LOW, FLOAT_HIGH, shapes[a.name]).astype(dtype)
        else:
            values[a.name] = rng.integers(INT_LOW, INT_HIGH, shapes[a.name], endpoint=True).astype(
                dtype
            )
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
