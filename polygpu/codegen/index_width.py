"""Whether a kernel's index arithmetic fits in 32-bit ``int``.

The generated code computes flattened offsets (``a[(c4) * n + c5]``), loop bounds,
iterators and block-id arithmetic in the C type of its iterators.  32-bit ``int`` is
what mm-class kernels want (64-bit index arithmetic costs registers and instructions),
but it is only right while every value stays below ``2^31 - 1``.  The values are
bounded by:

* the element count of each array (the row-major offset of an element, and every
  partial sum ``(s_0) * e_1 + ...`` of it, is below the count: subscripts are in
  bounds, which ``model/bounds.py`` checks and warns about otherwise);
* ``SLACK`` times the largest coordinate of a statement instance, of the tiled
  schedule (blocks, threads, tile levels, points), of a block's first point
  (``tile * (b + 1)``) and of each parameter: the AST's expressions are affine
  combinations of those with small coefficients (``256 * bx + tx + 128 * rx`` is a
  coordinate, ``n - tx - 1`` or ``2 * i + j`` at most a few).

Each bound is an :class:`IndexBound`: a factor times a product of isl piecewise
affine functions of the parameters, evaluated exactly with isl.  A program specialized
for known parameter values evaluates them now and is generated with 64-bit indices
(``long long``) exactly when one exceeds ``2^31 - 1``; an unspecialized program is
generated with 32-bit indices and records the bounds, which the runtimes evaluate at
launch (``KernelProgram.check_parameters``), refusing values beyond them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import islpy as isl

from polygpu.model.dependences import maps_of
from polygpu.model.isl_util import max_int_val
from polygpu.model.scop import fix_parameters

if TYPE_CHECKING:
    from polygpu.model.scop import Scop

INT32_MAX = 2**31 - 1
SLACK = 8  # headroom for the affine combinations the AST computes from coordinates


@dataclass(frozen=True)
class IndexBound:
    """``factor * prod(terms)`` (each term the maximum of an isl ``PwAff`` text over
    the parameters) must not exceed ``2^31 - 1`` for 32-bit index arithmetic."""

    what: str
    factor: int
    terms: tuple[str, ...]


def _unhosted(s: isl.Set, host: tuple[str, ...]) -> isl.Set:
    """``s`` with the host iterators (parameters of one step) moved into the set: a
    bound must hold at every step."""
    for h in host:
        k = s.find_dim_by_name(isl.dim_type.param, h)
        if k >= 0:
            s = s.move_dims(isl.dim_type.set, s.dim(isl.dim_type.set),
                            isl.dim_type.param, k, 1)
    return s


def _loose(s: isl.Set) -> isl.Set:
    """``s`` without its existentially quantified constraints (strides, modulos): a
    superset, so its extremes bound those of ``s``, and isl's extremes of it stay a
    few affine pieces -- with the divisions, a stride-3 loop beside a copy made
    ``dim_max`` build pieces whose evaluation took minutes."""
    loose = s.remove_divs().coalesce()
    return loose if loose.is_bounded() or not s.is_bounded() else s


def _extremes(s: isl.Set, what: str, factor: int) -> list[IndexBound]:
    """Bounds on the magnitude of every coordinate of ``s`` (of a superset: exact up to
    strides, and never below)."""
    s = _loose(s)
    out = []
    for d in range(s.dim(isl.dim_type.set)):
        out.append(IndexBound(what, factor, (str(s.dim_max(d).coalesce()),)))
        out.append(IndexBound(what, factor, (str(s.dim_min(d).neg().coalesce()),)))
    return out


def index_bounds(scop: Scop, kernels) -> tuple[IndexBound, ...]:
    """Everything 32-bit index arithmetic needs below ``2^31 - 1`` for ``kernels``."""
    bounds: list[IndexBound] = []
    for a in scop.program_arrays:
        if a.shape:
            bounds.append(IndexBound(f"the element count of {a.name}", 1,
                                     tuple(str(e.coalesce()) for e in a.shape)))
    space = scop.context.get_space()
    for p in scop.parameters:
        k = space.find_dim_by_name(isl.dim_type.param, p)
        aff = isl.PwAff.from_aff(isl.Aff.var_on_domain(isl.LocalSpace.from_space(space),
                                                       isl.dim_type.param, k))
        bounds.append(IndexBound(f"{SLACK} * {p}", SLACK, (str(aff),)))
        bounds.append(IndexBound(f"{SLACK} * {p}", SLACK, (str(aff.neg()),)))
    for s in scop.statements:
        dom = _unhosted(s.domain.intersect_params(scop.context), scop.host)
        bounds += _extremes(dom, f"{SLACK} * the iterators of {s.name}", SLACK)
    for kernel in kernels:
        for piece in maps_of(kernel.schedule):
            rng = _loose(_unhosted(piece.intersect_params(scop.context).range(), scop.host))
            bounds += _extremes(rng, f"{SLACK} * the tiled schedule of kernel "
                                f"{kernel.index}", SLACK)
            for k, tile in enumerate(kernel.tile):
                # the first point of block b: tile * b (+ tile for the partial-tile
                # guards' n - tile * b comparisons)
                top = rng.dim_max(k).add_constant_val(isl.Val(1)).coalesce()
                bounds.append(IndexBound(f"{SLACK} * the points of kernel {kernel.index}",
                                         SLACK * tile, (str(top),)))
    seen, unique = set(), []
    for b in bounds:
        if (b.factor, b.terms) not in seen:
            seen.add((b.factor, b.terms))
            unique.append(b)
    return tuple(unique)


@lru_cache(maxsize=4096)
def _term_value(term: str, params: tuple[tuple[str, int], ...]) -> int | None:
    """The maximum of ``term`` at the parameter values (0 where it is undefined, None
    when unbounded)."""
    pa = isl.PwAff(term)
    pa = pa.intersect_params(fix_parameters(isl.Set.universe(pa.get_space().params()),
                                            dict(params)))
    if pa.domain().is_empty():
        return 0
    val = max_int_val(pa)
    if not val.is_int():
        return None
    return max(int(val.to_python()), 0)


def bound_value(bound: IndexBound, params: Mapping[str, int]) -> int | None:
    """The value of ``bound`` at ``params`` (None: unbounded)."""
    key = tuple(sorted((k, int(v)) for k, v in params.items()))
    value = bound.factor
    for term in bound.terms:
        v = _term_value(term, key)
        if v is None:
            return None
        value *= v
    return value


def violated(bounds, params: Mapping[str, int]) -> tuple[IndexBound, int | None] | None:
    """The first of ``bounds`` beyond ``2^31 - 1`` at ``params``, with its value."""
    for b in bounds:
        v = bound_value(b, params)
        if v is None or v > INT32_MAX:
            return b, v
    return None
