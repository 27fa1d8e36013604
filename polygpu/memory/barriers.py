"""How many ``__syncthreads`` a staged kernel's blocks pass, counted with isl.

A barrier stops a block until its slowest warp arrives, and its warps then refill their
pipelines (shared loads, the first FMAs of the next tile).  When another block shares the
multiprocessor, its warps issue meanwhile; when the block is alone there -- a 512-thread
block of 125 registers, all-pairs' tuned shape -- the multiprocessor idles.  The cost
model (``search/cost.py``) charges that idle time, so it needs the count: per tile at
the deepest staging level, one barrier before the work and one after it (one only when
the memory stage doubled every shared buffer, ``Buffer.stages == 2``: the next tile then
copies into the other buffers), and one after each copy-out, as ``codegen/staging.py``
emits them.  The tiles are the distinct ``(block, o_0 .. o_{L-1})`` coordinates of the
kernel's statement instances, counted at fixed parameters (barvinok), exactly: partial
tiles and statements outside the staged loop (an initialisation, a final square root)
have their own tile, and their own barriers, as in the generated code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import islpy as isl

from polygpu.memory.placement import MemoryPlan
from polygpu.memory.traffic import tile_maps
from polygpu.model.isl_util import count_points
from polygpu.model.scop import Scop, fix_parameters
from polygpu.schedule.tiling import TiledKernel


def _tile_coordinates(scop: Scop, kernel: TiledKernel, level: int,
                      statements: Iterable[str] | None = None) -> isl.Set | None:
    """``{ [b.., o_0..o_{level-1}] }``: the tiles of ``kernel`` (its blocks, and the first
    ``level`` tile-level coordinates) that hold an instance of ``statements`` (all of
    the kernel's when None); None when there are none."""
    found = None
    for name, tiles_of in tile_maps(kernel, level).items():
        if statements is not None and name not in statements:
            continue
        domain = scop.statement(name).domain.align_params(tiles_of.get_space())
        tiles = tiles_of.intersect_domain(domain).range()
        found = tiles if found is None else found.union(tiles)
    return found


def _count(tiles: isl.Set | None, params: Mapping[str, int]) -> int:
    if tiles is None:
        return 0
    return count_points(fix_parameters(tiles.coalesce(), params))


def block_barriers(scop: Scop, kernel: TiledKernel, params: Mapping[str, int],
                   plan: MemoryPlan) -> int:
    """The barriers ``kernel``'s blocks pass in one launch at ``params``, summed over the
    blocks (0 without shared buffers)."""
    shared = [b for b in plan.buffers if b.kernel == kernel.index and b.space == "shared"]
    if not shared:
        return 0
    depth = max(b.level for b in shared)
    per_tile = 1 if all(b.stages == 2 for b in shared) else 2
    total = per_tile * _count(_tile_coordinates(scop, kernel, depth), params)
    for b in shared:
        if b.writes is not None:  # a copy-out, and its barrier, per tile at its level
            total += _count(_tile_coordinates(scop, kernel, b.level, b.statements or None),
                            params)
    return total
