"""How many blocks a kernel launches along each axis.

The launch plan gives each axis's block count as a C expression over the parameters
(:func:`grid_expression`, evaluated by the runtimes).  A kernel specialised for known
parameter values also needs that count *here*: the launched grid bounds the block ids,
and telling isl so removes the guards of blocks that can never be partial
(:func:`block_count`, the same arithmetic on numbers).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping
from fractions import Fraction

import islpy as isl

from polygpu.model.isl_util import max_int_val


def _fraction(val: isl.Val) -> Fraction:
    return Fraction(str(val))


def _linear_bound(aff: isl.Aff, upper: bool) -> tuple[dict[str, Fraction], Fraction]:
    """A div-free affine bound of ``aff`` over the parameters (above if ``upper``):
    each ``floor(x)`` is bounded by ``x`` on one side and ``x - 1`` on the other."""
    coeffs: dict[str, Fraction] = {}
    for k in range(aff.dim(isl.dim_type.param)):
        c = _fraction(aff.get_coefficient_val(isl.dim_type.param, k))
        if c:
            coeffs[aff.get_dim_name(isl.dim_type.param, k)] = c
    const = _fraction(aff.get_constant_val())
    for k in range(aff.dim(isl.dim_type.div)):
        c = _fraction(aff.get_coefficient_val(isl.dim_type.div, k))
        if not c:
            continue
        # c * floor(x): push x the way that makes c * floor(x) extreme in our direction
        x_upper = (c > 0) == upper
        inner, inner_const = _linear_bound(aff.get_div(k), x_upper)
        if not x_upper:
            inner_const -= 1  # floor(x) >= x - 1
        for name, v in inner.items():
            coeffs[name] = coeffs.get(name, Fraction(0)) + c * v
        const += c * inner_const
    return {n: v for n, v in coeffs.items() if v}, const


def grid_expression(extent: isl.PwAff, tile: int) -> str:
    """Blocks needed along one axis, as a C expression over the parameters: for an
    upper bound ``N / D`` of the shifted coordinate (one per piece of ``extent``),
    ``floor(N / (D * tile)) + 1`` written as ``max(N + D * tile, 0) / (D * tile)``, and
    at least one block."""
    counts = []
    for coeffs, const, divisor in _piece_counts(extent, tile):
        terms = [name if c == 1 else f"{c} * {name}" for name, c in coeffs.items()]
        terms.append(str(const))
        numerator = " + ".join(terms).replace("+ -", "- ")
        counts.append(f"max({numerator}, 0) / {divisor}")
    text = counts[0]
    for c in counts[1:]:
        text = f"max({text}, {c})"
    return f"max({text}, 1)"  # a launch needs a block even when the domain is empty


def block_count(extent: isl.PwAff, tile: int, values: Mapping[str, int]) -> int:
    """The value of ``grid_expression(extent, tile)`` at the parameter ``values``."""
    return max([1] + [max(sum(c * values[name] for name, c in coeffs.items()) + const, 0)
                      // divisor for coeffs, const, divisor in _piece_counts(extent, tile)])


def _piece_counts(extent: isl.PwAff, tile: int) -> list[tuple[dict[str, int], int, int]]:
    """Per piece of ``extent``, blocks = ``max(sum(c * p) + const, 0) // divisor`` as
    integer ``(coefficients, const, divisor)``: the upper bound ``N / D`` of the shifted
    coordinate scaled to integers, ``const`` including the ``+ D * tile``."""
    pieces = []
    for _, aff in extent.get_pieces():
        coeffs, const = _linear_bound(aff, upper=True)
        denominator = math.lcm(const.denominator, *(v.denominator for v in coeffs.values()))
        divisor = denominator * tile
        pieces.append(({name: int(v * denominator) for name, v in coeffs.items()},
                       int(const * denominator) + divisor, divisor))
    return pieces


# CUDA's grid limits: x up to 2^31 - 1 blocks, y and z up to 65535
AXIS_LIMITS = (2**31 - 1, 65535, 65535)
BLOCK_AXIS_LIMITS = (1024, 1024, 64)  # threads of a block along x, y, z


def flat_block(threads: tuple[int, ...]) -> bool:
    """Whether a block of ``threads`` (x first) is launched as one line of threads, its
    coordinates taken from ``threadIdx.x`` (x fastest, as CUDA numbers them: the same
    warps): where an axis has more than CUDA allows along it (a thread per element of a
    batch maps 128 elements to z, whose limit is 64)."""
    return any(t > limit for t, limit in zip(threads, BLOCK_AXIS_LIMITS, strict=False))


def launch_block(threads: tuple[int, ...], lanes: int = 1) -> tuple[int, int, int]:
    """The block a kernel with ``threads`` launches (see :func:`flat_block`); with
    ``lanes`` (``Variant.lanes``) a line of ``lanes`` times as many, the lanes of a
    thread consecutive."""
    block = (math.prod(threads) * lanes,) if lanes > 1 or flat_block(threads) \
        else tuple(threads)
    return tuple(block) + (1,) * (3 - len(block))


def may_exceed(extent: isl.PwAff, tile: int, context: isl.Set, limit: int,
               values: Mapping[str, int] | None) -> bool:
    """Whether the block count along one axis can exceed ``limit``: at ``values``
    when given (a specialized kernel), else for some parameter values of ``context``
    (isl's maximum of the extent; unbounded parameters can)."""
    if values is not None:
        return block_count(extent, tile, values) > limit
    top = max_int_val(extent.intersect_params(
        context.align_params(extent.get_space().params())))
    if not top.is_int():
        return not top.is_neginfty() and not top.is_nan()
    return int(top.to_python()) // tile + 1 > limit


def device_expression(text: str) -> str:
    """Grid expression ``text`` as C evaluated in ``long long`` in a kernel (the
    parameters are ``int``: ``n + 255`` must not overflow): names cast, literals
    suffixed ``LL``, so ``max``/``min`` see two ``long long`` operands."""
    def walk(node: ast.expr) -> str:
        if isinstance(node, ast.Constant):
            return f"{node.value}LL"
        if isinstance(node, ast.Name):
            return f"((long long){node.id})"
        if isinstance(node, ast.UnaryOp):
            return f"(-{walk(node.operand)})" if isinstance(node.op, ast.USub) \
                else walk(node.operand)
        if isinstance(node, ast.Call):
            out = walk(node.args[0])
            for a in node.args[1:]:
                out = f"{node.func.id}({out}, {walk(a)})"
            return out
        if isinstance(node, ast.BinOp):
            op = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}[type(node.op)]
            return f"({walk(node.left)} {op} {walk(node.right)})"
        raise ValueError(f"grid expression {text!r}: {ast.unparse(node)!r}")
    return walk(ast.parse(text.strip(), mode="eval").body)
