"""Host loops: outer loops carrying dependences run on the host, kernels per step.

Time loops, pivot loops and Gauss-Seidel wavefronts: the scheduler must propose host
schedules, prove them against the original dependences, and the runtimes must run the
launches at every step in order.  Each case is checked on the CPU emulator against the
original loop nest.
"""

from __future__ import annotations

from dataclasses import replace

import islpy as isl
import pytest

from polygpu.frontend import load
from polygpu.model.analysis import analyze
from polygpu.model.build import build_scop
from polygpu.pipeline import compile_region, compile_variant, prepare
from polygpu.runtime.check import check_program
from polygpu.runtime.grid import launch_blocks
from polygpu.schedule.candidates import _proven
from polygpu.schedule.host import HostSchedule, determined_iterators
from polygpu.schedule.variant import Variant

JACOBI = """
void jac(int n, int tsteps, float a[n], float b[n], float s[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    s[i] = a[i];
  for (int t = 0; t < tsteps; t++) {
    for (int i = 1; i < n - 1; i++)
      b[i] = 0.33333f * (a[i - 1] + a[i] + a[i + 1]);
    for (int i = 1; i < n - 1; i++)
      a[i] = b[i];
  }
  for (int i = 0; i < n; i++)
    s[i] = s[i] - a[i];
#pragma endscop
}
"""

LU = """
void lu(int n, float A[n][n])
{
#pragma scop
  for (int k = 0; k < n; k++) {
    for (int i = k + 1; i < n; i++)
      A[i][k] = A[i][k] / (A[k][k] + 4.0f);
    for (int i = k + 1; i < n; i++)
      for (int j = k + 1; j < n; j++)
        A[i][j] -= A[i][k] * A[k][j];
  }
#pragma endscop
}
"""

SEIDEL = """
void seidel(int n, int tsteps, float A[n][n])
{
#pragma scop
  for (int t = 0; t < tsteps; t++)
    for (int i = 1; i < n - 1; i++)
      for (int j = 1; j < n - 1; j++)
        A[i][j] = (A[i - 1][j - 1] + A[i - 1][j] + A[i - 1][j + 1] + A[i][j - 1]
                   + A[i][j] + A[i][j + 1] + A[i + 1][j - 1] + A[i + 1][j]
                   + A[i + 1][j + 1]) / 9.0f;
#pragma endscop
}
"""


def _file(tmp_path, text, name):
    path = tmp_path / f"{name}.c"
    path.write_text(text)
    return str(path)


def _check(path, params, variant=None):
    compiled = compile_region(path, variant=variant)
    result = check_program(compiled.program, compiled.source_scop, path, params, seed=3)
    assert result.ok, result.message
    return compiled


def test_time_loop_between_sequential_statements(tmp_path):
    """Statements before and after the time loop get steps of their own, ordered by the
    statement positions; the two statements inside it are two kernels per step.  A
    kernel may hold statements of different steps (the copy before the loop and the
    loop's first statement): at each step it runs only the instances of that step."""
    path = _file(tmp_path, JACOBI, "jac")
    compiled = _check(path, {"n": 23, "tsteps": 4})
    tr = compiled.transformation
    assert tr.host is not None and tr.host.kind == "loops"
    program = compiled.program
    assert len(program.host_iterators) == 2  # [statement position, t]
    steps = program.steps({"n": 23, "tsteps": 4})
    assert [k.statements for k in compiled.kernels] == [("S0", "S1"), ("S2", "S3")]
    assert [k for k, _ in steps] == [0] + [0, 1] * 4 + [1]
    hosts = [h for _, h in steps]
    assert hosts == [(0, 0)] + [(1, t) for t in range(4) for _ in (0, 1)] + [(2, 0)]
    _check(path, {"n": 130, "tsteps": 3},
           Variant(tile=(64,), threads=(32,), jam=True))
    # no time steps at all: the statements around the loop still run
    _check(path, {"n": 9, "tsteps": 0})


def test_lu_pivot_loop_shrinks_the_grid(tmp_path):
    path = _file(tmp_path, LU, "lu")
    compiled = _check(path, {"n": 13})
    _check(path, {"n": 37}, Variant(tile=(8, 32), threads=(4, 32), jam=True))
    program = compiled.program
    assert program.host_iterators and "h" in program.launches[1].grid[0] + \
        program.launches[-1].grid[0] + program.launches[-1].grid[1]
    steps = program.steps({"n": 300})
    assert len(steps) == 2 * 299 or len(steps) == 299 + 298  # the last k has no work
    # launch_blocks reports the largest step's grid (the first pivot's)
    blocks = launch_blocks(program, {"n": 300})
    assert max(blocks) >= (299 // 4) * (299 // 128)


def test_seidel_runs_as_wavefronts(tmp_path):
    """Every loop of Gauss-Seidel carries a dependence: the host runs the wavefronts of
    a hyperplane every dependence crosses forwards; no instance depends on another of
    its wavefront."""
    path = _file(tmp_path, SEIDEL, "seidel")
    compiled = _check(path, {"n": 11, "tsteps": 3})
    tr = compiled.transformation
    assert tr.host.kind == "wavefront"
    # the smallest such hyperplane for the 9-point in-place stencil: 4t + 2i + j
    h = tr.host.of("S0")
    assert h.is_equal(isl.Map(
        "[n, tsteps] -> { S0[t, i, j] -> [4t + 2i + j] }").intersect_domain(
            compiled.analysis.scop.statement("S0").domain))
    # one space dimension is fixed by the others on a wavefront: not a thread axis
    assert tr.kernels[0].n_space == 2


def test_host_schedule_is_proven_against_the_original_dependences(tmp_path):
    """A host schedule that runs time steps backwards is refused by the prover."""
    path = _file(tmp_path, JACOBI, "jac")
    an = analyze(build_scop(load(path)))
    good = prepare(path).candidates[0]
    assert _proven(an, good)
    reversed_ = good.host.schedule.apply_range(isl.UnionMap("{ [p, t] -> [p, -t] }"))
    bad = replace(good, host=HostSchedule(reversed_, good.host.names, "loops"))
    assert not _proven(an, bad)


@pytest.mark.parametrize("domain, expected", [
    ("[n, h0] -> { S[t, i] : t = h0 and 0 <= i < n }", {0}),
    ("[n, h0] -> { S[t, i, j] : 4t + 2i + j = h0 and 0 <= t < 5 and 0 < i, j < n }", {2}),
    ("[n] -> { S[i, j] : 0 <= i, j < n }", set()),
])
def test_determined_iterators(domain, expected):
    assert determined_iterators(isl.Set(domain)) == expected


def test_specialized_host_step_with_a_shrinking_grid(tmp_path):
    """A specialized variant knows every parameter but not the host iterators: a grid
    that shrinks with the pivot is not one number (regression: KeyError 'h0')."""
    path = _file(tmp_path, LU, "lu")
    compiled = compile_region(path, variant=Variant(specialize=True), params={"n": 19})
    result = check_program(compiled.program, compiled.source_scop, path, {"n": 19}, seed=5)
    assert result.ok, result.message


SCALED_HOST = """
void nest(int n, double B[2 * n + 3][2 * n + 3], double y[2 * n + 3])
{
#pragma scop
  for (int i = 0; i < n - 2; i += 1) {
    y[2 * i] = 0.25 * (B[i + 2][i + 2] + y[i + 2] + y[2 * i]) + 1.0;
    for (int j = i; j < i + 3; j += 1)
      for (int k = j + 1; k < n; k += 1)
        B[i][i] += 0.5 * (y[n - j - 1] + y[1]) + 1.0;
  }
#pragma endscop
}
"""


def test_a_host_schedule_scaled_by_two_at_sizes_needing_64_bit_indices(tmp_path):
    """Fuzzed: isl's host schedule [2i] (and [i + j]) gives a step's grid extent rational
    pieces ((-2 + 2n - 3h0)/2 where h0 is even), on which isl_pw_aff_max_val fails; the
    grid-folding decision asks it at sizes needing 64-bit indices (isl error: exit 3)."""
    path = _file(tmp_path, SCALED_HOST, "nest")
    prepared = prepare(path, "nest")
    (k,) = [k for k, c in enumerate(prepared.candidates)
            if c.host is not None and "[2i]" in str(c.host.schedule)]
    compile_variant(prepared, Variant(candidate=k, tile=(4, 8), threads=(2, 4)),
                    {"n": 40000})  # isl.Error before
    compiled = compile_variant(prepared, Variant(candidate=k), {"n": 13})
    result = check_program(compiled.program, compiled.source_scop, path, {"n": 13}, seed=3)
    assert result.ok, result.message


BATCH_OUTER = """
void f(int nb, int n, double a[nb][n]) {
#pragma scop
  for (int b = 0; b < nb; b++)
    for (int i = 1; i < n; i++)
      a[b][i] += a[b][i - 1];
#pragma endscop
}
"""


@pytest.mark.parametrize("kernel, expected", [
    ("polybench/heat_3d.c", {"tsteps"}), ("polybench/jacobi_2d.c", {"tsteps"}),
    ("polybench/fdtd_2d.c", {"tmax"}),  # _fict_[t]: the subscript is t, not tmax
    ("polybench/cholesky.c", set()),    # n bounds i, and i bounds the loops inside
    ("polybench/trisolv.c", set()), ("polybench/floyd_warshall.c", set()),
    ("mm.c", set()),
])
def test_step_parameters(kernel, expected):
    from polygpu.model.analysis import step_parameters

    assert step_parameters(prepare(f"kernels/{kernel}").analysis) == expected


def test_a_parallel_outer_loop_is_not_a_time_loop(tmp_path):
    """nb bounds only the outermost loop, but that loop is parallel: it may be tiled as
    a space dimension, so its count is not cut to a few steps."""
    from polygpu.model.analysis import step_parameters

    src = tmp_path / "batch.c"
    src.write_text(BATCH_OUTER)
    assert step_parameters(prepare(str(src)).analysis) == frozenset()
