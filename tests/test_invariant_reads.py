"""Shared-memory reads that do not move with a loop, loaded once before it
(codegen/invariant_reads.py): which reads qualify, which must not (an instance may write
the element; the address moves; registers and global memory), and that the batched
Cholesky's update and substitutions printed that way stay exact."""

from __future__ import annotations

import re

import pytest

from polygpu.codegen import invariant_reads
from polygpu.codegen.expressions import BufferView, Printer
from polygpu.pipeline import compile_variant, prepare
from polygpu.runtime.check import check_program
from polygpu.schedule.variant import Variant

CHOLESKY = "kernels/batched_cholesky.c"


def _statement(tmp_path, first: str):
    path = tmp_path / "k.c"
    path.write_text("void k(int n, float a[n][n], float b[n])\n{\n#pragma scop\n"
                    "  for (int i = 0; i < n; i++)\n"
                    f"    for (int j = {first}; j < n; j++)\n"
                    "      a[i][j] -= a[i][0] * b[j];\n#pragma endscop\n}\n")
    (stmt,) = prepare(str(path), params={"n": 9}).analysis.scop.statements
    return stmt


def _printer(buffers: dict[str, BufferView]) -> Printer:
    from polygpu.frontend import ir
    shapes = {"a": (ir.IntVar("n"), ir.IntVar("n")), "b": (ir.IntVar("n"),)}
    return Printer(shapes, frozenset(), {"i": "c0", "j": "c1"}, buffers=buffers)


def _view(name: str, dims: int) -> BufferView:
    return BufferView(name, ("0",) * dims, (1,) * dims, (9,) * dims)


SHARED = {"a": _view("a_sh", 2), "b": _view("b_sh", 1)}


def test_a_read_no_instance_writes_is_loaded_once_and_one_an_instance_writes_is_not(
        tmp_path):
    """``a[i][0]`` along ``j``: from ``j = 1`` no instance writes it; from ``j = 0`` the
    first one does (the later ones must see the new value)."""
    hoisted = invariant_reads.hoistable(_statement(tmp_path, "1"), _printer(SHARED), "c1")
    assert [str(r) for r in hoisted] == ["a[i][0]"]
    assert invariant_reads.hoistable(_statement(tmp_path, "0"), _printer(SHARED), "c1") == []


def test_a_read_whose_address_moves_with_the_loop_stays(tmp_path):
    """Along ``i`` the row factor moves; ``b[j]`` does not, and nothing writes ``b``."""
    hoisted = invariant_reads.hoistable(_statement(tmp_path, "1"), _printer(SHARED), "c0")
    assert [str(r) for r in hoisted] == ["b[j]"]


def test_registers_and_global_memory_are_left_as_written(tmp_path):
    """Reads of them, and loops storing to them: the compiler knows those stores
    miss shared memory."""
    stmt = _statement(tmp_path, "1")
    registers = {"a": _view("a_reg", 2), "b": _view("b_reg", 1)}
    assert invariant_reads.hoistable(stmt, _printer(registers), "c1") == []
    assert invariant_reads.hoistable(stmt, _printer({}), "c1") == []
    # a loop storing to global memory: nvcc hoists b[j] itself (__restrict__)
    assert invariant_reads.hoistable(stmt, _printer({"b": SHARED["b"]}), "c0") == []


def test_the_register_replaces_every_read_of_the_element(tmp_path):
    stmt = _statement(tmp_path, "1")
    (ref,) = invariant_reads.hoistable(stmt, _printer(SHARED), "c1")
    body = invariant_reads.with_registers(stmt.body, [(ref, "pg_inv0")])
    assert _printer(SHARED).assign(body) == \
        "a_sh[(c0) - (0)][(c1) - (0)] -= (pg_inv0 * b_sh[(c1) - (0)]);"


@pytest.mark.parametrize("dtype", ["float", "double"])
def test_the_choleskys_pivots_and_row_factors_are_loaded_once_and_stay_exact(dtype):
    """The resident batched Cholesky (n = 17, a block of 4 x 8 threads): the
    division's pivot ``a[k][k]``, the trailing update's row factor ``a[i][k]`` and the
    forward substitution's ``b[j]`` each in a register before their loops, read under
    the loop's own condition; the program checked against the loop nest."""
    params = {"nb": 37, "n": 17}
    defines = ("DATA_TYPE=double", "SQRT_FUN=sqrt") if dtype == "double" else ()
    prepared = prepare(CHOLESKY, defines=defines, params=params)
    batch = next(k for k, tr in enumerate(prepared.candidates)
                 if tr.host is not None and tr.host.kind == "batch")
    variant = Variant(candidate=batch, tile=(32, 32), threads=(4, 8), shared=False,
                      device_steps=True, resident=True, specialize=True)
    compiled = compile_variant(prepared, variant, params)
    steps = compiled.program.source.split("_steps(")[-1]
    loaded = re.findall(rf"if \(([^\n]+)\)\s*\{{\s*const {dtype} pg_inv0 = ([^;]+);", steps)
    reads = {read for _, read in loaded}
    assert reads == {"pg_res_b[0][(c5) - (0)]",
                     "pg_res_a[0][(h2) - (0)][(h2) - (0)]",
                     "pg_res_a[0][((h2 + ty + 4 * ry + 1)) - (0)][(h2) - (0)]"}
    assert "-= (pg_inv0 * pg_res_a[0][((h2 + tx + 8 * rx + 1)) - (0)][(h2) - (0)])" in steps
    # each load under its loop's condition, the loop then starting where it stands
    for cond, _ in loaded:
        it = re.match(r"(\w+) <=", cond)[1]
        assert f"for (; {cond}; {it} +=" in steps
    result = check_program(compiled.program, compiled.source_scop, CHOLESKY, params,
                           seed=11, defines=defines)
    assert result.ok, result.message
