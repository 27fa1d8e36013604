"""A kernel's thread work unrolled whole (``Variant.full_unroll``): a solve leaf's column
held in registers, the leaf right-looking where the prover allows (schedule/tiling.py's
``_unrolled``), nvcc unrolling the loops (codegen/thread_ast.py); exact on the emulator at
odd sizes, no local memory in ptxas's report, and clear errors where it cannot apply."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from polygpu.errors import PolygpuError
from polygpu.pipeline import compile_region, prepare
from polygpu.runtime.check import check_program
from polygpu.schedule.variant import Variant
from polygpu.search.recursion_plans import recursion_plan

TRSM = "kernels/trsm.c"
TRSM_UPPER = "kernels/trsm_upper.c"
LEAF = Variant(tile=(32,), threads=(32,), full_unroll=True, time_tile=0)


def _leaf_code(source: str, index: int) -> str:
    return "".join(c for c in source.split("\n}\n") if re.search(
        rf"void (__launch_bounds__\(\d+\) )?trsm\w*_kernel{index}(_whole|_partial)?\(", c))


def _recursive(spec: str, sizes: dict, stop: int, defines=(), leaf: Variant = LEAF):
    plan = recursion_plan(prepare(spec, defines=defines, params=sizes), sizes, stop,
                          leaf=leaf)
    return compile_region(spec, variant=plan.variant, params=sizes, defines=defines)


def _ptxas_report(tmp_path, source: str, index: int) -> str:
    """ptxas's line on kernel ``index`` of ``source`` (stack frame, spills), compiled
    for sm_90 (the compile must succeed)."""
    src = tmp_path / "trsm.cu"
    src.write_text(source)
    done = subprocess.run(["nvcc", "-arch=sm_90", "-std=c++17", "-cubin", "-Xptxas", "-v",
                           str(src), "-o", str(tmp_path / "trsm.cubin")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    report = re.search(rf"Function properties for _Z\d+trsm_kernel{index}i\w*\n(.*)",
                       done.stderr)
    assert report, done.stderr
    return report.group(1)


@pytest.mark.parametrize(("m", "stop"), [(100, 32), (37, 16)])
def test_a_solve_leafs_column_is_held_in_registers_right_looking_and_exact(m, stop):
    """Each leaf: a thread a column of B, its rows in registers (``b_reg``, loaded once
    and stored once), row c divided, then the rows below it updated -- the order of the
    loop nest for every element, so bit-exact in double at odd sizes."""
    sizes = {"m": m, "n": 23}
    defines = ("DATA_TYPE=double",)
    compiled = _recursive(TRSM, sizes, stop, defines)
    leaves = [k for k in compiled.kernels if k.unrolled]
    assert len(leaves) == -(-m // stop)  # one a diagonal block, every one unrolled
    for k in leaves:
        code = _leaf_code(compiled.program.source, k.index)
        assert re.search(r"double b_reg\[\d+\]\[1\];", code), code
        assert "b_sh" not in code and "__syncwarp" not in code
        # right-looking: the division of row c, then a loop over the rows below it
        assert re.search(r"#pragma unroll\s*for \(int (c\d+) = [^;]+;[^)]+\)\s*\{\s*"
                         r"b_reg\[\(\1\)[^=]+= \(b_reg\[\(\1\)[^/]+/ [^;]+;\s*"
                         r"#pragma unroll\s*for \(int (c\d+) = \1 \+ 1;", code), code
    result = check_program(compiled.program, compiled.source_scop, TRSM, sizes, seed=5,
                           defines=defines)
    assert result.ok, result.message
    assert "error 0 <=" in result.message, result.message


def test_a_backward_solve_stays_left_looking_and_exact():
    """The upper (backward) solve's leaves cannot turn right-looking (each row's sum
    would run in the other order; the prover refuses): unrolled as given, still exact."""
    sizes = {"m": 100, "n": 23}
    compiled = _recursive(TRSM_UPPER, sizes, 32)
    leaves = [k for k in compiled.kernels if k.unrolled]
    assert leaves
    for k in leaves:
        code = _leaf_code(compiled.program.source, k.index)
        assert "b_reg[" in code and "b_sh" not in code
    result = check_program(compiled.program, compiled.source_scop, TRSM_UPPER, sizes,
                           seed=5)
    assert result.ok, result.message


@pytest.mark.parametrize(("spec", "sizes", "variant"), [
    ("kernels/mv.c", {"n": 37}, Variant(tile=(32,), threads=(32,), time_tile=0)),
    ("kernels/mm.c", {"n": 21}, Variant(tile=(8, 8), threads=(8, 8), time_tile=0)),
    # a register tile's points and a staged time loop's tiles of 32 beside it
    ("kernels/mm.c", {"n": 21}, Variant(tile=(8, 8), threads=(4, 4), jam=True))])
def test_any_specialized_kernel_unrolled_whole_is_exact(spec, sizes, variant):
    """Not only a leaf: a kernel unrolled whole at odd sizes (partial tiles, guards on
    thread ids inside the unrolled loops) computes what the loop nest does."""
    from dataclasses import replace

    compiled = compile_region(spec, variant=replace(variant, full_unroll=True,
                                                    specialize=True), params=sizes)
    assert all(k.unrolled for k in compiled.kernels)
    assert "#pragma unroll\n" in compiled.program.source
    result = check_program(compiled.program, compiled.source_scop, spec, sizes, seed=3)
    assert result.ok, result.message


def test_full_unroll_is_checked_and_explained():
    with pytest.raises(PolygpuError, match="no device_steps"):
        Variant(full_unroll=True, device_steps=True)
    assert "full_unroll" not in Variant().to_json()
    assert Variant.from_json(LEAF.to_json()) == LEAF
    # parametric sizes: no constant trip count to unroll
    with pytest.raises(PolygpuError, match="full_unroll needs constant trip counts"):
        compile_region("kernels/mv.c", variant=Variant(tile=(32,), threads=(32,),
                                                       full_unroll=True))
    # a thread's work too large to copy out
    with pytest.raises(PolygpuError, match=r"full_unroll of kernel 0 would copy its "
                                           r"statements \d+ times a thread"):
        compile_region("kernels/mv.c", variant=Variant(tile=(32,), threads=(32,),
                                                       full_unroll=True, specialize=True),
                       params={"n": 30000})


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_nvcc_unrolls_a_leaf_into_registers(tmp_path):
    """ptxas's report: the 64-row leaf's column in registers, no local memory."""
    compiled = _recursive(TRSM, {"m": 256, "n": 512}, 64)
    (leaf, *_) = [k for k in compiled.kernels if k.unrolled]
    report = _ptxas_report(tmp_path, compiled.program.source, leaf.index)
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in report, \
        report
