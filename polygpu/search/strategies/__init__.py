"""The search strategies, by name: what :func:`~polygpu.search.tuner.tune` times, in
which order.

A strategy is a function ``(pool, options) -> candidates to time, in order``: a list,
or an iterator the tuner draws from one candidate at a time (each counted against the
budget before it asks for the next, so a strategy can read the budget left).  A
strategy marked ``pipelined`` (one that never measures inside its walk) is drawn from
while the previous candidate is being measured, so its CPU work overlaps the GPU's;
the measurements still run one at a time, in order.  It gets a
:class:`~polygpu.search.tuner.SearchPool` whose candidates are the space's variants,
not costed yet (stage ``unexplored``); it costs them (``pool.sketch``: the model's
numbers without code), builds them (``pool.build``: code, then the resource oracle),
marks the ones it drops, and hands over the kept ones.  The budget, the database and
the measurements are the tuner's, the same for all.  ``model`` and ``per-kernel`` walk
the space lazily (:mod:`polygpu.search.explore`); ``exhaustive`` and ``random`` build
only what they are about to time.  ``polygpu tune --strategy`` and
``polygpu.optimize(strategy=...)`` offer exactly the names of :data:`STRATEGIES`.  A
strategy that measures as it searches (``per-kernel``) does so through the pool's
session, and says what the tuner puts in the pool first by a ``first_space`` attribute
(``session -> variants``; default: the whole space).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Protocol

from polygpu.search.strategies import exhaustive, model, per_kernel, random_order

if TYPE_CHECKING:
    from polygpu.search.candidate import Candidate
    from polygpu.search.pool import Pool
    from polygpu.search.tuner import TuneOptions


class Strategy(Protocol):
    def __call__(self, pool: Pool, options: TuneOptions) -> Iterable[Candidate]: ...


STRATEGIES: Mapping[str, Strategy] = {
    # the paper's: the default's plans first, then prune by traffic and occupancy,
    # cheapest first, walking the space lazily
    "model": model.select,
    "exhaustive": exhaustive.select,  # every distinct valid variant, in space order
    "random": random_order.select,  # every one, in a seeded random order
    # the model's plan, then its kernels tuned one at a time by their own launch times
    "per-kernel": per_kernel.select,
}
