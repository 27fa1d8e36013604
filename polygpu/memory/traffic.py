"""The global-memory traffic model (paper §4.6): loads and stores by counting points.

When each thread block stages the data it touches through shared memory, it loads
every element of its *read footprint* once and stores every element of its *write
footprint* once.  So the traffic of one array is the number of (block, element) pairs
with the element touched by some instance the block runs -- the per-tile data space
counted with isl, summed over all tiles, exactly (partial tiles included).  The model
is what the search will use to rank tilings before timing them.

With a memory plan, an array staged in shared memory at tile level ``l`` is loaded
once per *tile* -- (block, first ``l`` tile-level coordinates) -- so its pairs are
counted per tile: exactly what the copy loops move.  Arrays read from global memory
directly are counted once per block (what a perfect per-block cache would fetch), so
for them the model is a lower bound of the requests and an upper bound of DRAM
traffic -- except the halo of uniformly generated references (a stencil's neighbours),
which the neighbouring blocks of the same launch read too: it comes from L2 and is not
counted (:func:`_array_pairs`).  Reads of elements the same block wrote first are
counted as loads too.
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from polygpu.memory.placement import MemoryPlan
from polygpu.model.dependences import maps_of
from polygpu.model.isl_util import count_points, extent_at, memo_by_text
from polygpu.model.scop import Scop, fix_parameters
from polygpu.schedule.tiling import TiledKernel


@dataclass(frozen=True)
class Traffic:
    kernel: str
    array: str
    loads: int  # elements read from global memory, over all blocks
    stores: int  # elements written back
    element_size: int

    @property
    def bytes(self) -> int:
        return (self.loads + self.stores) * self.element_size


def tile_maps(kernel: TiledKernel, level: int) -> dict[str, isl.Map]:
    """statement -> ``{ S[x] -> [b.., o_0..o_{level-1}] }``: the tile (block, and the
    first ``level`` tile-level coordinates) of each instance (not restricted to the
    statement's domain)."""
    m = kernel.n_mapped
    tiles = {}
    for piece in maps_of(kernel.schedule):
        n_out = piece.dim(isl.dim_type.out)
        keep = piece.project_out(isl.dim_type.out, 2 * m + level, n_out - 2 * m - level)
        tiles[piece.get_tuple_name(isl.dim_type.in_)] = keep.project_out(
            isl.dim_type.out, m, m)
    return tiles


def _translated(first, second, blocks: dict[str, isl.Map]) -> bool:
    """Whether two references of one kind read (or write) the same elements shifted by a
    constant (``A[i][j-1]`` and ``A[i+1][j]``) from instances in the same block:
    uniformly generated references of one statement, or of two statements with the same
    iterators that the kernel tiles alike (fdtd-2d's ``hz[i-1][j]`` and ``hz[i][j-1]``).
    Statements tiled differently put one iteration vector in different blocks: never a
    halo, whatever their access functions."""
    r1, r2 = first.relation, second.relation
    if r1.dim(isl.dim_type.in_) != r2.dim(isl.dim_type.in_):
        return False
    name = r1.get_tuple_name(isl.dim_type.in_)
    if second.statement != first.statement:
        b1 = blocks[first.statement]
        b2 = blocks[second.statement].set_tuple_name(isl.dim_type.in_, name)
        common = b1.domain().intersect(b2.domain())
        if common.is_empty() or not b1.intersect_domain(common).is_equal(
                b2.intersect_domain(common)):
            return False
    deltas = r1.reverse().apply_range(r2.set_tuple_name(isl.dim_type.in_, name)).deltas()
    return deltas.is_singleton() and not deltas.is_empty()


def _array_pairs(scop: Scop, kernel: TiledKernel, plan: MemoryPlan | None):
    """Per array the kernel touches: ``{kind: { [tile..] -> a[..] }}`` (None for a kind
    without references), the tile being the block (and, for an array staged in shared
    memory, its tile-level coordinates).

    An array read from global memory counts, of each group of uniformly generated
    references (a stencil's neighbours), only the first: the elements the others add
    around a block (its halo) are the neighbouring blocks' own, which run in the same
    launch, so they come from the L2 cache, not DRAM (a staged copy loads them into
    shared memory, and is counted with them)."""
    buffers = plan.of_kernel(kernel.index) if plan else {}
    for array in scop.arrays:
        b = buffers.get(array.name)
        blocks = tile_maps(kernel, b.level if b is not None and b.space == "shared" else 0)
        pairs = {"read": None, "write": None}
        counted: dict[str, list] = {"read": [], "write": []}
        for acc in scop.accesses:
            if acc.array != array.name or acc.statement not in blocks:
                continue
            if b is None and any(_translated(c, acc, blocks) for c in counted[acc.kind]):
                continue
            counted[acc.kind].append(acc)
            part = blocks[acc.statement].reverse().apply_range(acc.relation)
            pairs[acc.kind] = part if pairs[acc.kind] is None else pairs[acc.kind].union(part)
        if pairs["read"] is not None or pairs["write"] is not None:
            yield array, pairs


def kernel_traffic(scop: Scop, kernel: TiledKernel, name: str,
                   params: dict[str, int], plan: MemoryPlan | None = None
                   ) -> tuple[Traffic, ...]:
    """Per array, the elements ``kernel`` loads and stores at the parameter values."""
    result = []
    for array, pairs in _array_pairs(scop, kernel, plan):
        # the (tile, element) pairs as one set [tile.., a..], counted
        loads, stores = (
            count_points(fix_parameters(pairs[k].wrap().flatten(), params))
            if pairs[k] is not None else 0 for k in ("read", "write"))
        result.append(Traffic(name, array.name, loads, stores, array.element_size))
    return tuple(result)


def sample_tiles(tiles: isl.Set) -> list[isl.Set]:
    """A few tiles (or threads: any ids) to measure: the first, the last and one near the
    middle of the bounding box (when it is one), each as a singleton set."""
    picks = [tiles.lexmin(), tiles.lexmax()]
    mid = tiles
    for d in range(tiles.dim(isl.dim_type.set)):
        lo = mid.dim_min(d).max_val().to_python()
        hi = mid.dim_max(d).max_val().to_python()
        fixed = mid.fix_val(isl.dim_type.set, d, isl.Val((lo + hi) // 2))
        if fixed.is_empty():
            break
        mid = fixed
    else:
        picks.append(mid.lexmin())
    return picks


SECTOR_BYTES = 32  # what DRAM and L2 move for any access: a sector of a 128-byte line


def _sector_factor(rel: isl.Map, tiles: isl.Set, array, params: dict[str, int]) -> float:
    """How many times its elements' bytes a tile's footprint of ``array`` moves where
    its contiguous runs are single words, each a sector (:data:`SECTOR_BYTES`), from
    the first tile's box: the run is the innermost extent, times the next while each is
    the array's whole dimension.  An element-outermost tile of interleaved elements
    (``c[i][j][e]``, one e a tile) moves a sector per word: 8x in float; runs of two
    words or more count what they hold (1)."""
    wholes = tuple(extent_at(extent, params) for extent in array.shape)
    return _sectors(rel, tiles, array.element_size, wholes)


@memo_by_text(maxsize=1024)
def _sectors(rel: isl.Map, tiles: isl.Set, element_size: int, wholes: tuple[int, ...]
             ) -> float:
    """:func:`_sector_factor` of the array's element size and whole extents (its
    variants share most tiles' relations)."""
    footprint = rel.intersect_domain(tiles.lexmin()).range()
    if footprint.is_empty() or footprint.dim(isl.dim_type.set) == 0:
        return 1.0
    run = 1
    for d in reversed(range(footprint.dim(isl.dim_type.set))):
        lo, hi = footprint.dim_min_val(d), footprint.dim_max_val(d)
        if not (lo.is_int() and hi.is_int()):
            return 1.0
        extent = hi.to_python() - lo.to_python() + 1
        run *= extent
        whole = wholes[d] if d < len(wholes) else 0
        if extent < whole or whole <= 0:
            break
    # only a run of one word: shorter runs of several words are what small tiles of
    # ordinary nests read (a 4 x 8 tile of a transpose), whose order the measurements
    # and the search's replays were calibrated with
    return SECTOR_BYTES / element_size if run == 1 else 1.0


def estimated_traffic(scop: Scop, kernel: TiledKernel, name: str,
                      params: dict[str, int], plan: MemoryPlan | None = None
                      ) -> tuple[Traffic, ...]:
    """:func:`kernel_traffic`, fast: the number of tiles (counted exactly) times the
    mean footprint of a few sample tiles, per reference group.

    Why: exact counting of (tile, element) pairs takes isl minutes for mm at n=4096
    (a union over millions of tiles), while a search must rank hundreds of tilings.
    Interior tiles all have the same footprint size for the rectangular and
    triangular tilings polygpu makes, so the estimate differs from the exact count only
    by what partial tiles save: enough to rank structures (the pruning threshold is a
    percentage); ``analyze --traffic`` keeps the exact count.  Where no element is in two
    tiles (a stencil's arrays without their halo, a row-wise sweep) the count is exact,
    the elements touched: a 4 x 128 row and a 32 x 32 square of one stencil then differ
    by their other terms, not by how their partial tiles happened to be sampled (the
    three samples weigh a partial last tile as a third of the tiles)."""
    result = []
    for array, pairs in _array_pairs(scop, kernel, plan):
        counts = []
        for kind in ("read", "write"):
            rel = pairs[kind]
            if rel is None:
                counts.append(0)
                continue
            context = fix_parameters(isl.Set.universe(rel.get_space().params()), params)
            rel = rel.intersect_params(context)
            tiles = rel.domain().coalesce()
            n_tiles = count_points(tiles)
            if n_tiles == 0:
                counts.append(0)
                continue
            factor = _sector_factor(rel, tiles, array, params)
            if rel.is_injective():  # no element in two tiles: exactly the elements
                counts.append(round(count_points(rel.range()) * factor))
                continue
            sizes = [count_points(rel.intersect_domain(t).range()) for t in sample_tiles(tiles)]
            counts.append(round(n_tiles * sum(sizes) / len(sizes) * factor))
        result.append(Traffic(name, array.name, counts[0], counts[1], array.element_size))
    return tuple(result)
