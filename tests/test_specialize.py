"""Variants specialized for known parameter values: the code drops the guards those
values decide, stays exact (checked against the sequential reference on the CPU
emulator), and refuses to run at other values."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from polygpu.codegen.program import SpecializationError
from polygpu.errors import PolygpuError
from polygpu.pipeline import compile_variant, prepare
from polygpu.runtime.arguments import bind
from polygpu.runtime.check import check_program
from polygpu.schedule.variant import Variant
from tests.generated import kernel_text

KERNELS = Path(__file__).resolve().parent.parent / "kernels"


@pytest.fixture(scope="module")
def mm():
    return prepare(str(KERNELS / "mm.c"))


def _check(prepared, variant: Variant, params: dict[str, int]):
    compiled = compile_variant(prepared, variant, params)
    result = check_program(compiled.program, compiled.source_scop, prepared.spec, params,
                           seed=3)
    assert result.ok, result.message
    return compiled


MM_8X8 = Variant(tile=(64, 64), threads=(8, 8), jam=True, time_tile=16, specialize=True)


def test_whole_tiles_have_no_guards_and_constant_bounds(mm):
    body = kernel_text(_check(mm, MM_8X8, {"n": 128}).program.source)
    # (the one condition left: whether the array's address allows 16-byte loads)
    aligned = re.compile(r"if \(\(reinterpret_cast<size_t>\(\w+\) % 16 == 0\)\)")
    assert "const float4 pg_v" in body and aligned.search(body)
    assert "if (" not in aligned.sub("", body), "n = 128 is two whole tiles: nothing to guard"
    assert re.search(r"for \(int c\d+ = 0; c\d+ <= 7; c\d+ \+= 1\)", body), \
        "the tile loop over k runs 128 / 16 times, a constant"
    generic = kernel_text(compile_variant(
        mm, Variant(tile=(64, 64), threads=(8, 8), jam=True, time_tile=16)).program.source)
    assert "if (" in generic, "the parametric code guards partial tiles"
    assert "c_reg[8][8]" in body, "8 x 8 points per thread stay in registers"


@pytest.mark.parametrize("n", [37, 77, 130])
def test_partial_tiles_keep_their_guards_and_stay_exact(mm, n):
    body = kernel_text(_check(mm, MM_8X8, {"n": n}).program.source)
    # the partial tiles' half (or the only body, where no tile is whole: n = 37)
    partial = body.split("void mm_kernel0_partial(")[1].split("__global__")[0] \
        if "void mm_kernel0_partial(" in body else body
    assert "if (" in partial and f"{n - 1}" in partial


TIME_LOOP = """
void heat(int t, int n, float a[n], float b[n])
{
#pragma scop
  for (int s = 0; s < t; s++) {
    for (int i = 1; i < n - 1; i++)
      b[i] = 0.25f * a[i - 1] + 0.5f * a[i] + 0.25f * a[i + 1];
    for (int i = 1; i < n - 1; i++)
      a[i] = b[i];
  }
#pragma endscop
}
"""


@pytest.mark.parametrize("name, params, variant", [
    ("jacobi1d.c", {"n": 71}, Variant(tile=(32,), threads=(32,))),
    ("conv1d.c", {"n": 61}, Variant(tile=(64,), threads=(32,), jam=True)),
    ("mvt.c", {"n": 67}, Variant(tile=(32,), threads=(32,))),
    ("mv.py:mv", {"n": 45}, Variant(tile=(8, 32), threads=(1, 32))),
    ("heat", {"t": 4, "n": 53}, Variant(tile=(16,), threads=(16,), time_tile=8)),
])
def test_other_kernels_specialized_stay_exact(tmp_path, name, params, variant):
    if name == "heat":
        path = tmp_path / "heat.c"
        path.write_text(TIME_LOOP)
        spec = str(path)
    else:
        spec = str(KERNELS / name)
    prepared = prepare(spec)
    for candidate in range(min(3, len(prepared.candidates))):
        _check(prepared, replace(variant, candidate=candidate, specialize=True), params)


def test_a_specialized_program_refuses_other_sizes(mm):
    program = compile_variant(mm, MM_8X8, {"n": 128}).program
    assert program.specialized == (("n", 128),)
    import numpy as np
    values = {"n": 64, **{a: np.zeros((64, 64), np.float32) for a in "abc"}}
    with pytest.raises(SpecializationError, match="specialized for n=128; got n=64"):
        bind(program, values)
    result_other = compile_variant(mm, MM_8X8, {"n": 64}).program
    assert result_other.specialized == (("n", 64),)
    bind(result_other, values)  # its own size is fine


def test_specialize_needs_every_parameter(mm):
    with pytest.raises(PolygpuError, match="specialize needs a value for every parameter"):
        compile_variant(mm, MM_8X8)
    with pytest.raises(PolygpuError, match="violate"):
        compile_variant(mm, MM_8X8, {"n": 0})


def test_cli_check_and_compile(tmp_path):
    variant = '{"tile": [32, 32], "threads": [8, 8], "jam": true, "specialize": true}'
    ok = subprocess.run(["polygpu", "check", str(KERNELS / "mm.c"), "-p", "n=45",
                         "--variant", variant, "--backend", "cpu"],
                        capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.startswith("ok:"), ok.stdout + ok.stderr
    out = tmp_path / "out"
    bad = subprocess.run(["polygpu", "compile", str(KERNELS / "mm.c"), "--variant", variant,
                          "-o", str(out)], capture_output=True, text=True)
    assert bad.returncode == 2 and "mm.c:2:" in bad.stderr and "missing n" in bad.stderr
    assert not out.exists(), "no partial output"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_specialized_8x8_compiles_without_spills(mm, tmp_path):
    program = compile_variant(mm, Variant(tile=(128, 128), threads=(16, 16), jam=True,
                                          specialize=True), {"n": 4096}).program
    src = tmp_path / "mm.cu"
    src.write_text(program.source)
    out = subprocess.run(["nvcc", "-arch=sm_90", "-c", "-o", str(tmp_path / "mm.o"),
                          "--resource-usage", "-Werror", "all-warnings", str(src)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "0 bytes spill stores" in out.stderr + out.stdout
