"""Index-set splitting: a statement cut where one of its reads meets its own write.

In-place Floyd-Warshall, ``path[i][j] = min(path[i][j], path[i][k] + path[k][j])``
over ``k, i, j``, reads ``path[i][k]``, which is the element the instance writes when
``j == k``, and ``path[k][j]``, the element it writes when ``i == k``.  Row ``k`` and
column ``k`` are therefore written during step ``k`` and read by the same step, and the
exact (value-based) dependences through them carry ``i`` and ``j``: the nest runs on
one thread.  Cut the domain at those hyperplanes -- ``i < k``, ``i == k``, ``i > k``
crossed with the same for ``j`` -- and each piece reads only elements that *other*
pieces write, so inside one step each piece is a parallel ``(i, j)`` nest, provided the
pieces run in an order that gives every read the value it had in the original.

Which statements (:func:`split_statements`): a statement ``S`` whose write ``W`` and a
read ``R`` of the same array touch the same element on part of the domain only: the
instances where ``R(x) == W(x)`` form a nonempty proper subset ``E`` of the domain.
Every equality of the affine hull of ``E`` that the domain does not imply and whose
innermost iterator has coefficient 1 (sign chosen so) is a *cut* ``h(x) == 0``; the
pieces are the nonempty sets ``domain and h_1 (<|==|>) 0 and ... and h_m (<|==|>) 0``.
(A cut ``2*i + 1 == n`` -- ``x[n-1-i]`` meets ``x[i]`` -- is not taken: its pieces
carry parity constraints, and isl's scheduler crashed on such a region.)

At which depth: the pieces share the ``d`` outer loops of ``S`` and each gets its own
copy of the loops below (``S`` must be the only statement in those); depths are tried
from the outermost (``d = 0``) in, and the first where all of these hold is taken:

1. some cut involves an iterator at depth ``>= d`` (only those cuts count at depth
   ``d``: one of the shared iterators alone would merely guard whole inner nests), and
   they give at most :data:`MAX_PIECES` pieces;
2. the pieces can be ordered inside one iteration of the shared loops: every original
   dependence (flow, anti, output) of ``S`` on itself between two pieces in the same
   iteration of the shared loops goes from an earlier piece to a later one.  The order
   is a topological one of that graph (the first piece as enumerated among those
   free to go), not the textual one: ``A[i][j] += A[j][i]`` runs ``j == i``, then
   ``j > i`` (which reads the lower triangle before it is written), then ``j < i``;
3. the split frees a loop: some piece has a loop at depth ``>= d`` that carries no
   dependence of the piece on itself and takes more than one value, where ``S``'s same
   loop carries one;
4. the proof below holds.

The pieces take ``S``'s place: inside the shared loops they run one after another, each
with ``S``'s body, accesses (restricted to the piece) and inner loop order, and the
statements after ``S`` there move back to make room.

Nests it does *not* apply to: strided loops (refused outright: isl's dataflow is not
trusted on strided time dimensions without the compression of
:mod:`polygpu.model.dependences`), a statement sharing its inner loops with others at
every depth, reads that never or always coincide with the write (``A[i][j-1]``,
``x[i] += ..``), and dependences that do not pass through the cut hyperplanes (a
recurrence ``x[i] = x[i-1] + x[1]`` is cut at ``i == 1`` but its piece ``i > 1`` still
carries ``i``: left unsplit).

The proof (:func:`verify_split`): the pieces partition ``S``'s domain, and for every
array ``S`` touches, the dataflow of the new program -- for every read instance of
every statement, the write instance it takes its value from, and for every element the
write instance that leaves its final value -- equals the original's, exactly, with
isl (the pieces renamed back to ``S``).  Arrays ``S`` does not touch see the same
statements in the same relative order.  A split that fails is dropped, never used.

The split program's dependences are not computed again (:func:`split_dependences`):
the original's are cut into pairs of pieces, which is exact once isl has checked that
the new order keeps every one of them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

import islpy as isl

from polygpu.model.dependences import (
    KINDS,
    Dependence,
    Dependences,
    _last_source,
    coalesce,
    compute_dependences,
    loop_strides,
)
from polygpu.model.isl_budget import OutOfBudget, isl_operation_budget
from polygpu.model.isl_util import maps_of, union_of, union_of_sets
from polygpu.model.scop import Loop, Scop, Statement

END = "pg_end"  # the sink that reads every element after the region (final values)
# at most the pieces two cuts give (Floyd-Warshall's nine): each piece is a statement
# the scheduler and its prover must handle, and 27 took them half a minute
MAX_PIECES = 9
# isl operations for choosing and proving one statement's split (Floyd-Warshall's
# takes under half a million; model/isl_budget.py)
SPLIT_OPERATIONS = 10_000_000
_SIGNS = ("<", "=", ">")


@dataclass(frozen=True)
class Piece:
    """One piece: the new statement ``name``, its instances ``domain`` and the
    conditions that define it (``"i < k, j = k"``)."""

    name: str
    domain: isl.Set
    where: str


@dataclass(frozen=True)
class Split:
    """``statement`` replaced by ``pieces`` (in their new order), which share its
    ``shared`` outer loops (iterators, outermost first) and each have their own copy of
    the loops below; ``cuts`` the hyperplanes, ``freed`` the loops a piece runs in
    parallel and ``statement`` did not."""

    statement: str
    shared: tuple[str, ...]
    cuts: tuple[str, ...]
    pieces: tuple[Piece, ...]
    freed: tuple[str, ...]

    @property
    def depth(self) -> int:
        return len(self.shared)


@dataclass(frozen=True)
class Refusal:
    statement: str
    reason: str


@dataclass(frozen=True)
class Splitting:
    scop: Scop
    split: tuple[Split, ...]
    refused: tuple[Refusal, ...]
    # the exact dependences of ``scop`` where they are known without computing them
    # again (:func:`split_dependences`), else None
    dependences: Dependences | None = None
    # what else was decided on the way (a recursion's statements moved out of their
    # loops, its leaves' workspace or why none), for the dumps
    notes: tuple[Refusal, ...] = ()

    def to_json(self) -> list[dict]:
        """What ``compile --json`` shows: every statement considered, split (its
        pieces in order) or refused (why), and the notes."""
        return [{"statement": s.statement, "shared_loops": list(s.shared),
                 "cuts": list(s.cuts), "freed": list(s.freed),
                 "pieces": [{"statement": p.name, "where": p.where} for p in s.pieces]}
                for s in self.split] + [{"statement": r.statement, "refused": r.reason}
                                        for r in self.refused] \
            + [{"statement": n.statement, "note": n.reason} for n in self.notes]


class _Refused(Exception):
    pass


def split_statements(scop: Scop, dependences: Dependences | None = None) -> Splitting:
    """``scop`` with every statement that can be split split (module doc), each split
    proven by :func:`verify_split` before it is kept.  ``dependences``: those of
    ``scop`` if already computed (only each statement's dependences on itself are read,
    and splitting one statement leaves those of the others as they are)."""
    candidates = [(s, c) for s in scop.statements for c in [cuts_of(s)] if c]
    if not candidates:
        return Splitting(scop, (), ())
    if loop_strides(scop):
        return Splitting(scop, (), tuple(Refusal(s.name, "the region has strided loops")
                                         for s, _ in candidates))
    deps = dependences if dependences is not None else compute_dependences(scop)
    done: list[Split] = []
    refused: list[Refusal] = []
    for s, cuts in candidates:
        s = scop.statement(s.name)  # as it is now: an earlier split renumbered loops
        try:
            with isl_operation_budget(scop.context.get_ctx(), SPLIT_OPERATIONS):
                new, record = _split_one(scop, s, cuts, deps)
        except _Refused as why:
            refused.append(Refusal(s.name, str(why)))
            continue
        except OutOfBudget:  # optional: a split isl cannot prove quickly is not made
            refused.append(Refusal(s.name, f"proving it took isl more than "
                                           f"{SPLIT_OPERATIONS:,} operations"))
            continue
        except isl.Error as e:
            refused.append(Refusal(s.name, f"isl failed on it ({e})"))
            continue
        deps = split_dependences(scop, new, record, deps) or compute_dependences(new)
        scop = new
        done.append(record)
    return Splitting(scop, tuple(done), tuple(refused), deps if done else dependences)


# --------------------------------------------------------------------------------------
# Cuts and pieces
# --------------------------------------------------------------------------------------


def cuts_of(s: Statement) -> list[isl.Aff]:
    """The hyperplanes ``h(x) == 0`` on which a read of ``s`` meets its write (module
    doc), each once, as affine functions of ``s``'s iterators and the parameters."""
    if s.domain.is_empty() or not s.writes:
        return []
    (write,) = s.writes
    found: list[isl.Aff] = []
    zeros: list[isl.BasicSet] = []
    n = s.domain.dim(isl.dim_type.set)
    for read in s.reads:
        if read.array != write.array:
            continue
        meet = read.relation.intersect(write.relation).domain()
        if meet.is_empty() or s.domain.is_subset(meet):
            continue
        for c in meet.affine_hull().get_constraints():
            if not c.is_equality():
                continue
            h = _normalised(c.get_aff(), n)
            # a unit coefficient only: ``2*i + 1 == n`` (``x[n-1-i]`` meets ``x[i]``)
            # leaves pieces with parity constraints, on which isl's scheduler crashed
            # (segmentation fault in compute_schedule, islpy 2026.2.2: the step region
            # of A[j][i] = A[i][n-1-j] + A[i][k] + A[j][k] + A[j][i], j from k, split)
            if h is None or not h.get_coefficient_val(isl.dim_type.in_,
                                                      _innermost(h, n)).is_one():
                continue
            zero = h.zero_basic_set()
            if s.domain.is_subset(zero) or any(zero.is_equal(z) for z in zeros):
                continue
            found.append(h)
            zeros.append(zero)
    # outer cuts first (pieces read "i < k, j = k"), then as found
    return sorted(found, key=lambda h: _innermost(h, n))


def _innermost(h: isl.Aff, n: int) -> int:
    return max(d for d in range(n) if not h.get_coefficient_val(isl.dim_type.in_, d).is_zero())


def _normalised(h: isl.Aff, n: int) -> isl.Aff | None:
    """``h`` or ``-h``: the innermost iterator with a coefficient counts up; None if
    ``h`` involves no iterator."""
    for d in reversed(range(n)):
        c = h.get_coefficient_val(isl.dim_type.in_, d)
        if not c.is_zero():
            return h if c.is_pos() else h.neg()
    return None


def pieces_of(s: Statement, cuts: list[isl.Aff]) -> list[tuple[str, isl.Set]]:
    """The nonempty pieces of ``s``'s domain, each with its conditions, in the order
    ``<, ==, >`` of the first cut, then of the second, ..."""
    sides = []
    for h in cuts:
        text = _render(h, s.iterators)
        sides.append([(text.replace(" ? ", f" {sign} "), part) for sign, part in
                      zip(_SIGNS, (h.neg_basic_set(), h.zero_basic_set(), h.neg().neg_basic_set()),
                          strict=True)])
    out = []
    for combo in itertools.product(*sides):
        dom = s.domain
        for _, part in combo:
            dom = dom.intersect(isl.Set.from_basic_set(part))
        dom = dom.coalesce()
        if not dom.is_empty():
            out.append((", ".join(t for t, _ in combo), dom))
    return out


def _render(h: isl.Aff, iterators: tuple[str, ...]) -> str:
    """``h`` as ``lhs ? rhs`` (positive terms left, negative right)."""
    left, right = [], []
    terms = [(h.get_coefficient_val(isl.dim_type.in_, d).to_python(), name)
             for d, name in enumerate(iterators)]
    terms += [(h.get_coefficient_val(isl.dim_type.param, k).to_python(),
               h.get_dim_name(isl.dim_type.param, k))
              for k in range(h.dim(isl.dim_type.param))]
    for c, name in terms:
        if c:
            (left if c > 0 else right).append(name if abs(c) == 1 else f"{abs(c)}*{name}")
    const = h.get_constant_val().to_python()
    if const:
        (left if const > 0 else right).append(str(abs(const)))
    return f"{' + '.join(left) or '0'} ? {' + '.join(right) or '0'}"


# --------------------------------------------------------------------------------------
# Depth, order, freed loops
# --------------------------------------------------------------------------------------


def _split_one(scop: Scop, s: Statement, cuts: list[isl.Aff], deps: Dependences
               ) -> tuple[Scop, Split]:
    own_map = own_dependences(s, deps)
    n = len(s.loops)
    why = []
    for depth in range(n):
        if any(scop.loops[lid].statements != (s.name,) for lid in s.loops[depth:]):
            why.append(f"depth {depth}: the loops below are shared with other statements")
            continue
        # a cut of the shared loops alone would only guard whole inner nests
        inner = [h for h in cuts if h.involves_dims(isl.dim_type.in_, depth, n - depth)]
        if not inner:
            why.append(f"depth {depth}: no cut involves the loops below")
            continue
        if 3 ** len(inner) > 3 * MAX_PIECES:
            why.append(f"depth {depth}: {len(inner)} cuts, too many pieces")
            continue
        pieces = pieces_of(s, inner)
        if not 2 <= len(pieces) <= MAX_PIECES:
            why.append(f"depth {depth}: {len(pieces)} pieces")
            continue
        order = order_pieces(pieces, own_map, depth)
        if order is None:
            why.append(f"depth {depth}: the pieces depend on each other both ways")
            continue
        freed = _freed(s, [pieces[k][1] for k in order], own_map, depth)
        if not freed:
            why.append(f"depth {depth}: no piece has a parallel loop {s.name} lacks")
            continue
        new, record = split_statement(scop, s.name, inner, depth, order)
        record = replace(record, freed=freed)
        problem = verify_split(scop, new, record)
        if problem is not None:
            why.append(f"depth {depth}: the split program failed the proof ({problem})")
            continue
        return new, record
    raise _Refused("; ".join(why) or "no depth to split at")


def own_dependences(s: Statement, deps: Dependences) -> isl.Map:
    """``{ S[x] -> S[y] }``: every dependence of ``s`` on itself, one map."""
    own = union_of([d.relation for d in deps.items if d.source == s.name == d.sink],
                   s.domain.get_space().params())
    own_map = isl.Map.empty(isl.Space.map_from_set(s.domain.get_space()))
    for m in maps_of(own):
        own_map = own_map.union(m)
    return own_map


def _equal_before(space: isl.Space, depth: int) -> isl.Map:
    """``{ S[x] -> S[y] : x_k == y_k for k < depth }``."""
    m = isl.Map.universe(space)
    for k in range(depth):
        m = m.equate(isl.dim_type.in_, k, isl.dim_type.out, k)
    return m


def order_pieces(pieces: list[tuple[str, isl.Set]], own: isl.Map, depth: int) -> list[int] | None:
    """Piece indices in an order that keeps every dependence of ``own`` (the
    statement's on itself) between two pieces in one iteration of the ``depth`` shared
    loops going forward (the smallest index first among those free to go); None if
    there is none."""
    inside = own.intersect(_equal_before(own.get_space(), depth))
    n = len(pieces)
    after: dict[int, set[int]] = {k: set() for k in range(n)}
    for a in range(n):
        from_a = inside.intersect_domain(pieces[a][1])
        if from_a.is_empty():
            continue
        for b in range(n):
            if b != a and not from_a.intersect_range(pieces[b][1]).is_empty():
                after[b].add(a)
    return in_order(after)


def in_order(after: dict[int, set[int]]) -> list[int] | None:
    """Indices ``0..n-1`` in an order that puts every ``after[k]`` before ``k``, the
    smallest index first among those free to go; None if there is a cycle."""
    n = len(after)
    order: list[int] = []
    while len(order) < n:
        ready = [k for k in range(n) if k not in order and after[k] <= set(order)]
        if not ready:
            return None
        order.append(ready[0])
    return order


def _freed(s: Statement, pieces: list[isl.Set], own: isl.Map, depth: int
           ) -> tuple[str, ...]:
    """The loops at depth ``>= depth`` that ``s`` carries and some piece, spanning more
    than one value of them, does not."""
    space = own.get_space()
    freed = []
    for lvl in range(depth, len(s.loops)):
        same_outer = _equal_before(space, lvl)
        same_here = _equal_before(space, lvl + 1)
        carried = not own.intersect(same_outer).is_subset(same_here)
        if not carried:
            continue
        for p in pieces:
            pairs = isl.Map.from_domain_and_range(p, p).intersect(same_outer)
            spans = not pairs.is_subset(same_here)
            inside = own.intersect_domain(p).intersect_range(p).intersect(same_outer)
            if spans and inside.is_subset(same_here):
                freed.append(s.iterators[lvl])
                break
    return tuple(freed)


# --------------------------------------------------------------------------------------
# The new program
# --------------------------------------------------------------------------------------


def split_statement(scop: Scop, statement: str, cuts: list[isl.Aff], depth: int,
                    order: list[int]) -> tuple[Scop, Split]:
    """``scop`` with ``statement`` replaced by its pieces (:func:`pieces_of`) in the
    order ``order`` (indices into them), sharing its ``depth`` outer loops: unproven
    (the caller proves it, :func:`verify_split`)."""
    s = scop.statement(statement)
    return split_into(scop, statement, pieces_of(s, cuts), depth, order,
                      tuple(_render(h, s.iterators).replace(" ? ", " = ") for h in cuts))


def split_into(scop: Scop, statement: str, pieces: list[tuple[str, isl.Set]], depth: int,
               order: list[int], cuts: tuple[str, ...] = ()) -> tuple[Scop, Split]:
    """``scop`` with ``statement`` replaced by ``pieces`` (``(where, domain)``: parts of
    its domain) in the order ``order``, sharing its ``depth`` outer loops, each with its
    own copy of the loops below (which must hold ``statement`` alone): unproven (the
    caller proves it, :func:`verify_split`).  ``cuts``: what made the pieces, for the
    record."""
    s = scop.statement(statement)
    taken = {t.name for t in scop.statements}
    names = []
    for k in range(len(order)):
        name = f"{s.name}_{k}"
        while name in taken:
            name += "_"
        names.append(name)
    chosen = [(names[k], *pieces[idx]) for k, idx in enumerate(order)]
    position = 2 * depth
    slot = fixed_value(s.schedule, position)
    shift = len(chosen) - 1
    # loops: the shared ones list the pieces instead of s; each piece gets its own
    # copies of the loops below, where s's first one was (s is alone in them)
    own_loops = set(s.loops[depth:])
    loops: list[Loop] = []
    new_id: dict[int, int] = {}
    piece_loops: dict[str, list[int]] = {name: [] for name, *_ in chosen}
    for lp in scop.loops:
        if lp.id in own_loops:
            if lp.id == s.loops[depth]:
                for name, *_ in chosen:
                    for lid in s.loops[depth:]:
                        orig = scop.loops[lid]
                        piece_loops[name].append(len(loops))
                        loops.append(replace(orig, id=len(loops), statements=(name,)))
            continue
        new_id[lp.id] = len(loops)
        members = []
        for m in lp.statements:
            members += [name for name, *_ in chosen] if m == s.name else [m]
        loops.append(replace(lp, id=len(loops), statements=tuple(members)))
    statements: list[Statement] = []
    for t in scop.statements:
        if t.name != s.name:
            sched = t.schedule
            if (t.loops[:depth] == s.loops[:depth] and len(t.loops) >= depth
                    and fixed_value(sched, position) > slot):
                sched = shifted(sched, position, shift)
            statements.append(replace(t, schedule=sched,
                                      loops=tuple(new_id[lid] for lid in t.loops)))
            continue
        for k, (name, _, dom) in enumerate(chosen):
            domain = dom.set_tuple_name(name)
            sched = with_constant(s.schedule.intersect_domain(dom).set_tuple_name(
                isl.dim_type.in_, name), position, slot + k)
            accesses = tuple(replace(a, statement=name, relation=a.relation.intersect_domain(
                dom).set_tuple_name(isl.dim_type.in_, name)) for a in s.accesses)
            loop_ids = tuple(new_id[lid] for lid in s.loops[:depth]) + tuple(piece_loops[name])
            statements.append(replace(s, name=name, domain=domain, schedule=sched,
                                      accesses=accesses, loops=loop_ids))
    new = replace(scop, statements=tuple(statements), loops=tuple(loops))
    record = Split(s.name, tuple(s.iterators[:depth]), cuts,
                   tuple(Piece(name, dom.set_tuple_name(name), where)
                         for name, where, dom in chosen), ())
    return new, record


def fixed_value(schedule: isl.Map, position: int) -> int:
    val = schedule.plain_get_val_if_fixed(isl.dim_type.out, position)
    if val.is_nan():
        val = schedule.range().dim_max_val(position)
    return int(val.to_python()) if val.is_int() else 0


def shifted(schedule: isl.Map, position: int, by: int) -> isl.Map:
    """``schedule`` with the constant at output ``position`` moved by ``by``."""
    return with_constant(schedule, position, fixed_value(schedule, position) + by)


def with_constant(schedule: isl.Map, position: int, value: int) -> isl.Map:
    """``schedule`` with output ``position`` (a statement-order dimension) set to
    ``value``."""
    return schedule.project_out(isl.dim_type.out, position, 1).insert_dims(
        isl.dim_type.out, position, 1).fix_val(isl.dim_type.out, position, isl.Val(value))


# --------------------------------------------------------------------------------------
# The proof
# --------------------------------------------------------------------------------------


def verify_split(original: Scop, split: Scop, record: Split) -> str | None:
    """None if ``split`` has the dataflow of ``original`` (module doc); else what
    differs.  ``record`` names the statement and its pieces."""
    s = original.statement(record.statement)
    names = {p.name for p in record.pieces}
    others = [t.name for t in original.statements if t.name != s.name]
    if sorted(t.name for t in split.statements) != sorted(others + list(names)):
        return "the statements are not the original ones and the pieces"
    covered = None
    for p in record.pieces:
        dom = split.statement(p.name).domain.set_tuple_name(s.name)
        if covered is not None and not covered.intersect(dom).is_empty():
            return f"piece {p.name} overlaps an earlier one"
        covered = dom if covered is None else covered.union(dom)
    if covered is None or not covered.is_equal(s.domain):
        return f"the pieces do not cover {s.name}'s domain exactly"
    for p in record.pieces:
        piece = split.statement(p.name)
        if piece.body != s.body or len(piece.accesses) != len(s.accesses):
            return f"piece {p.name} does not compute what {s.name} computes"
        for a, b in zip(piece.accesses, s.accesses, strict=True):
            if (a.array, a.kind, a.ref) != (b.array, b.kind, b.ref) or not a.relation \
                    .set_tuple_name(isl.dim_type.in_, s.name).is_equal(
                        b.relation.intersect_domain(piece.domain.set_tuple_name(s.name))):
                return f"piece {p.name} does not access what {s.name} accesses"
    for t in original.statements:
        if t.name != s.name:
            u = split.statement(t.name)
            if not u.domain.is_equal(t.domain) or u.body != t.body or len(
                    u.accesses) != len(t.accesses) or any(
                    not a.relation.is_equal(b.relation)
                    for a, b in zip(u.accesses, t.accesses, strict=True)):
                return f"statement {t.name} changed"
    back = union_of([(st.domain.identity() if st.name not in names else
                      st.domain.identity().set_tuple_name(isl.dim_type.out, s.name))
                     for st in split.statements], original.context.get_space())
    return same_dataflow(original, split, back, dict.fromkeys(a.array for a in s.accesses))


def same_dataflow(original: Scop, new: Scop, back: isl.UnionMap, arrays) -> str | None:
    """None if ``new``'s dataflow of each of ``arrays`` (:func:`_dataflow`), its
    instances renamed by ``back`` to ``original``'s, equals ``original``'s; else what
    differs."""
    for array in arrays:
        want = _dataflow(original, array)
        got = _dataflow(new, array)
        end = got.range().intersect(isl.UnionSet.from_set(
            original.array(array).extent.set_tuple_name(END)))
        rename = back.union(end.identity())
        got = got.apply_domain(rename).apply_range(rename)
        if not got.is_equal(want):
            return (f"the values of {array} flow as {got.subtract(want)} instead of "
                    f"{want.subtract(got)}")
    return None


def _dataflow(scop: Scop, array: str) -> isl.UnionMap:
    """``{ write -> read }`` for every read instance of ``array`` with a source in the
    region (all statements' reads, not per reference: a pair's element is the write's,
    so the reference is recovered from it), and ``{ write -> pg_end[e] }`` for the
    write that leaves the final value of each element ``e``."""
    space = scop.context.get_space()
    extent = scop.array(array).extent
    end_domain = extent.set_tuple_name(END)
    end_read = end_domain.identity().set_tuple_name(isl.dim_type.out, array)
    width = max(t.schedule.dim(isl.dim_type.out) for t in scop.statements)
    last = 1 + max(fixed_value(t.schedule, 0) for t in scop.statements)
    end_time = isl.Set(f"{{ [{', '.join([str(last)] + ['0'] * (width - 1))}] }}")
    end_schedule = isl.Map.from_domain_and_range(
        end_domain, end_time.align_params(end_domain.get_space()))
    sinks = scop.access_map("read", array).union(isl.UnionMap.from_map(end_read))
    writes = scop.access_map("write", array)
    if writes.is_empty():
        return isl.UnionMap.empty(space)
    items = [(t.domain, t.schedule) for t in scop.statements] + [(end_domain, end_schedule)]
    try:
        # the same order as a schedule tree: isl's dataflow is about twice as fast on it
        tree = _tree(items, 0, width, space)
        info = isl.UnionAccessInfo.from_sink(sinks).set_must_source(writes)
        return info.set_schedule(tree).compute_flow().get_must_dependence().coalesce()
    except isl.Error:
        schedule = scop.schedule.union(isl.UnionMap.from_map(end_schedule))
        return _last_source(sinks, writes, schedule).coalesce()


def _tree(items: list[tuple[isl.Set, isl.Map]], level: int, width: int, space: isl.Space
          ) -> isl.Schedule:
    """The schedule tree of 2d+1 schedules (``items``: domain, schedule) from output
    dimension ``level`` on: a sequence where the statements' constants differ (even
    dimensions), a band per loop (odd ones)."""
    if level == width:
        return isl.Schedule.from_domain(union_of_sets([d for d, _ in items], space))
    if level % 2 == 0:
        groups: dict[int, list] = {}
        for item in items:
            groups.setdefault(fixed_value(item[1], level), []).append(item)
        parts = [_tree(g, level + 1, width, space) for _, g in sorted(groups.items())]
        result = parts[0]
        for part in parts[1:]:
            result = result.sequence(part)
        return result
    inner = _tree(items, level + 1, width, space)
    band = union_of([m.project_out(isl.dim_type.out, level + 1, width - level - 1)
                     .project_out(isl.dim_type.out, 0, level) for _, m in items], space)
    return inner.insert_partial_schedule(isl.MultiUnionPwAff.from_union_map(band))


def _renaming(before: Scop, record: Split) -> isl.UnionMap:
    """``{ S[x] -> P[x] }`` for the pieces ``P`` of the split statement ``S``, the
    identity on every other statement."""
    maps = []
    for t in before.statements:
        if t.name != record.statement:
            maps.append(t.domain.identity())
            continue
        for p in record.pieces:
            maps.append(p.domain.set_tuple_name(t.name).identity()
                        .set_tuple_name(isl.dim_type.out, p.name))
    return union_of(maps, before.context.get_space())


def split_dependences(before: Scop, after: Scop, record: Split, deps: Dependences
                      ) -> Dependences | None:
    """The exact dependences of ``after`` (``before`` split as ``record`` says), read
    off ``deps`` (those of ``before``) instead of computed again, or None where that is
    not proven.

    Each dependence of ``before`` is cut into the pairs of pieces its ends fall in.
    These are ``after``'s dependences exactly when ``after``'s order keeps every one of
    them (checked here with isl): then each element's writes keep their order and each
    read stays between the same two writes, so the last write before a read, the first
    after it and the next write after a write are the same instances."""
    rename = _renaming(before, record)
    items: list[Dependence] = []
    for d in deps.items:
        if record.statement not in (d.source, d.sink):
            items.append(d)
            continue
        moved = isl.UnionMap.from_map(d.relation).apply_domain(rename).apply_range(rename)
        for m in maps_of(moved):
            if not m.is_empty():
                items.append(Dependence(d.kind, d.array, m.get_tuple_name(isl.dim_type.in_),
                                        m.get_tuple_name(isl.dim_type.out), coalesce(m)))
    order = {t.name: k for k, t in enumerate(after.statements)}
    items.sort(key=lambda d: (KINDS.index(d.kind), order[d.source], order[d.sink], d.array))
    new = Dependences(tuple(items), deps.space)
    schedule = after.schedule
    pairs = new.union().apply_domain(schedule).apply_range(schedule)
    if pairs.is_empty():
        return new
    deltas = pairs.deltas()
    if deltas.n_set() != 1:
        return None
    distances = isl.Set.from_union_set(deltas)
    return new if distances.is_subset(_lex_positive(distances.get_space())) else None


def _lex_positive(space: isl.Space) -> isl.Set:
    """``{ d : d > 0 lexicographically }`` in ``space``."""
    n = space.dim(isl.dim_type.set)
    names = [f"d{k}" for k in range(n)]
    terms = [" and ".join([f"{x} = 0" for x in names[:k]] + [f"{names[k]} > 0"])
             for k in range(n)]
    text = f"{{ [{', '.join(names)}] : {' or '.join(terms)} }}"
    return isl.Set(text).align_params(space)
