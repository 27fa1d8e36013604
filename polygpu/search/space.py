"""The search space (paper §6): which variants of a region are worth compiling.

A point is a :class:`~polygpu.schedule.tiling.Variant`.  The space is the product of

* the scheduler's candidate transformations (the best ``candidates`` of them);
* threads per block: a total in ``thread_totals`` (the tuner keeps {T, T/2, T/4} once
  ptxas has told it T, the largest warp multiple the kernel's registers allow), shaped
  over the mapped dimensions with a warp-friendly x extent;
* register-tile factors per dimension (points per thread, unroll-and-jam when > 1), so
  the block tile is ``threads * factor`` (at most ``max_points`` points, and for 4-byte
  elements the ``wide_factors`` tiles beyond it); tiles must divide the work among
  blocks and threads evenly -- or nearly (at most ``MAX_IDLE`` of the slots idle) where
  some tile divides it -- unless no tile does;
* the time tile (second tiling level, bounds the shared footprint) where the kernel has
  a time loop; unroll factors; shared memory on/off; cyclic or blocked points;
* for register tiles: runs of ``chunks`` points per thread instead of single points
  (runs of 4 load as ``float4`` from shared memory, with the buffer transposed where
  that needs it), and with a time loop the loop unrolled by ``jam_unrolls``; staged copies
  are prefetched through registers (``prefetch``: the next tile's loads overlap the
  current tile's work), into one buffer or two used in turn (``double_buffers``: one
  barrier a tile instead of two, where the memory stage allows it).  On an H100, mm at
  4096 went from 0.59x to 0.80x cuBLAS with runs of 4, prefetching and the unrolled
  ``k`` loop together
  (``probe_mm_4096_chunk_prefetch.json``);
* for candidates that spread a sum reduction over threads (atomic statements), long
  runs of points along the reduction dimension (``reduction_factors``): a thread sums
  them in a register and adds once, so these factors set how many atomics there are,
  not how many registers (a loop, not unrolled-and-jammed); and register tiles of up to
  32 points along it.

Every point is specialized for the parameters it is tuned at (``Variant.specialize``):
the search times one size, and code with that size baked in has constant loop bounds
and no guards in whole tiles -- for mm at 4096 on an H100, 8.2 ms against 13.1 ms for
the same tiles left parametric, and up to 6x for 8x8 register tiles, whose guards
nvcc cannot hoist (``tuning/results/NVIDIA-H100-80GB-HBM3/probe_mm_4096.json``).

Every point is a complete, valid Variant; the memory stage rejects nothing (it falls
back to global memory), and compile errors are reported per point by the tuner.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import islpy as isl

from polygpu.memory.residence import packable_at
from polygpu.model.dependences import maps_of
from polygpu.pipeline import Prepared
from polygpu.schedule.tiling import tile
from polygpu.schedule.variant import MAX_MAPPED, MAX_THREADS, Variant


@dataclass(frozen=True)
class SpaceOptions:
    """The axes of the space.  Defaults give a few hundred points for a 2-d kernel."""

    candidates: int = 2
    thread_totals: tuple[int, ...] = (1024, 512, 256, 128)
    x_threads: tuple[int, ...] = (16, 32, 64)  # x extents of 2-d and 3-d blocks
    factors: tuple[int, ...] = (1, 2, 4, 8)
    max_points: int = 64  # points per thread (register tile) at most
    # and beyond it, register tiles of these factors (outer, x) on the two innermost
    # mapped dimensions, for 4-byte elements only (128 floats fit in 255 registers, 128
    # doubles do not): cuBLAS SGEMM's 8 x 16 points a thread, which took mm from 0.79x
    # to 0.83-0.84x cuBLAS at n = 2048-8192 on the H100 (probe_mm_*_register_tile_8x16)
    wide_factors: tuple[tuple[int, int], ...] = ((8, 16),)
    # ... staged in time tiles of 8, unrolled whole: the probes' best (0.83-0.84x); in
    # tiles of 16 or 32, or unstaged, they ran 1.5-1.8x slower than 8 x 8 points in the
    # model's first tune with them (H200, n = 2048-8192)
    wide_time_tiles: tuple[int, ...] = (8,)
    max_points_reduction: int = 32  # ... when the tile holds partial sums of reductions
    time_tiles: tuple[int, ...] = (16, 32)
    unrolls: tuple[int, ...] = (1, 4)
    jam_unrolls: tuple[int, ...] = (4,)  # register tiles inside a time loop
    # register tiles: runs of points per thread (4 alone: with prefetching, runs beat
    # single points in every mm shape probed, and the space stays half as large)
    chunks: tuple[int, ...] = (4,)
    prefetch: tuple[bool, ...] = (True,)  # staged copy-ins through registers
    # staged time tiles with two buffers each, used in turn (one barrier a tile, not
    # two): 4.6 % for l2dist's tuned blocks alone on their SMs (H200), within +-7 % for
    # mm's 256-thread blocks (H100); the model charges barriers where a block is alone
    # on its SM, and elsewhere prices the twins alike (one buffer first)
    double_buffers: tuple[bool, ...] = (False, True)
    shared: tuple[bool, ...] = (True, False)
    blocked: tuple[bool, ...] = (False, True)
    reduction_factors: tuple[int, ...] = (16, 32, 64, 256)  # a thread's run along a reduction
    reduction_jam: tuple[int, ...] = (16, 32)  # register tiles along a reduction
    specialize: bool = True  # bake the tuned parameter values into each variant
    fast_math: bool = False  # every variant with CUDA's fast intrinsics (opted into)


@dataclass(frozen=True)
class Shape:
    """What the space needs to know about one candidate transformation."""

    candidate: int
    n_mapped: int  # the most mapped dimensions over its kernels
    extents: tuple[int, ...]  # points per mapped dimension at the parameters, outer first
    has_time_loop: bool
    reduction_dims: tuple[int, ...] = ()  # mapped dims (outer first) reducing atomically
    element_bytes: int = 4  # of the widest floating-point array of the region
    # the longest loop inside a kernel at the parameters (0: none), what a time tile of
    # an element's reduction need not exceed
    time_extent: int = 0


def _value(pa: isl.PwAff, params: Mapping[str, int]) -> int:
    ctx = isl.Set.universe(pa.get_domain_space())
    for name, v in params.items():
        k = ctx.find_dim_by_name(isl.dim_type.param, name)
        if k >= 0:
            ctx = ctx.fix_val(isl.dim_type.param, k, isl.Val(v))
    top = pa.intersect_params(ctx).max_val()
    return 0 if top.is_nan() else top.to_python()  # NaN: no point at these sizes


def shapes(prepared: Prepared, params: Mapping[str, int], limit: int) -> list[Shape]:
    """Mapped dimensions and their extents of the first ``limit`` candidates, and of a
    ``fused batch`` candidate beyond them (schedule/candidates.py ranks it after the
    others: a plan of another kind, which the model and the search price)."""
    an = prepared.analysis
    result = []
    for c, tr in enumerate(prepared.candidates):
        if c >= limit and (tr.host is None or tr.host.kind != "fused batch"):
            continue
        step = tr.step or an  # with host loops: the kernels of one step
        kernels = tile(step.scop, step.dependences_with(tr.atomic), tr,
                       Variant(candidate=c, tile=(1,), threads=(1,)))
        n = max(k.n_mapped for k in kernels)
        extents = [1] * n
        # a kernel's space dim d of s is mapped dim n - s + d (right-aligned)
        reduction = sorted({n - ks.n_space + d for ks in tr.kernels
                            for d in ks.reduction_dims if n - ks.n_space + d >= 0})
        for k in kernels:
            # k.extent is x first; right-align to the outermost dims
            for d, pa in enumerate(k.extent):
                i = n - 1 - d
                extents[i] = max(extents[i], _value(pa, params) + 1)
        time_loop = any(_loops_in_time(k) for k in tr.kernels)
        result.append(Shape(c, n, tuple(extents), time_loop, tuple(reduction),
                            _element_bytes(an.scop),
                            max((kernel_time_extent(k, params) for k in tr.kernels), default=0)))
    return result


def kernel_time_extent(kernel, params: Mapping[str, int]) -> int:
    """The most points any dimension of ``kernel``'s time schedules spans at ``params``
    (0 where none varies or a span is not known)."""
    widest = 0
    for m in maps_of(kernel.time):
        times = m.range()
        for d in range(times.dim(isl.dim_type.set)):
            try:
                span = times.dim_max(d).sub(times.dim_min(d))
            except isl.Error:
                return 0
            widest = max(widest, _value(span, params) + 1)
    return widest


def _element_bytes(scop) -> int:
    """Bytes of the widest floating-point element of ``scop``'s arrays (4 if none)."""
    return max((8 if a.dtype == "float64" else 4 for a in scop.arrays
                if a.dtype.startswith("float")), default=4)


def kernel_shapes(prepared: Prepared, params: Mapping[str, int], candidate: int
                  ) -> list[Shape]:
    """One :class:`Shape` per kernel of scheduler candidate ``candidate``: its own mapped
    dimensions, extents, time loop and reduction dimensions (:func:`shapes` merges them
    over the kernels), what :func:`kernel_variants` builds a kernel's space from."""
    an = prepared.analysis
    tr = prepared.candidates[candidate]
    step = tr.step or an
    kernels = tile(step.scop, step.dependences_with(tr.atomic), tr,
                   Variant(candidate=candidate, tile=(1,), threads=(1,)))
    result = []
    for k, ks in zip(kernels, tr.kernels, strict=True):
        n = max(k.n_mapped, 1)
        extents = [1] * n
        for d, pa in enumerate(k.extent):  # x first; right-aligned
            extents[n - 1 - d] = max(extents[n - 1 - d], _value(pa, params) + 1)
        reduction = sorted({n - ks.n_space + d for d in ks.reduction_dims
                            if n - ks.n_space + d >= 0})
        result.append(Shape(candidate, n, tuple(extents), _loops_in_time(ks),
                            tuple(reduction), _element_bytes(an.scop)))
    return result


def kernel_variants(prepared: Prepared, params: Mapping[str, int], candidate: int,
                    kernel: int, options: SpaceOptions = SpaceOptions()) -> list[Variant]:
    """The space of one kernel of candidate ``candidate``, built like :func:`variants`
    from that kernel's own shape: whole variants, of which the per-kernel search
    (``strategies/per_kernel.py``) takes the per-kernel fields (tile, threads, jam,
    chunk, time_tile, unroll, shared, blocked, prefetch) with ``Variant.with_kernel``."""
    return variants(kernel_shapes(prepared, params, candidate)[kernel], options)


def _loops_in_time(kernel) -> bool:
    """Whether some statement's time schedule has a loop (what ``time_tile`` strips): a
    dimension that varies with the statement's iterators.  One that varies only with
    parameters -- a host loop's iterator, fixed for a launch -- is no loop inside it."""
    for m in maps_of(kernel.time):
        times = m.range()
        for d in range(times.dim(isl.dim_type.set)):
            try:
                low, high = times.dim_min(d), times.dim_max(d)
                if not high.domain().is_subset(high.eq_set(low)):
                    return True
            except isl.Error:  # unbounded: a loop
                return True
    return False


# mapped dimensions this short (at the tuned sizes) may get exactly their extent in
# threads, the block's other threads going to the next dimension out: a group of threads
# per small element, several elements a block (seed 000's contiguous groups).  A 32 x 32
# block over a batch of 4 x 4 products keeps 16 of its 256 threads busy.
SMALL_EXTENT = 32
AXIS_THREADS = (64, 1024, 1024)  # CUDA's most threads a block along z, y, x


def fitted_threads(extents: tuple[int, ...], total: int) -> tuple[int, ...] | None:
    """Threads (outer first, as ``extents``) for a block of about ``total`` threads in
    which the innermost dimensions no longer than :data:`SMALL_EXTENT`, together at most
    half of ``total``, get exactly their extents, and the next dimension out gets as
    many as fit (at least 2: several elements a block); the ones further out 1.  None
    where no inner dimension is that small or every mapped dimension is."""
    return _whole_inner(extents, total // 2, SMALL_EXTENT, total, least=2)


def _whole_inner(extents: Sequence[int], room: int, longest: int, total: int,
                 least: int) -> tuple[int, ...] | None:
    """Threads (outer first, as ``extents``) giving the innermost dimensions of at most
    ``longest`` points, together at most ``room`` threads, exactly their extents, and
    the next dimension out as many of ``total`` as are left (CUDA's limit on its axis;
    None below ``least``), the ones further out 1.  None where no inner dimension is
    given whole or every mapped dimension would be."""
    n = len(extents)
    inner, size = 0, 1
    while inner < n - 1 and extents[n - 1 - inner] <= longest and \
            size * extents[n - 1 - inner] <= room:
        size *= extents[n - 1 - inner]
        inner += 1
    if inner == 0:
        return None
    outer = n - 1 - inner  # the batch dimension
    many = min(total // size, extents[outer], AXIS_THREADS[MAX_MAPPED - n + outer])
    if many < least:
        return None
    return (1,) * outer + (many,) + tuple(extents[outer + 1:])


def _thread_shapes(n: int, total: int, options: SpaceOptions,
                   extents: tuple[int, ...] | None = None) -> list[tuple[int, ...]]:
    """Ways to spread ``total`` threads over ``n`` dimensions, x a warp-friendly size,
    and with ``extents`` the block fitted to small inner dimensions
    (:func:`fitted_threads`)."""
    fitted = fitted_threads(extents, total) if extents is not None else None
    if n == 1:
        return [(total,)]
    result = [fitted] if fitted is not None else []
    for x in options.x_threads:
        if x > total or total % x:
            continue
        rest = total // x
        if n == 2:
            shape = (rest, x)
            if shape not in result:
                result.append(shape)
        else:  # three dims: y gets what it can up to 64, z the rest
            for y in (1, 2, 4, 8, 16, 32, 64):
                if rest % y == 0 and rest // y <= 64 and (rest // y, y, x) not in result:
                    result.append((rest // y, y, x))
    return result


# a tile that does not divide its extent leaves slots of the last blocks idle; where
# some tiles divide the extents, those leaving up to this fraction of the grid's slots
# along a dimension idle join them (2000 under tiles of 128: 2.3 %; all-pairs at
# n = 2000 tuned 2.81 -> 2.34 ms on the H100 with them and full_tiles).  The code
# generator runs whole tiles without guards (codegen/full_tiles.py), so such a tile
# costs its idle slots and a second copy of the body, no longer a guard per
# register-tile point.
MAX_IDLE = 1 / 8


def _tiles_ok(tile_: tuple[int, ...], extents: tuple[int, ...], idle: float = 0.0) -> bool:
    """Whether ``tile_`` fits ``extents`` and divides them, or leaves at most ``idle`` of
    the slots along each dimension idle."""
    return all(t <= e and (-e) % t <= idle * (e + (-e) % t)
               for t, e in zip(tile_, extents, strict=True))


def _structures(n, totals, extents, options: SpaceOptions, even: bool,
                max_points: int, wide: bool = False, idle: float = 0.0) -> list[tuple]:
    """(threads, factors, tile) of every block shape, filtered by the extents; with
    ``wide``, also the ``wide_factors`` register tiles."""
    wides = [(1,) * (n - 2) + f for f in options.wide_factors] if wide and n >= 2 else []
    result = []
    for total in totals:
        for threads in _thread_shapes(n, total, options, extents):
            for factors in [*itertools.product(options.factors, repeat=n), *wides]:
                if math.prod(factors) > max_points and factors not in wides:
                    continue
                tile_ = tuple(t * f for t, f in zip(threads, factors, strict=True))
                if even and _tiles_ok(tile_, extents, idle) or not even and all(
                        t <= max(e, 32) for t, e in zip(tile_, extents, strict=True)):
                    result.append((threads, factors, tile_))
    return result


def _reduction_structures(shape: Shape, n, totals, extents, options: SpaceOptions
                          ) -> list[tuple]:
    """(threads, factors, tile, jam) with one reduction dimension's factor from
    ``reduction_factors`` (a loop) or ``reduction_jam`` (a register tile), others 1."""
    found = []
    dims = [d - (shape.n_mapped - n) for d in shape.reduction_dims]
    for d in (d for d in dims if 0 <= d < n):
        for jam, factors in ((False, options.reduction_factors),
                             (True, options.reduction_jam)):
            for f in factors:
                vector = tuple(f if k == d else 1 for k in range(n))
                for total in totals:
                    for threads in _thread_shapes(n, total, options, extents):
                        tile_ = tuple(t * v for t, v in zip(threads, vector, strict=True))
                        if _tiles_ok(tile_, extents):
                            found.append((threads, vector, tile_, jam))
    return found


def variants(shape: Shape, options: SpaceOptions) -> list[Variant]:
    """All points of the space for one candidate, in a deterministic order."""
    n = min(shape.n_mapped, MAX_MAPPED)
    extents = shape.extents[-n:]
    totals = [t for t in options.thread_totals if t <= MAX_THREADS]
    points = options.max_points_reduction if shape.reduction_dims else options.max_points
    # small problems: add smaller blocks (down to a warp) until some tile fits
    while totals and not _structures(n, totals, extents, options, False, points) \
            and min(totals) > 32:
        totals.append(min(totals) // 2)
    # tiles that divide the work evenly, and with them those that nearly do (MAX_IDLE);
    # if none divides (odd sizes, PolyBench's 2000 x 2600), all that fit
    wide = not shape.reduction_dims and shape.element_bytes == 4
    even = _structures(n, totals, extents, options, True, points, wide)
    even = _structures(n, totals, extents, options, True, points, wide, MAX_IDLE) \
        if even else _structures(n, totals, extents, options, False, points, wide)
    time_tiles = options.time_tiles if shape.has_time_loop else (0,)
    structures = [(t, f, tl, any(x > 1 for x in f)) for t, f, tl in even]
    structures += _reduction_structures(shape, n, totals, extents, options)
    result = []
    for threads, factors, tile_, jam in structures:
        # unroll-and-jam already unrolls a register tile completely; blocked points
        # only pay off in one dimension (in more they break coalescing along x)
        # (the loop around it, a time loop, is unrolled by jam_unrolls)
        unrolls = options.unrolls if not jam else \
            options.jam_unrolls if shape.has_time_loop else (1,)
        steps, staging = time_tiles, options.shared
        if math.prod(factors) > points:  # a wide register tile (SpaceOptions)
            steps = tuple(t for t in options.wide_time_tiles if shape.has_time_loop) or (0,)
            unrolls, staging = (max(steps),) if steps != (0,) else unrolls, (True,)
        blocked_options = options.blocked if jam and n == 1 and not shape.reduction_dims \
            else (False,)
        # runs of points only where a thread has several points along some dimension
        chunks = options.chunks if jam and any(
            t < x for t, x in zip(threads, tile_, strict=True)) else (1,)
        for time_tile, unroll, shared in itertools.product(steps, unrolls, staging):
            prefetch = options.prefetch if shared and time_tile else (False,)
            doubled = options.double_buffers if shared and time_tile else (False,)
            # blocked points are one run already: chunk 1 with them
            distributions = [(b, c) for b in blocked_options for c in ((1,) if b else chunks)]
            for (blocked, chunk), early, double in itertools.product(distributions, prefetch,
                                                                     doubled):
                result.append(Variant(candidate=shape.candidate, tile=tile_,
                                      threads=threads, jam=jam, time_tile=time_tile,
                                      unroll=unroll, blocked=blocked, shared=shared,
                                      chunk=chunk, prefetch=early, double_buffer=double,
                                      specialize=options.specialize,
                                      fast_math=options.fast_math))
    return result


DEVICE_STEP_VARIANTS = 4
# a batch's block of groups of threads, one element each: 4 elements.  Where an element
# is large, fewer a block leave less shared memory idle (per-element Cholesky at n = 64,
# 16.9 kB resident each: 12 resident an SM instead of 8, 5.26 ms against 7.45); where
# it is small, the threads an SM holds bound the elements either way (n = 8..32: within
# 2 %; H200, 1.5 GB, tuning/results/NVIDIA-H200/batched.md)
GROUP_BLOCK_THREADS = 128


def group_variants(candidate: int, extents: Sequence[int], n_mapped: int,
                   specialize: bool = True, kernel_dims: Sequence[int] = (),
                   narrow: bool = False, interleaved: bool = False) -> list[Variant]:
    """A batch's plans with a warp per element, several elements per block
    (``elements_per_block``): the warp's threads spread as the inner extents allow,
    its tile the element's extents rounded up to them (a loop of points per thread),
    the element resident in shared memory (specialized only) and not.  A step of one
    mapped dimension among steps of more (``kernel_dims``: each kernel's) takes the
    whole warp along it, not the innermost 8 of the warp's 4 x 8, where the element is
    wider than those 8 (Cholesky's column scaling, H200 2026-11-30: 4.876 against 5.231
    ms at n = 64, 1.5 GB; at n = 32 2.437 against 2.747 with the 2-d steps' tile 64 x 64,
    not the 32 x 32 taken here: unmeasured, as is n = 16).  With ``narrow`` (nests fused
    over their elements, measured there only) elements at most :data:`NARROW_GROUP`
    wide also get groups as wide as their rows, first.  ``interleaved`` (the batch's
    arrays SoA): the element blocks also several a block (:func:`element_blocks`)."""
    n = min(max(n_mapped, 1), MAX_MAPPED)
    extents = tuple(extents[-n:])
    threads = (32,) if n == 1 else (1,) * (n - 2) + (4, 8)
    tile = tuple(t * max(1, -(-min(e, 64) // t)) for e, t in zip(extents, threads,
                                                                  strict=True))
    base = Variant(candidate=candidate, tile=tile, threads=threads, shared=False,
                   device_steps=True, specialize=specialize,
                   elements_per_block=GROUP_BLOCK_THREADS // 32)
    if n > 1 and extents[-1] > threads[-1]:
        line = replace(base, tile=(64,), threads=(32,))
        for k, dims in enumerate(kernel_dims):
            if dims == 1:
                base = base.with_kernel(k, line)
    found = [base]
    if narrow and extents[-1] <= NARROW_GROUP:
        # tiny elements: a group as wide as their rows (a power of two), a row of points
        # a thread along the others -- several elements a warp
        width = max(2, 1 << (extents[-1] - 1).bit_length())
        threads = (1,) * (n - 1) + (width,)
        tile = tuple(t * max(1, -(-min(e, 64) // t)) for e, t in zip(extents, threads,
                                                                      strict=True))
        found.insert(0, replace(base, tile=tile, threads=threads,
                                elements_per_block=NARROW_BLOCK_THREADS // width))
    resident = [replace(v, resident=True) for v in found if specialize]
    return resident + found + (element_blocks(base, extents, kernel_dims, interleaved)
                               if specialize and not narrow else [])


# warps of the blocks that run one resident element each (element_blocks): where shared
# memory holds few elements an SM, a warp each leaves the SM with few warps to hide
# latency (H100, double Cholesky at n = 64, 12 elements an SM: a warp each 2.981 ms, 2
# warps 2.670, 4 warps 2.528; in float, 24 an SM, a warp each is fastest: 3.463, 3.697,
# 4.146; tuning/results/NVIDIA-H100-80GB-HBM3/batched.md)
ELEMENT_BLOCK_WARPS = (2, 4)


# a block of interleaved elements (SoA) runs this many threads in groups of several
# warps, one element each (element_blocks' grouped twins): the block copies its
# elements together, a run of as many words as elements per sector, where a block of
# one element reads a sector for each word
GROUPED_BLOCK_THREADS = 256


def element_blocks(group: Variant, extents: Sequence[int],
                   kernel_dims: Sequence[int] = (), grouped: bool = False
                   ) -> list[Variant]:
    """A warp-per-element plan's (``group``) twins with one element a block of
    :data:`ELEMENT_BLOCK_WARPS` warps, resident: 8 rows of 8 or 16 threads (a line of
    64 or 128), its tile the element's extents rounded up to them, a step of one mapped
    dimension on as many threads as the element's rows need (up to the block).  Only
    where every thread gets two points at least.  With ``grouped`` (interleaved
    elements) each also with :data:`GROUPED_BLOCK_THREADS` threads a block, several
    elements, after the others."""
    found = []
    for warps in ELEMENT_BLOCK_WARPS:
        n = len(group.threads)
        threads = (32 * warps,) if n == 1 else (1,) * (n - 2) + (8, 4 * warps)
        tile = tuple(t * max(1, -(-min(e, 64) // t)) for e, t in zip(extents, threads,
                                                                      strict=True))
        if 2 * math.prod(threads) > math.prod(min(e, 64) for e in extents):
            continue
        block = Variant(candidate=group.candidate, tile=tile, threads=threads,
                        shared=False, device_steps=True, specialize=True, resident=True,
                        time_tile=group.time_tile)
        if n > 1:
            width = min(32 * warps, 32 * -(-max(min(e, 128) for e in extents) // 32))
            line = replace(block, tile=(width,), threads=(width,))
            for k, dims in enumerate(kernel_dims):
                if dims == 1:
                    block = block.with_kernel(k, line)
        found.append(block)
    if grouped:
        found += [replace(b, elements_per_block=GROUPED_BLOCK_THREADS // math.prod(
            b.threads)) for b in found]
    return found


# a fused batch's elements up to this wide get narrow groups (group_variants): on the
# H200 seed 003's chain (3 x 3 and 5 x 5 elements, 2^22 instances) ran in 1.29 ms with
# 8-thread groups, 32 a block, against 2.65 with a warp per element, 4 a block
# (tuning/results/NVIDIA-H200/fusion.md, 2026-12-02)
NARROW_GROUP = 8
NARROW_BLOCK_THREADS = 256


# a batch's elements fill a staged block of about this many threads (element_variants):
# 128 measured best for dot, gemv at n = 16..128 on the H200 (2026-11-29, batched.md)
ELEMENT_BLOCK_THREADS = 128
LARGEST_ELEMENT_EXTENT = 128  # inner extents up to this count as an element's
# narrower elements stay unstaged (fitted_threads): a thread per row of 2..8 words already
# reads whole lines across a warp, and a copy with its barriers cost 5x (H100, 4 x 4
# products, tuning/results/NVIDIA-H100-80GB-HBM3/batched.md)
MIN_STAGED_ELEMENT = 16


def element_rows(extents: Sequence[int], total: int) -> tuple[int, ...] | None:
    """Threads (outer first, as ``extents``) giving the innermost mapped dimensions of
    at most :data:`LARGEST_ELEMENT_EXTENT` points their whole extents and the next one
    out what is left of ``total`` (1 at least): a thread per row of a few whole
    elements.  None where the innermost dimension is longer, or nothing is left for an
    outer dimension (a single mapped dimension: its shapes are the plain ones)."""
    return _whole_inner(extents, total, LARGEST_ELEMENT_EXTENT, total, least=1)


REGISTER_POINTS = 4  # a register-tiled element's points per thread along each tiled dim


def element_variants(shape: Shape) -> list[Variant]:
    """A batch's staged plans sized to its elements, specialized (the copies then run
    over what the element holds, not the parametric tile: codegen/staging.py
    ``copied_extents``), time tiles no wider than the element's loop: with a single
    mapped dimension and a loop of at most 128 points, a thread per element (dot);
    with a time loop over two inner dimensions, register tiles of
    :data:`REGISTER_POINTS` x :data:`REGISTER_POINTS` points a thread -- over several
    elements and the rows of each where elements are 8 to 16 wide, over the element's
    32 x 32 up to 32, a 64 x 64 tile in time tiles of 16, runs of points, prefetched
    and double-buffered copies beyond (in double, where the element is whole such
    tiles, first its time loop on the tensor cores: ``Variant.mma``); then a thread per
    row of a few whole elements from 16 points (gemv).  Measured on the H200
    (batched.md): gemm 9.9x torch.bmm at n = 8 (2026-11-29), 1.04x / 0.91x at n = 64 /
    128 in float (2026-11-30); dot and gemv 84-99 % of the copy rate at n = 16..128.
    Products narrower
    than a register tile and rows of tiny elements unstaged (:func:`_tiny_variants`);
    interleaved elements, the batch innermost, by :func:`_interleaved_variants`.  Empty
    where the innermost extent is longer than 128 points (and not such a batch) or
    there are fewer than 256 elements."""
    extents, n = shape.extents, shape.n_mapped
    c = shape.candidate
    # an element's loop needs no wider time tile: its buffers take the shared memory
    # of the points it holds, not of 32 (occupancy)
    time_tile = min(32, shape.time_extent) if shape.time_extent > 0 else 32
    if 2 <= n <= MAX_MAPPED and shape.has_time_loop and \
            extents[-1] >= 2 * ELEMENT_BLOCK_THREADS and \
            max(extents[:-1]) <= LARGEST_ELEMENT_EXTENT:
        return _interleaved_variants(shape, time_tile)
    if n == 1:  # a thread per element of a reduction over at most 128 points
        if shape.has_time_loop and 0 < shape.time_extent <= LARGEST_ELEMENT_EXTENT and \
                extents[0] >= 2 * ELEMENT_BLOCK_THREADS:
            # each staged array takes 128 x time tile words: 16 KB at most (in double a
            # time tile of 16, not 32: 64 KB a block left 3 blocks an SM)
            return [Variant(candidate=c, tile=(ELEMENT_BLOCK_THREADS,),
                            threads=(ELEMENT_BLOCK_THREADS,),
                            time_tile=min(time_tile, 128 // shape.element_bytes),
                            specialize=True)]
        return []
    if n > MAX_MAPPED or extents[-1] > LARGEST_ELEMENT_EXTENT or \
            extents[0] < 2 * ELEMENT_BLOCK_THREADS:
        return []
    found = []
    if shape.has_time_loop and n == 3:
        e, ni, nj = extents
        p = REGISTER_POINTS
        if max(ni, nj) < 2 * p:  # tiny elements: unstaged, the sizes constants
            found += _tiny_variants(shape, time_tile)
        elif 2 * p <= min(ni, nj) and max(ni, nj) <= 16:
            # several elements a block, 4 x 4 points a thread over (element, row)
            many = max(p, min(e, 2048 // (ni * nj)) // p * p)
            rows_i = -(-ni // p) * p
            found.append(Variant(candidate=c, tile=(many, rows_i, nj),
                                 threads=(many // p, rows_i // p, nj), jam=True,
                                 time_tile=time_tile, specialize=True))
        elif min(ni, nj) > 16 and max(ni, nj) <= 32:
            found.append(Variant(candidate=c, tile=(32, 32), threads=(8, 8), jam=True,
                                 time_tile=time_tile, specialize=True))
        elif min(ni, nj) > 32:
            # a 64 x 64 tile in time tiles of 16, prefetched, two buffers used in turn:
            # in float 8 x 4 points a thread in runs of 4 (H200, 2026-11-30: 0.563 /
            # 0.992 ms at n = 64 / 128 against 0.674 / 1.161 for 4 x 4 points), in double
            # 4 x 4 in runs of 2 (0.586 / 1.094 against 0.784 / 1.380 for the 32 x 32
            # tile of 8 x 8 threads; 8 x 8 points took 0.581 / 1.005 but 254 registers,
            # which spill in partial tiles)
            wide = shape.element_bytes == 4
            if not wide and ni % 64 == 0 and nj % 64 == 0 and \
                    shape.time_extent % 16 == 0:
                # whole 64 x 64 tiles in double: the time loop on the tensor cores
                # (codegen/mma.py), 2 x 16 points a thread over 4 x 32 threads (H200,
                # 2026-11-30: 0.490 / 0.588 ms at n = 64 / 128 against the FMA plan's
                # 0.571 / 1.077 and torch.bmm's 0.375 / 0.413).  Listed first: the model
                # prices both by their traffic, alike, and a tie keeps the earlier plan
                # (tests/test_batched.py replays the run that measured both)
                found.append(Variant(candidate=c, tile=(64, 64), threads=(32, 4),
                                     jam=True, time_tile=16, unroll=4, chunk=2,
                                     prefetch=True, double_buffer=True, specialize=True,
                                     mma=True))
            found.append(Variant(candidate=c, tile=(64, 64),
                                 threads=(8, 16) if wide else (16, 16), jam=True,
                                 time_tile=16, unroll=4, chunk=4 if wide else 2,
                                 prefetch=True, double_buffer=True, specialize=True))
    if n == 2 and shape.has_time_loop and extents[-1] < MIN_STAGED_ELEMENT:
        # rows of tiny elements: a thread a row, several elements a block, unstaged, the
        # sizes constants (what halved the tiny products' time)
        fitted = fitted_threads(extents, 256)
        if fitted is not None:
            found.append(Variant(candidate=c, tile=fitted, threads=fitted,
                                 time_tile=time_tile, shared=False, specialize=True))
    rows = element_rows(extents, ELEMENT_BLOCK_THREADS)
    if rows is not None and extents[-1] >= MIN_STAGED_ELEMENT:
        found.append(Variant(candidate=c, tile=rows, threads=rows, time_tile=time_tile,
                             specialize=True))
    return found


# a tiny element whose every array is at most one 16-byte vector is a thread's: a warp's
# loads of one word of 32 such elements span 4 lines that its next loads reuse (H200,
# 2 x 2 fp32 products 0.188 ms, 4.1 TB/s, against 0.234 for a thread per point; 2 x 2
# fp64, 32 bytes, 0.319 against 0.192: tuning/results/NVIDIA-H200/batched.md)
THREAD_ELEMENT_BYTES = 16


def _tiny_variants(shape: Shape, time_tile: int) -> list[Variant]:
    """A batch of elements narrower than a register tile (``shape.extents`` = element,
    rows, columns): a thread per element where each of its arrays is a vector at most
    (:data:`THREAD_ELEMENT_BYTES`), then a thread per point over whole elements, about
    256 threads a block.  Unstaged (the element stays in L1: a copy with its barriers
    cost 5x on the H100) and specialized: the element's sizes are constants, its
    indices fold (2 x 2 products: 0.234 ms against 0.436 with the sizes arguments)."""
    e, ni, nj = shape.extents
    c = shape.candidate
    found = []
    if ni * nj * shape.element_bytes <= THREAD_ELEMENT_BYTES:
        found.append(Variant(candidate=c, tile=(ELEMENT_BLOCK_THREADS, ni, nj),
                             threads=(ELEMENT_BLOCK_THREADS, 1, 1), jam=True,
                             time_tile=time_tile, shared=False, specialize=True))
    per_block = max(1, 256 // (ni * nj))
    found.append(Variant(candidate=c, tile=(per_block, ni, nj), threads=(per_block, ni, nj),
                         time_tile=time_tile, shared=False, specialize=True))
    return found


def _interleaved_variants(shape: Shape, time_tile: int) -> list[Variant]:
    """A batch of interleaved elements (structure of arrays: the batch is the innermost
    mapped dimension, ``shape.extents`` = the element's rows (and columns), then the
    elements): 128 or 32 consecutive elements a block, so every load of a warp is one
    line, and the element's points in registers.  A matrix-vector (two mapped dims): a
    thread per element and all its rows up to 16, else 8.  A product (three): a thread
    per whole element up to 16 points, unstaged; up to 8 x 8, 2 x 2 threads of 4 x 4
    points for 32 elements; up to 32, 8 x 8 points a block, a row of 8 a thread,
    staged.  Measured on the H200 (2026-11-29, batched.md, 1.5 GB): gemv 86-104 % of
    the copy rate at n = 2..128 (the plain shapes 0.25-4.1 ms for 768 MB), gemm 88-102 %
    at n = 2..8 (6.0 and 97 ms at 2 and 4 for 768 MB before), 48 % at 16; beyond, the
    plain shapes (the elements' rows are better moved first: unbuilt)."""
    extents, c = shape.extents, shape.candidate
    lanes = ELEMENT_BLOCK_THREADS
    if shape.n_mapped == 2:  # all the element's rows up to 16 (H200, 1.5 GB at n = 16:
        # 0.41 ms against 0.46 for 8), else 8 (more blocks: 0.42 against 0.62 ms for 32
        # at n = 64)
        rows = extents[0] if extents[0] <= 16 else 8
        return [Variant(candidate=c, tile=(rows, lanes), threads=(1, lanes), jam=True,
                        time_tile=time_tile, shared=False, specialize=True)]
    ni, nj = extents[0], extents[1]
    if ni * nj <= REGISTER_POINTS * REGISTER_POINTS:
        return [Variant(candidate=c, tile=(ni, nj, lanes), threads=(1, 1, lanes), jam=True,
                        time_tile=time_tile, shared=False, specialize=True)]
    if max(ni, nj) <= 2 * REGISTER_POINTS:
        return [Variant(candidate=c, tile=(8, 8, 32), threads=(2, 2, 32), jam=True,
                        time_tile=time_tile, specialize=True)]
    if max(ni, nj) <= 32:
        return [Variant(candidate=c, tile=(8, 8, 32), threads=(1, 8, 32), jam=True,
                        time_tile=time_tile, specialize=True)]
    return []


RELAYOUT_VARIANTS = 16  # plain shapes of a relaid batch's nest in the search space


def space(prepared: Prepared, params: Mapping[str, int],
          options: SpaceOptions = SpaceOptions()) -> list[Variant]:
    """The whole space of a prepared region at ``params``; for a candidate with host
    loops also a few of its variants with the loops run on the device in one block
    (``device_steps``: one launch instead of one per step, which only measurement can
    weigh against a whole GPU per step), shared staging off so every kernel can take it,
    each with its twin whose data is resident in shared memory for the block's life; a
    batch's also with a warp per element (:func:`group_variants`)."""
    result = []
    packed: dict[int, bool] = {}  # per candidate: whether its elements pack
    for s in shapes(prepared, params, options.candidates):
        found = variants(s, options)
        result += found
        host = prepared.candidates[s.candidate].host
        # device steps also with the block's data resident in shared memory for its
        # life (memory/residence.py), where the variants are specialized (constant
        # extents); a region whose data does not fit is refused when compiled
        twins = (False, True) if options.specialize else (False,)
        if host is not None and host.grid_dims:
            # a batch runs on the device only (pipeline.batch_on_device): every shape
            # there, one element per block, kernels unstaged like every device-steps plan
            result = result[:len(result) - len(found)]
            # resident ones also with triangular elements packed (memory/residence.py)
            if s.candidate not in packed:
                packed[s.candidate] = options.specialize and packable_at(
                    prepared.candidates[s.candidate], params)

            def layouts(device: Variant, pack: bool = packed[s.candidate]) -> list[Variant]:
                return [device, replace(device, packed=True)] \
                    if device.resident and pack else [device]
            for v in found:
                for resident in twins:
                    for device in layouts(replace(v, device_steps=True, shared=False,
                                                  prefetch=False, resident=resident)):
                        if device not in result:
                            result.append(device)
            dims = [k.n_space for k in prepared.candidates[s.candidate].kernels]
            for group in group_variants(s.candidate, s.extents, s.n_mapped,
                                        options.specialize, dims,
                                        narrow=host.kind == "fused batch",
                                        interleaved=prepared.relaid_body is not None):
                for device in layouts(group):
                    if device not in result:
                        result.append(device)
        elif host is not None:
            seen = set()
            for v in found:
                device = replace(v, device_steps=True, shared=False, prefetch=False)
                if device not in seen and len(seen) < DEVICE_STEP_VARIANTS:
                    seen.add(device)
                    result += [replace(device, resident=r) for r in twins]
    # an interleaved batch's plans also on the element-outermost copy (transposed in and
    # out: transform/layout.py): the element plans of that nest and the first of its
    # plain shapes -- where it is a batch of elements (element plans exist): a region
    # whose arrays merely have the outer loop's iterator last (tmv's a[j][i]) keeps its
    # search as it was
    body = prepared.relaid_body
    if body is not None:
        for s in shapes(body, params, options.candidates):
            sized = element_variants(s) if body.candidates[s.candidate].coalesced else []
            if not sized:
                continue
            for v in sized + variants(s, options)[:RELAYOUT_VARIANTS]:
                v = replace(v, relayout=True)
                if v not in result:
                    result.append(v)
    return result
