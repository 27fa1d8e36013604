"""A launched kernel's threads each run by a group of lanes (``Variant.lanes``,
codegen/cuda.py): a substitution turned right-looking, the rows of a step shared by the
lanes (schedule/lane_loops.py), or every sum over a thread's sequential loop split over
the lanes and combined by shuffles; everything else done by the first lane.  Exact on
the emulator at odd sizes, the lanes' code as intended, nvcc accepts it, and clear errors
where a kernel cannot take it.  The recursion's solve leaves use it (search/recursion_plans.py)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from polygpu.errors import PolygpuError
from polygpu.pipeline import compile_region, prepare
from polygpu.runtime.check import check_program
from polygpu.schedule.variant import Variant

MV = "kernels/mv.c"  # x[i] = sum_j a[i][j] y[j]: a thread a row
TRSM = "kernels/trsm.c"
TRISOLV = "kernels/polybench/trisolv.c"
LANES = Variant(tile=(8,), threads=(8,), lanes=32, shared=False, registers=False,
                time_tile=0)


def _compiled(spec: str, sizes: dict, variant: Variant, defines=()):
    compiled = compile_region(spec, variant=variant, params=sizes, defines=defines)
    result = check_program(compiled.program, compiled.source_scop, spec, sizes, seed=5,
                           defines=defines)
    assert result.ok, result.message
    return compiled


@pytest.mark.parametrize(("lanes", "threads"), [(32, 8), (16, 4), (8, 32), (2, 3)])
@pytest.mark.parametrize("n", [37, 100])
def test_a_rows_sum_is_split_over_its_lanes_and_exact(lanes, threads, n):
    variant = Variant(tile=(threads,), threads=(threads,), lanes=lanes, shared=False,
                      registers=False, time_tile=0)
    compiled = _compiled(MV, {"n": n}, variant)
    source = compiled.program.source
    (launch,) = compiled.program.launches
    assert launch.block == (threads * lanes, 1, 1)
    assert f"__launch_bounds__({threads * lanes})" in source
    assert f"const int tx = ((threadIdx.x / {lanes}));" in source or \
        f"const int tx = (threadIdx.x / {lanes});" in source
    mask = "0xffffffffu" if lanes == 32 else \
        f"{hex((1 << lanes) - 1)}u << (threadIdx.x % 32 / {lanes} * {lanes})"
    assert f"const unsigned pg_mask = {mask};" in source
    # each lane strides the sum; a butterfly of shuffles; lane 0 adds and writes alone
    assert re.search(r"for \(c\d \+= pg_lane \* \(1\);", source)
    assert f"__shfl_xor_sync(pg_mask, pg_acc, pg_o, {lanes})" in source
    assert "if (pg_lane == 0)\n" in source and "x[" in source.split("if (pg_lane == 0)")[1]


def test_a_solve_runs_each_columns_rows_in_turn_on_its_lanes():
    """trsm without recursion, its solve kernel on lanes (a column on 16 lanes, 8 a
    block; right-looking where proven, else each row's sum split): exact at odd sizes in
    both types."""
    for defines, m in (((), 37), (("DATA_TYPE=double",), 100)):
        leaf = Variant(tile=(8,), threads=(8,), lanes=16, shared=False, registers=False,
                       time_tile=0)
        variant = Variant(tile=(4, 128), threads=(4, 128)).with_kernel(1, leaf)
        compiled = _compiled(TRSM, {"m": m, "n": 23}, variant, defines)
        blocks = [la.block for la in compiled.program.launches]
        assert (128, 1, 1) in blocks  # 8 columns of 16 lanes


def test_a_recursive_solves_leaves_run_on_lanes_and_are_exact():
    """The model's recursion plan gives each leaf of a solve (one mapped dimension, its
    rows in turn) the lanes plan; several levels at odd sizes, checked in both types."""
    from polygpu.search.recursion_plans import SOLVE_LEAF, recursion_plan

    sizes = {"m": 100, "n": 23}
    for defines in ((), ("DATA_TYPE=double",)):
        plan = recursion_plan(prepare(TRSM, defines=defines, params=sizes), sizes, 16)
        overrides = dict(plan.variant.to_json()["kernels"])
        leaves = [k for k, o in overrides.items() if o.get("lanes") == SOLVE_LEAF.lanes]
        assert len(leaves) == 7  # 100 rows: leaves of 16, 16, 16, 16, 4 + 16, 16
        compiled = _compiled(TRSM, sizes, plan.variant, defines)
        for k in leaves:
            assert compiled.program.launches[int(k)].block == (
                SOLVE_LEAF.lanes * SOLVE_LEAF.threads[0], 1, 1)


@pytest.mark.parametrize(("dtype", "lanes", "columns"), [("float32", 32, 8),
                                                         ("float64", 32, 4),
                                                         ("float32", 8, 16)])
def test_a_leafs_strip_is_staged_and_padded_for_the_lanes(dtype, lanes, columns):
    """A recursion leaf on lanes stages its strip of B (rows x its columns) in shared
    memory, the copies dealt over every lane of the block; the lanes of a column read
    consecutive rows of the strip, so its rows are padded until those rows fall in
    distinct banks (Algorithm 2 given the lanes' offsets: memory/placement.lane_offsets)."""
    from polygpu.search.recursion_plans import SOLVE_LEAF, recursion_plan

    defines = ("DATA_TYPE=double",) if dtype == "float64" else ()
    sizes = {"m": 300, "n": 64}
    leaf = Variant(tile=(columns,), threads=(columns,), lanes=lanes, registers=False)
    plan = recursion_plan(prepare(TRSM, defines=defines, params=sizes), sizes, 128, leaf=leaf)
    compiled = compile_region(TRSM, variant=plan.variant, params=sizes, defines=defines)
    source = compiled.program.source
    leaf_kernels = [k for k, o in plan.variant.to_json()["kernels"].items()
                    if o.get("lanes") == lanes]
    assert leaf_kernels and SOLVE_LEAF.lanes == 32
    ctype = "double" if dtype == "float64" else "float"
    for k in leaf_kernels:
        code = source.split(f"trsm_kernel{k}(")[1].split("\n}\n")[0]
        assert f"block=({lanes * columns}, 1, 1)" in str(compiled.program.launches[int(k)])
        assert "const int pg_tid = threadIdx.x;" in code  # copies over all lanes
        row = int(re.search(rf"{ctype} b_sh\[\d+\]\[(\d+)\];", code)[1])
        assert row >= columns
        # a warp's lanes: 32 / lanes columns, each reading `lanes` consecutive rows
        words = 2 if dtype == "float64" else 1
        banks = {(words * (row * r + c) + w) % 32
                 for c in range(32 // lanes) for r in range(lanes) for w in range(words)}
        phases = 2 if dtype == "float64" else 1  # 8-byte elements: two half-warp phases
        assert len(banks) * phases >= 32 * words, (row, banks)


def test_a_leaf_on_lanes_runs_right_looking_exactly():
    """A solve's leaf on lanes is turned right-looking (schedule/lane_loops.py): row k
    divided by lane 0, then the rows below it updated by the lanes in turn -- a loop the
    prover shows carries no dependence -- with a __syncwarp before and after; no shuffle.
    The same operations in the same order for every element: bit-exact in double.
    (The column in shared memory, SOLVE_LEAF; in the lanes' registers, the default up to
    128 rows: tests/test_lane_registers.py.)"""
    from polygpu.search.recursion_plans import SOLVE_LEAF, recursion_plan

    sizes = {"m": 100, "n": 23}
    defines = ("DATA_TYPE=double",)
    plan = recursion_plan(prepare(TRSM, defines=defines, params=sizes), sizes, 32,
                          leaf=SOLVE_LEAF)
    compiled = compile_region(TRSM, variant=plan.variant, params=sizes, defines=defines)
    leaves = [k for k in compiled.kernels if k.lanes > 1]
    assert leaves and all(k.lane_dims for k in leaves)
    for k in leaves:
        # the kernel and its halves (whole and partial tiles apart)
        code = "".join(c for c in compiled.program.source.split("\n}\n") if re.search(
            rf"void (__launch_bounds__\(\d+\) )?trsm_kernel{k.index}(_whole|_partial)?\(", c))
        assert "__shfl_xor_sync" not in code
        # (the pivot row's element loaded once per lane: codegen/invariant_reads.py)
        assert re.search(r"int (c\d+) = c\d+ \+ 1 \+ pg_lane \* \(1\);\s*if \(\1 <= \d+\)\s*"
                         r"\{\s*const double pg_inv0 = b_sh[^;]+;\s*(#pragma unroll \d+\s*)?"
                         r"for \(; \1 <= \d+; \1 \+= 32 \* \(1\)\)", code), code
        assert code.count("__syncwarp(pg_mask);") >= 2
    result = check_program(compiled.program, compiled.source_scop, TRSM, sizes, seed=5,
                           defines=defines)
    assert result.ok, result.message
    assert "error 0 <=" in result.message, result.message


def test_an_update_that_cannot_turn_keeps_its_sums_split(tmp_path):
    """b[i][j] += b[i - 1][j] * a[i][k] / m: row i reads row i - 1 finished, so the
    right-looking order (each row's k-th term at step k) breaks a flow; the prover
    refuses it and the lanes split each row's sum instead -- still exact."""
    src = tmp_path / "chain.c"
    src.write_text("""\
void chain(int m, int n, float a[m][m], float b[m][n])
{
#pragma scop
  for (int i = 1; i < m; i++)
    for (int j = 0; j < n; j++)
      for (int k = 0; k < m; k++)
        b[i][j] += b[i - 1][j] * a[i][k] / m;
#pragma endscop
}
""")
    variant = Variant(tile=(8,), threads=(8,), lanes=32, registers=False, shared=False)
    compiled = _compiled(str(src), {"m": 37, "n": 23}, variant)
    (kernel,) = compiled.kernels
    assert kernel.lanes == 32 and kernel.lane_dims == ()
    assert "__shfl_xor_sync(pg_mask, pg_acc" in compiled.program.source


def test_lanes_are_checked_and_explained():
    with pytest.raises(PolygpuError, match="lanes 3 is a power of two"):
        Variant(lanes=3)
    with pytest.raises(PolygpuError, match="128 threads of 32 lanes each exceed 1024"):
        Variant(tile=(128,), threads=(128,), lanes=32)
    assert "lanes" not in Variant().to_json()
    assert Variant.from_json(json.dumps(LANES.to_json())) == LANES
    # register copies would be every lane's own
    with pytest.raises(PolygpuError, match='keeps no register copies .* needs "registers": '
                                           'false'):
        compile_region(MV, variant=Variant(tile=(8,), threads=(8,), lanes=32),
                       params={"n": 37})
    # device steps split their one-thread steps by themselves
    with pytest.raises(PolygpuError, match="lanes 4 .* is for launched kernels"):
        compile_region(TRISOLV, variant=Variant(tile=(8,), threads=(8,), lanes=4,
                                                shared=False, registers=False,
                                                device_steps=True), params={"n": 37})


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_nvcc_compiles_the_lanes_code(tmp_path):
    compiled = compile_region(MV, variant=LANES, params={"n": 100})
    src = tmp_path / "mv.cu"
    src.write_text(compiled.program.source)
    done = subprocess.run(["nvcc", "-arch=sm_90", "-std=c++17", "-cubin", str(src), "-o",
                           str(tmp_path / "mv.cubin")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
