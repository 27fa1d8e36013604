"""Residence: a device-steps block keeps the data it works on in shared memory for life.

A device-steps program (``Variant.device_steps``) runs a region's host steps inside
one thread block, a barrier after each kernel of a step; a ``batch`` runs one element
per block (:mod:`polygpu.schedule.host`).  Unstaged, every round of such a block waits
on global memory: a step's stores go out to L2 and the next step's loads come back
from there -- about 1 us per round on the H100/H200, which made a per-element Cholesky
of n = 16..64 slower than torch (``tuning/results/NVIDIA-H200/batched.md``).  The
paper's (seed 000) block-per-element factorization loads its element into shared memory
once, runs every step there and writes it back once.

:func:`plan_residence` decides that placement: per array the block's *lifetime
footprint* -- every element its statements touch over all steps, the steps' host
iterators projected out; a batch's element stays a parameter (the block's) -- its box
(constant extents: a specialized program's, or bounded by the context), Algorithm 2's
padding over every kernel's references to it, and whether it fits.  The code generator
(``codegen/cuda.py``) copies the reads in before the first step and the writes out
after the last; every reference of every step, and the kernels' register copies, go to
the buffer.

Why that is exact: the block is the only one touching its footprint while it runs --
for one block (a non-batch device-steps program) trivially, for a batch because the
pipeline proves that nothing crosses elements (``pipeline._prove_device_steps``: the
element is a ``block`` dimension), so another block neither writes what this one reads
nor reads what it writes.  The copies are guarded by the exact footprints: only read
elements are loaded, only written ones stored.

Temporaries (local arrays, transform/'s scratch arrays) are contracted: resident, they
are neither loaded nor stored -- the block computes every value it reads, and nothing
reads them after it -- so a chain of per-element functions fused into one block's steps
keeps its intermediates on chip (seed 003).  A program cut into several launches
(``Variant.cuts``: a fusion cover) plans each launch's residence over its own kernels'
statements; a temporary that another launch also touches is loaded and stored like any
array -- it crosses the cut in global memory.  An argument marked as not live-out
(``#pragma polygpu not_live_out``) is loaded where read but never stored.

With ``Variant.packed`` an array whose footprint is a lower triangle of its box (a
factorization's element) is stored packed (:func:`triangle_fold`): half the shared
memory, so twice the elements resident an SM.  An upper triangle (``U^T U``, LAPACK's
``uplo = 'U'``) is packed as the lower triangle of the transposed box.

Arrays left in global memory, with the reason: targets of atomic updates (shared
updates would race without atomics), arrays a kernel stages in a shared buffer of its
own (references outside that kernel would go elsewhere), footprints without a constant
box, and what does not fit the shared memory left (the smallest arrays are placed
first, so as many as possible become resident).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import islpy as isl

from polygpu.errors import PolygpuError
from polygpu.frontend import ir
from polygpu.memory.footprints import (
    Box,
    bounding_box,
    box_coordinates,
    padded_dimension,
    triangle_pair,
)
from polygpu.memory.padding import (
    CostModel,
    LaneReference,
    SharedReference,
    choose_padding,
)
from polygpu.memory.placement import MAX_SHARED_BYTES, Buffer, thread_steps, warp_lanes
from polygpu.model.scop import Scop
from polygpu.schedule.tiling import TiledKernel
from polygpu.schedule.transformation import Transformation

PREFIX = "pg_res_"  # a resident buffer's C name: PREFIX + the array's
# kinds of arrays whose values neither come from before the region nor outlive it: a
# local array (model/build.py proves each read sourced in the region) and a scratch
# array of transform/ (written in the region before any read, never returned).  A
# device-steps program is one launch, so nothing after the block reads them either: a
# resident one lives in shared memory alone (array contraction, seed 003)
TEMPORARY = ("local", "scratch")


@dataclass(frozen=True)
class Residence:
    """``buffers``: shared buffers (``kernel`` -1, ``level`` 0) that live as long as
    the block; ``left``: ``(array, why)`` for arrays the block uses in global memory."""

    buffers: tuple[Buffer, ...]
    left: tuple[tuple[str, str], ...]

    @property
    def bytes(self) -> int:
        return sum(b.aligned_bytes for b in self.buffers)

    def to_json(self) -> dict:
        return {"buffers": [b.to_json() for b in self.buffers],
                "global": [{"array": a, "reason": why} for a, why in self.left]}


def lifetime_footprint(scop: Scop, array: str, kind: str, grid_dims: int,
                       statements: frozenset[str] | None = None) -> isl.Set | None:
    """Elements of ``array`` that ``kind`` references (of ``statements``, default all)
    touch over all host steps, as a set over the region's parameters and the first
    ``grid_dims`` host iterators (a batch's element); None without such references."""
    result = None
    for acc in scop.accesses:
        if acc.array != array or acc.kind != kind or (
                statements is not None and acc.statement not in statements):
            continue
        part = acc.relation.intersect_domain(scop.statement(acc.statement).domain).range()
        result = part if result is None else result.union(part)
    if result is None:
        return None
    for name in scop.host[grid_dims:]:
        k = result.find_dim_by_name(isl.dim_type.param, name)
        if k >= 0:
            result = result.project_out(isl.dim_type.param, k, 1)
    return result.coalesce()


def plan_residence(scop: Scop, kernels: tuple[TiledKernel, ...], grid_dims: int,
                   budget: int = MAX_SHARED_BYTES,
                   staged: frozenset[str] | set[str] = frozenset(),
                   shared_with: frozenset[str] | set[str] = frozenset(),
                   packed: bool = False) -> Residence:
    """The resident buffers of a device-steps launch of ``kernels`` (one host step's,
    ``scop`` the step region, specialized or not) within ``budget`` bytes; arrays in
    ``staged`` have shared buffers of some kernel's own and stay out.  Temporaries are
    contracted unless in ``shared_with``: the arrays other launches of the program
    (``Variant.cuts``) touch, which pass through global memory.  With ``packed``, an
    array whose footprint is a lower (or upper) triangle of its box's last two
    dimensions (before trailing ones of extent 1) is stored packed (:func:`packing`)."""
    statements = frozenset(s for k in kernels for s in k.statements)
    atomic = {scop.statement(s).writes[0].array for k in kernels for s in k.atomic}
    context = _block_context(scop, grid_dims)
    found, left = [], []
    for array in scop.program_arrays:
        reads = lifetime_footprint(scop, array.name, "read", grid_dims, statements)
        writes = lifetime_footprint(scop, array.name, "write", grid_dims, statements)
        if reads is None and writes is None:
            continue
        if array.name in atomic:
            left.append((array.name, "updated atomically"))
            continue
        if array.name in staged:
            left.append((array.name, "staged in a kernel's own shared buffer"))
            continue
        both, box = _block_box(reads, writes, context)
        if box is None or box.chunk or any(s != 1 for s in box.stride):
            left.append((array.name, "no constant box around the block's footprint "
                         "(specialize the sizes)"))
            continue
        fold, upper = packing(both, box) if packed else (0, False)
        # (a packed triangle's rows are 2 h + 1 words: odd, its columns' banks apart)
        padding, decision = (0, None) if fold else _padding(scop, kernels, array, box)
        pad = padded_dimension(box.extents)
        if array.kind in TEMPORARY and array.name not in shared_with:
            reads = writes = None  # contracted: never loaded, never stored
        elif not array.live_out and array.name not in shared_with:
            writes = None  # nobody reads it after the launch: never stored
        found.append(Buffer(-1, array.name, "shared", PREFIX + array.name, array.dtype, 0,
                            box, padding, reads, writes, decision, statements=statements,
                            packed=fold, packed_upper=upper,
                            pad_dimension=-1 if pad == len(box.extents) - 1 else pad))
    buffers = []
    room = budget
    for b in sorted(found, key=lambda b: (b.bytes, b.array)):
        if b.aligned_bytes <= room:
            buffers.append(b)
            room -= b.aligned_bytes
        else:
            left.append((b.array, f"{b.bytes} bytes do not fit the {room} left"))
    order = [a.name for a in scop.program_arrays]
    return Residence(tuple(sorted(buffers, key=lambda b: order.index(b.array))),
                     tuple(left))


def _block_context(scop: Scop, grid_dims: int) -> isl.Set:
    """The region's context with the host iterators a block runs through projected
    out (a batch's element stays: the block's)."""
    context = scop.context
    for name in scop.host[grid_dims:]:
        k = context.find_dim_by_name(isl.dim_type.param, name)
        if k >= 0:
            context = context.project_out(isl.dim_type.param, k, 1)
    return context


def _block_box(reads: isl.Set | None, writes: isl.Set | None, context: isl.Set
               ) -> tuple[isl.Set, Box | None]:
    """An array's block footprint (its reads and writes, not both None) and its box."""
    both = reads if writes is None else writes if reads is None else reads.union(writes)
    return both, bounding_box(both.coalesce(), context.align_params(both.get_space()).params())


def packable(scop: Scop, grid_dims: int) -> bool:
    """Whether a resident plan of ``scop`` (a step region at fixed sizes) could store
    some array packed: its footprint over all statements a lower or upper triangle of
    its box (what a search asks before it adds :attr:`Variant.packed` twins)."""
    context = _block_context(scop, grid_dims)
    for array in scop.program_arrays:
        reads = lifetime_footprint(scop, array.name, "read", grid_dims)
        writes = lifetime_footprint(scop, array.name, "write", grid_dims)
        if reads is None and writes is None:
            continue
        both, box = _block_box(reads, writes, context)
        if box is not None and packing(both, box)[0]:
            return True
    return False


def packable_at(tr: Transformation, params: Mapping[str, int]) -> bool:
    """Whether a resident plan of the batch ``tr`` at ``params`` could pack a triangle
    (:func:`packable`): where a search's twins with ``Variant.packed`` are worth
    building."""
    if tr.host is None or tr.step is None or not tr.host.grid_dims:
        return False
    try:
        return packable(tr.step.scop.specialized(params), tr.host.grid_dims)
    except PolygpuError:
        return False


def packing(footprint: isl.Set, box: Box) -> tuple[int, bool]:
    """How ``footprint`` packs in ``box``: the fold of its lower triangle, else of its
    upper one (:func:`triangle_fold`), and whether it is the upper; ``(0, False)`` where
    neither packs."""
    for upper in (False, True):
        fold = triangle_fold(footprint, box, upper)
        if fold:
            return fold, upper
    return 0, False


def triangle_fold(footprint: isl.Set, box: Box, upper: bool = False) -> int:
    """The fold row ``h`` of :attr:`Buffer.packed` for ``footprint`` in ``box``, or 0
    where it cannot be packed: proven with isl, every element has its column at most
    its row (box coordinates of the triangle's two dimensions, :func:`triangle_pair`,
    both of stride 1; with ``upper`` at least its row: the transposed box's lower
    triangle, folded at its rows, the box's columns), and the packed rows take fewer
    words than the box's."""
    d = len(box.extents)
    if d < 2 or box.chunk:
        return 0
    r, c = triangle_pair(box.extents)
    if (box.stride[r], box.stride[c]) != (1, 1):
        return 0
    rows, columns = (box.extents[c], box.extents[r]) if upper else \
        (box.extents[r], box.extents[c])
    fold = rows // 2
    if rows < 2 or (rows - fold) * (2 * fold + 1) >= rows * columns:
        return 0
    inside = box_coordinates(footprint, box)
    sign = -1 if upper else 1
    below = isl.Set.universe(inside.get_space())  # r - c >= 0 (c - r >= 0: upper)
    below = below.add_constraint(isl.Constraint.inequality_alloc(below.get_space())
                                 .set_coefficient_val(isl.dim_type.set, r, sign)
                                 .set_coefficient_val(isl.dim_type.set, c, -sign))
    return fold if inside.is_subset(below) else 0


def _padding(scop: Scop, kernels: tuple[TiledKernel, ...], array, box):
    """Algorithm 2 over the references of every kernel (their thread steps in the
    resident box) and the copy's own (consecutive elements), for the padding of the
    box's :func:`padded_dimension`: the dimensions after it (extent 1: an interleaved
    element's word) are left out."""
    size = ir.DTYPES[array.dtype][1]
    rank = padded_dimension(box.extents) + 1
    if size not in (4, 8) or rank < 2:
        return 0, None
    refs = [SharedReference("copy", (0,) * (rank - 1) + (1,))]
    for kernel in kernels:
        for acc in scop.accesses:
            if acc.array == array.name and acc.statement in kernel.statements:
                ref = _warp_reference(
                    kernel, acc, box, rank,
                    f"kernel{kernel.index} {acc.statement}.{acc.ref} {acc.text}")
                if ref is not None:
                    refs.append(ref)
    decision = choose_padding(box.extents[:rank], tuple(refs), size,
                              CostModel.default(size))
    return decision.padding, decision


def _warp_reference(kernel: TiledKernel, acc, box, rank: int, name: str
                    ) -> SharedReference | LaneReference | None:
    """How one warp of ``kernel`` reads ``acc`` in the resident box: each lane's offset
    where the block is narrower than a warp along x (:func:`placement.warp_lanes`), else
    consecutive threads' step."""
    lanes = warp_lanes(kernel, acc, box)
    if lanes is not None:
        return LaneReference(name, tuple(lane[:rank] for lane in lanes))
    steps = thread_steps(kernel, acc.statement, acc.relation, box)
    return None if steps is None else SharedReference(name, steps[:rank])
