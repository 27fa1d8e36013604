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
from collections.abc import Mapping
from functools import lru_cache

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


def launch_blocks(program: KernelProgram, values: Mapping[str, int]) -> list[int]:
    """Thread blocks of each of ``program``'s launches at parameter ``values`` (refused
    when the program was specialized for others; with host loops, the most any of its
    steps launches, 0 for a launch without steps)."""
    params = program.parameter_values(values)
    blocks = [0] * len(program.launches)  # with host loops: the largest step's grid
    for k, host in program.steps(values):
        names = program.grid_values(params, host)
        count = math.prod(evaluate(e, names) for e in program.launches[k].grid)
        blocks[k] = max(blocks[k], count)
    return blocks


def evaluate(text: str, values: Mapping[str, int]) -> int:
    """The value of grid expression ``text`` with parameters bound by ``values``."""
    return _eval(parse(text), values, text)


def _eval(node: ast.expr, values: Mapping[str, int], text: str) -> int:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in values:
            raise GridExpressionError(f"grid expression {text!r}: unknown parameter {node.id!r}")
        return int(values[node.id])
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, values, text)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.Call):
        args = [_eval(a, values, text) for a in node.args]
        return max(args) if node.func.id == "max" else min(args)
    assert isinstance(node, ast.BinOp)
    a, b = _eval(node.left, values, text), _eval(node.right, values, text)
    if isinstance(node.op, ast.Add):
        return a + b
    if isinstance(node.op, ast.Sub):
        return a - b
    if isinstance(node.op, ast.Mult):
        return a * b
    if a < 0 or b <= 0:
        raise GridExpressionError(
            f"grid expression {text!r}: {a} / {b} (division needs a >= 0 and b > 0, where C and "
            "Python agree)"
        )
    return a // b
