"""Expansion of temporaries (polygpu/transform/expand.py): which arrays are expanded
along which loops, the new accesses and copy-back as isl literals, the refusals, the
proof (it rejects tampered expansions), and whole programs checked on the emulator."""

from __future__ import annotations

import textwrap
import time
from dataclasses import replace
from pathlib import Path

import islpy as isl
import numpy as np
import pytest

from polygpu.errors import PolygpuError
from polygpu.frontend import ir, load
from polygpu.model.build import build_scop
from polygpu.pipeline import compile_region, prepare
from polygpu.runtime.arguments import Scratch, bind
from polygpu.runtime.check import check_program
from polygpu.runtime.device import get_device
from polygpu.transform import expand
from polygpu.transform.expand import expand_temporaries, verify_expansion

ROOT = Path(__file__).resolve().parent.parent
SYMM = str(ROOT / "kernels/polybench/symm.c")
DOITGEN = str(ROOT / "kernels/polybench/doitgen.c")


def expansion_of(spec: str):
    scop = build_scop(load(spec))
    return scop, expand_temporaries(scop)


def c_file(tmp_path: Path, body: str, params: str, decls: str = "") -> str:
    path = tmp_path / "k.c"
    path.write_text(f"void k({params})\n{{\n{decls}\n#pragma scop\n"
                    f"{textwrap.dedent(body)}\n#pragma endscop\n}}\n")
    return str(path)


def relation(scop, statement: str, array: str, kind: str) -> isl.Map:
    (acc,) = [a for a in scop.statement(statement).accesses
              if a.array == array and a.kind == kind]
    return acc.relation


def same(got, text: str) -> bool:
    want = type(got)(text)
    return got.is_equal(want)


# --- golden expansions ---------------------------------------------------------------


def test_symm_temp2_is_expanded_along_i_and_j():
    _, e = expansion_of(SYMM)
    (x,) = e.expanded
    assert (x.array, x.name, x.loops, x.copy_back) == ("temp2", "pg_x_temp2", ("i", "j"), ())
    s = e.scop
    assert [a.name for a in s.arrays] == ["C", "A", "B", "pg_x_temp2"]  # temp2 is gone
    new = s.array("pg_x_temp2")
    assert new.kind == "scratch" and new.shape_text == ("m", "n")
    assert same(new.extent, "[m, n] -> { pg_x_temp2[d0, d1] : 0 <= d0 < m and 0 <= d1 < n }")
    ctx = "m > 0 and n > 0 and 0 <= i < m and 0 <= j < n"
    assert same(relation(s, "S0", "pg_x_temp2", "write"),
                f"[m, n] -> {{ S0[i, j] -> pg_x_temp2[i, j] : {ctx} }}")
    assert same(relation(s, "S2", "pg_x_temp2", "read"),
                f"[m, n] -> {{ S2[i, j, k] -> pg_x_temp2[i, j] : {ctx} and 0 <= k < i }}")
    body = s.statement("S3").body
    assert str(body.target) == "C[i][j]" and "pg_x_temp2[i][j]" in str(body.value)
    assert str(s.statement("S2").body.target) == "pg_x_temp2[i][j]"
    # C is read before the region writes it: refused, with the reason
    assert [(r.array, "before the region" in r.reason) for r in e.refused] == [("C", True)]


def test_doitgen_sum_is_expanded_with_its_copy_back():
    _, e = expansion_of(DOITGEN)
    (x,) = e.expanded
    assert (x.array, x.name, x.loops, x.copy_back) == ("sum", "pg_x_sum", ("r", "q"), ("S3",))
    s = e.scop
    assert s.array("pg_x_sum").shape_text == ("nr", "nq", "np")
    assert s.array("sum").kind == "argument"  # still the caller's
    ctx = "nr > 0 and nq > 0 and np > 0 and 0 <= r < nr and 0 <= q < nq and 0 <= p < np"
    assert same(relation(s, "S1", "pg_x_sum", "read"),
                f"[nr, nq, np] -> {{ S1[r, q, p, s] -> pg_x_sum[r, q, p] : {ctx} "
                "and 0 <= s < np }")
    assert same(relation(s, "S2", "pg_x_sum", "read"),
                f"[nr, nq, np] -> {{ S2[r, q, p] -> pg_x_sum[r, q, p] : {ctx} }}")
    cb = s.statement("S3")
    assert str(cb.body) == "sum[pg_e0] = pg_x_sum[(nr - 1)][(nq - 1)][pg_e0]"
    live = "nr > 0 and nq > 0 and np > 0 and 0 <= e < np"
    assert same(cb.domain, f"[nr, nq, np] -> {{ S3[e] : {live} }}")
    assert same(relation(s, "S3", "pg_x_sum", "read"),
                f"[nr, nq, np] -> {{ S3[e] -> pg_x_sum[nr - 1, nq - 1, e] : {live} }}")
    assert same(relation(s, "S3", "sum", "write"),
                f"[nr, nq, np] -> {{ S3[e] -> sum[e] : {live} }}")
    # after everything else, and every schedule padded to one width
    assert same(cb.schedule, f"[nr, nq, np] -> {{ S3[e] -> [1, e, 0, 0, 0, 0, 0, 0, 0] : "
                f"{live} }}")
    assert len({st.schedule.dim(isl.dim_type.out) for st in s.statements}) == 1


def test_offset_loops_subtract_their_lower_bound(tmp_path):
    spec = c_file(tmp_path, """
        for (int i = 2; i < n; i++) {
          t = a[i];
          b[i] = t * t;
        }""", "int n, double a[n], double b[n]", "double t;")
    _, e = expansion_of(spec)
    (x,) = e.expanded
    assert x.loops == ("i",)
    new = e.scop.array("pg_x_t")
    # n - 2 iterations, none below n = 3 (the context only says n >= 1)
    assert new.shape_text == ("max((n - 2), 0)",)
    assert same(relation(e.scop, "S0", "pg_x_t", "write"),
                "[n] -> { S0[i] -> pg_x_t[i - 2] : 2 <= i < n }")


def test_inner_running_sum_is_expanded_along_the_outer_loop_only(tmp_path):
    spec = c_file(tmp_path, """
        for (int j = 0; j < n; j++) {
          t = 0;
          for (int i = 0; i < n; i++) {
            t += a[j][i];
            b[j][i] = t;
          }
        }""", "int n, double a[n][n], double b[n][n]", "double t;")
    _, e = expansion_of(spec)
    (x,) = e.expanded
    assert x.loops == ("j",)  # the value flows from one i to the next
    assert same(relation(e.scop, "S1", "pg_x_t", "read"),
                "[n] -> { S1[j, i] -> pg_x_t[j] : 0 <= j < n and 0 <= i < n }")


# --- refusals ------------------------------------------------------------------------


@pytest.mark.parametrize("body, why", [
    # a running sum: each iteration reads the previous one's value (and the first the
    # value from before the region)
    ("""
        for (int i = 0; i < n; i++) {
          t += a[i];
          b[i] = t;
        }""", "before the region"),
    # initialised outside the loop: no common loop around all its accesses
    ("""
        t = 0;
        for (int i = 0; i < n; i++) {
          t += a[i];
          b[i] = t;
        }""", "one common loop"),
    # written at i == 0 only, read by every later i
    ("""
        for (int i = 0; i < n; i++) {
          if (i == 0)
            t = a[0];
          b[i] = t + a[i];
        }""", "flow from one iteration of loop i"),
])
def test_values_flowing_between_iterations_are_not_expanded(tmp_path, body, why):
    _, e = expansion_of(c_file(tmp_path, body, "int n, double a[n], double b[n]",
                               "double t;"))
    assert e.expanded == ()
    (r,) = [r for r in e.refused if r.array == "t"]
    assert why in r.reason
    assert [a.kind for a in e.scop.arrays if a.name == "t"] == ["temporary"]


def test_an_argument_without_reuse_is_left_alone(tmp_path):
    spec = c_file(tmp_path, """
        for (int i = 0; i < n; i++) {
          x[i] = a[i];
          b[i] = x[i] * 2;
        }""", "int n, double a[n], double b[n], double x[n]")
    scop, e = expansion_of(spec)
    assert e.expanded == () and e.scop is scop
    (r,) = [r for r in e.refused if r.array == "x"]
    assert "no element is written in two iterations of loop i" in r.reason


def test_python_temporaries_expand_except_the_carried_one(tmp_path):
    path = tmp_path / "kernel.py"
    path.write_text(PY_ROW_SUMS)
    _, e = expansion_of(f"{path}:k")
    assert {(x.array, x.loops) for x in e.expanded} == {("s", ("i",)), ("c", ("i",)),
                                                         ("t", ("i",))}
    assert e.scop.array("pg_x_c").dtype == "int32"
    (r,) = [r for r in e.refused if r.array == "prev"]
    assert "flow from one iteration of loop i" in r.reason


ALL_STRIDED = """
    for (int i = 0; i < n; i += 3) {
      for (int j = 0; j < n - 2; j += 2) {
        for (int k = n - 3; k > 0; k -= 2) {
          B[n - i][j] = 0.5 * (y[i + 1] + B[2 * k][n - j + 1]) + 1.0;
          B[2][i + 1] += 0.5 * (B[2 * i + 1][k + 2] + B[1][2 * j]) + 1.0;
        }
        B[j + i][n - j - 1] = 0.5 * (B[j + i][n - j - 1]) + 1.0;
        A[1][1] += 0.5 * (A[i][i] + B[i + j + 2][j]) + 1.0;
      }
    }"""


def test_an_all_strided_nest_is_judged_in_seconds(tmp_path):
    # fuzzed: "every read has a source" subtracted the flow's range (dozens of pieces
    # with divisions) from the reads and ran for minutes; asked as "some write to the
    # element precedes the read" it takes a second
    spec = c_file(tmp_path, ALL_STRIDED, "int n, double A[2 * n + 3][2 * n + 3], "
                  "double B[2 * n + 3][2 * n + 3], double y[2 * n + 3]")
    start = time.monotonic()
    scop, e = expansion_of(spec)
    assert time.monotonic() - start < 30
    assert e.expanded == () and e.scop is scop
    assert {r.array: r.reason for r in e.refused} == dict.fromkeys(
        "AB", "a read takes a value from before the region (no write in the region "
        "precedes it)")


def test_an_expansion_isl_cannot_prove_within_its_budget_is_refused(monkeypatch):
    monkeypatch.setattr(expand, "EXPANSION_OPERATIONS", 1_000)
    scop, e = expansion_of(DOITGEN)
    assert e.expanded == () and e.scop is scop
    (r,) = [r for r in e.refused if r.array == "sum"]
    assert r.reason == "proving it took isl more than 1,000 operations"


# --- the proof -----------------------------------------------------------------------


def _tampered(scop, statement: str, array: str, index: tuple[ir.IntExpr, ...], text: str):
    """``scop`` with the read of ``array`` in ``statement`` moved to ``text``."""
    stmt = scop.statement(statement)
    accesses = tuple(
        replace(a, relation=isl.Map(text), subscripts=index)
        if a.array == array and a.kind == "read" else a for a in stmt.accesses)
    return replace(scop, statements=tuple(
        replace(s, accesses=accesses) if s.name == statement else s
        for s in scop.statements))


def test_the_proof_accepts_the_expansions_and_rejects_wrong_ones():
    original, e = expansion_of(DOITGEN)
    (x,) = e.expanded
    assert verify_expansion(original, e.scop, x) is None
    # the copy-back reading the first (r, q) instead of the last
    live = "nr > 0 and nq > 0 and np > 0 and 0 <= e < np"
    wrong = _tampered(e.scop, "S3", "pg_x_sum", (),
                      f"[nr, nq, np] -> {{ S3[e] -> pg_x_sum[0, 0, e] : {live} }}")
    assert "S3" in verify_expansion(original, wrong, x)
    # a consumer reading another iteration's copy
    ctx = "nr > 0 and nq > 0 and np > 0 and 0 <= r < nr and 0 <= q < nq and 0 <= p < np"
    wrong = _tampered(e.scop, "S2", "pg_x_sum", (),
                      f"[nr, nq, np] -> {{ S2[r, q, p] -> pg_x_sum[r, 0, p] : {ctx} }}")
    assert "S2" in verify_expansion(original, wrong, x)

    original, e = expansion_of(SYMM)
    (x,) = e.expanded
    assert verify_expansion(original, e.scop, x) is None
    # a copy that was never written in that iteration: reads without a source
    wrong = _tampered(e.scop, "S3", "pg_x_temp2", (), "[m, n] -> { S3[i, j] -> "
                      "pg_x_temp2[i, j + 1] : m > 0 and n > 0 and 0 <= i < m and 0 <= j < n }")
    assert verify_expansion(original, wrong, x) is not None


# --- runtime and end to end ----------------------------------------------------------


def test_scratch_arrays_are_kernel_arguments_the_runtime_allocates():
    c = compile_region(DOITGEN)
    args = c.program.arguments
    assert [(a.name, a.kind) for a in args][-2:] == [("sum", "array"), ("pg_x_sum", "scratch")]
    assert args[-1].shape == ("nr", "nq", "np")
    assert "double *__restrict__ pg_x_sum" in c.program.source
    values = {"nr": 2, "nq": 3, "np": 4, "A": np.ones((2, 3, 4)), "C4": np.ones((4, 4)),
              "sum": np.zeros(4)}
    (scratch,) = [b.value for b in bind(c.program, values) if b.argument.kind == "scratch"]
    assert scratch == Scratch((2, 3, 4), "float64") and scratch.nbytes == 2 * 3 * 4 * 8
    assert np.isnan(scratch.host_array()).all()
    # the original model is kept for the reference check, which refuses the other one
    assert not any(a.kind == "scratch" for a in c.source_scop.arrays)
    with pytest.raises(ValueError, match="original model"):
        check_program(c.program, c.analysis.scop, DOITGEN, {"nr": 2, "nq": 3, "np": 4})


def test_doitgen_on_the_emulator_matches_numpy():
    c = compile_region(DOITGEN)
    rng = np.random.default_rng(0)
    a, c4 = rng.random((3, 4, 5)), rng.random((5, 5))
    want = np.einsum("rqs,sp->rqp", a, c4)
    total = np.zeros(5)
    get_device("cpu").run(c.program, {"nr": 3, "nq": 4, "np": 5, "A": a, "C4": c4,
                                      "sum": total})
    assert np.allclose(a, want) and np.allclose(total, want[-1, -1])


@pytest.mark.parametrize("spec, params", [
    (SYMM, {"m": 13, "n": 11}),
    (DOITGEN, {"nr": 5, "nq": 7, "np": 9}),
])
def test_polybench_kernels_check_on_the_emulator(spec, params):
    prepared = prepare(spec)
    assert prepared.expansion.expanded  # the point of the exercise
    c = compile_region(spec)
    assert not c.program.host_iterators  # no longer serialized by the temporary
    result = check_program(c.program, c.source_scop, spec, params, seed=3)
    assert result.ok, result.message


PY_ROW_SUMS = textwrap.dedent("""
    from __future__ import annotations

    from polygpu import f32


    def k(n: int, a: f32[n, n], x: f32[n]):
        for i in range(n):
            if i > 0:
                x[i] += prev
            s = 0
            c = 0
            t: f32 = 0
            for j in range(n):
                s += a[i][j]
                c += 1
                t = s
            x[i] += s / c + t
            prev = x[i]
""")


def test_python_kernel_with_temporaries_checks_on_the_emulator(tmp_path):
    path = tmp_path / "kernel.py"
    path.write_text(PY_ROW_SUMS)
    spec = f"{path}:k"
    c = compile_region(spec)
    assert {a.name for a in c.analysis.scop.arrays if a.kind == "scratch"} == {
        "pg_x_s", "pg_x_c", "pg_x_t"}
    result = check_program(c.program, c.source_scop, spec, {"n": 9}, seed=4)
    assert result.ok, result.message


def test_the_gpu_allocates_scratch_poisoned_and_never_copies_it():
    """Through a recording fake of pycuda.driver (tests/test_device.py): the scratch
    array is allocated on the device, counted in the memory check, set to all-ones
    bytes (NaN), passed to every launch, and neither copied in nor back."""
    from tests.test_device import FakeDriver

    class Driver(FakeDriver):
        def memset_d8(self, buffer, value, count):
            self.require_context()
            self.log.append(("memset", int(buffer), value, count))

    driver = Driver()
    from polygpu.runtime.device import GpuDevice

    device = GpuDevice(0, driver=driver, compiler=driver.compiler)
    c = compile_region(DOITGEN)
    values = {"nr": 2, "nq": 3, "np": 4, "A": np.ones((2, 3, 4)), "C4": np.ones((4, 4)),
              "sum": np.zeros(4)}
    device.run(c.program, values)
    scratch = 2 * 3 * 4 * 8
    allocs = [e[1] for e in driver.log if e[0] == "alloc"]
    assert allocs == [2 * 3 * 4 * 8, 4 * 4 * 8, 4 * 8, scratch]
    (memset,) = [e for e in driver.log if e[0] == "memset"]
    assert memset[2:] == (0xFF, scratch)
    copies = [e for e in driver.log if e[0] in ("htod", "dtoh")]
    assert [e[1] for e in copies if e[0] == "htod"] == allocs[:3]
    assert [e[1] for e in copies if e[0] == "dtoh"] == allocs[:3]  # written=None: all
    driver.free = sum(allocs) - 1  # the scratch array counts in the memory check
    with pytest.raises(PolygpuError, match="on the GPU for its arrays"):
        device.run(c.program, values)
