"""Double-buffered shared copy-ins (variant ``double_buffer``): two buffers per staged
array used in turn by consecutive tiles, one barrier per tile instead of two.  The memory
stage decides where the argument holds (memory/placement.py ``_double_buffered``); the
code follows; the results stay exact."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from polygpu.cli import main
from polygpu.pipeline import compile_variant, prepare
from polygpu.schedule.variant import Variant

MM = "kernels/mm.c"
FAST = dict(tile=[128, 128], threads=[16, 16], jam=True, time_tile=8, chunk=4,
            prefetch=True, unroll=8, specialize=True)


@pytest.fixture(scope="module")
def mm():
    return prepare(MM, None, (), ())


def test_variant_json_omits_the_default():
    """Older records keep their keys: the field appears only when on."""
    assert "double_buffer" not in Variant().to_json()
    on = Variant(double_buffer=True)
    assert on.to_json()["double_buffer"] is True
    assert Variant.from_json(json.dumps(on.to_json())) == on


def test_mm_buffers_doubled_and_one_barrier_per_tile(mm):
    single = compile_variant(mm, Variant.from_json(FAST), {"n": 4096})
    double = compile_variant(mm, Variant.from_json({**FAST, "double_buffer": True}),
                             {"n": 4096})
    one = {b.array: b for b in single.memory.buffers if b.space == "shared"}
    two = {b.array: b for b in double.memory.buffers if b.space == "shared"}
    assert set(two) == {"a", "b"}
    for name in two:
        assert one[name].stages == 1 and two[name].stages == 2
        assert two[name].bytes == 2 * one[name].bytes
        assert two[name].to_json()["stages"] == 2 and "stages" not in one[name].to_json()
    assert double.memory.shared_bytes(0) == 2 * single.memory.shared_bytes(0)
    text = double.program.source
    a = two["a"]
    assert f"__shared__ __align__(16) float a_sh[2][8][{128 + a.padding}];" in text
    assert "int pg_stage = 0;" in text and "pg_stage ^= 1;" in text
    # every use of a buffer goes through the current stage
    code = "\n".join(line for line in text.splitlines() if not line.startswith("//"))
    assert not re.search(r"\b[ab]_sh\[(?!pg_stage\]|2\])", code)
    assert "2 of them used in turn (double-buffered)" in text
    assert text.count("__syncthreads();") == single.program.source.count("__syncthreads();") - 1
    # the toggle replaces the barrier after the work
    assert re.search(r"pg_stage \^= 1;\s*\}", text)


@pytest.mark.parametrize("path, params, variant, why", [
    ("kernels/transpose.c", {"n": 77}, dict(tile=[32, 32], threads=[8, 32]),
     "its buffer is copied out after the work"),
    ("kernels/jacobi1d.c", {"n": 77}, dict(tile=[64], threads=[16], time_tile=16),
     "its buffer is copied once, outside any tile loop"),
])
def test_refused_where_the_single_barrier_would_not_do(path, params, variant, why):
    p = prepare(path, None, (), ())
    c = compile_variant(p, Variant.from_json({**variant, "double_buffer": True}), params)
    shared = [b for b in c.memory.buffers if b.space == "shared"]
    assert shared, why
    assert all(b.stages == 1 for b in shared), why
    assert "pg_stage" not in c.program.source


def test_not_with_device_steps(mm):
    """In a device-steps kernel the blocks run in turn in one thread block with no
    barrier between them: a block's first copy could overwrite what a slow thread still
    reads for the previous block, so the memory stage keeps the buffers single there."""
    from dataclasses import replace

    from polygpu.memory.placement import plan_memory

    variant = Variant.from_json({**FAST, "double_buffer": True})
    c = compile_variant(mm, variant, {"n": 4096})
    assert {b.stages for b in c.memory.buffers if b.space == "shared"} == {2}
    steps = plan_memory(c.analysis, c.transformation, c.kernels,
                        replace(variant, device_steps=True))
    assert {b.stages for b in steps.buffers if b.space == "shared"} == {1}


@pytest.mark.parametrize("n", [37, 77, 130])
@pytest.mark.parametrize("prefetch", [False, True])
def test_mm_double_buffer_exact_on_cpu(n, prefetch, capsys):
    """Partial tiles, a k loop of one tile, with and without prefetching."""
    variant = dict(tile=[32, 64], threads=[8, 8], jam=True, time_tile=8, chunk=4,
                   prefetch=prefetch, unroll=8, double_buffer=True)
    assert main(["check", MM, "-p", f"n={n}", "--variant", json.dumps(variant),
                 "--backend", "cpu"]) == 0, capsys.readouterr()


@pytest.mark.parametrize("path, variant", [
    ("kernels/mvt.c", dict(tile=[4, 64], threads=[2, 16], jam=True, chunk=2, prefetch=True,
                           time_tile=8, double_buffer=True)),
    ("kernels/mv.c", dict(tile=[64], threads=[64], time_tile=16, double_buffer=True)),
    ("kernels/polybench/gemm.c", dict(tile=[32, 32], threads=[8, 8], jam=True, time_tile=8,
                                      prefetch=True, double_buffer=True)),
])
def test_other_kernels_double_buffered_exact_on_cpu(path, variant, capsys):
    params = ["-p", "ni=37", "-p", "nj=41", "-p", "nk=43"] if "gemm" in path else \
        ["-p", "n=77"]
    assert main(["check", path, *params, "--variant", json.dumps(variant),
                 "--backend", "cpu"]) == 0, capsys.readouterr()


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_ptx_has_one_barrier_and_keeps_vector_loads(mm, tmp_path):
    counts = {}
    for db in (False, True):
        c = compile_variant(mm, Variant.from_json({**FAST, "double_buffer": db}), {"n": 4096})
        src = tmp_path / f"mm{db}.cu"
        src.write_text(c.program.source)
        ptx = tmp_path / f"mm{db}.ptx"
        subprocess.run(["nvcc", "-arch=sm_90", "-ptx", str(src), "-o", str(ptx)],
                       check=True, capture_output=True)
        text = ptx.read_text()
        counts[db] = (text.count("bar.sync"), text.count("ld.shared.v4.f32"))
    assert counts[False][0] == 2 and counts[True][0] == 1
    assert counts[True][1] == counts[False][1] >= 32
