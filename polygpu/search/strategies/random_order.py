"""``random``: every distinct variant that compiles, in an order drawn from the seed
(with ``--budget``, a seeded random sample)."""

from __future__ import annotations

import random


def select(pool, options) -> list:
    pool.build(pool.at("kept"))
    kept = pool.at("kept")
    random.Random(options.seed).shuffle(kept)
    return kept
