"""The memory stage: what goes to shared memory, registers and constant memory, the
buffers' boxes and padding, and that staged kernels compute the right thing."""

from __future__ import annotations

import re
import shutil
import subprocess

import islpy as isl
import pytest

from polygpu.memory.footprints import bounding_box
from polygpu.memory.placement import STATIC_SHARED_BYTES
from polygpu.pipeline import compile_region
from polygpu.runtime.check import check_program
from polygpu.schedule.variant import Variant

NVCC = shutil.which("nvcc")


def _buffers(c):
    return {b.array: b for b in c.memory.buffers}


def test_mv_stages_a_and_y_per_time_tile_and_keeps_x_in_a_register():
    c = compile_region("kernels/mv.c", variant=Variant(tile=(128,), threads=(128,),
                                                       time_tile=32))
    b = _buffers(c)
    assert (b["a"].space, b["a"].box.extents, b["a"].padding) == ("shared", (128, 32), 1)
    assert (b["y"].space, b["y"].box.extents, b["y"].padding) == ("shared", (32,), 0)
    assert (b["x"].space, b["x"].box.extents) == ("register", (1,))
    # the copies sit inside the time-tile loop: the deepest tile level
    (kernel,) = c.kernels
    assert b["a"].level == kernel.n_tile_levels
    # a column of the tile per warp access: stride 33 after padding, conflict-free
    assert b["a"].decision.degrees["S1.0 a[i][j]"] == 1
    src = c.program.source
    assert "__shared__ __align__(16) float a_sh[128][33];" in src
    assert "__shared__ __align__(16) float y_sh[32];" in src
    assert src.count("__syncthreads();") >= 2
    # x is loaded once and stored once, around the whole kernel (whose body is there
    # twice in a parametric program: for whole tiles and for the rest, full_tiles.py)
    assert "whole tiles without guards where" in src
    assert len(re.findall(r"x\[\(128 \* bx \+ tx\) \+ pg_u0\] = x_reg", src)) == 2


def test_padding_can_be_forced_and_shared_memory_turned_off():
    c = compile_region("kernels/mv.c", variant=Variant(padding=0))
    assert _buffers(c)["a"].padding == 0 and "a_sh[128][32]" in c.program.source
    c = compile_region("kernels/mv.c", variant=Variant(shared=False))
    assert all(b.space != "shared" for b in c.memory.buffers)
    (p,) = [p for p in c.placement if p.access == "a[i][j]"]
    assert p.placement == "global" and "turned off" in p.reason


def test_a_warp_spanning_two_rows_of_threads_is_padded_for_both():
    """16 x 16 threads: a warp is two rows of ty.  Rows of 34 words put lane (tx, 1)
    two banks after (tx, 0): 2-way conflicts that the x step alone does not show.  Only
    rows of 16 words mod 32 (padding 14) keep the warp's two rows on distinct banks."""
    c = compile_region("kernels/jacobi2d.c", variant=Variant(tile=(32, 32),
                                                             threads=(16, 16),
                                                             time_tile=16))
    for name in ("a", "b"):
        buf = _buffers(c)[name]
        assert (buf.box.extents, buf.padding) == ((34, 34), 14)
        costs = buf.decision.costs
        assert [p for p, cost in enumerate(costs) if cost == min(costs)] == [14]
        assert costs[0] > 1.5 * costs[14]
        assert f"{name}_sh[34][48];" in c.program.source
    # a warp of 32 threads along x is one row: the x step says it all, rows unpadded
    c = compile_region("kernels/jacobi2d.c", variant=Variant(tile=(32, 32),
                                                             threads=(8, 32),
                                                             time_tile=16))
    assert _buffers(c)["a"].padding == 0


def test_unbounded_footprint_is_not_staged_and_says_why():
    c = compile_region("kernels/mv.c", variant=Variant(time_tile=0))
    assert "a" not in _buffers(c)
    (p,) = [p for p in c.placement if p.access == "a[i][j]"]
    assert p.placement == "global" and "time_tile" in p.reason


def test_mm_stages_a_and_b_and_register_tiles_c():
    c = compile_region("kernels/mm.c", variant=Variant(tile=(32, 32), threads=(8, 32),
                                                       time_tile=16, jam=True))
    b = _buffers(c)
    assert b["a"].space == b["b"].space == "shared"
    assert b["a"].box.extents == (32, 16) and b["b"].box.extents == (16, 32)
    # each thread owns 4 rows of c, 8 apart (cyclic): a 4 x 1 register tile, stride 8
    assert (b["c"].space, b["c"].box.extents, b["c"].box.stride) == ("register", (4, 1),
                                                                     (8, 1))


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
def test_register_tile_stays_in_registers(tmp_path):
    c = compile_region("kernels/mm.c", variant=Variant(tile=(32, 32), threads=(8, 32),
                                                       time_tile=32, jam=True))
    cu = tmp_path / "mm.cu"
    cu.write_text(c.program.source)
    out = subprocess.run([NVCC, "-arch=sm_90", "-c", str(cu), "-o", str(tmp_path / "mm.o"),
                          "-Xptxas", "-v"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "0 bytes stack frame" in out.stderr, out.stderr


def test_constant_memory_for_a_small_read_only_filter():
    c = compile_region("kernels/conv1d.c")
    assert c.memory.constants == ("w",)
    assert "__constant__ float w_const[5];" in c.program.source
    assert c.program.constants == ("w",)
    assert _buffers(c)["a"].space == "shared"  # a[i + k]: reuse across threads


def test_stencil_inputs_are_staged_with_their_halo():
    c = compile_region("kernels/jacobi1d.c", variant=Variant(tile=(64,), threads=(64,)))
    assert _buffers(c)["a"].box.extents == (66,)


def test_large_tiles_use_dynamic_shared_memory():
    # 128 x 64 tiles of a and 64 x 128 of b: 64 KB, more than static shared memory
    variant = Variant(tile=(128, 128), threads=(8, 32), time_tile=64)
    c = compile_region("kernels/mm.c", variant=variant)
    (launch,) = c.program.launches
    assert launch.shared_bytes >= 2 * 128 * 64 * 4 > STATIC_SHARED_BYTES
    assert "extern __shared__" in c.program.source
    assert check_program(c.program, c.source_scop, "kernels/mm.c", {"n": 70}, seed=3).ok


def test_read_only_array_is_staged_only_where_needed():
    # mvt: a[i][j] (the mv half) is not coalesced and is staged; a[j][i] (the tmv half)
    # is coalesced and read directly, so the buffer is 128 x 32, not 128 x 128
    c = compile_region("kernels/mvt.c")
    a = _buffers(c)["a"]
    assert a.box.extents == (128, 32) and a.statements == frozenset({"S0"})
    (p,) = [p for p in c.placement if p.access == "a[j][i]"]
    assert p.placement == "global-coalesced"


CHECKS = [
    ("kernels/mv.c", Variant(), 150),
    ("kernels/mv.c", Variant(padding=0, tile=(32,), threads=(32,), time_tile=16), 101),
    ("kernels/tmv.c", Variant(tile=(64,), threads=(32,), jam=True, time_tile=8), 101),
    ("kernels/tmv.c", Variant(tile=(64,), threads=(16,), blocked=True), 77),
    ("kernels/mvt.c", Variant(), 70),
    ("kernels/mm.c", Variant(tile=(8, 32), threads=(4, 16), time_tile=8, jam=True), 45),
    ("kernels/mm.c", Variant(tile=(4, 16), threads=(4, 16), time_tile=5), 37),
    ("kernels/jacobi1d.c", Variant(tile=(32,), threads=(32,)), 100),
    ("kernels/conv1d.c", Variant(tile=(16,), threads=(16,)), 61),
]


@pytest.mark.parametrize("spec, variant, n", CHECKS)
def test_staged_kernels_match_the_original_loops(spec, variant, n):
    c = compile_region(spec, variant=variant)
    assert any(b.space == "shared" for b in c.memory.buffers)
    result = check_program(c.program, c.source_scop, spec, {"n": n}, seed=n)
    assert result.ok, result.message


def test_bounding_box_strides_are_per_dimension():
    ctx = isl.Set("[t] -> { : 0 <= t < 32 }")
    # a thread's cyclic points: t, t + 32, t + 64, t + 96
    s = isl.Set("[t] -> { y[i] : exists r: i = t + 32 r and 0 <= r < 4 and 0 <= t < 32 }")
    box = bounding_box(s, ctx)
    assert (box.stride, box.extents) == ((32,), (4,))
    # a lattice: r + c even has no stride in r or c alone
    s = isl.Set("{ A[r, c] : (r + c) mod 2 = 0 and 0 <= r < 4 and 0 <= c < 8 }")
    box = bounding_box(s, isl.Set("{ : }"))
    assert (box.stride, box.extents) == ((1, 1), (4, 8))


@pytest.mark.parametrize("kernel, sizes", [
    ("syr2k", {"n": 37, "m": 23}), ("syrk", {"n": 37, "m": 23}),
])
def test_register_tile_on_a_triangle_has_constant_indices(kernel, sizes):
    """A thread on the diagonal of ``j <= i`` touches fewer points than one inside; the
    register tile's base is still one affine expression (``32 by + ty``), so every
    index into it is a constant once unrolled -- a piecewise base made a run-time index
    and put the tile in local memory -- and the code still checks."""
    spec = f"kernels/polybench/{kernel}.c"
    c = compile_region(spec, variant=Variant(tile=(32, 32), threads=(8, 32), jam=True))
    (reg,) = [b for b in c.memory.buffers if b.space == "register"]
    assert all(len(base.get_pieces()) == 1 for base in reg.box.base)
    assert reg.box.extents == (4, 1)
    assert " ? " not in "".join(line for line in c.program.source.splitlines()
                                if "C_reg[" in line and "+=" in line)
    result = check_program(c.program, c.source_scop, spec, sizes, backend="cpu", seed=3)
    assert result.ok, result.message
