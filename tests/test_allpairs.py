"""All-pairs kernels (seed 004, Sarje & Aluru): ``kernels/allpairs`` (two point sets, and
one set's mirrored triangle) checked at odd sizes (n1 != n2, the slice width not dividing
d); ``pow`` with a constant integer exponent multiplied out (``pg_powi``), with C's
meaning kept: ``pow`` in double, ``powf`` in float; and fast math as an explicit,
program-wide option that the check names."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import replace

import pytest

from polygpu.codegen.expressions import integer_exponent
from polygpu.frontend import ir
from polygpu.pipeline import compile_region
from polygpu.runtime.check import check_program
from polygpu.schedule.variant import Variant
from tests.generated import kernel_text

LPDIST = "kernels/allpairs/lpdist.c"
ODD = {"n1": 37, "n2": 23, "d": 101}
# the paper's decomposition: c = 32 columns, r = 4 rows of threads, s = 2 subtiles (rows
# cyclic over the threads), slices of d' = 24 (not dividing 101); then register tiles
PAPER = Variant(tile=(8, 32), threads=(4, 32), time_tile=24)
TILED = Variant(tile=(16, 64), threads=(4, 16), jam=True, time_tile=24, chunk=2)


def _const(v, dtype="int"):
    return ir.Const(v, dtype)


def _scalar(name):
    return ir.ScalarRef(name, None)


@pytest.mark.parametrize(("func", "exponent", "expected"), [
    ("powf", _const(3), 3), ("pow", _const(2.0, "float64"), 2), ("powf", _const(0), 0),
    ("powf", ir.UnaryOp("-", _const(2)), -2), ("pow", _const(64), 64),
    ("powf", _const(2.5, "float32"), None), ("powf", _const(65), None),
    ("powf", _scalar("p"), None), ("expf", _const(3), None)])
def test_integer_exponents_are_recognised(func, exponent, expected):
    args = (_scalar("x"), exponent) if func != "expf" else (_const(3),)
    assert integer_exponent(ir.Call(func, args)) == expected


@pytest.mark.parametrize("p", ["1", "2", "3", "p"])
@pytest.mark.parametrize("variant", [PAPER, TILED], ids=["paper", "register-tiled"])
def test_lp_distances_pass_the_cpu_check_at_odd_sizes(p, variant):
    compiled = compile_region(LPDIST, variant=variant, defines=(f"P={p}",))
    kernels = kernel_text(compiled.program.source)
    if p == "p":  # a parameter: the library's powf
        assert "pg_powi" not in kernels and "powf(" in kernels
    else:  # multiplied out in float, as powf computes
        assert f"pg_powi<{p}>((float)(" in kernels
        assert not re.search(rf"powf\([^;]*, {p}\)", kernels)
    result = check_program(compiled.program, compiled.source_scop, LPDIST,
                           ODD, seed=5,
                           defines=(f"P={p}",), scalars={"p": 2.5} if p == "p" else None)
    assert result.ok, result.message


@pytest.mark.parametrize("name", ["l1dist", "l2dist", "l1self"])
def test_l1_and_l2_distances_pass_the_cpu_check_at_odd_sizes(name):
    """Two point sets, and one set's lower triangle of pairs mirrored (``l1self``: a
    scalar temporary written to D[i][j] and D[j][i])."""
    spec = f"kernels/allpairs/{name}.c"
    sizes = {"n": 37, "d": 101} if name == "l1self" else ODD
    for variant in (PAPER, TILED):
        compiled = compile_region(spec, variant=variant)
        result = check_program(compiled.program, compiled.source_scop, spec, sizes, seed=3)
        assert result.ok, result.message


def test_integer_powers_keep_special_values_on_the_emulator(tmp_path):
    """pg_powi against C's pow on the values where they could part: zeros of both signs
    with negative powers (infinities of the right sign), 0^0 = 1, NaN^0 = 1, overflow
    to infinity, negative bases; in double for pow, in float for powf."""
    import numpy as np

    src = tmp_path / "powers.c"
    src.write_text("""
void powers(int n, float x[n], float y[n][6], double z[n][3]) {
#pragma scop
  for (int i = 0; i < n; i++) {
    y[i][0] = powf(x[i], 0); y[i][1] = powf(x[i], 1); y[i][2] = powf(x[i], 2);
    y[i][3] = powf(x[i], -3); y[i][4] = powf(x[i], 7); y[i][5] = powf(x[i], -2.0f);
    z[i][0] = pow(x[i], 3); z[i][1] = pow(x[i], -1); z[i][2] = pow(x[i], 12);
  }
#pragma endscop
}
""")
    compiled = compile_region(str(src), variant=Variant(tile=(32,), threads=(32,)))
    from polygpu.runtime.device import CpuEmulator

    x = np.array([0.0, -0.0, np.nan, 1e20, -3.0, 0.5, 2.0, -1.5], dtype=np.float32)
    n = len(x)
    y = np.zeros((n, 6), dtype=np.float32)
    z = np.zeros((n, 3), dtype=np.float64)
    CpuEmulator().run(compiled.program, {"n": n, "x": x, "y": y, "z": z})
    with np.errstate(all="ignore"):
        xf = x.astype(np.float32)
        want_y = np.stack([np.float32(1) + 0 * xf, xf, xf * xf, np.float32(1) / (xf * xf * xf),
                           xf ** np.float32(7), np.float32(1) / (xf * xf)], axis=1)
        xd = x.astype(np.float64)
        want_z = np.stack([xd ** 3, 1 / xd, xd ** 12], axis=1)
    want_y[2, 0] = 1.0  # NaN^0 = 1, as C's pow
    np.testing.assert_allclose(y, want_y, rtol=2e-6)
    np.testing.assert_allclose(z, want_z, rtol=1e-15)
    assert np.signbit(y[1, 3]) and np.isinf(y[1, 3])  # (-0)^-3 = -inf
    assert not np.signbit(y[0, 3]) and np.isinf(y[0, 3])


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_constant_powers_are_multiplications_in_ptx(tmp_path):
    """powf(x, 3) is two multiplications in nvcc's PTX; powf(x, p) is CUDA's software
    logarithm and exponential (polynomials of fused multiply-adds)."""
    def ops(exponent):
        src = tmp_path / "cube.c"
        src.write_text(f"""
void cube(int n, float p, float x[n], float y[n]) {{
#pragma scop
  for (int i = 0; i < n; i++) y[i] = powf(x[i], {exponent});
#pragma endscop
}}
""")
        compiled = compile_region(str(src), variant=Variant(tile=(32,), threads=(32,)))
        cu, ptx = tmp_path / "cube.cu", tmp_path / "cube.ptx"
        cu.write_text(compiled.program.source)
        subprocess.run(["nvcc", "-arch=sm_90", "-ptx", str(cu), "-o", str(ptx)],
                       check=True, capture_output=True)
        text = ptx.read_text()
        # a parametric program has the body twice: whole tiles and the rest (full_tiles)
        bodies = 1 + compiled.program.source.count("whole tiles without guards")
        return (len(re.findall(r"\bmul(\.rn)?\.f32", text)) / bodies,
                len(re.findall(r"\bfma\.rn\.f32", text)) / bodies)

    assert ops("3") == (2, 0)
    assert ops("p")[1] >= 8


def test_fast_math_is_an_explicit_variant_checked_like_any_other(tmp_path):
    """``fast_math``: the program's float expf/logf/sinf/cosf/powf become CUDA's
    intrinsics (one #define each, so the emulator runs the same text), the check says so
    and keeps its tolerance; absent from a variant's JSON when off (older records keep
    their keys), and only program-wide."""
    from polygpu.errors import PolygpuError

    assert "fast_math" not in Variant().to_json()
    fast = Variant(tile=(8, 32), threads=(4, 32), time_tile=24, fast_math=True)
    assert Variant.from_json(fast.to_json()) == fast
    with pytest.raises(PolygpuError, match="cannot override"):
        Variant(kernels=((0, (("fast_math", True),)),))
    compiled = compile_region(LPDIST, variant=fast, defines=("P=p",))
    assert compiled.program.fast_math
    assert "#define powf __powf" in compiled.program.source
    result = check_program(compiled.program, compiled.source_scop, LPDIST, ODD, seed=5,
                           defines=("P=p",), scalars={"p": 2.5})
    assert result.ok and "fast math" in result.message, result.message
    plain = compile_region(LPDIST, variant=replace(fast, fast_math=False), defines=("P=p",))
    assert not plain.program.fast_math and "__powf" not in plain.program.source


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_fast_math_powf_is_the_hardware_approximation_in_ptx(tmp_path):
    """With fast math, powf(x, p) is ex2.approx/lg2.approx in PTX, not CUDA's software
    routine (fused multiply-add polynomials)."""
    src = tmp_path / "power.c"
    src.write_text("""
void power(int n, float p, float x[n], float y[n]) {
#pragma scop
  for (int i = 0; i < n; i++) y[i] = powf(x[i], p);
#pragma endscop
}
""")
    compiled = compile_region(str(src), variant=Variant(tile=(32,), threads=(32,),
                                                       fast_math=True))
    cu, ptx = tmp_path / "power.cu", tmp_path / "power.ptx"
    cu.write_text(compiled.program.source)
    subprocess.run(["nvcc", "-arch=sm_90", "-ptx", str(cu), "-o", str(ptx)], check=True,
                   capture_output=True)
    text = ptx.read_text()
    assert re.search(r"\bex2\.approx", text) and re.search(r"\blg2\.approx", text)
    assert len(re.findall(r"\bfma\.rn\.f32", text)) < 4


def test_fast_math_from_the_command_line(tmp_path, capsys):
    """compile and check take --fast-math; check says the program uses it."""
    from polygpu.cli import main

    out = tmp_path / "out"
    assert main(["compile", LPDIST, "-D", "P=p", "-p", "n1=64", "-p", "n2=64", "-p",
                 "d=128", "--fast-math", "-o", str(out)]) == 0
    assert "#define powf __powf" in (out / "lpdist.cu").read_text()
    assert main(["check", LPDIST, "-D", "P=p", "-p", "n1=37", "-p", "n2=23", "-p", "d=101",
                 "-p", "p=2.5", "--fast-math", "--backend", "cpu"]) == 0
    assert "fast math" in capsys.readouterr().out


def test_a_fast_math_search_has_fast_math_everywhere():
    """``--fast-math`` for tune (SpaceOptions.fast_math): the plans and every variant of
    the space have it, so every candidate timed is one, and the database keys say so."""
    from polygpu.search.resources import FixedResources
    from polygpu.search.runner import SyntheticRunner
    from polygpu.search.space import SpaceOptions
    from polygpu.search.tuner import TuneOptions, tune

    runner = SyntheticRunner()
    result = tune(LPDIST, ODD, runner, oracle=FixedResources(), options=TuneOptions(
        budget=3, jobs=1, defines=("P=p",), space=SpaceOptions(fast_math=True)))
    assert runner.calls and all(Variant.from_json(k).fast_math for k in runner.calls)
    assert all(c.variant.fast_math for c in result.candidates)
