"""Local arrays (issue 23's temporaries): arrays declared in the function before the
region (C) or with ``local`` at the top of its body (Python) are region-local --
allocated by the runtime, privatised where each iteration writes before it reads, never
compared by the checker, refused where the region reads an element before writing it --
and exact on the emulator."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from polygpu.errors import UnsupportedError
from polygpu.frontend import load
from polygpu.model.build import build_scop
from polygpu.pipeline import compile_region, prepare
from polygpu.runtime.check import check_program
from polygpu.search.metrics import compulsory_bytes

ROW_BUFFER = """
void rowbuf(int n, int m, float a[n][m], float b[n][m])
{
  float t[m];
#pragma scop
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < m; j++)
      t[j] = a[i][j] * 2.0f;
    for (int j = 0; j < m; j++)
      b[i][j] = t[j] + t[m - 1 - j];
  }
#pragma endscop
}
"""

# written by one loop nest, read reversed by the next: no reuse to privatise, the local
# array itself in device memory between two kernels
BETWEEN = """
void between(int n, double a[n][4], double b[n][4])
{
  double w[n][4];
#pragma scop
  for (int i = 0; i < n; i++)
    for (int k = 0; k < 4; k++)
      w[i][k] = a[i][k] + 1.0;
  for (int i = 0; i < n; i++)
    for (int k = 0; k < 4; k++)
      b[i][k] = w[n - 1 - i][3 - k] * a[i][k];
#pragma endscop
}
"""


def _write(tmp_path, text: str, name: str = "k.c") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def _checked(spec: str, sizes: dict):
    compiled = compile_region(spec, params=sizes)
    result = check_program(compiled.program, compiled.source_scop, spec, sizes, seed=5)
    assert result.ok, result.message
    return compiled


def test_a_row_buffer_is_a_local_array_privatised_per_row_and_exact(tmp_path):
    spec = _write(tmp_path, ROW_BUFFER)
    program = load(spec)
    assert [a.name for a in program.local_arrays] == ["t"]
    assert [a.name for a in program.arrays] == ["a", "b"]  # the caller's arguments
    scop = build_scop(program)
    assert scop.array("t").kind == "local" and "t" in {a.name for a in scop.program_arrays}
    compiled = _checked(spec, {"n": 37, "m": 23})
    (expanded,) = compiled.expansion.expanded
    assert (expanded.array, expanded.loops, expanded.copy_back) == ("t", ("i",), ())
    arguments = {a.name: a.kind for a in compiled.program.arguments}
    assert arguments["a"] == arguments["b"] == "array"
    assert arguments[expanded.name] == "scratch" and "t" not in arguments
    # the roofline counts a and b once each, nothing of the buffer
    assert compulsory_bytes(scop, {"n": 37, "m": 23}) == 2 * 37 * 23 * 4


def test_a_local_array_between_two_nests_lives_in_device_memory(tmp_path):
    spec = _write(tmp_path, BETWEEN)
    compiled = _checked(spec, {"n": 53})
    assert not compiled.expansion.expanded
    assert {a.name: a.kind for a in compiled.program.arguments}["w"] == "scratch"
    assert len(compiled.kernels) == 2


@pytest.mark.parametrize(("body", "message"), [
    # reads t[i - 1] before writing it at i = 1
    ("""void f(int n, float a[n], float b[n])
        {
          float t[n];
        #pragma scop
          for (int i = 1; i < n; i++) {
            t[i] = a[i];
            b[i] = t[i - 1];
          }
        #pragma endscop
        }""", r"k\.c:7: 't' is read before the region writes it .*t\[0\]"),
    ("""void f(int n, float a[n], float b[n])
        {
          float t[4] = {0, 0, 0, 0};
        #pragma scop
          for (int i = 0; i < n; i++)
            b[i] = a[i] + t[i % 4];
        #pragma endscop
        }""", r"k\.c:6: local array 't' has an initialiser"),
    ("""void f(int n, float a[n], float b[n])
        {
          float t[n];
          for (int i = 0; i < n; i++)
            t[i] = 0;
        #pragma scop
          for (int i = 0; i < n; i++)
            b[i] = a[i] + t[i];
        #pragma endscop
        }""", r"k\.c:5: .*before #pragma scop writes 't' \(a local array of the region\)"),
    ("""void f(int n, float a[n], float b[n])
        {
        #pragma scop
          for (int i = 0; i < n; i++) {
            float t[2];
            b[i] = a[i];
          }
        #pragma endscop
        }""", r"k\.c:5: local array or pointer 't' inside #pragma scop: declare local "
              r"arrays before the region"),
])
def test_local_arrays_the_region_cannot_use_are_refused_at_their_line(tmp_path, body,
                                                                      message):
    spec = _write(tmp_path, body)
    with pytest.raises(UnsupportedError, match=message):
        prepare(spec, params={"n": 9})


def test_an_unused_initialised_local_array_is_none_of_polygpus_business(tmp_path):
    spec = _write(tmp_path, """
        void f(int n, float a[n], float b[n])
        {
          float lut[2] = {1, 2};
        #pragma scop
          for (int i = 0; i < n; i++)
            b[i] = a[i] * 3.0f;
        #pragma endscop
          lut[0] = lut[1];
        }""")
    assert not load(spec).local_arrays
    _checked(spec, {"n": 11})


def test_the_command_line_checks_a_region_with_a_local_array(tmp_path):
    spec = _write(tmp_path, ROW_BUFFER)
    run = subprocess.run([sys.executable, "-m", "polygpu", "check", spec, "-p", "n=29",
                          "-p", "m=17"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "ok" in run.stdout
    bad = _write(tmp_path, """
        void f(int n, float a[n], float b[n])
        {
          float t[n];
        #pragma scop
          for (int i = 0; i < n; i++)
            b[i] = t[i];
        #pragma endscop
        }""", "bad.c")
    run = subprocess.run([sys.executable, "-m", "polygpu", "check", bad, "-p", "n=8"],
                         capture_output=True, text=True)
    assert run.returncode == 2 and "bad.c:7: 't' is read before" in run.stderr
    assert "Traceback" not in run.stderr


def test_a_python_kernels_local_array_is_the_same_region_local_buffer(tmp_path):
    """``t = local(f32[m])`` at the top of an ``@affine`` body: the same local array as
    C's (privatised, a scratch argument, exact); run as Python, ``local`` gives a
    NaN-filled NumPy array (the reference never reads it before writing)."""
    import numpy as np

    from polygpu import f32, local

    program = load("kernels/row_buffer.py:row_buffer")
    assert [a.name for a in program.local_arrays] == ["t"]
    assert [a.name for a in program.arrays] == ["a", "b"]
    compiled = _checked("kernels/row_buffer.py:row_buffer", {"n": 19, "m": 13})
    assert [e.array for e in compiled.expansion.expanded] == ["t"]
    fresh = local(f32[3, 2])
    assert fresh.shape == (3, 2) and fresh.dtype == np.float32 and np.isnan(fresh).all()


@pytest.mark.parametrize(("body", "message"), [
    ("""    for i in range(n):
        t = local(f32[n])
        b[i] = a[i]""", r"k\.py:9: local arrays are declared at the top level"),
    ("""    t = local(f32[n])
    for i in range(n):
        b[i] = t[i]""", r"k\.py:10: 't' is read before the region writes it"),
    ("""    t = local(n)
    for i in range(n):
        b[i] = a[i]""", r"k\.py:8: a local array is declared as NAME = local"),
])
def test_python_local_arrays_used_wrongly_are_refused_at_their_line(tmp_path, body,
                                                                    message):
    path = tmp_path / "k.py"
    path.write_text("from __future__ import annotations\n\n"
                    "from polygpu import affine, f32, local\n\n\n"
                    "@affine\n"
                    "def f(n: int, a: f32[n], b: f32[n]):\n" + body + "\n")
    with pytest.raises(UnsupportedError, match=message):
        prepare(f"{path}:f", params={"n": 9})


BIG = """
void big(int n, int m, double a[n][m], double b[n][m])
{
  double w[n][m];
#pragma scop
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      w[i][j] = a[i][j] * 2.0;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < m; j++)
      b[i][j] = w[n - 1 - i][j] + 1.0;
#pragma endscop
}
"""


def test_the_reference_gives_large_local_arrays_a_stack_of_their_size(tmp_path):
    """C puts local arrays on the stack: 16 MB of them passes the 8 MB a process's
    main thread has (a crash, formerly); the reference runs the function on a thread
    whose stack is sized for them -- exact -- and refuses beyond its limit."""
    import numpy as np

    from polygpu.errors import PolygpuError
    from polygpu.runtime import reference

    spec = _write(tmp_path, BIG)
    program = load(spec)
    rng = np.random.default_rng(1)
    values = {"n": 2000, "m": 1000, "a": rng.random((2000, 1000)),
              "b": np.zeros((2000, 1000))}
    reference.run_reference(program, values)
    assert np.array_equal(values["b"], values["a"][::-1] * 2.0 + 1.0)
    small = {"n": 3, "m": 2, "a": np.ones((3, 2)), "b": np.zeros((3, 2))}
    limit = reference.LOCAL_STACK_LIMIT
    try:
        reference.LOCAL_STACK_LIMIT, trusted = 16, reference.LOCAL_STACK_TRUSTED
        reference.LOCAL_STACK_TRUSTED = 8
        with pytest.raises(PolygpuError, match="local arrays of big take"):
            reference.run_reference(program, small)
    finally:
        reference.LOCAL_STACK_LIMIT, reference.LOCAL_STACK_TRUSTED = limit, trusted
