"""The data a group of threads touches, as isl sets over named parameters.

A *footprint* is the set of elements of one array that the references of one kind
(reads or writes) touch when some coordinates of the tiled schedule are fixed: the block
(``bx..``), optionally the thread (``tx..``), and the first ``level`` tile-level loops
(``o_c0..``).  Those coordinates become *parameters* named as in the generated code, so
a footprint is ``[n, bx, o_c0] -> { a[e0, e1] : ... }`` and its bounds are expressions
the kernel can evaluate where the copy happens.

A :class:`Box` is the smallest strided box around a footprint: per array dimension a
base (the least element, a piecewise affine function of the parameters), a stride found
by isl's stride detection (``y[i]`` of a thread with cyclic points ``tx + 32 r`` has
stride 32) and a constant extent, the largest over all parameter values -- or None when
no constant bounds it (the footprint grows with ``n``).  A thread dealt *chunks* of
points (``chunk`` in the variant: ``4 tx + 64 v + u``, ``u < 4``) touches runs of ``w``
consecutive elements a period apart; isl finds no stride there, so the box records the
run length ``chunk`` and the period as its stride: element ``u`` is
``base + stride * (u / w) + u % w``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import islpy as isl

from polygpu.model.dependences import maps_of
from polygpu.model.isl_budget import OutOfBudget, isl_operation_budget
from polygpu.model.isl_util import memo_by_identity, memo_by_text
from polygpu.model.scop import Scop
from polygpu.schedule.tiling import TiledKernel


def coordinate_params(kernel: TiledKernel, level: int, threads: bool) -> list[str]:
    """Names of the fixed coordinates, in the schedule's order."""
    return (list(kernel.block_names) + (list(kernel.thread_names) if threads else [])
            + list(kernel.level_names[:level]))


def footprint(scop: Scop, kernel: TiledKernel, array: str, kind: str, level: int,
              threads: bool, statements: frozenset[str] | None = None,
              refs: frozenset[tuple[str, int]] | None = None) -> isl.Set | None:
    """Elements of ``array`` that ``kind`` references of ``kernel`` (of ``statements``
    only, if given; only the references ``(statement, ref)`` in ``refs``, if given) touch
    with the block, (the thread if ``threads``) and the first ``level`` tile levels
    fixed; None if there is no such reference."""
    # the same object for the same question: placement asks again for each way it
    # places one tiling, and boxes are memoized per footprint object
    return _footprint(scop, kernel, array, kind, level, threads, statements, refs)


@memo_by_identity(maxsize=1024)
def _footprint(scop: Scop, kernel: TiledKernel, array: str, kind: str, level: int,
               threads: bool, statements: frozenset[str] | None,
               refs: frozenset[tuple[str, int]] | None) -> isl.Set | None:
    result = None
    for piece in maps_of(kernel.schedule):
        statement = piece.get_tuple_name(isl.dim_type.in_)
        if statements is not None and statement not in statements:
            continue
        for acc in scop.accesses:
            if acc.statement != statement or acc.array != array or acc.kind != kind:
                continue
            if refs is not None and (acc.statement, acc.ref) not in refs:
                continue
            part = _touched(kernel, statement, level, threads, acc.relation)
            result = part if result is None else result.union(part)
    return result.coalesce() if result is not None else None


def touched(kernel: TiledKernel, statement: str, relation: isl.Map, level: int,
            threads: bool) -> isl.Set:
    """The elements ``relation`` (one reference of ``statement``, or part of its
    instances) touches with the block, (the thread if ``threads``) and the first
    ``level`` tile levels fixed, as parameters (:func:`footprint`'s coordinates)."""
    return _touched(kernel, statement, level, threads, relation)


@memo_by_identity(maxsize=1024)
def _touched(kernel: TiledKernel, statement: str, level: int, threads: bool,
             relation: isl.Map) -> isl.Set:
    """The elements one reference touches with the coordinates fixed (as parameters):
    per kernel object, since placement asks for the same reference at every tile level
    it tries, for reads and writes together, and once per reference group."""
    return _touched_range(_kept(kernel, statement, level, threads), relation,
                          tuple(coordinate_params(kernel, level, threads)))


@memo_by_identity(maxsize=256)
def _kept(kernel: TiledKernel, statement: str, level: int, threads: bool) -> isl.Map:
    """The statement's schedule cut to ``[b.., (t..), local[:level]]``."""
    m = kernel.n_mapped
    piece = next(p for p in maps_of(kernel.schedule)
                 if p.get_tuple_name(isl.dim_type.in_) == statement)
    n_out = piece.dim(isl.dim_type.out)
    keep = piece.project_out(isl.dim_type.out, 2 * m + level, n_out - 2 * m - level)
    if not threads:
        keep = keep.project_out(isl.dim_type.out, m, m)
    return keep


def _touched_range(keep: isl.Map, relation: isl.Map, names: tuple[str, ...]) -> isl.Set:
    pairs = keep.reverse().apply_range(relation)  # [coords] -> a[e]
    n_params = pairs.dim(isl.dim_type.param)
    pairs = pairs.move_dims(isl.dim_type.param, n_params, isl.dim_type.in_, 0, len(names))
    for k, name in enumerate(names):
        pairs = pairs.set_dim_name(isl.dim_type.param, n_params + k, name)
    return pairs.range()


@dataclass(frozen=True)
class Box:
    """``e_d = base_d + stride_d * (u_d / w_d) + u_d % w_d`` with ``0 <= u_d < extents_d``
    and ``w_d = chunk[d]`` (1, a plain strided box, when ``chunk`` is empty)."""

    base: tuple[isl.PwAff, ...]
    stride: tuple[int, ...]
    extents: tuple[int, ...]
    chunk: tuple[int, ...] = ()

    @property
    def chunks(self) -> tuple[int, ...]:
        return self.chunk or (1,) * len(self.extents)

    @property
    def size(self) -> int:
        return math.prod(self.extents)


def padded_dimension(extents: tuple[int, ...]) -> int:
    """The dimension a resident buffer's padding extends (Algorithm 2): the innermost,
    or the innermost before a trailing run of dimensions of extent 1 -- an interleaved
    element's box (``a[i][j][e]``) pads its rows ``j``, not the element's one word."""
    k = len(extents)
    while k > 1 and extents[k - 1] == 1:
        k -= 1
    return k - 1


def triangle_pair(extents: tuple[int, ...]) -> tuple[int, int]:
    """The box dimensions ``(rows, columns)`` a packed triangle spans
    (:attr:`polygpu.memory.placement.Buffer.packed`): the last two, or the last two
    before a trailing run of dimensions of extent 1.  Why: an interleaved element's box
    (SoA, ``a[i][j][e]`` with the element ``e`` innermost) is one word wide along the
    array's innermost dimension; its triangle is in the two dimensions before (the
    columns are the padded dimension, :func:`padded_dimension`)."""
    columns = max(padded_dimension(extents), 1)
    return columns - 1, columns


def box_coordinates(footprint: isl.Set, box: Box) -> isl.Set:
    """``{ [u] : base + stride u in footprint }``: the box coordinates of the elements of
    ``footprint`` (parameters: the footprint's)."""
    d = len(box.extents)
    space = footprint.get_space()
    u_space = isl.Space.set_alloc(space.get_ctx(), 0, d).align_params(space)
    element = None
    for k in range(d):
        var = isl.PwAff.var_on_domain(isl.LocalSpace.from_space(u_space), isl.dim_type.set, k)
        base = box.base[k].align_params(u_space).insert_dims(isl.dim_type.in_, 0, d)
        w = box.chunks[k]
        if w > 1:  # base + stride * floor(u / w) + u mod w
            offset = var.scale_down_val(isl.Val(w)).floor().scale_val(
                isl.Val(box.stride[k])).add(var.mod_val(isl.Val(w)))
        else:
            offset = var.scale_val(isl.Val(box.stride[k]))
        pma = isl.PwMultiAff.from_pw_aff(base.add(offset))
        element = pma if element is None else element.flat_range_product(pma)
    element = element.set_tuple_id(isl.dim_type.out, space.get_tuple_id(isl.dim_type.set))
    return footprint.preimage_pw_multi_aff(element)


def _stride(s: isl.Set, d: int) -> int:
    """The stride of dimension ``d`` on its own (isl's stride of a dimension may take
    the other dimensions into account, e.g. ``r + c`` even: no stride of ``r`` alone)."""
    n = s.dim(isl.dim_type.set)
    alone = s.project_out(isl.dim_type.set, d + 1, n - d - 1).project_out(
        isl.dim_type.set, 0, d)
    try:
        stride = alone.get_stride(0)
    except isl.Error:
        return 1
    value = stride.to_python()
    return value if isinstance(value, int) and value > 0 else 1


MAX_CHUNK_SEARCH = 4096  # widest dimension whose offsets are enumerated for chunks
# footprints made of more pieces than this are not boxed (nor staged): such sets come
# from skewed schedules (a wavefront's tile), where isl's bounds take minutes and a box
# around the scattered points would hold mostly elements the block never touches
MAX_PIECES = 12


def _offsets(s: isl.Set, d: int, lo: isl.PwAff, context: isl.Set) -> list[int] | None:
    """``{ e_d - lo }`` over all parameter values in ``context``, as sorted integers."""
    n = s.dim(isl.dim_type.set)
    alone = s.project_out(isl.dim_type.set, d + 1, n - d - 1).project_out(
        isl.dim_type.set, 0, d).reset_tuple_id()
    var = isl.PwAff.var_on_domain(isl.LocalSpace.from_space(alone.get_space()),
                                  isl.dim_type.set, 0)
    low = lo.align_params(alone.get_space()).insert_dims(isl.dim_type.in_, 0, 1)
    offsets = isl.Map.from_pw_aff(var.sub(low).intersect_domain(alone)).range()
    offsets = offsets.intersect_params(context.align_params(offsets.get_space()))
    offsets = offsets.project_out(isl.dim_type.param, 0, offsets.dim(isl.dim_type.param))
    if not offsets.is_bounded():
        return None
    values = []
    offsets.foreach_point(lambda p: values.append(
        p.get_coordinate_val(isl.dim_type.set, 0).to_python()))
    return sorted(values)


def _chunks(offsets: list[int]) -> tuple[int, int] | None:
    """``(w, period)`` when every offset is ``period * p + q`` with ``q < w`` and the
    offsets are not one contiguous run: runs of ``w`` a period apart."""
    if not offsets or offsets[0] != 0:
        return None
    w = 1
    while w < len(offsets) and offsets[w] == w:
        w += 1
    if w == len(offsets) or w == 1:
        return None
    period = offsets[w]
    if period % w or any(o % period >= w for o in offsets):
        return None
    return w, period


def bounding_box(s: isl.Set, context: isl.Set) -> Box | None:
    """The strided (or chunked) box around ``s`` (see module doc), or None if
    unbounded, made of more than ``MAX_PIECES`` pieces, or if isl cannot find its bounds
    within an operation budget (then the footprint is not staged: correct, and the
    compile does not hang on a pathological set)."""
    if s.n_basic_set() > MAX_PIECES or s.is_empty():
        return None
    try:
        with isl_operation_budget(s.get_ctx()):
            return _bounding_box(s, context)
    except OutOfBudget:
        return None


def uniform_base(box: Box, s: isl.Set, context: isl.Set, max_size: int) -> Box:
    """``box`` with a base of one affine piece per dimension where its least element is
    piecewise, if one of the pieces bounds all of ``s`` and the box from it still holds
    at most ``max_size`` elements; else ``box`` itself.

    Why: a register tile is indexed by ``(e - base) / stride``, and those indices must be
    constants once the tile's loops are unrolled, or the compiler moves the tile to local
    memory.  On a triangular domain (syr2k's ``j <= i``) the least element a thread on
    the diagonal touches depends on its coordinates -- a piecewise base, a run-time
    index and a 32-byte stack frame (syr2k on the H100: 15.5 ms, 6.1 without it).  The
    interior piece (``32 by + ty``) bounds the diagonal threads' points too; with it as
    the base the indices are constants and the absent points are simply never touched
    (the copies in and out are guarded by the footprint itself)."""
    if box.chunk:
        return box
    try:
        with isl_operation_budget(s.get_ctx()):
            return _uniform_base(box, s, context, max_size)
    except (OutOfBudget, isl.Error):  # keep the piecewise base: correct, maybe slower
        return box


def _uniform_base(box: Box, s: isl.Set, context: isl.Set, max_size: int) -> Box:
    bases, extents = list(box.base), list(box.extents)
    changed = False
    for d, lo in enumerate(box.base):
        pieces = lo.get_pieces()
        if len(pieces) <= 1:
            continue
        for _, aff in pieces:
            found = _extent_from(s, d, aff, box.stride[d], context)
            if found is not None:
                bases[d], extents[d], changed = isl.PwAff.from_aff(aff), found, True
                break
    if not changed or math.prod(extents) > max_size:
        return box
    return Box(tuple(bases), box.stride, tuple(extents), box.chunk)


def _extent_from(s: isl.Set, d: int, base: isl.Aff, stride: int, context: isl.Set
                 ) -> int | None:
    """The extent of dimension ``d`` of ``s`` counted from ``base`` in steps of
    ``stride``, when every element is ``base`` plus a non-negative multiple of
    ``stride``; else None."""
    n = s.dim(isl.dim_type.set)
    space = s.get_space()
    shifted = isl.PwAff.from_aff(base).add_dims(isl.dim_type.in_, n)
    shifted = shifted.set_tuple_id(isl.dim_type.in_, s.get_tuple_id())
    element = isl.PwAff.var_on_domain(isl.LocalSpace.from_space(space), isl.dim_type.set, d)
    shifted = shifted.align_params(space)
    element = element.align_params(shifted.get_domain_space())
    values = element.sub(shifted).intersect_domain(s.align_params(element.get_domain_space())
                                                   ).intersect_params(context)
    low, high = values.min_val(), values.max_val()
    if not (low.is_int() and high.is_int()) or low.to_python() < 0:
        return None
    if stride > 1:
        off_mod = values.mod_val(isl.Val(stride))
        if not off_mod.max_val().is_zero():
            return None
    return high.to_python() // stride + 1


@memo_by_text(maxsize=2048)
def _bounding_box(s: isl.Set, context: isl.Set) -> Box | None:
    base, strides, extents, chunks = [], [], [], []
    for d in range(s.dim(isl.dim_type.set)):
        lo = s.dim_min(d)
        hi = s.dim_max(d)
        stride = _stride(s, d)
        width = hi.sub(lo).intersect_params(context)
        if width.is_empty():
            return None
        try:
            top = width.max_val()
        except isl.Error:  # isl's max_val needs integer affine pieces; give up staging
            return None
        if not top.is_int():  # infinite: the footprint grows with a parameter
            return None
        base.append(lo.coalesce())
        found = None
        if stride == 1 and 1 < top.to_python() < MAX_CHUNK_SEARCH:
            offsets = _offsets(s, d, base[-1], context)
            found = _chunks(offsets) if offsets is not None else None
        if found is not None:
            w, period = found
            strides.append(period)
            chunks.append(w)
            extents.append(w * (top.to_python() // period + 1))
        else:
            strides.append(stride)
            chunks.append(1)
            extents.append(top.to_python() // stride + 1)
    return Box(tuple(base), tuple(strides), tuple(extents),
               tuple(chunks) if any(w > 1 for w in chunks) else ())
