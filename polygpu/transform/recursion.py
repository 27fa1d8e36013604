"""Recursive splitting of in-place triangular updates (seed 002, KBLAS; issue 22).

Why: an in-place triangular product or solve (``B[i][j] += A[k][i] * B[k][j]`` for
``k > i``) reads rows that later rows overwrite, so its rows run one after another; the
paper's recursion exposes most of its work as general products that read only rows
nobody writes at the time.  Rows ``[lo, hi)`` are cut at ``mid = lo + p``, ``p`` the
largest power of two strictly below ``hi - lo`` (the paper's rule: the largest products
at regular sizes); the block of rows ``[lo, mid)`` with steps ``k`` in ``[mid, hi)``
(or its mirror, ``[mid, hi)`` x ``[lo, mid)``, whichever the domain holds) is a
product, the two diagonal halves recurse down to ``stop`` rows (the leaves).

What: a pure re-scheduling of the statement's own instances -- no re-association, each
row's sum still runs its ``k`` in the original order -- so it is an index-set split
(:mod:`polygpu.transform.split`) with the recursion's blocks as pieces, each with its
own copy of the loops (depth 0), in the order the dependences allow (left half,
product, right half where the recursion needs it: :func:`~polygpu.transform.split.order_pieces`
takes the blocks in the tree's in-order where free), and proven like every split
(:func:`~polygpu.transform.split.verify_split`: the same dataflow, exactly).  A wrong
order -- the product after the half that overwrites the rows it reads -- fails the
proof.  The blocks are constants: the region is taken at its specialized sizes.

A statement sharing its loops with others (PolyBench's trmm scales each row by
``alpha`` after its sum) cannot be split alone: :func:`distribute` first moves such a
statement into a nest of its own after the one it was in, where the dataflow allows
(proven the same way; trmm's scaling moves, a solve's division cannot).

A ``recursion`` variant compiles the split region (``Prepared.recursive``,
pipeline.py).  Not yet: plans of their own for the pieces (products as mm, leaves as
strips; issue 22), and solves, whose division shares the rows' loops, need several
statements split together.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import islpy as isl

from polygpu.errors import PolygpuError
from polygpu.frontend import ir
from polygpu.model.dependences import Dependences, compute_dependences
from polygpu.model.isl_util import union_of
from polygpu.model.scop import Scop, fix_parameters
from polygpu.transform.split import (
    Split,
    fixed_value,
    order_pieces,
    own_dependences,
    same_dataflow,
    shifted,
    split_into,
    verify_split,
    with_constant,
)


@dataclass(frozen=True)
class Block:
    """One block of the recursion: ``rows`` and ``steps`` (the reduction's) as
    half-open ranges; ``kind`` "leaf" (a diagonal block, ``stop`` rows or fewer) or
    "product" (off the diagonal: every step reads rows the block does not write)."""

    kind: str
    rows: tuple[int, int]
    steps: tuple[int, int]


def split_point(size: int) -> int:
    """The largest power of two strictly below ``size`` (>= 2): the rows of the first
    half (37 -> 32, 32 -> 16)."""
    if size < 2:
        raise ValueError(f"a block of {size} rows has no split point")
    return 1 << ((size - 1).bit_length() - 1)


def partition(lo: int, hi: int, stop: int) -> list[Block]:
    """The recursion's blocks of the square ``[lo, hi)^2`` in the tree's in-order: left
    half, the two off-diagonal products, right half; leaves of at most ``stop`` rows."""
    if stop < 1:
        raise ValueError(f"stop size {stop}: at least 1 row a leaf")
    if hi - lo <= stop:
        return [Block("leaf", (lo, hi), (lo, hi))]
    mid = lo + split_point(hi - lo)
    return (partition(lo, mid, stop)
            + [Block("product", (lo, mid), (mid, hi)), Block("product", (mid, hi), (lo, mid))]
            + partition(mid, hi, stop))


def roles(scop: Scop, statement: str) -> tuple[int, int]:
    """``(row, step)``: the statement's iterator indices of the rows it updates and of
    its reduction -- where it reads its own array at the same subscripts but in one
    dimension, there ``step`` where it writes ``row`` (``B[k][j]`` against
    ``B[i][j]``).  PolygpuError otherwise."""
    s = scop.statement(statement)
    target = s.body.target
    if not isinstance(target, ir.ArrayRef):
        raise PolygpuError(f"{statement}: its target is a scalar, no rows to split", s.loc)
    written = [a for a in s.accesses if a.kind == "write"]
    for read in s.accesses:
        if read.kind != "read" or read.array != target.array or \
                len(read.subscripts) != len(written[0].subscripts):
            continue
        differ = [d for d, (a, b) in enumerate(zip(read.subscripts, written[0].subscripts,
                                                   strict=True)) if a != b]
        if len(differ) != 1:
            continue
        (d,) = differ
        a, b = read.subscripts[d], written[0].subscripts[d]
        if isinstance(a, ir.IntVar) and isinstance(b, ir.IntVar) and \
                a.name in s.iterators and b.name in s.iterators:
            return s.iterators.index(b.name), s.iterators.index(a.name)
    raise PolygpuError(f"{statement}: no read of its own array at its target's subscripts "
                       f"but one row (an in-place triangular update)", s.loc)


def at_sizes(scop: Scop, params: Mapping[str, int]) -> Scop:
    """``scop`` for exactly ``params``: its context fixed and every statement's domain,
    schedule and accesses restricted to the instances at those sizes (the recursion's
    blocks are constants; the proof compares the programs at these sizes)."""
    fixed = scop.specialized(params)
    statements = []
    for t in fixed.statements:
        domain = fix_parameters(t.domain, params)
        statements.append(replace(
            t, domain=domain, schedule=t.schedule.intersect_domain(domain),
            accesses=tuple(replace(a, relation=a.relation.intersect_domain(domain))
                           for a in t.accesses)))
    return replace(fixed, statements=tuple(statements))


def recursive_split(scop: Scop, statement: str, stop: int,
                    dependences: Dependences | None = None) -> tuple[Scop, Split]:
    """``scop`` (at its sizes: :func:`at_sizes`) with ``statement`` split into the
    recursion's blocks down to ``stop`` rows (module doc), proven; PolygpuError (why)
    where it cannot be."""
    s = scop.statement(statement)
    if any(scop.loops[lid].statements != (s.name,) for lid in s.loops):
        others = sorted({t for lid in s.loops for t in scop.loops[lid].statements} - {s.name})
        raise PolygpuError(f"{statement}: its loops also hold {', '.join(others)} "
                           f"(distribute them first)", s.loc)
    row, step = roles(scop, statement)
    bounds = []
    for d in (row, step):
        low, high = s.domain.dim_min_val(d), s.domain.dim_max_val(d)
        if not (low.is_int() and high.is_int()):
            raise PolygpuError(f"{statement}: its rows are not constant (specialize the "
                               f"sizes)", s.loc)
        bounds += [low.to_python(), high.to_python() + 1]
    lo, hi = min(bounds), max(bounds)
    names = s.iterators
    pieces = []
    for b in partition(lo, hi, stop):
        box = s.domain
        for d, (first, end) in ((row, b.rows), (step, b.steps)):
            box = box.lower_bound_val(isl.dim_type.set, d, isl.Val(first)) \
                .upper_bound_val(isl.dim_type.set, d, isl.Val(end - 1))
        box = box.coalesce()
        if not box.is_empty():
            pieces.append((f"{b.kind}: {names[row]} in [{b.rows[0]}, {b.rows[1]}), "
                           f"{names[step]} in [{b.steps[0]}, {b.steps[1]})", box))
    if len(pieces) < 2:
        raise PolygpuError(f"{statement}: {hi - lo} rows are no more than the stop size "
                           f"{stop}", s.loc)
    deps = dependences if dependences is not None else compute_dependences(scop)
    order = order_pieces(pieces, own_dependences(s, deps), 0)
    if order is None:
        raise PolygpuError(f"{statement}: the recursion's blocks depend on each other "
                           f"both ways", s.loc)
    new, record = split_into(scop, statement, pieces, 0, order,
                             (f"{names[row]} recursively, stop {stop}",))
    problem = verify_split(scop, new, record)
    if problem is not None:
        raise PolygpuError(f"{statement}: the recursive split failed the proof ({problem})",
                           s.loc)
    return new, record


def distribute(scop: Scop, statement: str) -> Scop:
    """``scop`` with ``statement`` moved out of its loops into a nest of its own (copies
    of them) right after the outermost nest it was in, proven to keep the dataflow of
    every array; PolygpuError (why) where it does not."""
    s = scop.statement(statement)
    if not s.loops:
        raise PolygpuError(f"{statement}: in no loop, nothing to distribute", s.loc)
    if scop.loops[s.loops[0]].statements == (s.name,):
        raise PolygpuError(f"{statement}: alone in its loops, nothing to distribute", s.loc)
    top = fixed_value(s.schedule, 0)
    # the loops without it (those it was alone in dropped), then its own copies
    kept = [lp for lp in scop.loops if lp.statements != (s.name,)]
    renumber = {lp.id: k for k, lp in enumerate(kept)}
    loops = [replace(lp, id=renumber[lp.id],
                     statements=tuple(t for t in lp.statements if t != s.name))
             for lp in kept]
    new_ids = tuple(range(len(loops), len(loops) + len(s.loops)))
    loops += [replace(scop.loops[lid], id=k, statements=(s.name,))
              for k, lid in zip(new_ids, s.loops, strict=True)]
    width = s.schedule.dim(isl.dim_type.out)
    statements = []
    for t in scop.statements:
        sched = t.schedule
        if t.name == s.name:
            for pos in range(0, width, 2):
                sched = with_constant(sched, pos, top + 1 if pos == 0 else 0)
            statements.append(replace(t, schedule=sched, loops=new_ids))
            continue
        if fixed_value(sched, 0) > top:
            sched = shifted(sched, 0, 1)
        statements.append(replace(t, schedule=sched,
                                  loops=tuple(renumber[lid] for lid in t.loops)))
    new = replace(scop, statements=tuple(statements), loops=tuple(loops))
    back = union_of([t.domain.identity() for t in new.statements], scop.context.get_space())
    problem = same_dataflow(scop, new, back, [a.name for a in scop.arrays])
    if problem is not None:
        raise PolygpuError(f"{statement} cannot run after its loops: {problem}", s.loc)
    return new
