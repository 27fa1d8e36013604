"""The conditioning bound of check_program (polygpu/runtime/check.py): a correct result of
an ill-conditioned computation rounded differently -- an FMA-contracted or reordered
unpivoted LU, as nvcc and a GPU plan produce -- passes; a wrong one still fails; a result
that rounding alone could explain but the cap cannot admit is reported as inconclusive.

The "kernels" are hand-written CUDA run on the CPU emulator: one thread computing
PolyBench's lu with ``fma()`` where nvcc contracts (``A[i][j] -= A[i][k] * A[k][j]``), or
with each dot product summed first -- exactly the roundings a device may apply.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from polygpu.codegen.program import Argument, KernelProgram, Launch
from polygpu.frontend import load
from polygpu.model.build import build_scop
from polygpu.runtime import reference
from polygpu.runtime.check import (
    CONDITIONING_K,
    SENSITIVITY_LIMIT,
    check_program,
    parallel_loops,
)

LU = "kernels/polybench/lu.c"
N, SEED = 125, 1  # 27 of the 15500 elements miss the fixed tolerance with FMA contraction

needs_long_double = pytest.mark.skipif(
    bool(reference.long_double_unavailable()), reason="long double is no wider than double")


pytestmark = pytest.mark.usefixtures("private_cache")  # tests/conftest.py


LU_SOURCE = r"""
__global__ void lu_kernel(int n, double *__restrict__ A)
{
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < i; j++) {
            for (int k = 0; k < j; k++)
                UPDATE
            A[i * n + j] /= A[j * n + j];
        }
        for (int j = i; j < n; j++)
            for (int k = 0; k < i; k++)
                UPDATE
    }
    AFTER
}
"""

UPDATES = {
    "plain": "A[i * n + j] -= A[i * n + k] * A[k * n + j];",
    "fma": "A[i * n + j] = fma(-A[i * n + k], A[k * n + j], A[i * n + j]);",
}

DOT_FIRST = r"""
__global__ void lu_kernel(int n, double *__restrict__ A)
{
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < i; j++) {
            double s = 0.0;
            for (int k = 0; k < j; k++)
                s += A[i * n + k] * A[k * n + j];
            A[i * n + j] = (A[i * n + j] - s) / A[j * n + j];
        }
        for (int j = i; j < n; j++) {
            double s = 0.0;
            for (int k = 0; k < i; k++)
                s += A[i * n + k] * A[k * n + j];
            A[i * n + j] -= s;
        }
    }
}
"""


def lu_program(update="fma", after="", source=LU_SOURCE):
    text = source.replace("UPDATE", UPDATES[update]).replace("AFTER", after)
    return KernelProgram("lu", text, (Argument("n", "scalar", "int32", ()),
                                      Argument("A", "array", "float64", ("n", "n"))),
                         ("n",), (Launch("lu_kernel", ("1", "1", "1"), (1, 1, 1)),))


def check_lu(program, **kw):
    scop = build_scop(load(LU))
    return check_program(program, scop, LU, {"n": N}, seed=SEED, **kw)


# --------------------------------------------------------------------------
# The extra references
# --------------------------------------------------------------------------


@needs_long_double
def test_long_double_reference_computes_in_long_double():
    program = load(LU)
    n = 9
    a = np.random.default_rng(0).uniform(0.5, 1.5, (n, n)).astype(np.longdouble)
    got = a.copy()
    run = reference.run_reference(program, {"n": n, "A": got}, arithmetic="long double")
    assert run.precision == "longdouble"
    want = a.copy()  # the same operations in numpy's long double
    for i in range(n):
        for j in range(i):
            for k in range(j):
                want[i, j] -= want[i, k] * want[k, j]
            want[i, j] /= want[j, j]
        for j in range(i, n):
            for k in range(i):
                want[i, j] -= want[i, k] * want[k, j]
    np.testing.assert_array_equal(got, want)
    double = a.astype(np.float64)
    reference.run_reference(program, {"n": n, "A": double})
    assert not np.array_equal(double, got.astype(np.float64))  # float64 rounds elsewhere


def test_long_double_reference_refuses_float64_arrays():
    program = load(LU)
    with pytest.raises(TypeError, match="longdouble"):
        reference.run_reference(program, {"n": 3, "A": np.ones((3, 3))}, arithmetic="long double")


@needs_long_double
def test_directed_rounding_brackets_the_result_on_every_openmp_thread():
    """mm's outer loop runs on OpenMP threads; with positive terms every element rounded
    upward lies above the long double result and every one rounded downward below it --
    so each thread of the pool rounded as asked -- and afterwards the default rounding is
    back (the plain run is bit-identical to before)."""
    program = load("kernels/mm.c")
    loops = parallel_loops(build_scop(program), program)
    assert loops
    n = 45
    rng = np.random.default_rng(3)
    given = {a.name: rng.uniform(0.5, 1.5, (n, n)) for a in program.arrays}

    def run(float_type=np.float64, **kw):
        values = {"n": n} | {k: v.astype(float_type) for k, v in given.items()}
        reference.run_reference(program, values, parallel=loops, **kw)
        return values["c"]

    before = run()
    exact = run(np.longdouble, arithmetic="long double")
    assert (run(rounding="upward") > exact).all()
    assert (run(rounding="downward") < exact).all()
    np.testing.assert_array_equal(run(), before)


@needs_long_double
def test_a_python_reference_runs_on_long_double_arrays_but_not_with_directed_rounding():
    program = load("kernels/mv.py:mv")
    n = 3
    tiny = np.longdouble(2.0) ** -60  # 1 + tiny is a long double, not a double
    values = {"n": n, "a": np.full((n, n), 1 + tiny), "x": np.zeros(n, np.longdouble),
              "y": np.ones(n, np.longdouble)}
    assert reference.run_reference(program, values, arithmetic="long double").precision \
        == "longdouble"
    assert values["x"][0] == 3 + 3 * tiny
    values = {k: v.astype(np.float64) if isinstance(v, np.ndarray) else v
              for k, v in values.items()}
    with pytest.raises(reference.VariantUnavailable, match="C reference"):
        reference.run_reference(program, values, rounding="upward")


# --------------------------------------------------------------------------
# Correct results of an ill-conditioned computation pass
# --------------------------------------------------------------------------


def test_the_plain_lu_passes_by_the_fixed_tolerance_alone(monkeypatch):
    calls = []
    real = reference.run_reference
    monkeypatch.setattr(reference, "run_reference",
                        lambda *a, **kw: calls.append(kw) or real(*a, **kw))
    result = check_lu(lu_program("plain"))
    assert result.ok and result.message.endswith("<= 1e-10)"), result.message
    assert calls == [{}]  # no extra reference run on the common path
    assert result.conditioning == {} and result.threshold == 1e-10


@needs_long_double
@pytest.mark.parametrize("variant", ["fma", "dot product first"])
def test_a_differently_rounded_lu_passes_with_the_conditioning_bound(variant):
    program = lu_program("fma") if variant == "fma" else lu_program(source=DOT_FIRST)
    result = check_lu(program)
    assert result.ok, result.message
    cond = result.conditioning["A"]
    assert cond.beyond_fixed > 0 and cond.accepted == cond.beyond_fixed
    assert result.adaptive_elements == cond.accepted
    assert 0 < cond.largest_term <= CONDITIONING_K * SENSITIVITY_LIMIT["float64"]
    assert "ok with the conditioning bound" in result.message.splitlines()[0]
    assert "within the conditioning bound (largest K * s" in result.message
    assert "long double reference" in result.conditioning_note
    # ok implies every error within the threshold reported
    assert 1e-10 < result.max_relative_error["A"] <= result.threshold

    fixed = check_lu(program, conditioning=False)
    assert not fixed.ok and "the conditioning bound is off" in fixed.message
    assert f"{cond.beyond_fixed} of 15500 written element(s) wrong" in fixed.message


@needs_long_double
def test_elements_held_to_the_cap_are_warned_about():
    scop = build_scop(load(LU))
    result = check_program(lu_program("fma"), scop, LU, {"n": N}, seed=2)
    assert result.ok, result.message
    capped = result.conditioning["A"].ill_conditioned
    assert capped > 0
    assert f", {capped} of them ill-conditioned)" in result.message.splitlines()[0]
    assert f"warning: A: {capped} of them are too ill-conditioned for a fine check" \
        in result.message
    assert result.threshold == 1e-10 + CONDITIONING_K * SENSITIVITY_LIMIT["float64"]


@needs_long_double
def test_without_a_wider_long_double_the_fixed_tolerance_decides_and_says_why(monkeypatch):
    monkeypatch.setattr(reference, "long_double_unavailable",
                        lambda: "long double is no wider than double on this platform")
    result = check_lu(lu_program("fma"))
    assert not result.ok and not result.inconclusive
    assert "no conditioning bound: long double is no wider than double" in result.message


# --------------------------------------------------------------------------
# Wrong results still fail
# --------------------------------------------------------------------------


DROP_ONE_TERM = LU_SOURCE.replace(
    """        for (int j = i; j < n; j++)
            for (int k = 0; k < i; k++)
                UPDATE""",
    """        for (int j = i; j < n; j++)
            for (int k = 0; k < i; k++)
                if (!(i == n - 1 && j == n - 1 && k == i - 1))
                UPDATE""")


@needs_long_double
@pytest.mark.parametrize(("mutant", "where"), [
    (lu_program("fma", "A[n * n - 1] *= 1.001;"), "A[124, 124]"),  # most ill-conditioned
    (lu_program("fma", "A[60 * n + 70] *= 1.001;"), "A[60, 70]"),
    (lu_program("fma", "A[60 * n + 70] *= 1.00002;"), "A[60, 70]"),  # within the cap
    (lu_program("fma", source=DROP_ONE_TERM), "A[124, 124]"),
], ids=["1e-3 at the last element", "1e-3 inside", "2e-5 inside", "one term dropped"])
def test_a_wrong_element_fails_despite_the_conditioning_bound(mutant, where):
    result = check_lu(mutant)
    assert not result.ok and not result.inconclusive, result.message
    first = result.message.splitlines()[1]
    assert f"A: 1 of 15500 written element(s) wrong, first {where}" in first
    assert "(beyond the conditioning bound too)" in first
    cond = result.conditioning["A"]
    assert cond.accepted == cond.beyond_fixed - 1  # the rounding differences still pass


# --------------------------------------------------------------------------
# float32: the sensitivity scaled to float32's rounding
# --------------------------------------------------------------------------

LU32_CUDA = r"""
__global__ void lu_kernel(int n, float *__restrict__ A)
{
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < i; j++) {
            for (int k = 0; k < j; k++)
                A[i * n + j] = fmaf(-A[i * n + k], A[k * n + j], A[i * n + j]);
            A[i * n + j] /= A[j * n + j];
        }
        for (int j = i; j < n; j++)
            for (int k = 0; k < i; k++)
                A[i * n + j] = fmaf(-A[i * n + k], A[k * n + j], A[i * n + j]);
    }
    AFTER
}
"""


@needs_long_double
def test_float32_lu_passes_fails_or_is_inconclusive(tmp_path):
    """PolyBench's lu in float: the float32 rounding of an unpivoted LU is so large that
    some inputs leave elements rounding alone could move beyond the cap (inconclusive, not
    wrong); others pass with the bound; a 1e-2 error fails where the element is
    well-conditioned enough to tell."""
    path = tmp_path / "lu32.c"
    path.write_text((Path(LU).read_text()).replace("double A", "float A"))
    scop = build_scop(load(str(path)))

    def check(n, seed, after=""):
        program = KernelProgram(
            "lu", LU32_CUDA.replace("AFTER", after),
            (Argument("n", "scalar", "int32", ()), Argument("A", "array", "float32", ("n", "n"))),
            ("n",), (Launch("lu_kernel", ("1", "1", "1"), (1, 1, 1)),))
        return check_program(program, scop, str(path), {"n": n}, seed=seed)

    passing = check(21, 1)
    assert passing.ok and passing.adaptive_elements == 1, passing.message
    assert 1e-3 < passing.max_relative_error["A"] <= passing.threshold <= 1e-3 + 32 * 3e-5
    unclear = check(31, 0)
    assert not unclear.ok and unclear.inconclusive, unclear.message
    wrong = check(21, 1, "A[2 * n + 1] *= 1.01f;")
    assert not wrong.ok and not wrong.inconclusive
    assert "A: 1 of 420 written element(s) wrong, first A[2, 1]" in wrong.message
    # further down, float32 rounding alone may move an element by 1e-2: not "wrong"
    unclear = check(21, 1, "A[10 * n + 12] *= 1.01f;")
    assert not unclear.ok and unclear.inconclusive


# --------------------------------------------------------------------------
# Too ill-conditioned to tell
# --------------------------------------------------------------------------

CANCEL_C = """
void cancel(int n, double x[n], double y[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    y[i] = (x[i] + 1e16) - 1e16;
#pragma endscop
}
"""

CANCEL_CUDA = r"""
__global__ void cancel_kernel(int n, double *__restrict__ x, double *__restrict__ y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = BODY;
}
"""


def cancel_program(body):
    return KernelProgram(
        "cancel", CANCEL_CUDA.replace("BODY", body),
        (Argument("n", "scalar", "int32", ()), Argument("x", "array", "float64", ("n",)),
         Argument("y", "array", "float64", ("n",))), ("n",),
        (Launch("cancel_kernel", ("(n + 31) / 32", "1", "1"), (32, 1, 1)),))


@needs_long_double
def test_a_result_rounding_alone_could_explain_is_inconclusive_never_ok(tmp_path):
    """(x + 1e16) - 1e16 keeps nothing of x in float64: the reassociated, exact x differs
    from the reference by as much as float64 rounding moves it, so it is neither accepted
    (beyond the cap) nor called wrong."""
    path = tmp_path / "cancel.c"
    path.write_text(CANCEL_C)
    scop = build_scop(load(str(path)))
    result = check_program(cancel_program("x[i]"), scop, str(path), {"n": 37}, seed=1)
    assert not result.ok and result.inconclusive
    assert "INCONCLUSIVE: inputs too ill-conditioned for a meaningful check" in result.message
    assert result.conditioning["y"].inconclusive == 37
    same = check_program(cancel_program("(x[i] + 1e16) - 1e16"), scop, str(path), {"n": 37},
                         seed=1)
    assert same.ok and same.conditioning == {}


# --------------------------------------------------------------------------
# Outputs computed elsewhere (the API, tuning/api_check.py) judged the same way
# --------------------------------------------------------------------------


@needs_long_double
def test_outputs_of_another_run_are_judged_like_check():
    from polygpu.runtime import inputs
    from polygpu.runtime.check import judge_outputs
    from polygpu.runtime.device import CpuEmulator

    scop = build_scop(load(LU))
    source = load(LU)
    shapes = inputs.array_shapes(source, {"n": N})
    values = inputs.random_values(source, {"n": N}, shapes, np.random.default_rng(SEED))

    def outputs(program):
        run = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in values.items()}
        CpuEmulator().run(program, run)
        return {"A": run["A"]}

    rounded = outputs(lu_program("fma"))
    result = judge_outputs(scop, LU, {"n": N}, values, rounded, seed=SEED, where="the API")
    assert result.ok, result.message
    assert result.conditioning["A"].accepted == result.conditioning["A"].beyond_fixed > 0
    assert result.message.startswith(f"lu at n={N}, seed {SEED}, the API: ok with the "
                                     "conditioning bound")
    fixed = judge_outputs(scop, LU, {"n": N}, values, rounded, conditioning=False)
    assert not fixed.ok  # what a fixed tolerance alone says
    wrong = judge_outputs(scop, LU, {"n": N}, values,
                          outputs(lu_program("fma", "A[60 * n + 70] *= 1.001;")))
    assert not wrong.ok and not wrong.inconclusive
    assert "A: 1 of 15500 written element(s) wrong, first A[60, 70]" in wrong.message
