"""Snapshots of entry values: reads that only ever see an array's value from before the
region read a copy taken first, so their anti dependences go away.

PolyBench's in-place trmm computes ``B[i][j] += A[k][i] * B[k][j]`` for ``k > i``: row
``i`` reads rows that are updated later, so every read of ``B[k][j]`` sees the value
``B`` had on entry -- but it must happen before row ``k`` is overwritten, and that anti
dependence makes ``i`` sequential (one thread per column: 0.26x PPCG at EXTRALARGE).
Reading those values from a copy of ``B`` taken before anything else (a ``scratch``
array, allocated by the runtime, never seen by the caller) leaves only the flow
dependences, and ``i`` becomes parallel: the product is a GEMM-like nest.  The result
is still written in place, to ``B``; only the reads move.

Which reads (:func:`snapshot_inputs`): of a written argument array, each read reference
none of whose instances has an earlier write of its element in the region (exact, with
isl: it sees only entry values) and some of whose instances precede a later write of
their element (an anti dependence to remove).  The copy statement ``pg_s_B[e] = B[e]``
runs over the elements those reads touch, before every other statement (the others'
schedules move one position on).

The proof (:func:`verify_snapshot`): in the new region the copy's read of ``B`` has no
earlier write (it sees entry values), and every instance of every redirected read has a
source (the copy of its element, the only writer of ``pg_s_B``).  So each redirected
read sees the entry value of its element, as the original read did; nothing else
changed.  :mod:`polygpu.pipeline` keeps a snapshot only where the scheduler then finds
more parallel dimensions for the original statements.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import islpy as isl

from polygpu.errors import SourceLoc
from polygpu.frontend import ir
from polygpu.model.isl_budget import OutOfBudget, isl_operation_budget
from polygpu.model.isl_util import maps_of
from polygpu.model.scop import Access, Scop
from polygpu.transform.expand import (
    EXPANSION_OPERATIONS,
    Refusal,
    _flow_into,
    _fresh_statement,
    _make_array,
    _padded,
    copy_statement,
    fresh_array_name,
    moved_on,
)

PREFIX = "pg_s_"  # frontend/names.py reserves pg_: no user name can clash
ITERATOR = "pg_c"  # iterators of the copy statements: pg_c0, pg_c1, ...


@dataclass(frozen=True)
class Snapshotted:
    """``array``'s reads ``reads`` (statement#ref) now read ``name``, which statement
    ``copy`` fills from ``array`` before anything else runs."""

    array: str
    name: str
    reads: tuple[str, ...]
    copy: str
    reason: str

    def to_json(self) -> dict:
        return {"array": self.array, "snapshot": self.name, "reads": list(self.reads),
                "copy_statement": self.copy, "reason": self.reason}


@dataclass(frozen=True)
class Snapshot:
    scop: Scop
    taken: tuple[Snapshotted, ...]
    refused: tuple[Refusal, ...] = ()

    def to_json(self) -> list[dict]:
        return [t.to_json() for t in self.taken] + [
            {"array": r.array, "refused": r.reason} for r in self.refused]


def _pairs(scop: Scop, read: Access, later: bool) -> isl.UnionMap:
    """Read instance -> write instances of the same element, earlier (``later=False``)
    or later in the original order."""
    writes = scop.access_map("write", read.array)
    schedule = scop.schedule
    order = schedule.lex_lt_union_map(schedule) if later else \
        schedule.lex_gt_union_map(schedule)
    return isl.UnionMap.from_map(read.relation).apply_range(writes.reverse()).intersect(order)


def _carried(scop: Scop, pairs: isl.UnionMap) -> bool:
    """Whether some pair of instances lies in different iterations of a loop enclosing
    both (an anti dependence that keeps that loop sequential; one inside an iteration
    costs nothing to keep)."""
    for m in maps_of(pairs):
        a = scop.statement(m.get_tuple_name(isl.dim_type.in_))
        b = scop.statement(m.get_tuple_name(isl.dim_type.out))
        same = isl.Map.universe(m.get_space())
        for d, (x, y) in enumerate(zip(a.loops, b.loops, strict=False)):
            if x != y:
                break
            same = same.equate(isl.dim_type.in_, d, isl.dim_type.out, d)
        if not m.is_subset(same):
            return True
    return False


def entry_reads(scop: Scop, array: str) -> list[Access]:
    """The reads of ``array`` that see only entry values and precede a later write of
    their element in another iteration of a common loop (module doc)."""
    return [a for a in scop.accesses
            if a.array == array and a.kind == "read"
            and _pairs(scop, a, later=False).is_empty()
            and _carried(scop, _pairs(scop, a, later=True))]


def snapshot_inputs(scop: Scop) -> Snapshot:
    """``scop`` with every written argument array's entry reads redirected to a
    snapshot (module doc), each proven by :func:`verify_snapshot`."""
    taken, refused = [], []
    written = scop.written_arrays()
    for array in scop.arrays:
        if array.kind != "argument" or array.name not in written:
            continue
        try:
            # bounded like the expansion: a snapshot only enables parallelism, and one
            # isl cannot analyse within the budget is refused, never applied unproven
            with isl_operation_budget(scop.context.get_ctx(), EXPANSION_OPERATIONS):
                reads = entry_reads(scop, array.name)
                if not reads:
                    continue
                new, record = _snapshot(scop, array, reads)
                problem = verify_snapshot(new, record)
        except OutOfBudget:
            refused.append(Refusal(array.name, "analysing it took isl more than "
                                   f"{EXPANSION_OPERATIONS:,} operations"))
            continue
        if problem is not None:
            refused.append(Refusal(array.name, f"the snapshot failed the proof ({problem})"))
            continue
        scop = new
        taken.append(record)
    return Snapshot(scop, tuple(taken), tuple(refused))


def _snapshot(scop: Scop, array, reads: list[Access]) -> tuple[Scop, Snapshotted]:
    name = fresh_array_name(scop, PREFIX, array.name)
    copy_array = _make_array(scop, name, array, ())
    chosen = {(a.statement, a.ref) for a in reads}
    subscripts = {(a.statement, a.subscripts) for a in reads}

    statements = []
    for s in scop.statements:
        mine = [a for a in s.accesses if (a.statement, a.ref) in chosen]
        if mine:
            def ref(r, s=s):
                if isinstance(r, ir.ArrayRef) and r.array == array.name and \
                        (s.name, tuple(r.index)) in subscripts:
                    return ir.ArrayRef(name, r.index, r.loc)
                return r

            body = ir.Assign(s.body.target, s.body.op, ir.map_refs(s.body.value, ref), s.body.loc)
            accesses = tuple(
                replace(a, array=name, relation=a.relation.set_tuple_name(
                    isl.dim_type.out, name)) if (a.statement, a.ref) in chosen else a
                for a in s.accesses)
            s = replace(s, body=body, accesses=accesses)
        statements.append(moved_on(s, 1))

    # the copy: every element the redirected reads touch, before everything else
    elements = None
    for a in reads:
        r = a.relation.range()
        elements = r if elements is None else elements.union(r)
    copy_name = _fresh_statement(scop)
    loc = SourceLoc(array.loc.file, array.loc.line)
    loops = list(scop.loops)
    same = tuple(range(array.rank))
    copy = copy_statement(scop, copy_name, elements, (array.name, same), (name, same), loc,
                          0, loops, ITERATOR)
    new = replace(scop, arrays=scop.arrays + (copy_array,),
                  statements=_padded([copy] + statements), loops=tuple(loops))
    texts = tuple(f"{a.statement}#{a.ref} {a.text}" for a in reads)
    reason = (f"{', '.join(a.text for a in reads)} see only {array.name}'s entry values, "
              f"and {array.name} is overwritten after they read it")
    return new, Snapshotted(array.name, name, texts, copy_name, reason)


def verify_snapshot(scop: Scop, record: Snapshotted) -> str | None:
    """None if the copy sees only entry values, every redirected read would have seen
    only entry values of the original array too, and every redirected read instance
    has a source in the copy; else what fails (module doc)."""
    copy = scop.statement(record.copy)
    read = next(a for a in copy.accesses if a.kind == "read")
    if not _pairs(scop, read, later=False).is_empty():
        return f"the copy of {record.array} runs after a write of it"
    for a in scop.accesses:
        if a.array != record.name or a.kind != "read":
            continue
        original = replace(a, array=record.array,
                           relation=a.relation.set_tuple_name(isl.dim_type.out, record.array))
        if not _pairs(scop, original, later=False).is_empty():
            return (f"{a.statement} ({a.text}) reads elements of {record.array} the "
                    "region writes before it")
        got = _flow_into(scop, record.name, a)
        if not isl.UnionSet.from_set(a.relation.domain()).subtract(got.range()).is_empty():
            return f"{a.statement} ({a.text}) has instances the copy does not cover"
        if any(m.get_tuple_name(isl.dim_type.in_) != record.copy for m in maps_of(got)):
            return f"{a.statement} ({a.text}) reads a value not from the copy"
    return None
