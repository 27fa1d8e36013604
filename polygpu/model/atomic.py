"""Reductions that may run in parallel, combined with atomic additions.

A sum reduction ``x[f] += e`` (:mod:`polygpu.model.parallelism` finds them) gives the same
result in any order of its instances, up to floating-point rounding, as long as every
update is atomic.  So its *reduction loops* (along which ``x[f]`` is invariant) may be
space dimensions: the threads that share an element each add a partial sum with
``atomicAdd``.  That is how a matrix-vector product gets more than ``n`` threads.

What legality then asks (:func:`relaxed_dependences`):

* the statement's dependences on itself through ``x`` are dropped -- the atomic
  combine is what orders them;
* every other statement that touches an element of ``x`` stays ordered against *every*
  instance of the reduction touching that element, in the original order.  The exact
  dependences only link consecutive accesses (the initialisation ``x[i] = 0`` flows
  into the first update, the first into the second...); with the chain between updates
  gone, the *memory-based* pairs are what keeps ``x[i] = 0`` before all updates and a
  later read after all of them.  These are exact sets from isl, a superset of the
  value-based pairs between the two statements, so relaxing never loses an order a
  non-reduction access needs.

Only ``+`` (and ``-``) reductions into arrays of ``float``, ``double`` or ``int`` are
combinable: those have a hardware ``atomicAdd``.  ``*``, ``max`` and ``min`` and
reductions into scalar temporaries stay sequential along their reduction loops.
"""

from __future__ import annotations

from collections.abc import Iterable

import islpy as isl

from polygpu.frontend import ir
from polygpu.model.dependences import Dependence, Dependences
from polygpu.model.parallelism import Reduction, same_reference
from polygpu.model.scop import Scop

ATOMIC_DTYPES = ("float32", "float64", "int32")


def combinable(scop: Scop, reductions: Iterable[Reduction]) -> dict[str, Reduction]:
    """Statement name -> its reduction, for the sum reductions into arrays whose element
    type has an ``atomicAdd``."""
    result = {}
    for r in reductions:
        stmt = scop.statement(r.statement)
        if r.op != "+" or not isinstance(stmt.body.target, ir.ArrayRef):
            continue
        if scop.array(r.array).dtype not in ATOMIC_DTYPES or operand(stmt.body) is None:
            continue
        result[r.statement] = r
    return result


def sum_update(body: ir.Assign) -> tuple[ir.Expr, float] | None:
    """``(term, sign)`` of a sum update of an array element: ``x += term`` (sign 1),
    ``x -= term`` (-1), ``x = x + term``, ``x = term + x``, ``x = x - term``; None for
    other shapes.  Shared with the BLAS matcher (:mod:`polygpu.search.peers`)."""
    t, v = body.target, body.value
    if not isinstance(t, ir.ArrayRef):
        return None
    if body.op in ("+=", "-="):
        return v, 1.0 if body.op == "+=" else -1.0
    if body.op != "=" or not isinstance(v, ir.BinOp) or v.op not in ("+", "-"):
        return None
    if same_reference(t, v.lhs):
        return v.rhs, 1.0 if v.op == "+" else -1.0
    if v.op == "+" and same_reference(t, v.rhs):
        return v.lhs, 1.0
    return None


def product_update(body: ir.Assign) -> tuple[ir.Expr, ir.Expr] | None:
    """``(X, Y)`` of ``T += X * Y`` (either factor order), else None: a product's step,
    as the tensor cores run it (codegen/mma.py; memory/placement.py pads its operands'
    buffers for the lanes that read them)."""
    found = sum_update(body)
    if found is None or found[1] < 0:
        return None
    term = found[0]
    if not isinstance(term, ir.BinOp) or term.op != "*":
        return None
    return term.lhs, term.rhs


def operand(body: ir.Assign) -> ir.Expr | None:
    """What a sum update adds to its target (its term, negated where it subtracts)."""
    found = sum_update(body)
    if found is None:
        return None
    term, sign = found
    return term if sign > 0 else ir.UnaryOp("-", term)


def _memory_pairs(scop: Scop, atomic: str, other: str, array: str) -> list[Dependence]:
    """Every pair of instances of ``atomic`` and ``other`` touching one element of
    ``array``, oriented by the original schedule (earlier -> later)."""
    writes = scop.statement(atomic).writes[0].relation  # the reduction's target
    # only the two statements' order matters: lex_lt over the whole region's schedule
    # costs seconds on a dozen statements (correlation), per pair
    schedule = isl.UnionMap.from_map(scop.statement(atomic).schedule).union(
        isl.UnionMap.from_map(scop.statement(other).schedule))
    order = schedule.lex_lt_union_map(schedule)
    out = []
    for acc in scop.accesses:
        if acc.statement != other or acc.array != array:
            continue
        same = isl.UnionMap.from_map(writes).apply_range(
            isl.UnionMap.from_map(acc.relation).reverse())  # atomic -> other
        before = same.intersect(order)
        after = same.reverse().intersect(order)
        for kind, rel, source, sink in (
                ("flow" if acc.kind == "read" else "output", before, atomic, other),
                ("anti" if acc.kind == "read" else "output", after, other, atomic)):
            if rel.is_empty():
                continue
            out.append(Dependence(kind, array, source, sink,
                                  isl.Map.from_union_map(rel.coalesce())))
    return out


def relaxed_dependences(scop: Scop, deps: Dependences, reductions: dict[str, Reduction],
                        atomic: Iterable[str]) -> Dependences:
    """The dependences a schedule must respect when the statements ``atomic`` (keys of
    ``reductions``) update their targets atomically (module doc)."""
    atomic = frozenset(atomic)
    if not atomic:
        return deps
    target = {s: reductions[s].array for s in atomic}
    kept = [d for d in deps.items
            if not (d.source == d.sink and d.source in atomic and d.array == target[d.source])]
    extra = []
    for s in sorted(atomic):
        others = sorted({a.statement for a in scop.accesses
                         if a.array == target[s] and a.statement != s})
        for o in others:
            if o in atomic and target[o] == target[s] and o < s:
                continue  # the pair was added from the other side already
            extra += _memory_pairs(scop, s, o, target[s])
    return Dependences(tuple(kept + extra), deps.space)
