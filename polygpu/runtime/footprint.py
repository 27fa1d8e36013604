"""Which array elements a region writes, and which of those it never reads first.

An element the region writes without reading its initial value first (``x`` in ``mv``,
set to 0 before it is accumulated) holds no information on entry: the generated code
must produce it.  The checker poisons exactly these elements (NaN) in the kernel's input,
so a kernel that forgets to write one, or reads it before writing it, cannot pass by luck.

Both sets are exact (isl), at the level of single elements:

* *written*: the union of the ranges of the write accesses;
* *live-in*: the elements some read sees with no earlier write in the original order
  (the reads with no source in isl's dataflow analysis, ``get_must_no_source``);
* *poisoned* = written - live-in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import islpy as isl
import numpy as np

from polygpu.errors import PolygpuError
from polygpu.model.dependences import coalesce
from polygpu.model.isl_util import sets_of
from polygpu.model.scop import Scop


@dataclass(frozen=True)
class ArrayFootprint:
    """Parametric sets of one argument array's elements, e.g. ``[n] -> { x[i] : ... }``."""

    written: isl.Set
    live_in: isl.Set

    @property
    def poisoned(self) -> isl.Set:
        return self.written.subtract(self.live_in)


def footprints(scop: Scop, params: Mapping[str, int] | None = None
               ) -> dict[str, ArrayFootprint]:
    """Written and live-in elements of every argument array of ``scop``; with
    ``params``, at those parameter values only (what a check needs: isl's dataflow on a
    strided, parametric nest took minutes, on the same nest at fixed sizes a second)."""
    point = None if params is None else parameter_point(scop.context, params)

    def fixed(x):
        return x if point is None else x.intersect_params(point)

    reads = fixed(scop.access_map("read"))
    writes = fixed(scop.access_map("write"))
    schedule = fixed(scop.schedule)
    try:
        flow = (
            isl.UnionAccessInfo.from_sink(reads)
            .set_must_source(writes)
            .set_schedule_map(schedule)
            .compute_flow()
        )
        live_in_elements = flow.get_must_no_source().range()
    except isl.Error:  # isl fails on some strided, disjunctive domains
        live_in_elements = _live_in_by_order(scop, writes, schedule, fixed)
    written = _by_array(writes.range())
    live_in = _by_array(live_in_elements)
    out = {}
    for a in scop.arrays:
        if a.kind != "argument":
            continue
        empty = isl.Set.empty(a.extent.get_space())
        out[a.name] = ArrayFootprint(
            written=coalesce(written.get(a.name, empty)),
            live_in=coalesce(live_in.get(a.name, empty)),
        )
    return out


def _live_in_by_order(scop: Scop, writes: isl.UnionMap,
                      schedule: isl.UnionMap | None = None,
                      fixed=lambda x: x) -> isl.UnionSet:
    """The elements some read takes from before the region, from first principles:
    per read reference (one element per instance), the instances that no write to
    their element precedes (``schedule``: the region's, restricted like ``writes``;
    ``fixed`` restricts a read to the parameters asked)."""
    schedule = scop.schedule if schedule is None else schedule
    earlier = schedule.lex_gt_union_map(schedule)  # instance -> instances before it
    result = isl.UnionSet.empty(scop.context.get_space())
    for a in scop.accesses:
        if a.kind != "read":
            continue
        read = fixed(isl.UnionMap.from_map(a.relation))
        sourced = read.apply_range(writes.reverse()).intersect(earlier).domain()
        result = result.union(read.subtract_domain(sourced).range())
    return result


def _by_array(uset: isl.UnionSet) -> dict[str, isl.Set]:
    return {s.get_tuple_name(): s for s in sets_of(uset)}


def _fixed_parameters(s: isl.Set, params: Mapping[str, int]) -> isl.Set:
    for k in range(s.dim(isl.dim_type.param)):
        name = s.get_dim_name(isl.dim_type.param, k)
        if name not in params:
            raise PolygpuError(f"missing parameter {name}; give it with -p {name}=VALUE")
        s = s.fix_val(isl.dim_type.param, k, isl.Val.int_from_si(s.get_ctx(), int(params[name])))
    return s


def parameter_point(context: isl.Set, params: Mapping[str, int]) -> isl.Set:
    """The parameter set holding only ``params`` (every parameter of ``context``)."""
    return _fixed_parameters(isl.Set.universe(context.get_space()), params)


def at_parameters(s: isl.Set, params: Mapping[str, int]) -> isl.Set:
    """``s`` with its parameters fixed to ``params`` and then removed."""
    return _fixed_parameters(s, params).project_out(isl.dim_type.param, 0,
                                                    s.dim(isl.dim_type.param))


def mask(s: isl.Set, params: Mapping[str, int], shape: tuple[int, ...]) -> np.ndarray:
    """A boolean array of ``shape``: True at the points of ``s`` (at ``params``).

    Points outside the array's extent (accesses the model reports as out of bounds) are
    dropped.  Empty sets, the whole array and every piece that is a box (a stencil's
    interior) are filled without enumerating points; only other pieces (triangles,
    strides) are enumerated.
    """
    s = coalesce(at_parameters(s, params))
    if s.is_empty():
        return np.zeros(shape, dtype=bool)
    box = isl.Set.universe(s.get_space())
    for k, extent in enumerate(shape):
        box = box.lower_bound_val(isl.dim_type.set, k, isl.Val.int_from_si(s.get_ctx(), 0))
        box = box.upper_bound_val(
            isl.dim_type.set, k, isl.Val.int_from_si(s.get_ctx(), extent - 1)
        )
    s = s.intersect(box)
    if s.is_equal(box):
        return np.ones(shape, dtype=bool)
    result = np.zeros(shape, dtype=bool)
    rank = len(shape)
    points: list[tuple[int, ...]] = []  # of the pieces that are not boxes

    def add(p: isl.Point) -> None:
        points.append(tuple(p.get_coordinate_val(isl.dim_type.set, k).to_python()
                            for k in range(rank)))

    for piece in s.get_basic_sets():
        piece = isl.Set.from_basic_set(piece)
        bounds = _box_bounds(piece, rank)
        if bounds is not None:  # a stencil's interior: one slice, not n^3 points
            result[tuple(slice(lo, hi + 1) for lo, hi in bounds)] = True
            continue
        piece.foreach_point(add)
    if points:
        result[tuple(np.array(points).T)] = True
    return result


def _box_bounds(s: isl.Set, rank: int) -> list[tuple[int, int]] | None:
    """Per dimension, the least and greatest coordinate of the non-empty, parameter-free
    ``s`` when ``s`` is exactly the box they span (else None)."""
    if s.is_empty():
        return None
    bounds = []
    box = isl.Set.universe(s.get_space())
    for k in range(rank):
        lo, hi = s.dim_min_val(k), s.dim_max_val(k)
        if not (lo.is_int() and hi.is_int()):
            return None
        bounds.append((lo.to_python(), hi.to_python()))
        box = box.lower_bound_val(isl.dim_type.set, k, lo).upper_bound_val(
            isl.dim_type.set, k, hi)
    return bounds if box.is_equal(s) else None
