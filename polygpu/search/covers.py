"""Fusion covers (seed 003): which nests share a kernel, and which kernels of a fused
batch share a launch.

A ``fused batch`` plan (:mod:`polygpu.schedule.host`) runs all of an element's nests in
one block, its intermediates resident in shared memory.  That is not always best: a
block as wide as the widest nest leaves threads idle in the narrow ones, every nest
shares the block's shared memory (fewer elements resident at once), and one slow nest
holds the others' data.  A *cover* splits the program's kernels, in order, into
consecutive launches (``Variant.cuts``): each launch a device-steps block of its own,
with its own threads and resident buffers, what crosses a cut passing through global
memory.  Covers run from one launch of everything to one launch per kernel (the
unfused program, every intermediate in DRAM).

The search is exact over covers: the model prices each launch by its own kernels
(:func:`polygpu.search.plan_model.estimate`'s ``parts``: a launch's threads, residence,
contraction and traffic depend only on which kernels it runs, and on which arrays
others touch -- fixed by the launch itself), so a cover's seconds are the sum of its
launches', and a dynamic program over the cut positions keeps the ``top`` best covers
ending at each kernel -- the paper's restart alternatives as the next-best covers.
Each launch ``[a, b)`` is priced once, from the plan cut at ``a`` and ``b``
(``K (K + 1) / 2`` plans for ``K`` kernels), and every plan priced is compiled and
proven as any device-steps plan (a cut through a step loop is refused there).  The
cuts run over the batch's kernels split at every nest boundary (``Variant.splits``,
:mod:`polygpu.schedule.splits`), so a launch may end between nests the scheduler had
put in one kernel (the chain's ``M2``, ``M3`` and ``F``); the plan as scheduled, one
launch of its unsplit kernels, is ranked beside them.

Launched (host) programs have the same choice one level up: nests the scheduler fused
into one kernel (3mm's two independent products) may run as consecutive kernels, each
tiled on its own.  :func:`rank_splits` prices every set of split points (each plan in
full: a launched program's seconds are its launches' and the points are few), the
plan as scheduled among them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import replace

from polygpu.errors import PolygpuError
from polygpu.pipeline import Prepared, launch_residences, plan_variant
from polygpu.schedule.splits import split_points
from polygpu.schedule.variant import Variant
from polygpu.search.occupancy import SM_90, Limits
from polygpu.search.plan_model import PlanEstimate, estimate

TOP_COVERS = 8  # covers the ranking keeps per plan (the best first)
# split points priced in every combination (7 plans); beyond, each alone and all
MAX_SPLIT_POINTS = 3


def fused(prepared: Prepared, variant: Variant) -> bool:
    """Whether ``variant`` is a fused batch's device-steps plan of one launch, whose
    covers are worth searching."""
    if variant.cuts or variant.candidate >= len(prepared.candidates) or variant.relayout \
            or variant.recursion:
        return False
    tr = prepared.candidates[variant.candidate]
    return tr.host is not None and tr.host.kind == "fused batch" and (
        len(tr.kernels) > 1 or bool(split_points(prepared.analysis, tr)))


def splittable(prepared: Prepared, variant: Variant) -> tuple[int, ...]:
    """The split points (:func:`~polygpu.schedule.splits.split_points`) of a launched
    plan as scheduled, whose splits are worth searching; () for others."""
    if variant.splits or variant.device_steps or variant.relayout or variant.recursion \
            or variant.candidate >= len(prepared.candidates):
        return ()
    tr = prepared.candidates[variant.candidate]
    if tr.host is not None and tr.host.grid_dims:
        return ()  # a batch runs its steps on the device: rank_covers' plans
    return split_points(prepared.analysis, tr)


def split_sets(points: tuple[int, ...]) -> list[tuple[int, ...]]:
    """The sets of ``points`` to price: all of them, fewest points first, up to
    :data:`MAX_SPLIT_POINTS` points; beyond, each point alone and all together."""
    if len(points) > MAX_SPLIT_POINTS:
        return [(p,) for p in points] + [points]
    return [c for r in range(1, len(points) + 1)
            for c in itertools.combinations(points, r)]


def rank_splits(prepared: Prepared, variant: Variant, params: Mapping[str, int],
                limits: Limits = SM_90, top: int = TOP_COVERS,
                whole: PlanEstimate | None = None) -> list[PlanEstimate]:
    """The ``top`` best plans of ``variant`` (a :func:`splittable` plan) with its fused
    nests split, the plan as scheduled among them, best first; plans the model or the
    prover refuses are left out.  ``whole``: the unsplit plan's estimate where the
    caller has it."""
    if whole is None:
        whole = estimate(prepared, variant, params, limits)
    ranked = [whole] + [estimate(prepared, replace(variant, splits=s), params, limits)
                        for s in split_sets(splittable(prepared, variant))]
    return sorted((e for e in ranked if math.isfinite(e.seconds)),
                  key=lambda e: e.seconds)[:top]


def rank_covers(prepared: Prepared, variant: Variant, params: Mapping[str, int],
                limits: Limits = SM_90, top: int = TOP_COVERS,
                whole: PlanEstimate | None = None) -> list[PlanEstimate]:
    """The ``top`` best covers of ``variant``'s kernels (a :func:`fused` plan), best
    first, each as the estimate of the plan with its cuts: its launches' seconds added
    from each launch's price (module doc) -- over the kernels as scheduled and over
    them split at every nest boundary.  Covers with a launch the model or the prover
    refuses are left out; the one-launch plan is among them where it ranks.
    ``whole``: the one-launch plan's estimate where the caller has it (``choose``)."""
    if whole is None:
        whole = estimate(prepared, variant, params, limits)
    if not math.isfinite(whole.seconds):
        return [whole]
    variant = whole.variant  # (as the model adjusted it)
    ranked = _cut_covers(prepared, variant, params, limits, top, whole)
    points = () if variant.splits else split_points(
        prepared.analysis, prepared.candidates[variant.candidate])
    if points:
        finest = replace(variant, splits=points)
        try:
            ranked += [e for e in _cut_covers(prepared, finest, params, limits, top, None)
                       if e.variant != finest]  # (one launch of the split kernels: the
            # plan above with more barriers)
        except PolygpuError:
            pass  # a split through a dependence: the covers of the kernels as scheduled
    return sorted((e for e in ranked if math.isfinite(e.seconds)),
                  key=lambda e: e.seconds)[:top]


def _cut_covers(prepared: Prepared, variant: Variant, params: Mapping[str, int],
                limits: Limits, top: int, whole: PlanEstimate | None
                ) -> list[PlanEstimate]:
    """The ``top`` best cuts of ``variant``'s kernels into launches, by the dynamic
    program of the module doc; ``whole``: the one-launch plan's estimate, if known."""
    from polygpu.search.plan_model import (
        device_steps_estimate,
        launch_costs,
        resident_arrays,
        sketch,
    )

    # one tiling and placement and one count of its launches for every cut: cuts change
    # only which kernels share a block (proven, and resident, per launch below)
    planned = plan_variant(prepared, variant, params)
    twin = sketch(prepared, variant)
    n = len(planned.kernels)
    # the twin's costs for each set of resident arrays a cut leaves (their reads are
    # shared loads: plan_model.estimate prices the one-launch plan so)
    counted: dict[tuple, tuple] = {}

    def costs_of(cut: Variant, residences) -> tuple:
        resident = resident_arrays(cut, n, residences)
        key = tuple(sorted((k, tuple(sorted(a))) for k, a in resident.items()))
        if key not in counted:
            counted[key] = launch_costs(twin, params, limits, resident_arrays=resident)
        return counted[key]

    priced: dict[tuple[int, ...], PlanEstimate] = {} if whole is None else {(): whole}

    def plan(cuts: tuple[int, ...]) -> PlanEstimate:
        if cuts not in priced:
            cut = replace(variant, cuts=cuts)
            try:
                residences = launch_residences(planned, cuts, params)
            except PolygpuError as e:
                priced[cuts] = PlanEstimate(cut, math.inf, 0, "", str(e).splitlines()[0])
            else:
                priced[cuts] = device_steps_estimate(twin, cut, costs_of(cut, residences),
                                                     residences, params, limits)
        return priced[cuts]

    def launch(a: int, b: int) -> float:
        """Seconds of one launch of kernels a..b-1, from the plan cut around it."""
        cuts = tuple(k for k in (a, b) if 0 < k < n)
        e = plan(cuts)
        if not math.isfinite(e.seconds):
            return math.inf
        return e.parts[1 if a > 0 else 0]

    # best[b]: the top covers of kernels 0..b-1, as (seconds, cuts), best first
    best: list[list[tuple[float, tuple[int, ...]]]] = [[(0.0, ())]]
    for b in range(1, n + 1):
        ending = []
        for a in range(b):
            seconds = launch(a, b)
            if math.isfinite(seconds):
                ending += [(s + seconds, cuts + ((a,) if a else ())) for s, cuts in best[a]]
        best.append(sorted(ending)[:top])
    # each cover priced whole (proven: a cover's cuts are each proven above, and
    # together here), its seconds the sum the dynamic program ranked it by
    return [plan(cuts) for _, cuts in best[n]]
