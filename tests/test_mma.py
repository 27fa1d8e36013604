"""Double products on the tensor cores (``Variant.mma``, codegen/mma.py): the time loop
of a whole register tile as warp mma.sync.m8n8k4 steps, exact on the emulator (whose
``pg_dmma`` computes the instruction with shuffles), partial tiles left as FMA code, and
clear errors where the plan cannot take it."""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess

import pytest

from polygpu.errors import PolygpuError
from polygpu.pipeline import compile_region
from polygpu.runtime.check import check_program
from polygpu.schedule.variant import Variant

BATCHED = "kernels/batched_mm.c"
GEMM = "kernels/polybench/gemm.c"
DOUBLE = ("DATA_TYPE=double",)
# 64 x 64 tiles, 4 threads along x with runs of 2 points, 32 along y: 2 x 16 points a
# thread, 2 x 8 fragments a warp's
MMA = Variant(tile=(64, 64), threads=(32, 4), jam=True, time_tile=16, unroll=4, chunk=2,
              prefetch=True, double_buffer=True, specialize=True, mma=True)


def _checked(spec: str, sizes: dict, variant: Variant = MMA, defines=()):
    compiled = compile_region(spec, variant=variant, params=sizes, defines=defines)
    result = check_program(compiled.program, compiled.source_scop, spec, sizes, seed=7,
                           defines=defines)
    assert result.ok, result.message
    return compiled.program.source


def test_a_whole_tile_batched_product_runs_on_the_tensor_cores_exactly():
    """n = 64 under 64 x 64 tiles: every block whole, each k step of 4 one instruction
    per fragment (2 x 8 of them), operands read at the lane's own k (``c8 + tx``) and
    the tile's column ``8 v + ty % 8``; the emulator's result matches the loop nest."""
    source = _checked(BATCHED, {"nb": 3, "n": 64}, defines=DOUBLE)
    assert "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64" in source
    body = source.split("__global__", 1)[1]
    calls = re.findall(r"pg_dmma16\(c_reg", body)  # the two rows of a thread at once
    assert calls and len(calls) % 8 == 0 and "pg_dmma(c_reg" not in body
    assert "c8 += 4" in body and "(c8 + tx)" in body and "ty % 8" in body


def test_partial_tiles_keep_their_fma_code():
    """n = 37 under 64 x 64 tiles: no block is whole, so no step takes the instruction
    (its lanes must all be there), and the program is the FMA one -- exact."""
    source = _checked(BATCHED, {"nb": 3, "n": 37}, defines=DOUBLE)
    assert "pg_dmma(c_reg" not in source and "pg_dmma16(c_reg" not in source


def test_polybench_gemm_with_its_scalar_on_the_tensor_cores_at_split_sizes():
    """PolyBench's gemm (``C[i][j] += alpha * A[i][k] * B[k][j]``: the factor free of j
    is ``alpha * A``) at sizes the tiles do not divide: whole tiles on the tensor
    cores, the others as FMA code, both exact."""
    source = _checked(GEMM, {"ni": 100, "nj": 72, "nk": 64})
    (kernel,) = re.findall(r"void (gemm_kernel\d+)_whole\(", source)
    whole, partial = source.split(f"{kernel}_whole(", 1)[1].split(f"{kernel}_partial(", 1)
    steps = re.compile(r"pg_dmma(16)?\(")
    assert steps.search(whole) and not steps.search(partial.split("__global__")[0])


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_the_instruction_is_in_the_ptx_and_the_tile_in_registers(tmp_path):
    compiled = compile_region(BATCHED, variant=MMA, params={"nb": 3, "n": 128},
                              defines=DOUBLE)
    cu = tmp_path / "k.cu"
    cu.write_text(compiled.program.source)
    ptx = tmp_path / "k.ptx"
    subprocess.run(["nvcc", "-arch=sm_90", "-ptx", "-o", str(ptx), str(cu)], check=True,
                   capture_output=True)
    text = ptx.read_text()
    # sm_90: two rows' fragments (the thread's 2 points along y) an m16n8k4 step each
    assert text.count("mma.sync.aligned.m16n8k4.row.col.f64") >= 8
    assert "m8n8k4" not in text
    assert "fma.rn.f64" not in text  # whole tiles only at n = 128: no FMA products left
    older = tmp_path / "k80.ptx"
    subprocess.run(["nvcc", "-arch=sm_80", "-ptx", "-o", str(older), str(cu)], check=True,
                   capture_output=True)
    text = older.read_text()  # sm_80 has no m16n8k4 in double: two m8n8k4 instead
    assert text.count("mma.sync.aligned.m8n8k4.row.col.f64") >= 2 * 8
    assert "m16n8k4" not in text
    from polygpu.search.occupancy import resource_usage
    (r,) = resource_usage(compiled.program.source).values()
    assert (r.stack, r.spill_stores) == (0, 0)


@pytest.mark.parametrize(("variant", "defines", "message"), [
    (Variant(tile=(64, 64), threads=(16, 16), jam=True, chunk=2, specialize=True,
             mma=True), DOUBLE, "4 threads along x"),
    (Variant(tile=(64, 64), threads=(12, 4), jam=True, chunk=2, specialize=True,
             mma=True), DOUBLE, "multiple of 8 threads along y"),
    (Variant(tile=(64, 64), threads=(32, 4), jam=False, chunk=2, specialize=True,
             mma=True), DOUBLE, "register tile"),
    (MMA, (), "writes no double array"),
    (Variant(tile=(32, 64), threads=(32, 4), jam=True, chunk=2, specialize=True,
             mma=True), DOUBLE, "at least 2 points a thread along y"),
])
def test_plans_the_instruction_cannot_take_are_refused(variant, defines, message):
    with pytest.raises(PolygpuError, match=message):
        compile_region(BATCHED, variant=variant, params={"nb": 3, "n": 64},
                       defines=defines)


def test_the_variant_names_mma_only_when_set():
    assert "mma" not in Variant().to_json()
    assert Variant.from_json(MMA.to_json()) == MMA and MMA.to_json()["mma"] is True
    assert "mma_k" not in MMA.to_json()
    k16 = dataclasses.replace(MMA, mma_k=16)
    assert k16.to_json()["mma_k"] == 16 and Variant.from_json(k16.to_json()) == k16


@pytest.mark.parametrize(("fields", "message"), [
    ({"mma_k": 8}, "other than 4 only with mma"),
    ({"mma": True, "mma_k": 12}, "4, 8 or 16"),
])
def test_an_instruction_k_other_than_the_shapes_is_refused(fields, message):
    with pytest.raises(PolygpuError, match=message):
        Variant(tile=(64, 64), threads=(32, 4), **fields)


@pytest.mark.parametrize(("mma_k", "time_tile", "call", "steps"), [
    (8, 16, "pg_dmma16k8", 8),
    (16, 16, "pg_dmma16k16", 16),
    (16, 8, "pg_dmma16k8", 8),  # a trip of 8: the largest k it is a multiple of
])
def test_larger_instruction_shapes_take_several_steps_of_4_at_once(mma_k, time_tile, call,
                                                                   steps):
    """``mma_k`` 8 / 16: each instruction takes A of both rows and B at the lane's steps
    ``c8 + 4 s + tx`` (s < 2 or 4), the loop advancing by 8 / 16 -- exact on the
    emulator (which runs the instruction as m16n8k4 steps in turn)."""
    variant = dataclasses.replace(MMA, mma_k=mma_k, time_tile=time_tile)
    body = _checked(BATCHED, {"nb": 3, "n": 64}, variant, DOUBLE).split("__global__", 1)[1]
    assert len(re.findall(rf"{call}\(c_reg", body)) == 2 * 8 * 2  # 2 x 8 fragments, 2 rows
    assert "pg_dmma16(c_reg" not in body and f"c8 += {steps}" in body
    for s in range(1, steps // 4):
        assert f"(c8 + {4 * s} + tx)" in body and f"pg_mma_b7_{s}" in body


def test_the_operands_buffers_are_padded_for_the_lanes_that_read_them():
    """The instruction's lanes read ``b_sh[k0 + q][8 v + g]`` (lane 4 g + q): unpadded
    rows of 64 doubles put the 4 lanes of one column on one bank (4-way conflicts, 8
    requests); Algorithm 2, told these lanes, pads the rows to 68 (2 requests: none).
    With the rows dealt cyclically (``ty + 32 u``), ``a_sh[ty][k0 + q]`` in rows of 16
    + 4 is conflict-free too.  The same plan in FMA code keeps its own padding."""
    sizes = {"nb": 3, "n": 128}
    big = dataclasses.replace(MMA, tile=(128, 64))
    compiled = compile_region(BATCHED, variant=big, params=sizes, defines=DOUBLE)
    buffers = {b.name: b for b in compiled.memory.buffers}
    source = compiled.program.source
    b_sh, a_sh = buffers["b_sh"], buffers["a_sh"]
    assert b_sh.padding == 4 and b_sh.decision.degrees["S1.1 b[e][k][j]"] == 2
    assert b_sh.decision.costs[0] > b_sh.decision.costs[4]
    assert a_sh.padding == 4 and a_sh.decision.degrees["S1.0 a[e][i][k]"] == 2
    assert a_sh.box.extents[-1] == 16 and "a_sh[pg_stage][0][(ty) - (0)]" in source
    fma = dataclasses.replace(big, mma=False)
    plain = {b.name: b for b in compile_region(BATCHED, variant=fma, params=sizes,
                                               defines=DOUBLE).memory.buffers}
    assert plain["b_sh"].padding == 0
    _checked(BATCHED, sizes, big, DOUBLE)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize(("mma_k", "shape"), [(8, "m16n8k8"), (16, "m16n8k16")])
def test_the_larger_shapes_are_in_the_ptx_of_sm_90_and_steps_of_4_below(tmp_path, mma_k,
                                                                         shape):
    variant = dataclasses.replace(MMA, mma_k=mma_k)
    compiled = compile_region(BATCHED, variant=variant, params={"nb": 3, "n": 128},
                              defines=DOUBLE)
    cu = tmp_path / "k.cu"
    cu.write_text(compiled.program.source)
    for arch, present, absent in (("sm_90", shape, "m8n8k4"), ("sm_80", "m8n8k4", "m16n8")):
        ptx = tmp_path / f"{arch}.ptx"
        subprocess.run(["nvcc", f"-arch={arch}", "-ptx", "-o", str(ptx), str(cu)],
                       check=True, capture_output=True)
        text = ptx.read_text()
        assert f"mma.sync.aligned.{present}.row.col.f64" in text and absent not in text


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_min_blocks_holds_the_registers_to_what_three_blocks_an_sm_leave():
    """``min_blocks`` 3 is ``__launch_bounds__(128, 3)``: the m16n8k8 plan, 182
    registers as ptxas chooses (two blocks of 128 threads an SM), fits three blocks'
    share (at most 170) without spilling."""
    from polygpu.search.occupancy import resource_usage
    sizes = {"nb": 3, "n": 128}
    k8 = dataclasses.replace(MMA, mma_k=8)
    capped = dataclasses.replace(k8, min_blocks=3)
    assert capped.to_json()["min_blocks"] == 3 and "min_blocks" not in k8.to_json()
    (free,) = resource_usage(compile_region(BATCHED, variant=k8, params=sizes,
                                            defines=DOUBLE).program.source).values()
    source = compile_region(BATCHED, variant=capped, params=sizes,
                            defines=DOUBLE).program.source
    assert "__launch_bounds__(128, 3)" in source
    (held,) = resource_usage(source).values()
    assert free.registers > 170 >= held.registers
    assert (held.stack, held.spill_stores) == (0, 0)
    with pytest.raises(PolygpuError, match="min_blocks 40"):
        dataclasses.replace(k8, min_blocks=40)
