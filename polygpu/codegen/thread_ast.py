"""The isl AST of one thread's work in a tiled kernel.

The block and thread coordinates of the tiled schedule (and, in a staged kernel, the
first tile levels) become *parameters* of the AST build, equated with the schedule
dimensions they stand for and dropped, so isl generates the loops one thread runs --
including the guards of partial tiles -- over exactly the schedule that was proven
legal.  Shared by plain kernels (``cuda.py``) and staged ones (``staging.py``).
"""

from __future__ import annotations

from functools import lru_cache

import islpy as isl

from polygpu.codegen.fold_pieces import FoldPieces
from polygpu.codegen.launch_grid import block_count
from polygpu.errors import PolygpuError
from polygpu.model.dependences import SIMPLIFICATIONS, maps_of, union_of
from polygpu.model.scop import Scop
from polygpu.schedule.tiling import TiledKernel

# statement copies one thread's completely unrolled work may take (Variant.full_unroll):
# a 128-row solve leaf has 8 256 (ptxas: 1.7 s); beyond, nvcc's time and the kernel's
# size grow past what any leaf gains
MAX_UNROLLED = 20_000


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
    """The parameter context: the region's, block ids >= 0 and thread ids in range
    (and the kernel's ``blocks``, where its code is for some blocks only).

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
    if kernel.blocks is not None:  # whole or partial tiles only (codegen/full_tiles.py)
        blocks = with_params(kernel.blocks, param_names(context))
        context = with_params(context, param_names(blocks))
        context = context.intersect_params(blocks.align_params(context.get_space()))
    return context


def param_names(s) -> list[str]:
    """The parameter names of an isl set, map or function, in order."""
    return [s.get_dim_name(isl.dim_type.param, k) for k in range(s.dim(isl.dim_type.param))]


def kernel_ast(scop: Scop, kernel: TiledKernel, levels: int = 0,
               context: isl.Set | None = None, pieces: FoldPieces | None = None
               ) -> isl.AstNode:
    """The AST of one thread's work in ``kernel``, with the block and thread coordinates
    and the first ``levels`` tile levels as parameters; its statements split into
    ``pieces`` where given (:mod:`polygpu.codegen.fold_pieces`)."""
    fixed = (list(kernel.block_names) + list(kernel.thread_names)
             + list(kernel.level_names[:levels]))
    given = pieces.split(kernel.schedule) if pieces else kernel.schedule
    schedule = union_of(_fix_leading(piece, fixed) for piece in maps_of(given))
    if context is None:
        context = thread_context(scop, kernel, threads=True)
    context = with_params(context, fixed)
    # register tiles: isl unrolls these loops completely (a guarded copy per point)
    unroll = tuple(k - levels for k in kernel.unroll_dims)
    if kernel.unrolled:  # (nvcc unrolls them: isl took 1.6 s a 64-row leaf)
        _check_unrollable(scop, kernel, schedule, context,
                          tuple(k - levels for k in kernel.unrolled))
    iterators = tuple(kernel.local_names[levels:])
    if unroll and kernel.blocks is not None:
        # code for some blocks only (codegen/full_tiles.py): in whole tiles the register
        # tile's loops have constant bounds and no guards, and nvcc unrolls them
        # (``#pragma unroll``, see register_loops); isl's own unrolling costs seconds a
        # variant (mm's 8 x 8 points: 2.2 s against 0.3 s)
        loops = _ast_of_text(str(context), str(schedule), iterators, ())
        if _plain_loops(loops, register_loops(kernel), False):
            return loops
    return _ast_of_text(str(context), str(schedule), iterators, unroll)


def _check_unrollable(scop: Scop, kernel: TiledKernel, schedule: isl.UnionMap,
                      context: isl.Set, dims: tuple[int, ...]) -> None:
    """PolygpuError unless the loops ``dims`` of ``schedule`` have a constant bound of
    at most :data:`MAX_UNROLLED` points a thread in all (their bounding box's, for any
    block and thread): complete unrolling needs constant trip counts (the sizes baked
    in), and a small enough kernel."""
    for name, value in scop.fixed_parameters.items():  # (the sizes baked in)
        p = context.find_dim_by_name(isl.dim_type.param, name)
        if p >= 0:
            context = context.fix_val(isl.dim_type.param, p, isl.Val(value))
    points = 0
    for m in maps_of(schedule):
        rng = m.intersect_params(context).range().project_out_all_params()
        if rng.is_empty():  # (a statement of another tile level)
            continue
        box = 1
        for d in dims:
            lo, hi = rng.dim_min_val(d), rng.dim_max_val(d)
            if not (lo.is_int() and hi.is_int()):
                raise PolygpuError(
                    f"variant: full_unroll needs constant trip counts in kernel "
                    f"{kernel.index} (set specialize and give the sizes)")
            box *= hi.to_python() - lo.to_python() + 1
        points += box
    if points > MAX_UNROLLED:
        raise PolygpuError(f"variant: full_unroll of kernel {kernel.index} would copy its "
                           f"statements {points} times a thread (at most {MAX_UNROLLED}); "
                           "use smaller tiles or leaves")


def register_loops(kernel: TiledKernel) -> frozenset[str]:
    """The iterators of ``kernel``'s register-tile loops and of its loops unrolled
    whole (``Variant.full_unroll``): where an AST keeps them as loops
    (:func:`kernel_ast`), the code generator has nvcc unroll them completely."""
    return frozenset(kernel.local_names[k] for k in kernel.unroll_dims + kernel.unrolled)


def _plain_loops(node: isl.AstNode, names: frozenset[str], inside: bool) -> bool:
    """Whether every loop of ``node`` over ``names`` runs from one constant to another
    and holds no guard (``inside``: ``node`` is in such a loop): nvcc unrolls those
    completely, as isl would, with every register index a constant."""
    t = node.get_type()
    if t == isl.ast_node_type.block:
        children = node.block_get_children()
        return all(_plain_loops(children.get_at(k), names, inside)
                   for k in range(children.n_ast_node()))
    if t == isl.ast_node_type.for_:
        mine = node.for_get_iterator().get_id().get_name() in names
        if mine and not (_constant(node.for_get_init()) and _constant_bound(node)):
            return False
        return _plain_loops(node.for_get_body(), names, inside or mine)
    if t == isl.ast_node_type.if_:
        return not inside and _plain_loops(node.if_get_then_node(), names, inside) and (
            not node.if_has_else_node()
            or _plain_loops(node.if_get_else_node(), names, inside))
    if t == isl.ast_node_type.mark:
        return _plain_loops(node.mark_get_node(), names, inside)
    return True


def constant_value(e: isl.AstExpr) -> int | None:
    """The integer an AST expression is, or None where it is not a constant."""
    return e.int_get_val().to_python() if e.get_type() == isl.ast_expr_type.int else None


def constant_trip(loop: isl.AstNode) -> bool:
    """Whether ``loop`` runs from one constant to another (nvcc then knows its trip)."""
    return _constant(loop.for_get_init()) and _constant_bound(loop)


def _constant(e: isl.AstExpr) -> bool:
    return constant_value(e) is not None


def _constant_bound(loop: isl.AstNode) -> bool:
    """Whether ``loop``'s condition compares its iterator with a constant."""
    cond = loop.for_get_cond()
    return cond.get_type() == isl.ast_expr_type.op and cond.get_op_n_arg() == 2 and \
        cond.get_op_arg(0).get_type() == isl.ast_expr_type.id and _constant(cond.get_op_arg(1))


@lru_cache(maxsize=512)
def _ast_of_text(context: str, schedule: str, iterators: tuple[str, ...],
                 unroll: tuple[int, ...]) -> isl.AstNode:
    """The AST built from the *text* of the context and the schedule.  Why text: the
    variants of a search share many kernels' and staged copies' schedules, and isl's
    AST generation is most of a variant's code generation (mm3: 0.35 s a call, 38 of a
    tune's 66 s of CPU).  Building from the parsed text, never from the objects at hand,
    makes the AST a function of the text alone -- the same code whether it comes from
    this cache or not, whichever variant asked first."""
    build = isl.AstBuild.from_context(isl.Set(context)).set_iterators(ids(iterators))
    return node_from_schedule_map(build, isl.UnionMap(schedule), unroll)


def _options(n: int, unroll: tuple[int, ...], atomic: bool) -> isl.UnionMap | None:
    """AST build options for a schedule of ``n`` dimensions: ``unroll`` for those
    dimensions, and with ``atomic`` every other one ``atomic``; None if none."""
    dims = ", ".join(f"d{k}" for k in range(n))
    parts = [f"[{dims}] -> unroll[{k}]" for k in unroll]
    if atomic:
        parts += [f"[{dims}] -> atomic[{k}]" for k in range(n) if k not in unroll]
    return isl.UnionMap(f"{{ {'; '.join(parts)} }}") if parts else None


def node_from_schedule_map(build: isl.AstBuild, schedule: isl.UnionMap,
                           unroll: tuple[int, ...] = ()) -> isl.AstNode:
    """``build.node_from_schedule_map(schedule)`` with the dimensions ``unroll`` unrolled
    completely.

    isl (0.27) fails inside on some quasi-affine schedules, whatever their representation:
    "total dimensionality changed unexpectedly" (isl_map_simplify.c).  Divisions of the
    parameters bring it on: a descending strided loop puts the parity of ``n`` -- and, in
    a host step, of the host iterators -- into the domains (tests/test_fuzz_regressions.py,
    ``wavefront_descending_stride``).  So the schedule is tried as given, with each map
    simplified first (equal maps: only the representation isl starts from changes), then
    both again with every dimension that is not unrolled ``atomic``: each instance
    generated in one place, without the splitting of a dimension's domain into pieces
    generated one by one of isl's default strategy (and of ``separate``, which fails
    alike).  The same instances in the same order every time; only the shape of the
    loops and guards may differ."""
    maps = maps_of(schedule)
    n = maps[0].dim(isl.dim_type.out) if maps else 0
    first = None
    for atomic in (False, True):
        if atomic and all(k in unroll for k in range(n)):
            break  # no dimension to make atomic: nothing else to try
        options = _options(n, unroll, atomic)
        with_options = build if options is None else build.set_options(options)
        for simplify in (None, *SIMPLIFICATIONS):
            try:
                given = schedule if simplify is None else union_of(simplify(m) for m in maps)
                return with_options.node_from_schedule_map(given)
            except isl.Error as e:
                if first is None:
                    first = e
    raise first  # isl's own error on the schedule as given


def _involves(pa: isl.PwAff, names) -> bool:
    """Whether ``pa`` depends on any of the parameters ``names`` (a host step's grid
    may shrink with its iterators: its block count is not one number then)."""
    for name in names:
        k = pa.find_dim_by_name(isl.dim_type.param, name)
        if k >= 0 and pa.involves_dims(isl.dim_type.param, k, 1):
            return True
    return False
