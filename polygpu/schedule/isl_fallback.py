"""Fallback when Algorithm 1 coalesces nothing: isl's own scheduler (Pluto-like).

isl computes a schedule tree with every dependence as validity, coincidence and
proximity constraint.  Its outermost band is the loop nest isl found parallelism in:
the band members marked *coincident* carry no dependence, so they become the space
dimensions (the one coalescing the most references innermost, the others in band
order); everything else -- the band's other members and the subtree below it -- is
the time schedule.  Same-thread instances agree on the space dimensions, so the
remaining dimensions order them as isl's schedule does, which is legal.  Where the
tree splits into a sequence or set of subtrees above any band, each subtree is a
kernel of its own (a set's independent subtrees in textual order).  Statements that
never run are not in isl's schedule, so they belong to no kernel.  The result is
proven by the caller like every other candidate.
"""

from __future__ import annotations

import islpy as isl

from polygpu.model.analysis import Analysis
from polygpu.model.isl_util import detached, maps_of, sets_of, union_of
from polygpu.schedule.adjacency import coalesced_references, transformation
from polygpu.schedule.transformation import KernelSchedule, Transformation

_nt = isl.schedule_node_type


def _selector(width: int, dims: list[int]) -> isl.Map:
    names = [f"d{k}" for k in range(width)]
    return isl.Map(f"{{ [{', '.join(names)}] -> [{', '.join(names[k] for k in dims)}] }}")


def _statements(an: Analysis, domain: isl.UnionSet) -> tuple[str, ...]:
    names = {s.get_tuple_name() for s in sets_of(domain)}
    return tuple(s.name for s in an.scop.statements if s.name in names)


def _width(umap: isl.UnionMap) -> int:
    return maps_of(umap)[0].dim(isl.dim_type.out)


def _band_kernel(an: Analysis, node: isl.ScheduleNode) -> KernelSchedule:
    """The kernel of an outermost band: coincident members -> space, rest -> time."""
    domain = node.get_domain()
    partial = node.band_get_partial_schedule_union_map().intersect_domain(domain)
    subtree = node.get_subtree_schedule_union_map().intersect_domain(domain)
    members = node.band_n_member()
    width = _width(subtree)  # the band's members are the subtree map's first dims
    coincident = [k for k in range(members) if node.band_member_get_coincident(k)]
    time = subtree.apply_range(
        _selector(width, [k for k in range(width) if k not in coincident]))
    statements = _statements(an, domain)

    def with_inner(inner: int) -> KernelSchedule:
        order = [k for k in coincident if k != inner] + [inner]
        return KernelSchedule(statements, partial.apply_range(_selector(members, order)),
                              time, len(order), width - len(coincident))

    if not coincident:
        return KernelSchedule(statements, partial.apply_range(_selector(members, [])),
                              time, 0, width)
    # max keeps the first best: try isl's innermost coincident member first
    options = [with_inner(k) for k in reversed(coincident)]
    return max(options, key=lambda k: len(coalesced_references(an, (k,))))


def _leaf_kernel(an: Analysis, node: isl.ScheduleNode) -> KernelSchedule:
    domain = node.get_domain()
    none = isl.UnionMap.from_domain(domain)  # S[..] -> []
    return KernelSchedule(_statements(an, domain), none, none, 0, 0)


def _kernels(an: Analysis, node: isl.ScheduleNode) -> list[KernelSchedule]:
    kind = node.get_type()
    if kind == _nt.band:
        return [_band_kernel(an, node)]
    if kind == _nt.leaf:
        return [_leaf_kernel(an, node)]
    if kind in (_nt.sequence, _nt.set):
        parts = [_kernels(an, node.child(k)) for k in range(node.n_children())]
        if kind == _nt.set:  # independent subtrees: any order, take the textual one
            order = {s.name: k for k, s in enumerate(an.scop.statements)}
            parts.sort(key=lambda ks: min(order[s] for s in ks[0].statements))
        return [k for part in parts for k in part if k.statements]
    return _kernels(an, node.child(0))  # domain, filter, mark, ...: look below


def isl_schedule(an: Analysis, outer_coincidence: bool = False) -> isl.Schedule | None:
    """isl's schedule of the region (every dependence as validity, coincidence and
    proximity), None if isl fails.  ``outer_coincidence`` asks isl to make the outer
    band members coincident where it can, or else to split off the non-coincident
    ones as a band of their own: how a pivot or time loop shows as a separate band
    (:func:`polygpu.schedule.host.isl_host`)."""
    scop = an.scop
    # detached copies: isl's scheduler rewrites the maps it is given in place, and left
    # the analysis' dependences in a form isl then failed on (algorithm1._thread_local);
    # united in the order of Dependences.union, since isl's schedule depends on it
    deps = union_of((detached(d.relation) for d in an.dependences.items),
                    an.dependences.space)
    ctx = scop.context.get_ctx()
    before = ctx.get_schedule_outer_coincidence()
    ctx.set_schedule_outer_coincidence(int(outer_coincidence))
    try:
        return (isl.ScheduleConstraints.on_domain(scop.domain)
                .set_context(scop.context).set_validity(deps)
                .set_coincidence(deps).set_proximity(deps).compute_schedule())
    except isl.Error:
        return None
    finally:
        ctx.set_schedule_outer_coincidence(before)


def isl_transformation(an: Analysis) -> Transformation | None:
    """isl's schedule as a transformation (not yet proven), None if isl fails."""
    schedule = isl_schedule(an)
    if schedule is None:
        return None
    kernels = tuple(_kernels(an, schedule.get_root()))
    return transformation(an, kernels, "isl") if kernels else None
