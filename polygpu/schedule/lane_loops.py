"""Loops a thread's lanes share (``Variant.lanes``): a right-looking order for a
substitution, and the proof that a loop's iterations are independent.

Why: a kernel on lanes (codegen/cuda.py) splits each sum of a thread over its lanes --
but a substitution's row ``i`` needs every earlier row finished, so each row costs the
sum's loads, a butterfly of shuffles and the division, one after the other: a recursive
trsm's leaf on the H200 spent about 0.45 us a row that way (930 cycles).  Turned
right-looking -- once row ``k`` is divided, the rows below it take their term of ``k``
-- the update's rows at one step are independent: the lanes take them in turn, with a
``__syncwarp`` before and after the loop, and no shuffle at all.

:func:`right_looking` turns a kernel whose one *update* has two loops (the row ``i``
outside, the sum ``k`` inside: time ``[.., i, .., k, ..]``) and whose other statements
loop at most over the row (the division of row ``i``): the update at ``[.., k, c, i,
0..]`` with ``c`` after every other statement's constant there, the others as they were
-- so row ``k``'s division comes before the updates that read it, and every row's
updates still run in the order of ``k``: an element sees the same operations in the same
order (exact).  Nothing here is trusted: the tiled result is proven legal with isl like
every tiling, and :func:`lane_parallel` proves that the loop the lanes share carries no
dependence.
"""

from __future__ import annotations

from dataclasses import replace

import islpy as isl

from polygpu.model.build import map_from_pw_affs
from polygpu.model.dependences import Dependences, maps_of, union_of
from polygpu.schedule.legality import ExecutionSchedule, violations
from polygpu.schedule.transformation import KernelSchedule


def loop_dims(m: isl.Map) -> list[int]:
    """The output dimensions of a schedule map that are loops (not constants)."""
    pma = m.as_pw_multi_aff()
    return [d for d in range(m.dim(isl.dim_type.out)) if not pma.get_pw_aff(d).is_cst()]


def varying_dims(m: isl.Map) -> list[int]:
    """The output dimensions of a schedule map whose value changes over the statement's
    instances at fixed parameters (a device step's host iterators are parameters: a
    dimension equal to one is no loop of the step)."""
    rng = m.range()
    return [d for d in range(m.dim(isl.dim_type.out))
            if not rng.dim_min(d).is_equal(rng.dim_max(d))]


def right_looking(kernel: KernelSchedule) -> KernelSchedule | None:
    """``kernel`` with its update turned right-looking (module doc), or None where it is
    not of that form."""
    loops = {name: loop_dims(m) for name, m in _times(kernel).items()}
    updates = [name for name, ds in loops.items() if len(ds) == 2]
    if len(updates) != 1 or any(len(ds) > 2 for ds in loops.values()):
        return None
    row = loops[updates[0]][0]
    if any(ds and ds != [row] for name, ds in loops.items() if name != updates[0]):
        return None
    return turned(kernel, updates[0])


def updates(kernel: KernelSchedule) -> list[str]:
    """The statements of ``kernel`` that :func:`turned` can take: two loops (row, then
    sum), the other statements constant right after that row's position.  (Whether a
    turn is legal is the prover's to say.)"""
    return [name for name, m in _times(kernel).items()
            if len(varying_dims(m)) == 2 and turned(kernel, name, gap=1) is not None]


def turned(kernel: KernelSchedule, update: str, gap: int = 0) -> KernelSchedule | None:
    """``kernel`` with statement ``update`` (time ``[.., i, .., k, ..]``) at ``[.., k,
    c, 0 x gap, i, 0..]``, ``c`` after every other statement's constant at the position
    after ``i``; None where the time has no room or those are not constants.  With
    ``gap`` 1 the row is at a position where no other statement of a one-thread step
    loops (their sums loop right after their constant), so a loop there is the turned
    update's alone (:func:`lane_parallel` over it alone)."""
    times = _times(kernel)
    m = times[update]
    dims = varying_dims(m) if gap else loop_dims(m)
    if len(dims) != 2 or dims[0] + 2 + gap >= kernel.n_time:
        return None
    row, step = dims
    after = 0  # the update's constant right after the step: behind every other statement
    for name, other in times.items():
        if name != update:
            value = other.as_pw_multi_aff().get_pw_aff(row + 1)
            if not value.is_cst():
                return None
            after = max(after, _constant(value) + 1)
    pma = m.as_pw_multi_aff()
    dims = [pma.get_pw_aff(d) for d in range(kernel.n_time)]
    zero = dims[row].sub(dims[row])  # 0 on the update's domain
    order = [dims[d] for d in range(row)] + [dims[step], zero.add_constant_val(isl.Val(after))]
    order += [zero] * gap + [dims[row]]
    order += [zero] * (kernel.n_time - len(order))
    result = map_from_pw_affs(order, m.domain(), None)
    time = union_of([result if name == update else other for name, other in times.items()])
    return replace(kernel, time=time)


def _times(kernel: KernelSchedule) -> dict[str, isl.Map]:
    return {m.get_tuple_name(isl.dim_type.in_): m for m in maps_of(kernel.time)}


def _constant(value: isl.PwAff) -> int:
    """The value of a constant piecewise affine function (one piece)."""
    constants = []
    value.foreach_piece(lambda _s, aff: constants.append(aff.get_constant_val().to_python()))
    if len(set(constants)) != 1:
        raise ValueError(f"not one constant: {value}")
    return constants[0]


def lane_parallel(schedule: isl.UnionMap, statements: tuple[str, ...], deps: Dependences,
                  dim: int) -> bool:
    """Whether output dimension ``dim`` of a tiled ``schedule`` (``S -> [b.., t..,
    local..]``) carries no dependence between instances of ``statements``: none joins
    two of them that agree on every dimension before ``dim`` (the same block and thread
    among them) and differ at it.  Then the iterations of that loop, in one run of
    everything outside it, may run on different lanes at once."""
    mine = [d for d in deps.items if d.source in statements and d.sink in statements]
    if not mine:
        return True
    pairs = union_of([d.relation for d in mine]).apply_domain(schedule).apply_range(schedule)
    if pairs.is_empty():
        return True
    deltas = isl.Set.from_union_set(pairs.deltas())
    space = deltas.get_space()
    same = isl.Set.universe(space)
    for d in range(dim):
        same = same.fix_val(isl.dim_type.set, d, isl.Val(0))
    carried = same.subtract(same.fix_val(isl.dim_type.set, dim, isl.Val(0)))
    return deltas.intersect(carried).is_empty()


def proven_alone(schedule: isl.UnionMap, kinds: tuple[str, ...], deps: Dependences) -> bool:
    """Whether one tiled kernel's schedule respects every dependence among its own
    statements (the caller then proves the whole program as always)."""
    return not violations(deps, ExecutionSchedule(schedule, kinds))
