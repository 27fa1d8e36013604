"""Everything the model knows about one region, in one immutable bundle.

``analyze(scop)`` runs the model's analyses once, in dependency order
(dependences -> reductions -> loop parallelism -> reuse; bounds on the side); later
stages and the
``analyze`` report read the result instead of recomputing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from polygpu.model.atomic import combinable, relaxed_dependences
from polygpu.model.bounds import BoundsWarning, check_bounds
from polygpu.model.dependences import Dependences, compute_dependences
from polygpu.model.parallelism import (
    LoopParallelism,
    Reduction,
    find_reductions,
    loop_parallelism,
)
from polygpu.model.reuse import ReuseInfo, analyze_reuse
from polygpu.model.scop import Scop


@dataclass(frozen=True)
class Analysis:
    scop: Scop
    dependences: Dependences
    reductions: tuple[Reduction, ...]
    loops: tuple[LoopParallelism, ...]
    reuse: tuple[ReuseInfo, ...]
    # accesses that may leave their arrays, for ``analyze`` (compile and check refuse
    # the certain ones and those outside at the given sizes: bounds.require_in_bounds)
    warnings: tuple[BoundsWarning, ...]
    # sum reductions whose reduction loops may be parallel with atomic combining
    # (statement -> reduction; :mod:`polygpu.model.atomic`)
    combinable: dict[str, Reduction]
    # relaxed dependences per atomic set: the scheduler asks for the same few sets
    # hundreds of times (a cache of derived values; the bundle's fields never change)
    _relaxed: dict = field(default_factory=dict, compare=False, repr=False)

    def dependences_with(self, atomic) -> Dependences:
        """The dependences a schedule must respect when the statements ``atomic``
        combine their updates atomically (none: the exact dependences)."""
        key = frozenset(atomic)
        if key not in self._relaxed:
            self._relaxed[key] = relaxed_dependences(self.scop, self.dependences,
                                                     self.combinable, key)
        return self._relaxed[key]

    def reuse_of(self, statement: str, ref: int) -> ReuseInfo:
        for r in self.reuse:
            if r.statement == statement and r.ref == ref:
                return r
        raise KeyError((statement, ref))


def analyze(scop: Scop, dependences: Dependences | None = None) -> Analysis:
    """The analyses of ``scop``; ``dependences``: its exact dependences where a
    transformation already knows them (``transform/split.py`` derives a split
    program's from the original's, proven), else computed here."""
    deps = dependences if dependences is not None else compute_dependences(scop)
    reductions = find_reductions(scop, deps)
    loops = loop_parallelism(scop, deps, reductions)
    return Analysis(
        scop=scop,
        dependences=deps,
        reductions=reductions,
        loops=loops,
        reuse=analyze_reuse(scop, loops),
        warnings=check_bounds(scop),
        combinable=combinable(scop, reductions),
    )
