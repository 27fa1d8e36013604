"""The isl AST of one thread's work in a tiled kernel.

The block and thread coordinates of the tiled schedule (and, in a staged kernel, the
first tile levels) become *parameters* of the AST build, equated with the schedule
dimensions they stand for and dropped, so isl generates the loops one thread runs --
including the guards of partial tiles -- over exactly the schedule that was proven
legal.  Shared by plain kernels (``cuda.py``) and staged ones (``staging.py``).
"""

from __future__ import annotations

import islpy as isl

from polygpu.codegen.launch_grid import block_count
from polygpu.model.dependences import SIMPLIFICATIONS, maps_of, union_of
from polygpu.model.scop import Scop
from polygpu.schedule.tiling import TiledKernel


def ids(names) -> isl.IdList:
    ids = isl.IdList.alloc(isl.DEFAULT_CONTEXT, len(names))
    for n in names:
        ids = ids.add(isl.Id(n))
    return ids


def with_params(m: isl.Map | isl.Set, names: list[str]) -> isl.Map | isl.Set:
    """``m`` with parameters ``names`` added (those it lacks), at the end."""
    for name in names:
        if m.find_dim_by_name(isl.dim_type.param, name) < 0:
            k = m.dim(isl.dim_type.param)
            m = m.add_dims(isl.dim_type.param, 1).set_dim_name(isl.dim_type.param, k, name)
    return m


def _fix_leading(smap: isl.Map, names: list[str]) -> isl.Map:
    """Equate the first ``len(names)`` output dims of ``smap`` to parameters ``names`` and
    drop them: the schedule of what remains once those coordinates are known."""
    smap = with_params(smap, names)
    for k, name in enumerate(names):
        p = smap.find_dim_by_name(isl.dim_type.param, name)
        smap = smap.equate(isl.dim_type.param, p, isl.dim_type.out, k)
    return smap.project_out(isl.dim_type.out, 0, len(names))


def thread_context(scop: Scop, kernel: TiledKernel, threads: bool) -> isl.Set:
    """The parameter context: the region's, block ids >= 0 and thread ids in range.

    In a region specialised for known parameter values the launched grid is known too,
    and block ids are bounded above by it: isl then drops the guards that only the last
    blocks of a partial tile row need, and none when the tiles divide the extents."""
    names = list(kernel.block_names) + (list(kernel.thread_names) if threads else [])
    context = with_params(scop.context, names)
    fixed = scop.fixed_parameters
    known = len(fixed) == len(scop.parameters)
    for k, b in enumerate(kernel.block_names):
        p = context.find_dim_by_name(isl.dim_type.param, b)
        context = context.lower_bound_val(isl.dim_type.param, p, isl.Val(0))
        if known and not _involves(kernel.extent[k], scop.host):
            count = block_count(kernel.extent[k], kernel.tile[k], fixed)
            context = context.upper_bound_val(isl.dim_type.param, p, isl.Val(count - 1))
    if threads:
        for k, t in enumerate(kernel.thread_names):
            p = context.find_dim_by_name(isl.dim_type.param, t)
            context = context.lower_bound_val(isl.dim_type.param, p, isl.Val(0))
            context = context.upper_bound_val(isl.dim_type.param, p,
                                              isl.Val(kernel.threads[k] - 1))
    return context


def kernel_ast(scop: Scop, kernel: TiledKernel, levels: int = 0,
               context: isl.Set | None = None) -> isl.AstNode:
    """The AST of one thread's work in ``kernel``, with the block and thread coordinates
    and the first ``levels`` tile levels as parameters."""
    fixed = (list(kernel.block_names) + list(kernel.thread_names)
             + list(kernel.level_names[:levels]))
    schedule = union_of(_fix_leading(piece, fixed) for piece in maps_of(kernel.schedule))
    if context is None:
        context = thread_context(scop, kernel, threads=True)
    context = with_params(context, fixed)
    build = isl.AstBuild.from_context(context).set_iterators(
        ids(kernel.local_names[levels:]))
    if kernel.unroll_dims:
        # register tiles: isl unrolls these loops completely (a guarded copy per point)
        n = kernel.n_local - levels
        dims = ", ".join(f"d{k}" for k in range(n))
        options = "; ".join(f"[{dims}] -> unroll[{k - levels}]" for k in kernel.unroll_dims)
        build = build.set_options(isl.UnionMap(f"{{ {options} }}"))
    return node_from_schedule_map(build, schedule)


def node_from_schedule_map(build: isl.AstBuild, schedule: isl.UnionMap) -> isl.AstNode:
    """``build.node_from_schedule_map(schedule)``; where isl fails inside (it does on
    some quasi-affine schedules, "total dimensionality changed unexpectedly"), the same
    schedule with each map simplified first -- equal maps, so the same instances in the
    same order: only the representation isl starts from changes."""
    try:
        return build.node_from_schedule_map(schedule)
    except isl.Error as e:
        first = e
    maps = maps_of(schedule)
    for simplify in SIMPLIFICATIONS:
        try:
            simpler = union_of(simplify(m) for m in maps)
            return build.node_from_schedule_map(simpler)
        except isl.Error:
            continue
    raise first  # isl's own error on the schedule as given


def _involves(pa: isl.PwAff, names) -> bool:
    """Whether ``pa`` depends on any of the parameters ``names`` (a host step's grid
    may shrink with its iterators: its block count is not one number then)."""
    for name in names:
        k = pa.find_dim_by_name(isl.dim_type.param, name)
        if k >= 0 and pa.involves_dims(isl.dim_type.param, k, 1):
            return True
    return False
