"""Register buffers copy only live values (polygpu/memory/liveness.py): no load of an
element every read of which follows a write in the kernel, no store of a scratch array
nobody reads afterwards -- and the kernels still compute what the loops compute."""

from __future__ import annotations

import pytest

from polygpu.pipeline import compile_region, compile_variant, prepare
from polygpu.runtime.check import check_program
from polygpu.schedule.variant import Variant

L2 = "kernels/allpairs/l2dist.c"
# l2dist's tuned shape, register-tiled 8 x 4 points a thread
L2_VARIANT = Variant(tile=(32, 32), threads=(8, 8), jam=True, time_tile=16, chunk=4,
                     prefetch=True)


def _registers(c) -> dict[str, tuple[bool, bool]]:
    return {b.array: (b.reads is not None, b.writes is not None)
            for b in c.memory.buffers if b.space == "register"}


def test_accumulator_zeroed_in_the_kernel_is_not_loaded_and_the_temporary_never_touches_dram():
    c = compile_region(L2, variant=L2_VARIANT)
    # D[i][j] = 0 comes first: no load, but the caller reads D: stored.  The scalar t,
    # expanded to scratch pg_x_t[i][j], is written and read in one iteration: neither.
    assert _registers(c) == {"D": (False, True), "pg_x_t": (False, False)}
    src = c.program.source
    assert "pg_x_t[" not in src and "pg_x_t_reg[" in src
    assert "= D[" not in src and "D[" in src


def test_reads_of_values_from_before_the_kernel_are_still_loaded():
    # c += a b reads c before writing it; gemm's C *= beta too
    assert _registers(compile_region("kernels/mm.c"))["c"] == (True, True)
    assert _registers(compile_region("kernels/polybench/gemm.c"))["C"] == (True, True)
    # an argument whose value the caller reads stays stored even when not loaded
    regs = _registers(compile_region("kernels/polybench/gesummv.c"))
    assert regs["y"] == (False, True) and regs["tmp"] == (False, True)


def test_expanded_temporary_read_by_a_later_statement_is_stored():
    # doitgen's sum[p] is an argument, expanded to pg_x_sum[r][q][p]: the copy-back
    # statements (another kernel) read it, so the kernel that fills it stores it
    regs = _registers(compile_region("kernels/polybench/doitgen.c"))
    assert regs["pg_x_sum"] == (False, True)


@pytest.mark.parametrize("sizes", [{"n1": 13, "n2": 7, "d": 9}, {"n1": 37, "n2": 33, "d": 17}])
def test_kernels_without_the_dead_copies_match_the_loops(sizes):
    c = compile_region(L2, variant=L2_VARIANT)
    r = check_program(c.program, c.source_scop, L2, sizes, seed=3)
    assert r.ok, r.message


def test_specialized_tuned_shape_matches_the_loops():
    sizes = {"n1": 41, "n2": 29, "d": 23}
    p = prepare(L2, params=sizes)
    v = Variant(tile=(32, 32), threads=(8, 8), jam=True, time_tile=16, unroll=4, chunk=4,
                prefetch=True, specialize=True)
    c = compile_variant(p, v, params=sizes)
    assert _registers(c) == {"D": (False, True), "pg_x_t": (False, False)}
    r = check_program(c.program, c.source_scop, L2, sizes, seed=5)
    assert r.ok, r.message
