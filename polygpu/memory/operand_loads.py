"""How many load instructions a thread issues per statement instance (its operands).

The traffic model (:mod:`polygpu.memory.traffic`) counts the bytes that cross DRAM;
once a tiling has cut those enough, a kernel like mm is bound by what each SM issues:
one FMA per instance plus the loads that bring its operands into registers (from shared
memory, L1 or DRAM).  A register tile (unroll-and-jam, ``jam``) cuts the loads: a read
whose element does not move along one of the thread's point dimensions is loaded once
for all of that dimension's points, so with ``f_y x f_x`` points mm loads ``f_y + f_x``
operands for ``f_y f_x`` FMAs.  Runs of ``w`` consecutive points (``chunk``) along the
dimension a buffer stores innermost load as vectors of up to 16 bytes.

``operand_loads`` is per kernel: instances (counted with isl at the parameters) and
load instructions, both summed over statements; a global read whose element jumps by
more than a word between neighbouring threads counts as several (:data:`SCATTERED_LOAD`).
Registers buffers (loaded once per thread) are free; stores are counted only where they
scatter (:func:`_scattered_stores`).  It is a model for ordering
variants, not a prediction of time.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import islpy as isl

from polygpu.memory.placement import MemoryPlan, neighbour_deltas, point_dims, unit_step
from polygpu.model.isl_util import extent_at
from polygpu.model.scop import Scop
from polygpu.schedule.tiling import TiledKernel

VECTOR_BYTES = 16  # the widest load a thread issues (ld.shared.v4.f32, LDG.128)
# a global read whose element jumps between neighbouring threads (x) by s > 1 words:
# the warp touches min(32, s) 128-byte lines, an L1 wavefront each -- one cycle of the
# SM's load unit, the time of 128 FP32 lanes (the issue model's unit) per 32 threads --
# so a load costs min(SCATTERED_LOAD, 4 s) against 1 for a coalesced one.  What a thread
# per element of an AoS batch pays on every operand (H200, per-element Cholesky: 3.7 ms
# at n = 8, 18.4 at 16, 49 at 64, L1-wavefront bound; results/NVIDIA-H200/batched.md)
SCATTERED_LOAD = 128


@dataclass(frozen=True)
class OperandLoads:
    instances: int  # statement instances of the kernel at the parameters
    loads: float  # load instructions for their operands


def _moves(deltas: isl.Set | None) -> bool:
    """Whether the element changes (some non-zero offset)."""
    if deltas is None or deltas.is_empty():
        return False
    zero = isl.Set.universe(deltas.get_space())
    for k in range(deltas.dim(isl.dim_type.set)):
        zero = zero.fix_val(isl.dim_type.set, k, isl.Val(0))
    return not deltas.is_subset(zero)


@functools.lru_cache(maxsize=256)
def _card(domain_text: str) -> isl.PwQPolynomial:
    return isl.Set(domain_text).card()


def instance_count(scop: Scop, statement: str, params: dict[str, int]) -> int:
    """Instances of ``statement`` at ``params``: barvinok's symbolic count, evaluated
    (enumerating mm's 4096^3 points would take minutes)."""
    return _count_at(scop.statement(statement).domain, params)


def thread_stride(scop: Scop, kernel: TiledKernel, statement: str, acc,
                   params: dict[str, int]) -> int:
    """Words between the elements neighbouring threads along x read (row-major, at
    ``params``); 0 when that is not one constant step or the element does not move."""
    deltas = neighbour_deltas(kernel, statement, acc.relation, kernel.n_mapped)
    if deltas is None or deltas.is_empty() or not deltas.is_singleton():
        return 0
    point = deltas.sample_point()
    shape = [extent_at(e, params) for e in scop.array(acc.array).shape]
    stride, below = 0, 1
    for d in reversed(range(len(shape))):
        stride += int(point.get_coordinate_val(isl.dim_type.set, d).to_python()) * below
        below *= max(shape[d], 1)
    return abs(stride)


def operand_loads(scop: Scop, kernel: TiledKernel, params: dict[str, int],
                  plan: MemoryPlan | None = None,
                  resident: frozenset[str] = frozenset()) -> OperandLoads:
    """Instances and operand load instructions of ``kernel`` (module doc).  Reads of
    ``resident`` arrays come from a block's shared copy of its element
    (memory/residence.py), one load each however far apart neighbouring threads'
    elements lie: priced as scattered global reads, a resident Cholesky element's
    column reads made its plans look issue-bound at 64x their loads."""
    buffers = plan.of_kernel(kernel.index) if plan is not None else {}
    # points per thread along each mapped dimension, innermost (x) first
    points = [-(-t // n) for t, n in zip(kernel.tile, kernel.threads, strict=True)]
    dims = point_dims(kernel)
    instances, loads = 0, 0.0
    for name in kernel.statements:
        count = instance_count(scop, name, params)
        instances += count
        per_tile = 0.0  # loads for one step of all the thread's points
        tile_points = math.prod(points) if kernel.unroll_dims else 1
        for acc in scop.accesses:
            if acc.statement != name or acc.kind != "read":
                continue
            # (the buffer this reference goes through: an array's apart reads have
            # their own, memory/placement.apart_reads)
            buffer = plan.buffer_for(kernel.index, name, acc.ref, acc.array) \
                if plan is not None else None
            if buffer is not None and buffer.space == "register":
                continue
            distinct, vector = 1, 1
            if buffer is None and kernel.n_mapped and acc.array not in resident:
                stride = thread_stride(scop, kernel, name, acc, params)
                if stride > 1:
                    distinct = min(SCATTERED_LOAD, 4 * stride)
            for dim, f in zip(dims, points, strict=True):
                if not kernel.unroll_dims or f == 1:
                    continue
                deltas = neighbour_deltas(kernel, name, acc.relation, dim)
                if not _moves(deltas):
                    continue
                distinct *= f
                n = deltas.dim(isl.dim_type.set)
                inner = buffer.storage_order[-1] if buffer is not None else n - 1
                if kernel.chunk > 1 and unit_step(deltas, inner):
                    size = scop.array(acc.array).element_size
                    vector = max(vector, min(kernel.chunk, f, VECTOR_BYTES // size))
            per_tile += distinct / vector
        loads += count * per_tile / tile_points
    return OperandLoads(instances, loads + _scattered_stores(scop, kernel, params, buffers,
                                                             resident))


def _scattered_stores(scop: Scop, kernel: TiledKernel, params: dict[str, int],
                      buffers: dict, resident: frozenset[str] = frozenset()) -> float:
    """What the stores of arrays written from registers or directly (not through a
    shared copy, whose loops run along the buffer's rows) cost beyond a coalesced
    store, where neighbouring threads' elements are more than a word apart: each element
    written once, at :data:`SCATTERED_LOAD`'s price of a scattered access, where that
    distance is more than a thread's own points along x (interleaved
    2 x 2 ... 16 x 16 products mapped element-outermost store ``c[i][j][e]`` with x
    along j: 1.1 ms against 0.44 along e, H200; results/NVIDIA-H200/batched.md).  A
    coalesced store costs nothing here: the model's order of such plans is as before.
    Stores to ``resident`` arrays go to the block's shared copy: one store each (a
    resident Cholesky's column division, a thread a row, had been priced at 68 a store
    at n = 17)."""
    if not kernel.n_mapped:  # one thread: no neighbour to scatter from
        return 0.0
    extra = 0.0
    for array in sorted({a.array for a in scop.accesses
                         if a.kind == "write" and a.statement in kernel.statements}):
        buffer = buffers.get(array)
        if buffer is not None and buffer.space == "shared" or array in resident:
            continue
        writes = [a for a in scop.accesses if a.kind == "write" and a.array == array
                  and a.statement in kernel.statements]
        stride = max(thread_stride(scop, kernel, a.statement, a, params) for a in writes)
        # a thread's own run of points along x fills the gap to its neighbour's (a
        # blocked register tile stores whole lines across the warp)
        if stride <= max(1, -(-kernel.tile[0] // kernel.threads[0])):
            continue
        written = None
        for a in writes:
            part = a.relation.intersect_domain(scop.statement(a.statement).domain).range()
            written = part if written is None else written.union(part)
        extra += _count_at(written.coalesce(), params) * min(SCATTERED_LOAD, 4 * stride)
    return extra


def _count_at(s: isl.Set, params: dict[str, int]) -> int:
    """The points of ``s`` at ``params``: barvinok's symbolic count, evaluated."""
    count = _card(str(s))
    point = isl.Set.universe(count.get_domain_space())
    for k in range(point.dim(isl.dim_type.param)):
        value = params.get(point.get_dim_name(isl.dim_type.param, k))
        if value is None:
            raise ValueError(f"no value for parameter "
                             f"{point.get_dim_name(isl.dim_type.param, k)}")
        point = point.fix_val(isl.dim_type.param, k, isl.Val(value))
    if point.is_empty():
        return 0
    return int(count.eval(point.sample_point()).to_python())
