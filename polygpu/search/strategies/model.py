"""``model``: the paper's pruned search (§6), the model's default plans first, then the
survivors cheapest predicted first.

1. *plans*: the plans the model's default chose among (:func:`polygpu.search.
   plan_model.choose`), best first: the first :data:`PLANS` of them are timed before
   anything else and never pruned, so the default plan is always measured and the
   search can only return something at least as fast as what ``compile -p`` gives;
2. then the space and the other ranked plans, walked lazily by
   :class:`~polygpu.search.explore.Explorer` from all the ranked plans (costed, built
   and timed in the model's order, only as far as the budget can use), through the
   paper's rules, each applied to what the walk has considered:

   * *traffic*: drop variants whose modelled traffic is more than ``traffic_slack``
     percent above the fewest of a variant of the same program (scheduler candidate,
     host or device steps: :func:`~polygpu.search.explore.group_of`) that does not
     spill; the least-traffic tilings are often the largest register tiles, which
     spill, so the variant at the floor is built (ptxas) to know, and when it spills
     the floor moves up.  Per program, because the model's traffic compares tilings of
     one schedule well and different schedules least well (LU's second schedule models
     less traffic than the first and runs 14x slower: one floor for both pruned every
     variant of the first);
   * *spills*: drop variants whose registers spill to local memory;
   * *threads*: keep {T, T/2, T/4} threads per block, T the registers' limit;
   * *concurrency*: drop variants below ``min_concurrency`` of the best built;

   each rule comparing the variants of one program (the paper's rules are about one
   program's tilings; mv's one-kernel schedule was pruned whole for the concurrency of
   the other's two kernels), the survivors ordered by
   :func:`~polygpu.search.cost.model_order`, calibrated per program by the measurements
   so far (:meth:`~polygpu.search.explore.Explorer.calibrate`).
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from polygpu.errors import PolygpuError
from polygpu.search.explore import LOOKAHEAD, Explorer, Rules, group_of
from polygpu.search.pruning import (
    main_grid,
    prune_concurrency,
    prune_spills,
    prune_threads,
    prune_traffic,
    traffic_floor,
)

PLANS = 2  # of the model's ranked default plans, timed first


def select(pool, options):
    session = getattr(pool, "session", None)
    if session is None:
        raise PolygpuError("the model strategy compiles as it searches: run it through "
                           "polygpu.search.tuner.tune")
    return _search(pool, session, options)


select.pipelined = True  # type: ignore[attr-defined]  # never measures itself


def _search(pool, session, options):
    space = [c.variant for c in pool.at("unexplored")]
    in_space = {c.key for c in pool.at("unexplored")}
    left = session.budget_left()
    timed_first = PLANS if left is None else min(PLANS, left)
    # every plan the default ranked is costed: they seed the walk across the scheduler
    # candidates and block shapes; the best PLANS are timed first.  The model's own plan
    # is costed and handed out alone before the others are costed, so that costing
    # overlaps its measurement (the order is the same as costing all of them first)
    plans = session.plans()
    ranked: list = []
    handed: set[str] = set()
    for batch in (plans[:1], plans[1:]):
        ranked += [c for c in pool.sketch(batch) if c.stage == "kept"]
        first = [c for c in ranked[:timed_first] if c.key not in handed]
        for c in first:
            pool.set(replace(c, origin="plan"))
        pool.build(first)
        for c in first:
            handed.add(c.key)
            if pool.candidates[c.key].stage == "kept":
                yield pool.candidates[c.key]
    for c in ranked:
        if c.key not in handed and c.key not in in_space:  # the others are the space's
            pool.set(replace(c, origin="ranked"))
    yield from Explorer(pool, space, [pool.candidates[c.key] for c in ranked],
                        rules(pool, options), session.budget_left)


def rules(pool, options) -> Rules:
    """The paper's rules for an :class:`~polygpu.search.explore.Explorer`; a plan
    (outside the rules) seeds the walk only while its traffic would pass them."""
    floors: dict[tuple, int] = {}

    def apply(explorer) -> None:
        floors.clear()
        floors.update(_apply(explorer, pool, options))

    def seed(c) -> bool:
        least = floors.get(group_of(c.variant))
        return not c.origin or least is None or \
            prune_traffic(c, least, options.traffic_slack) is None

    return Rules(costed=apply, built=apply, seed=seed)


def _valid(c) -> bool:
    """Whether ``c`` takes part in the rules' comparisons: a variant of the space (the
    plans are outside the rules: the ones timed first are never pruned and set no
    bound, the others only seed the walk), costed, and not known to spill."""
    return not c.origin and c.traffic_bytes is not None and c.stage not in (
        "invalid", "duplicate", "pruned-spills", "unexplored") and not (
        c.registers is not None and c.spill_bytes)


def _floors(explorer, pool) -> dict[tuple, int]:
    """The traffic floor of each program (:func:`~polygpu.search.explore.group_of`): the
    fewest bytes of a considered variant of the space that does not spill (among the
    grids that give every SM a block).  A variant at a floor not built yet is built to
    know whether it spills (at most :data:`~polygpu.search.explore.LOOKAHEAD` at a time,
    within the walk's build allowance); one that does is pruned and its floor moves
    up.  The variants next above a floor are built with it, in one parallel batch: the
    least-traffic tilings are the largest register tiles, and they spill in a row (mm3 at
    EXTRALARGE: 7 of 11 floors, each built alone after the one before spilled)."""
    builds = 0
    while True:
        groups: dict[tuple, list] = {}
        for c in explorer.candidates():
            if _valid(c):
                groups.setdefault(group_of(c.variant), []).append(c)
        floors = {g: traffic_floor(cs, pool.limits) for g, cs in groups.items()}
        # per program, the unbuilt variants a floor may still move to, fewest bytes first
        # (up to the first one known not to spill), the programs taken in turn
        ladders = [_ladder(cs, explorer, pool.limits) for cs in groups.values()]
        unknown = [c for rung in itertools.zip_longest(*ladders) for c in rung
                   if c is not None]
        may = explorer.may_build()
        size = LOOKAHEAD - builds if may is None else min(may, LOOKAHEAD - builds)
        if not unknown or size <= 0:
            return floors
        explorer.build(unknown[:size], rules=False)
        builds += len(unknown[:size])
        for c in unknown[:size]:
            built = pool.candidates[c.key]
            if built.stage == "kept":
                pool.set(prune_spills(built) or built)


def _ladder(candidates: list, explorer, limits) -> list:
    """The variants of one program's ``candidates`` that its traffic floor may move
    through, fewest bytes first, until the first built one (which does not spill, being
    valid): those not built yet.  Only grids that give every SM a block, as the floor
    (:func:`~polygpu.search.pruning.traffic_floor`), unless none does."""
    filling = [c for c in candidates if main_grid(c) >= limits.multiprocessors]
    ladder = []
    for c in sorted(filling or candidates, key=lambda c: (c.traffic_bytes, c.key)):
        if explorer.is_built(c):
            break
        if c.stage == "kept":
            ladder.append(c)
    return ladder


def _apply(explorer, pool, options) -> dict[tuple, int]:
    """Every rule, in the paper's order, on each considered candidate of the space not
    measured yet, from scratch: what a rule pruned against an earlier floor or best is
    admitted again when it passes now (spills, invalid code and duplicates are final).
    The traffic floors it used."""
    floors = _floors(explorer, pool)
    open_ = ("kept", "pruned-traffic", "pruned-threads", "pruned-occupancy")
    todo = [c for c in explorer.candidates(*open_) if c.measurement is None and not c.origin]
    stage = {}
    for c in todo:  # traffic, then spills
        least = floors.get(group_of(c.variant))
        pruned = prune_traffic(c, least, options.traffic_slack) if least is not None \
            else None
        if pruned is None and explorer.is_built(c):
            pruned = prune_spills(c)
        stage[c.key] = pruned or replace(c, stage="kept", reason="")
    # what the rules so far leave of the space: measured ones and the survivors
    alive = [c for c in explorer.candidates() if _valid(c) and (
        c.measurement is not None or c.stage == "measuring")] \
        + [c for c in stage.values() if c.stage == "kept"]
    widest: dict[tuple, int] = {}  # each program's own largest block
    for c in alive:
        g = group_of(c.variant)
        widest[g] = max(widest.get(g, 0), c.threads)
    for key, c in stage.items():
        if c.stage == "kept" and explorer.is_built(c):
            stage[key] = prune_threads(c, widest[group_of(c.variant)], pool.limits) or c
    best: dict[tuple, float] = {}  # each program's best concurrency built
    for c in alive:
        if explorer.is_built(c) and stage.get(c.key, c).stage != "pruned-threads":
            g = group_of(c.variant)
            best[g] = max(best.get(g, 0.0), c.concurrency or 0.0)
    for key, c in stage.items():
        if c.stage == "kept" and explorer.is_built(c):
            stage[key] = prune_concurrency(c, best.get(group_of(c.variant), 0.0),
                                           options.min_concurrency) or c
    for key, c in stage.items():
        if c != pool.candidates[key]:
            pool.set(c)
    return floors
