"""Which loops of the original program carry dependences, and reductions.

A loop at depth ``k`` carries a dependence when two dependent instances run in the
same iteration of every enclosing loop (equal schedule dimensions ``0..2k``) but in
different iterations of this one (schedule dimension ``2k+1`` differs).  A loop that
carries nothing is *parallel*: its iterations may run on different threads.

A *reduction* is a statement ``x[f] op= e`` (``+= -= *=``, or ``x = x + e``,
``x = max(x, e)``...) whose right-hand side reads ``x`` nowhere else; its
*reduction loops* are the enclosing loops along which the target ``x[f]`` is
invariant and which carry the statement's flow dependence on itself (so in
``t = 0; for j: t += ...`` inside a loop ``i``, only ``j`` reduces: ``t`` is reset
for every ``i``).  A
loop whose only carried dependences are such self-dependences is parallel up to a
reduction: a later stage may split it or reduce in a tree.
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from polygpu.frontend import ir
from polygpu.model.dependences import Dependences
from polygpu.model.scop import Access, Scop, Statement


@dataclass(frozen=True)
class Reduction:
    statement: str
    array: str
    op: str  # '+' | '*' | 'max' | 'min'
    loops: tuple[str, ...]  # iterators along which the target is invariant


@dataclass(frozen=True)
class LoopParallelism:
    loop: int  # id in Scop.loops
    iterator: str
    parallel: bool  # carries no dependence at all
    reduction: bool  # carries only reduction self-dependences (parallel up to a reduction)
    carried: tuple[str, ...]  # kinds of dependences it carries ('flow', 'anti', 'output')


def invariant_iterators(access: Access, statement: Statement) -> tuple[str, ...]:
    """Iterators of ``statement`` that ``access`` does not depend on (its *redundant loops*)."""
    involved = involved_iterators(access, statement)
    return tuple(it for it in statement.iterators if it not in involved)


def involved_iterators(access: Access, statement: Statement) -> tuple[str, ...]:
    """Iterators that some subscript of ``access`` depends on, decided by isl."""
    involved: set[int] = set()
    pma = access.relation.as_pw_multi_aff()
    for d in range(pma.dim(isl.dim_type.out)):
        for _, aff in pma.get_pw_aff(d).get_pieces():
            for k in range(len(statement.iterators)):
                if aff.involves_dims(isl.dim_type.in_, k, 1):
                    involved.add(k)
    return tuple(it for k, it in enumerate(statement.iterators) if k in involved)


def same_reference(a: ir.Expr, b: ir.Expr) -> bool:
    """Whether two references name the same element (wherever they were written)."""
    if isinstance(a, ir.ArrayRef) and isinstance(b, ir.ArrayRef):
        return (a.array, a.index) == (b.array, b.index)
    if isinstance(a, ir.ScalarRef) and isinstance(b, ir.ScalarRef):
        return a.name == b.name
    return False


def reduction_op(stmt: Statement) -> str | None:
    """The associative operator of ``stmt`` if it has the shape of a reduction update."""
    body = stmt.body
    if body.op in ("+=", "-="):
        return "+"
    if body.op == "*=":
        return "*"
    if body.op != "=":
        return None
    v, t = body.value, body.target
    if isinstance(v, ir.BinOp) and v.op in ("+", "*") and (
        same_reference(t, v.lhs) or same_reference(t, v.rhs)
    ):
        return v.op
    if isinstance(v, ir.BinOp) and v.op == "-" and same_reference(t, v.lhs):
        return "+"
    if isinstance(v, ir.Call) and len(v.args) == 2 and any(
        same_reference(t, a) for a in v.args
    ):
        for name, op in (("max", "max"), ("min", "min")):
            if v.func in (name, f"f{name}", f"f{name}f"):
                return op
    return None


def accumulates(stmt: Statement) -> bool:
    """Whether ``stmt`` reads its target element exactly once (its running value) and
    its other reads of the target array -- a substitution's ``b[j]`` in
    ``b[i] -= a[i][j] * b[j]`` -- provably never touch the instance's own target.
    Weaker than a reduction (:func:`find_reductions` wants no other read of the array):
    enough to keep the running value in a register across a loop that leaves the
    target in place (``codegen/accumulator.py``), where the order stays the original."""
    write = stmt.writes[0]
    same_array_reads = [a for a in stmt.reads if a.array == write.array]
    own = [a for a in same_array_reads if a.relation.is_equal(write.relation)]
    if len(own) != 1:
        return False
    return all(a is own[0] or a.relation.intersect(write.relation).is_empty()
               for a in same_array_reads)


def find_reductions(scop: Scop, deps: Dependences) -> tuple[Reduction, ...]:
    result = []
    for stmt in scop.statements:
        op = reduction_op(stmt)
        if op is None:
            continue
        write = stmt.writes[0]
        same_array_reads = [a for a in stmt.reads if a.array == write.array]
        # exactly one read of the target array, and it reads the very element written
        if len(same_array_reads) != 1 or not same_array_reads[0].relation.is_equal(
            write.relation
        ):
            continue
        self_flow = [d.relation for d in deps.of_kind("flow")
                     if d.source == d.sink == stmt.name and d.array == write.array]
        invariant = invariant_iterators(write, stmt)
        loops = tuple(
            it for depth, it in enumerate(stmt.iterators)
            if it in invariant
            and any(_carries(scop, rel, stmt.name, stmt.name, depth) for rel in self_flow)
        )
        if loops:
            result.append(Reduction(stmt.name, write.array, op, loops))
    return tuple(result)


def _carries(scop: Scop, dep_relation: isl.Map, source: str, sink: str, depth: int) -> bool:
    """Whether a dependence is carried by the loop at ``depth`` shared by source and sink."""
    rel = dep_relation.apply_domain(scop.statement(source).schedule).apply_range(
        scop.statement(sink).schedule
    )
    deltas = rel.deltas()
    same_prefix = deltas
    for d in range(2 * depth + 1):
        same_prefix = same_prefix.fix_val(isl.dim_type.set, d, isl.Val(0))
    zero_here = same_prefix.fix_val(isl.dim_type.set, 2 * depth + 1, isl.Val(0))
    return not same_prefix.subtract(zero_here).is_empty()


def loop_parallelism(
    scop: Scop, deps: Dependences, reductions: tuple[Reduction, ...]
) -> tuple[LoopParallelism, ...]:
    """Parallelism of every loop of the original program."""
    reduction_of = {(r.statement, r.array): r for r in reductions}
    result = []
    for loop in scop.loops:
        members = set(loop.statements)
        carried: set[str] = set()
        only_reductions = True
        for d in deps.items:
            if d.source not in members or d.sink not in members:
                continue
            if not _carries(scop, d.relation, d.source, d.sink, loop.depth):
                continue
            carried.add(d.kind)
            red = reduction_of.get((d.source, d.array))
            if not (d.source == d.sink and red and loop.iterator in red.loops):
                only_reductions = False
        result.append(
            LoopParallelism(
                loop=loop.id,
                iterator=loop.iterator,
                parallel=not carried,
                reduction=bool(carried) and only_reductions,
                carried=tuple(k for k in ("flow", "anti", "output") if k in carried),
            )
        )
    return tuple(result)
