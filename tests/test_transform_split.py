"""Index-set splitting (polygpu/transform/split.py): where a statement is cut, its
pieces and their order as isl literals, the refusals, the proof (it rejects pieces in
an order that changes the dataflow), the pipeline hook, and whole programs checked on
the emulator against the original."""

from __future__ import annotations

import textwrap
from dataclasses import replace
from pathlib import Path

import islpy as isl
import pytest

from polygpu.frontend import load
from polygpu.model.analysis import analyze
from polygpu.model.build import build_scop
from polygpu.model.dependences import compute_dependences
from polygpu.pipeline import Prepared, compile_region, compile_variant, prepare
from polygpu.runtime.check import check_program
from polygpu.schedule.candidates import candidates
from polygpu.schedule.variant import Variant
from polygpu.transform.split import (
    cuts_of,
    split_dependences,
    split_statement,
    split_statements,
    verify_split,
)

ROOT = Path(__file__).resolve().parent.parent
FLOYD = str(ROOT / "kernels/polybench/floyd_warshall.c")


def c_file(tmp_path: Path, body: str, params: str) -> str:
    path = tmp_path / "k.c"
    path.write_text(f"void k({params})\n{{\n#pragma scop\n{textwrap.dedent(body)}\n"
                    "#pragma endscop\n}\n")
    return str(path)


def splitting_of(spec: str):
    scop = build_scop(load(spec))
    return scop, split_statements(scop)


def same(got, text: str) -> bool:
    return got.is_equal(type(got)(text))


# x[i] += x[k]: the pivot element is written by step k and read by the rest of it
PIVOT_1D = """
    for (int k = 0; k < n; k++)
      for (int i = 0; i < n; i++)
        x[i] = x[i] + x[k];"""

# in place, transposed: the read meets the write on the diagonal
TRANSPOSE_ADD = """
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++)
        A[i][j] = A[i][j] + A[j][i];"""

# Gauss-Jordan-like: row k, column k and the pivot A[k][k] all meet the write
GAUSS_JORDAN = """
    for (int k = 0; k < n; k++)
      for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
          A[i][j] = A[i][j] - A[i][k] * A[k][j] / A[k][k];"""


# --- golden splits -------------------------------------------------------------------


def test_floyd_warshall_is_cut_at_the_pivot_row_and_column():
    scop, sp = splitting_of(FLOYD)
    (s,) = sp.split
    assert (s.statement, s.shared, s.cuts, s.freed) == ("S0", ("k",), ("i = k", "j = k"),
                                                        ("i", "j"))
    assert sp.refused == ()
    # nine pieces, in an order that keeps every value: what reads row/column k before
    # step k writes it runs first, the pivot i == j == k in the middle
    want = {
        "i < k, j < k": "0 <= i < k and 0 <= j < k",
        "i < k, j = k": "0 <= i < k and j = k",
        "i < k, j > k": "0 <= i < k and k < j < n",
        "i = k, j < k": "i = k and 0 <= j < k",
        "i = k, j = k": "i = k and j = k",
        "i = k, j > k": "i = k and k < j < n",
        "i > k, j < k": "k < i < n and 0 <= j < k",
        "i > k, j = k": "k < i < n and j = k",
        "i > k, j > k": "k < i < n and k < j < n",
    }
    assert [p.where for p in s.pieces] == list(want)
    assert [p.name for p in s.pieces] == [f"S0_{k}" for k in range(9)]
    for p in s.pieces:
        text = f"[n] -> {{ {p.name}[k, i, j] : 0 <= k < n and {want[p.where]} }}"
        assert same(p.domain, text), p.where
        assert same(sp.scop.statement(p.name).domain, text)
    # the pieces share loop k and run one after another inside it
    new = sp.scop
    assert [st.name for st in new.statements] == [p.name for p in s.pieces]
    assert same(new.statement("S0_4").schedule,
                "[n] -> { S0_4[k, i, j] -> [0, k, 4, i, 0, j, 0] : 0 <= k < n and i = k "
                "and j = k }")
    assert new.loops[0].statements == tuple(p.name for p in s.pieces)
    assert [new.loops[lid].iterator for lid in new.statement("S0_8").loops] == ["k", "i", "j"]
    assert len(new.loops) == 1 + 2 * 9
    # the body and accesses are the statement's, restricted to the piece
    piece = new.statement("S0_7")
    assert piece.body == scop.statement("S0").body
    assert same(piece.accesses[1].relation,
                "[n] -> { S0_7[k, i, j] -> path[i, k] : 0 <= k < n and k < i < n and j = k }")
    assert verify_split(scop, new, s) is None


def test_split_dependences_are_those_of_the_split_program():
    scop, sp = splitting_of(FLOYD)
    fresh = compute_dependences(sp.scop)
    derived = sp.dependences
    assert [(d.kind, d.source, d.sink) for d in derived.items] == \
        [(d.kind, d.source, d.sink) for d in fresh.items]
    assert all(a.relation.is_equal(b.relation)
               for a, b in zip(derived.items, fresh.items, strict=True))
    # within one step, the pivot's value flows to the rest of row k
    (flow,) = [d for d in derived.items if (d.kind, d.source, d.sink) == (
        "flow", "S0_4", "S0_5")]
    assert same(flow.relation, "[n] -> { S0_4[k, k, k] -> S0_5[k, k, j] : 0 <= k < n "
                               "and k < j < n }")


def test_one_dimensional_pivot(tmp_path):
    _, sp = splitting_of(c_file(tmp_path, PIVOT_1D, "int n, float x[n]"))
    (s,) = sp.split
    assert (s.shared, s.cuts, s.freed) == (("k",), ("i = k",), ("i",))
    assert [p.where for p in s.pieces] == ["i < k", "i = k", "i > k"]
    for p, text in zip(s.pieces, ("0 <= i < k", "i = k", "k < i < n"), strict=True):
        assert same(p.domain, f"[n] -> {{ {p.name}[k, i] : 0 <= k < n and {text} }}")


def test_pieces_are_ordered_by_their_dependences_not_their_text(tmp_path):
    """A[i][j] += A[j][i]: above the diagonal reads elements below it before they are
    written, below reads them after -- so the piece j > i runs before j < i, which
    comes first among the pieces as enumerated; the diagonal depends on nothing."""
    _, sp = splitting_of(c_file(tmp_path, TRANSPOSE_ADD, "int n, float A[n][n]"))
    (s,) = sp.split
    assert (s.shared, s.cuts, s.freed) == ((), ("j = i",), ("i",))
    assert [p.where for p in s.pieces] == ["j = i", "j > i", "j < i"]
    for p, text in zip(s.pieces, ("j = i", "i < j < n", "0 <= j < i"), strict=True):
        assert same(p.domain, f"[n] -> {{ {p.name}[i, j] : 0 <= i < n and {text} }}")
    assert same(sp.scop.statement("S0_2").schedule,
                "[n] -> { S0_2[i, j] -> [2, i, 0, j, 0] : 0 <= i < n and 0 <= j < i }")


def test_gauss_jordan_pivot_gives_the_same_cuts_once(tmp_path):
    spec = c_file(tmp_path, GAUSS_JORDAN, "int n, float A[n][n]")
    scop = build_scop(load(spec))
    # A[i][k] meets the write at j == k, A[k][j] at i == k, A[k][k] at both: two cuts
    assert [str(h) for h in cuts_of(scop.statement("S0"))] == [
        str(isl.Aff("[n] -> { S0[k, i, j] -> [(i - k)] }")),
        str(isl.Aff("[n] -> { S0[k, i, j] -> [(j - k)] }"))]
    (s,) = split_statements(scop).split
    assert len(s.pieces) == 9 and s.freed == ("i", "j")


def test_two_statements_of_one_nest_are_split_each_in_its_own_loops(tmp_path):
    """Gauss-Jordan with the pivot row normalised first: both updates meet their write
    at j == k; the second is cut inside loop i, after the statement it shares i with."""
    spec = c_file(tmp_path, """
        for (int k = 0; k < n; k++) {
          for (int j = 0; j < n; j++)
            A[k][j] = A[k][j] / A[k][k];
          for (int i = 0; i < n; i++)
            if (i != k) {
              b[i] = b[i] - A[i][k] * b[k];
              for (int j = 0; j < n; j++)
                A[i][j] = A[i][j] - A[i][k] * A[k][j];
            }
        }""", "int n, float A[n][n], float b[n]")
    scop, sp = splitting_of(spec)
    assert [(s.statement, s.shared, s.cuts) for s in sp.split] == [
        ("S0", ("k",), ("j = k",)), ("S2", ("k", "i"), ("j = k",))]
    new = sp.scop
    assert [st.name for st in new.statements] == ["S0_0", "S0_1", "S0_2", "S1", "S2_0",
                                                 "S2_1", "S2_2"]
    # S1 moved back behind S0's pieces; S2's pieces follow S1 inside loop i
    assert same(new.statement("S1").schedule, "[n] -> { S1[k, i] -> [0, k, 3, i, 0, 0, 0] : "
                "0 <= k < n and 0 <= i < n and i != k }")
    assert same(new.statement("S2_2").schedule, "[n] -> { S2_2[k, i, j] -> [0, k, 3, i, 3, j, "
                "0] : 0 <= k < n and 0 <= i < n and i != k and k < j < n }")
    fresh = compute_dependences(new)
    assert len(fresh.items) == len(sp.dependences.items) and all(
        a.relation.is_equal(b.relation)
        for a, b in zip(fresh.items, sp.dependences.items, strict=True))
    # the split region itself (the pipeline keeps the original here: its scheduler
    # already runs i in parallel) computes what the original does
    an = analyze(new, sp.dependences)
    found = candidates(an, limit=1)
    prepared = Prepared(spec, an, found, scop, None, sp)
    program = compile_variant(prepared, Variant(), {"n": 9}).program
    result = check_program(program, scop, spec, {"n": 9}, seed=3)
    assert result.ok, result.message


# --- refusals ------------------------------------------------------------------------


def test_a_split_that_frees_nothing_is_left_unsplit(tmp_path):
    # x[1] meets the write at i == 1, but the piece i > 1 still carries x[i - 1]
    scop, sp = splitting_of(c_file(tmp_path, """
        for (int i = 1; i < n; i++)
          x[i] = x[i - 1] + x[1];""", "int n, float x[n]"))
    assert sp.split == () and sp.scop is scop
    (r,) = sp.refused
    assert r.statement == "S0" and "no piece has a parallel loop S0 lacks" in r.reason


@pytest.mark.parametrize("body", [
    # the read is always the written element (x op= ...) or never is (a recurrence)
    """
    for (int i = 0; i < n; i++)
      for (int j = 1; j < n; j++)
        A[i][j] = A[i][j] + A[i][j - 1];""",
    # another array
    """
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++)
        A[i][j] = B[j][i];""",
])
def test_statements_whose_reads_never_meet_their_write_on_a_hyperplane(tmp_path, body):
    scop, sp = splitting_of(c_file(tmp_path, body, "int n, float A[n][n], float B[n][n]"))
    assert sp.split == () and sp.refused == () and sp.scop is scop


def test_strided_loops_are_refused(tmp_path):
    scop, sp = splitting_of(c_file(tmp_path, """
        for (int k = 0; k < n; k += 2)
          for (int i = 0; i < n; i++)
            x[i] = x[i] + x[k];""", "int n, float x[n]"))
    assert sp.split == () and sp.scop is scop
    assert [r.reason for r in sp.refused] == ["the region has strided loops"]


# --- the proof -----------------------------------------------------------------------


def test_the_proof_refuses_pieces_in_an_order_that_changes_the_dataflow():
    scop = build_scop(load(FLOYD))
    s = scop.statement("S0")
    cuts = cuts_of(s)
    good, record = split_statement(scop, "S0", cuts, 1, list(range(9)))
    assert verify_split(scop, good, record) is None
    # the pivot i == j == k first: the rest of row k before it then reads the pivot's
    # new value instead of the one from step k - 1
    order = [4, 0, 1, 2, 3, 5, 6, 7, 8]
    bad, record = split_statement(scop, "S0", cuts, 1, order)
    why = verify_split(scop, bad, record)
    assert why is not None and why.startswith("the values of path flow as")
    # and its dependences are not the original's cut into pieces
    assert split_dependences(scop, bad, record, analyze(scop).dependences) is None
    # all in one iteration of nothing (depth 0): step k + 1's pieces would run before
    # the last ones of step k
    flat, record = split_statement(scop, "S0", cuts, 0, list(range(9)))
    assert verify_split(scop, flat, record) is not None


def test_the_proof_refuses_pieces_that_do_not_partition_the_statement():
    scop = build_scop(load(FLOYD))
    good, record = split_statement(scop, "S0", cuts_of(scop.statement("S0")), 1,
                                   list(range(9)))
    (first, second, *_) = record.pieces
    # the first piece grown over the second: they overlap
    grown = good.statement(first.name)
    wider = second.domain.set_tuple_name(first.name).union(grown.domain)
    tampered = replace(good, statements=tuple(
        replace(st, domain=wider) if st.name == first.name else st
        for st in good.statements))
    assert "overlaps" in verify_split(scop, tampered, record)


# --- the pipeline --------------------------------------------------------------------


def test_prepare_splits_only_where_the_scheduler_has_nothing_parallel(tmp_path):
    p = prepare(FLOYD)
    assert [s.name for s in p.source_scop.statements] == ["S0"]  # the original model
    assert len(p.analysis.scop.statements) == 9
    best = p.candidates[0]
    assert best.host is not None and best.host.names == ("h0",)
    assert all(k.n_space == 2 for k in best.kernels if "S0_0" in k.statements)
    assert p.splitting.split[0].statement == "S0"
    # A[i][j] += A[j][i] splits, but the scheduler already runs j in parallel: unsplit
    p = prepare(c_file(tmp_path, TRANSPOSE_ADD, "int n, float A[n][n]"))
    assert p.splitting is None and p.analysis.scop is p.source_scop


@pytest.mark.parametrize("body, params, sizes, variant", [
    (None, None, {"n": 13}, Variant()),
    (None, None, {"n": 9}, Variant(device_steps=True)),
    (PIVOT_1D, "int n, float x[n]", {"n": 17}, Variant()),
    (GAUSS_JORDAN, "int n, float A[n][n]", {"n": 9}, Variant()),
])
def test_split_programs_check_on_the_emulator(tmp_path, body, params, sizes, variant):
    spec = FLOYD if body is None else c_file(tmp_path, body, params)
    compiled = compile_region(spec, variant=variant)
    assert compiled.splitting is not None and compiled.splitting.split
    assert compiled.transformation.host is not None
    result = check_program(compiled.program, compiled.source_scop, spec, sizes, seed=5)
    assert result.ok, result.message
