"""The search strategies, by name: what :func:`~polygpu.search.tuner.tune` times, in
which order.

A strategy is a function ``(pool, options) -> list[Candidate]``: it gets every compiled,
distinct candidate at stage ``kept`` in a :class:`~polygpu.search.pool.Pool`, has the
oracle build (some of) them, marks the ones it drops, and returns the kept ones in the
order to time them.  The budget, the database and the measurements are the tuner's,
the same for all.  ``polygpu tune --strategy`` and ``polygpu.optimize(strategy=...)``
offer exactly the names of :data:`STRATEGIES`.  A strategy that measures as it searches
(``per-kernel``) does so through the pool's session (:class:`~polygpu.search.tuner.
SearchPool`), and says what the tuner compiles before it runs by a ``first_space``
attribute (``session -> variants``; default: the whole space).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from polygpu.search.strategies import exhaustive, model, per_kernel, random_order

if TYPE_CHECKING:
    from polygpu.search.candidate import Candidate
    from polygpu.search.pool import Pool
    from polygpu.search.tuner import TuneOptions


class Strategy(Protocol):
    def __call__(self, pool: Pool, options: TuneOptions) -> list[Candidate]: ...


STRATEGIES: Mapping[str, Strategy] = {
    "model": model.select,  # the paper's: prune by traffic and occupancy, cheapest first
    "exhaustive": exhaustive.select,  # every distinct valid variant, in space order
    "random": random_order.select,  # every one, in a seeded random order
    # the model's plan, then its kernels tuned one at a time by their own launch times
    "per-kernel": per_kernel.select,
}
