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
traffic.  Reads of elements the same block wrote first are counted as loads too.
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from polygpu.memory.placement import MemoryPlan
from polygpu.model.dependences import maps_of
from polygpu.model.scop import Scop
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


def _fix_params(s: isl.Set, params: dict[str, int]) -> isl.Set:
    for name, value in params.items():
        k = s.find_dim_by_name(isl.dim_type.param, name)
        if k >= 0:
            s = s.fix_val(isl.dim_type.param, k, isl.Val(value))
    return s


def _count(s: isl.Set) -> int:
    return s.count_val().to_python() if not s.is_empty() else 0


def _tiles(kernel: TiledKernel, level: int) -> dict[str, isl.Map]:
    """statement -> ``{ S[x] -> [b.., o_0..o_{level-1}] }``"""
    m = kernel.n_mapped
    tiles = {}
    for piece in maps_of(kernel.schedule):
        n_out = piece.dim(isl.dim_type.out)
        keep = piece.project_out(isl.dim_type.out, 2 * m + level, n_out - 2 * m - level)
        tiles[piece.get_tuple_name(isl.dim_type.in_)] = keep.project_out(
            isl.dim_type.out, m, m)
    return tiles


def kernel_traffic(scop: Scop, kernel: TiledKernel, name: str,
                   params: dict[str, int], plan: MemoryPlan | None = None
                   ) -> tuple[Traffic, ...]:
    """Per array, the elements ``kernel`` loads and stores at the parameter values."""
    buffers = plan.of_kernel(kernel.index) if plan else {}
    result = []
    for array in scop.arrays:
        b = buffers.get(array.name)
        blocks = _tiles(kernel, b.level if b is not None and b.space == "shared" else 0)
        footprints = {"read": None, "write": None}
        for acc in scop.accesses:
            if acc.array != array.name or acc.statement not in blocks:
                continue
            # { [tile..] -> a[..] } for this reference, as a set of pairs [tile.., a..]
            pairs = blocks[acc.statement].reverse().apply_range(acc.relation)
            pairs = pairs.wrap().flatten()
            current = footprints[acc.kind]
            footprints[acc.kind] = pairs if current is None else current.union(pairs)
        if footprints["read"] is None and footprints["write"] is None:
            continue
        loads, stores = (
            _count(_fix_params(footprints[k], params)) if footprints[k] is not None else 0
            for k in ("read", "write"))
        result.append(Traffic(name, array.name, loads, stores, array.element_size))
    return tuple(result)
