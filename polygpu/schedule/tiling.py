"""Multi-level tiling and thread mapping of a transformation (paper §6).

A :class:`Variant` says how to cut each kernel's space into thread blocks and threads
and how to order a thread's work; :func:`tile` turns a transformation and a variant into
one execution schedule per kernel, ``S[x] -> [b.., t.., rest..]``:

* the space dimensions (at most three are mapped; extra outer ones stay sequential in
  each thread) are shifted to start at 0 and cut into *block tiles* of ``tile[d]``
  points: ``b_d = floor(p_d / tile_d)`` is ``blockIdx``;
* inside a block tile the points are dealt *cyclically* to ``threads[d]`` threads:
  ``t_d = (p_d mod tile_d) mod threads_d`` is ``threadIdx`` and
  ``r_d = floor((p_d mod tile_d) / threads_d)`` numbers a thread's points.  Cyclic by
  default: consecutive points go to consecutive threads, which is what keeps the
  innermost dimension coalesced.  ``blocked`` deals each thread a contiguous run of
  ``ceil(tile_d / threads_d)`` points instead (the paper's Table 3 compares the two).
  Between the two, ``chunk = w`` deals runs of ``w`` consecutive points cyclically:
  ``t_d = floor(q / w) mod threads_d`` and ``r_d = w floor(q / (w threads_d)) + q mod w``
  for ``q = p_d mod tile_d``.  A warp then still covers ``32 w`` consecutive elements
  (coalesced), while a thread's points come in runs that the compiler loads from shared
  memory as one vector (``ld.shared.v4`` for ``w = 4`` floats);
* ``time_tile`` strip-mines the outermost time loop into a tile loop ``T`` and the
  loop itself (the second tiling level that bounds the data a block touches per step,
  e.g. mm's ``k``);
* the rest is the thread's sequential order: the outer sequential space dimensions,
  the constant (statement-order) time dimensions before the first loop, ``T``, then
  ``r`` and the rest of the time schedule, or with ``jam`` (register tiling by
  unroll-and-jam) the time schedule then ``r``, so each time step is done for all of a
  thread's points together.  The leading dimensions up to and including ``T`` are
  the *tile levels*: loops every thread of a block runs alike, where the memory stage
  may place shared-memory copies and barriers.  (Hoisting them above ``r`` is legal
  because no dependence crosses space points inside a kernel; the prover checks it.)

Every tiled schedule is proven legal with isl before code is generated from it; tile
sizes need not divide anything, since partial tiles are exact sets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import islpy as isl

from polygpu.model.build import map_from_pw_affs
from polygpu.model.dependences import Dependences, maps_of, union_of
from polygpu.model.isl_util import memo_by_identity, memo_by_text
from polygpu.model.scop import Scop
from polygpu.schedule.lane_loops import (
    lane_parallel,
    loop_dims,
    proven_alone,
    right_looking,
    turned,
    updates,
)
from polygpu.schedule.legality import ExecutionSchedule, insert_constants, prove_legal
from polygpu.schedule.transformation import KernelSchedule, Transformation
from polygpu.schedule.variant import MAX_MAPPED, Variant

AXES = "xyz"  # CUDA's names of the mapped dimensions, innermost first


@dataclass(frozen=True)
class TiledKernel:
    """One kernel after tiling: its execution schedule and launch shape.

    ``schedule`` maps each statement to ``[b.., t.., local..]`` with ``n_mapped`` block
    and thread dimensions (innermost space dimension first: it becomes ``x``);
    ``extent[d]`` is an upper bound on the shifted space coordinate of mapped dimension
    ``d`` (an isl piecewise affine function of the parameters): the grid needs
    ``extent // tile + 1`` blocks there.
    """

    index: int
    statements: tuple[str, ...]
    schedule: isl.UnionMap
    n_mapped: int
    n_local: int
    tile: tuple[int, ...]  # per mapped dim, x first
    threads: tuple[int, ...]  # per mapped dim, x first
    extent: tuple[isl.PwAff, ...]
    local_names: tuple[str, ...] = field(default=())
    unroll: int = 1  # #pragma unroll factor for the innermost loops
    unroll_dims: tuple[int, ...] = ()  # local dims to unroll completely (register tiles)
    # further local dims unrolled completely (Variant.full_unroll; nvcc does it, the AST
    # keeps them as loops): every loop inside the deepest tile level, so a thread's
    # footprint along them takes constant indices
    unrolled: tuple[int, ...] = ()
    n_tile_levels: int = 0  # leading local dims every thread runs alike (see module doc)
    block_names: tuple[str, ...] = ()  # C names of the block coordinates, x first
    thread_names: tuple[str, ...] = ()  # C names of the thread coordinates, x first
    level_names: tuple[str, ...] = ()  # C names of the tile-level coordinates
    blocked: bool = False
    chunk: int = 1  # a thread's points come in runs of up to this many (variant.chunk;
    # under mma along x only)
    prefetch: bool = False  # pipeline the deepest shared copy-ins through registers
    double_buffer: bool = False  # two shared buffers per staged array, in turn
    mma: bool = False  # a register tile's time loops on the tensor cores (codegen/mma.py)
    mma_k: int = 4  # the instruction's k there (Variant.mma_k)
    min_blocks: int = 0  # __launch_bounds__'s blocks an SM (Variant.min_blocks; 0: none)
    lanes: int = 1  # lanes of a warp running each thread's work (Variant.lanes)
    # local dims whose iterations the lanes share (proven to carry no dependence:
    # schedule/lane_loops.py); empty: the lanes split the thread's sums instead
    lane_dims: tuple[int, ...] = ()
    # local dims of a thread's own points (one per mapped dim, outer axis first)
    point_dims: tuple[int, ...] = ()
    atomic: tuple[str, ...] = ()  # statements combining their updates atomically
    warp_uniform: tuple[str, ...] = ()  # ... whose target does not move along x
    # the block ids this kernel's code is generated for (a parameter set over the
    # region's parameters and ``block_names``); None: every block of the grid
    # (codegen/full_tiles.py generates whole and partial tiles apart)
    blocks: isl.Set | None = None

    @property
    def n_threads(self) -> int:
        return math.prod(self.threads)

    @property
    def block_threads(self) -> int:
        """The threads a launch of this kernel needs: its threads times their lanes."""
        return self.n_threads * self.lanes


def _pieces(umap: isl.UnionMap) -> dict[str, isl.Map]:
    return {m.get_tuple_name(isl.dim_type.in_): m for m in maps_of(umap)}


def _pw_affs(m: isl.Map) -> list[isl.PwAff]:
    pma = m.as_pw_multi_aff()
    return [pma.get_pw_aff(k) for k in range(pma.dim(isl.dim_type.out))]


def _right_aligned(values: tuple[int, ...], n: int) -> tuple[int, ...]:
    """The last ``n`` entries of ``values``, padded with 1 on the outside."""
    padded = (1,) * max(0, n - len(values)) + tuple(values)
    return padded[len(padded) - n:]


def _tile_kernel(scop: Scop, kernel: KernelSchedule, index: int, variant: Variant) -> TiledKernel:
    n_mapped = min(kernel.n_space, MAX_MAPPED)
    n_seq_space = kernel.n_space - n_mapped  # outer space dims beyond three: sequential
    tile = _right_aligned(variant.tile, n_mapped)
    threads = _right_aligned(variant.threads, n_mapped)
    domains = {name: scop.statement(name).domain for name in kernel.statements}
    space = {n: m.intersect_domain(domains[n]) for n, m in _pieces(kernel.space).items()}
    time = {n: m.intersect_domain(domains[n]) for n, m in _pieces(kernel.time).items()}

    # shift every mapped space dimension to start at 0 over the whole kernel
    shifts, extents = [], []
    for d in range(n_seq_space, kernel.n_space):
        image = None
        for m in space.values():
            part = m.range().project_out(isl.dim_type.set, 0, d).project_out(
                isl.dim_type.set, 1, kernel.n_space - d - 1)
            image = part if image is None else image.union(part)
        lower = image.dim_min(0)
        shifts.append(lower)
        extents.append(image.dim_max(0).sub(lower).coalesce())

    thetas = {name: _pw_affs(time[name]) for name in kernel.statements}
    # the outermost time dimension that is a loop for some statement of the kernel
    loop_dims = [j for j in range(kernel.n_time)
                 if any(not t[j].is_cst() for t in thetas.values())]
    strip = bool(variant.time_tile and loop_dims)
    per_statement = []
    for name in kernel.statements:
        p = _pw_affs(space[name])
        theta = thetas[name]
        domain = domains[name]
        blocks, thread_ids, points, dealt = [], [], [], []
        # mapped dims, innermost first (x, y, z)
        for k, d in enumerate(reversed(range(n_seq_space, kernel.n_space))):
            mk = n_mapped - 1 - k  # index into shifts (outer->inner order)
            shifted = p[d].sub(_on(shifts[mk], domain))
            rem = shifted.mod_val(isl.Val(tile[mk]))
            blocks.append(shifted.scale_down_val(isl.Val(tile[mk])).floor())
            per_thread = -(-tile[mk] // threads[mk])
            # the tensor cores' rows are a warp's 8 threads along y, one row each
            # (codegen/mma.py): dealt cyclically, the row factor's buffer rows are
            # consecutive across those lanes, and padding can spread them over the banks
            w = 1 if variant.mma and k == 1 else min(variant.chunk, per_thread)
            dealt.append((k, mk, shifted, per_thread, 1 if variant.blocked else w))
            if variant.blocked:
                run = isl.Val(per_thread)
                thread_ids.append(rem.scale_down_val(run).floor())
                points.append(rem.mod_val(run))
            elif w > 1:
                run = rem.scale_down_val(isl.Val(w)).floor()
                thread_ids.append(run.mod_val(isl.Val(threads[mk])))
                points.append(run.scale_down_val(isl.Val(threads[mk])).floor()
                              .scale_val(isl.Val(w)).add(rem.mod_val(isl.Val(w))))
            else:
                thread_ids.append(rem.mod_val(isl.Val(threads[mk])))
                points.append(rem.scale_down_val(isl.Val(threads[mk])).floor())
        outer_space = p[:n_seq_space]
        j = loop_dims[0] if loop_dims else kernel.n_time
        levels = theta[:j]  # statement-order constants before the first loop
        if strip:
            levels = levels + [theta[j].scale_down_val(isl.Val(variant.time_tile)).floor()]
        rest = theta[j:]
        points = points[::-1]  # a thread's own points: outer axis first, x innermost
        local = outer_space + levels + (rest + points if variant.jam else points + rest)
        first_point = 2 * n_mapped + len(outer_space) + len(levels) + (
            len(rest) if variant.jam else 0)
        mapped = [_Mapped(block=k, thread=n_mapped + k, point=first_point + mk,
                          shifted=shifted, tile=tile[mk], threads=threads[mk],
                          per_thread=per_thread, chunk=w, blocked=variant.blocked)
                  for k, mk, shifted, per_thread, w in dealt]
        given = map_from_pw_affs(blocks + thread_ids + local, domain, None)
        per_statement.append(_points_explicit(given, mapped))
    schedule = union_of(m.reset_tuple_id(isl.dim_type.out) for m in per_statement)
    n_local = per_statement[0].dim(isl.dim_type.out) - 2 * n_mapped
    n_levels = n_seq_space + (j if loop_dims else kernel.n_time) + (1 if strip else 0)
    block_names, thread_names = coordinate_names(scop, n_mapped)
    local_names = _local_names(scop, n_seq_space, n_mapped,
                               kernel.n_time + (1 if strip else 0),
                               n_levels - n_seq_space, variant.jam)
    level_names = _free_names(scop, [f"o_{name}" for name in local_names[:n_levels]])
    first_local_point = n_levels + (len(rest) if variant.jam else 0)
    return TiledKernel(
        index=index,
        statements=kernel.statements,
        schedule=schedule,
        n_mapped=n_mapped,
        n_local=n_local,
        tile=tuple(reversed(tile)),
        threads=tuple(reversed(threads)),
        extent=tuple(reversed(extents)),
        local_names=local_names,
        point_dims=tuple(range(first_local_point, first_local_point + n_mapped)),
        unroll=variant.unroll,
        unroll_dims=tuple(range(n_local - n_mapped, n_local)) if variant.jam else (),
        unrolled=tuple(d for d in range(n_levels, n_local)
                       if not (variant.jam and d >= n_local - n_mapped))
        if variant.full_unroll else (),
        n_tile_levels=n_levels,
        block_names=block_names,
        thread_names=thread_names,
        level_names=level_names,
        blocked=variant.blocked,
        chunk=variant.chunk,
        prefetch=variant.prefetch,
        double_buffer=variant.double_buffer,
        mma=variant.mma,
        mma_k=variant.mma_k,
        min_blocks=variant.min_blocks,
        lanes=variant.lanes,
        atomic=kernel.atomic,
        warp_uniform=kernel.warp_uniform,
    )



@dataclass(frozen=True)
class _Mapped:
    """Where one mapped space dimension's block, thread and point coordinates sit in a
    statement's tiled schedule, and how they deal out its shifted coordinate."""

    block: int
    thread: int
    point: int
    shifted: isl.PwAff  # the space coordinate from 0, on the statement's domain
    tile: int
    threads: int
    per_thread: int
    chunk: int
    blocked: bool


def _points_explicit(given: isl.Map, mapped: list[_Mapped]) -> isl.Map:
    """``given`` (``S[x] -> [b.., t.., local..]``, the block, thread and point
    coordinates functions of ``x``) rewritten as the same relation whose mapped space
    coordinates are functions of the block, thread and point coordinates:
    ``p = tile b + g(t, r)`` with ``g`` the dealing (cyclic ``threads r + t``, blocked
    ``per_thread t + r``, in runs of ``w``: ``w threads floor(r / w) + w t + r mod w``)
    and ``0 <= g < tile``, ``0 <= t < threads``, ``0 <= r <`` the thread's points.

    Why: isl's AST generator scans the schedule's dimensions by projecting ``x`` out.
    Given with ``r = w floor(floor(q / w) / threads) + q mod w`` of ``q = p mod tile``
    (nested divisions of ``x``), its loops over a thread's points come out with bounds
    and guards that depend on the thread (``ry`` from ``-ty + (ty + 1) / 2``), the
    unrolled register tile's indices are no constants and the tile goes to local
    memory: a batched 64 x 64 product in runs of 4 took 7.5 ms instead of 0.56 (H200,
    2026-11-30), partial tiles of every register-tiled product paid alike.  Divisions of
    the schedule's own coordinates give plain loops ``r = 0 .. 7``.  The two are proven
    equal with isl (else ``given`` is kept)."""
    if not mapped:
        return given
    return _explicit(given, tuple((m.block, m.thread, m.point, m.shifted, m.tile, m.threads,
                                   m.per_thread, m.chunk, m.blocked) for m in mapped))


@memo_by_text(maxsize=512)
def _explicit(given: isl.Map, fields: tuple) -> isl.Map:
    """:func:`_points_explicit` of ``_Mapped(*f)`` for ``f`` in ``fields``, by text: the
    variants of one tile (their thread layouts, their check's sizes) share schedules,
    and isl's proof of equality is most of a tiling's time."""
    mapped = [_Mapped(*f) for f in fields]
    try:
        result = _rewritten(given, mapped)
        return result if result.is_equal(given) else given
    except isl.Error:  # isl's own limits on quasi-affine maps: the given form serves
        return given


def _rewritten(given: isl.Map, mapped: list[_Mapped]) -> isl.Map:
    """``given`` with its mapped block, thread and point coordinates unconstrained, then
    tied to the space coordinates by the dealing (:func:`_points_explicit`)."""
    result = given
    for pos in sorted((q for m in mapped for q in (m.block, m.thread, m.point)),
                      reverse=True):
        result = result.project_out(isl.dim_type.out, pos, 1).insert_dims(
            isl.dim_type.out, pos, 1)
    out_space = given.get_space().range()
    local = isl.LocalSpace.from_space(out_space)
    zero = isl.Aff.zero_on_domain(local)

    def var(pos: int) -> isl.Aff:
        return isl.Aff.var_on_domain(local, isl.dim_type.set, pos)

    def const(value: int) -> isl.Aff:
        return zero.set_constant_val(isl.Val(value))

    for m in mapped:
        b, t, r = var(m.block), var(m.thread), var(m.point)
        if m.blocked:
            g = t.scale_val(isl.Val(m.per_thread)).add(r)
        elif m.chunk > 1:
            w = isl.Val(m.chunk)
            g = (r.scale_down_val(w).floor().scale_val(isl.Val(m.chunk * m.threads))
                 .add(t.scale_val(w)).add(r.mod_val(w)))
        else:
            g = r.scale_val(isl.Val(m.threads)).add(t)
        coordinate = isl.Map.from_aff(b.scale_val(isl.Val(m.tile)).add(g))
        result = result.intersect(
            isl.Map.from_pw_aff(m.shifted).apply_range(coordinate.reverse()))
        # a thread's points: ceil(tile / threads) (blocked: per run), in runs of w
        runs = -(-m.tile // (m.chunk * m.threads)) * m.chunk if not m.blocked \
            else m.per_thread
        bounds = (t.ge_set(zero) & t.lt_set(const(m.threads)) & r.ge_set(zero)
                  & r.lt_set(const(runs)) & g.ge_set(zero) & g.lt_set(const(m.tile)))
        result = result.intersect_range(bounds)
    return result


def _free_names(scop: Scop, names) -> tuple[str, ...]:
    taken = set(scop.signature)
    result = []
    for name in names:
        while name in taken:
            name += "_"
        result.append(name)
    return tuple(result)


def coordinate_names(scop: Scop, n: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """C names of the block and thread coordinates (``bx``, ``tx``, ...), x first,
    avoiding the function's own names."""
    return (_free_names(scop, [f"b{AXES[k]}" for k in range(n)]),
            _free_names(scop, [f"t{AXES[k]}" for k in range(n)]))


def _on(pa: isl.PwAff, domain: isl.Set) -> isl.PwAff:
    """A parameter-only piecewise affine function, as a function on ``domain``."""
    lifted = pa.insert_dims(isl.dim_type.in_, 0, domain.dim(isl.dim_type.set))
    lifted = lifted.set_tuple_id(isl.dim_type.in_, domain.get_tuple_id())
    for k in range(domain.dim(isl.dim_type.set)):
        lifted = lifted.set_dim_id(isl.dim_type.in_, k,
                                   domain.get_dim_id(isl.dim_type.set, k))
    return lifted.align_params(domain.get_space())


def _local_names(scop, n_seq_space, n_mapped, n_time, n_time_levels, jam
                 ) -> tuple[str, ...]:
    """Readable iterator names for the thread-local loops, in their order."""
    names = [f"s{d}" for d in range(n_seq_space)]
    points = [f"r{AXES[k]}" for k in reversed(range(n_mapped))]
    times = [f"c{j}" for j in range(n_time)]
    levels, rest = times[:n_time_levels], times[n_time_levels:]
    return _free_names(scop, names + levels + (rest + points if jam else points + rest))


def tile(scop: Scop, deps: Dependences, tr: Transformation, variant: Variant
         ) -> tuple[TiledKernel, ...]:
    """Tile and map every kernel of ``tr``; prove the whole result legal with isl against
    ``deps`` (the dependences relaxed for ``tr``'s atomic statements)."""
    # the same objects for the same inputs: a search tiles one candidate the same way
    # for variants that differ only in the memory or code stages (sketched, then
    # compiled), and the memory stage's caches are per kernel object
    # (device steps kept for one-thread kernels: their lanes take turned updates' rows)
    per_kernel = tuple(replace(variant.for_kernel(i), **{
        **_NOT_TILING, "device_steps": variant.device_steps and k.n_space == 0})
        for i, k in enumerate(tr.kernels))
    return _tiled(scop, deps, tr, per_kernel)


# Variant fields _tile_kernel never reads (normalized in the memo's key); the others
# (tile, threads, jam, time_tile, unroll, blocked, chunk, prefetch, double_buffer) shape
# the kernels
_NOT_TILING = {"candidate": 0, "shared": True, "padding": -1, "registers": True,
               "specialize": False, "device_steps": False,
               "resident": False, "packed": False, "elements_per_block": 1}


@memo_by_identity(maxsize=64, by_value=(3,))
def _tiled(scop: Scop, deps: Dependences, tr: Transformation,
           per_kernel: tuple[Variant, ...]) -> tuple[TiledKernel, ...]:
    kernels = tuple(_on_lanes(scop, deps, k, i, per_kernel[i]) if per_kernel[i].lanes > 1
                    else _unrolled(scop, deps, k, i, per_kernel[i])
                    if per_kernel[i].full_unroll
                    else _steps_on_lanes(scop, deps, k, i, per_kernel[i])
                    if per_kernel[i].device_steps
                    else _tile_kernel(scop, k, i, per_kernel[i])
                    for i, k in enumerate(tr.kernels))
    prove_legal(deps, execution_schedule(kernels))
    return kernels


def _on_lanes(scop: Scop, deps: Dependences, kernel: KernelSchedule, index: int,
              variant: Variant) -> TiledKernel:
    """A kernel on lanes, right-looking where that is its form and proven, its update's
    row loop then shared by the lanes (schedule/lane_loops.py); else as given (the lanes
    split its sums)."""
    candidate = _turned_proven(scop, deps, kernel, index, variant)
    if candidate is not None:
        # the update's innermost loop: its row, below the step (the last local dim)
        loops = [d for m in maps_of(candidate.schedule) for d in loop_dims(m)]
        local = max(loops, default=0) - 2 * candidate.n_mapped
        if loops and local >= candidate.n_tile_levels and \
                local not in candidate.unroll_dims and \
                lane_parallel(candidate.schedule, candidate.statements, deps, max(loops)):
            return replace(candidate, lane_dims=(local,))
    return _tile_kernel(scop, kernel, index, variant)


def _turned_proven(scop: Scop, deps: Dependences, kernel: KernelSchedule, index: int,
                   variant: Variant) -> TiledKernel | None:
    """``kernel`` turned right-looking and tiled, where that is its form and the tiled
    kernel is proven legal on its own (schedule/lane_loops.py); else None."""
    turned = right_looking(kernel)
    if turned is None:
        return None
    candidate = _tile_kernel(scop, turned, index, variant)
    es = execution_schedule((candidate,))
    return candidate if proven_alone(es.schedule, es.kinds, deps) else None


def _unrolled(scop: Scop, deps: Dependences, kernel: KernelSchedule, index: int,
              variant: Variant) -> TiledKernel:
    """A kernel whose thread's work is unrolled completely (``Variant.full_unroll``),
    right-looking where that is its form and proven on its own (schedule/lane_loops.py):
    in registers the updates of the rows below a divided row are independent FMAs that
    fill the pipeline, while the next row's division waits on one of them only --
    left-looking, it would wait on the row's whole sum, one FMA after another."""
    return _turned_proven(scop, deps, kernel, index, variant) or \
        _tile_kernel(scop, kernel, index, variant)


def _steps_on_lanes(scop: Scop, deps: Dependences, kernel: KernelSchedule, index: int,
                    variant: Variant) -> TiledKernel:
    """A one-thread kernel of device steps (codegen runs it on the lanes of its
    element's warp, splitting its sums), each of its updates turned right-looking where
    that is proven legal (a forward substitution; not a backward one, whose sum would
    run in the other order), their rows then shared by the lanes: one FMA a lane a step
    instead of a split sum's butterfly of shuffles (schedule/lane_loops.py)."""
    given = base = _tile_kernel(scop, kernel, index, variant)
    done: list[str] = []
    for update in updates(kernel):
        candidate = turned(kernel, update, gap=1)
        if candidate is None:
            continue
        tiled = _tile_kernel(scop, candidate, index, variant)
        es = execution_schedule((tiled,))
        if proven_alone(es.schedule, es.kinds, deps):
            kernel, base = candidate, tiled
            done.append(update)
    if not done:
        return base
    rows = {max(loop_dims(m)) for m in maps_of(base.schedule)
            if m.get_tuple_name(isl.dim_type.in_) in done}
    local = max(rows) - 2 * base.n_mapped
    if len(rows) == 1 and local >= base.n_tile_levels and local not in base.unroll_dims \
            and lane_parallel(base.schedule, tuple(done), deps, max(rows)) and \
            not any(max(rows) in loop_dims(m) for m in maps_of(base.schedule)
                    if m.get_tuple_name(isl.dim_type.in_) not in done):
        return replace(base, lane_dims=(local,))
    return given


def execution_schedule(kernels: tuple[TiledKernel, ...]) -> ExecutionSchedule:
    """All kernels as one schedule ``[kernel, b.., t.., local..]`` for the prover."""
    n_mapped = max(k.n_mapped for k in kernels)
    n_local = max(k.n_local for k in kernels)
    padded = []
    for k in kernels:
        gap = [0] * (n_mapped - k.n_mapped)
        for m in maps_of(k.schedule):
            m = insert_constants(m, 0, [k.index])
            # zeros after this kernel's block dims, then after its thread dims, then
            # after its local dims: every kernel gets the same layout
            m = insert_constants(m, 1 + k.n_mapped, gap)
            m = insert_constants(m, 1 + n_mapped + k.n_mapped, gap)
            m = insert_constants(m, m.dim(isl.dim_type.out), [0] * (n_local - k.n_local))
            padded.append(m.reset_tuple_id(isl.dim_type.out))
    result = union_of(padded)
    kinds = ("global",) + ("parallel",) * (2 * n_mapped) + ("local",) * n_local
    return ExecutionSchedule(result, kinds)

