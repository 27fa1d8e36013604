"""Re-reads and re-writes of a thread's own elements that no cache keeps: the traffic
model's blind spot.

:mod:`polygpu.memory.traffic` counts an array read directly from global memory once per
block, what a perfect per-block cache would fetch.  That holds where a block's reuse is
shared by its threads in lock-step (a warp reads one row of mm's ``A`` together, a
stencil's neighbours) or where what each thread re-reads fits the caches.  It fails where
every thread cycles over a private footprint too large for the caches of all the threads
running at once: a thread per element of an interleaved batched Cholesky re-reads its
element's ``n^2 / 2`` words about ``n / 3`` times over, and at ``n = 64`` in double its
23,076 threads keep 384 MB in flight, 8x the L2 cache -- the re-reads come from DRAM,
17 GB where the per-block count gives 0.8.

:func:`spilled_rereads` counts, per array in global memory, a thread's loads of it
beyond the elements it reads and its stores beyond the elements it writes (its
footprints; all counted with isl on three sample threads) and prices both as DRAM
traffic where what the running threads keep in flight exceeds L2: the least of their
footprints summed, their blocks' footprints (threads that share a row, like mm's, count
it once) and everything the kernel touches.  A store is a write-back there: the line it
dirtied leaves L2 before the thread writes it again (the in-place trailing update stores
once for every two loads; without the stores the interleaved Cholesky's thread per
element was predicted 1.5-1.7x fast at n = 16, 32 on the H100).
A thread's accesses are one per point of its loops but the innermost (an element that
does not move along that loop stays in a register: a row's pivot, a reduction's target)
or, with a register tile, but the unrolled point loops -- so a register tile's threads,
which load each element once, add nothing.
Re-reads that fit L2 but not L1 are L2 hits: :meth:`SelfReuse.l2_bytes` counts them,
with every store (L1 writes through), as the bytes the threads move through L2, which
the cost model prices at L2's rate beside the DRAM traffic (``Limits.
l2_access_bytes_per_s``).  A thread per interleaved element at n = 8 keeps 176-352 bytes
of its element live (float, double), 2048 threads an SM 352-704 kB: more than L1's 256
kB, so each of its 547-610 loads and stores an element goes to L2, and the schedule
that keeps the forward solve's sums in registers (fewer of them) ran 1.05-1.12x faster
on the H100, in the ratio of the accesses.

Those DRAM bytes move slower than a copy's: each thread's next access waits for the one
before, and reads and write-backs interleave.  :data:`SPILLED_RATE_SHARE` is the share
of the copy rate they reach, measured.
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from polygpu.memory.operand_loads import thread_stride
from polygpu.memory.placement import MemoryPlan
from polygpu.memory.traffic import SECTOR_BYTES, sample_tiles
from polygpu.model.dependences import maps_of
from polygpu.model.isl_util import count_points
from polygpu.model.scop import Scop, fix_parameters
from polygpu.schedule.tiling import TiledKernel

# the share of the copy rate that spilled re-reads and write-backs reach: the launched
# thread per interleaved element of the batched Cholesky on the H100 (2026-12-07, median
# of 5; n = 16 and 32, both precisions, two plans each, 1.5 GB, 48 to 21 warps an SM)
# moved its modelled bytes at 1.95-2.67 TB/s, median 2.35, against a 3.0 TB/s copy
# (tuning/results/NVIDIA-H100-80GB-HBM3/batched_cholesky_soa_mappings_fp*_1536mb.json)
SPILLED_RATE_SHARE = 0.78


@dataclass(frozen=True)
class SelfReuse:
    """One array's reuse by the threads of one kernel, at fixed parameters."""

    array: str
    threads: int  # threads that access the array
    footprint: int  # (thread, element) pairs: each thread's distinct elements read, summed
    reads: int  # the threads' loads of it, in words
    block_bytes: float  # a block's distinct elements, on average, in bytes
    touched_bytes: int  # the elements the whole kernel accesses, in bytes
    element_size: int
    scattered: bool  # neighbouring threads' elements are apart: a sector a word
    written: int = 0  # (thread, element) pairs: each thread's distinct elements written
    writes: int = 0  # the threads' stores to it, in words
    accessed: int = 0  # (thread, element) pairs read or written (0: ``footprint``)
    # the first block's distinct elements over its (thread, element) pairs: 1 where its
    # threads share none, 1/4 where four threads read each (a group's row of a product)
    block_share: float = 1.0

    @property
    def thread_bytes(self) -> float:
        """A thread's footprint (what it reads or writes) in bytes, on average."""
        return (self.accessed or self.footprint) / max(self.threads, 1) * self.element_size

    def live_bytes(self, running_threads: int, threads_per_block: int) -> float:
        """What ``running_threads`` threads at once keep in flight: their footprints,
        counted once where their block's threads share them (mm's rows), and no more
        than the kernel touches in all."""
        blocks = -(-running_threads // max(threads_per_block, 1))
        return min(min(running_threads, self.threads) * self.thread_bytes,
                   blocks * self.block_bytes, self.touched_bytes)

    def spilled_bytes(self, running_threads: int, threads_per_block: int,
                      cache_bytes: int) -> int:
        """The DRAM bytes of the re-reads and re-writes (each a write-back) where what
        ``running_threads`` threads keep in flight exceeds ``cache_bytes``; else 0."""
        if self.live_bytes(running_threads, threads_per_block) <= cache_bytes:
            return 0
        return self.again_bytes

    def l2_bytes(self, reloaded: bool) -> int:
        """The bytes the threads' loads and stores move through L2: every store (L1
        writes through) and each element's first load, once a block (its threads share
        it through L1) -- and, ``reloaded`` where L1 cannot keep the threads' elements
        (:func:`through_l2`), every load again, a sector each where neighbouring
        threads' elements are apart, in the share a block's threads do not have in
        common (lanes reading one word share its request).  Stores count a word each: a
        warp's stores to neighbouring elements merge in L2."""
        word = SECTOR_BYTES if self.scattered and reloaded else self.element_size
        loads = self.reads if reloaded else self.footprint
        return round(loads * word * self.block_share + self.writes * self.element_size)

    @property
    def again_bytes(self) -> int:
        """The bytes of the threads' loads and stores beyond their footprints: a sector
        each where neighbouring threads' elements are apart."""
        again = max(0, self.reads - self.footprint) + max(0, self.writes - self.written)
        return again * (SECTOR_BYTES if self.scattered else self.element_size)


def _kept_dims(kernel: TiledKernel, schedule: isl.Map) -> list[int]:
    """The local schedule dimensions that tell a thread's loads of one reference apart:
    all but a register tile's unrolled point dimensions (a read that does not move
    along one is loaded once for all its points), or without a register tile all but
    the statement's innermost loop (the compiler keeps a read that does not move along
    it in a register: a reduction's target, a row's pivot)."""
    m = kernel.n_mapped
    local = list(range(2 * m, schedule.dim(isl.dim_type.out)))
    if kernel.unroll_dims:
        unrolled = {2 * m + d for d in kernel.unroll_dims}
        return [d for d in local if d not in unrolled]
    scheduled = schedule.range()
    loops = [d for d in local if not scheduled.project_out(
        isl.dim_type.set, d + 1, scheduled.dim(isl.dim_type.set) - d - 1).project_out(
        isl.dim_type.set, 0, d).is_singleton()]
    return [d for d in local if not loops or d < loops[-1]]


def _project(schedule: isl.Map, keep: list[int]) -> isl.Map:
    """``schedule`` with only its output dimensions ``keep`` (in order)."""
    out = schedule
    for d in reversed(range(schedule.dim(isl.dim_type.out))):
        if d not in keep:
            out = out.project_out(isl.dim_type.out, d, 1)
    return out


def _scattered(scop: Scop, kernel: TiledKernel, statement: str, acc,
               params: dict[str, int]) -> bool:
    """Whether neighbouring threads (along x) read elements more than a word apart."""
    return kernel.n_mapped > 0 and thread_stride(scop, kernel, statement, acc, params) > 1


def _of(schedule: isl.Map, ids: isl.Set) -> isl.Map:
    """``schedule`` restricted to the instances whose leading dimensions are ``ids``."""
    rest = schedule.dim(isl.dim_type.out) - ids.dim(isl.dim_type.set)
    return schedule.intersect_range(ids.flat_product(isl.Set.universe(
        isl.Space.set_alloc(ids.get_ctx(), 0, rest))))


def self_reuse(scop: Scop, kernel: TiledKernel, params: dict[str, int],
               plan: MemoryPlan | None = None,
               resident: frozenset[str] = frozenset()) -> tuple[SelfReuse, ...]:
    """Per array ``kernel`` accesses straight in global memory (no shared or register
    buffer, not ``resident`` in a block's shared copy): its threads' footprints, loads
    and stores at ``params``, from the first, the last and a middle thread, and its
    blocks' footprints, from the first, the last and a middle block."""
    buffers = plan.of_kernel(kernel.index) if plan is not None else {}
    m = kernel.n_mapped
    schedules = {}
    for piece in maps_of(kernel.schedule):
        name = piece.get_tuple_name(isl.dim_type.in_)
        schedules[name] = fix_parameters(
            piece.intersect_domain(scop.statement(name).domain), params)
    result = []
    for array in scop.arrays:
        if array.name in buffers or array.name in resident:
            continue
        refs = [(a, fix_parameters(a.relation, params)) for a in scop.accesses
                if a.array == array.name and a.kind in ("read", "write")
                and a.statement in schedules]
        reads = [r for r in refs if r[0].kind == "read"]
        writes = [r for r in refs if r[0].kind == "write"]
        if not reads and not writes:
            continue

        threads = _ids(refs, schedules, 2 * m).coalesce()
        n_threads = count_points(threads)
        if n_threads == 0:
            continue
        samples = []
        for t in sample_tiles(threads):
            read = _footprint(reads, schedules, t) if reads else 0
            written = _footprint(writes, schedules, t) if writes else 0
            both = _footprint(refs, schedules, t) if reads and writes else read + written
            samples.append((read, written, both, _accesses(kernel, reads, schedules, t),
                            _accesses(kernel, writes, schedules, t)))
        blocks = sample_tiles(_ids(refs, schedules, m).coalesce())
        per_block = [_footprint(refs, schedules, b) for b in blocks]
        block = sum(per_block) / len(blocks)
        pairs = _pairs(refs, schedules, blocks[0], 2 * m)
        share = per_block[0] / pairs if pairs else 1.0
        touched = count_points(_union(rel.intersect_domain(schedules[a.statement].domain())
                                      .range() for a, rel in refs).coalesce())
        scattered = any(_scattered(scop, kernel, a.statement, a, params) for a, _ in refs)
        size = array.element_size
        read, written, both, loads, stores = (
            round(n_threads * sum(x) / len(samples)) for x in zip(*samples, strict=True))
        result.append(SelfReuse(array.name, n_threads, read, loads, block * size,
                                touched * size, size, scattered, written=written,
                                writes=stores, accessed=both, block_share=share))
    return tuple(result)


def _accesses(kernel: TiledKernel, refs, schedules: dict[str, isl.Map],
              ids: isl.Set) -> int:
    """The loads (or stores) of ``refs`` by the thread ``ids``: one per point of its kept
    loops (:func:`_kept_dims`) and element."""
    count = 0
    for a, rel in refs:
        sched = schedules[a.statement]
        kept = _project(_of(sched, ids), _kept_dims(kernel, sched))
        count += count_points(kept.reverse().apply_range(rel).wrap())
    return count


def _pairs(refs, schedules: dict[str, isl.Map], ids: isl.Set, dims: int) -> int:
    """The (thread, element) pairs of ``refs`` in the instances of ``ids``, a thread the
    schedules' first ``dims`` dimensions."""
    return count_points(_union(
        _project(_of(schedules[a.statement], ids), list(range(dims))).reverse()
        .apply_range(rel).wrap() for a, rel in refs).coalesce())


def _union(sets) -> isl.Set:
    """The union of sets of one space, as a set, empty ones included (an isl union set,
    ``union_of_sets``, drops empty parts: a union of empty footprints has no space to
    return a set in)."""
    sets = list(sets)
    out = sets[0]
    for s in sets[1:]:
        out = out.union(s)
    return out


def _ids(refs, schedules: dict[str, isl.Map], dims: int) -> isl.Set:
    """The ids (the schedules' first ``dims`` dimensions) of the instances of ``refs``."""
    return _union(_project(schedules[a.statement], list(range(dims))).range()
                  for a, _ in refs)


def _footprint(refs, schedules: dict[str, isl.Map], ids: isl.Set) -> int:
    """The distinct elements ``refs`` read in the instances of ``ids``."""
    return count_points(_union(
        rel.intersect_domain(_of(schedules[a.statement], ids).domain()).range()
        for a, rel in refs).coalesce())


def spilled_rereads(scop: Scop, kernel: TiledKernel, params: dict[str, int],
                    plan: MemoryPlan | None, resident: frozenset[str],
                    running_threads: int, cache_bytes: int) -> int:
    """DRAM bytes of ``kernel``'s re-reads and re-writes that the caches cannot hold
    (module doc): ``running_threads`` threads run at once over the GPU, ``cache_bytes``
    of L2.  Each array is held against the whole cache, though the arrays share it:
    a thread's whole footprint overstates what it keeps between two accesses of one
    element (the Cholesky's trailing triangle shrinks step by step), and summing the
    arrays would compound that -- in double at n = 8 a thread per element's triangles
    (49 MiB) and vectors (11 MiB) would spill together, where in float at the same
    bytes that thread ran 2.9x faster than the resident warps the spill would pick."""
    return spilled(self_reuse(scop, kernel, params, plan, resident), running_threads,
                   kernel.block_threads, cache_bytes)


def spilled(reuse: tuple[SelfReuse, ...], running_threads: int, threads_per_block: int,
            cache_bytes: int) -> int:
    """:func:`spilled_rereads` of a kernel's arrays already counted (``reuse``)."""
    return sum(r.spilled_bytes(running_threads, threads_per_block, cache_bytes)
               for r in reuse)


def through_l2(reuse: tuple[SelfReuse, ...], threads_per_sm: int, l1_bytes: int) -> int:
    """The bytes a kernel's threads move through L2 by their own accesses
    (:meth:`SelfReuse.l2_bytes`): loaded again each time where an SM's ``threads_per_sm``
    threads keep more of their arrays, all together, than ``l1_bytes`` of L1."""
    live = threads_per_sm * sum(r.thread_bytes for r in reuse)
    return sum(r.l2_bytes(live > l1_bytes) for r in reuse)
