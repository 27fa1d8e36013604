"""The paper's Algorithm 1 (§4.3): pick space partitions that coalesce the most
no-reuse references, over loop permutations/selections, with kernel splitting.

**Search space.**  A statement's *space choice* is a tuple of distinct iterators of
its own loops, outermost first; the last one is ``pk``, mapped to ``threadIdx.x``.  Its
maps are unit vectors -- ``S[i, j, k] -> [i, j]`` -- so the search ranges over loop
permutation and selection only: the paper's exhaustive space of small-coefficient
transforms, each checked with isl, restricted to coefficients 0/1 with one 1 per row.
That covers the paper's kernels (mv, tmv, mvt, mm) but cannot find combined space
dimensions (``p = i + j``, a wavefront), shifted ones (``p = i + 1``, to fuse a
producer with its consumer) or reversed ones (``p = -i``, which would coalesce
``y[n - 1 - i]``); for space choices of three or more dimensions the outer ones stay
in loop order (only the innermost is free) -- irrelevant for coalescing, but it may
miss fusing two such nests whose loops are transposed against each other.  ``()``
(one thread) is a choice too, the least preferred.

The time schedule ``θ`` is the statement's original 2d+1 schedule with the dimensions
of its space iterators replaced by 0.  Two instances of one thread agree on the space
iterators, so ``θ`` orders them exactly as the original program does -- always legal
for dependences that stay inside a thread -- and all threads run the same time loop
structure.  So legality only asks that no dependence crosses threads inside a kernel
and none goes backwards across kernels.

**Kernel splitting.**  All statements of a kernel share ``n_space``; consecutive
statements (textual order) with different ``n_space`` must be in different kernels.
Kernels are consecutive groups in textual order, launched in that order.  Whether two
statements may share a kernel is decided per dependent pair by the legality prover
(legality is a property of each dependence and the maps of its two statements); a
pair that may not share one needs a cut between them (possible only if the source
comes first textually) and a pair that must share one (a dependence from a later
statement back to an earlier one) forbids cuts between them.  The fewest cuts
satisfying these interval constraints are found greedily (interval stabbing).

**The search.**  Only the *targets* -- references of reuse class ``no-reuse`` with
adjacent pairs -- count.  The adjacency check involves one statement only, so each
statement's choices are filtered (its own dependences may not cross threads: exact,
per iterator) and scored (targets coalesced) separately.  A combination of choices
coalesces exactly the union of its statements' subsets, so "subsets of targets,
largest first" is the same as enumerating combinations lazily in order of decreasing
total score; ties go to more space dimensions (the most parallel dims first), then
to the original loop order.  All legal combinations at the best score are
candidates; a best score of 0 means no non-empty subset is satisfiable and Algorithm
1 gives nothing (the caller falls back to isl's scheduler).  The enumeration stops
after ``MAX_COMBINATIONS`` combinations, so an unlucky region falls back instead of
taking long; pairwise prover answers are cached, so a combination costs a few isl
calls at most.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator

import islpy as isl

from polygpu.model.analysis import Analysis
from polygpu.model.dependences import Dependence, Dependences
from polygpu.model.parallelism import invariant_iterators, involved_iterators
from polygpu.model.scop import Statement
from polygpu.schedule.adjacency import adjacent_pairs, is_coalesced, transformation
from polygpu.schedule.host import determined_iterators
from polygpu.schedule.legality import transformation_schedule, violations
from polygpu.schedule.transformation import KernelSchedule, Transformation

Choice = tuple[int, ...]  # iterator positions of a statement, outermost first

MAX_COMBINATIONS = 400  # combinations of per-statement choices examined at most


# ---------------------------------------------------------------- maps of a choice


def _selector(width: int, dims: list[int | None]) -> isl.Map:
    """``{ [d0..] -> [..] }`` picking input dimension ``k`` for each ``k`` of ``dims``
    and the constant 0 for each None."""
    names = [f"d{k}" for k in range(width)]
    picked = ["0" if k is None else names[k] for k in dims]
    return isl.Map(f"{{ [{', '.join(names)}] -> [{', '.join(picked)}] }}")


def space_map(stmt: Statement, choice: Choice) -> isl.Map:
    """``S[i..] -> [i_c0, .., i_ck]`` on the statement's domain."""
    identity = isl.Map.identity(stmt.domain.get_space().map_from_set())
    identity = identity.intersect_domain(stmt.domain).reset_tuple_id(isl.dim_type.out)
    return identity.apply_range(_selector(len(stmt.iterators), list(choice)))


def _iterator_dims(stmt: Statement) -> dict[int, int]:
    """Schedule dimension -> the iterator (position) it carries (``i`` or ``-i``): in the
    2d+1 schedule, dimension ``2k + 1`` is iterator ``k``.  By position, never read off
    the schedule's expressions: a statement pinned to one value (``if (i == 5)``) has
    the constant 5 there, which involves no iterator, so that dimension stayed in its
    time when ``i`` became a space dimension -- after the other statements' zeroed ones,
    the original order inside a thread broken (the prover then refused the plan)."""
    width = stmt.schedule.dim(isl.dim_type.out)
    return {2 * k + 1: k for k in range(len(stmt.iterators)) if 2 * k + 1 < width}


def _fixed_by(stmt: Statement, choice: Choice) -> set[int]:
    """Schedule dimensions whose value is a function of the iterators in ``choice`` (and
    the parameters) alone, e.g. ``j = h0 - 4t - 2i`` of a wavefront step with ``t`` and
    ``i`` on threads: one value per thread, which orders nothing inside it."""
    pma = stmt.schedule.as_pw_multi_aff()
    others = [k for k in range(len(stmt.iterators)) if k not in choice]
    fixed = set()
    for d in range(pma.dim(isl.dim_type.out)):
        pieces = [aff for _, aff in pma.get_pw_aff(d).get_pieces()]
        if any(aff.involves_dims(isl.dim_type.in_, k, 1) for aff in pieces for k in choice) \
                and not any(aff.involves_dims(isl.dim_type.in_, k, 1)
                            for aff in pieces for k in others):
            fixed.add(d)
    return fixed


def time_map(stmt: Statement, choice: Choice) -> isl.Map:
    """θ: the original schedule with the dimensions of the space iterators zeroed (and
    those the space iterators alone determine: constant inside a thread)."""
    width = stmt.schedule.dim(isl.dim_type.out)
    carried = _iterator_dims(stmt)
    fixed = _fixed_by(stmt, choice)
    dims = [None if carried.get(d) in choice or d in fixed else d for d in range(width)]
    return stmt.schedule.apply_range(_selector(width, dims))


def kernel(stmts: list[Statement], choices: list[Choice],
           reduction: dict[str, frozenset[int]] | None = None) -> KernelSchedule:
    """One kernel of statements sharing ``n_space``, each with its unit-vector maps.
    ``reduction`` gives, per statement, the iterators that may be space dimensions only
    with atomic combining; a statement whose choice uses one is atomic."""
    reduction = reduction or {}
    space = time = None
    atomic, reduction_dims, uniform = [], set(), []
    for stmt, choice in zip(stmts, choices, strict=True):
        s = isl.UnionMap.from_map(space_map(stmt, choice))
        t = isl.UnionMap.from_map(time_map(stmt, choice))
        space = s if space is None else space.union(s)
        time = t if time is None else time.union(t)
        dims = {d for d, k in enumerate(choice) if k in reduction.get(stmt.name, ())}
        if dims:
            atomic.append(stmt.name)
            reduction_dims |= dims
            if stmt.iterators[choice[-1]] in invariant_iterators(stmt.writes[0], stmt):
                uniform.append(stmt.name)
    return KernelSchedule(statements=tuple(s.name for s in stmts), space=space, time=time,
                          n_space=len(choices[0]),
                          n_time=stmts[0].schedule.dim(isl.dim_type.out),
                          atomic=tuple(atomic), reduction_dims=tuple(sorted(reduction_dims)),
                          warp_uniform=tuple(uniform))


# ---------------------------------------------------------------- per-statement choices


def _thread_local(stmt: Statement, deps: list[Dependence]) -> list[int]:
    """Iterators along which none of the statement's own dependences moves.  Exact for
    the statement alone: a space choice is legal for these dependences iff all its
    iterators are among them (different space values = different threads)."""
    allowed = []
    for k in range(len(stmt.iterators)):
        ok = True
        for d in deps:
            same = isl.Map.universe(d.relation.get_space()).equate(
                isl.dim_type.in_, k, isl.dim_type.out, k)
            ok = ok and d.relation.is_subset(same)
        if ok:
            allowed.append(k)
    return allowed


def _choices(allowed: list[int]) -> Iterator[Choice]:
    """Every space choice over ``allowed``, most dimensions first, closest to the loop
    order first: outer dimensions in loop order, the innermost loop innermost first."""
    for size in range(len(allowed), 0, -1):
        for subset in itertools.combinations(allowed, size):
            for inner in reversed(subset):
                yield tuple(k for k in subset if k != inner) + (inner,)
    yield ()


def _ranked(costs: list[list[tuple]]) -> Iterator[tuple[int, ...]]:
    """Index vectors into ``costs`` (each list sorted ascending) in nondecreasing
    order of the summed cost (tuples added elementwise, compared lexicographically).
    Each vector is reached once: from its parent by incrementing a position at or
    after the parent's last increment."""

    def total(idx):
        return tuple(map(sum, zip(*(costs[p][k] for p, k in enumerate(idx)), strict=True)))

    start = (0,) * len(costs)
    heap = [(total(start), start, 0)]
    while heap:
        _, idx, last = heapq.heappop(heap)
        yield idx
        for pos in range(last, len(costs)):
            if idx[pos] + 1 < len(costs[pos]):
                nxt = idx[:pos] + (idx[pos] + 1,) + idx[pos + 1:]
                heapq.heappush(heap, (total(nxt), nxt, pos))


# ---------------------------------------------------------------- kernels and legality


class UnitSearch:
    """Unit-vector space choices of one region: maps, pairwise legality, splitting.

    A statement with a combinable sum reduction (:mod:`polygpu.model.atomic`) may also
    take its reduction iterators as space dimensions; such a choice makes it atomic,
    and pairs involving it are judged against the relaxed dependences."""

    def __init__(self, an: Analysis):
        self.an = an
        # statements that never run (empty domain) belong to no kernel: there is
        # nothing to schedule, and isl drops their empty maps from every union anyway
        self.stmts = [s for s in an.scop.statements if not s.domain.is_empty()]
        self.index = {s.name: k for k, s in enumerate(self.stmts)}
        self._pair_deps: dict[frozenset[str], dict] = {}
        self._together: dict[tuple, bool] = {}
        # per statement: iterators that are space-legal only with atomic combining
        self.reduction: dict[str, frozenset[int]] = {}
        self._allowed: dict[str, list[int]] = {}
        self._target: dict[str, frozenset[int]] = {}  # iterators the target depends on
        for stmt in self.stmts:
            own = self.pair_deps(frozenset()).get((self.index[stmt.name],) * 2, [])
            strict = set(_thread_local(stmt, own))
            relaxed = strict
            if stmt.name in an.combinable:
                target = an.combinable[stmt.name].array
                relaxed = set(_thread_local(stmt, [d for d in own if d.array != target]))
                if relaxed - strict:
                    self.reduction[stmt.name] = frozenset(relaxed - strict)
                    its = involved_iterators(stmt.writes[0], stmt)
                    self._target[stmt.name] = frozenset(stmt.iterators.index(i) for i in its)
            if an.scop.host:  # a host step: its fixed iterators cannot spread work
                relaxed -= determined_iterators(stmt.domain)
                self.reduction[stmt.name] = self.reduction.get(
                    stmt.name, frozenset()) & frozenset(relaxed)
            self._allowed[stmt.name] = sorted(relaxed)

    def allowed(self, stmt: Statement) -> list[int]:
        """Iterators that may be space dimensions of ``stmt`` (some atomically)."""
        return self._allowed[stmt.name]

    def sensible(self, stmt: Statement, choice: Choice) -> bool:
        """False for an atomic choice that leaves an iterator of the target in time:
        then every instance would be an atomic update, and nothing is privatised."""
        return not set(choice) & self.reduction.get(stmt.name, frozenset()) or \
            self._target[stmt.name] <= set(choice)

    def atomic_of(self, stmts: list[Statement], choices: list[Choice]) -> frozenset[str]:
        """The statements whose choices make them atomic."""
        return frozenset(s.name for s, c in zip(stmts, choices, strict=True)
                         if set(c) & self.reduction.get(s.name, frozenset()))

    def pair_deps(self, atomic: frozenset[str]) -> dict[tuple[int, int], list[Dependence]]:
        """The dependences to respect when ``atomic`` combine atomically, per
        (source, sink) statement index pair."""
        if atomic not in self._pair_deps:
            pairs: dict[tuple[int, int], list[Dependence]] = {}
            for d in self.an.dependences_with(atomic).items:
                if d.source in self.index and d.sink in self.index:
                    pairs.setdefault((self.index[d.source], self.index[d.sink]), []).append(d)
            self._pair_deps[atomic] = pairs
        return self._pair_deps[atomic]

    def together(self, a: int, ca: Choice, b: int, cb: Choice) -> bool:
        """Whether statement ``a`` with ``ca`` and ``b`` with ``cb`` in one kernel
        respect the dependences from ``a`` to ``b`` (decided by the prover).  The
        dependences of a pair depend only on whether its two statements are atomic."""
        if len(ca) != len(cb):
            return False
        key = (a, ca, b, cb)
        if key not in self._together:
            stmts, choices = [self.stmts[a], self.stmts[b]], [ca, cb]
            if a == b:
                stmts, choices = stmts[:1], choices[:1]
            k = kernel(stmts, choices, self.reduction)
            es = transformation_schedule(Transformation((k,), (), (), "adjacency"))
            deps = Dependences(tuple(self.pair_deps(frozenset(k.atomic)).get((a, b), [])),
                               self.an.dependences.space)
            self._together[key] = not violations(deps, es)
        return self._together[key]

    def split(self, choices: list[Choice]) -> list[list[int]] | None:
        """The fewest consecutive groups (kernels) making ``choices`` legal, or None.
        A cut at ``p`` separates statements ``< p`` from ``>= p``."""
        n = len(choices)
        if n == 0:
            return None  # nothing runs
        cuts = {p for p in range(1, n) if len(choices[p - 1]) != len(choices[p])}
        forbidden: set[int] = set()
        required = []
        for (a, b) in self.pair_deps(self.atomic_of(self.stmts, choices)):
            ok = self.together(a, choices[a], b, choices[b])
            if a == b and not ok:
                return None  # the statement's own dependences cross its threads
            if a < b and not ok:
                required.append((a + 1, b))
            elif a > b:
                if not ok:
                    return None  # a later statement feeds an earlier one: never split
                forbidden.update(range(b + 1, a + 1))
        if cuts & forbidden:
            return None
        for lo, hi in sorted(required, key=lambda r: r[1]):
            if any(lo <= c <= hi for c in cuts):
                continue
            allowed = [p for p in range(hi, lo - 1, -1) if p not in forbidden]
            if not allowed:
                return None
            cuts.add(allowed[0])  # rightmost: it stabs the most later intervals
        bounds = [0, *sorted(cuts), n]
        return [list(range(lo, hi)) for lo, hi in itertools.pairwise(bounds)]

    def build(self, choices: list[Choice], origin: str) -> Transformation | None:
        """The transformation of ``choices`` with the fewest kernels, if any is legal."""
        groups = self.split(choices)
        if groups is None:
            return None
        kernels = tuple(kernel([self.stmts[k] for k in g], [choices[k] for k in g],
                               self.reduction)
                        for g in groups)
        return transformation(self.an, kernels, origin)


def targets(an: Analysis, stmt: Statement) -> list:
    """The statement's Algorithm 1 targets: no-reuse references with adjacent pairs."""
    return [acc for acc in stmt.accesses
            if an.reuse_of(stmt.name, acc.ref).reuse == "no-reuse"
            and not adjacent_pairs(acc).is_empty()]


def search(an: Analysis, wanted: int = 32) -> list[Transformation]:
    """Algorithm 1: legal transformations coalescing the largest number of targets
    (at most ``wanted`` of them, in search order); empty if that number is 0."""
    unit = UnitSearch(an)
    options: list[list[Choice]] = []
    costs: list[list[tuple]] = []
    for stmt in unit.stmts:
        goals = targets(an, stmt)
        scored = []
        for rank, choice in enumerate(c for c in _choices(unit.allowed(stmt))
                                      if unit.sensible(stmt, c)):
            space, time = space_map(stmt, choice), time_map(stmt, choice)
            score = sum(is_coalesced(acc, space, time) for acc in goals)
            scored.append(((-score, -len(choice), rank), choice))
        scored.sort()
        options.append([c for _, c in scored])
        costs.append([cost for cost, _ in scored])

    found: list[Transformation] = []
    best = None
    for idx in itertools.islice(_ranked(costs), MAX_COMBINATIONS):
        score = -sum(costs[p][k][0] for p, k in enumerate(idx))
        if score == 0 or (best is not None and score < best):
            break
        tr = unit.build([options[p][k] for p, k in enumerate(idx)], "adjacency")
        if tr is not None:
            best = score
            found.append(tr)
            if len(found) >= wanted:
                break
    return found


def original(an: Analysis) -> Transformation | None:
    """The original loop order with each statement's parallel loops (``an.loops``) as
    its space dimensions, innermost last; None when that is not legal."""
    parallel = {lp.loop for lp in an.loops if lp.parallel}
    unit = UnitSearch(an)
    choices = [tuple(k for k, lid in enumerate(s.loops)
                     if lid in parallel and k in unit.allowed(s))
               for s in unit.stmts]
    return unit.build(choices, "original")


def sequential(an: Analysis) -> Transformation:
    """One kernel, one thread, the original schedule: always legal."""
    stmts = [s for s in an.scop.statements if not s.domain.is_empty()]
    if not stmts:
        # nothing ever runs; a kernel without maps cannot be proven (the legality
        # module pads map by map), so keep the statements with maps on their universe
        nothing = isl.UnionMap.empty(an.scop.context.get_space())
        for s in an.scop.statements:
            nothing = nothing.union(isl.UnionMap.from_domain(
                isl.UnionSet.from_set(isl.Set.universe(s.domain.get_space()))))
        names = tuple(s.name for s in an.scop.statements)
        return transformation(an, (KernelSchedule(names, nothing, nothing, 0, 0),),
                              "sequential")
    return transformation(an, (kernel(stmts, [()] * len(stmts)),), "sequential")
