"""Where each array of each kernel lives: registers, constant, shared or global memory.

The decision (paper §4.4-§4.5), per kernel and array, in this order:

1. **registers** -- some reference has register reuse (one thread re-touches its own
   elements, e.g. ``y[i]`` in mv, ``c[i][j]`` in mm) and a thread's footprint over the
   whole kernel fits a small constant box that the generated code can index with
   constants (one element, or the unrolled points of a register tile);
2. **constant** -- every reference is read by all threads of a warp at one address, the
   array is read-only in the whole region and its extents are compile-time constants
   whose bytes fit the 64 KB constant bank;
3. **shared** -- a reference the scheduler could not coalesce (the transformation's
   ``shared`` list) or one with reuse across threads: the block's footprint is staged at
   the outermost tile level where a constant box bounds it (``time_tile`` makes one for
   time loops), within the shared-memory budget; padded by Algorithm 2;
4. **global** otherwise (coalesced where the transformation says so).

The target of an *atomic* statement (a sum reduction whose reduction loop is a space
dimension, :mod:`polygpu.model.atomic`) is never shared or constant: threads combine
their partial sums in global memory with ``atomicAdd``.  Its register buffer holds a
thread's partial sums -- zeroed, accumulated, then added atomically -- and exists only
when every reference to the array in the kernel is such an update.

With the variant's ``prefetch``, the shared copy-ins of the deepest tile level of arrays
the kernel never writes are pipelined through registers (at most :data:`MAX_PREFETCH`
per thread): the decision is recorded here (``Buffer.prefetch``), the code generator
emits it (:mod:`polygpu.codegen.staging`) and the search's cost model reads it.

All references to an array in a kernel go through its buffer, so the buffer is the only
copy while the kernel runs.  Why the copies are exact: inside a kernel no dependence
crosses threads or blocks (the tiled schedule was proven so), so a thread's registers
and a tile's shared buffer only hold values no other thread writes meanwhile; a copy-in
loads a footprint's elements before their first use, a copy-out stores exactly the
elements written, and barriers separate copies from the computation.  A register
buffer skips the copies that carry no live value (:mod:`polygpu.memory.liveness`):
elements every read of which follows a write in the kernel are not loaded, and a
scratch array nobody reads after the kernel is not stored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import islpy as isl

from polygpu.frontend import ir
from polygpu.memory.footprints import (
    Box,
    bounding_box,
    footprint,
    triangle_pair,
    uniform_base,
)
from polygpu.memory.liveness import dead_after, live_in_reads
from polygpu.memory.padding import (
    WARP,
    CostModel,
    LaneReference,
    PaddingDecision,
    SharedReference,
    choose_padding,
    reference_degree,
)
from polygpu.model import atomic
from polygpu.model.analysis import Analysis
from polygpu.model.isl_budget import OutOfBudget, isl_operation_budget
from polygpu.model.isl_util import maps_of, memo_by_identity, memo_by_text, union_optional
from polygpu.model.scop import Scop
from polygpu.schedule.tiling import TiledKernel
from polygpu.schedule.transformation import Transformation
from polygpu.schedule.variant import Variant

MAX_REGISTERS = 128  # elements of one register buffer per thread (8 x 16 floats: 239 regs)
CONSTANT_BYTES = 64 * 1024
STATIC_SHARED_BYTES = 48 * 1024  # larger needs dynamic shared memory (opt-in)
MAX_SHARED_BYTES = 227 * 1024  # sm_90's opt-in maximum per block
REGISTER_SUFFIX = "_reg"  # a register buffer's C name: the array's and this
MAX_PREFETCH = 32  # prefetch registers per thread, over all buffers of a kernel
# a shared copy no larger than this is staged at the outermost tile level that bounds it;
# a larger one at a deeper level where that one is no larger than this.  Why: at known
# sizes (a recursion's pieces, transform/recursion.py) the whole reduction of a block is
# already a constant box -- 512 x 64 words of each operand for a 512-row trmm product,
# 256 KB, one block an SM or none -- where its time tile's is 16 x 64
PREFERRED_BUFFER_BYTES = STATIC_SHARED_BYTES


@dataclass(frozen=True)
class Buffer:
    """A shared-memory or register copy of part of one array in one kernel.

    Element ``e`` of the array is ``name[u]`` with ``e_d = box.base_d + stride_d * u_d``
    (chunked dimensions: see :class:`~polygpu.memory.footprints.Box`);
    the copy happens inside the first ``level`` tile-level loops (shared) or around the
    whole kernel (registers).  ``reads``/``writes`` are the exact footprints to load and
    to store back (parameters: see :mod:`polygpu.memory.footprints`).
    """

    kernel: int
    array: str
    space: str  # 'shared' | 'register'
    name: str
    dtype: str
    level: int
    box: Box
    padding: int
    reads: isl.Set | None
    writes: isl.Set | None
    decision: PaddingDecision | None = None
    # the statements whose references use the buffer (the others read the array in
    # global memory: only for arrays the kernel does not write)
    statements: frozenset[str] = frozenset()
    # a register buffer of partial sums: starts at zero, copied out with atomicAdd
    atomic: bool = False
    # storage order: declared dimension s holds box dimension order[s] (empty: as the
    # array); a transposed buffer puts the dimension a thread's runs of points move
    # along innermost, so the runs load as vectors
    order: tuple[int, ...] = ()
    # a shared buffer whose copy-in is prefetched through registers: the next tile's
    # elements are loaded during the current tile's work (see _prefetched)
    prefetch: bool = False
    # 2: the buffer exists twice and consecutive tiles use them in turn (see
    # _double_buffered); ``name[stage]`` is the buffer of the current tile
    stages: int = 1
    # the references ``(statement, ref)`` the buffer serves when an array the kernel
    # only reads has several buffers, one per group of references (see
    # _reference_groups); empty: every reference of ``statements`` to the array
    refs: frozenset[tuple[str, int]] = frozenset()
    # the references it serves read only elements the kernel never writes (of an array
    # it does write: :func:`apart_reads`), so it is copied like a read-only array's
    apart: bool = False
    # h > 0: two box dimensions (rows r, columns c; the last two, or the last two
    # before trailing ones of extent 1: footprints.triangle_pair) hold a lower triangle
    # (c <= r) stored packed, as LAPACK's rectangular full packed format: row r >= h at
    # [r - h][c], row r < h at [h - 1 - r][2 h - c] -- R - h rows of 2 h + 1 words for
    # R x C (h = R / 2: half the words).  Only resident buffers (memory/residence.py),
    # stored in the box's order
    packed: int = 0
    # the triangle is an upper one (c >= r), packed as the lower triangle of the
    # transposed box: element (r, c) where that box's (c, r) goes (its fold h = C / 2)
    packed_upper: bool = False
    # the storage dimension ``padding`` extends (-1: the innermost); a resident box of
    # interleaved elements pads the innermost before its trailing ones of extent 1
    # (footprints.padded_dimension)
    pad_dimension: int = -1
    # > 1: a register copy spread over this many lanes of a thread (Variant.lanes with
    # full_unroll): box element e along :attr:`lane_dimension` lives in lane e % lanes,
    # in slot e // lanes of that lane's copy (codegen/lane_registers.py)
    lanes: int = 1
    lane_dimension: int = 0

    @property
    def storage_order(self) -> tuple[int, ...]:
        return self.order or tuple(range(len(self.box.extents)))

    @property
    def triangle(self) -> tuple[int, int]:
        """The box dimensions ``(rows, columns)`` of a packed triangle."""
        return triangle_pair(self.box.extents)

    @property
    def element_size(self) -> int:
        return ir.DTYPES[self.dtype][1]

    @property
    def row_extents(self) -> tuple[int, ...]:
        """Declared extents: the box in storage order (a packed triangle's rows), padded
        along :attr:`pad_dimension`."""
        extents = tuple(self.box.extents[d] for d in self.storage_order)
        if self.packed:
            r, c = self.triangle
            rows = extents[c] if self.packed_upper else extents[r]
            extents = extents[:r] + (rows - self.packed, 2 * self.packed + 1) + \
                extents[c + 1:]
        padded = list(extents)
        padded[self.pad_dimension] += self.padding
        if self.lanes > 1:  # (a lane's slots)
            d = self.storage_order.index(self.lane_dimension)
            padded[d] = -(-padded[d] // self.lanes)
        return tuple(padded)

    @property
    def bytes(self) -> int:
        return self.element_size * math.prod(self.row_extents) * self.stages

    @property
    def aligned_bytes(self) -> int:
        """``bytes`` rounded up to 16: what the buffer takes when buffers are laid one
        after another (dynamic shared memory, 16-byte aligned for vector accesses)."""
        return -(-self.bytes // 16) * 16

    def to_json(self) -> dict:
        out = {
            "kernel": self.kernel, "array": self.array, "space": self.space,
            "name": self.name, "level": self.level, "extents": list(self.box.extents),
            "stride": list(self.box.stride), "padding": self.padding, "bytes": self.bytes,
            **({"chunk": list(self.box.chunk)} if self.box.chunk else {}),
            **({"storage_order": list(self.order)} if self.order else {}),
            **({"padded_dimension": self.pad_dimension} if self.pad_dimension != -1
               else {}),
            **({"stages": self.stages} if self.stages > 1 else {}),
            **({"lanes": self.lanes, "lane_dimension": self.lane_dimension}
               if self.lanes > 1 else {}),
            **({"packed_triangle": {"fold": self.packed, "rows": list(self.row_extents),
                                    "upper": self.packed_upper}}
               if self.packed else {}),
            **({"references": sorted(f"{st}#{r}" for st, r in self.refs)}
               if self.refs else {}),
            "copy_in": self.reads is not None, "copy_out": self.writes is not None,
            "statements": sorted(self.statements),
        }
        if self.atomic:
            out["combine"] = "atomicAdd"
        if self.decision is not None:
            out["padding_solver"] = {"degrees": self.decision.degrees,
                                     "costs": [round(c, 4) for c in self.decision.costs]}
        return out


def _lane_dimension(box: Box) -> int:
    """The box dimension whose elements a spread register copy deals over the lanes:
    its longest (the first of equals) -- a solve leaf's column, its rows."""
    return max(range(len(box.extents)), key=lambda d: (box.extents[d], -d))


def _lane_size(box: Box, lanes: int) -> int:
    """The elements one lane of a copy of ``box`` holds: all of them, or spread over
    ``lanes`` along :func:`_lane_dimension` (its slots times the other extents)."""
    if lanes == 1:
        return box.size
    d = _lane_dimension(box)
    return -(-box.extents[d] // lanes) * (box.size // box.extents[d])


@dataclass(frozen=True)
class Placement:
    """Where one reference's data is accessed from in the emitted code."""

    statement: str
    ref: int
    array: str
    access: str  # the reference as written
    kind: str  # 'read' | 'write'
    placement: str  # 'global-coalesced' | 'global' | 'shared' | 'register' | 'constant'
    candidate: str  # what the reuse analysis suggests
    reason: str = ""  # why a suggestion was not followed


@dataclass(frozen=True)
class MemoryPlan:
    buffers: tuple[Buffer, ...]
    constants: tuple[str, ...]  # arrays copied to __constant__ memory
    placements: tuple[Placement, ...]

    def of_kernel(self, kernel: int) -> dict[str, Buffer]:
        """Per array, its (first) buffer in ``kernel``: what the cost models read (an
        array with a buffer per reference group is modelled by its first)."""
        out: dict[str, Buffer] = {}
        for b in self.buffers:
            if b.kernel == kernel:
                out.setdefault(b.array, b)
        return out

    def buffer_for(self, kernel: int, statement: str, ref: int, array: str
                   ) -> Buffer | None:
        """The buffer the cost models take for reference ``ref`` of ``statement`` (to
        ``array``) in ``kernel``: the apart reads' own (:func:`apart_reads`) where it
        serves the reference, else the array's first buffer (as :meth:`of_kernel`);
        None: none."""
        mine = [b for b in self.buffers if b.kernel == kernel and b.array == array]
        return next((b for b in mine if b.apart and (statement, ref) in b.refs),
                    mine[0] if mine else None)

    def buffers_of(self, kernel: int) -> list[Buffer]:
        """Every buffer of ``kernel``, in plan order."""
        return [b for b in self.buffers if b.kernel == kernel]

    def shared_bytes(self, kernel: int) -> int:
        return sum(b.bytes for b in self.buffers if b.kernel == kernel and b.space == "shared")

    def prefetches(self, kernel: int) -> bool:
        """Whether some shared copy-in of ``kernel`` is prefetched through registers."""
        return any(b.prefetch for b in self.buffers if b.kernel == kernel)


def prefetch_count(buffer: Buffer, kernel: TiledKernel) -> int:
    """Elements of ``buffer`` one thread copies per tile (its prefetch registers)."""
    return -(-buffer.box.size // kernel.block_threads)


def _prefetched(scop: Scop, kernel: TiledKernel, buffers: list[Buffer]) -> frozenset[str]:
    """The buffers whose shared copy-ins ``kernel`` pipelines through registers: those
    of the deepest tile level (the loop that steps through the tiles) of arrays the
    kernel never writes, or of references that read none of the elements it writes
    (``Buffer.apart``) -- so loading the next tile early cannot read a value the current
    one is still producing -- within :data:`MAX_PREFETCH` registers."""
    shared = [b for b in buffers if b.space == "shared"]
    if not kernel.prefetch or not shared:
        return frozenset()
    depth = max(b.level for b in shared)
    written = {a.array for a in scop.accesses
               if a.kind == "write" and a.statement in kernel.statements}
    chosen, used = set(), 0
    for b in shared:
        if depth == 0 or b.level != depth or b.reads is None or b.writes is not None \
                or (b.array in written and not b.apart):
            continue
        if used + prefetch_count(b, kernel) > MAX_PREFETCH:
            continue
        used += prefetch_count(b, kernel)
        chosen.add(b.name)
    return frozenset(chosen)


def _reference_groups(scop: Scop, kernel: TiledKernel, an: Analysis, array: str, level: int,
                      users: frozenset[str]) -> list | None:
    """The read references of ``array`` (in ``users``) in groups whose footprint at
    tile level ``level`` has a constant box: ``[(refs, footprint, box)]``, or None when
    some single reference has none.  Why: a kernel may read an array at places that
    move apart with the block (syrk reads ``A[i][k]`` and ``A[j][k]``: the rows of its i
    and j tiles), so the union of the footprints spans a distance that grows with the
    block coordinates and no buffer of constant size holds it, while each reference's
    footprint is one tile.  Like PPCG's reference groups, references start alone and
    two groups merge when the box of their union is no larger than their two boxes
    together (references that overlap or touch share a buffer).  Only for arrays the
    kernel does not write, so two buffers never hold diverging copies of an element."""
    refs = [(a.statement, a.ref) for a in scop.accesses
            if a.array == array and a.kind == "read" and a.statement in users
            and a.statement in kernel.statements]
    if len(refs) < 2:
        return None

    def group(members: frozenset) -> tuple | None:
        fp = footprint(scop, kernel, array, "read", level, threads=False, refs=members)
        if fp is None:
            return None
        box = _box(an, fp)
        return None if box is None else (members, fp, box)

    groups = [group(frozenset([r])) for r in refs]
    if any(g is None for g in groups):
        return None
    merged = True
    while merged and len(groups) > 1:
        merged = False
        for i in range(len(groups)):
            for j in range(i + 1, len(groups)):
                union = group(groups[i][0] | groups[j][0])
                if union is not None and \
                        union[2].size <= groups[i][2].size + groups[j][2].size:
                    groups = [g for k, g in enumerate(groups) if k not in (i, j)] + [union]
                    merged = True
                    break
            if merged:
                break
    return groups if len(groups) > 1 else None


def _group_buffer(kernel: TiledKernel, an: Analysis, array, level: int, index: int,
                  refs: frozenset, reads: isl.Set, box, forced_padding: int) -> Buffer:
    """The shared buffer of one reference group (:func:`_reference_groups`)."""
    users = frozenset(st for st, _ in refs)
    order = _storage_order(kernel, an, array.name, len(box.extents), users)
    padding, decision = _padding(kernel, an, array.name, box, array.dtype, forced_padding,
                                 users, order)
    name = f"{array.name}_sh" + (str(index) if index else "")
    return Buffer(kernel.index, array.name, "shared", name, array.dtype, level, box, padding,
                  reads, None, decision, users, order=order, refs=refs)


def _double_buffered(kernel: TiledKernel, buffers: list[Buffer], budget: int) -> bool:
    """Whether ``kernel``'s shared buffers are doubled (variant's ``double_buffer``).

    The code generator then drops the barrier after each tile's work: tile ``t + 1``
    copies into the other buffer while slow threads may still read tile ``t``'s, and a
    thread reaches tile ``t + 2``'s copy (into ``t``'s buffer) only past tile ``t + 1``'s
    barrier, which every thread reaches after its work on tile ``t``.  That argument
    needs every shared buffer copied in at the deepest tile level (once per tile) and
    none copied out (a copy-out reads the buffer after the work, and the next copy-in of
    a lower level would need the barrier back); the doubled buffers must fit what the
    kernel's shared memory has left (``budget``)."""
    shared = [b for b in buffers if b.space == "shared"]
    if not kernel.double_buffer or not shared:
        return False
    depth = max(b.level for b in shared)
    if depth == 0 or any(b.level != depth or b.reads is None or b.writes is not None
                         for b in shared):
        return False
    return sum(b.bytes for b in shared) <= budget


def apart_reads(scop: Scop, kernel: TiledKernel, array: str) -> frozenset[tuple[str, int]]:
    """The read references ``(statement, ref)`` of ``array`` in ``kernel`` that touch
    none of the elements the kernel writes, whatever the parameters (the host steps'
    iterators among them: one launch); empty where the kernel does not write ``array``.

    Why: all references of a written array share one buffer, the only copy, so that no
    thread reads a stale element.  A read of elements nobody writes in the kernel sees
    the same values from any copy, at any time; alone, it may be staged tile by tile
    and prefetched while the written part stays in registers.  A recursive trmm's
    products update rows ``[lo, mid)`` of ``B`` from rows ``[mid, hi)``: together their
    box spans both and every step, apart they are mm's register tile and staged
    operand (transform/recursion.py)."""
    inside = set(kernel.statements)
    mine = [a for a in scop.accesses if a.array == array and a.statement in inside]

    def elements(a) -> isl.Set:
        return a.relation.intersect_domain(scop.statement(a.statement).domain).range()

    if not any(a.kind == "write" for a in mine):
        return frozenset()
    try:  # optional: a question isl cannot answer within its budget keeps one buffer
        with isl_operation_budget(scop.context.get_ctx()):
            written = None
            for a in mine:
                if a.kind == "write":
                    part = elements(a)
                    written = part if written is None else written.union(part)
            return frozenset((a.statement, a.ref) for a in mine if a.kind == "read"
                             and elements(a).intersect(written).is_empty())
    except (OutOfBudget, isl.Error):
        return frozenset()


def _strip_mined(kernel: TiledKernel) -> bool:
    """Whether ``kernel``'s deepest tile level is a loop (a strip-mined time loop), not
    a statement-order constant."""
    if not kernel.n_tile_levels:
        return False
    pos = 2 * kernel.n_mapped + kernel.n_tile_levels - 1
    # (plainly: isl's dim_max of an odd nest's tiled schedule took seconds)
    return any(m.dim(isl.dim_type.out) > pos and
               m.plain_get_val_if_fixed(isl.dim_type.out, pos).is_nan()
               for m in maps_of(kernel.schedule))


def _context(an: Analysis, s: isl.Set) -> isl.Set:
    return an.scop.context.align_params(s.get_space()).params()


# per footprint object (footprints are memoized per kernel object): a search places one
# tiling several ways (with and without shared memory), which asks again
@memo_by_identity(maxsize=1024)
def _box(an: Analysis, s: isl.Set) -> Box | None:
    return bounding_box(s, _context(an, s))


@memo_by_identity(maxsize=1024)
def _register_box(an: Analysis, reads: isl.Set | None, writes: isl.Set | None
                  ) -> Box | None:
    """The box of a register tile: :func:`_box_of_both` with a base of one affine piece
    where one bounds the footprint (``footprints.uniform_base``: constant indices once
    unrolled, so the tile stays in registers on triangular domains)."""
    box = _box_of_both(an, reads, writes)
    if box is None:
        return None
    both = union_optional(reads, writes)
    return uniform_base(box, both, _context(an, both), MAX_REGISTERS)


@memo_by_identity(maxsize=1024)
def _box_of_both(an: Analysis, reads: isl.Set | None, writes: isl.Set | None
                 ) -> Box | None:
    """The box around the reads and writes together."""
    both = union_optional(reads, writes)
    return bounding_box(both, _context(an, both))


def neighbour_deltas(kernel: TiledKernel, statement: str, access: isl.Map, dim: int
                      ) -> isl.Set | None:
    """How the elements of ``access`` move when schedule dimension ``dim`` grows by one
    with everything else fixed (a set of array offsets), or None for a statement
    outside ``kernel``."""
    return _neighbour_deltas(kernel.schedule, statement, access, dim)


@memo_by_text(maxsize=2048)
def _neighbour_deltas(schedule: isl.UnionMap, statement: str, access: isl.Map, dim: int
                      ) -> isl.Set | None:
    neighbour = _neighbours(schedule, statement, dim)
    if neighbour is None:
        return None
    return access.reverse().apply_range(neighbour).apply_range(access).deltas()


@memo_by_identity(maxsize=128)
def _neighbours(schedule: isl.UnionMap, statement: str, dim: int) -> isl.Map | None:
    """``{ x -> y }``: the instances of ``statement`` whose schedule point is ``x``'s with
    dimension ``dim`` one larger; per schedule, for every reference of the statement
    (padding and storage order ask per reference)."""
    piece = next((m for m in maps_of(schedule)
                  if m.get_tuple_name(isl.dim_type.in_) == statement), None)
    if piece is None:
        return None
    n_out = piece.dim(isl.dim_type.out)
    shift = isl.BasicMap.universe(isl.Space.map_from_set(piece.range().get_space()))
    for k in range(n_out):
        c = isl.Constraint.alloc_equality(isl.LocalSpace.from_space(shift.get_space()))
        c = c.set_coefficient_val(isl.dim_type.in_, k, isl.Val(1))
        c = c.set_coefficient_val(isl.dim_type.out, k, isl.Val(-1))
        if k == dim:
            c = c.set_constant_val(isl.Val(1))
        shift = shift.add_constraint(c)
    return piece.apply_range(isl.Map.from_basic_map(shift)).apply_range(piece.reverse())


def unit_step(deltas: isl.Set, d: int) -> bool:
    """Whether some step in ``deltas`` moves the element by exactly one along array
    dimension ``d``."""
    unit = isl.Set.universe(deltas.get_space())
    for k in range(deltas.dim(isl.dim_type.set)):
        unit = unit.fix_val(isl.dim_type.set, k, isl.Val(int(k == d)))
    return not unit.intersect(deltas).is_empty()


def thread_steps(kernel: TiledKernel, statement: str, access: isl.Map, box: Box,
                 dim: int | None = None) -> tuple[int, ...] | None:
    """How the buffer subscripts of ``access`` grow from thread ``tx`` to ``tx + 1``
    (or along schedule dimension ``dim``) with everything else fixed, or None if that
    is not one constant vector."""
    dim = kernel.n_mapped if dim is None else dim
    deltas = neighbour_deltas(kernel, statement, access, dim)
    if deltas is None or deltas.is_empty() or not deltas.is_singleton():
        return None
    point = deltas.sample_point()
    steps = []
    for d, stride in enumerate(box.stride):
        v = point.get_coordinate_val(isl.dim_type.set, d).to_python()
        if v % stride or (v and box.chunks[d] > 1):
            return None
        steps.append(v // stride)
    return tuple(steps)


def mma_lanes(kernel: TiledKernel, an: Analysis, acc, box: Box
              ) -> tuple[tuple[int, ...], ...] | None:
    """The buffer offsets the 32 lanes of a warp read through ``acc`` where ``kernel``'s
    time loop runs on the tensor cores (``mma``, codegen/mma.py), else None.  Lane
    ``4 g + q`` supplies step ``q`` of the time loop for the ``g``-th of 8 neighbouring
    threads along y: the row factor's row is that thread's (``ty`` + g), the column
    factor's column the ``g``-th of a run of 8 (the x point + g) -- not the FMA code's
    pattern, so the buffers are padded for these lanes instead."""
    stmt = an.scop.statement(acc.statement)
    if not kernel.mma or acc.kind != "read" or kernel.n_mapped < 2 or \
            not kernel.unroll_dims or atomic.product_update(stmt.body) is None:
        return None

    def steps(dim):
        return thread_steps(kernel, acc.statement, acc.relation, box, dim)

    # the time loop: the innermost dimension inside the thread's loops, outside its
    # points, along which the reference moves
    moves = (steps(d) for d in reversed(range(2 * kernel.n_mapped, min(point_dims(kernel)))))
    time = next((s for s in moves if s is not None and any(s)), None)
    col, row = steps(kernel.n_mapped), steps(kernel.n_mapped + 1)  # along tx, ty
    if time is None or row is None or col is None or any(c % kernel.chunk for c in col):
        return None
    if not any(col):
        group = row  # the row factor (free of the column)
    elif not any(row):
        group = tuple(c // kernel.chunk for c in col)  # a run's next column
    else:
        return None
    return tuple(tuple(g * a + q * b for a, b in zip(group, time, strict=True))
                 for g, q in (divmod(lane, 4) for lane in range(32)))


def lane_offsets(kernel: TiledKernel, an: Analysis, acc, box: Box
                 ) -> tuple[tuple[int, ...], ...] | None:
    """The buffer offsets the 32 lanes of a warp read through ``acc`` where ``kernel``
    runs each thread on a group of lanes (``Variant.lanes``, codegen/cuda.py), else
    None.  Lane ``l`` of group ``g`` (the ``g``-th thread along x of the warp) reads
    step ``l`` of the loop its lanes share (``TiledKernel.lane_dims``) or split (a
    sum's): the lanes move along that loop, not along x, so the buffer is padded for
    that -- a solve leaf's ``b_sh[k][col]`` in rows of 8 columns has 8-way conflicts
    unpadded, its ``a_sh[i][k]`` in rows of 32 is read a column at a time."""
    stmt = an.scop.statement(acc.statement)
    if kernel.lanes == 1 or acc.kind != "read":
        return None
    relations = [a.relation for a in an.scop.accesses if a.statement == acc.statement]
    if kernel.lane_dims:  # the shared loop, where the statement runs in it
        inner = 2 * kernel.n_mapped + kernel.lane_dims[0]
        if not any(_moves(neighbour_deltas(kernel, acc.statement, r, inner))
                   for r in relations):
            return None
    else:  # the split sum's loop: the innermost along which its references move
        if atomic.sum_update(stmt.body) is None:
            return None
        total = kernel.n_local + 2 * kernel.n_mapped
        inner = next((d for d in reversed(range(max(point_dims(kernel)) + 1, total))
                      if any(_moves(neighbour_deltas(kernel, acc.statement, r, d))
                             for r in relations)), None)
    time = thread_steps(kernel, acc.statement, acc.relation, box, inner) \
        if inner is not None else None
    col = thread_steps(kernel, acc.statement, acc.relation, box)
    if time is None or col is None:
        return None
    return tuple(tuple(g * a + q * b for a, b in zip(col, time, strict=True))
                 for g, q in (divmod(lane, kernel.lanes) for lane in range(32)))


def warp_lanes(kernel: TiledKernel, acc, box: Box) -> tuple[tuple[int, ...], ...] | None:
    """The buffer offsets of a warp's lanes through ``acc`` where the block is narrower
    than a warp along x (an element's 8 x 4 threads, a 16 x 16 tile), else None: the
    ``tx`` and ``ty`` steps combined, lane ``l`` at (``l mod x``, ``l div x``).  A warp's
    rows meet in banks that the x step alone does not show (rows of 33 words put lanes
    (tx, ty) and (tx - 1, ty + 1) on one bank)."""
    x = kernel.threads[0] if kernel.threads else WARP
    if kernel.n_mapped < 2 or x >= WARP or kernel.lanes > 1 or kernel.mma:
        return None
    steps = thread_steps(kernel, acc.statement, acc.relation, box)
    rows = thread_steps(kernel, acc.statement, acc.relation, box, kernel.n_mapped + 1)
    if steps is None or rows is None:
        return None
    return tuple(tuple((lane % x) * a + (lane // x) * b for a, b in zip(steps, rows,
                                                                       strict=True))
                 for lane in range(min(WARP, x * kernel.threads[1])))


def _moves(deltas: isl.Set | None) -> bool:
    """Whether a reference's subscripts change between neighbours (``deltas``: what
    :func:`neighbour_deltas` gives; None: not known, taken as no move)."""
    if deltas is None or deltas.is_empty():
        return False
    if not deltas.is_singleton():
        return True
    point = deltas.sample_point()
    return any(point.get_coordinate_val(isl.dim_type.set, d).to_python() != 0
               for d in range(deltas.dim(isl.dim_type.set)))


def point_dims(kernel: TiledKernel) -> list[int]:
    """Schedule dimensions of a thread's own points (``r``), innermost (x) first."""
    first = kernel.n_local - kernel.n_mapped if kernel.unroll_dims else kernel.n_tile_levels
    return [2 * kernel.n_mapped + first + k for k in reversed(range(kernel.n_mapped))]


def _storage_order(kernel: TiledKernel, an: Analysis, array: str, n_dims: int,
                   statements: frozenset[str]) -> tuple[int, ...]:
    """The shared buffer's storage order when a thread's runs of points (``chunk``) move
    along an array dimension that is not the innermost: that dimension is stored
    innermost, so a run is consecutive in shared memory and loads as one vector (mm's
    ``a[i][k]`` with runs along ``i`` is stored as ``a_sh[k][i]``).  Empty: as the array."""
    if kernel.chunk <= 1 or n_dims < 2:
        return ()
    along = set()
    for acc in an.scop.accesses:
        if acc.array != array or acc.statement not in statements:
            continue
        for dim in point_dims(kernel):
            deltas = neighbour_deltas(kernel, acc.statement, acc.relation, dim)
            if deltas is None:
                continue
            along.update(d for d in range(n_dims) if unit_step(deltas, d))
    if not along or n_dims - 1 in along:
        return ()
    inner = max(along)
    return tuple(d for d in range(n_dims) if d != inner) + (inner,)


def _wants_shared(an: Analysis, acc, shared_refs) -> bool:
    """The scheduler could not coalesce ``acc``, or it has reuse across threads."""
    return _own_reason(an.reuse_of(acc.statement, acc.ref).candidate,
                       (acc.statement, acc.ref), shared_refs)


def _own_reason(candidate: str, key: tuple[str, int], shared_refs) -> bool:
    """Whether a reference with reuse suggestion ``candidate`` is staged for its own
    sake (uncoalesced, or reused across threads) rather than for its neighbours'."""
    return key in shared_refs or candidate in ("shared", "constant")


def neighbour_reuse_only(plan: MemoryPlan, tr: Transformation,
                         kernels: tuple[TiledKernel, ...]) -> list[int]:
    """The kernels whose every reference in shared memory is there only because
    neighbouring instances share elements (:func:`_group_reuse`: a stencil's halo),
    none for its own sake (:func:`_wants_shared`)."""
    shared_refs = set(tr.shared)
    found = []
    for k in kernels:
        staged = [p for p in plan.placements
                  if p.placement == "shared" and p.statement in k.statements]
        if staged and not any(_own_reason(p.candidate, (p.statement, p.ref), shared_refs)
                              for p in staged):
            found.append(k.index)
    return found


def _padding(kernel: TiledKernel, an: Analysis, array: str, box: Box, dtype: str,
             forced: int, statements: frozenset[str], order: tuple[int, ...] = (),
             only: frozenset[tuple[str, int]] | None = None
             ) -> tuple[int, PaddingDecision | None]:
    """Algorithm 2 for one buffer, its references' steps in its storage ``order``; rows
    stay 16-byte aligned when threads have runs of points (vector loads)."""
    size = ir.DTYPES[dtype][1]
    order = order or tuple(range(len(box.extents)))
    refs: list[SharedReference | LaneReference] = [
        SharedReference("copy", (0,) * (len(box.extents) - 1) + (1,))]
    for acc in an.scop.accesses:
        if acc.array == array and acc.statement in statements and \
                (not only or (acc.statement, acc.ref) in only):
            name = f"{acc.statement}.{acc.ref} {acc.text}"
            lanes = mma_lanes(kernel, an, acc, box) or \
                lane_offsets(kernel, an, acc, box) or warp_lanes(kernel, acc, box)
            steps = thread_steps(kernel, acc.statement, acc.relation, box)
            if lanes is not None:
                refs.append(LaneReference(name, lanes))
            elif steps is not None:
                refs.append(SharedReference(name, steps))
    refs = [LaneReference(r.name, tuple(tuple(lane[d] for d in order) for lane in r.lanes),
                          r.weight) if isinstance(r, LaneReference) else
            SharedReference(r.name, tuple(r.steps[d] for d in order), r.weight)
            for r in refs]
    extents = tuple(box.extents[d] for d in order)
    if size not in (4, 8):
        return max(forced, 0), None
    multiple = 16 // size if kernel.chunk > 1 else 1
    decision = choose_padding(extents, tuple(refs), size, CostModel.default(size),
                              multiple=multiple)
    if forced >= 0:
        degrees = {r.name: reference_degree(extents, forced, r, size) for r in refs}
        return forced, PaddingDecision(forced, decision.costs[forced], degrees,
                                       decision.costs)
    return decision.padding, decision


def _group_reuse(refs) -> bool:
    """Two reads of one statement at a constant non-zero distance (``a[i-1]``, ``a[i+1]``):
    uniformly generated references whose elements neighbouring instances share."""
    reads = [a for a in refs if a.kind == "read"]
    for k, first in enumerate(reads):
        for second in reads[k + 1:]:
            if first.statement != second.statement:
                continue
            same = first.relation.reverse().apply_range(second.relation)  # e1 -> e2
            deltas = same.deltas()
            if deltas.is_singleton() and not deltas.is_empty():
                point = deltas.sample_point()
                if any(not point.get_coordinate_val(isl.dim_type.set, d).is_zero()
                       for d in range(deltas.dim(isl.dim_type.set))):
                    return True
    return False


def _constant_shape(an: Analysis, array: str) -> int | None:
    """Bytes of ``array`` if its extents are compile-time constants."""
    a = an.scop.array(array)
    if not all(isinstance(e, ir.IntConst) for e in a.shape_exprs):
        return None
    return a.element_size * math.prod(e.value for e in a.shape_exprs)


def _staged(scop: Scop, kernel: TiledKernel, an: Analysis, array, users: frozenset[str],
            only: frozenset[tuple[str, int]] | None, is_apart: bool, forced_padding: int
            ) -> tuple[int, list[Buffer]] | None:
    """The tile level and shared buffers of ``array``'s references in ``kernel`` (of
    ``users``; only those of ``only``, the apart reads -- ``is_apart`` -- or the rest,
    where given): the outermost level whose copy is small, a larger one only where no
    deeper level makes it small (:data:`PREFERRED_BUFFER_BYTES`); None where no level
    bounds it."""
    # the references the buffer serves: those its footprint covers (a reference of a
    # statement outside ``users`` reads in place -- mapped to the buffer, it read
    # outside its box: a fuzzed nest's wrong result)
    served = frozenset(r for r in only if r[0] in users) if only else frozenset()
    staged = None
    # apart reads at the deepest level only, one box (isl's boxes of odd nests take
    # seconds each: tests/test_fuzz_regressions.py footprint_box_budget)
    levels = [kernel.n_tile_levels] if is_apart else range(kernel.n_tile_levels + 1)
    for level in levels:
        reads = footprint(scop, kernel, array.name, "read", level, threads=False,
                          statements=users, refs=only)
        writes = footprint(scop, kernel, array.name, "write", level, threads=False,
                           statements=users, refs=only)
        box = _box_of_both(an, reads, writes)
        made = None
        if box is None and writes is None and not is_apart:
            # references far apart (syrk's A[i][k] and A[j][k]: rows of the block's i
            # and j tiles): one buffer per group of references
            groups = _reference_groups(scop, kernel, an, array.name, level, users)
            if groups is not None:
                made = [_group_buffer(kernel, an, array, level, g, refs, fp, gbox,
                                      forced_padding)
                        for g, (refs, fp, gbox) in enumerate(groups)]
        elif box is not None:
            order = _storage_order(kernel, an, array.name, len(box.extents), users)
            padding, decision = _padding(kernel, an, array.name, box, array.dtype,
                                         forced_padding, users, order, only)
            made = [Buffer(kernel.index, array.name, "shared",
                           f"{array.name}_sh" + ("1" if is_apart else ""), array.dtype,
                           level, box, padding, reads, writes, decision, users,
                           order=order, refs=served, apart=is_apart)]
        if made is None:
            continue
        small = sum(b.bytes for b in made) <= PREFERRED_BUFFER_BYTES
        if staged is None or small:
            staged = (level, made)
        if small:
            break
    return staged


def plan_memory(an: Analysis, tr: Transformation, kernels: tuple[TiledKernel, ...],
                variant: Variant) -> MemoryPlan:
    """Decide every kernel's buffers and every reference's placement (module doc)."""
    scop = an.scop
    written = scop.written_arrays()
    shared_refs = set(tr.shared)
    coalesced = set(tr.coalesced)
    buffers: list[Buffer] = []
    constants: list[str] = []
    constant_bytes = 0
    # (kernel, array), or (kernel, array, "apart") for its apart reads -> (space, reason)
    where: dict[tuple, tuple[str, str]] = {}
    apart_of: dict[tuple[int, str], frozenset[tuple[str, int]]] = {}
    users_of: dict[tuple, frozenset[str]] = {}  # statements using a shared buffer
    program_variant = variant
    # the flow dependences of ``an`` are those of the kernels' own launches: the whole
    # region's, or one host step's when the kernels are a step's (else: copy all)
    exact_flow = tr.step is None or an is tr.step
    for kernel in kernels:
        variant = program_variant.for_kernel(kernel.index)
        budget = MAX_SHARED_BYTES
        atomic_targets: dict[str, set[str]] = {}  # array -> its atomic statements
        for name in kernel.atomic:
            atomic_targets.setdefault(an.combinable[name].array, set()).add(name)
        # per array its references, placed together -- but reads of a written array
        # that never meet the kernel's writes (apart_reads) are placed on their own,
        # like a read-only array's, after the others (the cost models read an array's
        # first buffer)
        parts = []
        strip_mined = _strip_mined(kernel)
        for array in scop.arrays:
            if array.kind == "temporary":
                continue
            refs = [a for a in scop.accesses
                    if a.array == array.name and a.statement in kernel.statements]
            if not refs:
                continue
            # (only where a time loop is strip-mined, the one level an apart read's
            # buffer moves along, and the kernel's launched: elsewhere the copy would
            # only add a buffer -- LU's, Cholesky's pivot rows -- measured nowhere)
            apart = apart_reads(scop, kernel, array.name) \
                if variant.shared and not variant.device_steps and strip_mined \
                and array.name not in atomic_targets else frozenset()
            if not apart:
                parts.append((array, refs, None, (kernel.index, array.name)))
                continue
            own = frozenset((a.statement, a.ref) for a in refs) - apart
            parts.append((array, [a for a in refs if (a.statement, a.ref) in own], own,
                          (kernel.index, array.name)))
            parts.append((array, [a for a in refs if (a.statement, a.ref) in apart], apart,
                          (kernel.index, array.name, "apart")))
            apart_of[(kernel.index, array.name)] = apart
        for array, refs, only, key in parts:
            is_apart = len(key) == 3
            cands = {an.reuse_of(a.statement, a.ref).candidate for a in refs}
            atomic = array.name in atomic_targets
            if atomic and not {a.statement for a in refs} <= atomic_targets[array.name]:
                where[key] = ("global", "atomic updates and other references share it")
                continue
            # 1. registers
            # (apart reads: one register copy of an array a kernel, the written part's)
            # (a thread's work unrolled whole: any footprint of a thread that fits is
            # held in registers -- a solve leaf's column, which reuse analysis of the
            # unsplit nest saw shared among the rows' threads)
            # (on lanes -- Variant.lanes with full_unroll -- the copies a kernel writes
            # are spread over the lanes, codegen/lane_registers.py; one it only reads
            # would be every lane's whole copy, read at a lane's own rows: left to
            # shared memory)
            lanes = kernel.lanes if kernel.unrolled else 1
            if variant.registers and ("register" in cands or kernel.unrolled) and \
                    not is_apart and (lanes == 1 or any(a.kind == "write" for a in refs)):
                reads = footprint(scop, kernel, array.name, "read", 0, threads=True,
                                  refs=only)
                writes = footprint(scop, kernel, array.name, "write", 0, threads=True,
                                   refs=only)
                box = _register_box(an, reads, writes)
                if lanes > 1 and box is not None and (
                        atomic or box.stride[_lane_dimension(box)] != 1 or box.chunk):
                    box = None  # (lanes own elements of a plain dimension)
                if box is not None and _lane_size(box, lanes) <= MAX_REGISTERS and (
                        box.size == 1 or kernel.unroll_dims or kernel.unrolled):
                    if not atomic and exact_flow:  # the live copies only (liveness.py)
                        reads = live_in_reads(an, kernel, array.name, only) \
                            if reads is not None else None
                        if writes is not None and dead_after(an, tr, kernel, array.name):
                            writes = None
                    buffers.append(Buffer(kernel.index, array.name, "register",
                                          array.name + REGISTER_SUFFIX, array.dtype, 0, box, 0,
                                          reads, writes,
                                          statements=frozenset(kernel.statements),
                                          atomic=atomic, refs=only or frozenset(),
                                          apart=is_apart, lanes=lanes,
                                          lane_dimension=_lane_dimension(box)))
                    where[key] = ("register", "")
                    continue
                where[key] = ("global", "register reuse, but a thread's elements do not "
                              "fit a constant-indexed register tile (use jam)")
            if atomic:
                where.setdefault(key, ("global", "atomic updates combine in global memory"))
                continue
            # 2. constant memory
            size = _constant_shape(an, array.name)
            if cands == {"constant"} and array.name not in written and size is not None \
                    and constant_bytes + size <= CONSTANT_BYTES:
                if array.name not in constants:
                    constants.append(array.name)
                    constant_bytes += size
                where[key] = ("constant", "")
                continue
            # 3. shared memory
            wants = any(_wants_shared(an, a, shared_refs) for a in refs) or _group_reuse(refs)
            if not wants:
                continue
            if kernel.n_mapped == 0:
                where.setdefault(key, ("global", "a one-thread kernel: nothing to share"))
                continue
            if not variant.shared:
                where.setdefault(key, ("global", "shared memory turned off (variant)"))
                continue
            # an array the kernel only reads may be staged for some statements and read
            # directly by the others (mvt: a[i][j] staged, a[j][i] coalesced); one it
            # writes has all its references in the buffer, the only copy
            users = frozenset(a.statement for a in refs)
            if not any(a.kind == "write" for a in refs):
                users = frozenset(a.statement for a in refs if _wants_shared(
                    an, a, shared_refs) or _group_reuse(
                        [r for r in refs if r.statement == a.statement]))
            staged = _staged(scop, kernel, an, array, users, only, is_apart,
                             variant.padding)
            if staged is None:
                if key not in where:
                    where[key] = ("global", "no tile level bounds the block's data by a "
                                  "constant (set time_tile)")
                continue
            made = staged[1]
            if sum(b.bytes for b in made) > budget:
                where[key] = ("global", f"the tile's data ({sum(b.bytes for b in made)} "
                              "bytes) exceeds the shared-memory budget")
                continue
            budget -= sum(b.bytes for b in made)
            buffers += made
            where[key] = ("shared", "")
            users_of[key] = users
        # the shared copy-ins prefetched through registers (variant's ``prefetch``):
        # recorded on the buffers, for the code generator and the search's cost model
        mine = [b for b in buffers if b.kernel == kernel.index]
        early = _prefetched(scop, kernel, mine)
        # (not with device steps: a kernel's blocks then run one after another in one
        # thread block, with no barrier between them, and each block starts again at
        # stage 0 -- the next block's first copy could overwrite the buffer a slow
        # thread still reads for the previous block's last tile)
        stages = 2 if not variant.device_steps and _double_buffered(kernel, mine, budget) \
            else 1
        buffers = [replace(b, prefetch=b.name in early,
                           stages=stages if b.space == "shared" else 1)
                   if b.kernel == kernel.index else b for b in buffers]
    placements = []
    for a in scop.accesses:
        try:
            k = tr.kernel_of(a.statement)
        except KeyError:  # a statement that never runs (empty domain) is in no kernel
            k = -1
        key = (k, a.array, "apart") if (a.statement, a.ref) in apart_of.get(
            (k, a.array), ()) else (k, a.array)
        space, reason = where.get(key, ("", ""))
        if space == "shared" and a.statement not in users_of[key]:
            space, reason = "", "read directly: the staged references are elsewhere"
        default = "global-coalesced" if (a.statement, a.ref) in coalesced else "global"
        placements.append(Placement(
            statement=a.statement, ref=a.ref, array=a.array, access=a.text, kind=a.kind,
            placement=space if space in ("register", "constant", "shared") else default,
            candidate=an.reuse_of(a.statement, a.ref).candidate, reason=reason))
    return MemoryPlan(tuple(buffers), tuple(constants), tuple(placements))
