"""Snapshots of entry values (transform/snapshot.py): in-place trmm's reads of rows not
yet updated read a copy taken first, so its row loop becomes parallel.  Literal isl
objects in the style of islpy's tests; the proof refuses a wrong snapshot."""

from __future__ import annotations

import json
from dataclasses import replace

import islpy as isl
import pytest

from polygpu.cli import main
from polygpu.frontend import load
from polygpu.model.build import build_scop
from polygpu.pipeline import compile_variant, prepare
from polygpu.schedule.variant import Variant
from polygpu.transform import snapshot as sn

TRMM = "kernels/polybench/trmm.c"
SEIDEL_1D = """
void s(int n, double A[n]) {
#pragma scop
  for (int i = 1; i < n - 1; i++)
    A[i] = A[i - 1] + A[i + 1];
#pragma endscop
}
"""


@pytest.fixture(scope="module")
def trmm():
    return build_scop(load(TRMM))


def test_trmm_reads_of_later_rows_go_to_a_snapshot(trmm):
    out = sn.snapshot_inputs(trmm)
    assert [t.to_json()["reads"] for t in out.taken] == [["S0#1 B[k][j]"]]
    t = out.taken[0]
    assert (t.array, t.name, t.copy) == ("B", "pg_s_B", "S2")
    copy = out.scop.statement("S2")
    assert copy.domain.is_equal(isl.Set(
        "[m, n] -> { S2[pg_c0, pg_c1] : m > 0 and n > 0 and 0 < pg_c0 < m and "
        "0 <= pg_c1 < n }"))
    assert copy.schedule.is_equal(isl.Map(
        "[m, n] -> { S2[pg_c0, pg_c1] -> [0, pg_c0, 0, pg_c1, 0, 0, 0] : m > 0 and n > 0 "
        "and 0 < pg_c0 < m and 0 <= pg_c1 < n }"))
    assert str(copy.body) == "pg_s_B[pg_c0][pg_c1] = B[pg_c0][pg_c1]"
    s0 = out.scop.statement("S0")
    assert str(s0.body) == "B[i][j] += (A[k][i] * pg_s_B[k][j])"
    # every original statement moved one position on, after the copy
    assert s0.schedule.is_equal(isl.Map(
        "[m, n] -> { S0[i, j, k] -> [1, i, 0, j, 0, k, 0] : m > 0 and n > 0 and "
        "0 <= i < m and 0 <= j < n and i < k < m }"))
    assert out.scop.array("pg_s_B").kind == "scratch"
    assert sn.verify_snapshot(out.scop, t) is None


def test_only_reads_with_carried_anti_dependences(trmm):
    """B[i][j] (the += target's read) sees values S0 wrote earlier: not an entry read.
    gemm's C[i][j] *= beta sees entry values, but is overwritten in the same (i, j):
    nothing to gain, nothing taken."""
    assert [a.text for a in sn.entry_reads(trmm, "B")] == ["B[k][j]"]
    gemm = build_scop(load("kernels/polybench/gemm.c"))
    assert sn.entry_reads(gemm, "C") == []
    assert prepare("kernels/polybench/gemm.c").snapshot is None


def test_proof_refuses_a_read_the_region_writes_first(tmp_path):
    """Seidel-like A[i] = A[i-1] + A[i+1]: A[i+1] sees entry values (taken), A[i-1]
    the previous iteration's write -- redirecting it too is refused by the proof."""
    path = tmp_path / "s.c"
    path.write_text(SEIDEL_1D)
    scop = build_scop(load(str(path)))
    assert [a.text for a in sn.entry_reads(scop, "A")] == ["A[(i + 1)]"]
    both = [a for a in scop.accesses if a.kind == "read"]
    new, record = sn._snapshot(scop, scop.array("A"), both)
    assert "writes before it" in sn.verify_snapshot(new, record)
    # and a copy that runs last sees the region's writes
    ok = [a for a in scop.accesses if a.text == "A[(i + 1)]"]
    new2, record2 = sn._snapshot(scop, scop.array("A"), ok)
    assert sn.verify_snapshot(new2, record2) is None
    late = replace(new2, statements=tuple(
        replace(s, schedule=s.schedule.apply_range(isl.Map(
            "{ [a, b, c] -> [a + 10, b, c] }"))) if s.name == record2.copy else s
        for s in new2.statements))
    assert "runs after a write" in sn.verify_snapshot(late, record2)


def test_trmm_plan_maps_rows_and_columns():
    p = prepare(TRMM)
    assert p.snapshot is not None and p.snapshot.taken
    c = compile_variant(p, Variant(), None)
    update = next(k for k in c.kernels if "S0" in k.statements)
    assert update.n_mapped == 2  # i and j on the grid, k the reduction inside
    assert c.program.launches[0].kernel.endswith("kernel0")  # the copy, first


@pytest.mark.parametrize("path, sizes", [(TRMM, {"m": 37, "n": 23}),
                                         (TRMM, {"m": 1, "n": 5}),
                                         ("kernels/trmm.c", None)])
@pytest.mark.parametrize("variant", [None, {"tile": [16, 16], "threads": [4, 16],
                                            "jam": True, "time_tile": 8, "prefetch": True}])
def test_trmm_exact_on_cpu(path, sizes, variant, capsys):
    if sizes is None:
        entry = json.load(open("kernels/catalog.json"))["trmm.c"]
        sizes = entry["small"]
    args = ["check", path, *[x for k, v in sizes.items() for x in ("-p", f"{k}={v}")],
            "--backend", "cpu"]
    if variant:
        args += ["--variant", json.dumps(variant)]
    assert main(args) == 0, capsys.readouterr()
