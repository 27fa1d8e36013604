"""``exhaustive``: every distinct variant that compiles, in the space's order."""

from __future__ import annotations


def select(pool, options) -> list:
    pool.build(pool.at("kept"))
    return pool.at("kept")
