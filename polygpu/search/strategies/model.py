"""``model``: the paper's pruned search (§6), survivors cheapest predicted first.

1. *traffic*: drop variants whose modelled traffic is more than ``traffic_slack``
   percent above the fewest of a variant that does not spill; the least-traffic tilings
   are often the largest register tiles, which spill, so when they do the floor moves
   up and the oracle builds the newly admitted, until it holds still;
2. *spills*: drop variants whose registers spill to local memory;
3. *threads*: keep {T, T/2, T/4} threads per block, T the registers' limit;
4. *concurrency*: drop variants below ``min_concurrency`` of the best;

then order by :func:`~polygpu.search.cost.model_order`.
"""

from __future__ import annotations

from dataclasses import replace

from polygpu.search.cost import model_order
from polygpu.search.pruning import (
    prune_concurrency,
    prune_spills,
    prune_threads,
    prune_traffic,
    traffic_floor,
)


def select(pool, options) -> list:
    if pool.at("kept"):
        _prune_traffic_and_spills(pool, options)
    else:
        pool.build([])
    kept = pool.at("kept")
    if not kept:
        return kept
    widest = max(c.threads for c in kept)  # the space's own largest block
    for c in kept:
        pool.set(prune_threads(c, widest, pool.limits) or c)
    kept = pool.at("kept")
    best = max((c.concurrency for c in kept), default=0.0)
    for c in kept:
        pool.set(prune_concurrency(c, best, options.min_concurrency) or c)
    return sorted(pool.at("kept"), key=lambda c: model_order(c, pool.limits))


def _prune_traffic_and_spills(pool, options) -> None:
    least = None
    while True:
        unbuilt = [c for c in pool.at("kept", "pruned-traffic") if c.registers is None]
        built_ok = [c for c in pool.at("kept") if c.registers is not None]
        floor = traffic_floor(built_ok + unbuilt, pool.limits)
        if floor is None or floor == least:
            return
        least = floor
        for c in unbuilt:
            pool.set(prune_traffic(c, least, options.traffic_slack)
                     or replace(c, stage="kept", reason=""))
        batch = [c for c in pool.at("kept") if c.registers is None]
        pool.build(batch)
        for c in batch:
            built = pool.candidates[c.key]
            if built.stage == "kept":
                pool.set(prune_spills(built) or built)

