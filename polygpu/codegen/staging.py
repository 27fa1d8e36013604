"""The body of a kernel whose data the memory stage staged in shared memory or registers.

A register buffer of an atomic statement's target holds partial sums: its copy-in sets
it to zero and its copy-out adds it to the array atomically (``pg_atomic_add``, or
``pg_atomic_add_warp`` when a warp's lanes share the element).

Shape of a staged kernel (``L`` = the deepest level of its shared buffers)::

    coordinates; register loads
    for o_0 ... for o_{L-1}             <- tile levels: loops every thread runs alike
        copy-in of level-l buffers
        ... deeper levels ...
        __syncthreads(); { the thread's work, from isl with o_0..o_{L-1} as
        parameters }; __syncthreads()
        copy-out of level-l buffers; __syncthreads()
    register stores

Double-buffered (``Buffer.stages == 2``, the memory stage's decision): every buffer is
used as ``name[pg_stage]`` and the barrier after the work becomes ``pg_stage ^= 1`` (the
next tile writes the other buffers; docs/memory.md says why one barrier then suffices).

The tile-level loops come from an isl AST over placeholder statements (``pg_tile`` and
one ``pg_in_<array>``/``pg_out_<array>`` per buffer) built with only the block
coordinates known, so every thread of a block runs the same iterations and reaches the
same barriers; the thread's own work is a second AST with the tile coordinates as
parameters.  A copy is one loop over the buffer's box, linearised and dealt cyclically
to all threads of the block (consecutive threads, consecutive elements of the innermost
dimension: coalesced global accesses, conflict-free shared ones), guarded by the exact
footprint (isl builds the condition), so only footprint elements are read and only
written elements are stored.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

import cgen
import islpy as isl

from polygpu.codegen.expressions import (
    INDEX64,
    BufferView,
    Printer,
    index_text,
    packed_subscript,
)
from polygpu.codegen.full_slices import full_slices
from polygpu.codegen.thread_ast import (
    ids,
    kernel_ast,
    node_from_schedule_map,
    param_names,
    thread_context,
    with_params,
)
from polygpu.frontend import ir
from polygpu.memory.footprints import box_coordinates
from polygpu.memory.placement import Buffer, prefetch_count
from polygpu.model.isl_budget import OutOfBudget, isl_operation_budget
from polygpu.model.isl_util import maps_of, union_of
from polygpu.model.scop import Scop
from polygpu.schedule.tiling import TiledKernel

TID = "pg_tid"
GROUP = "pg_group"  # which of a block's elements a thread works on (device steps)
DYNAMIC = "pg_dynamic_shared"


def c_expr(pa: isl.PwAff, index64: bool = False) -> str:
    """``pa`` (a function of the parameters) as a C expression."""
    return index_text(isl.AstBuild.from_context(pa.domain()).expr_from_pw_aff(pa).to_C_str(),
                      index64)


STAGE = "pg_stage"  # which of a double-buffered array's two buffers the current tile uses


def buffer_ref(buffer: Buffer) -> str:
    """The C name of ``buffer``'s current storage: ``name[pg_stage]`` when doubled."""
    return f"{buffer.name}[{STAGE}]" if buffer.stages > 1 else buffer.name


def view(buffer: Buffer, index64: bool = False, known: isl.Set | None = None
         ) -> BufferView:
    """How references print into ``buffer``; its base simplified within the parameter
    set ``known`` (a specialized kernel's blocks and threads), where given.

    Why: a reference's subscript comes from isl's AST, which knows a specialized grid
    (one block along y: ``by`` is 0), while the base is the memory plan's parametric
    ``32 by + ty``; the register index ``(ty - (32 by + ty)) / 8`` is then no constant
    and the register tile goes to local memory (batched 32 x 32 products: a 96-byte
    stack frame).  Simplified alike, the index is the constant it is."""
    bases = tuple(single_piece(b) for b in buffer.box.base)
    if known is not None:
        context = known.params()
        bases = tuple(_gist(b, context) for b in bases)
    return BufferView(buffer_ref(buffer), tuple(c_expr(b, index64) for b in bases),
                      buffer.box.stride, buffer.box.extents, buffer.box.chunk, buffer.order,
                      buffer.packed, buffer.packed_upper, lanes=buffer.lanes,
                      lane_dim=buffer.lane_dimension)


def stored(buffer: Buffer, u: Sequence[str], name: str | None = None) -> str:
    """``buffer``'s element at box coordinates ``u`` (C names), in its storage order or
    its packed triangle."""
    name = buffer_ref(buffer) if name is None else name
    if buffer.packed:
        r, c = buffer.triangle
        return name + "".join(f"[{x}]" for x in u[:r]) + \
            packed_subscript(u[r], u[c], buffer.packed, buffer.packed_upper) + \
            "".join(f"[{x}]" for x in u[c + 1:])
    return f"{name}{''.join(f'[{u[d]}]' for d in buffer.storage_order)}"


def _gist(pa: isl.PwAff, context: isl.Set) -> isl.PwAff:
    pa = pa.align_params(context.get_space())
    if pa.domain().intersect_params(context.align_params(pa.get_space())).is_empty():
        # a buffer of references that do not run in this part of a kernel (a split
        # kernel's whole tiles without the statement): printed as it is, never used
        return pa
    return single_piece(pa.gist_params(context.align_params(pa.get_space())))


def single_piece(pa: isl.PwAff) -> isl.PwAff:
    """``pa`` as one affine piece where one of its pieces' expressions holds on all of
    its domain.  Why: a buffer's base may come in pieces that agree (``64 bx`` where
    ``tx = 0``, ``2 + 64 bx`` where ``tx = 1``, ``64 bx + 2 tx`` beyond), printed as
    ``tx == 0 ? 0 : ...``; nvcc does not fold that out of a register index, and the
    register tile went to local memory (a 576-byte stack frame)."""
    pieces = pa.get_pieces()
    if len(pieces) < 2:
        return pa
    for _, aff in pieces:
        one = isl.PwAff.from_aff(aff).intersect_domain(pa.domain())
        if one.is_equal(pa):
            return one
    return pa


def declarations(buffers: list[Buffer], dynamic: bool) -> list:
    """Shared buffers (static, or carved from dynamic shared memory) and register
    buffers."""
    out = []
    offset = 0
    for b in buffers:
        ctype = ir.DTYPES[b.dtype][0]
        extents = ((b.stages,) if b.stages > 1 else ()) + b.row_extents
        dims = "".join(f"[{e}]" for e in extents)
        if b.space == "register":
            out.append(cgen.Line(f"{ctype} {b.name}{dims};"))
        elif dynamic:
            inner = "".join(f"[{e}]" for e in extents[1:])
            out.append(cgen.Line(
                f"{ctype} (*{b.name}){inner} = reinterpret_cast<{ctype} (*){inner}>"
                f"({DYNAMIC} + {offset});"))
            offset += b.aligned_bytes
        else:
            out.append(cgen.Line(f"__shared__ __align__(16) {ctype} {b.name}{dims};"))
    return out


def group_declarations(buffers: list[Buffer], dynamic: bool, elements: int,
                       group: str) -> list:
    """Shared ``buffers`` once per element of a block (``elements`` groups), each
    named by a pointer to the copy of the thread's group (``group``: its index)."""
    out = []
    for b, pointer in zip(buffers, group_pointers(buffers, dynamic, elements, group),
                          strict=True):
        if not dynamic:
            ctype = ir.DTYPES[b.dtype][0]
            dims = "".join(f"[{e}]" for e in b.row_extents)
            out.append(cgen.Line(
                f"__shared__ __align__(16) {ctype} {b.name}_all[{elements}]{dims};"))
        out.append(pointer)
    return out


def group_pointers(buffers: list[Buffer], dynamic: bool, elements: int,
                   group: str) -> list:
    """Per buffer of :func:`group_declarations`, the line naming group ``group``'s copy
    (also what a block-wide copy binds per element it moves)."""
    out = []
    offset = 0
    for b in buffers:
        ctype = ir.DTYPES[b.dtype][0]
        inner = "".join(f"[{e}]" for e in b.row_extents[1:])
        if dynamic:
            base = f"{DYNAMIC} + {offset} + {b.aligned_bytes} * {group}"
            offset += b.aligned_bytes * elements
        else:
            base = f"{b.name}_all[{group}]"
        # (a copy's loads bind it per element without using it: no compiler warning)
        out.append(cgen.Line(f"[[maybe_unused]] {ctype} (*{b.name}){inner} = "
                             f"reinterpret_cast<{ctype} (*){inner}>({base});"))
    return out


def buffer_parameters(buffers: list[Buffer]) -> list:
    """Shared ``buffers`` as parameters of a device function: pointers to their rows
    (a static array and a carved dynamic one alike)."""
    out = []
    for b in buffers:
        ctype = ir.DTYPES[b.dtype][0]
        extents = ((b.stages,) if b.stages > 1 else ()) + b.row_extents
        inner = "".join(f"[{e}]" for e in extents[1:])
        out.append(cgen.Value(ctype, f"(*{b.name}){inner}"))
    return out


def dynamic_bytes(buffers: list[Buffer]) -> int:
    return sum(b.aligned_bytes for b in buffers if b.space == "shared")


def copied_extents(footprint: isl.Set, buffer: Buffer, known: isl.Set | None
                   ) -> tuple[int, ...]:
    """The extents of the part of ``buffer``'s box that ``footprint`` can reach within
    the parameter set ``known``: the box's own where they depend on parameters, less
    where the parameters are fixed (a specialized program).

    Why: the memory plan is parametric (a specializing variant's check twin runs other
    sizes), so a 32-wide time tile gives a 32-wide buffer even where n = 16; a copy loop
    over the whole box would leave half of every warp idle and read each row in two
    64-byte pieces.  Over the reachable part only (16 wide), consecutive threads read
    consecutive words across rows: whole 128-byte lines (batched dot, n = 16)."""
    box = buffer.box
    if box.chunk:
        return box.extents
    try:  # an optional refinement: the box itself where isl takes too long
        with isl_operation_budget(footprint.get_ctx()):
            inside = box_coordinates(footprint, buffer.box)
            if known is not None:
                inside = inside.intersect_params(known.align_params(inside.get_space()))
            if inside.is_empty():
                return box.extents
            inside = inside.project_out(isl.dim_type.param, 0,
                                        inside.dim(isl.dim_type.param))
            tops = [inside.dim_max_val(k) for k in range(len(box.extents))]
    except (OutOfBudget, isl.Error):
        return box.extents
    return tuple(max(1, min(extent, top.to_python() + 1)) if top.is_int() else extent
                 for extent, top in zip(box.extents, tops, strict=True))


def _guard(footprint: isl.Set, buffer: Buffer, names: list[str], known: isl.Set | None,
           extents: tuple[int, ...] | None = None) -> str:
    """C condition: element ``base + stride * u`` (``u`` in parameters ``names``) lies in
    ``footprint``, simplified knowing ``0 <= u < extents`` (the box's, unless given) and
    the parameter set ``known`` the copy runs in (None: nothing known)."""
    extents = extents or buffer.box.extents
    d = len(extents)
    inside = box_coordinates(footprint, buffer.box)
    n = inside.dim(isl.dim_type.param)
    inside = inside.move_dims(isl.dim_type.param, n, isl.dim_type.set, 0, d)
    for k, name in enumerate(names):
        inside = inside.set_dim_name(isl.dim_type.param, n + k, name)
    context = isl.Set.universe(inside.get_space())
    for k in range(d):
        context = context.lower_bound_val(isl.dim_type.param, n + k, isl.Val(0))
        context = context.upper_bound_val(isl.dim_type.param, n + k,
                                          isl.Val(extents[k] - 1))
    if known is not None:
        context = context.intersect_params(known.align_params(context.get_space()))
    return isl.AstBuild.from_context(context).expr_from_set(inside).to_C_str()


def _element(buffer: Buffer, u: list[str], index64: bool = False) -> list[str]:
    """C expressions of the array subscripts of buffer element ``u``."""
    out = []
    for k, base in enumerate(view(buffer, index64).base):
        stride, w = buffer.box.stride[k], buffer.box.chunks[k]
        term = u[k] if stride == 1 else f"{stride} * {u[k]}"
        if w > 1:
            term = f"{stride} * ({u[k]} / {w}) + {u[k]} % {w}"
        out.append(f"({base}) + {term}")
    return out


def atomic_function(kernel: TiledKernel, statements) -> str:
    """The atomic add for updates of ``statements``: the warp-aggregating one when their
    targets do not move along ``threadIdx.x`` and a warp spans x alone."""
    if kernel.threads[0] % 32 == 0 and all(s in kernel.warp_uniform for s in statements):
        return "pg_atomic_add_warp"
    return "pg_atomic_add"


def copy_loop(buffer: Buffer, printer: Printer, kernel: TiledKernel, scop: Scop,
              direction: str) -> list:
    """Copy-in (``direction='in'``, global -> buffer, guarded by the read footprint) or
    copy-out (buffer -> global, guarded by the write footprint), for shared buffers a
    loop dealt to all threads, for registers a fully unrolled loop of one thread.

    A prefetched shared copy-in comes in two halves, ``'load'`` (global -> the thread's
    prefetch registers) and ``'store'`` (those registers -> the buffer): an unrolled loop
    over the thread's ``ceil(size / threads)`` elements, so all its loads are in flight
    at once."""
    footprint = buffer.writes if direction == "out" else buffer.reads
    extents = buffer.box.extents
    u = [f"pg_u{k}" for k in range(len(extents))]
    if buffer.lanes > 1:
        return _lane_copy(buffer, footprint, u, thread_context(scop, kernel, threads=True),
                          printer, direction)
    # a shared copy runs exactly where its footprint is not empty (its placeholder's
    # domain); a register copy runs in every thread
    known = footprint.params() if buffer.space == "shared" else \
        thread_context(scop, kernel, threads=True)
    if buffer.space == "shared" and (scop.fixed_parameters or kernel.blocks is not None):
        # a specialized kernel: the parameter values and the grid bound the blocks too
        # (and code for whole or partial tiles only knows which blocks run it)
        blocks = thread_context(scop, kernel, threads=False)
        known = known.intersect_params(blocks.align_params(known.get_space()))
    n_threads = kernel.block_threads
    # a shared copy dealt to the threads runs over the reachable part of the box only
    # (the prefetch halves keep the box: their registers are counted from it)
    if buffer.space == "shared" and direction in ("in", "out") and scop.fixed_parameters:
        extents = copied_extents(footprint, buffer, known)
    guard = index_text(_guard(footprint, buffer, u, known, extents), printer.index64)
    # the loop runs through the box in the array's order (coalesced global accesses);
    # the buffer may store it in another
    local = stored(buffer, u)
    subs = _element(buffer, u, printer.index64)
    # (an array resident in the block's shared memory is copied from and to there)
    global_ref = printer.buffers[buffer.array].subscript(subs) \
        if buffer.array in printer.buffers else \
        f"{buffer.array}[{printer.flat_index(buffer.array, subs)}]"
    staged = f"{prefetch_name(buffer)}[pg_q]"
    move = {"in": f"{local} = {global_ref};", "out": f"{global_ref} = {local};",
            "load": f"{staged} = {global_ref};", "store": f"{local} = {staged};"}[direction]
    if buffer.atomic:  # partial sums: start from zero, add to the array atomically
        add = atomic_function(kernel, [s for s in kernel.atomic
                                       if scop.statement(s).writes[0].array == buffer.array])
        move = f"{local} = 0;" if direction == "in" else f"{add}(&{global_ref}, {local});"
    body = cgen.Block([cgen.Line(move)]) if guard in ("1", "") else \
        cgen.Block([cgen.If(guard, cgen.Block([cgen.Line(move)]))])
    if buffer.space == "register":
        loop = body
        for k in reversed(range(len(extents))):
            loop = cgen.Block([cgen.Pragma("unroll"), cgen.For(
                f"int {u[k]} = 0", f"{u[k]} < {extents[k]}", f"{u[k]} += 1", loop)])
        return [loop]
    size = math.prod(extents)
    unpack = _unpack(u, extents)
    if direction in ("load", "store"):
        width = vector_width(buffer, kernel, scop, guard)
        if width > 1:
            return _vector_halves(buffer, kernel, printer, direction, width, unpack, u,
                                  global_ref, local, staged)
        inner = cgen.Block(unpack + list(body.contents))
        if size % n_threads:
            inner = cgen.Block([cgen.If(f"pg_i < {size}", inner)])
        return [cgen.Block([cgen.Pragma("unroll"), cgen.For(
            "int pg_q = 0", f"pg_q < {prefetch_count(buffer, kernel)}", "pg_q += 1",
            cgen.Block([cgen.Line(f"const int pg_i = {TID} + {n_threads} * pg_q;")]
                       + list(inner.contents)))])]
    if direction == "in" and buffer.space == "shared" and not buffer.atomic:
        # vectors along rows (one unpacking a vector), else along a contiguous range
        width = vector_width(buffer, kernel, scop, guard, extents)
        if width > 1:
            return _vector_dealt(buffer, n_threads, width, size, unpack, u, global_ref,
                                 local)
        if buffer.array not in printer.buffers:
            width = contiguous_width(buffer, kernel, scop, guard, extents, known)
            if width > 1:
                start = printer.flat_index(buffer.array, _element(buffer, ["0"] * len(u),
                                                                  printer.index64))
                return _contiguous_dealt(buffer, n_threads, width, extents, u, start, local)
    return _dealt(size, n_threads, unpack + list(body.contents))


LANE = "pg_lane"  # a launched kernel's lane among those of its thread (Variant.lanes)


def _lane_copy(buffer: Buffer, footprint: isl.Set, u: list[str], known: isl.Set,
               printer: Printer, direction: str) -> list:
    """The copy-in or copy-out of a register copy spread over the lanes
    (``Buffer.lanes``): each lane moves its own elements, slot ``s`` of the lane
    dimension holding element ``s * lanes + lane`` -- an unrolled loop over the slots,
    the element's lane and the footprint's guard checked in each."""
    d, lanes = buffer.lane_dimension, buffer.lanes
    extents = list(buffer.box.extents)
    slots = -(-extents[d] // lanes)
    element = list(u)
    element[d] = f"pg_e{d}"
    guard = index_text(_guard(footprint, buffer, element, known), printer.index64)
    if slots * lanes > extents[d]:  # (the last slot's lanes beyond the box)
        guard = f"{element[d]} < {extents[d]}" + ("" if guard in ("1", "") else
                                                    f" && ({guard})")
    subs = _element(buffer, element, printer.index64)
    global_ref = printer.buffers[buffer.array].subscript(subs) \
        if buffer.array in printer.buffers else \
        f"{buffer.array}[{printer.flat_index(buffer.array, subs)}]"
    local = stored(buffer, u)
    move = f"{local} = {global_ref};" if direction == "in" else f"{global_ref} = {local};"
    body = [cgen.Line(f"const int {element[d]} = {u[d]} * {lanes} + {LANE};")]
    body += [cgen.Line(move)] if guard in ("1", "") else \
        [cgen.If(guard, cgen.Block([cgen.Line(move)]))]
    loop = cgen.Block(body)
    extents[d] = slots
    for k in reversed(range(len(extents))):
        loop = cgen.Block([cgen.Pragma("unroll"), cgen.For(
            f"int {u[k]} = 0", f"{u[k]} < {extents[k]}", f"{u[k]} += 1", loop)])
    return [loop]


def contiguous_width(buffer: Buffer, kernel: TiledKernel, scop: Scop, guard: str,
                     extents: tuple[int, ...], known: isl.Set) -> int:
    """Elements one thread of a copy-in moves with one 16-byte load where the part of
    ``buffer``'s box the copy reaches (``extents``) is one contiguous range of the
    array (1: it is not, or not provably aligned).

    Why: a batch of elements of 2 or 4 words has rows no multiple of a vector
    (:func:`vector_width` needs them), but a block's elements lie one after another:
    128 dot products of 2-word vectors are 256 consecutive words.  The range is
    contiguous where, outside the outermost dimension, the box reaches whole rows of the
    array (the extents equal the array's, known constants of a specialized program)
    from their start (the base 0 in every block, proven with isl) with stride 1; it is
    aligned where its first element's offset is a multiple of the width in every block
    and the whole range is a multiple of it.  As for :func:`vector_width`, some tile is
    a multiple of the width, so that the check program decides alike; the array's
    address is checked when the kernel runs."""
    box = buffer.box
    width = VECTOR_BYTES // buffer.element_size
    if buffer.dtype not in VECTOR_TYPES or buffer.space != "shared" or \
            guard not in ("1", "") or width < 2 or box.chunk \
            or any(t != 1 for t in box.stride) or math.prod(extents) % width \
            or all(t % width for t in kernel.tile):
        return 1
    extent = _fixed_extent(scop, buffer.array)
    pitch = 1
    for d in range(1, len(extents)):
        top = extent.dim_max(d)
        if not top.is_cst() or extent.dim_min_val(d).to_python() != 0:
            return 1
        rows = top.max_val().to_python() + 1
        if rows != extents[d] or _nonzero_somewhere(box.base[d], known):
            return 1
        pitch *= rows
    first = box.base[0].scale_val(isl.Val(pitch)).mod_val(isl.Val(width))
    return 1 if _nonzero_somewhere(first, known) else width


def _nonzero_somewhere(pa: isl.PwAff, known: isl.Set) -> bool:
    """Whether ``pa`` (a function of the parameters) is not 0 for some parameters in
    ``known``."""
    off = pa.non_zero_set()
    off = off.align_params(known.get_space())
    return not off.intersect_params(known.align_params(off.get_space())).params().is_empty()


def _contiguous_dealt(buffer: Buffer, threads: int, width: int, extents: tuple[int, ...],
                      u: list[str], start: str, local: str) -> list:
    """A copy-in of a contiguous range (:func:`contiguous_width`) dealt to ``threads``
    threads ``width`` consecutive words at a time: one 16-byte load where the array's
    address is 16-byte aligned (word by word otherwise), each word to its place in the
    buffer (its rows may be shorter than a vector, and padded)."""
    vtype = VECTOR_TYPES[buffer.dtype]
    aligned = _aligned(buffer.array)

    def word(e: int, value: str) -> cgen.Block:
        return cgen.Block([cgen.Line(f"const int pg_j = pg_i + {e};")]
                          + _unpack(u, extents, "pg_j") + [cgen.Line(f"{local} = {value};")])

    vector = cgen.Block(
        [cgen.Line(f"const {vtype} pg_v = *reinterpret_cast<const {vtype} *>("
                   f"&{buffer.array}[({start}) + pg_i]);")]
        + [word(e, f"pg_v.{c}") for e, c in enumerate("xyzw"[:width])])
    scalar = cgen.Block([word(e, f"{buffer.array}[({start}) + pg_i + {e}]")
                         for e in range(width)])
    return [cgen.For(f"int pg_i = {width} * {TID}", f"pg_i < {math.prod(extents)}",
                     f"pg_i += {width * threads}", cgen.Block([cgen.If(aligned, vector,
                                                                       scalar)]))]


def _vector_dealt(buffer: Buffer, threads: int, width: int, size: int, unpack: list,
                  u: list[str], global_ref: str, local: str) -> list:
    """A copy-in dealt to ``threads`` threads ``width`` consecutive elements at a time
    (:func:`vector_width`): one 16-byte global load each where the array's address is
    16-byte aligned (element by element otherwise), stored to the buffer element by
    element (its padded rows need not be aligned).  A quarter of the load instructions
    of a word-by-word copy, and four times the bytes in flight per instruction: what a
    batch of small elements, bound by the bandwidth, needs (gemv rows at n = 32)."""
    last = u[-1]
    vtype = VECTOR_TYPES[buffer.dtype]
    aligned = _aligned(buffer.array)
    vector = cgen.Block(
        [cgen.Line(f"const {vtype} pg_v = *reinterpret_cast<const {vtype} *>("
                   f"&{global_ref});")]
        + [cgen.Line(f"{_at_lane(local, last, e)} = pg_v.{c};")
           for e, c in enumerate("xyzw"[:width])])
    scalar = cgen.Block([cgen.Pragma("unroll"), cgen.For(
        "int pg_e = 0", f"pg_e < {width}", "pg_e += 1", cgen.Block([
            cgen.Line(f"const int {last}_e = {last} + pg_e;"),
            cgen.Line(f"{_with_lane(local, last)} = {_with_lane(global_ref, last)};")]))])
    return [cgen.For(f"int pg_i = {width} * {TID}", f"pg_i < {size}",
                     f"pg_i += {width * threads}",
                     cgen.Block(unpack + [cgen.If(aligned, vector, scalar)]))]


# Bytes of copy-in loads one thread holds in registers at once (:func:`resident_copies_in`).
# 64: 16 words of 4 bytes, a thread's share of the loads a bandwidth-bound batch needs in
# flight several times over, without raising the kernel's registers where the steps need
# fewer (128 raised the batched Cholesky's at n = 32 from 40 to 48, ptxas: two blocks an
# SM fewer; 64 leaves it at 40)
BATCHED_COPY_BYTES = 64
# Whether a full block of a batch copies an array's contiguous range of its elements in
# 16-byte vectors (:func:`_block_range`); False: word by word (a probe's switch)
BLOCK_RANGES = True


def resident_copies_in(entries: Sequence[tuple[Buffer, Sequence]], printer: Printer,
                       threads: int, known: isl.Set, elements: int = 1,
                       scop: Scop | None = None, element: str | None = None,
                       dynamic: bool = False) -> list:
    """Copy-ins of resident ``buffers`` (``entries``: each with its ``rebind``, as
    :func:`resident_copy`) in batches whose loads all issue before any store.

    A copy loop that stores each loaded word to shared memory before its next load
    waits a full memory latency per word: the loads of the guarded, dealt loop sit in
    separate branches, so the compiler cannot hoist them, and a thread has one load in
    flight.  A batch loads every word a thread moves into registers first (fully
    unrolled, each under the same guard as its store), then stores them, so a thread
    has all its loads in flight at once.  Buffers a thread moves more than
    :data:`BATCHED_COPY_BYTES` of keep the one-loop copy.

    With several ``elements`` a block (``element``: the batch's parameter, ``scop`` the
    region) a buffer whose elements' boxes lie one after another in the array, each
    read whole, is copied by a full block as one contiguous range in 16-byte vectors
    (:func:`_block_range`); a partial block (the batch's last) copies word by word."""
    out: list = []
    batch: list = []
    held = 0

    def flush():
        """The batch's word-by-word loads, then its stores; where some of its buffers
        are ranged, behind a test that every ranged one's block is full, the loads and
        stores of their vectors instead (one branch: the registers of the two forms are
        never live at once)."""
        nonlocal batch, held
        words = [line for b in batch for line in b.loads] + \
            [line for b in batch for line in b.stores]
        ranged = [b for b in batch if b.vectors is not None]
        out.extend(line for b in batch for line in b.declared)
        if not ranged:
            out.extend(words)
        else:
            fast = [line for b in batch for line in (b.vectors or b.loads)] + \
                [line for b in batch for line in (b.vector_stores or b.stores)]
            out.append(cgen.If(" && ".join(b.full for b in ranged), cgen.Block(fast),
                               cgen.Block(words)))
        batch, held = [], 0

    for buffer, rebind in entries:
        fastest = elements > 1 and interleaved(buffer, element)
        if BATCHED_COPY_BYTES <= 0:
            out += resident_copy(buffer, printer, "in", threads, known, elements, rebind,
                                 fastest)
            continue
        parts = _copy_parts(buffer, printer, "in", threads, known, elements, rebind,
                            fastest)
        rounds = -(-parts.total // parts.stride)
        nbytes = rounds * buffer.element_size
        if nbytes > BATCHED_COPY_BYTES:
            out += resident_copy(buffer, printer, "in", threads, known, elements, rebind,
                                 fastest)
            continue
        if held + nbytes > BATCHED_COPY_BYTES:
            flush()
        copy = _batched(buffer, parts, rounds)
        ranged = _block_range(buffer, printer, scop, known, element, elements, rebind,
                              dynamic)
        if ranged is not None:
            # (a box read whole is copied whole: its words, not the copy's reach)
            words = math.prod(buffer.box.extents) * elements
            copy = _ranged(buffer, *ranged, words, parts.stride, copy)
        batch.append(copy)
        held += nbytes
    flush()
    return out


@dataclass(frozen=True)
class _CopyParts:
    """A resident copy's pieces: ``total`` linear indices dealt ``stride`` apart from
    ``first`` (C names ``linear``), ``index`` (C lines binding the element and box
    coordinates of ``linear``), the ``guard``, the buffer element ``local`` and the
    array element ``global_ref``."""

    total: int
    stride: int
    first: str
    linear: str
    index: list
    guard: str
    local: str
    global_ref: str


def interleaved(buffer: Buffer, element: str | None) -> bool:
    """Whether ``buffer``'s box is one word wide along its array's innermost dimension
    and moves there one word per batch element (the parameter ``element``): elements
    interleaved (SoA, ``a[i][j][e]``), so neighbouring elements' words share sectors."""
    box = buffer.box
    if element is None or not box.extents or box.extents[-1] != 1:
        return False
    base = box.base[-1]
    k = base.get_domain_space().find_dim_by_name(isl.dim_type.param, element)
    pieces = base.get_pieces() if k >= 0 else []
    return bool(pieces) and all(
        aff.get_coefficient_val(isl.dim_type.param, k).to_python() == 1
        for _, aff in pieces)


def _copy_parts(buffer: Buffer, printer: Printer, direction: str, threads: int,
                known: isl.Set, elements: int, rebind: Sequence,
                element_fastest: bool = False) -> _CopyParts:
    footprint = buffer.writes if direction == "out" else buffer.reads
    extents = copied_extents(footprint, buffer, known)
    u = [f"pg_u{k}" for k in range(len(extents))]
    guard = index_text(_guard(footprint, buffer, u, known, extents), printer.index64)
    local = stored(buffer, u, buffer.name)
    subs = _element(buffer, u, printer.index64)
    global_ref = f"{buffer.array}[{printer.flat_index(buffer.array, subs)}]"
    size = math.prod(extents)
    if elements == 1:
        return _CopyParts(size, threads, TID, "pg_i", _unpack(u, extents), guard, local,
                          global_ref)
    if element_fastest:  # consecutive threads, consecutive elements' words
        element = [cgen.Line(f"const int {GROUP} = pg_l % {elements};"), *rebind,
                   cgen.Line(f"const int pg_i = pg_l / {elements};")]
    else:
        element = [cgen.Line(f"const int {GROUP} = pg_l / {size};"), *rebind,
                   cgen.Line(f"const int pg_i = pg_l % {size};")]
    return _CopyParts(size * elements, threads * elements, "threadIdx.x", "pg_l",
                      element + _unpack(u, extents), guard, local, global_ref)


def resident_copies_out(entries: Sequence[tuple[Buffer, Sequence]], printer: Printer,
                        threads: int, known: isl.Set, elements: int = 1,
                        scop: Scop | None = None, element: str | None = None,
                        dynamic: bool = False) -> list:
    """Copy-outs of resident buffers (``entries`` as :func:`resident_copies_in`): a
    full block of a batch stores each array's contiguous range of its elements written
    whole in 16-byte vectors, a partial block word by word (:func:`resident_copy`)."""
    out: list = []
    for buffer, rebind in entries:
        words = resident_copy(buffer, printer, "out", threads, known, elements, rebind,
                              elements > 1 and interleaved(buffer, element))
        ranged = _block_range(buffer, printer, scop, known, element, elements, rebind,
                              dynamic, "out")
        if ranged is None:
            out += words
            continue
        lines, full = ranged
        vtype = VECTOR_TYPES[buffer.dtype]
        vectors = math.prod(buffer.box.extents) * elements // (
            VECTOR_BYTES // buffer.element_size)
        stride = threads * elements
        store = cgen.Line(f"reinterpret_cast<{vtype} *>(&{buffer.array}["
                          f"{buffer.name}_out_start])[pg_j] = reinterpret_cast<const "
                          f"{vtype} *>({buffer.name}_all)[pg_j];")
        # (an unrolled loop over the thread's rounds, each guarded: nvcc's own unrolling
        # of a dealt loop held 10 more registers in the chain's kernel)
        inner = cgen.Block([cgen.Line(f"const int pg_j = threadIdx.x + pg_r * {stride};"),
                            cgen.If(f"pg_j < {vectors}", cgen.Block([store]))
                            if vectors % stride else store])
        out += [*lines, cgen.If(full, cgen.Block([cgen.Pragma("unroll"), cgen.For(
            "int pg_r = 0", f"pg_r < {-(-vectors // stride)}", "pg_r += 1", inner)]),
            cgen.Block(words))]
    return out


def _block_range(buffer: Buffer, printer: Printer, scop: Scop | None, known: isl.Set,
                 element: str | None, elements: int, rebind: Sequence,
                 dynamic: bool = False, direction: str = "in"
                 ) -> tuple[list, str] | None:
    """Where a block's copy-in (``direction`` "out": copy-out) of ``buffer`` is one
    contiguous range of its array in a full block: the C lines setting
    ``<name>_<direction>_start`` (the range's first offset) and
    ``<name>_<direction>_full`` (whether the block's first and last elements read --
    or write -- their whole box, and the range is 16-byte aligned), or None where
    the range is not contiguous.

    Proven with isl: every box dimension has stride 1, the box reaches whole rows of the
    array from their start outside the first dimension (known constant extents), and
    the first dimension's base is ``extent * element + c`` -- so element ``e + 1``'s box
    starts where element ``e``'s ends; the elements that read their whole box form one
    convex set (no strides, no holes), so a block whose first and last do has every
    element between read whole, and the block's boxes are the range, word for word, the
    buffers of its elements (dense: no padding, storage in the box's order) too."""
    if not BLOCK_RANGES or elements == 1 or scop is None or element is None or dynamic:
        return None  # (one element a block, or buffers carved from dynamic memory)
    box = buffer.box
    extents = box.extents
    d = len(extents)
    width = VECTOR_BYTES // buffer.element_size
    size = math.prod(extents)
    if buffer.dtype not in VECTOR_TYPES or box.chunk or any(t != 1 for t in box.stride) \
            or buffer.row_extents != extents or buffer.stages != 1 or buffer.packed \
            or buffer.storage_order != tuple(range(d)) or size * elements % width:
        return None
    inside = box_coordinates(buffer.writes if direction == "out" else buffer.reads, buffer.box)
    whole = isl.Set.universe(inside.get_space())
    for k, e in enumerate(extents):
        whole = whole.lower_bound_val(isl.dim_type.set, k, isl.Val(0)) \
            .upper_bound_val(isl.dim_type.set, k, isl.Val(e - 1))
    short = whole.subtract(inside).params()
    full = isl.Set.universe(short.get_space()).subtract(short)
    full = full.intersect_params(known.align_params(full.get_space())).coalesce()
    if full.is_empty() or full.n_basic_set() != 1 or \
            full.get_basic_sets()[0].dim(isl.dim_type.div):
        return None
    extent = _fixed_extent(scop, buffer.array)
    for k in range(1, d):
        top = extent.dim_max(k)
        if not top.is_cst() or extent.dim_min_val(k).to_python() != 0 or \
                top.max_val().to_python() + 1 != extents[k] or \
                _nonzero_somewhere(box.base[k], full):
            return None
    pieces = box.base[0].get_pieces()
    if len(pieces) != 1:
        return None
    aff = pieces[0][1]
    k = aff.get_domain_space().find_dim_by_name(isl.dim_type.param, element)
    if k < 0 or aff.dim(isl.dim_type.div) or \
            aff.get_coefficient_val(isl.dim_type.param, k).to_python() != extents[0]:
        return None
    condition = isl.AstBuild.from_context(known.align_params(full.get_space()).params()) \
        .expr_from_set(full).to_C_str()
    itype = INDEX64 if printer.index64 else "int"
    start, ok = f"{buffer.name}_{direction}_start", f"{buffer.name}_{direction}_full"
    origin = printer.flat_index(buffer.array, _element(buffer, ["0"] * d, printer.index64))

    def at(group: int, *lines: str) -> cgen.Block:
        return cgen.Block([cgen.Line(f"const int {GROUP} = {group};"), *rebind,
                           *map(cgen.Line, lines)])

    read_whole = index_text(condition, printer.index64)
    lines = [cgen.Line(f"{itype} {start};"), cgen.Line(f"bool {ok};"),
             at(0, f"{start} = {origin};", f"{ok} = {read_whole};"),
             at(elements - 1, f"{ok} = {ok} && ({read_whole});"),
             cgen.Line(f"{ok} = {ok} && reinterpret_cast<size_t>(&{buffer.array}[{start}])"
                       f" % {VECTOR_BYTES} == 0;")]
    return lines, ok


@dataclass(frozen=True)
class _BatchedCopy:
    """One buffer's part of a batch of copy-ins: the register ``declared``, the word by
    word ``loads`` and ``stores``; for a ranged buffer also its block's 16-byte
    ``vectors`` and ``vector_stores``, used where C condition ``full`` holds."""

    declared: list
    loads: list
    stores: list
    full: str = ""
    vectors: list | None = None
    vector_stores: list | None = None


def _ranged(buffer: Buffer, lines: list, full: str, words: int, stride: int,
            copy: _BatchedCopy) -> _BatchedCopy:
    """``copy`` with the block's range of ``words`` (:func:`_block_range`: ``lines``
    set its start and ``full``) as 16-byte vectors dealt ``stride`` apart, for full
    blocks."""
    vtype = VECTOR_TYPES[buffer.dtype]
    held = f"{buffer.name}_vec"
    vectors = words // (VECTOR_BYTES // buffer.element_size)
    rounds = -(-vectors // stride)
    start = f"{buffer.name}_in_start"

    def each(move: str) -> list:
        body = cgen.Line(move)
        if vectors % stride:
            body = cgen.If(f"pg_j < {vectors}", cgen.Block([body]))
        return [cgen.Pragma("unroll"), cgen.For(
            "int pg_r = 0", f"pg_r < {rounds}", "pg_r += 1", cgen.Block([
                cgen.Line(f"const int pg_j = threadIdx.x + pg_r * {stride};"), body]))]

    return replace(
        copy, declared=[*copy.declared, *lines, cgen.Line(f"{vtype} {held}[{rounds}];")],
        full=full,
        vectors=each(f"{held}[pg_r] = reinterpret_cast<const {vtype} *>("
                     f"&{buffer.array}[{start}])[pg_j];"),
        vector_stores=each(f"reinterpret_cast<{vtype} *>({buffer.name}_all)[pg_j] = "
                           f"{held}[pg_r];"))


def _batched(buffer: Buffer, parts: _CopyParts, rounds: int) -> _BatchedCopy:
    """The loads of ``buffer``'s copy-in into a register array, and the stores of that
    array into the buffer: two fully unrolled loops over the thread's ``rounds``."""
    held = f"{buffer.name}_in"
    ctype = ir.DTYPES[buffer.dtype][0]

    def rounds_loop(move: str) -> list:
        body = parts.index + [cgen.Line(move) if parts.guard in ("1", "") else
                              cgen.If(parts.guard, cgen.Block([cgen.Line(move)]))]
        inner = cgen.Block([cgen.Line(f"const int {parts.linear} = {parts.first} + "
                                      f"pg_r * {parts.stride};")]
                           + ([cgen.If(f"{parts.linear} < {parts.total}",
                                       cgen.Block(body))]
                              if parts.total % parts.stride else body))
        return [cgen.Pragma("unroll"),
                cgen.For("int pg_r = 0", f"pg_r < {rounds}", "pg_r += 1", inner)]

    return _BatchedCopy([cgen.Line(f"{ctype} {held}[{rounds}];")],
                        rounds_loop(f"{held}[pg_r] = {parts.global_ref};"),
                        rounds_loop(f"{parts.local} = {held}[pg_r];"))


def resident_copy(buffer: Buffer, printer: Printer, direction: str, threads: int,
                  known: isl.Set, elements: int = 1, rebind: Sequence = (),
                  element_fastest: bool = False) -> list:
    """Copy-in (global -> buffer, where read) or copy-out (buffer -> global, where
    written) of a resident buffer (:mod:`polygpu.memory.residence`): its box linearised
    and dealt cyclically to the block's ``threads`` threads, guarded by the exact
    footprint within the parameter set ``known``; ``printer`` prints global offsets.

    With ``elements`` > 1 (groups of ``threads`` threads, one element each) the block's
    threads together move every group's box, element after element: ``GROUP`` is
    redeclared as the element of each linear index, then ``rebind`` (the element's
    host iterator and buffer pointer, shadowing the thread's own).  Consecutive
    elements of a batch are mostly adjacent in memory, so a warp's loads run over
    several elements' boxes instead of a group's few words, and the index arithmetic
    is spread over the whole block.  With ``element_fastest`` (interleaved elements,
    :func:`interleaved`) the element is the linear index's fastest coordinate instead:
    a warp's loads run over neighbouring elements' words of one entry, whole sectors."""
    p = _copy_parts(buffer, printer, direction, threads, known, elements, rebind,
                    element_fastest)
    move = cgen.Line(f"{p.local} = {p.global_ref};" if direction == "in"
                     else f"{p.global_ref} = {p.local};")
    body = [move] if p.guard in ("1", "") else [cgen.If(p.guard, cgen.Block([move]))]
    return [cgen.For(f"int {p.linear} = {p.first}", f"{p.linear} < {p.total}",
                     f"{p.linear} += {p.stride}", cgen.Block(p.index + body))]


def _unpack(u: list[str], extents: tuple[int, ...], linear: str = "pg_i") -> list:
    """The box coordinates ``u`` of linear element ``linear`` (row-major)."""
    unpack = []
    stride = 1
    for k in reversed(range(len(extents))):
        value = linear if stride == 1 else f"{linear} / {stride}"
        if k > 0:
            value = f"{value} % {extents[k]}"
        unpack.insert(0, cgen.Line(f"const int {u[k]} = {value};"))
        stride *= extents[k]
    return unpack


def _dealt(size: int, threads: int, body: list) -> list:
    """``body`` for every linear element ``pg_i`` of ``size``, dealt cyclically to
    ``threads`` threads (consecutive threads, consecutive elements)."""
    return [cgen.For(f"int pg_i = {TID}", f"pg_i < {size}", f"pg_i += {threads}",
                     cgen.Block(body))]


VECTOR_BYTES = 16  # the widest global load: float4, double2
# element types with a 16-byte vector type here and in the CPU emulator
# (runtime/cuda_emulation.h): integer arrays are copied word by word
VECTOR_TYPES = {"float32": "float4", "float64": "double2"}


def vector_width(buffer: Buffer, kernel: TiledKernel, scop: Scop, guard: str,
                 extents: tuple[int, ...] | None = None) -> int:
    """Elements of ``buffer``'s prefetched copy-in one thread loads with one 16-byte
    global load (1: word by word).  The hand-written probe of mm's best shape
    (``tuning/mm_pipeline_probe.py``) ran 2 % faster so on the H100.

    Only where every vector is whole and aligned in every block, proven, not hoped:
    the copy has no element guard (``guard`` is "1": the whole box is read), the box is
    dense along the array's innermost dimension (stride 1, no runs) with that extent a
    multiple of the width, every thread gets whole vectors (the box a multiple of the
    width times the threads, so the prefetch registers are those the memory stage
    counted), the array's rows are a multiple of the width (its innermost extent a
    known constant: a specialized kernel's parameters) and the box's first element of a
    row lies on a multiple of it for every block and tile (isl), and some tile is a
    multiple of the width, so that the check program, specialized at sizes that keep
    every size modulo the tiles, decides alike.  The array's address is checked when the
    kernel runs (:func:`_vector_halves`).

    With ``extents`` (a copy dealt cyclically over the part of the box it reaches:
    :func:`copied_extents`), those extents stand for the box's, and the threads need not
    get equally many vectors."""
    box = buffer.box
    width = VECTOR_BYTES // buffer.element_size
    if buffer.dtype not in VECTOR_TYPES:
        return 1
    dealt = extents is not None
    extents = extents or box.extents
    if buffer.space != "shared" or buffer.atomic or guard not in ("1", "") or width < 2 \
            or box.stride[-1] != 1 or box.chunks[-1] != 1 or extents[-1] % width \
            or (not dealt and box.size % (width * kernel.block_threads)):
        return 1
    # the same decision in the check program: the check's sizes keep every size modulo
    # the tiles' period (tuner.check_parameters), a multiple of the width once one tile
    # is, so rows and bases keep their alignment there
    if all(t % width for t in kernel.tile):
        return 1
    extent = _fixed_extent(scop, buffer.array)
    last = extent.dim(isl.dim_type.set) - 1
    row = extent.dim_max(last)
    if not row.is_cst() or extent.dim_min_val(last).to_python() != 0:
        return 1
    pitch = row.max_val().to_python() + 1
    if pitch % width:
        return 1
    # the first element of each row of the box: on a multiple of the width everywhere
    # the copy runs (its footprint's parameters, with the grid's bounds)
    base = box.base[-1]
    known = buffer.reads.params()
    if scop.fixed_parameters or kernel.blocks is not None:
        blocks = thread_context(scop, kernel, threads=False)
        known = known.intersect_params(blocks.align_params(known.get_space()))
    return 1 if _nonzero_somewhere(base.mod_val(isl.Val(width)), known) else width


def _fixed_extent(scop: Scop, array: str) -> isl.Set:
    """``array``'s index set with the parameters ``scop`` fixes (a specialized
    program's sizes) substituted: its rows' lengths as constants where they are known."""
    extent = scop.array(array).extent
    for name, value in scop.fixed_parameters.items():
        k = extent.find_dim_by_name(isl.dim_type.param, name)
        if k >= 0:
            extent = extent.fix_val(isl.dim_type.param, k, isl.Val(value))
    return extent


def _aligned(array: str) -> str:
    """C condition: ``array``'s address allows 16-byte loads (a caller's device array
    may be offset; the device layer's allocations always do)."""
    return f"(reinterpret_cast<size_t>({array}) % {VECTOR_BYTES} == 0)"


def _vector_halves(buffer: Buffer, kernel: TiledKernel, printer: Printer, direction: str,
                   width: int, unpack: list, u: list[str], global_ref: str, local: str,
                   staged: str) -> list:
    """The prefetched copy-in with ``width`` consecutive elements a thread
    (:func:`vector_width`): thread ``t`` takes vectors ``t + threads q``; the ``load``
    half reads each with one 16-byte load where the array's address is 16-byte aligned
    (always, for arrays the device layer allocates; a caller's device array may be
    offset) and element by element otherwise, into ``width`` consecutive prefetch
    registers; the ``store`` half writes them to the buffer element by element (a
    transposed buffer scatters them)."""
    n_threads = kernel.block_threads
    vectors = buffer.box.size // width // n_threads
    last = u[-1]
    vtype = VECTOR_TYPES[buffer.dtype]
    lanes = "xyzw"[:width]
    head = [cgen.Line(f"const int pg_i = {width} * ({TID} + {n_threads} * pg_q);")] + unpack
    if direction == "load":
        aligned = _aligned(buffer.array)
        slot = f"{prefetch_name(buffer)}[{width} * pg_q + pg_e]"
        scalar = cgen.Block([cgen.Pragma("unroll"), cgen.For(
            "int pg_e = 0", f"pg_e < {width}", "pg_e += 1", cgen.Block([
                cgen.Line(f"const int {last}_e = {last} + pg_e;"),
                cgen.Line(f"{slot} = {_with_lane(global_ref, last)};")]))])
        vector = cgen.Block(
            [cgen.Line(f"const {vtype} pg_v = *reinterpret_cast<const {vtype} *>("
                       f"&{global_ref});")]
            + [cgen.Line(f"{prefetch_name(buffer)}[{width} * pg_q + {e}] = pg_v.{c};")
               for e, c in enumerate(lanes)])
        body = [cgen.If(aligned, vector, scalar)]
    else:
        body = [cgen.Pragma("unroll"), cgen.For(
            "int pg_e = 0", f"pg_e < {width}", "pg_e += 1", cgen.Block([
                cgen.Line(f"const int {last}_e = {last} + pg_e;"),
                cgen.Line(f"{_with_lane(local, last)} = "
                          f"{staged.replace('[pg_q]', f'[{width} * pg_q + pg_e]')};")]))]
    return [cgen.Block([cgen.Pragma("unroll"), cgen.For(
        "int pg_q = 0", f"pg_q < {vectors}", "pg_q += 1", cgen.Block(head + body))])]


def _with_lane(text: str, name: str) -> str:
    """``text`` with the index ``name`` replaced by ``name_e`` (the element of a vector)."""
    return re.sub(rf"\b{re.escape(name)}\b", f"{name}_e", text)


def _at_lane(text: str, name: str, lane: int) -> str:
    """``text`` with the index ``name`` replaced by ``(name + lane)``."""
    return re.sub(rf"\b{re.escape(name)}\b", f"({name} + {lane})", text)


def prefetch_name(buffer: Buffer) -> str:
    return f"pg_pf_{buffer.name}"


def _shifted(s: isl.Set, by: int) -> isl.Set:
    """``{ o : o + by e_last in s }``: where the next (``by = 1``) or the previous
    (``by = -1``) iteration of the innermost tile level lies in ``s``."""
    n = s.dim(isl.dim_type.set)
    its = [f"o{k}" for k in range(n)]
    moved = its[:-1] + [f"{its[-1]} + {by}" if by >= 0 else f"{its[-1]} - {-by}"]
    ma = isl.MultiAff(f"{{ [{', '.join(its)}] -> [{', '.join(moved)}] }}")
    return s.preimage_multi_aff(ma.align_params(s.get_space()))


def _condition(s: isl.Set, known: isl.Set, index64: bool = False) -> str:
    """``s`` (a parameter set) as a C condition, simplified where ``known`` holds."""
    known = known.align_params(s.get_space())
    s = s.align_params(known.get_space())
    if known.is_subset(s):
        return "1"
    if s.intersect(known).is_empty():
        return "0"
    return index_text(isl.AstBuild.from_context(known).expr_from_set(s).to_C_str(), index64)


def _bind(names: list[str], args: list[str], code: list, index64: bool = False) -> list:
    """``code`` preceded by ``const int name = arg;`` for the names it uses."""
    text = "\n".join(str(c) for c in code)
    itype = INDEX64 if index64 else "int"
    return [cgen.Line(f"const {itype} {n} = {a};") for n, a in zip(names, args, strict=True)
            if re.search(rf"\b{re.escape(n)}\b", text)] + code


def _projection(scop: Scop, kernel: TiledKernel, level: int, statements) -> isl.Set | None:
    """``{ [o_0..o_{level-1}] }`` over the block parameters: the tile-level coordinates
    where some instance of ``statements`` runs in the block."""
    m = kernel.n_mapped
    result = None
    for piece in maps_of(kernel.schedule):
        if piece.get_tuple_name(isl.dim_type.in_) not in statements:
            continue
        n_out = piece.dim(isl.dim_type.out)
        part = piece.project_out(isl.dim_type.out, 2 * m + level, n_out - 2 * m - level)
        part = part.project_out(isl.dim_type.out, m, m).range()  # [b.., o..]
        n = part.dim(isl.dim_type.param)
        part = part.move_dims(isl.dim_type.param, n, isl.dim_type.set, 0, m)
        for k, name in enumerate(kernel.block_names):
            part = part.set_dim_name(isl.dim_type.param, n + k, name)
        result = part if result is None else result.union(part)
    return result


def _schedule_of(name: str, domain: isl.Set, level: int, order: int, depth: int) -> isl.Map:
    """``name[o..] -> [1, o_0, .., 1, o_{level-1}, order, 0, ..]`` (length ``2 depth + 1``):
    at its level a copy-in (order 0) precedes the deeper levels (1), a copy-out (2)
    follows them."""
    its = [f"o{k}" for k in range(level)]
    out = []
    for k in range(level):
        out += ["1", its[k]]
    out.append(str(order))
    out += ["0"] * (2 * depth + 1 - len(out))
    m = isl.Map(f"{{ {name}[{', '.join(its)}] -> [{', '.join(out)}] }}")
    domain = domain.set_tuple_name(name)
    m = m.align_params(domain.get_space())
    return m.intersect_domain(domain.align_params(m.get_space()))


def staged_body(scop: Scop, kernel: TiledKernel, buffers: list[Buffer], emitter_factory,
                printer: Printer) -> list:
    """The statements of a kernel with shared buffers (see module doc)."""
    shared = [b for b in buffers if b.space == "shared"]
    depth = max(b.level for b in shared)
    levels = list(kernel.level_names[:depth])
    iterators = [f"pg_l{k}" for k in range(depth)]
    statements = frozenset(kernel.statements)
    pieces = []
    tile = _projection(scop, kernel, depth, statements)
    pieces.append(_schedule_of("pg_tile", tile, depth, 1, depth))
    by_name = {}
    for b in shared:
        for direction, footprint, order in (("in", b.reads, 0), ("out", b.writes, 2)):
            if footprint is None:
                continue
            users = {a.statement for a in scop.accesses
                     if a.array == b.array and a.statement in b.statements
                     and a.kind == ("read" if direction == "in" else "write")}
            where = _projection(scop, kernel, b.level, users)
            name = f"pg_{direction}_{b.name}"
            by_name[name] = (b, direction, where)
            pieces.append(_schedule_of(name, where, b.level, order, depth))
    schedule = union_of(pieces)
    context = thread_context(scop, kernel, threads=False).align_params(tile.get_space())
    early = [b for b in shared if b.prefetch]  # the memory stage's decisions
    doubled = any(b.stages > 1 for b in shared)
    build = isl.AstBuild.from_context(context)
    if depth:
        build = build.set_iterators(ids(iterators))
    ast = node_from_schedule_map(build, schedule)

    def user(name: str, args: list[str]) -> list:
        if name == "pg_tile":
            tile_params = _tile_params(tile, kernel, depth)
            inner_context = _inner_context(scop, kernel, depth, tile_params)
            loads = []
            known = tile_params.intersect_params(context)
            for b in early:  # the next tile's elements, into registers, during the work
                where = _tile_params(_shifted(by_name[f"pg_in_{b.name}"][2], 1), kernel,
                                     depth)
                cond = _condition(where, known, printer.index64)
                if cond == "0":
                    continue
                last = levels[-1]
                itype = INDEX64 if printer.index64 else "int"
                load = cgen.Block([cgen.Line(f"const {itype} {last} = pg_next;")]
                                  + copy_loop(b, printer, kernel, scop, "load"))
                block = cgen.Block([cgen.Line(f"const {itype} pg_next = {last} + 1;"), load])
                loads.append(block if cond == "1" else cgen.If(cond, block))
            work = _work(scop, kernel, depth, inner_context, emitter_factory, printer)
            # the copies before it are done; its reads are done before the next copies
            # -- or, double-buffered, the next copies write the other buffers, and the
            # barrier of the next tile keeps the one after from overwriting these early
            after = [cgen.Line(f"{STAGE} ^= 1;")] if doubled else \
                [cgen.Line("__syncthreads();")]
            return _bind(levels, args, [cgen.Line("__syncthreads();")] + loads + work
                         + after, printer.index64)
        b, direction, where = by_name[name]
        if b.prefetch and direction == "in":
            # registers -> buffer, loaded by the previous tile's work unless there was
            # none (the first tile of a run): then load them here first
            known = _tile_params(where, kernel, depth).intersect_params(context)
            first = _tile_params(where.subtract(_shifted(tile, -1)), kernel, depth)
            cond = _condition(first, known, printer.index64)
            load = [] if cond == "0" else copy_loop(b, printer, kernel, scop, "load")
            if load and cond != "1":
                load = [cgen.If(cond, cgen.Block(load))]
            return _bind(levels, args, load + copy_loop(b, printer, kernel, scop, "store"),
                         printer.index64)
        code = _bind(levels[:b.level], args, copy_loop(b, printer, kernel, scop, direction),
                     printer.index64)
        # copy-ins need no barrier of their own (the tile's first one covers all of them,
        # and every element is written by the same thread each time); a copy-out reads
        # what the next copy-in may overwrite
        return code + ([cgen.Line("__syncthreads();")] if direction == "out" else [])

    registers = [cgen.Line(f"{ir.DTYPES[b.dtype][0]} {prefetch_name(b)}"
                           f"[{prefetch_count(b, kernel)}];") for b in early]
    if doubled:  # every thread runs the same tiles, so the stage is uniform in a block
        registers.append(cgen.Line(f"int {STAGE} = 0;"))
    return registers + emitter_factory(user).node(ast)


def _tile_params(tile: isl.Set, kernel: TiledKernel, depth: int) -> isl.Set:
    """The tile domain with its coordinates turned into the level parameters."""
    n = tile.dim(isl.dim_type.param)
    params = tile.move_dims(isl.dim_type.param, n, isl.dim_type.set, 0, depth)
    for k in range(depth):
        params = params.set_dim_name(isl.dim_type.param, n + k, kernel.level_names[k])
    return params.params()


def _inner_context(scop: Scop, kernel: TiledKernel, depth: int, tile_params: isl.Set
                   ) -> isl.Set:
    """The context of the thread's work in one tile: the thread's, with the first
    ``depth`` tile levels as parameters ranging over ``tile_params``."""
    context = thread_context(scop, kernel, threads=True)
    names = list(kernel.level_names[:depth])
    context = with_params(context, names)
    tile_params = with_params(tile_params, param_names(context))
    return context.intersect_params(tile_params.align_params(context.get_space()))


def _work(scop: Scop, kernel: TiledKernel, depth: int, context: isl.Set, emitter_factory,
          printer: Printer) -> list:
    """The thread's work in one tile; where some tiles are full slices and others are
    not (:mod:`polygpu.codegen.full_slices`), once for each, chosen by a condition every
    thread of the block evaluates alike."""
    full = full_slices(kernel, depth, context)
    if full is None:
        return emitter_factory(None).node(kernel_ast(scop, kernel, depth, context))
    full = full.align_params(context.get_space())
    context = context.align_params(full.get_space())
    inside = emitter_factory(None).node(kernel_ast(scop, kernel, depth,
                                                   context.intersect_params(full)))
    # the rest under the whole context: the code as it would be without the split
    # (correct in every tile), and no AST build for a disjunctive complement
    rest = emitter_factory(None).node(kernel_ast(scop, kernel, depth, context))
    cond = _condition(full, context.params(), printer.index64)
    return [cgen.If(cond, cgen.Block(inside), cgen.Block(rest))]

