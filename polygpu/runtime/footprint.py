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
from polygpu.model.isl_util import sets_of, unsourced_reads
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
        result = result.union(unsourced_reads(read, writes, earlier).range())
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
    interior) are filled without enumerating points, and so is every other piece without
    existentially quantified variables (a triangle: row by row, :func:`_fill_rows`);
    only pieces with them (strides) are enumerated point by point -- syrk's written
    triangle at n = 2600, 3.4 million points, took 11 s that way.
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
        if not _fill_rows(piece, result):
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


def _fill_rows(s: isl.Set, result: np.ndarray) -> bool:
    """Set the points of ``s`` (one parameter-free basic set, inside ``result``'s shape)
    in ``result``, row by row, and say True; False, doing nothing, when ``s`` has
    existentially quantified variables.  Without them ``s`` is the integer points of a
    polyhedron ``{x : a.x + c >= 0, b.x + d = 0}``, so along the last dimension each row
    (the other coordinates fixed) holds one interval, whose ends every constraint bounds
    directly: evaluated with NumPy on the whole grid of rows in ``s``'s bounding box."""
    (basic,) = s.get_basic_sets()
    if basic.dim(isl.dim_type.div):
        return False
    rank = result.ndim
    spans = []
    for k in range(rank - 1):
        lo, hi = s.dim_min_val(k), s.dim_max_val(k)
        if not (lo.is_int() and hi.is_int()):
            return False
        spans.append((lo.to_python(), hi.to_python()))
    grid = np.meshgrid(*(np.arange(lo, hi + 1, dtype=np.int64) for lo, hi in spans),
                       indexing="ij")
    outer = [g.reshape(-1) for g in grid] if grid else []
    rows = outer[0].size if outer else 1
    first = np.zeros(rows, dtype=np.int64)
    last = np.full(rows, result.shape[-1] - 1, dtype=np.int64)
    keep = np.ones(rows, dtype=bool)
    for c in basic.get_constraints():
        coefficient = [c.get_coefficient_val(isl.dim_type.set, k).to_python()
                       for k in range(rank)]
        rest = np.full(rows, c.get_constant_val().to_python(), dtype=np.int64)
        for k in range(rank - 1):
            if coefficient[k]:
                rest += coefficient[k] * outer[k]
        a = coefficient[-1]
        if a == 0:
            keep &= rest == 0 if c.is_equality() else rest >= 0
        elif c.is_equality():  # a x + rest = 0
            keep &= rest % a == 0
            first = np.maximum(first, -rest // a)
            last = np.minimum(last, -rest // a)
        elif a > 0:  # x >= ceil(-rest / a)
            first = np.maximum(first, -(rest // a))
        else:  # x <= floor(rest / -a)
            last = np.minimum(last, rest // -a)
    columns = np.arange(result.shape[-1], dtype=np.int64)
    inside = keep[:, None] & (columns >= first[:, None]) & (columns <= last[:, None])
    window = tuple(slice(lo, hi + 1) for lo, hi in spans)
    result[window] |= inside.reshape(result[window].shape)
    return True
