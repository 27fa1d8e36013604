"""Loop distribution by dependence SCCs, per-kernel parallelism, and isl's host loops.

PolyBench's atax and bicg ran their ``tmp``/``q`` statements on one thread because a
loop of the *whole* region carried another statement's dependence; distributed, each
group is scheduled on its own dependences.  Row-oriented LU and Cholesky got five host
dimensions or one thread; isl's scheduler finds the pivot as one host loop.  Every
plan is checked on the CPU emulator against the original loop nest.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import islpy as isl
import pytest

from polygpu.frontend import load
from polygpu.model.analysis import analyze
from polygpu.model.build import build_scop
from polygpu.pipeline import compile_region
from polygpu.runtime.check import check_program
from polygpu.schedule.adjacency import statement_map
from polygpu.schedule.candidates import candidates
from polygpu.schedule.distribution import distributions, statement_sccs
from polygpu.schedule.ranking import host_loop_dims, proven, serial_statements
from polygpu.schedule.variant import Variant

POLYBENCH = Path(__file__).resolve().parent.parent / "kernels" / "polybench"

# symm with its scalar temporary expanded by hand into t[i][j]
SYMM_EXPANDED = """
void symm_t(int m, int n, double alpha, double beta, double C[m][n], double A[m][m],
            double B[m][n], double t[m][n])
{
#pragma scop
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      t[i][j] = 0;
      for (int k = 0; k < i; k++) {
        C[k][j] += alpha * B[i][j] * A[i][k];
        t[i][j] += B[k][j] * A[i][k];
      }
      C[i][j] = beta * C[i][j] + alpha * B[i][j] * A[i][i] + alpha * t[i][j];
    }
#pragma endscop
}
"""

CYCLE = """
void cyc(int n, float a[n], float b[n], float c[n])
{
#pragma scop
  for (int i = 1; i < n; i++) {
    a[i] = b[i - 1] + 1.0f;
    b[i] = a[i] * 2.0f;
    c[i] = a[i];
  }
#pragma endscop
}
"""


def _analysis(path):
    return analyze(build_scop(load(str(path))))


def _file(tmp_path, text, name):
    path = tmp_path / f"{name}.c"
    path.write_text(text)
    return str(path)


def _best(path):
    an = _analysis(path)
    return an, candidates(an)[0]


def _space(tr, stmt):
    kernel = tr.kernels[tr.kernel_of(stmt)]
    return statement_map(kernel.space, stmt)


@pytest.mark.parametrize("name, update", [("atax", "S3"), ("bicg", "S2")])
def test_every_statement_gets_threads_and_the_update_runs_over_j(name, update):
    """atax's ``y[j] += A[i][j] * tmp[i]`` and bicg's ``s[j] += r[i] * A[i][j]``:
    space ``j`` with ``i`` the thread's time loop; no one-thread kernel left."""
    an, tr = _best(POLYBENCH / f"{name}.c")
    assert tr.host is None and not tr.atomic
    assert all(k.n_space >= 1 for k in tr.kernels)
    stmt = an.scop.statement(update)
    assert _space(tr, update).is_equal(
        isl.Map(f"{{ {update}[i, j] -> [j] }}").intersect_domain(stmt.domain)
        .align_params(stmt.domain.get_space()))


def test_atax_groups_follow_the_dependences():
    an = _analysis(POLYBENCH / "atax.c")
    assert statement_sccs(an) == [("S0",), ("S1",), ("S2",), ("S3",)]
    plain, fused = distributions(an)[:2]
    assert len(plain.kernels) == 4
    # y = 0 and the tmp statements share one launch; the y update needs tmp complete
    assert [k.statements for k in fused.kernels] == [("S0", "S1", "S2"), ("S3",)]
    for k in fused.kernels:  # fusion keeps every statement's space map
        for s in k.statements:
            assert _space(fused, s).is_equal(_space(plain, s))


def test_a_dependence_cycle_stays_in_one_group(tmp_path):
    an = _analysis(_file(tmp_path, CYCLE, "cyc"))
    assert statement_sccs(an) == [("S0", "S1"), ("S2",)]


def test_a_distribution_reversing_a_dependence_is_refused():
    """The y update before the statements computing tmp: the prover says no."""
    an = _analysis(POLYBENCH / "atax.c")
    plain = distributions(an)[0]
    assert proven(an, plain)
    k = plain.kernels
    swapped = replace(plain, kernels=(k[0], k[1], k[3], k[2]))
    assert not proven(an, swapped)


def test_expanded_symm_needs_no_host_loop(tmp_path):
    an, tr = _best(_file(tmp_path, SYMM_EXPANDED, "symm_t"))
    assert tr.host is None
    assert serial_statements(an, tr) == 0


@pytest.mark.parametrize("name", ["lu", "cholesky"])
def test_factorizations_get_one_host_loop_with_parallel_steps(name):
    an, tr = _best(POLYBENCH / f"{name}.c")
    assert tr.host is not None and len(tr.host.names) == 1
    assert serial_statements(an, tr) == 0
    one_thread = {s for k in tr.kernels if k.n_space == 0 for s in k.statements}
    # LU: every kernel has threads; Cholesky: only the pivot's sqrt, one instance a step
    assert one_thread == (set() if name == "lu" else {"S3"})


def test_trisolv_has_at_most_one_host_loop():
    an, tr = _best(POLYBENCH / "trisolv.c")
    assert host_loop_dims(tr) <= 1
    assert serial_statements(an, tr) == 0


@pytest.mark.parametrize("spec, function, sizes", [
    ("atax", "atax", {"m": 13, "n": 11}),
    ("bicg", "bicg", {"m": 11, "n": 13}),
    ("lu", "lu", {"n": 13}),
    ("cholesky", "cholesky", {"n": 11}),
    ("trisolv", "trisolv", {"n": 13}),
    ("symm", "symm", {"m": 11, "n": 9}),
    ("doitgen", "doitgen", {"nr": 5, "nq": 3, "np": 7}),
    ("floyd_warshall", "floyd_warshall", {"n": 9}),
    (SYMM_EXPANDED, "symm_t", {"m": 9, "n": 11}),
])
def test_plans_pass_the_cpu_check(tmp_path, spec, function, sizes):
    path = _file(tmp_path, spec, function) if "pragma" in spec else str(
        POLYBENCH / f"{spec}.c")
    compiled = compile_region(path, function, Variant())
    scop = compiled.source_scop or compiled.analysis.scop
    result = check_program(compiled.program, scop, path, sizes, seed=11)
    assert result.ok, result.message
