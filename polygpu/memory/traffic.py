"""The global-memory traffic model (paper §4.6): loads and stores by counting points.

When each thread block stages the data it touches through shared memory, it loads
every element of its *read footprint* once and stores every element of its *write
footprint* once.  So the traffic of one array is the number of (block, element) pairs
with the element touched by some instance the block runs -- the per-tile data space
counted with isl, summed over all tiles, exactly (partial tiles included).  The model
is what the search will use to rank tilings before timing them.  Reads of elements the
same block wrote first are counted as loads too (an upper bound); the memory stage,
which decides what is staged, will subtract them.
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

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


def kernel_traffic(scop: Scop, kernel: TiledKernel, name: str,
                   params: dict[str, int]) -> tuple[Traffic, ...]:
    """Per array, the elements ``kernel`` loads and stores at the parameter values."""
    blocks = {}  # statement -> { S[x] -> [b..] }
    for m in maps_of(kernel.schedule):
        n_out = m.dim(isl.dim_type.out)
        blocks[m.get_tuple_name(isl.dim_type.in_)] = m.project_out(
            isl.dim_type.out, kernel.n_mapped, n_out - kernel.n_mapped)
    result = []
    for array in scop.arrays:
        footprints = {"read": None, "write": None}
        for acc in scop.accesses:
            if acc.array != array.name or acc.statement not in blocks:
                continue
            # { [b..] -> a[..] } for this reference, as a set of pairs [b.., a..]
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
