"""Occupancy from ptxas' report: hand-computed cases and a real compile."""

from __future__ import annotations

import shutil

import pytest

from polygpu.pipeline import compile_region
from polygpu.schedule.variant import Variant
from polygpu.search.occupancy import SM_90, occupancy, parse_ptxas, resource_usage


@pytest.mark.parametrize("threads, regs, smem, blocks, fraction, limit", [
    (128, 32, 0, 16, 1.0, "threads"),  # 4 warps; 1024 registers a warp: 64 warps either way
    (256, 64, 0, 4, 0.5, "registers"),  # 2048 registers a warp: 32 warps, 4 blocks of 8
    (1024, 48, 48 * 1024, 1, 0.5, "registers"),  # 1536 a warp: 42 warps, one block of 32
    (32, 16, 0, 32, 0.5, "blocks"),  # 32 blocks of one warp
    (256, 16, 100 * 1024, 2, 0.25, "shared memory"),  # 101 KB a block: two fit in 228 KB
    (96, 40, 0, 17, 51 / 64, "registers"),  # 3 warps; 1280 a warp: 51 warps, 17 blocks
])
def test_hand_computed_occupancy(threads, regs, smem, blocks, fraction, limit):
    occ = occupancy(threads, regs, smem, SM_90)
    assert (occ.blocks_per_sm, occ.fraction, occ.limited_by) == (blocks, fraction, limit)


def test_impossible_launches_have_no_occupancy():
    assert occupancy(2048, 32, 0).blocks_per_sm == 0
    assert occupancy(128, 32, 300 * 1024).limited_by == "launch"


REPORT = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'mm_kernel0' for 'sm_90'
ptxas info    : Function properties for mm_kernel0
    24 bytes stack frame, 24 bytes spill stores, 24 bytes spill loads
ptxas info    : Used 48 registers, used 1 barriers, 24 bytes cumulative stack size, 5120 bytes smem
ptxas info    : Compiling entry function 'mv_kernel0' for 'sm_90'
ptxas info    : Function properties for mv_kernel0
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 30 registers
"""


def test_parse_ptxas_report():
    got = parse_ptxas(REPORT)
    mm, mv = got["mm_kernel0"], got["mv_kernel0"]
    assert (mm.registers, mm.shared_static, mm.stack, mm.spill_stores, mm.barriers) == \
        (48, 5120, 24, 24, 1)
    assert (mv.registers, mv.shared_static, mv.stack, mv.barriers) == (30, 0, 0, 0)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_resource_usage_of_a_generated_kernel():
    c = compile_region("kernels/mm.c", variant=Variant(tile=(32, 32), threads=(8, 32),
                                                       time_tile=32, jam=True))
    (usage,) = resource_usage(c.program.source).values()
    # a_sh[32][32 + pad] and b_sh[32][32 + pad] floats: what the memory stage planned
    assert usage.shared_static == c.memory.shared_bytes(0)
    assert 16 <= usage.registers <= 255 and usage.stack == 0 and usage.barriers == 1
    occ = occupancy(256, usage.registers, usage.shared_static)
    assert 0 < occ.fraction <= 1
