"""The scheduler: Algorithm 1's outcomes on the paper's kernels (§4.3), kernel splitting,
the fallbacks, and legality of every candidate (the isl prover is the judge).

Golden outcomes: in mv no legal transformation without atomics coalesces ``a[i][j]``
(it goes through shared memory) and the best one maps ``i`` to threads with ``θ = j``;
with the reduction over ``j`` spread over threads (atomic) ``(i, j)`` coalesces it; in tmv the same
mapping reads ``a[j][i]`` coalesced; mvt combines the two; in mm the threads are
``(i, j)`` with ``j`` innermost and ``θ = k``, coalescing ``b[k][j]`` and ``c[i][j]``.
"""

from __future__ import annotations

import itertools
import textwrap
from pathlib import Path

import islpy as isl
import pytest
from hypothesis import HealthCheck, assume, given, settings

from polygpu.frontend import load
from polygpu.frontend.python_frontend import parse_python_function
from polygpu.model.analysis import analyze
from polygpu.model.build import build_scop
from polygpu.schedule import algorithm1
from polygpu.schedule.adjacency import statement_map, transformation
from polygpu.schedule.candidates import candidates
from polygpu.schedule.legality import LegalityError, prove_legal, transformation_schedule
from tests.random_nests import nests, render_python

KERNELS = Path(__file__).resolve().parent.parent / "kernels"
LANGS = pytest.mark.parametrize("lang", ["c", "python"])
_counter = itertools.count()


def _kernel(name: str, lang: str):
    spec = str(KERNELS / f"{name}.c") if lang == "c" else f"{KERNELS / name}.py:{name}"
    return analyze(build_scop(load(spec)))


def _source(tmp_path, body: str, signature: str):
    path = tmp_path / f"k{next(_counter)}.py"
    path.write_text("from polygpu import affine, f32, f64\n\n\n@affine\n"
                    f"def k({signature}):\n" + textwrap.indent(textwrap.dedent(body), "    "))
    return analyze(build_scop(parse_python_function(str(path), "k")))


def _maps(tr, statement: str):
    kernel = tr.kernels[tr.kernel_of(statement)]
    return statement_map(kernel.space, statement), statement_map(kernel.time, statement)


def _same_step(tr, statement: str) -> isl.Map:
    """Instance pairs of ``statement`` that its thread runs at the same time step."""
    _, time = _maps(tr, statement)
    return time.apply_range(time.reverse())


def _ref(an, statement: str, text: str) -> tuple[str, int]:
    (acc,) = [a for a in an.scop.statement(statement).accesses
              if a.text == text and a.kind == "read"]
    return statement, acc.ref


def _assert_all_legal(an, result):
    assert result
    for tr in result:
        prove_legal(an.dependences_with(tr.atomic), transformation_schedule(tr))


# ---------------------------------------------------------------- the paper's kernels


@LANGS
def test_mv_a_is_never_coalesced(lang):
    an = _kernel("mv", lang)
    result = candidates(an)
    a = _ref(an, "S1", "a[i][j]")
    plain = [tr for tr in result if not tr.atomic]
    assert plain and all(a in tr.shared and a not in tr.coalesced for tr in plain)
    best = result[0]
    assert not best.atomic  # the paper's mapping stays the default
    # spreading the reduction over threads: S1 on (i, j), j innermost, atomic; S0
    # (x[i] = 0) must finish first, in a kernel of its own
    (spread,) = [tr for tr in result if tr.atomic]
    assert spread.atomic == ("S1",) and a in spread.coalesced
    assert spread.kernel_of("S0") < spread.kernel_of("S1")
    assert _maps(spread, "S1")[0].is_equal(isl.Map(
        "[n] -> { S1[i, j] -> [i, j] : 0 <= i < n and 0 <= j < n }"))
    assert spread.kernels[spread.kernel_of("S1")].reduction_dims == (1,)
    space, _ = _maps(best, "S1")
    assert space.is_equal(isl.Map("[n] -> { S1[i, j] -> [i] : 0 <= i < n and 0 <= j < n }"))
    assert _same_step(best, "S1").is_equal(
        isl.Map("[n] -> { S1[i, j] -> S1[i', j] : 0 <= i, i' < n and 0 <= j < n }"))


@LANGS
def test_tmv_reads_a_coalesced(lang):
    an = _kernel("tmv", lang)
    best = candidates(an)[0]
    space, _ = _maps(best, "S1")
    assert space.is_equal(isl.Map("[n] -> { S1[i, j] -> [i] : 0 <= i < n and 0 <= j < n }"))
    assert _same_step(best, "S1").is_equal(
        isl.Map("[n] -> { S1[i, j] -> S1[i', j] : 0 <= i, i' < n and 0 <= j < n }"))
    assert _ref(an, "S1", "a[j][i]") in best.coalesced
    assert best.shared == ()
    assert best.origin == "adjacency"


@LANGS
def test_mvt_coalesces_the_transposed_half(lang):
    an = _kernel("mvt", lang)
    result = candidates(an)
    assert all(_ref(an, "S0", "a[i][j]") in tr.shared for tr in result if not tr.atomic)
    assert _ref(an, "S1", "a[j][i]") in result[0].coalesced
    # the first atomic candidate fuses both halves in one kernel on (i, j) / (j, i):
    # every element of a is read once and feeds x1 and x2
    fused = next(tr for tr in result if tr.atomic)
    assert len(fused.kernels) == 1 and set(fused.atomic) == {"S0", "S1"}
    assert _ref(an, "S0", "a[i][j]") in fused.coalesced
    assert _ref(an, "S1", "a[j][i]") in fused.coalesced


@LANGS
def test_mm_threads_are_i_j(lang):
    an = _kernel("mm", lang)
    best = candidates(an)[0]
    space, _ = _maps(best, "S0")
    domain = "0 <= i < n and 0 <= j < n and 0 <= k < n"
    assert space.is_equal(isl.Map(f"[n] -> {{ S0[i, j, k] -> [i, j] : {domain} }}"))
    assert _same_step(best, "S0").is_equal(isl.Map(
        f"[n] -> {{ S0[i, j, k] -> S0[i', j', k] : {domain} and 0 <= i', j' < n }}"))
    assert _ref(an, "S0", "b[k][j]") in best.coalesced
    assert _ref(an, "S0", "c[i][j]") in best.coalesced
    assert _ref(an, "S0", "a[i][k]") not in best.coalesced
    assert _ref(an, "S0", "a[i][k]") in best.shared


@LANGS
@pytest.mark.parametrize("name", ["mv", "tmv", "mvt", "mm"])
def test_every_candidate_is_legal(name, lang):
    an = _kernel(name, lang)
    _assert_all_legal(an, candidates(an))


def test_prover_rejects_threads_along_the_reduction():
    """mv with S1's threads along j: the reduction into x[i] crosses threads, which only
    atomic combining makes legal -- and even then not with S0 (``x[i] = 0``) in the same
    kernel, whose order against every update the relaxed dependences keep."""
    an = _kernel("mv", "c")
    s0, s1 = an.scop.statements
    bad = transformation(an, (algorithm1.kernel([s0, s1], [(0,), (1,)]),), "adjacency")
    with pytest.raises(LegalityError):
        prove_legal(an.dependences, transformation_schedule(bad))
    with pytest.raises(LegalityError):
        prove_legal(an.dependences_with(["S1"]), transformation_schedule(bad))
    split = transformation(an, (algorithm1.kernel([s0], [(0,)]),
                                algorithm1.kernel([s1], [(1,)])), "adjacency")
    prove_legal(an.dependences_with(["S1"]), transformation_schedule(split))
    with pytest.raises(LegalityError):
        prove_legal(an.dependences, transformation_schedule(split))


# ---------------------------------------------------------------- more structures


def test_copy(tmp_path):
    an = _source(tmp_path, """
        for i in range(n):
            y[i] = x[i]
        """, "n: int, x: f32[n], y: f32[n]")
    best = candidates(an)[0]
    space, _ = _maps(best, "S0")
    assert space.is_equal(isl.Map("[n] -> { S0[i] -> [i] : 0 <= i < n }"))
    assert best.coalesced == (("S0", 0), ("S0", 1))


def test_stencil_with_a_time_loop_runs_on_the_host(tmp_path):
    """``t`` carries dependences across every ``i``: no single kernel can run it, so
    ``t`` becomes a host loop; each step launches the two statements as two kernels
    (``B`` is read at ``i +- 1``: a global barrier between them), ``i`` on threads."""
    an = _source(tmp_path, """
        for t in range(steps):
            for i in range(1, n + 1):
                B[i] = A[i - 1] + A[i + 1]
            for i in range(1, n + 1):
                A[i] = B[i]
        """, "n: int, steps: int, A: f32[n + 2], B: f32[n + 2]")
    result = candidates(an)
    _assert_all_legal(an, result)
    assert result and all(tr.host is not None for tr in result)
    best = result[0]
    assert best.host.kind == "loops" and len(best.host.names) == 1
    h = best.host.names[0]
    assert best.host.of("S0").is_equal(isl.Map(
        "[n, steps] -> { S0[t, i] -> [t] : 0 <= t < steps and 1 <= i <= n }"))
    assert [k.statements for k in best.kernels] == [("S0",), ("S1",)]
    space, _ = _maps(best, "S0")
    assert space.is_equal(isl.Map(
        f"[n, steps, {h}] -> {{ S0[t, i] -> [i] : t = {h} and 0 <= t < steps and 1 <= i <= n }}"))


def test_a_statement_pinned_to_one_iteration_keeps_its_place_in_the_thread(tmp_path):
    """``S0`` runs at ``i == 5`` only, so its schedule is the constant ``[0, 5, 0]``.
    The time map zeroed the dimensions of the space iterators as read off each
    statement's schedule expressions, and none involves ``i`` there: ``S0`` kept 5 where
    ``S1`` got 0, ran after it inside thread 5, and Algorithm 1 lost the one-kernel plan
    (the prover refused it).  Dimension 2k + 1 is iterator k by construction."""
    an = _source(tmp_path, """
        for i in range(n):
            if i == 5:
                x[i] = y[i] * 2.0
            y[i] = x[i] + 1.0
        """, "n: int, x: f32[n], y: f32[n]")
    s0 = an.scop.statement("S0")
    assert algorithm1.time_map(s0, (0,)).is_equal(
        isl.Map("[n] -> { S0[i = 5] -> [0, 0, 0] : n >= 6 }"))
    found = algorithm1.search(an, wanted=4)
    assert [[(k.statements, k.n_space) for k in tr.kernels] for tr in found][0] == [
        (("S0", "S1"), 1)]
    _assert_all_legal(an, candidates(an))


def test_dependence_between_statements_splits_kernels(tmp_path):
    """``c[i]`` reads ``b[i - 1]`` of the previous iteration: a global barrier
    between the two statements makes both parallel and coalesced."""
    an = _source(tmp_path, """
        for i in range(1, n):
            b[i] = a[i] + 1.0
            c[i] = b[i - 1] * 2.0
        """, "n: int, a: f32[n], b: f32[n], c: f32[n]")
    best = candidates(an)[0]
    assert [k.statements for k in best.kernels] == [("S0",), ("S1",)]
    assert best.coalesced == (("S0", 0), ("S0", 1), ("S1", 0), ("S1", 1))
    _assert_all_legal(an, candidates(an))


def test_triangular(tmp_path):
    an = _source(tmp_path, """
        for i in range(n):
            x[i] = 0.0
            for j in range(i, n):
                x[i] += a[j][i] * y[j]
        """, "n: int, a: f32[n, n], x: f32[n], y: f32[n]")
    result = candidates(an)
    _assert_all_legal(an, result)
    space, _ = _maps(result[0], "S1")
    assert space.is_equal(isl.Map("[n] -> { S1[i, j] -> [i] : 0 <= i <= j < n }"))
    assert _ref(an, "S1", "a[j][i]") in result[0].coalesced


def test_no_parallel_loop_gives_the_sequential_safety_net(tmp_path):
    an = _source(tmp_path, """
        for i in range(1, n):
            x[i] = x[i - 1] + 1.0
        """, "n: int, x: f32[n]")
    (only,) = candidates(an)
    assert only.origin == "sequential"
    assert [(k.statements, k.n_space) for k in only.kernels] == [(("S0",), 0)]
    _assert_all_legal(an, (only,))


def test_no_no_reuse_reference_falls_back():
    """mm-like: every reference has reuse, so Algorithm 1 has no target; the original
    order and isl's schedule are offered instead."""
    an = _kernel("mm", "c")
    assert {tr.origin for tr in candidates(an)} <= {"original", "isl"}


def test_statement_that_never_runs(tmp_path):
    """A statement with an empty domain has nothing to schedule: it is in no kernel."""
    an = _source(tmp_path, """
        for i in range(n):
            if i < i:
                x[i] = 1.0
            y[i] = x[i]
        """, "n: int, x: f32[n], y: f32[n]")
    result = candidates(an)
    _assert_all_legal(an, result)
    assert all([k.statements for k in tr.kernels] == [("S1",)] for tr in result)


def test_region_that_never_runs(tmp_path):
    an = _source(tmp_path, """
        for i in range(n):
            if i < i:
                x[i] = 1.0
        """, "n: int, x: f32[n]")
    (only,) = candidates(an)
    assert only.origin == "sequential"
    _assert_all_legal(an, (only,))


# ---------------------------------------------------------------- random nests


def test_ranked_enumerates_every_combination_once_in_order():
    costs = [[(0, 1), (0, 3), (1, 0)], [(0, 0), (2, 0)], [(0, 0), (0, 1), (0, 1)]]
    seen = list(algorithm1._ranked(costs))
    assert sorted(seen) == list(itertools.product(range(3), range(2), range(3)))

    def total(idx):
        return tuple(map(sum, zip(*(costs[p][k] for p, k in enumerate(idx)), strict=True)))

    assert [total(i) for i in seen] == sorted(total(i) for i in seen)


def _random_analysis(tmp_path, tree):
    path = tmp_path / f"nest_{next(_counter)}.py"
    path.write_text(render_python(tree))
    try:
        return analyze(build_scop(parse_python_function(str(path), "nest")))
    except isl.Error:
        # a rare isl failure inside the *model* (compute_flow on some strided
        # triangular nests), not the scheduler's business: skip the example
        return None


@settings(max_examples=50, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(tree=nests())
def test_random_nests_get_legal_candidates(tree, tmp_path):
    an = _random_analysis(tmp_path, tree)
    assume(an is not None)
    result = candidates(an)
    _assert_all_legal(an, result)
    assert len(result) <= 8
