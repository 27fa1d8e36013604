"""Splitting fused kernels: a transformation's kernels cut at statement positions
(``Variant.splits``) -- the host-launched half of seed 003's fusion covers.

Why: the scheduler forms the fewest kernels it can (``algorithm1.UnitSearch.split``,
``distribution.fused``), so 3mm's two independent products become one kernel, every
thread computing an element of each with one tiling, twice the registers and shared
buffers of one product.  Whether that beats two launches is the model's and the
measurement's call, so fusing is a choice: a *split* at position ``p`` of the
statements (the kernels' statements in order, concatenated) ends a kernel before its
statement ``p``; each part keeps its statements' space and time maps, so coalescing and
the order inside a thread are unchanged, and the parts run as consecutive kernels (a
global barrier between them; in a device-steps program, a block barrier between steps
and with ``Variant.cuts`` separate launches).

A split is legal unless a dependence runs from a later part to an earlier one inside
the kernel (a statement of the second part feeding a later instance of the first):
the split transformation is proven against the region's dependences like any other,
and a split that breaks one is refused as bad input, with the dependence.

:func:`split_points` lists the positions a cover search tries: boundaries inside a
kernel between statements of different loop nests (splitting a nest's init from its
update gains nothing).
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import islpy as isl

from polygpu.errors import PolygpuError
from polygpu.model.analysis import Analysis
from polygpu.model.isl_util import maps_of, union_of
from polygpu.schedule.legality import transformation_schedule, violations
from polygpu.schedule.transformation import KernelSchedule, Transformation


def statement_order(tr: Transformation) -> tuple[str, ...]:
    """The statements of ``tr``'s kernels in order: what split positions count."""
    return tuple(s for k in tr.kernels for s in k.statements)


def split_points(an: Analysis, tr: Transformation) -> tuple[int, ...]:
    """Positions inside a kernel of ``tr`` where the statement before and the one after
    come from different loop nests of ``an``'s region (different outermost loops: a
    time loop around several nests makes them one)."""
    outer = {s.name: (s.loops[0] if s.loops else None) for s in an.scop.statements}
    points, position = [], 0
    for kernel in tr.kernels:
        for a, b in itertools.pairwise(kernel.statements):
            position += 1
            if outer.get(a) != outer.get(b) or outer.get(a) is None:
                points.append(position)
        position += 1
    return tuple(points)


def _part(kernel: KernelSchedule, names: tuple[str, ...]) -> KernelSchedule:
    """The kernel restricted to ``names`` (its maps, atomic and warp-uniform
    statements); the widths and reduction dimensions stay the kernel's."""
    keep = set(names)

    def restricted(umap):
        return union_of([m for m in maps_of(umap)
                         if m.get_tuple_name(isl.dim_type.in_) in keep], umap.get_space())

    return replace(kernel, statements=names, space=restricted(kernel.space),
                   time=restricted(kernel.time),
                   atomic=tuple(s for s in kernel.atomic if s in keep),
                   warp_uniform=tuple(s for s in kernel.warp_uniform if s in keep))


def split_kernels(an: Analysis, tr: Transformation, splits: tuple[int, ...]
                  ) -> Transformation:
    """``tr`` with its kernels cut before each statement position of ``splits``,
    proven against ``an``'s dependences; :class:`PolygpuError` for a position that is
    not inside a kernel or a split that breaks a dependence."""
    if not splits:
        return tr
    order = statement_order(tr)
    starts, position = set(), 0
    for kernel in tr.kernels:
        starts.add(position)
        position += len(kernel.statements)
    bad = [p for p in splits if p >= len(order) or p in starts]
    if bad:
        inside = [p for p in range(1, len(order)) if p not in starts]
        raise PolygpuError(f"variant: splits {list(splits)}: {bad[0]} is not inside a kernel "
                           f"(this plan's kernels can be split at "
                           f"{', '.join(map(str, inside)) or 'no position'}; position p "
                           f"ends a kernel before its statement p, counted over the "
                           f"kernels' statements {', '.join(order)})", an.scop.loc)
    kernels, position = [], 0
    for kernel in tr.kernels:
        names = kernel.statements
        cuts = [p - position for p in splits if position < p < position + len(names)]
        bounds = (0, *cuts, len(names))
        kernels += [_part(kernel, names[a:b]) if len(bounds) > 2 else kernel
                    for a, b in itertools.pairwise(bounds)]
        position += len(names)
    split = replace(tr, kernels=tuple(kernels),
                    origin=f"{tr.origin}, split at {', '.join(map(str, splits))}")
    broken = violations(an.dependences_with(split.atomic), transformation_schedule(split))
    if broken:
        what, pairs = broken[0]
        raise PolygpuError(f"variant: splits {list(splits)} would run a statement before "
                           f"one it depends on ({len(broken)} dependence(s) broken "
                           f"between the split kernels; e.g. the {what}: {pairs})",
                           an.scop.loc)
    return split
