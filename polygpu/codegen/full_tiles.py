"""Full/partial tile separation: a kernel's code twice, guard-free for whole tiles.

Where a tile does not divide its extent (a size like 2000 or 2300 under a 128-point
tile, or any size in a program left parametric), isl's AST of one thread's work keeps
the guards of the last, partial tiles -- in a register tile, one per point, inside the
innermost loop, where nvcc can neither hoist them nor schedule loads across them.
Every block but the last along each dimension runs a whole tile, so the kernel body is
generated twice: once for the blocks whose tile lies inside every mapped dimension's
extent (the AST build knows it, and isl drops the guards), once for the others, and

    if (<this block's tile is whole>) KERNEL_whole(...); else KERNEL_partial(...);

chooses at run time (the halves are ``__noinline__`` device functions: ptxas allocates
registers per function, and inline the two needed more than either: codegen/cuda.py
``_half_function``; a device step's are ``__forceinline__``, called once a tile a
step).  The condition reads block ids, parameters and host iterators only, so every
thread of a block takes the same branch (barriers inside are safe).

Nothing about the schedule changes: both bodies are isl's AST of the same proven
schedule, each under a context that holds wherever it runs, so they run the same
instances in the same order as the single body would (the emulator and the GPU check
compare the split program like any other; the check's sizes keep both kinds of block).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import islpy as isl

from polygpu.codegen.thread_ast import param_names, thread_context, with_params
from polygpu.model.scop import Scop
from polygpu.schedule.tiling import TiledKernel


@dataclass(frozen=True)
class TileSplit:
    """A kernel's two versions: ``full`` for the blocks where ``condition`` (C text)
    holds (its ``blocks`` says which), ``partial`` (the kernel as it was, correct for
    every block) for the others."""

    condition: str
    full: TiledKernel
    partial: TiledKernel


def whole_blocks(scop: Scop, kernel: TiledKernel) -> isl.Set:
    """The block ids (a parameter set, over the region's parameters, host iterators and
    the kernel's block names) whose tile ``[b t, b t + t - 1]`` lies inside
    ``[0, extent]`` along every mapped dimension, within the launched grid."""
    grid = thread_context(scop, kernel, threads=False)
    names = list(kernel.block_names)
    whole = grid
    for k, (extent, tile) in enumerate(zip(kernel.extent, kernel.tile, strict=True)):
        whole = with_params(whole, param_names(extent))
        extent = extent.align_params(whole.get_space())
        p = extent.find_dim_by_name(isl.dim_type.param, names[k])
        last = isl.Aff.var_on_domain(isl.LocalSpace.from_space(extent.get_domain_space()),
                                     isl.dim_type.param, p)
        last = last.scale_val(isl.Val(tile)).add_constant_val(isl.Val(tile - 1))
        inside = isl.PwAff.from_aff(last).le_set(extent)
        whole = whole.intersect_params(inside.align_params(whole.get_space()))
    return whole.coalesce()


def _grid_and_whole(scop: Scop, kernel: TiledKernel) -> tuple[isl.Set, isl.Set]:
    """The blocks ``kernel``'s code is for and those of them that are whole, in one
    space."""
    whole = whole_blocks(scop, kernel)
    grid = thread_context(scop, kernel, threads=False)
    return with_params(grid, param_names(whole)).align_params(whole.get_space()), whole


def every_block_whole(scop: Scop, kernel: TiledKernel) -> bool:
    """Whether every block ``kernel``'s code is for runs a whole tile (its ``blocks``,
    or the whole grid)."""
    grid, whole = _grid_and_whole(scop, kernel)
    return not whole.is_empty() and grid.is_subset(whole)


def split(scop: Scop, kernel: TiledKernel, index_text=lambda text: text) -> TileSplit | None:
    """The split of ``kernel``, or None where it would give nothing: every block of the
    grid is whole (tiles that divide a specialized program's extents), or none is.
    ``index_text`` turns isl's C text into the program's index type."""
    if kernel.blocks is not None:
        return None
    grid, whole = _grid_and_whole(scop, kernel)
    if whole.is_empty() or grid.is_subset(whole):
        return None
    text = isl.AstBuild.from_context(grid).expr_from_set(whole).to_C_str()
    # the partial tiles' code is the code of every block, as without the split: isl
    # simplifies little more under the complement (a union: the last block row or the
    # last column) and takes longer
    return TileSplit(condition=index_text(text), full=replace(kernel, blocks=whole),
                     partial=kernel)
