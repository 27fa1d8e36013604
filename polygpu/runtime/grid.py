"""Launch-grid expressions: check them and evaluate them at concrete parameter values.

A :class:`~polygpu.codegen.program.Launch` gives its grid as C integer expressions over
the integer parameters.  The CPU emulator pastes them into C, the GPU backend evaluates
them here in Python, so both must read them the same way.  That is why the language is a
whitelist of the constructs whose meaning is the same in C and in Python: integer literals,
parameter names, parentheses, ``+ - *``, unary ``-``, ``/`` (only on non-negative operands,
where C truncation and floor division agree; Python's ``//`` is a comment in C and is
refused) and ``max``/``min`` calls.  Anything else -- attribute access, other calls,
comparisons, ``%``, casts, suffixed literals -- is refused before either backend runs it.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache

import numpy as np

from polygpu.codegen.program import KernelProgram
from polygpu.errors import PolygpuError


class GridExpressionError(PolygpuError):
    """A grid expression outside the whitelist, or one that cannot be evaluated."""


class LaunchError(RuntimeError):
    """A launch configuration CUDA would refuse (empty or oversized grid or block)."""


class GridLimitError(PolygpuError, LaunchError):
    """A parametric program launched at sizes whose block counts pass CUDA's grid
    limits: the user's sizes, not a bug -- compiled for those sizes, the program
    folds its blocks onto grid x (``codegen/cuda.py``)."""


def check_launch(kernel: str, grid: tuple[int, ...], block: tuple[int, ...]) -> None:
    """Refuse what CUDA refuses, with the same limits the CPU emulator applies."""
    gx, gy, gz = grid
    bx, by, bz = block
    if min(gx, gy, gz) >= 1 and (gx > 2**31 - 1 or gy > 65535 or gz > 65535):
        raise GridLimitError(
            f"launch of {kernel}: {gx} x {gy} x {gz} blocks, beyond CUDA's 2147483647 x "
            "65535 x 65535: compile the program for these sizes (-p with compile/check/"
            "tune, params= with polygpu.optimize) and polygpu folds its blocks onto grid x"
        )
    if not (1 <= gx <= 2**31 - 1 and 1 <= gy <= 65535 and 1 <= gz <= 65535):
        raise LaunchError(
            f"launch of {kernel}: grid expressions evaluate to {gx} x {gy} x {gz} (CUDA allows "
            "1 to 2147483647 x 65535 x 65535)"
        )
    if not (1 <= bx <= 1024 and 1 <= by <= 1024 and 1 <= bz <= 64 and bx * by * bz <= 1024):
        raise LaunchError(
            f"launch of {kernel}: invalid block {bx} x {by} x {bz} (at most 1024 x 1024 x 64, "
            "1024 threads)"
        )


_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div)
_CALLS = ("max", "min")


@lru_cache(maxsize=1024)
def parse(text: str) -> ast.expr:
    """Parse and whitelist ``text``; the tree is safe to hand to :func:`evaluate`."""
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as e:
        raise GridExpressionError(f"grid expression {text!r}: not an integer expression") from e
    _check(tree, text)
    return tree


def _check(node: ast.AST, text: str) -> None:
    if isinstance(node, ast.Constant):
        if type(node.value) is not int:  # bool is an int subclass: refuse it too
            raise GridExpressionError(f"grid expression {text!r}: {node.value!r} is not an int")
    elif isinstance(node, ast.Name):
        pass  # resolved against the parameters in evaluate()
    elif isinstance(node, ast.BinOp) and isinstance(node.op, _BINOPS):
        _check(node.left, text)
        _check(node.right, text)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        _check(node.operand, text)
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _CALLS
        and len(node.args) >= 2
        and not node.keywords
    ):
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise GridExpressionError(f"grid expression {text!r}: starred argument")
            _check(a, text)
    else:
        raise GridExpressionError(
            f"grid expression {text!r}: {ast.unparse(node)!r} is not allowed (only integer "
            "literals, parameters, + - * /, max and min)"
        )


def names(text: str) -> frozenset[str]:
    """The parameter names ``text`` uses."""
    tree = parse(text)
    callees = {id(c.func) for c in ast.walk(tree) if isinstance(c, ast.Call)}
    return frozenset(
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in callees
    )


def launch_blocks(program: KernelProgram, values: Mapping[str, int],
                  steps: Sequence[tuple[int, tuple[int, ...]]] | None = None) -> list[int]:
    """Thread blocks of each of ``program``'s launches at parameter ``values`` (refused
    when the program was specialized for others; with host loops, the most any of its
    steps launches, 0 for a launch without steps; ``steps``: those to look at, default
    all ``program.steps``)."""
    params = program.parameter_values(values)
    blocks = [0] * len(program.launches)  # with host loops: the largest step's grid
    steps = program.steps(values) if steps is None else steps
    for k, columns in _grids_by_launch(program, params, steps).items():
        blocks[k] = int(max(math.prod(dims) for dims in zip(*columns, strict=True)))
    return blocks


def step_grids(program: KernelProgram, params: Mapping[str, int],
               steps: Sequence[tuple[int, tuple[int, ...]]]) -> list[tuple[int, int, int]]:
    """The grid of each of ``steps`` (``program.steps``: launch index and host iterator
    values), in order, as :func:`evaluate` gives it step by step."""
    columns = _grids_by_launch(program, params, steps)
    at = {k: 0 for k in columns}
    out = []
    for k, _ in steps:
        i = at[k]
        at[k] = i + 1
        out.append(tuple(int(c[i]) for c in columns[k]))
    return out


def _grids_by_launch(program: KernelProgram, params: Mapping[str, int],
                     steps: Sequence[tuple[int, tuple[int, ...]]]) -> dict[int, tuple]:
    """Per launch with steps, its grid's three dimensions over its steps (in step order):
    sequences the length of its steps.  A grid that uses host iterators is evaluated for
    all steps at once with NumPy (:func:`_vector_grid`): Floyd-Warshall at n = 5600 has
    33 594 steps, and one at a time they cost the tuner 0.35 s of Python per program
    built and per launch plan; one that does not is evaluated once."""
    hosts: dict[int, list[tuple[int, ...]]] = {}
    for k, host in steps:
        hosts.setdefault(k, []).append(host)
    host_names = frozenset(program.host_iterators)
    out = {}
    for k, at in hosts.items():
        grid = program.launches[k].grid
        if any(names(e) & host_names for e in grid):
            out[k] = _vector_grid(program, grid, params, at)
        else:  # one value at every step
            bound = program.grid_values(params, at[0])
            out[k] = tuple([_compiled(e)(bound)] * len(at) for e in grid)
    return out


# a value the vector evaluation may reach (as a float, rounding included) without
# leaving int64; beyond it the exact evaluation of Python's integers takes over
_VECTOR_LIMIT = 2.0 ** 62


class _NotVectorizable(Exception):
    """The vector evaluation cannot promise the exact result (a value near int64's
    range, a division outside its domain, an unknown name): evaluated step by step."""


def _vector_grid(program: KernelProgram, grid: tuple[str, ...], params: Mapping[str, int],
                 hosts: list[tuple[int, ...]]) -> tuple:
    """``grid``'s dimensions at the host iterator values ``hosts``: vectorized where
    exact (the dimensions and their product within int64), else -- and for the error a
    bad step raises -- step by step with the scalar closures, in step order."""
    try:
        columns = np.array(hosts, dtype=np.int64).reshape(len(hosts), -1)
        bound = {n: _vector_value(v) for n, v in params.items()}
        for d, name in enumerate(program.host_iterators):
            bound[name] = (columns[:, d], columns[:, d].astype(float))
        dims, count = [], np.float64(1.0)
        for e in grid:
            g_i, g_f = _vectorized(e)(bound)
            count = count * g_f
            _in_range(count)
            dims.append(np.broadcast_to(g_i, (len(hosts),)))
        return tuple(dims)
    except (_NotVectorizable, OverflowError):  # OverflowError: a host value past int64
        pass
    exprs = [_compiled(e) for e in grid]
    rows = [tuple(g(program.grid_values(params, h)) for g in exprs) for h in hosts]
    return tuple(list(c) for c in zip(*rows, strict=True))


def _vector_value(v: int) -> tuple:
    if abs(v) >= _VECTOR_LIMIT:
        raise _NotVectorizable
    return np.int64(v), np.float64(v)


def _in_range(f) -> None:
    if np.any(np.abs(f) >= _VECTOR_LIMIT):
        raise _NotVectorizable


@lru_cache(maxsize=1024)
def _vectorized(text: str) -> Callable[[Mapping[str, tuple]], tuple]:
    """``text`` as a closure over NumPy values: each value an (int64, float64) pair, the
    float computed alongside to tell when the integers could leave int64's range."""
    return _vector_closure(parse(text))


def _vector_closure(node: ast.expr) -> Callable[[Mapping[str, tuple]], tuple]:
    if isinstance(node, ast.Constant):
        value = _vector_value(node.value)
        return lambda values: value
    if isinstance(node, ast.Name):
        name = node.id

        def lookup(values):
            if name not in values:
                raise _NotVectorizable  # the scalar path raises the error
            return values[name]
        return lookup
    if isinstance(node, ast.UnaryOp):
        operand = _vector_closure(node.operand)
        if isinstance(node.op, ast.USub):
            return lambda values: tuple(-x for x in operand(values))
        return operand
    if isinstance(node, ast.Call):
        args = [_vector_closure(a) for a in node.args]
        pick = np.maximum if node.func.id == "max" else np.minimum

        def call(values):
            first, *rest = (a(values) for a in args)
            i, f = first
            for a_i, a_f in rest:
                i, f = pick(i, a_i), pick(f, a_f)
            return i, f
        return call
    assert isinstance(node, ast.BinOp)
    left, right = _vector_closure(node.left), _vector_closure(node.right)
    op = node.op

    def binop(values):
        (a, af), (b, bf) = left(values), right(values)
        if isinstance(op, ast.Div):
            if np.any(a < 0) or np.any(b <= 0):
                raise _NotVectorizable
            return a // b, af / bf
        if isinstance(op, ast.Add):
            out = a + b, af + bf
        elif isinstance(op, ast.Sub):
            out = a - b, af - bf
        else:
            out = a * b, af * bf
        _in_range(out[1])
        return out
    return binop


def evaluate(text: str, values: Mapping[str, int]) -> int:
    """The value of grid expression ``text`` with parameters bound by ``values``."""
    return _compiled(text)(values)


@lru_cache(maxsize=1024)
def _compiled(text: str) -> Callable[[Mapping[str, int]], int]:
    """``text`` as a closure over the values: :func:`launch_blocks` evaluates each grid
    expression at every host step (10^5 calls), and walking the tree each time cost
    seconds.  Same results and errors as the tree walk, operands in the same order."""
    return _closure(parse(text), text)


def _closure(node: ast.expr, text: str) -> Callable[[Mapping[str, int]], int]:
    if isinstance(node, ast.Constant):
        value = node.value
        return lambda values: value
    if isinstance(node, ast.Name):
        name = node.id

        def lookup(values):
            if name not in values:
                raise GridExpressionError(
                    f"grid expression {text!r}: unknown parameter {name!r}")
            return int(values[name])
        return lookup
    if isinstance(node, ast.UnaryOp):
        operand = _closure(node.operand, text)
        if isinstance(node.op, ast.USub):
            return lambda values: -operand(values)
        return operand
    if isinstance(node, ast.Call):
        args = [_closure(a, text) for a in node.args]
        pick = max if node.func.id == "max" else min
        return lambda values: pick([a(values) for a in args])
    assert isinstance(node, ast.BinOp)
    left, right = _closure(node.left, text), _closure(node.right, text)
    if isinstance(node.op, ast.Add):
        return lambda values: left(values) + right(values)
    if isinstance(node.op, ast.Sub):
        return lambda values: left(values) - right(values)
    if isinstance(node.op, ast.Mult):
        return lambda values: left(values) * right(values)

    def divide(values):
        a, b = left(values), right(values)
        if a < 0 or b <= 0:
            raise GridExpressionError(
                f"grid expression {text!r}: {a} / {b} (division needs a >= 0 and b > 0, "
                "where C and Python agree)")
        return a // b
    return divide
