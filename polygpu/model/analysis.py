"""Everything the model knows about one region, in one immutable bundle.

``analyze(scop)`` runs the model's analyses once, in dependency order
(dependences -> reductions -> loop parallelism -> reuse; bounds on the side); later
stages and the
``analyze`` report read the result instead of recomputing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import islpy as isl

from polygpu.model.atomic import combinable, relaxed_dependences
from polygpu.model.bounds import BoundsWarning, check_bounds
from polygpu.model.dependences import Dependences, compute_dependences
from polygpu.model.isl_util import memo_by_identity
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


@memo_by_identity(maxsize=64)
def step_parameters(an: Analysis) -> frozenset[str]:
    """The parameters that only count the steps of a sequential outermost loop -- a
    stencil's ``tsteps``: in every statement that uses one, each constraint naming it
    or the outermost iterator names no other iterator (every step has the same
    instances: not Cholesky's ``i``, which bounds the loops inside), that loop is the
    same for all of them and carries a dependence, and no array subscript uses it.

    Why: each step runs the same code, so a check needs a few steps, not the timed
    count; at PolyBench's heat-3d sizes (n = 200) the reference of 360 steps took 35 s a
    candidate.  A sequential loop is never a space dimension, so only its own tiles
    (``time_tile``) can make the code depend on its count."""
    sequential = {lp.loop for lp in an.loops if not lp.parallel and not lp.reduction}
    found = None
    for name in an.scop.parameters:
        loops = set()
        ok = True
        for st in an.scop.statements:
            k = st.domain.find_dim_by_name(isl.dim_type.param, name)
            if k < 0 or not st.domain.involves_dims(isl.dim_type.param, k, 1):
                continue
            if not st.loops or st.loops[0] not in sequential or \
                    not _only_outermost(st.domain, k, outermost=True) or any(
                        not _only_outermost(a.relation, k, a.relation.dim(isl.dim_type.out))
                        for a in st.accesses):
                ok = False
                break
            loops.add(st.loops[0])
        if ok and len(loops) == 1:
            found = (found or set()) | {name}
    return frozenset(found or ())


def _only_outermost(obj: isl.Set | isl.Map, param: int, outputs: int = 0,
                    outermost: bool = False) -> bool:
    """Every constraint of ``obj`` that names parameter ``param`` (or, with
    ``outermost``, the first set dimension) names no set (input) dimension but the
    first, and none of the ``outputs`` output dimensions."""
    is_map = isinstance(obj, isl.Map)
    ins = isl.dim_type.in_ if is_map else isl.dim_type.set
    for bset in obj.get_basic_maps() if is_map else obj.get_basic_sets():
        for c in bset.get_constraints():
            if c.get_coefficient_val(isl.dim_type.param, param).is_zero() and not (
                    outermost and not c.get_coefficient_val(ins, 0).is_zero()):
                continue
            n = bset.dim(ins)
            if any(not c.get_coefficient_val(ins, i).is_zero() for i in range(1, n)):
                return False
            if any(not c.get_coefficient_val(isl.dim_type.out, o).is_zero()
                   for o in range(outputs)):
                return False
    return True
