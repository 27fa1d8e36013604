"""The paper's adjacency constraints (§4.2): when a reference is coalesced.

For a reference ``R`` with access map ``F`` in statement ``S`` (array rank >= 1), the
*adjacent pairs* are

    A = { x -> y : x, y in domain(S), F(y) = F(x) + e_last }

-- instance ``y`` touches the element right after the one ``x`` touches, along the
array's fastest-varying (last, row-major) dimension.  Under a transformation with
space partition ``p0..pk`` and time schedule ``θ`` the constraints are

* time-schedule adjacency: ``θ(x) = θ(y)`` -- both accesses happen in the same step
  of the threads' common time loop, and
* space-partition adjacency: ``p_k(y) = p_k(x) + 1`` and ``p_j(y) = p_j(x)`` for
  ``j < k`` -- they are made by consecutive threads along ``threadIdx.x``,

so consecutive threads touch consecutive addresses at the same time, which is what
the hardware merges into one memory transaction.

``R`` is *coalesced* iff the pairs of ``A`` that run at the same step in the same row
of threads (equal ``θ`` and outer space dimensions) are non-empty and all satisfy
``p_k(y) = p_k(x) + 1`` -- checked exactly with isl, as a subset test.  Why the
restriction to same-step, same-row pairs: a reference with reuse has adjacent pairs
at *every* pair of times (``c[i][j]`` in mm relates ``(i, j, k)`` to ``(i, j + 1, k')``
for all ``k, k'``), which can never all be simultaneous although the threads of each
step do read consecutive elements.  For a no-reuse reference under affine maps the
restriction keeps all pairs of ``A`` or none (``A`` is a translation ``x -> x + δ``
and ``θ(x + δ) - θ(x)`` is constant), so there it is exactly "every pair of ``A``
satisfies all three equalities".  Under unit-vector maps it means: threads next to
each other at one step touch consecutive elements.

A 0-d reference or one with constant subscripts has ``A`` empty (every thread reads
the same address: a broadcast), so it is never coalesced; neither is anything under a
schedule without space dimensions.  The check involves one statement's own maps only,
which lets Algorithm 1 filter each statement's space choices before combining them.
"""

from __future__ import annotations

import islpy as isl

from polygpu.model.analysis import Analysis
from polygpu.model.dependences import maps_of
from polygpu.model.isl_util import memo_by_identity
from polygpu.model.scop import Access
from polygpu.schedule.transformation import KernelSchedule, Transformation

# reuse classes that never need shared memory: kept in registers / the constant cache
_NOT_SHARED = ("register", "constant")


def _shift_last(space: isl.Space) -> isl.Map:
    """``{ T[.., d] -> T[.., d + 1] }`` on a set space (array or schedule)."""
    ma = isl.MultiAff.identity(space.map_from_set())
    last = space.dim(isl.dim_type.set) - 1
    return isl.Map.from_multi_aff(ma.set_at(last, ma.get_at(last).add_constant_val(isl.Val(1))))


def adjacent_pairs(access: Access) -> isl.Map:
    """``A``: instance pairs touching consecutive elements along the last array
    dimension (empty for a 0-d array)."""
    return _adjacent_pairs(access.relation)


@memo_by_identity(maxsize=1024)
def _adjacent_pairs(f: isl.Map) -> isl.Map:
    # per relation object: Algorithm 1 asks for every space choice of its statement
    if f.dim(isl.dim_type.out) == 0:
        return isl.Map.empty(f.apply_range(f.reverse()).get_space())
    return f.apply_range(_shift_last(f.range().get_space())).apply_range(f.reverse())


def is_coalesced(access: Access, space: isl.Map, time: isl.Map) -> bool:
    """Whether ``access`` satisfies the adjacency constraints under the statement's
    ``space`` (``S -> [p0..pk]``) and ``time`` (``S -> [t..]``) maps."""
    # a verdict (exact, so the same for every representation of the same maps): kept
    # per text, since Algorithm 1 and every proposal's coalesced_references ask again
    key = (str(access.relation), str(space), str(time))
    known = _VERDICTS.get(key)
    if known is None:
        known = _VERDICTS[key] = _is_coalesced(access, space, time)
        if len(_VERDICTS) > 4096:
            _VERDICTS.pop(next(iter(_VERDICTS)))
    return known


_VERDICTS: dict[tuple[str, str, str], bool] = {}


def _is_coalesced(access: Access, space: isl.Map, time: isl.Map) -> bool:
    n_space = space.dim(isl.dim_type.out)
    if n_space == 0:
        return False
    pairs = adjacent_pairs(access).intersect(_same_row_and_step(space, time))
    if pairs.is_empty():
        return False
    return pairs.is_subset(_next_thread(space))


# the same for every reference of a statement under one choice: computed once for all
@memo_by_identity(maxsize=64)
def _same_row_and_step(space: isl.Map, time: isl.Map) -> isl.Map:
    """Instance pairs in one row of threads at one step."""
    outer = space.project_out(isl.dim_type.out, space.dim(isl.dim_type.out) - 1, 1)
    return outer.apply_range(outer.reverse()).intersect(time.apply_range(time.reverse()))


@memo_by_identity(maxsize=64)
def _next_thread(space: isl.Map) -> isl.Map:
    """Instance pairs on consecutive threads along the innermost space dimension."""
    return space.apply_range(_shift_last(space.range().get_space())).apply_range(
        space.reverse())


def statement_map(umap: isl.UnionMap, statement: str) -> isl.Map | None:
    """The map of ``statement`` in a union map keyed by statements (None when the
    statement never runs: isl drops empty maps from unions)."""
    for m in maps_of(umap):
        if m.get_tuple_name(isl.dim_type.in_) == statement:
            return m
    return None


def coalesced_references(an: Analysis, kernels: tuple[KernelSchedule, ...]
                         ) -> tuple[tuple[str, int], ...]:
    """Every ``(statement, ref)`` -- any reuse class, reads and writes -- that the
    adjacency constraints hold for under ``kernels``."""
    result = []
    for kernel in kernels:
        for name in kernel.statements:
            space = statement_map(kernel.space, name)
            time = statement_map(kernel.time, name)
            if space is None or time is None:
                continue
            # a statement touching one element twice (``a[i] < b ? a[i] : b``): the same
            # relation has the same answer
            known: dict[str, bool] = {}
            for acc in an.scop.statement(name).accesses:
                key = str(acc.relation)
                if key not in known:
                    known[key] = is_coalesced(acc, space, time)
                if known[key]:
                    result.append((name, acc.ref))
    order = {s.name: k for k, s in enumerate(an.scop.statements)}
    return tuple(sorted(result, key=lambda r: (order[r[0]], r[1])))


def transformation(an: Analysis, kernels: tuple[KernelSchedule, ...],
                   origin: str) -> Transformation:
    """A :class:`Transformation` of ``kernels`` with its coalesced references, and as
    ``shared`` the others that neither registers nor the constant cache can hold."""
    coalesced = coalesced_references(an, kernels)
    shared = tuple((r.statement, r.ref) for r in an.reuse
                   if (r.statement, r.ref) not in coalesced and r.reuse not in _NOT_SHARED)
    return Transformation(kernels=kernels, coalesced=coalesced, shared=shared,
                          origin=origin)
