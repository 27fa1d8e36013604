"""Relayout of interleaved batches: the element dimension moved outermost in a scratch
copy, a transposing copy in before the region and out after it (seed 000's data adapter).

A batch of small problems stored as a structure of arrays -- ``a[i][j][e]``, entry
``(i, j)`` of every element one row -- keeps each element's entries ``nb`` words
apart.  A thread per element reads that well (a warp's loads are one line), but an
element too large for one thread (a 64 x 64 product) is worked on by a block, whose
tiles then gather words ``nb`` apart: 0.16x torch.bmm at n = 64 on the H200.  Seed
000's answer is an adapter: transpose the arrays into the element-outermost layout (an
array of structures), run the plans made for it, transpose the outputs back; the
transposes cost a copy each, which the search weighs against the interleaved plans.

Which arrays (:func:`relayout_batch`): the batch loop is a parallel loop enclosing every
statement; each argument array of rank two or more whose every reference has the batch
iterator, alone, as its last subscript is relaid.  ``a`` gets the scratch array
``pg_l_a`` of shape ``[nb][n][n]`` (the last extent first) and every reference
``a[x0]..[xk][e]`` becomes ``pg_l_a[e][x0]..[xk]``.  A statement ``pg_l_a[c2][c0][c1] =
a[c0][c1][c2]`` over every element the region reads before writing it (the caller's
values; none for a product's ``c``, set to 0 first) runs before everything, and
``a[c0][c1][c2] = pg_l_a[c2][c0][c1]`` over every element it writes after everything
(each an ordinary loop nest: the scheduler, tiling and staging give the transposes
their plans, coalesced through shared memory on both sides).

The proof (:func:`verify_relayout`): the scratch array is the original under a
bijection of its indices (a permutation of dimensions over the permuted box), each copy
stores every element it reads unchanged at its place under that bijection (copy in) or
its inverse (copy out), every
reference of the original statements touches under it exactly the elements it touched
before, in the same order, the copy in runs before every other statement and every read
of the copy finds its element written before it (by the copy in, or by the write it
read before: the copy in precedes that), the copy out writes exactly the elements the
region writes and runs after every other statement, and nothing else touches the
original array.  So every read sees the value it saw before (an entry value through the
copy in, or the value the same write instance left), and the caller's array ends as it
did.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import islpy as isl

from polygpu.errors import SourceLoc
from polygpu.frontend import ir
from polygpu.model.analysis import Analysis
from polygpu.model.isl_budget import OutOfBudget, isl_operation_budget
from polygpu.model.isl_util import union_of
from polygpu.model.scop import Array, Loop, Scop, Statement
from polygpu.transform.expand import (
    EXPANSION_OPERATIONS,
    _fresh_statement,
    _padded,
    _without_source,
    copy_statement,
    fresh_array_name,
    moved_on,
    sourceless_reads,
)

PREFIX = "pg_l_"  # frontend/names.py reserves pg_: no user name can clash
ITERATOR = "pg_c"  # the copies' iterators: pg_c0, pg_c1, ...


@dataclass(frozen=True)
class Relaid:
    """``array`` lives as ``name`` (its last dimension first) while the region runs;
    ``copy_in`` fills it from ``array`` first (None: the region reads none of it),
    ``copy_out`` writes it back last (None: the region writes none of it)."""

    array: str
    name: str
    copy_in: str | None
    copy_out: str | None

    def to_json(self) -> dict:
        return {"array": self.array, "relaid_as": self.name, "copy_in": self.copy_in,
                "copy_out": self.copy_out, "order": "last dimension first"}


@dataclass(frozen=True)
class Relayout:
    """The region with its interleaved arrays relaid (``scop``), or why not."""

    scop: Scop
    batch_loop: str  # the batch loop's iterator ('' where there is none)
    relaid: tuple[Relaid, ...]
    reason: str = ""  # why nothing was relaid

    def to_json(self) -> dict:
        if not self.relaid:
            return {"relaid": [], "reason": self.reason}
        return {"batch_loop": self.batch_loop, "relaid": [r.to_json() for r in self.relaid]}


def batch_loop(an: Analysis) -> Loop | None:
    """The outermost parallel loop enclosing every statement that runs, or None."""
    scop = an.scop
    running = [s for s in scop.statements if not s.domain.is_empty()]
    parallel = {lp.loop for lp in an.loops if lp.parallel}
    if not running:
        return None
    common = set(running[0].loops).intersection(*(s.loops for s in running[1:]))
    for lid in running[0].loops:  # outermost first
        if lid in common and lid in parallel:
            return scop.loops[lid]
    return None


def interleaved_arrays(scop: Scop, loop: Loop) -> list[Array]:
    """The argument arrays of rank >= 2 whose every reference's last subscript is the
    batch loop's iterator alone (the batch innermost: the element's entries apart)."""
    found = []
    for array in scop.arrays:
        if array.kind != "argument" or array.rank < 2:
            continue
        refs = [a for a in scop.accesses if a.array == array.name]
        if refs and all(loop.id in scop.statement(a.statement).loops
                        and a.subscripts[-1] == ir.IntVar(loop.iterator) for a in refs):
            found.append(array)
    return found


def relayout_batch(an: Analysis) -> Relayout:
    """``an``'s region with its interleaved arrays relaid (module doc), proven by
    :func:`verify_relayout`; the region unchanged, with the reason, where there is no
    batch loop, no interleaved array or the proof fails."""
    scop = an.scop
    loop = batch_loop(an)
    if loop is None:
        return Relayout(scop, "", (), "no parallel loop encloses every statement")
    arrays = interleaved_arrays(scop, loop)
    if not arrays:
        return Relayout(scop, loop.iterator, (), "no array has the batch loop's "
                        f"iterator {loop.iterator} alone as its last subscript")
    try:
        # bounded like the expansion: a relayout is an option, and one isl cannot prove
        # within the budget is not offered (never applied unproven)
        with isl_operation_budget(scop.context.get_ctx(), EXPANSION_OPERATIONS):
            new, relaid = relaid_region(scop, arrays)
            problem = verify_relayout(scop, new, relaid)
    except OutOfBudget:
        return Relayout(scop, loop.iterator, (), "proving it took isl more than "
                        f"{EXPANSION_OPERATIONS:,} operations")
    if problem is not None:
        return Relayout(scop, loop.iterator, (), f"the relayout failed the proof ({problem})")
    return Relayout(new, loop.iterator, relaid)


# --------------------------------------------------------------------------------------
# The relaid region
# --------------------------------------------------------------------------------------


def moved(index: tuple) -> tuple:
    """An index with its last entry first: the relaid array's order."""
    return (index[-1],) + tuple(index[:-1])


def _permutation(array: Array, name: str) -> isl.Map:
    """``{ array[x0, .., xk, e] -> name[e, x0, .., xk] }`` (parameters of the extent)."""
    r = array.rank
    space = isl.Space.map_from_domain_and_range(array.extent.get_space(),
                                                array.extent.get_space())
    m = isl.Map.universe(space)
    for k, src in enumerate(moved(tuple(range(r)))):
        m = m.equate(isl.dim_type.out, k, isl.dim_type.in_, src)
    return m.set_tuple_name(isl.dim_type.in_, array.name).set_tuple_name(
        isl.dim_type.out, name)


def _relaid_array(scop: Scop, array: Array, name: str) -> Array:
    """``array``'s scratch twin, its last extent first."""
    shape_exprs = moved(array.shape_exprs)
    extent = isl.Set.from_union_set(isl.UnionSet.from_set(array.extent).apply(
        isl.UnionMap.from_map(_permutation(array, name))))
    return Array(name=name, dtype=array.dtype, shape=moved(array.shape),
                 shape_text=moved(array.shape_text), shape_exprs=shape_exprs,
                 extent=extent, kind="scratch", loc=array.loc)


def _position(s: Statement) -> int:
    """The first (textual position) dimension of a 2d+1 schedule."""
    v = s.schedule.plain_get_val_if_fixed(isl.dim_type.out, 0)
    return 0 if v.is_nan() else int(v.to_python())


def _redirected(s: Statement, perms: dict[str, tuple[str, isl.Map]]) -> Statement:
    """``s`` with its references of the relaid arrays on their twins, index moved."""
    if not any(a.array in perms for a in s.accesses):
        return s

    def ref(r):
        if isinstance(r, ir.ArrayRef) and r.array in perms:
            return ir.ArrayRef(perms[r.array][0], moved(tuple(r.index)), r.loc)
        return r

    target = ref(s.body.target)
    body = ir.Assign(target, s.body.op, ir.map_refs(s.body.value, ref), s.body.loc)
    accesses = tuple(
        replace(a, array=perms[a.array][0], subscripts=moved(a.subscripts),
                relation=a.relation.apply_range(perms[a.array][1]))
        if a.array in perms else a for a in s.accesses)
    return replace(s, body=body, accesses=accesses)


def _touched(scop: Scop, array: str, kind: str) -> isl.Set | None:
    """The elements of ``array`` the region's ``kind`` references touch (None: none);
    for ``"entry"`` those of the reads no write of the region precedes (the values that
    come from the caller: all a copy in must carry)."""
    found = None
    if kind == "entry":
        for a, instances in sourceless_reads(scop, array):
            r = a.relation.intersect_domain(instances).range()
            found = r if found is None else found.union(r)
        return None if found is None or found.is_empty() else found.coalesce()
    touched = scop.access_map(kind, array).range()
    # (the references of a statement that never runs touch nothing: no copy for them)
    return None if touched.is_empty() else isl.Set.from_union_set(touched)


def relaid_region(scop: Scop, arrays: list[Array]) -> tuple[Scop, tuple[Relaid, ...]]:
    """``scop`` with ``arrays`` relaid (module doc), unproven."""
    perms, twins, reads, writes = {}, [], {}, {}
    for array in arrays:
        name = fresh_array_name(replace(scop, arrays=scop.arrays + tuple(twins)), PREFIX,
                                array.name)
        twins.append(_relaid_array(scop, array, name))
        perms[array.name] = (name, _permutation(array, name))
        reads[array.name] = _touched(scop, array.name, "entry")
        writes[array.name] = _touched(scop, array.name, "write")
    copies_in = sum(1 for a in arrays if reads[a.name] is not None)
    body = [moved_on(_redirected(s, perms), copies_in) for s in scop.statements]
    last = max((_position(s) for s in body), default=copies_in)
    loops = list(scop.loops)
    first, after, relaid = [], [], []
    for array in arrays:
        name = perms[array.name][0]
        cin = cout = None
        taken = replace(scop, statements=tuple(body + first + after))
        loc = SourceLoc(array.loc.file, array.loc.line)
        same = tuple(range(array.rank))
        if reads[array.name] is not None:
            cin = _fresh_statement(taken)
            first.append(copy_statement(scop, cin, reads[array.name], (array.name, same),
                                        (name, moved(same)), loc, len(first), loops,
                                        ITERATOR))
            taken = replace(scop, statements=tuple(body + first + after))
        if writes[array.name] is not None:
            cout = _fresh_statement(taken)
            after.append(copy_statement(scop, cout, writes[array.name], (name, moved(same)),
                                        (array.name, same), loc, last + 1 + len(after),
                                        loops, ITERATOR))
        relaid.append(Relaid(array.name, name, cin, cout))
    new = replace(scop, arrays=scop.arrays + tuple(twins),
                  statements=_padded(first + body + after), loops=tuple(loops))
    return new, tuple(relaid)


# --------------------------------------------------------------------------------------
# The proof
# --------------------------------------------------------------------------------------


def verify_relayout(original: Scop, new: Scop, relaid: tuple[Relaid, ...]) -> str | None:
    """None if ``new`` computes what ``original`` does (module doc), else what fails."""
    copies = {c for r in relaid for c in (r.copy_in, r.copy_out) if c is not None}
    body = [s for s in new.statements if s.name not in copies]
    if {s.name for s in body} != {s.name for s in original.statements}:
        return "the region's statements changed"
    perms = {}
    for r in relaid:
        array, twin = original.array(r.array), new.array(r.name)
        perm = _permutation(array, r.name)
        if not perm.is_bijective():
            return f"{r.name} is not a permutation of {r.array}"
        image = isl.Set.from_union_set(isl.UnionSet.from_set(array.extent).apply(
            isl.UnionMap.from_map(perm)))
        if not image.is_equal(twin.extent):
            return f"{r.name}'s extent is not {r.array}'s permuted"
        perms[r.array] = (r.name, perm)
    # every reference of the region touches, under the permutation, what it touched
    for s in original.statements:
        mine = new.statement(s.name)
        if len(mine.accesses) != len(s.accesses):
            return f"{s.name}'s references changed"
        for a, b in zip(s.accesses, mine.accesses, strict=True):
            name, want = a.array, a.relation
            if a.array in perms:
                name, perm = perms[a.array]
                want = a.relation.apply_range(perm)
            if (b.ref, b.kind, b.array) != (a.ref, a.kind, name) or \
                    not b.relation.is_equal(want):
                return f"{s.name}'s {a.text} does not touch the same elements of {name}"
    # the region's own instances in the same order
    schedule = union_of([s.schedule for s in body], new.context.get_space())
    old = original.schedule
    if not schedule.lex_lt_union_map(schedule).is_equal(old.lex_lt_union_map(old)):
        return "the region's statements run in another order"
    for r in relaid:
        # every read of the twin finds its element written before it: by the copy in
        # (an entry value) or by the write instance it read in the original
        if not _without_source(new, r.name).is_empty():
            return f"a read of {r.name} precedes every write of its element"
        perm = perms[r.array][1]
        for kind, copy, before in (("entry", r.copy_in, True), ("write", r.copy_out, False)):
            touched = _touched(original, r.array, kind)
            what = f"the copy {'in' if before else 'out'} of {r.array}"
            if (copy is None) != (touched is None):
                return f"{what} is missing"
            if copy is None:
                continue
            c = new.statement(copy)
            # the copy stores, unchanged, each element it reads at that element's
            # permuted (copy in) or original (copy out) place, and touches nothing else
            source, target = (r.array, r.name) if before else (r.name, r.array)
            reads, writes = c.reads, c.writes
            if len(reads) != 1 or len(writes) != 1 or c.body.op != "=" or \
                    not isinstance(c.body.value, ir.ArrayRef) or \
                    (reads[0].array, writes[0].array) != (source, target):
                return f"{what} is not a plain copy from {source} to {target}"
            # (the copy runs its domain: its references there are what it touches)
            outer = (reads[0] if before else writes[0]).relation.intersect_domain(c.domain)
            inner = (writes[0] if before else reads[0]).relation.intersect_domain(c.domain)
            if not inner.is_equal(outer.apply_range(perm)):
                return f"{what} moves elements to other places than {r.name}'s order"
            covered = outer.range()
            touched = touched.intersect_params(new.context)
            if before and not touched.is_subset(covered):
                return f"{what} misses elements the region reads on entry"
            if not before and not touched.is_equal(covered.intersect_params(new.context)):
                return f"{what} writes other elements than the region"
            mine = isl.UnionMap.from_map(c.schedule)
            order = mine.lex_lt_union_map(schedule) if before else \
                mine.lex_gt_union_map(schedule)
            everything = isl.UnionMap.from_domain_and_range(
                isl.UnionSet.from_set(c.domain), schedule.domain())
            if not everything.is_subset(order):
                return (f"{what} does not run {'before' if before else 'after'} every "
                        "other statement")
    return None
