"""A thread's loops split where they cross a packed triangle's fold.

A packed triangle (:attr:`polygpu.memory.placement.Buffer.packed`, fold row ``h``)
stores row ``r >= h`` at ``[r - h][c]`` and row ``r < h`` at ``[h - 1 - r][2 h - c]``:
printed for any ``r``, a reference is two selects on ``r >= h``, and where ``r`` moves
with a loop its address is no affine function of the loop's iterator.  The batched
Cholesky's trailing update (``a[i][j] -= a[i][k] * a[j][k]`` over a thread's columns
``j``) spent 12 integer instructions an iteration on them, against one FMA, two loads
and a store (H100, double, n = 64: ``tuning/results/NVIDIA-H100-80GB-HBM3/batched.md``).

So a statement whose packed references cross the fold inside one thread's work is
split, before isl builds the thread's AST, into *pieces*: its instances on each side of
each such reference's fold, each piece a statement of its own name (isl then generates
each piece's loops with the bounds of its side).  In a piece every such reference is
known to lie on one side and prints as one affine subscript (:func:`packed_subscript`).
The pieces keep the statement's schedule: the same instances run in the same order, so
the proof of the schedule stands as it is.

Only references whose side changes within one thread's work are split on (the
schedule's block and thread coordinates fixed): a side that depends on the thread
alone would split a warp's threads into two code paths, where a select costs less.
One-thread kernels (device steps' substitutions, whose loops a warp's lanes share and
sum with one butterfly) are left whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import product

import islpy as isl

from polygpu.memory.placement import Buffer
from polygpu.model.isl_util import maps_of, union_of
from polygpu.model.scop import Access, Scop
from polygpu.schedule.tiling import TiledKernel

UPPER, LOWER = 1, -1  # a reference's side: its packed row at least the fold, or below


@dataclass(frozen=True)
class Piece:
    """Instances of ``statement`` on one side of the fold of each of some of its
    references: ``sides`` maps a reference (``Access.ref``) to :data:`UPPER` or
    :data:`LOWER`."""

    statement: str
    sides: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class FoldPieces:
    """The pieces of a kernel's split statements, by piece name, and their instances."""

    pieces: dict[str, Piece] = field(default_factory=dict)
    domains: dict[str, isl.Set] = field(default_factory=dict)  # piece name -> instances

    def __bool__(self) -> bool:
        return bool(self.pieces)

    def statement(self, name: str) -> str:
        """The statement a name of the AST stands for (a piece's, or itself)."""
        piece = self.pieces.get(name)
        return piece.statement if piece is not None else name

    def sides(self, name: str) -> dict[int, int]:
        piece = self.pieces.get(name)
        return dict(piece.sides) if piece is not None else {}

    def split(self, schedule: isl.UnionMap) -> isl.UnionMap:
        """``schedule`` with each split statement's map replaced by its pieces' maps,
        each on its piece's instances and renamed after it."""
        if not self.pieces:
            return schedule
        split = {p.statement for p in self.pieces.values()}
        maps = []
        for m in maps_of(schedule):
            name = m.get_tuple_name(isl.dim_type.in_)
            if name not in split:
                maps.append(m)
                continue
            for piece_name, piece in self.pieces.items():
                if piece.statement != name:
                    continue
                domain = self.domains[piece_name].align_params(m.get_space())
                part = m.align_params(domain.get_space()).intersect_domain(domain)
                maps.append(part.set_tuple_name(isl.dim_type.in_, piece_name))
        return union_of(maps)


def fold_pieces(scop: Scop, kernel: TiledKernel, packed: Sequence[Buffer]) -> FoldPieces:
    """The pieces of ``kernel``'s statements at the folds of the resident triangles
    ``packed`` (buffers of every statement, :mod:`polygpu.memory.residence`); empty
    where no reference crosses a fold inside a thread's work."""
    by_array = {b.array: b for b in packed if b.packed}
    if not by_array or kernel.n_threads == 1:
        return FoldPieces()
    names = {s.name for s in scop.statements}
    pieces, domains = {}, {}
    for stmt in sorted(kernel.statements):
        domain = scop.statement(stmt).domain
        schedule = _schedule_of(kernel, stmt)
        if schedule is None:
            continue
        crossing: list[tuple[list[int], isl.Set]] = []  # references with one condition
        for acc in scop.accesses:
            if acc.statement != stmt or acc.array not in by_array:
                continue
            upper = _upper_side(acc, by_array[acc.array], domain)
            if not _crosses(schedule, kernel, upper, domain):
                continue
            same = next((refs for refs, known in crossing if known.is_equal(
                upper.align_params(known.get_space()))), None)
            if same is not None:  # (a target read and written: one condition)
                same.append(acc.ref)
            else:
                crossing.append(([acc.ref], upper))
        if not crossing:
            continue
        for sides in product((UPPER, LOWER), repeat=len(crossing)):
            part = domain
            for (_, upper), side in zip(crossing, sides, strict=True):
                part = _intersect(part, upper) if side == UPPER else \
                    part.subtract(upper.align_params(part.get_space()))
            part = part.coalesce()
            if part.is_empty():
                continue
            name = _fresh(f"{stmt}_fold" + "".join("u" if s == UPPER else "l"
                                                   for s in sides), names)
            names.add(name)
            pieces[name] = Piece(stmt, tuple(sorted(
                (ref, side) for (refs, _), side in zip(crossing, sides, strict=True)
                for ref in refs)))
            domains[name] = part
    return FoldPieces(pieces, domains)


def _fresh(name: str, taken: set[str]) -> str:
    while name in taken:
        name += "_"
    return name


def _intersect(a: isl.Set, b: isl.Set) -> isl.Set:
    b = b.align_params(a.get_space())
    return a.align_params(b.get_space()).intersect(b)


def _schedule_of(kernel: TiledKernel, stmt: str) -> isl.Map | None:
    for m in maps_of(kernel.schedule):
        if m.get_tuple_name(isl.dim_type.in_) == stmt:
            return m
    return None


def _upper_side(acc: Access, buffer: Buffer, domain: isl.Set) -> isl.Set:
    """The instances of ``domain`` whose reference ``acc`` has its packed row (its box
    row; an upper triangle's box column) at least the buffer's fold."""
    relation = acc.relation
    space = relation.range().get_space()
    d = space.dim(isl.dim_type.set)
    r, c = buffer.triangle
    k = c if buffer.packed_upper else r
    # (as memory.footprints.box_coordinates: on an unnamed space, then named the array)
    base = buffer.box.base[k]
    unnamed = isl.Space.set_alloc(space.get_ctx(), 0, d).align_params(space) \
        .align_params(base.get_space())
    coordinate = isl.PwAff.var_on_domain(isl.LocalSpace.from_space(unnamed),
                                         isl.dim_type.set, k)
    base = base.align_params(unnamed).insert_dims(isl.dim_type.in_, 0, d)
    row = coordinate.sub(base)
    fold = isl.PwAff.val_on_domain(row.domain(), isl.Val(buffer.packed))
    at_least = row.ge_set(fold).set_tuple_name(space.get_tuple_name(isl.dim_type.set))
    relation = relation.align_params(at_least.get_space())
    upper = relation.intersect_range(at_least.align_params(relation.get_space())).domain()
    return _intersect(upper, domain)


def _crosses(schedule: isl.Map, kernel: TiledKernel, upper: isl.Set,
             domain: isl.Set) -> bool:
    """Whether some thread (block and thread coordinates fixed) runs instances on both
    sides: ``upper`` and the rest of ``domain`` meet in the parameters once the
    schedule's leading block and thread dimensions are parameters."""
    lead = len(kernel.block_names) + len(kernel.thread_names)
    lower = domain.align_params(upper.get_space()).subtract(upper)
    if upper.is_empty() or lower.is_empty():
        return False

    def threads_of(part: isl.Set) -> isl.Set:
        image = part.apply(schedule.align_params(part.get_space()))
        image = image.project_out(isl.dim_type.set, lead, image.dim(isl.dim_type.set) - lead)
        return image

    return not threads_of(upper).intersect(threads_of(lower)).is_empty()
