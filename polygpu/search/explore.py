"""The lazy, bounded order of a search: which variants are costed, compiled and timed,
and when.

A variant goes through three steps of very different prices before it is timed (symm
at PolyBench's EXTRALARGE sizes, one CPU core):

* **costed** (:meth:`~polygpu.search.tuner.Session.sketch`): tiled, placed and priced by
  the model without generating code (:func:`polygpu.search.plan_model.sketch`):
  traffic, operand loads, grids, registers guessed from the points per thread;
  0.1-0.5 s;
* **built** (:meth:`~polygpu.search.pool.Pool.build`): its CUDA generated (isl's AST of
  every kernel body: 0.3-20 s) and compiled by the resource oracle (ptxas: ~0.7 s), which
  tells its registers, spills and concurrency;
* **timed**: its reference-check twin generated (as long again), then checked and timed
  on the device.

Costing the whole space (1632 variants for symm) took longer than a budget of 8 timings
was worth, and building it all took over two hours of CPU.  :class:`Explorer` therefore
walks a list of variants lazily, in the model's order, and never further than the budget
can use:

1. **best first**: the variants are costed in batches, nearest the cheapest costed ones
   first.  An uncosted variant is expected to cost what its nearest costed neighbour
   costs, times :data:`NEARBY` per step of :func:`distance` between them (a tile twice
   as wide, a block twice as many threads, shared memory on or off...), counting only
   neighbours the traffic and spill rules kept; the batch is the variants with the
   lowest expectation, taken from each scheduler candidate in turn (the model compares
   programs of different candidates least well, and the walk must not spend itself on
   one).  A variant is costed together with its other thread layouts
   (:func:`layout_family`), which the allowance counts once; the order of timing puts
   a layout whose sibling was measured behind by :data:`LAYOUT_TIMED`.  The first
   anchors are the plans the model's default chose among
   (:func:`polygpu.search.plan_model.choose`), so the walk starts from the default and
   moves to where the model prices lower.  The walk costs :data:`COSTED_PER_TIMED`
   variants per candidate the budget can still time (a reused measurement, which the
   budget does not count, lets it cost as many more), and no more;
2. the costed variants go through the pruning rules that need no compiler (the traffic
   bound), and the survivors are **built in the model's order**
   (:func:`~polygpu.search.cost.model_order`), never more than :data:`LOOKAHEAD` ahead
   of the timing and at most :data:`BUILT_PER_TIMED` per candidate the budget can time
   (plus the look-ahead; a candidate whose code turns out to be another's is not
   counted, the costing allowance bounds those);
3. the built ones go through the rules that need ptxas (spills, threads, concurrency),
   and the cheapest of the built survivors, by the model with ptxas' registers, is timed
   next.

Every rule is applied to what was actually considered: the traffic floor is the fewest
bytes among the costed variants, the best concurrency the best among the built ones.
Without a budget every variant is costed, built and timed, as the paper's search does.
The strategy gives the rules (:class:`Rules`); the explorer only orders and bounds.
"""

from __future__ import annotations

import heapq
import json
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np

from polygpu.schedule.variant import Variant
from polygpu.search.candidate import Candidate
from polygpu.search.cost import model_order, predicted_cost

# candidates built (code generated, ptxas run) ahead of the one timed next: enough to
# reorder by ptxas' registers and to keep a few compiles in parallel
LOOKAHEAD = 4
# tiles costed (each in all its thread layouts, layout_family) per candidate the budget can
# still time: the model's order is taken among these (a budget of 8, 2 of them for the
# plans, costs 48 tiles of the space)
COSTED_PER_TIMED = 8
# candidates built per candidate the budget can time, beyond the look-ahead: the rules
# that need ptxas (spills, threads, concurrency) prune some after their build, and some
# turn out to generate another's code (trisolv: 11 of 18 built at n = 4000)
BUILT_PER_TIMED = 3
# an uncosted variant is expected to cost this many times its nearest costed
# neighbour per step of distance()
NEARBY = 1.5
# variants costed at once (in parallel): each batch is a serial round of the walk (costed,
# then the traffic floors built), so as wide as the GPU machine's 16 workers
COST_BATCH = 16
# a candidate its own program's measurements put over this many times the best time is
# not timed (Explorer.estimate): the least ratio of the program's measured variants is
# its most favourable reading, so within a program the model would have to be wrong by
# more than this factor for one to win
HOPELESS = 4.0

# a candidate whose other thread layout was measured is timed as if it cost this much more
# per measured layout: the model prices a tile's layouts alike, and they ran within 3 %
# of each other (l2dist, mm on the H200), so the budget goes to other tiles first -- mm at
# 2048 tuned 18 % slower when the walk timed each tile's layouts side by side
LAYOUT_TIMED = 1.25

# steps of distance() per field that differs (tiles and threads: per factor of 2)
_FIELD_STEPS = {"jam": 1.0, "shared": 1.0, "blocked": 1.0, "chunk": 0.5, "prefetch": 0.5,
                "double_buffer": 0.5, "time_tile": 1.0, "unroll": 0.5}
_CANDIDATE_STEPS = 3.0  # another scheduler candidate: another program altogether
_DEVICE_STEPS = 2.0


def _time_of(m) -> float | None:
    """Milliseconds a measurement saw a run take: the median of a timed one, the check's
    run of one given up as hopeless (``slow``); None otherwise."""
    if m is None:
        return None
    if m.status == "ok":
        return m.time_ms
    return m.extra.get("check_run_ms") if m.status == "slow" else None


def group_of(v: Variant) -> tuple:
    """The group of variants of one program: a scheduler candidate, with host or device
    steps.  The model compares variants within one group well and across groups least
    well: the traffic rule and the calibration of the order are per group."""
    return v.candidate, v.device_steps


def _log2(x: int) -> float:
    return math.log2(max(x, 1))


def _features(v: Variant) -> tuple:
    """What :func:`distance` compares of one kernel's merged variant."""
    points = tuple(t // h for t, h in zip(v.tile, v.threads, strict=True))
    return (v.candidate, v.device_steps, tuple(_log2(t) for t in v.threads),
            tuple(_log2(p) for p in points),
            tuple(getattr(v, name) for name in _FIELD_STEPS))


def _kernel_distance(a: tuple, b: tuple) -> float:
    d = 0.0
    if a[0] != b[0]:
        d += _CANDIDATE_STEPS
    if a[1] != b[1]:
        d += _DEVICE_STEPS
    # right-aligned (x last): threads, and points per thread along each dimension
    n = min(len(a[2]), len(b[2]))
    for x, y in ((a[2], b[2]), (a[3], b[3])):
        d += sum(abs(p - q) for p, q in zip(x[len(x) - n:], y[len(y) - n:], strict=True))
    d += abs(len(a[2]) - len(b[2])) * 2
    for (name, steps), p, q in zip(_FIELD_STEPS.items(), a[4], b[4], strict=True):
        if p != q:
            d += steps * (abs(_log2(p) - _log2(q)) if name in ("time_tile", "unroll")
                          and p and q else 1.0)
    return d


def _profile(v: Variant) -> tuple[tuple, dict[int, tuple]]:
    """The program-wide fields' features and each overriding kernel's."""
    return _features(v.for_kernel(-1)), {k: _features(v.for_kernel(k)) for k, _ in v.kernels}


def _profile_distance(a: tuple[tuple, dict], b: tuple[tuple, dict]) -> float:
    d = _kernel_distance(a[0], b[0])
    for k in a[1].keys() | b[1].keys():
        d = max(d, _kernel_distance(a[1].get(k, a[0]), b[1].get(k, b[0])))
    return d


class _Distances:
    """:func:`_profile_distance` from one profile to many at once: the profiles without
    per-kernel overrides are held as arrays (grouped by their number of mapped
    dimensions), the others go through the function.  The arithmetic is the function's,
    term by term in the same order, so the values are the same floats (the walk's order
    depends on them); only the loop over the profiles moves to NumPy (a 3-d space of 14k
    variants took 12 s of Python per tune)."""

    def __init__(self, profiles: Sequence[tuple[tuple, dict]]):
        self.n = len(profiles)
        self.others = [i for i, p in enumerate(profiles) if p[1]]
        self.groups = {}
        plain = [(i, p[0]) for i, p in enumerate(profiles) if not p[1]]
        for length in sorted({len(f[2]) for _, f in plain}):
            rows = [(i, f) for i, f in plain if len(f[2]) == length]
            self.groups[length] = (
                np.array([i for i, _ in rows], dtype=np.int64),
                np.array([f[0] for _, f in rows]),
                np.array([bool(f[1]) for _, f in rows]),
                np.array([f[2] for _, f in rows], dtype=float).reshape(len(rows), length),
                np.array([f[3] for _, f in rows], dtype=float).reshape(len(rows), length),
                [np.array([f[4][k] for _, f in rows]) for k in range(len(_FIELD_STEPS))])
        self.profiles = profiles

    def row(self, mine: tuple[tuple, dict]) -> np.ndarray:
        if mine[1]:  # overrides of its own: per profile
            return np.array([_profile_distance(mine, p) for p in self.profiles])
        out = np.empty(self.n)
        a = mine[0]
        la = len(a[2])
        for length, (index, cand, dev, threads, points, fields) in self.groups.items():
            d = np.where(cand != a[0], _CANDIDATE_STEPS, 0.0)
            d = d + np.where(dev != bool(a[1]), _DEVICE_STEPS, 0.0)
            n = min(la, length)
            for mine_x, theirs in ((a[2], threads), (a[3], points)):
                diffs = np.abs(np.array(mine_x[la - n:], dtype=float)[None, :]
                               - theirs[:, length - n:])
                total = np.zeros(len(index))
                for k in range(n):  # as sum(): left to right, from 0
                    total = total + diffs[:, k]
                d = d + total
            d = d + abs(la - length) * 2
            for (name, steps), p, column in zip(_FIELD_STEPS.items(), a[4], fields,
                                                strict=True):
                differ = column != p
                if name in ("time_tile", "unroll") and p:
                    logs = {q: _log2(q) for q in np.unique(column).tolist()}  # math's log2
                    ratio = np.abs(_log2(p) - np.array([logs[q] for q in column.tolist()]))
                    term = np.where(column != 0, steps * ratio, steps * 1.0)
                else:
                    term = np.full(len(index), steps * 1.0)
                d = d + np.where(differ, term, 0.0)
            out[index] = d
        for i in self.others:
            out[i] = _profile_distance(mine, self.profiles[i])
        return out


def distance(a: Variant, b: Variant) -> float:
    """Steps between two variants: per kernel (its merged variant, per-kernel overrides
    included) the log2 ratios of threads and of points per thread along each
    dimension, :data:`_CANDIDATE_STEPS` for another scheduler candidate, and a step or so
    per other field that differs (:data:`_FIELD_STEPS`); the largest over the kernels.
    Only an order of exploration: near variants are expected to cost alike."""
    return _profile_distance(_profile(a), _profile(b))


def layout_family(v: Variant) -> str:
    """What ``v`` shares with its other thread layouts: every field but the threads'
    shape (their total kept, per kernel too).  Layouts of one tile move the same data and
    fill the GPU alike, so the model prices them within a few percent -- and
    :func:`distance` puts them four steps apart (32 x 16 and 16 x 32 threads: two in
    threads, two in points per thread), so a walk that costs one rarely reaches the
    other.  l2dist's tuned 32 x 16 block ran 3 % behind its never-costed 16 x 32 twin on
    the H200.  The explorer therefore costs a tile's layouts together (and times the
    model's first of them before the others, :data:`LAYOUT_TIMED`)."""
    data = v.to_json()
    data["threads"] = math.prod(v.threads)
    for overrides in (data.get("kernels") or {}).values():
        if "threads" in overrides:
            overrides["threads"] = math.prod(overrides["threads"])
    return json.dumps(data, sort_keys=True)


@dataclass
class Rules:
    """What a strategy prunes, applied by the explorer to what it has considered.
    ``costed(explorer)`` after each batch of costing (rules without a compiler: the
    traffic bound); ``built(explorer)`` after each build (ptxas' rules) and before each
    pick; both set pruned candidates' stages in the pool.  ``order`` sorts what to build
    and to time (default: :func:`~polygpu.search.cost.model_order`).  ``seed`` says
    whether a costed candidate's neighbourhood is worth costing (default: unless the
    traffic or spill rule pruned it; an anchor outside the rules, such as a plan, may
    need the strategy's own test)."""

    costed: Callable[[Explorer], None] = lambda _e: None
    built: Callable[[Explorer], None] = lambda _e: None
    order: Callable[[Candidate], tuple] | None = None
    seed: Callable[[Candidate], bool] | None = None


class Explorer:
    """Walks ``variants`` lazily in the model's order (see the module docstring):
    iterating yields candidates to time, built and past the rules, one at a time.
    ``anchors``: candidates already costed (the plans, the incumbent) from which the
    exploration starts.  ``left()`` tells how many more this walk may time (None: no
    limit, and then everything is costed and built at once, as the paper's search
    does); it is read again after each candidate yielded, so timing one (or finding it
    in the database, which does not count) moves the bounds."""

    def __init__(self, pool, variants: Sequence[Variant], anchors: Sequence[Candidate],
                 rules: Rules, left: Callable[[], int | None]):
        self.pool, self.rules, self.left = pool, rules, left
        self.variants: dict[str, Variant] = {}
        for v in variants:
            self.variants.setdefault(pool.key_of(v), v)
        self.index = {k: i for i, k in enumerate(self.variants)}
        # considered: every candidate of this walk that was costed (anchors first)
        self.considered: dict[str, None] = dict.fromkeys(a.key for a in anchors)
        self.uncosted: list[str] = []
        for k in self.variants:
            c = pool.candidates.get(k)
            if c is None or c.stage == "unexplored":
                self.uncosted.append(k)
            else:  # costed before (a plan, an earlier sweep): part of this walk too
                self.considered.setdefault(k)
        self.families = {k: layout_family(v) for k, v in self.variants.items()}
        self.members: dict[str, list[str]] = {}
        for k, family in self.families.items():
            self.members.setdefault(family, []).append(k)
        self.profiles = [_profile(v) for v in self.variants.values()]
        self.distances = _Distances(self.profiles)
        self.rows: dict[str, np.ndarray] = {}  # costed key -> distance to each variant
        self.costed = 0  # tiles this walk costed (a tile's layouts count once)
        self.built = 0  # candidates this walk built
        # measured / predicted time per group of variants (see calibrate)
        self.scales: dict[tuple, float] = {}
        self.neutral = 1.0
        self.best_s: float | None = None  # the best time measured so far
        start = left()
        self.unlimited = start is None
        self.allowance = 0 if start is None else max(1, start)

    # -- what the walk has seen ------------------------------------------------------

    def candidates(self, *stages: str) -> list[Candidate]:
        """The considered candidates (anchors included) at one of ``stages`` (all when
        none is given), in the order they were considered."""
        found = [self.pool.candidates[k] for k in self.considered]
        return [c for c in found if not stages or c.stage in stages]

    @staticmethod
    def is_built(c: Candidate) -> bool:
        """Whether the oracle has told ``c``'s registers (its code exists)."""
        return c.registers is not None

    def order(self, c: Candidate) -> tuple:
        """The sort key of what to build and to time: the strategy's, else the model's
        order with the predicted cost scaled by what the measurements so far say of
        ``c``'s group (:meth:`calibrate`)."""
        key = self.rules.order
        if key is not None:
            return key(c)
        cost, *rest = model_order(c, self.pool.limits)
        scale = self.scales.get(group_of(c.variant), self.neutral)
        return (cost * scale / self.neutral * LAYOUT_TIMED ** self._layouts_timed(c),
                *rest)

    def _layouts_timed(self, c: Candidate) -> int:
        """How many of ``c``'s other thread layouts (:func:`layout_family`) were
        measured."""
        family = self.families.get(c.key)
        if family is None:
            return 0
        return sum(1 for k in self.members[family] if k != c.key
                   and (o := self.pool.candidates.get(k)) is not None
                   and o.measurement is not None)

    def _overtaken(self, window: list[Candidate]) -> list[Candidate]:
        """``window`` with the candidates not built yet that now come before all of it
        built and added, up to :data:`LOOKAHEAD` in each parallel batch (within the
        build allowance): a measurement can move a program's variants behind another's
        (:meth:`calibrate`) after the window was filled with them.  In batches, because
        each build is a round trip to the compile workers (0.7 s for floyd_warshall's
        variants): one at a time, they stalled its GPU 25 s in a tune of 76."""
        while window:
            queue, may = self.waiting(), self.may_build()
            best = min(map(self.order, window))
            ahead = [c for c in queue[:LOOKAHEAD] if self.order(c) < best]
            if may is not None:
                ahead = ahead[:may]
            if not ahead:
                return window
            self.build(ahead)
            self.rules.costed(self)
            self.rules.built(self)
            window = self.window()
        return window

    def calibrate(self) -> None:
        """The model's error per group of variants (a scheduler candidate, with host or
        device steps), from the measurements so far: the least ratio of a measured time
        to its predicted cost.  Why: the model compares variants of one program well and
        different programs least well, and it is wrong about a program as a whole --
        LU's second schedule at n = 4000 was predicted cheaper than the first and ran
        14x slower, variant after variant, until the budget was spent.  A group without
        a measurement gets the most favourable ratio known (it is not judged by another
        program's error); with no measurement at all the order is the model's.  A
        check given up as hopeless (status "slow") counts with its one run's time."""
        limits, ratios, best = self.pool.limits, {}, math.inf
        for c in self.pool.candidates.values():
            took_ms = _time_of(c.measurement)
            if not took_ms:
                continue
            if c.measurement.status == "ok":
                best = min(best, took_ms / 1e3)
            predicted = predicted_cost(c, limits) if c.traffic_bytes is not None else 0
            if 0 < predicted < math.inf:
                group = group_of(c.variant)
                ratios[group] = min(took_ms / 1e3 / predicted, ratios.get(group, math.inf))
        self.scales = ratios
        self.neutral = min(ratios.values(), default=1.0)
        self.best_s = best if best < math.inf else None

    def estimate(self, c: Candidate) -> float | None:
        """``c``'s time in seconds as its program's measured variants predict it (its
        predicted cost times the program's least ratio, :meth:`calibrate`); None when no
        variant of its program was measured."""
        scale = self.scales.get(group_of(c.variant))
        return None if scale is None else predicted_cost(c, self.pool.limits) * scale

    def _prune_hopeless(self) -> None:
        """The walk's candidates not measured yet that their own program's measurements
        put over :data:`HOPELESS` times the best time: ``pruned-measured``, never built
        or timed.  syrk's second schedule at EXTRALARGE ran 3.5-5.4 s a run against the
        first's 1.6 ms; with nothing else left, four of its variants took 130 s of a
        tune, each check and run alone longer than the search's whole remaining work."""
        if self.best_s is None:
            return
        for c in self.candidates("kept"):
            if c.key not in self.variants or c.measurement is not None:
                continue
            estimate = self.estimate(c)
            if estimate is not None and estimate > HOPELESS * self.best_s:
                self.pool.set(replace(c, stage="pruned-measured", reason=(
                    f"its program's measured variants predict {estimate * 1e3:.3g} ms, "
                    f"over {HOPELESS:g}x the best time ({self.best_s * 1e3:.3g} ms)")))

    def waiting(self) -> list[Candidate]:
        """Costed variants of the walk past the rules so far, not built yet, in
        :meth:`order` (anchors only seed the walk: they are never yielded)."""
        return sorted((c for c in self.candidates("kept") if not self.is_built(c)
                       and c.key in self.variants), key=self.order)

    def window(self) -> list[Candidate]:
        """Built variants of the walk past every rule, not measured yet."""
        return [c for c in self.candidates("kept") if self.is_built(c)
                and c.key in self.variants]

    # -- costing ---------------------------------------------------------------------

    def _row(self, c: Candidate) -> np.ndarray:
        """:func:`distance` from ``c`` to each variant of the walk (kept for later)."""
        row = self.rows.get(c.key)
        if row is None:
            row = self.distances.row(_profile(c.variant))
            self.rows[c.key] = row
        return row

    def seeds(self) -> list[Candidate]:
        """The costed candidates whose neighbourhood is worth costing: past the traffic
        and spill rules (a pruned one says its neighbourhood moves too much data) and the
        strategy's own test."""
        return [c for c in self.candidates() if c.traffic_bytes is not None
                and c.stage not in ("invalid", "duplicate", "unexplored", "pruned-traffic",
                                    "pruned-spills")
                and (self.rules.seed is None or self.rules.seed(c))]

    def expected(self, seeds: list[Candidate]) -> dict[str, float]:
        """Each uncosted variant's expected cost: the least over ``seeds`` (:meth:`seeds`)
        of their predicted cost times :data:`NEARBY` per step of :func:`distance`;
        infinite with none."""
        if not self.uncosted:
            return {}
        columns = np.array([self.index[k] for k in self.uncosted])
        best = np.full(len(columns), math.inf)
        for c in seeds:
            cost = predicted_cost(c, self.pool.limits)
            best = np.minimum(best, cost * NEARBY ** self._row(c)[columns])
        return dict(zip(self.uncosted, best.tolist(), strict=True))

    def may_cost(self) -> int | None:
        """Variants this walk may still cost (None: every one)."""
        if self.unlimited:
            return None
        return max(0, COSTED_PER_TIMED * self.allowance - self.costed)

    def may_build(self) -> int | None:
        """Candidates this walk may still build (None: every one)."""
        if self.unlimited:
            return None
        return max(0, BUILT_PER_TIMED * self.allowance + LOOKAHEAD - self.built)

    def cost(self, size: int) -> int:
        """Costs up to ``size`` uncosted variants (within the allowance), the lowest
        expectation first (space order among equals) of each scheduler candidate (and
        host or device steps) in turn; how many it costed."""
        may = self.may_cost()
        if may is not None:
            size = min(size, may)
        if not self.uncosted or size <= 0:
            return 0
        seeds = self.seeds()
        expected = self.expected(seeds)
        # the other thread layouts of what is costed come first in their group, and a
        # variant is costed with its own (see layout_family)
        costed = {self.families.get(c.key) or layout_family(c.variant) for c in seeds}

        def rank(k):
            return self.families[k] not in costed, expected[k], self.index[k]

        groups: dict[tuple, list[str]] = {}
        for k in self.uncosted:
            groups.setdefault(group_of(self.variants[k]), []).append(k)
        ranked = [heapq.nsmallest(size, g, key=rank) for g in groups.values()]
        # round robin: the best of each group, best first, then the second of each...
        order = [k for turn in range(size) for k in sorted(
            (r[turn] for r in ranked if turn < len(r)), key=rank)]
        uncosted = set(self.uncosted)
        batch: list[str] = []
        for k in order:
            if k in batch:
                continue
            family = [k] + [o for o in self.members[self.families[k]]
                            if o != k and o in uncosted and o not in batch]
            if batch and len(batch) + len(family) > size:
                break
            batch += family  # whole: the allowance counts it as one tile
        chosen = set(batch)
        self.uncosted = [k for k in self.uncosted if k not in chosen]
        found = self.pool.sketch([self.variants[k] for k in batch])
        self.costed += len({self.families[k] for k in batch})  # tiles, not layouts
        for c in found:
            self.considered.setdefault(c.key)
        return len(batch)

    def _cost_ahead(self) -> None:
        """Cost what the allowance leaves, a batch at a time (best first: each batch's
        expectations come from the ones costed before), the rules applied after each."""
        if self.unlimited:
            self.cost(len(self.uncosted))
        while self.uncosted and self.may_cost():
            self.rules.costed(self)
            self.cost(COST_BATCH)
        self.rules.costed(self)

    # -- building --------------------------------------------------------------------

    def build(self, batch: list[Candidate], rules: bool = True) -> None:
        """``batch`` built (code, then the oracle), and the rules applied (unless
        ``rules`` is false: a rule that builds what it needs to decide)."""
        self.pool.build(batch)
        # a duplicate (another's code) costs its code generation only, and costing
        # bounds those: not counted
        self.built += sum(1 for c in batch if self.pool.candidates[c.key].stage != "duplicate")
        if rules:
            self.rules.built(self)

    # -- the walk --------------------------------------------------------------------

    def still_wanted(self, c: Candidate) -> bool:
        """Whether ``c``, yielded earlier, is still worth timing now: what was measured
        since its pick (a pipelined search picks each candidate while the one before is
        on the GPU) may have put it over :data:`HOPELESS` times the best
        (``pruned-measured``); else yes."""
        self.calibrate()
        self._prune_hopeless()
        return self.pool.candidates[c.key].stage != "pruned-measured"

    def __iter__(self) -> Iterator[Candidate]:
        self.pool.recheck = self.still_wanted
        while True:
            left = self.left()
            if left == 0:
                return
            self.calibrate()  # what was measured since the last pick
            self._prune_hopeless()
            want = len(self.variants) + len(self.considered) if self.unlimited \
                else min(LOOKAHEAD, left)
            self._cost_ahead()
            window = self.window()
            while len(window) < want:
                may = self.may_build()
                size = want - len(window) if may is None else min(want - len(window), may)
                queue = self.waiting()
                if not queue or size <= 0:
                    break
                self.build(queue[:size])
                self.rules.costed(self)  # a least-traffic variant that spilled moves the bound
                window = self.window()
            if not window:
                return
            self.rules.built(self)  # the best concurrency may have grown
            window = self._overtaken(self.window())
            if not window:
                continue
            c = min(window, key=self.order)
            yield c
            if self.pool.candidates[c.key].stage in ("reused", "kernel-reused"):
                self.allowance += 1  # not counted against the budget: look as far again
