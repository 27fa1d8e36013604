"""``random``: every distinct variant that compiles, in an order drawn from the seed
(with ``--budget``, a seeded random sample: only the sample is compiled)."""

from __future__ import annotations

import random

from polygpu.search.strategies.exhaustive import walk


def select(pool, options):
    keys = [c.key for c in pool.at("unexplored")]
    random.Random(options.seed).shuffle(keys)
    return walk(pool, keys)


select.pipelined = True  # type: ignore[attr-defined]  # never measures itself
