"""BLAS peers are recognised from the polyhedral model (not from names), and the counts
behind GFLOP/s, GB/s and the roofline fraction are exact.

Every positive match is also checked for *meaning*: the matched calls, run with numpy,
must give what the region's own reference run gives on the same random inputs.
"""

from __future__ import annotations

import itertools
import pickle
import textwrap
from pathlib import Path

import numpy as np
import pytest

from polygpu.frontend import load
from polygpu.model.build import build_scop
from polygpu.model.isl_util import union_of
from polygpu.runtime import inputs
from polygpu.runtime.reference import run_reference
from polygpu.search import metrics, peers
from polygpu.search.metrics import Roofline, Workload, compulsory_bytes, flops
from polygpu.search.peers import BlasCall, Size, apply_numpy, match_blas, time_peer

ROOT = Path(__file__).resolve().parent.parent
_counter = itertools.count()


def c_region(tmp_path: Path, signature: str, body: str, name: str = "k"):
    """A C file with one ``#pragma scop`` region; returns (spec, scop)."""
    path = tmp_path / f"r{next(_counter)}.c"
    path.write_text(f"void {name}({signature})\n{{\n#pragma scop\n"
                    + textwrap.dedent(body) + "#pragma endscop\n}\n")
    return str(path), build_scop(load(str(path)))


def py_region(tmp_path: Path, signature: str, body: str, name: str = "k"):
    """A Python module with one ``@affine`` function; returns (spec, scop)."""
    path = tmp_path / f"r{next(_counter)}.py"
    path.write_text("from __future__ import annotations\n"
                    "from polygpu import affine, f32, f64\n\n"
                    f"@affine\ndef {name}({signature}):\n"
                    + textwrap.indent(textwrap.dedent(body), "    "))
    spec = f"{path}:{name}"
    return spec, build_scop(load(spec))


def assert_calls_compute_region(spec: str, params: dict[str, int], seed: int = 0):
    """The matched calls, run with numpy, reproduce the region's reference run."""
    program = load(spec)
    calls = match_blas(build_scop(program))
    assert calls
    ints = inputs.integer_parameters(program, params)
    values = inputs.random_values(program, ints, inputs.array_shapes(program, ints),
                                  np.random.default_rng(seed))
    values = {k: v.astype(np.float64) if isinstance(v, np.ndarray) else v
              for k, v in values.items()}
    expected = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in values.items()}
    run_reference(program, expected)
    got = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in values.items()}
    apply_numpy(calls, params, got)
    for a in program.arrays:
        np.testing.assert_allclose(got[a.name], expected[a.name], rtol=1e-12,
                                   err_msg=f"array {a.name} of {spec}")


# --------------------------------------------------------------------------
# The shipped kernels, C and Python
# --------------------------------------------------------------------------

SHIPPED = {
    "mv": [("gemv", False, 0.0, ("a", "y", "x"))],
    "tmv": [("gemv", True, 0.0, ("a", "y", "x"))],
    "mvt": [("gemv", False, 1.0, ("a", "y1", "x1")), ("gemv", True, 1.0, ("a", "y2", "x2"))],
    "mm": [("gemm", False, 1.0, ("a", "b", "c"))],
}


@pytest.mark.parametrize("language", ["c", "py"])
@pytest.mark.parametrize("kernel", sorted(SHIPPED))
def test_shipped_kernels_match(kernel, language):
    spec = f"kernels/{kernel}.c" if language == "c" else f"kernels/{kernel}.py:{kernel}"
    calls = match_blas(build_scop(load(str(ROOT / spec.split(":")[0])
                                       + (f":{kernel}" if language == "py" else ""))))
    got = [(c.routine, c.trans_a, c.beta, (c.a, c.b, c.c)) for c in calls]
    assert got == SHIPPED[kernel]
    for c in calls:
        assert c.dtype == "float32" and not c.trans_b
        assert c.alpha_const == 1.0 and c.alpha_scalars == ()
        assert c.sizes({"n": 7}) == ((7, 7) if c.routine == "gemv" else (7, 7, 7))
    assert [c.name for c in calls] == ["sgemm" if kernel == "mm" else "sgemv"] * len(calls)


@pytest.mark.parametrize("spec", ["kernels/mv.c", "kernels/tmv.c", "kernels/mvt.c",
                                  "kernels/mm.c", "kernels/mv.py:mv", "kernels/tmv.py:tmv",
                                  "kernels/mvt.py:mvt", "kernels/mm.py:mm"])
def test_shipped_calls_compute_the_region(spec):
    assert_calls_compute_region(str(ROOT / spec), {"n": 13})


@pytest.mark.parametrize("spec", ["kernels/jacobi1d.c", "kernels/conv1d.c"])
def test_shipped_stencils_do_not_match(spec):
    assert match_blas(build_scop(load(str(ROOT / spec)))) == ()


def test_describe():
    (call,) = match_blas(build_scop(load(str(ROOT / "kernels/tmv.c"))))
    assert call.describe() == "sgemv x := a^T y (m=n, n=n)"
    assert call.describe({"n": 64}) == "sgemv x := a^T y (m=64, n=64)"
    (mm,) = match_blas(build_scop(load(str(ROOT / "kernels/mm.c"))))
    assert mm.describe({"n": 4}) == "sgemm c := a b + c (m=4, n=4, k=4)"
    assert mm.flops({"n": 4}) == 2 * 4 ** 3


# --------------------------------------------------------------------------
# Unseen variants: other names, Python, double precision, other loop orders/layouts
# --------------------------------------------------------------------------


def test_renamed_double_rectangular_mv_with_init(tmp_path):
    spec, scop = c_region(tmp_path, "int rows, int cols, double M[rows][cols], "
                          "double v[cols], double out[rows]", """
        for (int r = 0; r < rows; r++) {
          out[r] = 0.0;
          for (int q = 0; q < cols; q++)
            out[r] += M[r][q] * v[q];
        }
    """, name="matvec")
    (call,) = match_blas(scop)
    assert (call.name, call.trans_a, call.beta) == ("dgemv", False, 0.0)
    assert (call.a, call.b, call.c) == ("M", "v", "out")
    assert call.sizes({"rows": 5, "cols": 3}) == (5, 3)
    assert call.statements == ("S0", "S1")
    assert_calls_compute_region(spec, {"rows": 9, "cols": 4})


def test_python_f64_transposed_mv_interchanged_loops(tmp_path):
    spec, scop = py_region(tmp_path, "m: int, n: int, W: f64[n, m], u: f64[n], z: f64[m]", """
        for j in range(n):
            for i in range(m):
                z[i] += W[j, i] * u[j]
    """)
    (call,) = match_blas(scop)
    assert (call.name, call.trans_a, call.beta) == ("dgemv", True, 1.0)
    assert call.sizes({"m": 6, "n": 4}) == (6, 4)
    assert_calls_compute_region(spec, {"m": 6, "n": 4})


def test_update_spelled_as_assignment_and_scaled(tmp_path):
    spec, scop = c_region(tmp_path, "int n, float s, float A[n][n], float x[n], float y[n]", """
        for (int i = 0; i < n; i++)
          for (int j = 0; j < n; j++)
            y[i] = y[i] - 2.0f * (s * A[i][j]) * x[j];
    """)
    (call,) = match_blas(scop)
    assert (call.alpha_const, call.alpha_scalars, call.beta) == (-2.0, ("s",), 1.0)
    assert call.describe() == "sgemv y := -2 s A x + y (m=n, n=n)"
    assert_calls_compute_region(spec, {"n": 7})


def test_sub_box_of_larger_arrays(tmp_path):
    spec, scop = c_region(tmp_path, "int n, float A[n][n], float x[n], float y[n]", """
        for (int i = 0; i < n - 1; i++)
          for (int j = 0; j < n; j++)
            y[i] += A[i][j] * x[j];
    """)
    (call,) = match_blas(scop)
    assert str(call.m) == "n - 1" and call.sizes({"n": 5}) == (4, 5)
    assert call.operand_shapes({"n": 5}) == {"A": (5, 5), "x": (5,), "y": (5,)}
    assert_calls_compute_region(spec, {"n": 6})


@pytest.mark.parametrize("order", ["ijk", "ikj", "kij", "jki"])
def test_mm_any_loop_order_with_init(tmp_path, order):
    loops = {"i": "M", "j": "N", "k": "K"}
    body = ""
    for depth, it in enumerate(order):
        body += "  " * depth + f"for (int {it} = 0; {it} < {loops[it]}; {it}++)\n"
    body += "  " * 3 + "C[i][j] += A[i][k] * B[k][j];\n"
    init = "for (int i = 0; i < M; i++)\n  for (int j = 0; j < N; j++)\n    C[i][j] = 0;\n"
    spec, scop = c_region(tmp_path, "int M, int N, int K, double A[M][K], double B[K][N], "
                          "double C[M][N]", init + body)
    (call,) = match_blas(scop)
    assert (call.name, call.trans_a, call.trans_b, call.beta) == ("dgemm", False, False, 0.0)
    assert call.sizes({"M": 2, "N": 3, "K": 4}) == (2, 3, 4)
    assert_calls_compute_region(spec, {"M": 5, "N": 3, "K": 4})


@pytest.mark.parametrize("a_ref, b_ref, trans", [
    ("A[k][i]", "B[k][j]", (True, False)),
    ("A[i][k]", "B[j][k]", (False, True)),
    ("A[k][i]", "B[j][k]", (True, True)),
])
def test_mm_transposed_layouts(tmp_path, a_ref, b_ref, trans):
    spec, scop = c_region(tmp_path, "int n, float A[n][n], float B[n][n], float C[n][n]", f"""
        for (int i = 0; i < n; i++)
          for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++)
              C[i][j] += {a_ref} * {b_ref};
    """)
    (call,) = match_blas(scop)
    assert (call.trans_a, call.trans_b) == trans
    assert_calls_compute_region(spec, {"n": 6})


def test_mm_into_transposed_output(tmp_path):
    """C[j][i] += A[i][k] B[k][j] is C = B^T A^T: the roles come from C's subscripts."""
    spec, scop = c_region(tmp_path, "int n, float A[n][n], float B[n][n], float C[n][n]", """
        for (int i = 0; i < n; i++)
          for (int j = 0; j < n; j++)
            for (int k = 0; k < n; k++)
              C[j][i] += A[i][k] * B[k][j];
    """)
    (call,) = match_blas(scop)
    assert (call.a, call.b, call.trans_a, call.trans_b) == ("B", "A", True, True)
    assert_calls_compute_region(spec, {"n": 5})


def test_fused_independent_gemvs_and_dependent_sequence(tmp_path):
    # mvt fused into one nest: the two products interleave but share no written array
    spec, scop = c_region(tmp_path, "int n, float a[n][n], float x1[n], float x2[n], "
                          "float y1[n], float y2[n]", """
        for (int i = 0; i < n; i++)
          for (int j = 0; j < n; j++) {
            x1[i] += a[i][j] * y1[j];
            x2[i] += a[j][i] * y2[j];
          }
    """)
    assert [c.trans_a for c in match_blas(scop)] == [False, True]
    assert_calls_compute_region(spec, {"n": 6})
    # z = B (A x): the second product reads what the first wrote, after it is complete
    spec, scop = c_region(tmp_path, "int n, float A[n][n], float B[n][n], float x[n], "
                          "float y[n], float z[n]", """
        for (int i = 0; i < n; i++) {
          y[i] = 0;
          for (int j = 0; j < n; j++)
            y[i] += A[i][j] * x[j];
        }
        for (int i = 0; i < n; i++) {
          z[i] = 0;
          for (int j = 0; j < n; j++)
            z[i] += B[i][j] * y[j];
        }
    """)
    calls = match_blas(scop)
    assert [(c.a, c.b, c.c, c.beta) for c in calls] == [("A", "x", "y", 0.0),
                                                         ("B", "y", "z", 0.0)]
    assert_calls_compute_region(spec, {"n": 6})


def test_init_between_two_updates_of_one_output(tmp_path):
    spec, scop = c_region(tmp_path, "int n, float A[n][n], float B[n][n], float x[n], "
                          "float y[n]", """
        for (int i = 0; i < n; i++)
          for (int j = 0; j < n; j++)
            y[i] += A[i][j] * x[j];
        for (int i = 0; i < n; i++)
          y[i] = 0;
        for (int i = 0; i < n; i++)
          for (int j = 0; j < n; j++)
            y[i] += B[i][j] * x[j];
    """)
    assert [(c.a, c.beta) for c in match_blas(scop)] == [("A", 1.0), ("B", 0.0)]
    assert_calls_compute_region(spec, {"n": 5})


# --------------------------------------------------------------------------
# Other computations must not match
# --------------------------------------------------------------------------

MV_SIG = "int n, float A[n][n], float x[n], float y[n], float z[n]"
NOT_BLAS = {
    "vector indexed by the output iterator": """
        for (int i = 0; i < n; i++)
          for (int j = 0; j < n; j++)
            y[i] += A[i][j] * x[i];
    """,
    "a matrix times its transpose element": """
        for (int i = 0; i < n; i++)
          for (int j = 0; j < n; j++)
            y[i] += A[i][j] * A[j][i];
    """,
    "an extra statement in the nest": """
        for (int i = 0; i < n; i++) {
          y[i] = 0;
          for (int j = 0; j < n; j++)
            y[i] += A[i][j] * x[j];
          z[i] = 2 * y[i];
        }
    """,
    "triangular": """
        for (int i = 0; i < n; i++)
          for (int j = 0; j <= i; j++)
            y[i] += A[i][j] * x[j];
    """,
    "guarded diagonal": """
        for (int i = 0; i < n; i++)
          for (int j = 0; j < n; j++)
            if (i != j)
              y[i] += A[i][j] * x[j];
    """,
    "starting at 1": """
        for (int i = 0; i < n; i++)
          for (int j = 1; j < n; j++)
            y[i] += A[i][j] * x[j];
    """,
    "output read as input": """
        for (int i = 0; i < n; i++)
          for (int j = 0; j < n; j++)
            y[i] += A[i][j] * y[j];
    """,
    "a sum, not a product": """
        for (int i = 0; i < n; i++)
          for (int j = 0; j < n; j++)
            y[i] += A[i][j] + x[j];
    """,
    "three array factors": """
        for (int i = 0; i < n; i++)
          for (int j = 0; j < n; j++)
            y[i] += A[i][j] * x[j] * z[j];
    """,
    "no accumulation": """
        for (int i = 0; i < n; i++)
          for (int j = 0; j < n; j++)
            y[i] = A[i][j] * x[j];
    """,
    "initialised to one": """
        for (int i = 0; i < n; i++) {
          y[i] = 1;
          for (int j = 0; j < n; j++)
            y[i] += A[i][j] * x[j];
        }
    """,
    "zeroed after the product": """
        for (int i = 0; i < n; i++) {
          for (int j = 0; j < n; j++)
            y[i] += A[i][j] * x[j];
          y[i] = 0;
        }
    """,
    "shifted subscript": """
        for (int i = 0; i < n; i++)
          for (int j = 0; j < n - 1; j++)
            y[i] += A[i][j + 1] * x[j];
    """,
    "out of the arrays' bounds": """
        for (int i = 0; i < n + 1; i++)
          for (int j = 0; j < n; j++)
            y[i] += A[i][j] * x[j];
    """,
    "a 1-d stencil": """
        for (int i = 1; i < n - 1; i++)
          y[i] = 0.5f * (x[i - 1] + x[i + 1]);
    """,
    "division": """
        for (int i = 0; i < n; i++)
          for (int j = 0; j < n; j++)
            y[i] += A[i][j] / x[j];
    """,
    "dependent products fused": """
        for (int i = 0; i < n; i++)
          for (int j = 0; j < n; j++) {
            y[i] += A[i][j] * x[j];
            z[i] += A[i][j] * y[j];
          }
    """,
}


@pytest.mark.parametrize("case", sorted(NOT_BLAS))
def test_other_computations_do_not_match(tmp_path, case):
    _, scop = c_region(tmp_path, MV_SIG, NOT_BLAS[case])
    assert match_blas(scop) == ()


@pytest.mark.parametrize("signature, body", [
    # mixed precision
    ("int n, double A[n][n], float x[n], float y[n]",
     "for (int i = 0; i < n; i++)\n  for (int j = 0; j < n; j++)\n    y[i] += A[i][j] * x[j];\n"),
    # integers
    ("int n, int A[n][n], int x[n], int y[n]",
     "for (int i = 0; i < n; i++)\n  for (int j = 0; j < n; j++)\n    y[i] += A[i][j] * x[j];\n"),
    # an integer parameter as a factor is not alpha (and a product with n is not BLAS)
    ("int n, float A[n][n], float x[n], float y[n]",
     "for (int i = 0; i < n; i++)\n  for (int j = 0; j < n; j++)\n"
     "    y[i] += A[i][j] * x[j] * j;\n"),
    # mm with a fourth loop (a batch over which C accumulates)
    ("int n, float A[n][n], float B[n][n], float C[n][n]",
     "for (int t = 0; t < n; t++)\n for (int i = 0; i < n; i++)\n"
     "  for (int j = 0; j < n; j++)\n   for (int k = 0; k < n; k++)\n"
     "    C[i][j] += A[i][k] * B[k][j];\n"),
    # C[i][j] += A[i][j] * B[j][i]: no reduction iterator
    ("int n, float A[n][n], float B[n][n], float C[n][n]",
     "for (int i = 0; i < n; i++)\n  for (int j = 0; j < n; j++)\n"
     "    C[i][j] += A[i][j] * B[j][i];\n"),
    # C[i][i] += ...: the output is a diagonal
    ("int n, float A[n][n], float B[n][n], float C[n][n]",
     "for (int i = 0; i < n; i++)\n  for (int j = 0; j < n; j++)\n"
     "   for (int k = 0; k < n; k++)\n    C[i][i] += A[i][k] * B[k][j];\n"),
])
def test_other_signatures_do_not_match(tmp_path, signature, body):
    _, scop = c_region(tmp_path, signature, body)
    assert match_blas(scop) == ()


# --------------------------------------------------------------------------
# Sizes, pickling, timing without a GPU, command line
# --------------------------------------------------------------------------


def test_size_text_and_value():
    s = Size(-1, (("n", 2), ("m", -1)))
    assert str(s) == "2*n - m - 1" and s({"n": 5, "m": 3}) == 6
    assert str(Size(4)) == "4" and str(Size(0, (("n", -1),))) == "-n"


def test_calls_pickle_for_the_timing_child():
    calls = match_blas(build_scop(load(str(ROOT / "kernels/mvt.c"))))
    assert pickle.loads(pickle.dumps(calls)) == calls


def test_time_peer_without_calls_or_library():
    assert time_peer((), {"n": 8}) is None
    calls = match_blas(build_scop(load(str(ROOT / "kernels/mv.c"))))
    result = time_peer(calls, {"n": 8}, library="none-such")
    assert not result.ok and result.median_ms is None and "none-such" in result.reason
    assert result.calls == ("sgemv x := a y (m=8, n=8)",)
    result = time_peer(calls, {"n": 8}, dtype="float64", repeats=2, warmup=1)
    if not result.ok:  # no GPU here: the reason names what was missing
        assert result.reason and result.times_ms == ()
    assert result.calls == ("dgemv x := a y (m=8, n=8)",)


def test_command_line_match_only(capsys):
    assert peers.main([str(ROOT / "kernels/mm.py:mm"), "-p", "n=16", "--no-time"]) == 0
    assert '"sgemm c := a b + c (m=16, n=16, k=16)"' in capsys.readouterr().out


# --------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["kernels/mm.c", "kernels/mm.py:mm"])
def test_flops_mm(spec):
    scop = build_scop(load(str(ROOT / spec)))
    assert flops(scop, {"n": 8}) == 2 * 8 ** 3  # a multiply-add counts 2


def test_flops_mv_with_init_and_conventions(tmp_path):
    scop = build_scop(load(str(ROOT / "kernels/mv.c")))
    assert flops(scop, {"n": 8}) == 2 * 8 * 8  # the init x[i] = 0 is no operation
    _, scop = c_region(tmp_path, "int n, float a[n], float b[n], int c[n], double d[n]", """
        for (int i = 1; i < n; i++) {
          b[i] = 0.5f * (a[i] + a[i - 1]) / 3;
          c[i] = c[i - 1] * 2 + i;
          d[i] = fma(d[i], 2.0, sqrt(d[i - 1])) - (d[i] > 0 ? -d[i] : d[i] * d[i]);
          b[i] *= -a[i];
        }
    """)
    # 3 + 0 (integer) + (fma 2, sqrt 1, '-' 1, the costlier branch 1) + (update 1)
    assert [metrics.statement_flops(s.body, scop) for s in scop.statements] == [3, 0, 5, 1]
    assert flops(scop, {"n": 10}) == 9 * (3 + 5 + 1)


def test_flops_counts_exact_instances(tmp_path):
    _, scop = c_region(tmp_path, "int n, float a[n][n]", """
        for (int i = 0; i < n; i++)
          for (int j = 0; j <= i; j += 2)
            a[i][j] = a[i][j] * a[j][i];
    """)
    n = 9
    assert flops(scop, {"n": n}) == sum(len(range(0, i + 1, 2)) for i in range(n))


@pytest.mark.parametrize("kernel", ["mv", "tmv"])
def test_compulsory_bytes_mv_tmv(kernel):
    scop = build_scop(load(str(ROOT / f"kernels/{kernel}.c")))
    n = 11
    # a and y loaded once, x stored once; x's reads see the region's own zeros
    assert compulsory_bytes(scop, {"n": n}) == 4 * (n * n + 2 * n)
    assert metrics.array_footprints(scop, {"n": n}) == {
        "a": (n * n, 0), "y": (n, 0), "x": (0, n)}


def test_compulsory_bytes_accumulating_kernels():
    n = 6
    mvt = build_scop(load(str(ROOT / "kernels/mvt.py:mvt")))
    assert compulsory_bytes(mvt, {"n": n}) == 4 * (n * n + 6 * n)  # x1, x2 read and written
    mm = build_scop(load(str(ROOT / "kernels/mm.c")))
    assert compulsory_bytes(mm, {"n": n}) == 4 * 4 * n * n
    conv = build_scop(load(str(ROOT / "kernels/conv1d.c")))
    assert compulsory_bytes(conv, {"n": n}) == 4 * (5 + (n + 4) + n)


def test_compulsory_bytes_double_and_partial_reads(tmp_path):
    _, scop = c_region(tmp_path, "int n, double a[n], double b[2 * n]", """
        for (int i = 0; i < n; i++)
          b[2 * i] = a[i];
        for (int i = 0; i < 2 * n; i++)
          a[i / 2] += b[i];
    """)
    n = 5
    # a: n loaded, n stored; b: the n odd elements are read before any write, all n even
    # ones are written (the reads of even elements see the region's own values)
    assert metrics.array_footprints(scop, {"n": n}) == {"a": (n, n), "b": (n, n)}
    assert compulsory_bytes(scop, {"n": n}) == 8 * 4 * n


@pytest.mark.parametrize("spec", ["kernels/mv.c", "kernels/mvt.c", "kernels/jacobi1d.c",
                                  "kernels/conv1d.c"])
def test_exposed_reads_two_ways_agree(spec):
    scop = build_scop(load(str(ROOT / spec)))
    point = metrics.parameter_set(scop, {"n": 7})
    space = scop.context.get_space()

    def fixed(maps):
        return union_of([m.intersect_params(point) for m in maps], space)

    reads = fixed([a.relation for a in scop.accesses if a.kind == "read"])
    writes = fixed([a.relation for a in scop.accesses if a.kind == "write"])
    schedule = fixed([s.schedule for s in scop.statements])
    assert metrics.exposed_reads(reads, writes, schedule).is_equal(
        metrics.exposed_reads_by_order(reads, writes, schedule))


def test_metrics_need_every_parameter():
    scop = build_scop(load(str(ROOT / "kernels/mv.c")))
    with pytest.raises(Exception, match="missing parameter n"):
        flops(scop, {})
    with pytest.raises(Exception, match="extent smaller than 1"):
        compulsory_bytes(scop, {"n": 0})


def test_roofline_arithmetic():
    roof = Roofline()
    assert (roof.peak_bandwidth_gbs, roof.peak_gflops, roof.name) == (3000.0, 51000.0, "H100")
    # mv at n = 4096: memory bound
    n = 4096
    work = Workload(flops=2 * n * n, bytes=4 * (n * n + 2 * n))
    best = work.bytes / 3000e9 * 1e3
    assert roof.min_time_ms(work.flops, work.bytes) == pytest.approx(best)
    perf = roof.of(2 * best, work)
    assert perf.fraction == pytest.approx(0.5)
    assert perf.gbs == pytest.approx(1500.0)
    assert perf.gflops == pytest.approx(work.flops / (2 * best * 1e-3) / 1e9)
    assert perf.bound == "memory"
    # a compute-bound workload on a toy machine (100 GB/s, 1 TFLOP/s)
    small = Roofline(peak_bandwidth_gbs=100.0, peak_gflops=1000.0, name="toy")
    p = small.evaluate(time_ms=4.0, flops=2 * 10 ** 9, nbytes=10 ** 8)
    assert p.roofline_ms == pytest.approx(2.0)  # 2 GFLOP at 1 TFLOP/s; 0.1 GB takes 1 ms
    assert (p.fraction, p.bound) == (pytest.approx(0.5), "compute")
    assert (p.gflops, p.gbs) == (pytest.approx(500.0), pytest.approx(25.0))
    with pytest.raises(ValueError):
        small.evaluate(0.0, 1, 1)


def test_workload_of_shipped_kernel():
    scop = build_scop(load(str(ROOT / "kernels/mm.c")))
    work = metrics.workload(scop, {"n": 8})
    assert work == Workload(2 * 8 ** 3, 4 * 4 * 64)
    assert work.intensity == pytest.approx(1.0)  # 1024 flops on 1024 bytes


def test_blas_call_flops_agree_with_metrics():
    for k in ("mv", "tmv", "mvt", "mm"):
        scop = build_scop(load(str(ROOT / f"kernels/{k}.c")))
        calls: tuple[BlasCall, ...] = match_blas(scop)
        assert sum(c.flops({"n": 9}) for c in calls) == flops(scop, {"n": 9})
