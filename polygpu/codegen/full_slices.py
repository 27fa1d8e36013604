"""Full/partial slice separation: a staged kernel's work twice, with constant loop
bounds in every slice but the last.

A time tile (``time_tile``: mm's ``k`` in slices of 32, all-pairs' ``d`` in slices of
16) that does not divide its loop leaves the thread's work at each tile-level
coordinate bounded by ``min(d - 1, 32 o + 31)``: nvcc unrolls such a loop only by the
``#pragma unroll`` factor, with remainder code, and cannot schedule the shared-memory
loads of one unrolled step across the next.  Every slice but the last is full, so the
work is generated twice (:func:`full_slices` says where each runs)::

    if (<this slice is full>) { work with 32 o .. 32 o + 31 } else { work as it was }

A loop no longer than the ``#pragma unroll`` factor is left alone: nvcc unrolls it
completely either way, and the guard-free copy only added register pressure.

Measured on an H200 (``tuning/results/NVIDIA-H200/liveness_full_slices.md``): PolyBench's
mm3 and gemm defaults 15 % and 4 % faster (with the register-liveness change, same run).

Like :mod:`polygpu.codegen.full_tiles`, nothing about the schedule changes: both
bodies are isl's AST of the same proven schedule under contexts that hold where they
run.  The condition reads parameters, block ids and tile-level coordinates only --
never a thread id -- so every thread of a block takes the same branch.
"""

from __future__ import annotations

import islpy as isl

from polygpu.codegen.thread_ast import with_params
from polygpu.model.isl_budget import OutOfBudget, isl_operation_budget
from polygpu.model.isl_util import maps_of
from polygpu.schedule.tiling import TiledKernel

# isl operations to find the full slices of one kernel: l2dist's needs about 1/10
FULL_SLICE_OPERATIONS = 2_000_000


def full_slices(kernel: TiledKernel, depth: int, context: isl.Set) -> isl.Set | None:
    """The tile-level coordinates (a parameter set over ``context``'s parameters: the
    work AST's context, the first ``depth`` tile levels as parameters) where every
    schedule dimension of the thread's work spans its widest extent over all tile-level
    coordinates, with the block and the thread fixed; None where that splits nothing
    (every tile is full, or none), or isl runs out of its budget.

    Widest, not "of the tile size": a dimension's extent is compared only with its own
    extents elsewhere, so the rule needs to know nothing of which loop was strip-mined.
    The condition is made independent of the thread ids (the largest set of coordinates
    that is full for every thread of the block), so the branch is uniform."""
    if depth == 0:
        return None
    try:
        with isl_operation_budget(context.get_ctx(), FULL_SLICE_OPERATIONS):
            full = _full(kernel, depth, context)
    except OutOfBudget:
        return None
    if full is None or full.is_empty() or context.params().is_subset(full):
        return None
    return full


def _full(kernel: TiledKernel, depth: int, context: isl.Set) -> isl.Set | None:
    levels = list(kernel.level_names[:depth])
    fixed = list(kernel.block_names) + list(kernel.thread_names) + levels
    work = None
    for piece in maps_of(kernel.schedule):
        piece = with_params(piece, fixed)
        for k, name in enumerate(fixed):
            p = piece.find_dim_by_name(isl.dim_type.param, name)
            piece = piece.equate(isl.dim_type.param, p, isl.dim_type.out, k)
        rest = piece.project_out(isl.dim_type.out, 0, len(fixed)).range()
        rest = rest.align_params(context.get_space())
        work = rest if work is None else work.union(rest.align_params(work.get_space()))
    if work is None:
        return None
    context = context.align_params(work.get_space())
    work = work.intersect_params(context.params())
    n = work.dim(isl.dim_type.set)
    full = context.params()
    for j in range(n):
        dim = work.project_out(isl.dim_type.set, j + 1, n - j - 1).project_out(
            isl.dim_type.set, 0, j)
        widest = _widest(dim, levels, kernel.unroll)
        if widest is not None:
            full = full.intersect(widest.align_params(full.get_space()))
    # full for every thread of the block: the coordinates no thread's work makes partial
    threads = list(kernel.thread_names)
    partial = context.params().subtract(full)
    positions = [partial.find_dim_by_name(isl.dim_type.param, t) for t in threads]
    for k in sorted(positions, reverse=True):
        if k >= 0:
            partial = partial.project_out(isl.dim_type.param, k, 1)
    partial = partial.align_params(context.get_space())
    return context.params().subtract(partial).coalesce()


def _widest(dim: isl.Set, levels: list[str], unroll: int) -> isl.Set | None:
    """Where the one-dimensional ``dim`` (the values of one schedule dimension, over
    the parameters) spans its widest extent anywhere -- over every parameter value, so
    a single slice of a short loop (d < 16: the first slice is the last) is not taken
    for a full one: a parameter set, or None where the extent does not depend on the
    tile levels ``levels``, has no bound (a loop to ``n`` inside the work), or is no
    longer than the ``#pragma unroll`` factor ``unroll``: nvcc unrolls such a loop
    completely either way, and a second, guard-free copy only adds register pressure
    (l1dist's 8 x 8 points in slices of 8, unroll 8: 8 bytes of spills)."""
    width = isl.Map.from_domain_and_range(dim, dim).deltas().lexmax()  # { [w] }
    if width.is_empty() or not any(
            width.involves_dims(isl.dim_type.param, k, 1)
            for k in (width.find_dim_by_name(isl.dim_type.param, n) for n in levels)
            if k >= 0):
        return None
    n = width.dim(isl.dim_type.param)
    anywhere = width.move_dims(isl.dim_type.set, 0, isl.dim_type.param, 0, n).project_out(
        isl.dim_type.set, 0, n)  # { [w] } over no parameter at all
    if not anywhere.is_bounded():
        return None
    widest = anywhere.lexmax()  # { [w_max] }: the loop runs w_max + 1 iterations
    if widest.dim_max_val(0).to_python() + 1 <= unroll:
        return None
    widest = widest.align_params(width.get_space())
    return width.intersect(widest).params()
