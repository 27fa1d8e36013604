"""A thread's register copies spread over its lanes (``Variant.lanes`` with
``full_unroll``, codegen/lane_registers.py): a solve leaf's column in a warp's registers,
each lane owning rows l, l + L, ...; the divided row reaching the other lanes by
``__shfl_sync``.  Exact on the emulator at odd sizes and in several lane counts, the
code's shape asserted, ptxas's report free of local memory.  (The emitter's refusals --
a statement in the loop the lanes share that would need another lane's element -- are
defensive and untested: no kernel of the catalog reaches them -- the prover's proof
that the loop is lane-parallel already excludes most reads that would.)"""

from __future__ import annotations

import re
import shutil
from dataclasses import replace

import pytest

from polygpu.pipeline import compile_region, prepare
from polygpu.runtime.check import check_program
from polygpu.schedule.variant import Variant
from polygpu.search.recursion_plans import recursion_plan
from tests.test_full_unroll import _leaf_code as _code
from tests.test_full_unroll import _ptxas_report, _recursive

TRSM = "kernels/trsm.c"
TRSM_UPPER = "kernels/trsm_upper.c"
DOUBLE = ("DATA_TYPE=double",)


def _leaf(lanes: int, columns: int = 8) -> Variant:
    return Variant(tile=(columns,), threads=(columns,), lanes=lanes, full_unroll=True,
                   time_tile=0)


@pytest.mark.parametrize(("m", "stop", "lanes"), [(100, 32, 32), (37, 16, 8), (100, 64, 16)])
def test_a_leafs_column_is_spread_over_the_lanes_registers_and_exact(m, stop, lanes):
    """Each leaf: the column in ``b_reg`` of ceil(stop / lanes) slots a lane, its
    division on the row's owner, the rows below it updated in an unrolled loop over a
    lane's slots with the divided value shuffled in once; no shared copy of B and no
    __syncwarp.  Bit-exact in double at odd sizes (the loop nest's operations, in its
    order per element)."""
    sizes = {"m": m, "n": 23}
    compiled = _recursive(TRSM, sizes, stop, DOUBLE, leaf=_leaf(lanes))
    leaves = [k for k in compiled.kernels if k.unrolled]
    assert len(leaves) == -(-m // stop) and all(k.lanes == lanes for k in leaves)
    for k in leaves:
        code = _code(compiled.program.source, k.index)
        rows = max(int(x) for x in re.findall(r"b_reg\[(\d+)\]\[1\];", code))
        assert rows == -(-min(stop, m) // lanes) or rows < -(-stop // lanes), code
        assert "b_sh" not in code and "__syncwarp" not in code
        assert re.search(rf"if \(pg_lane == \(\(\(c\d+\) - \(\d+\)\) % {lanes}\)\)\s*"
                         r"b_reg\[[^=]+= \(b_reg\[[^/]+/ ", code), code
        assert re.search(rf"const double pg_inv0 = __shfl_sync\(pg_mask, b_reg\[[^,]+, "
                         rf"\([^,]+% {lanes}\), {lanes}\);\s*#pragma unroll\s*"
                         r"for \(int pg_slot = 0;", code), code
    result = check_program(compiled.program, compiled.source_scop, TRSM, sizes, seed=5,
                           defines=DOUBLE)
    assert result.ok, result.message
    assert "error 0 <=" in result.message, result.message


def test_the_spread_leaf_computes_what_the_lanes_leaf_does_in_float():
    sizes = {"m": 77, "n": 19}
    for leaf in (_leaf(32, 4), _leaf(4, 2)):
        compiled = _recursive(TRSM, sizes, 32, leaf=leaf)
        result = check_program(compiled.program, compiled.source_scop, TRSM, sizes, seed=2)
        assert result.ok, result.message


def test_a_backward_solve_fetches_each_remote_row_and_is_exact():
    """The upper solve's leaves stay left-looking (the prover refuses the turn): no loop
    is shared, every update runs on its row's owner with the other row's element
    shuffled in first -- slow, but exact."""
    sizes = {"m": 100, "n": 23}
    compiled = _recursive(TRSM_UPPER, sizes, 32, leaf=_leaf(8))
    leaves = [k for k in compiled.kernels if k.unrolled]
    assert leaves and not any(k.lane_dims for k in leaves)
    for k in leaves:
        code = _code(compiled.program.source, k.index)
        assert "pg_lane_value0 = __shfl_sync(" in code and "pg_slot" not in code
    result = check_program(compiled.program, compiled.source_scop, TRSM_UPPER, sizes,
                           seed=5)
    assert result.ok, result.message


@pytest.mark.parametrize(("spec", "sizes", "variant"), [
    ("kernels/mv.c", {"n": 37}, Variant(tile=(8,), threads=(8,), time_tile=0)),
    ("kernels/mm.c", {"n": 13}, Variant(tile=(4, 4), threads=(4, 4), time_tile=0))])
def test_any_kernel_on_lanes_with_spread_registers_is_exact(spec, sizes, variant):
    """Not only a leaf: a kernel whose written copies are spread (each thread's few
    elements, lane 0 owning them) runs its statements on the owners, exactly."""
    compiled = compile_region(spec, variant=replace(variant, lanes=4, full_unroll=True,
                                                    specialize=True), params=sizes)
    assert "__shfl_sync" in compiled.program.source or \
        "if (pg_lane == " in compiled.program.source
    result = check_program(compiled.program, compiled.source_scop, spec, sizes, seed=3)
    assert result.ok, result.message


def test_the_memory_plan_says_how_a_copy_is_spread():
    sizes = {"m": 100, "n": 23}
    compiled = _recursive(TRSM, sizes, 64, leaf=_leaf(32))
    (leaf, *_) = [k for k in compiled.kernels if k.unrolled]
    (copy,) = [b for b in compiled.memory.buffers_of(leaf.index) if b.space == "register"]
    assert (copy.lanes, copy.lane_dimension, copy.row_extents) == (32, 0, (2, 1))
    assert copy.to_json()["lanes"] == 32


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_nvcc_keeps_the_spread_column_in_registers(tmp_path):
    """ptxas's report: a 64-row leaf at 512 columns on 32 and on 8 lanes, no local
    memory (every slot index a constant of the unrolled loops)."""
    for lanes in (32, 8):
        compiled = _recursive(TRSM, {"m": 256, "n": 512}, 64, leaf=_leaf(lanes))
        (leaf, *_) = [k for k in compiled.kernels if k.unrolled]
        report = _ptxas_report(tmp_path, compiled.program.source, leaf.index)
        assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in \
            report, report


def test_the_model_spreads_a_leaf_of_up_to_128_rows_over_the_lanes_registers():
    """recursion_plan's default solve leaf: the lanes' registers up to REGISTER_ROWS
    (measured faster on the H100), shared memory beyond (a 256-row leaf unrolled whole
    would copy its statements past thread_ast.MAX_UNROLLED)."""
    from polygpu.search.recursion_plans import REGISTER_LEAF, REGISTER_ROWS, SOLVE_LEAF

    sizes = {"m": 300, "n": 64}
    prepared = prepare(TRSM, params=sizes)
    assert REGISTER_ROWS == 128
    for stop, leaf in ((64, REGISTER_LEAF), (128, REGISTER_LEAF), (256, SOLVE_LEAF)):
        plan = recursion_plan(prepared, sizes, stop)
        leaves = [o for o in plan.variant.to_json()["kernels"].values() if o.get("lanes")]
        assert leaves and all(o.get("full_unroll", False) == leaf.full_unroll and
                              o.get("registers", True) == leaf.registers for o in leaves)


def test_a_lanes_share_of_a_spread_copy_is_its_slots_times_the_other_extents():
    """The register budget (MAX_REGISTERS elements a thread) counts what one lane holds:
    a 40 x 100 copy on 32 lanes spreads its 100 (the longest dimension) as 4 slots, 160
    elements a lane -- over budget although 4 000 / 32 would fit."""
    from polygpu.memory.footprints import Box
    from polygpu.memory.placement import MAX_REGISTERS, _lane_dimension, _lane_size

    box = Box(base=(), stride=(1, 1), extents=(40, 100))
    assert _lane_dimension(box) == 1
    assert _lane_size(box, 32) == 160 > MAX_REGISTERS >= box.size // 32
    assert _lane_size(Box(base=(), stride=(1, 1), extents=(64, 1)), 32) == 2
    assert _lane_size(box, 1) == 4000
