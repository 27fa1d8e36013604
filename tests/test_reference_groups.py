"""A buffer per group of references: an array a kernel reads at places that move apart
with the block (syrk's ``A[i][k]`` and ``A[j][k]``) has no constant box for the union
of its footprints, but one per reference (memory/placement.py ``_reference_groups``).
Before, such arrays stayed in global memory, uncoalesced: syrk at EXTRALARGE took 36 ms
on the H100 against PPCG's 27 ms."""

from __future__ import annotations

import json

import pytest

from polygpu.cli import main
from polygpu.pipeline import compile_variant, prepare
from polygpu.schedule.variant import Variant

SYRK = "kernels/polybench/syrk.c"
V = {"tile": [16, 16], "threads": [4, 16], "jam": True, "time_tile": 8, "prefetch": True}


def _shared(compiled):
    return [b for b in compiled.memory.buffers if b.space == "shared"]


def test_syrk_reads_a_through_one_buffer_per_reference():
    c = compile_variant(prepare(SYRK, None, (), ()), Variant.from_json(V),
                        {"n": 2600, "m": 2000})
    shared = {b.name: b for b in _shared(c)}
    assert set(shared) == {"A_sh", "A_sh1"}
    text_of = {(a.statement, a.ref): a.text for a in c.kernel_scop.accesses}
    refs = sorted(sorted(text_of[r] for r in b.refs) for b in shared.values())
    assert refs == [["A[i][k]"], ["A[j][k]"]]
    for b in shared.values():
        # one 16-row strip of A, 8 columns of the k tile: a constant box each
        assert b.level > 0 and b.box.extents == (16, 8) and b.writes is None
        assert b.to_json()["references"]
    placement = {p.access: p.placement for p in c.memory.placements}
    assert placement["A[i][k]"] == placement["A[j][k]"] == "shared"
    text = c.program.source
    assert "A_sh[" in text and "A_sh1[" in text
    # each reference reads its own buffer: never A[...] in the update
    update = [line for line in text.splitlines() if "C_reg" in line and "+=" in line]
    assert update and all("A_sh[" in line and "A_sh1[" in line and " A[" not in line
                          for line in update)


def test_overlapping_references_share_one_buffer():
    """jacobi-2d's five neighbours overlap: one buffer per array, as before."""
    c = compile_variant(prepare("kernels/polybench/jacobi_2d.c", None, (), ()),
                        Variant.from_json(V), {"tsteps": 3, "n": 19})
    shared = _shared(c)
    assert sorted(b.name for b in shared) == ["A_sh", "B_sh"]
    assert not any(b.refs for b in shared)


def test_written_arrays_are_never_split():
    """Two buffers of one array would hold diverging copies of an element written in
    the kernel: grouping is for arrays the kernel only reads."""
    from polygpu.memory import placement
    c = compile_variant(prepare(SYRK, None, (), ()), Variant.from_json(V),
                        {"n": 2600, "m": 2000})
    k = c.kernels[0]
    assert placement._reference_groups(c.kernel_scop, k, c.analysis, "C", 4,
                                       frozenset({"S0", "S1"})) is None


@pytest.mark.parametrize("kernel, sizes", [
    ("syrk", {"n": 37, "m": 23}),
    ("syr2k", {"n": 37, "m": 23}),
    ("covariance", {"m": 29, "n": 31}),
    ("correlation", {"m": 29, "n": 31}),
])
@pytest.mark.parametrize("variant", [
    V, {"tile": [32, 32], "threads": [8, 32], "jam": True, "time_tile": 32},
])
def test_grouped_kernels_exact_on_cpu(kernel, sizes, variant, capsys):
    params = [x for k, v in sizes.items() for x in ("-p", f"{k}={v}")]
    assert main(["check", f"kernels/polybench/{kernel}.c", *params, "--variant",
                 json.dumps(variant), "--backend", "cpu"]) == 0, capsys.readouterr()
