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

A leaf's rows run in turn (row ``i`` reads rows ``k > i`` of the leaf before they are
overwritten); :func:`snapshot_leaves` gives each leaf a workspace of its rows' old
values, copied just before it, which leaves its rows and columns parallel (proven by
:func:`verify_leaf_snapshots`).

A ``recursion`` variant compiles the split region (``Prepared.recursive``,
pipeline.py), its pieces planned by ``search/recursion_plans.py``.  Not yet: solves,
whose division shares the rows' loops, need several statements split together.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import islpy as isl

from polygpu.errors import PolygpuError
from polygpu.frontend import ir
from polygpu.model.dependences import Dependences, compute_dependences
from polygpu.model.isl_util import maps_of, union_of
from polygpu.model.scop import Scop, fix_parameters
from polygpu.transform.expand import (
    _flow_into,
    _fresh_statement,
    _map_refs,
    _padded,
    copy_statement,
    fresh_array_name,
    scratch_array,
)
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


# --------------------------------------------------------------------------------------
# Leaves read their rows' old values from a workspace
# --------------------------------------------------------------------------------------

WORKSPACE = "pg_w_"  # frontend/names.py reserves pg_: no user name can clash
ITERATOR = "pg_w"  # the copies' iterators: pg_w0, pg_w1, ...


def snapshot_leaves(scop: Scop, record: Split) -> Scop:
    """``scop`` with each leaf of ``record`` reading its rows' old values from a
    workspace of one leaf's rows, copied from the array just before the leaf; proven by
    :func:`verify_leaf_snapshots` (PolygpuError with why where it fails).

    Why: a leaf's rows run one after another because row ``i`` reads rows ``k > i`` of
    the leaf before they are overwritten (an anti dependence inside the leaf: one
    thread per column, its rows in turn -- 3.5 ms a 512-row leaf at m = n = 2048 on the
    H200, 26 times the whole recursion's products).  Every such read sees the row's
    value from before the leaf, so reading it from a copy taken just before leaves only
    the flow along each element's own sum: rows and columns parallel, a triangular
    product.  The copy is ``stop`` rows of the array, one workspace shared by all
    leaves in turn, not a second array: the update stays in place."""
    leaves = [p for p in record.pieces if p.where.startswith("leaf")]
    if not leaves:
        raise PolygpuError(f"{record.statement}: no leaves to give a workspace")
    first = scop.statement(leaves[0].name)
    row, step = roles(scop, first.name)
    target = first.body.target
    written = next(a for a in first.accesses if a.kind == "write")
    d = next(k for k, (x, y) in enumerate(zip(
        _step_read(first, target.array, row, step).subscripts, written.subscripts,
        strict=True)) if x != y)
    array = scop.array(target.array)
    height = max(_extent(_rows_read(scop, p.name, target.array, row, step), d)
                 for p in leaves)
    name = fresh_array_name(scop, WORKSPACE, array.name)
    shape = tuple(ir.IntConst(height) if k == d else e
                  for k, e in enumerate(array.shape_exprs))
    new = replace(scop, arrays=scop.arrays + (scratch_array(scop, name, array, shape),))
    copies = []
    for piece in leaves:
        new, copy = _leaf_copy(new, piece.name, array.name, name, d, row, step)
        copies.append((piece.name, copy))
    problem = verify_leaf_snapshots(scop, new, array.name, name, copies)
    if problem is not None:
        raise PolygpuError(f"{record.statement}: the leaves' workspace failed the proof "
                           f"({problem})", first.loc)
    return new


def _extent(elements: isl.Set, d: int) -> int:
    return elements.dim_max_val(d).to_python() - elements.dim_min_val(d).to_python() + 1


def _step_read(s, array: str, row: int, step: int):
    written = next(a for a in s.accesses if a.kind == "write")
    return next(a for a in s.accesses if a.kind == "read" and a.array == array
                and _is_step_read(a, written, s, row, step))


def _rows_read(scop: Scop, leaf: str, array: str, row: int, step: int) -> isl.Set:
    """The elements ``leaf``'s step read touches (what its copy copies)."""
    s = scop.statement(leaf)
    return _step_read(s, array, row, step).relation.intersect_domain(s.domain).range()


def _is_step_read(read, written, s, row: int, step: int) -> bool:
    """Whether ``read`` is the statement's read of its own array one row apart (the
    subscripts of its write but the step iterator where the write has the row's)."""
    if len(read.subscripts) != len(written.subscripts):
        return False
    differ = [(a, b) for a, b in zip(read.subscripts, written.subscripts, strict=True)
              if a != b]
    return len(differ) == 1 and differ[0] == (ir.IntVar(s.iterators[step]),
                                               ir.IntVar(s.iterators[row]))


def _leaf_copy(scop: Scop, leaf: str, array: str, workspace: str, d: int, row: int,
               step: int) -> tuple[Scop, str]:
    """``scop`` with ``leaf``'s step read moved to ``workspace`` (its row dimension ``d``
    less the leaf's first row) and the copy of the rows it reads inserted just before
    it; the copy statement's name."""
    s = scop.statement(leaf)
    read = _step_read(s, array, row, step)
    if sum(1 for a in s.accesses if a.kind == "read" and a.array == array
           and a.subscripts == read.subscripts) > 1:
        # (the body's references are moved by their subscripts, the accesses one by
        # one: the proof would check another program than the one generated)
        raise PolygpuError(f"{leaf}: reads {read.text} twice", s.loc)
    elements = _rows_read(scop, leaf, array, row, step)
    low = elements.dim_min_val(d).to_python()
    rank = len(read.subscripts)
    names = [f"e{k}" for k in range(rank)]
    image = [f"e{k} - {low}" if k == d else f"e{k}" for k in range(rank)]
    shift = isl.Map(f"{{ {array}[{', '.join(names)}] -> {workspace}[{', '.join(image)}] }}")
    shift = shift.align_params(read.relation.get_space())
    position = fixed_value(s.schedule, 0)

    def lowered(index) -> tuple:
        return tuple(ir.IntBinOp("-", e, ir.IntConst(low)) if k == d else e
                     for k, e in enumerate(index))

    def moved(r):
        if isinstance(r, ir.ArrayRef) and r.array == array and tuple(r.index) == \
                read.subscripts:
            return ir.ArrayRef(workspace, lowered(r.index), r.loc)
        return r

    body = ir.Assign(s.body.target, s.body.op, _map_refs(s.body.value, moved), s.body.loc)
    accesses = tuple(replace(a, array=workspace, relation=a.relation.apply_range(shift),
                             subscripts=lowered(a.subscripts))
                     if a is read else a for a in s.accesses)
    statements = [replace(t, schedule=shifted(t.schedule, 0, 1))
                  if fixed_value(t.schedule, 0) >= position else t for t in scop.statements]
    statements = [replace(t, body=body, accesses=accesses) if t.name == leaf else t
                  for t in statements]
    loops = list(scop.loops)
    name = _fresh_statement(replace(scop, statements=tuple(statements)))
    same = tuple(range(rank))
    copy = copy_statement(scop, name, elements, (array, same), (workspace, same), s.loc,
                          position, loops, ITERATOR)
    cw = next(a for a in copy.accesses if a.kind == "write")
    cw_new = replace(cw, relation=cw.relation.apply_range(
        shift.set_tuple_name(isl.dim_type.in_, workspace).align_params(
            cw.relation.get_space())),
        subscripts=lowered(cw.subscripts))
    copy_body = ir.Assign(ir.ArrayRef(workspace, cw_new.subscripts, cw.loc), "=",
                          copy.body.value, copy.body.loc)
    copy = replace(copy, body=copy_body, accesses=tuple(
        cw_new if a is cw else a for a in copy.accesses))
    return replace(scop, statements=_padded([copy] + statements), loops=tuple(loops)), name


def verify_leaf_snapshots(original: Scop, new: Scop, array: str, workspace: str,
                          copies: list[tuple[str, str]]) -> str | None:
    """None if ``new`` computes what ``original`` does: every array but the workspace
    flows as before where no leaf's read was moved (the copies only read ``array``),
    and each moved read instance reads, through its own leaf's copy, the element it
    read before with the value it saw before (the same last writer, or none); else
    what fails."""
    leaves = {leaf for leaf, _ in copies}
    moved = {}
    for t in new.statements:
        for a in t.accesses:
            if a.array == workspace and a.kind == "read":
                moved[t.name] = a
    if set(moved) != leaves:
        return "a leaf without its moved read"
    # the rest: the moved reads and the copies' reads left out of both programs
    kept_original = replace(original, statements=tuple(
        replace(t, accesses=tuple(a for a in t.accesses if not (
            t.name in leaves and a.kind == "read" and a.array == array
            and a.ref == moved[t.name].ref))) for t in original.statements))
    copy_names = {c for _, c in copies}
    kept_new = replace(new, statements=tuple(
        replace(t, accesses=tuple(a for a in t.accesses if t.name not in copy_names
                                  or a.kind == "write")) for t in new.statements),
        arrays=tuple(a for a in new.arrays if a.name != workspace))
    kept_new = replace(kept_new, statements=tuple(
        replace(t, accesses=tuple(a for a in t.accesses if a.array != workspace))
        for t in kept_new.statements))
    back = union_of([t.domain.identity() for t in original.statements],
                    original.context.get_space())
    problem = same_dataflow(kept_original, kept_new, back,
                            [a.name for a in original.arrays])
    if problem is not None:
        return problem
    for leaf, copy in copies:
        new_read = moved[leaf]
        old_read = next(a for a in original.statement(leaf).accesses
                        if a.ref == new_read.ref)
        through = _flow_into(new, workspace, new_read)  # copy -> leaf instance
        domain = isl.UnionSet.from_set(new.statement(leaf).domain)
        if not domain.subtract(through.range()).is_empty():
            return f"{leaf}: instances the copy {copy} does not cover"
        if any(m.get_tuple_name(isl.dim_type.in_) != copy for m in maps_of(through)):
            return f"{leaf}: a moved read takes a value not from its copy {copy}"
        copy_read = next(a for a in new.statement(copy).accesses if a.kind == "read")
        element = through.reverse().apply_range(isl.UnionMap.from_map(copy_read.relation))
        if not element.is_equal(isl.UnionMap.from_map(
                old_read.relation.intersect_domain(original.statement(leaf).domain))):
            return f"{leaf}: the copy hands it other elements than it read"
        got = _flow_into(new, array, copy_read).apply_range(through)
        want = _flow_into(original, array, old_read)
        if not got.is_equal(want):
            return f"{leaf}: the moved read sees other values ({got} instead of {want})"
    return None
