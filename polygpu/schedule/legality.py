"""Proving a GPU schedule legal against the exact dependences, with isl.

A GPU execution schedule maps every statement instance to a point ``[d0, ..., dn]``
whose dimensions have one of these kinds, in this order:

* ``global`` -- sequential with a global barrier between values: the kernel index,
  host loops that launch kernels;
* ``block`` -- pick the executing thread block, in kernels with barriers;
* ``barrier`` -- sequential loops that every thread of a block runs alike, with
  ``__syncthreads()`` between consecutive values: the phases of a kernel, a time or
  pivot loop run on the device;
* ``parallel`` and ``local`` (in any interleaving) -- ``parallel`` dimensions pick the
  executing block or thread (without ``barrier`` dimensions the two are alike), ``local``
  ones order the instances one thread executes.

Instance ``x`` is guaranteed to run before ``y`` exactly when a ``global`` dimension
separates them (equal before it, ``x`` smaller at it); or when they agree on all
``global`` and ``block`` dimensions (same block) and a ``barrier`` dimension separates
them; or when they agree on all ``global``, ``block``, ``barrier`` and ``parallel``
dimensions (same thread, same phase) and ``x`` is lexicographically before ``y`` on the
``local`` ones.  So a dependence may cross threads inside a kernel only if it stays in
one block and a barrier lies between its ends; one that crosses blocks needs a kernel
boundary.  A schedule is legal when that holds for every
dependence pair; the check works on the dependence distances (isl ``deltas``), so it
is exact and parametric.  An illegal schedule is a polygpu bug, never output.
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from polygpu.model.dependences import Dependences, maps_of, union_of
from polygpu.model.isl_util import memo_by_text
from polygpu.schedule.transformation import Transformation

KINDS = ("global", "block", "barrier", "parallel", "local")


class LegalityError(Exception):
    """A schedule polygpu built violates a dependence: a bug in polygpu."""


@dataclass(frozen=True)
class ExecutionSchedule:
    """Statement instances -> execution points, and the kind of each point dimension."""

    schedule: isl.UnionMap
    kinds: tuple[str, ...]

    def __post_init__(self):
        rank = {"global": 0, "block": 1, "barrier": 2, "parallel": 3, "local": 3}
        if any(k not in KINDS for k in self.kinds) or [rank[k] for k in self.kinds] != sorted(
                rank[k] for k in self.kinds):
            raise ValueError(f"bad dimension kinds {self.kinds}: global, block and barrier "
                             "ones come first, in this order")


def _orders(kinds: tuple[str, ...]) -> isl.Set:
    """The distances ``y - x`` for which ``x`` surely runs before ``y``."""
    names = [f"d{k}" for k in range(len(kinds))]
    space = isl.Space.create_from_names(isl.DEFAULT_CONTEXT, set=names)
    ls = isl.LocalSpace.from_space(space)

    def dim(k):
        return isl.PwAff.from_aff(isl.Aff.var_on_domain(ls, isl.dim_type.set, k))

    zero = isl.PwAff.from_aff(isl.Aff.zero_on_domain(ls))
    universe = isl.Set.universe(space)

    def equal(dims):
        s = universe
        for k in dims:
            s = s.intersect(dim(k).eq_set(zero))
        return s

    good = isl.Set.empty(space)
    globals_ = [k for k, kind in enumerate(kinds) if kind == "global"]
    for pos, k in enumerate(globals_):
        good = good.union(equal(globals_[:pos]).intersect(dim(k).gt_set(zero)))
    same_block = equal(globals_ + [k for k, kind in enumerate(kinds) if kind == "block"])
    barriers = [k for k, kind in enumerate(kinds) if kind == "barrier"]
    for pos, k in enumerate(barriers):
        good = good.union(same_block.intersect(equal(barriers[:pos]))
                          .intersect(dim(k).gt_set(zero)))
    same_thread = equal([k for k, kind in enumerate(kinds) if kind != "local"])
    local = [k for k, kind in enumerate(kinds) if kind == "local"]
    for pos, k in enumerate(local):
        good = good.union(same_thread.intersect(equal(local[:pos]))
                          .intersect(dim(k).gt_set(zero)))
    return good


def violations(deps: Dependences, es: ExecutionSchedule) -> list[tuple[str, isl.Map]]:
    """The dependences ``es`` does not respect, each with its violating part."""
    good = _orders(es.kinds)
    return [(f"{d.kind} dependence {d.source} -> {d.sink} on {d.array}", d.relation)
            for d in _violated(list(deps.items), es.schedule, good)]


def _violated(items: list, schedule: isl.UnionMap, good: isl.Set) -> list:
    """The items of ``items`` (dependences) whose distances under ``schedule`` leave
    ``good``, in their order."""
    bad = _violating(tuple(d.relation for d in items), schedule, good)
    return [items[k] for k in bad]


@memo_by_text(maxsize=512)
def _violating(relations: tuple, schedule: isl.UnionMap, good: isl.Set) -> tuple[int, ...]:
    """The positions in ``relations`` whose distances under ``schedule`` leave ``good``.
    A group is judged at once (the distances of a union are the union of the
    distances: the same verdict) and halved only where it fails, so a legal schedule
    costs one check and a few bad dependences a few each.  By text: a variant's
    schedule is proven when it is costed, when its program is built and again for its
    check's program, each time rebuilt."""
    return tuple(_violating_from(relations, 0, schedule, good))


def _violating_from(relations: tuple, start: int, schedule: isl.UnionMap, good: isl.Set
                    ) -> list[int]:
    rel = union_of(relations, schedule.get_space())
    pairs = rel.apply_domain(schedule).apply_range(schedule)
    if pairs.is_empty():
        return []
    deltas = pairs.deltas()
    if deltas.n_set() == 1 or len(relations) == 1:
        distances = isl.Set.from_union_set(deltas)
        # is_subset: the same verdict as subtract(good).is_empty(), but isl checks it
        # piece by piece instead of building the difference (100x faster on tilings)
        if distances.is_subset(good.align_params(distances.get_space())):
            return []
        if len(relations) == 1:
            return [start]
    half = len(relations) // 2
    return (_violating_from(relations[:half], start, schedule, good)
            + _violating_from(relations[half:], start + half, schedule, good))


def prove_legal(deps: Dependences, es: ExecutionSchedule) -> None:
    """Raise :class:`LegalityError` unless ``es`` respects every dependence."""
    bad = violations(deps, es)
    if bad:
        what = "; ".join(f"{name} ({rel})" for name, rel in bad)
        raise LegalityError(f"internal error: the schedule violates {len(bad)} "
                            f"dependence(s): {what}; this is a bug in polygpu, no code "
                            "was emitted")


def insert_constants(m: isl.Map, pos: int, values) -> isl.Map:
    """``m`` with output dimensions fixed to ``values`` inserted at ``pos``."""
    values = list(values)
    m = m.insert_dims(isl.dim_type.out, pos, len(values))
    for k, value in enumerate(values):
        m = m.fix_val(isl.dim_type.out, pos + k, isl.Val(value))
    return m


def _padded(umap: isl.UnionMap, width: int, prefix: list[int]) -> isl.UnionMap:
    """Each map of ``umap`` with constant ``prefix`` dims before and zeros after, so
    that all have ``len(prefix) + width`` output dimensions."""
    result = isl.UnionMap.empty(umap.get_space())
    for m in maps_of(umap):
        zeros = [0] * (width - m.dim(isl.dim_type.out))
        m = insert_constants(m, 0, prefix)
        m = insert_constants(m, m.dim(isl.dim_type.out), zeros)
        result = result.union(isl.UnionMap.from_map(m.reset_tuple_id(isl.dim_type.out)))
    return result


def transformation_schedule(tr: Transformation) -> ExecutionSchedule:
    """``S -> [kernel, p0..pk, t0..tm]``: what a transformation means on the GPU
    before tiling (kernels in order, one thread per space point); with host loops
    ``S -> [h.., kernel, p0..pk, t0..tm]``, every host dimension a global barrier."""
    n_space = max(k.n_space for k in tr.kernels)
    n_time = max(k.n_time for k in tr.kernels)
    schedule = union_of(
        _padded(kernel.space, n_space, [index]).flat_range_product(
            _padded(kernel.time, n_time, []))
        for index, kernel in enumerate(tr.kernels))
    kinds = ("global",) + ("parallel",) * n_space + ("local",) * n_time
    if tr.host is not None:
        schedule = _with_host(tr, schedule)
        kinds = ("global",) * len(tr.host.names) + kinds
    return ExecutionSchedule(schedule, kinds)


def without_host_parameters(m: isl.Map, names) -> isl.Map:
    """``m`` (defined on a step's domain, where ``H(x) = names``) for all steps: the
    host iterators are functions of the instance there, so projecting them out of
    the parameters is exact."""
    for name in names:
        k = m.find_dim_by_name(isl.dim_type.param, name)
        if k >= 0:
            m = m.project_out(isl.dim_type.param, k, 1)
    return m


def _with_host(tr: Transformation, schedule: isl.UnionMap) -> isl.UnionMap:
    """``schedule`` (of the step region) preceded by the host dimensions, for every
    step at once: the proof then covers dependences within and across steps."""
    domains = {s.name: s.domain for s in tr.step.scop.statements}
    result = []
    for m in maps_of(schedule):
        name = m.get_tuple_name(isl.dim_type.in_)
        m = without_host_parameters(m.intersect_domain(domains[name]), tr.host.names)
        h = tr.host.of(name)
        h = h.align_params(m.get_space())
        m = m.align_params(h.get_space())
        result.append(h.flat_range_product(m).reset_tuple_id(isl.dim_type.out))
    return union_of(result)
