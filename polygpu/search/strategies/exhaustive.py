"""``exhaustive``: every distinct variant that compiles, in the space's order."""

from __future__ import annotations

from polygpu.search.explore import LOOKAHEAD


def select(pool, options):
    return walk(pool, [c.key for c in pool.at("unexplored")])


select.pipelined = True  # type: ignore[attr-defined]  # never measures itself


def walk(pool, keys: list[str]):
    """The candidates of ``keys`` in that order, each costed and built only when it is
    about to be timed (:data:`~polygpu.search.explore.LOOKAHEAD` at a time), invalid ones
    and duplicates skipped; without a budget all of them at once."""
    session = pool.session
    while keys:
        left = session.budget_left()
        if left == 0:
            return
        size = len(keys) if left is None else min(LOOKAHEAD, left)
        batch, keys = keys[:size], keys[size:]
        found = [c for c in pool.sketch([pool.candidates[k].variant for k in batch])
                 if c.stage == "kept"]
        pool.build(found)
        for c in found:
            if pool.candidates[c.key].stage == "kept":
                yield pool.candidates[c.key]
