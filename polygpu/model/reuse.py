"""Reuse analysis of every array reference (paper §4.1 and §4.4).

For a reference ``a[F i + f]`` in a statement with an ``n``-dimensional domain, the
access matrix ``F`` (subscripts x iterators) says how data is reused:

* ``rank F < n`` -- *higher-order reuse*: many instances touch one element (the
  null space of ``F`` is the reuse direction).  polygpu decides reuse exactly with
  isl -- the access relation is not injective on the actual domain -- and reports
  the rank of the subscripts as written alongside; the two differ only on
  degenerate domains (a loop with a single iteration).
* the iterators whose column of ``F`` is zero are the reference's *redundant
  loops*: the reference is invariant along them.

Reuse and the parallel loops (those a later stage maps to threads) give the class
each later stage starts from:

=============  ===========================================  =====================
class          condition                                     placement candidate
=============  ===========================================  =====================
no-reuse       every instance touches its own element        global (coalesced)
constant       read-only, invariant along every parallel     ``__constant__``
               loop (all threads read the same address)
register       varies only with parallel loops and no two     register
               parallel iterations share an element (each
               thread owns its elements, reuses them in time)
reuse          anything else with reuse                      shared memory
=============  ===========================================  =====================
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import islpy as isl
import sympy

from polygpu.frontend import ir
from polygpu.model.parallelism import LoopParallelism, involved_iterators
from polygpu.model.scop import Access, Scop

PLACEMENT_CANDIDATE = {
    "no-reuse": "global-coalesced",
    "constant": "constant",
    "register": "register",
    "reuse": "shared",
}


@dataclass(frozen=True)
class ReuseInfo:
    statement: str
    ref: int
    array: str
    kind: str  # 'read' | 'write'
    text: str
    dimensions: int  # dimensionality of the statement's domain
    rank: int | None  # rank of the access matrix (None when a subscript uses min/max/?:)
    higher_order_reuse: bool
    redundant_loops: tuple[str, ...]
    varies_with: tuple[str, ...]
    reuse: str  # 'no-reuse' | 'constant' | 'register' | 'reuse'

    @property
    def candidate(self) -> str:
        return PLACEMENT_CANDIDATE[self.reuse]


def linear_coefficients(e: ir.IntExpr, iterators: tuple[str, ...]) -> list[Fraction] | None:
    """Coefficients of the iterators in ``e``; floor/trunc division by ``c`` counts as
    ``1/c`` (same reuse directions).  None when ``e`` is only piecewise affine."""
    zero = [Fraction(0)] * len(iterators)
    if isinstance(e, ir.IntConst):
        return zero
    if isinstance(e, ir.IntVar):
        if e.name in iterators:
            zero[iterators.index(e.name)] = Fraction(1)
        return zero
    if isinstance(e, ir.IntNeg):
        inner = linear_coefficients(e.arg, iterators)
        return None if inner is None else [-c for c in inner]
    if isinstance(e, ir.IntBinOp):
        lhs = linear_coefficients(e.lhs, iterators)
        rhs = linear_coefficients(e.rhs, iterators)
        if lhs is None or rhs is None:
            return None
        if e.op in ("+", "-"):
            sign = 1 if e.op == "+" else -1
            return [a + sign * b for a, b in zip(lhs, rhs, strict=True)]
        constant = _constant(e.rhs) if e.op != "*" else None
        if e.op == "*":
            if any(lhs) and _constant(e.rhs) is not None:
                return [c * _constant(e.rhs) for c in lhs]
            if any(rhs) and _constant(e.lhs) is not None:
                return [c * _constant(e.lhs) for c in rhs]
            return zero if not any(lhs) and not any(rhs) else None
        if e.op in ("floordiv", "truncdiv") and constant:
            return [c / constant for c in lhs]
        return None  # mod/rem: periodic, not linear
    return None


def _constant(e: ir.IntExpr) -> int | None:
    """Value of a constant integer expression built from literals only."""
    if isinstance(e, ir.IntConst):
        return e.value
    if isinstance(e, ir.IntNeg):
        v = _constant(e.arg)
        return None if v is None else -v
    if isinstance(e, ir.IntBinOp) and e.op in ("+", "-", "*"):
        a, b = _constant(e.lhs), _constant(e.rhs)
        if a is None or b is None:
            return None
        return a + b if e.op == "+" else a - b if e.op == "-" else a * b
    return None


def access_rank(access: Access, iterators: tuple[str, ...]) -> int | None:
    rows = [linear_coefficients(s, iterators) for s in access.subscripts]
    if any(r is None for r in rows):
        return None
    if not rows or not iterators:
        return 0
    return _rank(tuple(tuple(r) for r in rows))


@lru_cache(maxsize=1024)
def _rank(rows: tuple[tuple[Fraction, ...], ...]) -> int:
    """The rank of a coefficient matrix (sympy is slow, and the same few matrices
    recur: a statement's references, its copies in step regions and sub-regions)."""
    return int(sympy.Matrix([list(r) for r in rows]).rank())


def _owned_by_one_iteration(access: Access, parallel_dims: list[int]) -> bool:
    """Whether instances touching the same element always agree on the parallel
    iterators, i.e. no element is shared between two threads (exact, with isl)."""
    rel = access.relation
    same_element = rel.apply_range(rel.reverse())
    agree = isl.Map.universe(same_element.get_space())
    for k in parallel_dims:
        agree = agree.equate(isl.dim_type.in_, k, isl.dim_type.out, k)
    return same_element.is_subset(agree)


def analyze_reuse(
    scop: Scop, loops: tuple[LoopParallelism, ...]
) -> tuple[ReuseInfo, ...]:
    """Reuse information for every reference of ``scop``, in statement order."""
    parallel_loops = {lp.loop for lp in loops if lp.parallel}
    written = scop.written_arrays()
    result = []
    for stmt in scop.statements:
        parallel_its = {
            scop.loops[lid].iterator for lid in stmt.loops if lid in parallel_loops
        }
        for acc in stmt.accesses:
            varies = involved_iterators(acc, stmt)
            reuse_exists = not acc.relation.is_injective()
            if not reuse_exists:
                cls = "no-reuse"
            elif acc.array not in written and parallel_its and not (
                set(varies) & parallel_its
            ):
                cls = "constant"
            elif varies and set(varies) <= parallel_its and _owned_by_one_iteration(
                acc, [k for k, it in enumerate(stmt.iterators) if it in parallel_its]
            ):
                cls = "register"
            else:
                cls = "reuse"
            result.append(
                ReuseInfo(
                    statement=stmt.name,
                    ref=acc.ref,
                    array=acc.array,
                    kind=acc.kind,
                    text=acc.text,
                    dimensions=len(stmt.iterators),
                    rank=access_rank(acc, stmt.iterators),
                    higher_order_reuse=reuse_exists,
                    redundant_loops=tuple(i for i in stmt.iterators if i not in varies),
                    varies_with=varies,
                    reuse=cls,
                )
            )
    return tuple(result)
