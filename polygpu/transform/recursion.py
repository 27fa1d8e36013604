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
product, right half where the recursion needs it: :func:`_order_group`
takes the blocks in the tree's in-order where free), and proven like every split
(:func:`verify_group_split`: the same dataflow, exactly).  A wrong
order -- the product after the half that overwrites the rows it reads -- fails the
proof.  The blocks are constants: the region is taken at its specialized sizes.

A statement sharing its loops with others (PolyBench's trmm scales each row by
``alpha`` after its sum) cannot be split alone: :func:`distribute` first moves such a
statement into a nest of its own after the one it was in (a solve's alpha: before it),
where the dataflow allows (proven the same way; trmm's scaling moves, a solve's
division cannot).  What cannot move is a *companion*: it is split with the update, each
instance into the leaf of its row (:func:`recursive_split_group`), where the row's own
steps end and before any later row reads it -- a solve is a recursion of leaves that
substitute and products that subtract solved rows.

Where the recursion needs a row's terms in another order than written -- an upper
solve's sum runs ``k`` upward while the rows below are finished first; a lower product
computed in place from the bottom -- no order keeps the exact dataflow.  A sum update's
terms may then be added in the recursion's order (:class:`SumChain`): proven by
:func:`verify_reassociated_split`, every other dependence kept and no other access of an
element between two of its updates (reduction-aware legality; the result is the same up
to rounding, as for atomic sums), the split's record says ``sums re-associated``.

A leaf's rows run in turn (row ``i`` reads rows ``k > i`` of the leaf before they are
overwritten); :func:`snapshot_leaves` gives each leaf a workspace of its rows' old
values, copied just before it, which leaves its rows and columns parallel (proven by
:func:`verify_leaf_snapshots`).

A ``recursion`` variant compiles the split region (``Prepared.recursive``,
pipeline.py), its pieces planned by ``search/recursion_plans.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import islpy as isl

from polygpu.errors import PolygpuError
from polygpu.frontend import ir
from polygpu.model.dependences import Dependences, compute_dependences
from polygpu.model.isl_util import maps_of, union_of, union_of_sets
from polygpu.model.scop import Loop, Scop, Statement, fix_parameters
from polygpu.transform.expand import (
    _flow_into,
    _fresh_statement,
    _padded,
    copy_statement,
    fresh_array_name,
    scratch_array,
)
from polygpu.transform.split import (
    Piece,
    Split,
    fixed_value,
    in_order,
    same_dataflow,
    shifted,
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
    """``scop`` (at its sizes: :func:`at_sizes`) with ``statement``, alone in its loops,
    split into the recursion's blocks down to ``stop`` rows (module doc), proven;
    PolygpuError (why) where it cannot be."""
    s = scop.statement(statement)
    if any(scop.loops[lid].statements != (s.name,) for lid in s.loops):
        others = sorted({t for lid in s.loops for t in scop.loops[lid].statements} - {s.name})
        raise PolygpuError(f"{statement}: its loops also hold {', '.join(others)} "
                           f"(distribute them first)", s.loc)
    new, records = recursive_split_group(scop, statement, stop, dependences)
    return new, records[0]


def recursive_split_group(scop: Scop, statement: str, stop: int,
                          dependences: Dependences | None = None
                          ) -> tuple[Scop, tuple[Split, ...]]:
    """``scop`` (at its sizes) with ``statement`` split into the recursion's blocks down
    to ``stop`` rows and the other statements of its loop nest (its *companions*: a
    solve's division, which the rows after it read, so it cannot leave the rows' loop)
    split with it, each instance into the leaf of its row; proven.  The records: the
    update's split first, then each companion's (its pieces all leaves).

    Why the leaves: a companion of row ``i`` runs between ``i``'s own steps and the
    reads of row ``i`` by later rows, and the leaf is the one piece where both lie --
    the products before it only bring earlier steps, the ones after only read.  Each
    piece is a copy of the whole nest with the statements it holds."""
    s = scop.statement(statement)
    row, step = roles(scop, statement)
    nest = scop.loops[s.loops[0]]
    group = [t for t in scop.statements if t.name in nest.statements]
    row_loop = s.loops[row]
    companions = [t for t in group if t.name != s.name]
    for t in companions:
        if row_loop not in t.loops:
            raise PolygpuError(f"{statement}: {t.name} shares its loops but not the rows' "
                               f"loop {s.iterators[row]} (distribute it first)", t.loc)
    bounds = []
    for d in (row, step):
        low, high = s.domain.dim_min_val(d), s.domain.dim_max_val(d)
        if not (low.is_int() and high.is_int()):
            raise PolygpuError(f"{statement}: its rows are not constant (specialize the "
                               f"sizes)", s.loc)
        bounds += [low.to_python(), high.to_python() + 1]
    lo, hi = min(bounds), max(bounds)
    names = s.iterators
    pieces: list[tuple[str, dict[str, isl.Set]]] = []
    for b in partition(lo, hi, stop):
        parts = {}
        box = _boxed(s.domain, ((row, b.rows), (step, b.steps)))
        if not box.is_empty():
            parts[s.name] = box
        if b.kind == "leaf":
            for t in companions:
                rows = _boxed(t.domain, ((t.loops.index(row_loop), b.rows),))
                if not rows.is_empty():
                    parts[t.name] = rows
        if parts:
            pieces.append((f"{b.kind}: {names[row]} in [{b.rows[0]}, {b.rows[1]}), "
                           f"{names[step]} in [{b.steps[0]}, {b.steps[1]})", parts))
    if len(pieces) < 2:
        raise PolygpuError(f"{statement}: {hi - lo} rows are no more than the stop size "
                           f"{stop}", s.loc)
    deps = dependences if dependences is not None else compute_dependences(scop)
    cut = f"{names[row]} recursively, stop {stop}"
    members = [t.name for t in group]
    # each element's sum in its original order where the dataflow allows it ...
    order = _order_group(scop, pieces, deps)
    problem = "the recursion's blocks depend on each other both ways"
    if order is not None:
        new, records = split_group_into(scop, members, pieces, order, (cut,))
        problem = verify_group_split(scop, new, records)
        if problem is None:
            return new, _update_first(records, statement)
    # ... else re-associated: its terms added in the recursion's order (module doc)
    chain = sum_chain(scop, statement)
    if chain is not None:
        order = _order_group(scop, pieces, chain.closed(scop, deps))
        if order is not None:
            new, records = split_group_into(scop, members, pieces, order,
                                            (cut, "sums re-associated"))
            again = verify_reassociated_split(scop, new, records, chain, deps)
            if again is None:
                return new, _update_first(records, statement)
            problem = f"{problem}; re-associated: {again}"
    raise PolygpuError(f"{statement}: the recursive split failed the proof ({problem})",
                       s.loc)


def _update_first(records: tuple[Split, ...], statement: str) -> tuple[Split, ...]:
    return tuple(sorted(records, key=lambda r: r.statement != statement))


def _boxed(domain: isl.Set, ranges) -> isl.Set:
    """``domain`` with each dimension ``d`` of ``ranges`` (``(d, (first, end))``) in
    ``[first, end)``."""
    for d, (first, end) in ranges:
        domain = domain.lower_bound_val(isl.dim_type.set, d, isl.Val(first)) \
            .upper_bound_val(isl.dim_type.set, d, isl.Val(end - 1))
    return domain.coalesce()


def _order_group(scop: Scop, pieces: list[tuple[str, dict[str, isl.Set]]],
                 deps: Dependences) -> list[int] | None:
    """Piece indices in an order that keeps every dependence between two pieces going
    forward (the smallest index first among those free to go: the tree's in-order
    where the dependences allow it); None if there is none."""
    space = scop.context.get_space()
    sets = [union_of_sets(list(parts.values()), space) for _, parts in pieces]
    names = {n for _, parts in pieces for n in parts}
    among = isl.UnionMap.empty(space)
    for d in deps.items:
        if d.source in names and d.sink in names:
            among = among.union(isl.UnionMap.from_map(d.relation))
    n = len(pieces)
    after: dict[int, set[int]] = {k: set() for k in range(n)}
    for a in range(n):
        from_a = among.intersect_domain(sets[a])
        if from_a.is_empty():
            continue
        for b in range(n):
            if b != a and not from_a.intersect_range(sets[b]).is_empty():
                after[b].add(a)
    return in_order(after)


def split_group_into(scop: Scop, group: list[str],
                     pieces: list[tuple[str, dict[str, isl.Set]]], order: list[int],
                     cuts: tuple[str, ...] = ()) -> tuple[Scop, tuple[Split, ...]]:
    """``scop`` with the statements of ``group`` -- every statement of one outermost
    loop nest -- replaced by ``pieces`` (``(where, {statement: its instances})``) in the
    order ``order``, each piece a copy of the nest holding its statements' instances
    (a statement of piece ``k`` named ``S_k``): unproven (the caller proves it,
    :func:`verify_group_split`).  One record per statement of ``group`` that has
    pieces, in ``group``'s order."""
    members = [scop.statement(n) for n in group]
    first = members[0]
    nest_loops = {lid for t in members for lid in t.loops}
    top = fixed_value(first.schedule, 0)
    taken = {t.name for t in scop.statements}
    chosen = []  # (k, where, {original: (new name, domain)})
    for k, idx in enumerate(order):
        where, parts = pieces[idx]
        named = {}
        for t in members:
            if t.name in parts:
                name = f"{t.name}_{k}"
                while name in taken:
                    name += "_"
                taken.add(name)
                named[t.name] = (name, parts[t.name])
        chosen.append((k, where, named))
    shift = len(chosen) - 1
    loops: list[Loop] = []
    new_id: dict[int, int] = {}
    piece_loops: list[dict[int, int]] = [{} for _ in chosen]
    placed = False
    for lp in scop.loops:
        if lp.id not in nest_loops:
            new_id[lp.id] = len(loops)
            loops.append(replace(lp, id=len(loops)))
            continue
        if placed:
            continue
        placed = True  # the nest's loops in textual order, once per piece
        for k, _, named in chosen:
            for lid in sorted(nest_loops):
                inside = tuple(named[m][0] for m in scop.loops[lid].statements
                               if m in named)
                if inside:
                    piece_loops[k][lid] = len(loops)
                    loops.append(replace(scop.loops[lid], id=len(loops),
                                         statements=inside))
    statements: list[Statement] = []
    done = False
    for t in scop.statements:
        if t.name not in group:
            sched = t.schedule
            if fixed_value(sched, 0) > top:
                sched = shifted(sched, 0, shift)
            statements.append(replace(t, schedule=sched,
                                      loops=tuple(new_id[lid] for lid in t.loops)))
            continue
        if done:
            continue
        done = True
        for k, _, named in chosen:
            for m in members:
                if m.name not in named:
                    continue
                name, dom = named[m.name]
                sched = with_constant(m.schedule.intersect_domain(dom).set_tuple_name(
                    isl.dim_type.in_, name), 0, top + k)
                accesses = tuple(replace(a, statement=name,
                                         relation=a.relation.intersect_domain(dom)
                                         .set_tuple_name(isl.dim_type.in_, name))
                                 for a in m.accesses)
                statements.append(replace(m, name=name, domain=dom.set_tuple_name(name),
                                          schedule=sched, accesses=accesses,
                                          loops=tuple(piece_loops[k][lid]
                                                      for lid in m.loops)))
    new = replace(scop, statements=tuple(statements), loops=tuple(loops))
    records = []
    for m in members:
        mine = tuple(Piece(named[m.name][0], named[m.name][1].set_tuple_name(
            named[m.name][0]), where) for _, where, named in chosen if m.name in named)
        if mine:
            records.append(Split(m.name, (), cuts, mine, ()))
    return new, tuple(records)


def verify_group_split(original: Scop, split: Scop, records: tuple[Split, ...]
                       ) -> str | None:
    """None if ``split`` computes what ``original`` does, ``records`` naming each split
    statement's pieces: the pieces of a statement cover its domain exactly, once, and
    compute and access what it does; every other statement is unchanged; every array
    flows as before (the exact dataflow, instances renamed back); else what differs."""
    problem = _same_pieces(original, split, records)
    if problem is not None:
        return problem
    arrays = dict.fromkeys(a.array for r in records
                           for a in original.statement(r.statement).accesses)
    return same_dataflow(original, split, _back(original, split, records), arrays)


def _same_pieces(original: Scop, split: Scop, records: tuple[Split, ...]) -> str | None:
    """What :func:`verify_group_split` checks before the dataflow."""
    pieces = {p.name: r.statement for r in records for p in r.pieces}
    others = [t.name for t in original.statements if t.name not in
              {r.statement for r in records}]
    if sorted(t.name for t in split.statements) != sorted(others + list(pieces)):
        return "the statements are not the original ones and the pieces"
    for r in records:
        s = original.statement(r.statement)
        covered = None
        for p in r.pieces:
            piece = split.statement(p.name)
            dom = piece.domain.set_tuple_name(s.name)
            if covered is not None and not covered.intersect(dom).is_empty():
                return f"piece {p.name} overlaps an earlier one"
            covered = dom if covered is None else covered.union(dom)
            if piece.body != s.body or len(piece.accesses) != len(s.accesses):
                return f"piece {p.name} does not compute what {s.name} computes"
            for a, b in zip(piece.accesses, s.accesses, strict=True):
                if (a.array, a.kind, a.ref) != (b.array, b.kind, b.ref) or not \
                        a.relation.set_tuple_name(isl.dim_type.in_, s.name).is_equal(
                            b.relation.intersect_domain(dom)):
                    return f"piece {p.name} does not access what {s.name} accesses"
        if covered is None or not covered.is_equal(s.domain):
            return f"the pieces do not cover {s.name}'s domain exactly"
    for name in others:
        t, u = original.statement(name), split.statement(name)
        if not u.domain.is_equal(t.domain) or u.body != t.body or len(
                u.accesses) != len(t.accesses) or any(
                not a.relation.is_equal(b.relation)
                for a, b in zip(u.accesses, t.accesses, strict=True)):
            return f"statement {name} changed"
    return None


def _back(original: Scop, split: Scop, records: tuple[Split, ...]) -> isl.UnionMap:
    """``{ piece[x] -> statement[x] }``, the identity on the statements not split."""
    pieces = {p.name: r.statement for r in records for p in r.pieces}
    return union_of([(st.domain.identity() if st.name not in pieces else
                      st.domain.identity().set_tuple_name(isl.dim_type.out,
                                                          pieces[st.name]))
                     for st in split.statements], original.context.get_space())


# --------------------------------------------------------------------------------------
# Re-associated sums
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SumChain:
    """A sum update's accumulation (``B[i][j] -= A[i][k] * B[k][j]``): ``statement``,
    its ``write`` (instance -> element) and the refs of its accumulator's read and write
    -- the accesses whose order among the instances of one element the sum does not
    care about (up to rounding)."""

    statement: str
    array: str
    write: isl.Map
    own: frozenset[int]

    def relax(self, deps: Dependences) -> Dependences:
        """``deps`` without the pairs of instances that update the same element (they
        meet only through the accumulator: :func:`sum_chain` checks that no other read
        of the statement touches its own element)."""
        same = self.write.apply_range(self.write.reverse())
        items = []
        for d in deps.items:
            if d.source == d.sink == self.statement and d.array == self.array:
                rest = d.relation.subtract(same)
                if not rest.is_empty():
                    items.append(replace(d, relation=rest))
                continue
            items.append(d)
        return Dependences(tuple(items), deps.space)

    def closed(self, scop: Scop, deps: Dependences) -> Dependences:
        """:meth:`relax`'s dependences, each one that orders an access of an element
        before or after one of its updates extended to all its updates: what keeps a
        run of updates unbroken, as pairs of instances the pieces' order must keep
        (a solve's division after every update of its row, not only the last)."""
        same = self.write.apply_range(self.write.reverse())
        space = deps.space
        touches = {t.name: union_of([a.relation for a in t.accesses
                                     if a.array == self.array], space)
                   for t in scop.statements}
        write = isl.UnionMap.from_map(self.write)
        items = list(self.relax(deps).items)
        for d in deps.items:
            if d.array != self.array:
                continue
            rel = isl.UnionMap.from_map(d.relation)
            extra = isl.UnionMap.empty(space)
            if d.sink == self.statement:  # before an update of an element it touches
                into = rel.intersect(touches[d.source].apply_range(write.reverse()))
                extra = extra.union(into.apply_range(isl.UnionMap.from_map(same)))
            if d.source == self.statement:  # after one
                out = rel.intersect(write.apply_range(touches[d.sink].reverse()))
                extra = extra.union(out.apply_domain(isl.UnionMap.from_map(same)))
            if d.source == d.sink == self.statement:
                extra = extra.subtract(isl.UnionMap.from_map(same))
            for m in maps_of(extra):
                if not m.is_empty():
                    items.append(replace(d, relation=m))
        return Dependences(tuple(items), deps.space)


def sum_chain(scop: Scop, statement: str) -> SumChain | None:
    """The statement's accumulation if it is a sum update (``x += term``, ``x -= term``,
    ``x = x + term``, ...) whose other reads of its array never touch the element the
    same instance updates; else None."""
    from polygpu.model.atomic import sum_update

    s = scop.statement(statement)
    if sum_update(s.body) is None or len(s.writes) != 1:
        return None
    write = s.writes[0]
    own = [a for a in s.reads if a.array == write.array and a.subscripts == write.subscripts]
    if len(own) != 1:
        return None
    for a in s.reads:
        if a is not own[0] and a.array == write.array and \
                not a.relation.intersect(write.relation).is_empty():
            return None
    return SumChain(s.name, write.array, write.relation, frozenset({own[0].ref, write.ref}))


def verify_reassociated_split(original: Scop, split: Scop, records: tuple[Split, ...],
                              chain: SumChain, deps: Dependences) -> str | None:
    """None if ``split`` computes what ``original`` does up to the order in which each
    element's sum adds its terms; else what fails.

    The pieces are checked as in :func:`verify_group_split`; then (the argument of
    reduction-aware legality): every dependence of ``original`` but those between two
    updates of one element goes forward in ``split``'s order, and in both programs no
    other access of an element (another statement's, or the update's reads of other
    rows) runs between two of its updates.  The terms then read what they read before,
    every element's updates form one unbroken run from the same first value, and what
    reads the element afterwards sees the whole sum."""
    problem = _same_pieces(original, split, records)
    if problem is not None:
        return problem
    before = original.schedule
    after = _back(original, split, records).reverse().apply_range(split.schedule)
    for d in chain.relax(deps).items:
        pairs = isl.UnionMap.from_map(d.relation).apply_domain(after).apply_range(after)
        if not pairs.is_empty() and not _lex_forward(pairs):
            return (f"the {d.kind} dependence {d.source} -> {d.sink} on {d.array} goes "
                    f"backward")
    for times, which in ((before, "the original"), (after, "the split")):
        problem = _unbroken(original, chain, times)
        if problem is not None:
            return f"in {which} program, {problem}"
    return None


def _lex_forward(pairs: isl.UnionMap) -> bool:
    """Whether every ``{ time -> time }`` pair of ``pairs`` goes forward."""
    m = isl.Map.from_union_map(pairs)
    space = m.get_space().domain()
    return m.is_subset(isl.Map.lex_lt(space))


def _unbroken(scop: Scop, chain: SumChain, times: isl.UnionMap) -> str | None:
    """None if, under ``times`` (instance -> time), no access of ``chain``'s array but
    the chain's own runs between two updates of the element it touches."""
    updates = isl.UnionMap.from_map(chain.write).apply_domain(times)  # time -> element
    for t in scop.statements:
        for a in t.accesses:
            if a.array != chain.array or (t.name == chain.statement and a.ref in chain.own):
                continue
            at = isl.UnionMap.from_map(a.relation).apply_domain(times)
            pairs = at.apply_range(updates.reverse())  # access time -> update time
            if pairs.is_empty():
                continue
            m = isl.Map.from_union_map(pairs)
            space = m.get_space().domain()
            later = m.intersect(isl.Map.lex_lt(space)).domain()
            earlier = m.intersect(isl.Map.lex_gt(space)).domain()
            if not later.intersect(earlier).is_empty():
                return f"{t.name}'s {a.text} runs between two updates of an element"
    return None


def distribute(scop: Scop, statement: str, before: bool = False) -> Scop:
    """``scop`` with ``statement`` moved out of its loops into a nest of its own (copies
    of them) right after the outermost nest it was in (``before``: right before it),
    proven to keep the dataflow of every array; PolygpuError (why) where it does not.
    A solve's scaling by alpha moves before the rows' loop, trmm's after it."""
    s = scop.statement(statement)
    if not s.loops:
        raise PolygpuError(f"{statement}: in no loop, nothing to distribute", s.loc)
    if scop.loops[s.loops[0]].statements == (s.name,):
        raise PolygpuError(f"{statement}: alone in its loops, nothing to distribute", s.loc)
    top = fixed_value(s.schedule, 0)
    # the loops without it (those it was alone in dropped), its own copies before the
    # nest's first loop or after every other
    kept = [lp for lp in scop.loops if lp.statements != (s.name,)]
    at = next(k for k, lp in enumerate(kept) if lp.id == s.loops[0]) if before \
        else len(kept)
    order = kept[:at] + [None] * len(s.loops) + kept[at:]
    renumber = {lp.id: k for k, lp in enumerate(order) if lp is not None}
    new_ids = tuple(range(at, at + len(s.loops)))
    loops = []
    for k, lp in enumerate(order):
        if lp is None:
            loops.append(replace(scop.loops[s.loops[k - at]], id=k, statements=(s.name,)))
        else:
            loops.append(replace(lp, id=k, statements=tuple(
                t for t in lp.statements if t != s.name)))
    width = s.schedule.dim(isl.dim_type.out)
    statements = []
    for t in scop.statements:
        sched = t.schedule
        if t.name == s.name:
            for pos in range(0, width, 2):
                sched = with_constant(sched, pos, (top if before else top + 1)
                                      if pos == 0 else 0)
            statements.append(replace(t, schedule=sched, loops=new_ids))
            continue
        if fixed_value(sched, 0) > top or (before and fixed_value(sched, 0) == top):
            sched = shifted(sched, 0, 1)
        statements.append(replace(t, schedule=sched,
                                  loops=tuple(renumber[lid] for lid in t.loops)))
    new = replace(scop, statements=tuple(statements), loops=tuple(loops))
    back = union_of([t.domain.identity() for t in new.statements], scop.context.get_space())
    problem = same_dataflow(scop, new, back, [a.name for a in scop.arrays])
    if problem is not None:
        raise PolygpuError(f"{statement} cannot run {'before' if before else 'after'} "
                           f"its loops: {problem}", s.loc)
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

    body = ir.Assign(s.body.target, s.body.op, ir.map_refs(s.body.value, moved), s.body.loc)
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
