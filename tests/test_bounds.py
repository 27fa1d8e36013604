"""Accesses proven inside their arrays (``polygpu/model/bounds.py``).

With parameter values (``compile -p``, ``check``, the API at a call's sizes) any access
outside its array at those sizes is a ``PolygpuError`` at the access's line; without
them only an access outside every time it runs is, the rest stay ``analyze`` warnings.
The CLI cases go through the real command line (exit status 2, one ``FILE:LINE`` line,
nothing run).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from polygpu.errors import PolygpuError
from polygpu.frontend import load
from polygpu.model.bounds import _CACHE, check_bounds, require_in_bounds
from polygpu.model.build import build_scop

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "kernels"
CATALOG = json.loads((KERNELS / "catalog.json").read_text())


def polygpu(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "polygpu", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def c_file(tmp_path: Path, signature: str, body: str, name: str = "k.c") -> Path:
    """``void f(SIGNATURE)`` with BODY as its region; the body's first line is line 4."""
    path = tmp_path / name
    path.write_text(f"void f({signature})\n{{\n#pragma scop\n"
                    + textwrap.dedent(body).strip("\n") + "\n#pragma endscop\n}\n")
    return path


def py_file(tmp_path: Path, signature: str, body: str) -> Path:
    """``def k(SIGNATURE)`` with BODY; the body's first line is line 6."""
    path = tmp_path / "k.py"
    path.write_text("from polygpu import affine, f32, f64\n\n\n@affine\n"
                    f"def k({signature}):\n"
                    + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") + "\n")
    return path


def scop_of(path: Path, function: str | None = None):
    return build_scop(load(str(path), function))


def refused(result: subprocess.CompletedProcess, path: Path, line: int) -> str:
    """The single error line of a refused command (exit 2, nothing run)."""
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    err = result.stderr.rstrip("\n")
    assert "\n" not in err and "Traceback" not in err, err
    assert err.startswith(f"{path}:{line}: "), err
    return err


# ------------------------------------------------------------------ constant extent


def test_constant_extent_smaller_than_the_loop(tmp_path):
    src = c_file(tmp_path, "int n, float a[10], float b[n]", """
        for (int i = 0; i < n; i++)
          b[i] = a[i];
    """)
    scop = scop_of(src)
    # fine for n <= 10, so only a warning without sizes ...
    (warning,) = require_in_bounds(scop)
    assert not warning.always and "a[10]" in str(warning)
    assert require_in_bounds(scop, {"n": 10}) == ()
    # ... and an error at any n > 10
    with pytest.raises(PolygpuError) as err:
        require_in_bounds(scop, {"n": 11})
    assert err.value.loc.line == 5
    assert str(err.value) == (f"{src}:5: a[i] reads outside array 'a' (extent [10]): "
                              "at n = 11, i = 10 it reads a[10]")
    msg = refused(polygpu("check", str(src), "-p", "n=37"), src, 5)
    assert "outside array 'a' (extent [10])" in msg and "n = 37, i = 10" in msg
    out = tmp_path / "out"
    refused(polygpu("compile", str(src), "-o", str(out), "-p", "n=11"), src, 5)
    assert not out.exists()
    ok = polygpu("compile", str(src), "-o", str(out), "-p", "n=10")
    assert ok.returncode == 0, ok.stderr


# ------------------------------------------------------------------ a[i - 1] at i = 0


def test_shifted_read_at_the_first_iteration(tmp_path):
    src = c_file(tmp_path, "int n, float a[n], float b[n]", """
        for (int i = 0; i < n; i++)
          b[i] = a[i - 1];
    """)
    # outside for every n: refused even without sizes
    with pytest.raises(PolygpuError, match=r"a\[i - 1\] reads outside array 'a' "
                       r"\(extent \[n\]\): at n = 1, i = 0 it reads a\[-1\], and it "
                       r"does for every n where it runs"):
        require_in_bounds(scop_of(src))
    refused(polygpu("compile", str(src), "-o", str(tmp_path / "out")), src, 5)
    msg = refused(polygpu("check", str(src), "-p", "n=37"), src, 5)
    assert msg.endswith("at n = 37, i = 0 it reads a[-1]"), msg
    # analyze explains instead of refusing
    result = polygpu("analyze", str(src), "--json")
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith(f"{src}:5: warning: a[(i - 1)] may access outside")
    assert "compile and check refuse it" in result.stderr
    (warning,) = json.loads(result.stdout)["warnings"]
    assert "at n = 1, i = 0 it reads a[-1]" in warning


def test_analyze_with_traffic_and_sizes_refuses(tmp_path):
    src = c_file(tmp_path, "int n, float a[10], float b[n]", """
        for (int i = 0; i < n; i++)
          b[i] = a[i];
    """)
    refused(polygpu("analyze", str(src), "--traffic", "-p", "n=64"), src, 5)


# ------------------------------------------------------------------ Python a[-1]


def test_python_negative_index_does_not_wrap(tmp_path):
    src = py_file(tmp_path, "n: int, x: f32[n], y: f32[n]", """
        for i in range(n):
            y[i] = x[-1]
    """)
    scop = scop_of(src, "k")
    (acc,) = [a for a in scop.accesses if a.array == "x"]
    assert "-> x[-1] :" in str(acc.relation)  # index -1 in the model, not n - 1
    with pytest.raises(PolygpuError, match="Python's negative indices do not wrap"):
        require_in_bounds(scop)
    msg = refused(polygpu("check", f"{src}:k", "-p", "n=9"), src, 7)
    assert "x[-1] reads outside array 'x' (extent [n]): at n = 9, i = 0 it reads x[-1]" in msg
    assert "do not wrap around here: index -1 means position -1, not n - 1" in msg


# ------------------------------------------------------------------ range(n, 0, -1)


def test_descending_range_writes_one_past_the_end(tmp_path):
    src = py_file(tmp_path, "n: int, x: f32[n], y: f32[n]", """
        for i in range(n, 0, -1):
            y[i] = x[i - 1]
    """)
    with pytest.raises(PolygpuError) as err:
        require_in_bounds(scop_of(src, "k"))
    assert err.value.loc.line == 7
    assert "y[i] writes outside array 'y' (extent [n]): at n = 1, i = 1 it writes y[1]" \
        in str(err.value)
    msg = refused(polygpu("check", f"{src}:k", "-p", "n=8"), src, 7)
    assert msg.endswith("y[i] writes outside array 'y' (extent [n]): at n = 8, i = 8 "
                        "it writes y[8]"), msg
    refused(polygpu("compile", f"{src}:k", "-o", str(tmp_path / "out")), src, 7)


def test_descending_loop_in_c(tmp_path):
    src = c_file(tmp_path, "int n, float a[n]", """
        for (int i = n; i > 0; i--)
          a[i] = 0;
    """)
    refused(polygpu("compile", str(src), "-o", str(tmp_path / "out")), src, 5)


# ------------------------------------------------------------------ 2-D


def test_two_dimensional_depends_on_the_relation_between_parameters(tmp_path):
    """``j < n`` on ``a[n][m]``: fine when ``n <= m``, which the input language cannot
    state -- a warning without sizes, an error at sizes with ``n > m``."""
    src = c_file(tmp_path, "int n, int m, float a[n][m], float b[n][n]", """
        for (int i = 0; i < n; i++)
          for (int j = 0; j < n; j++)
            b[i][j] = a[i][j];
    """)
    scop = scop_of(src)
    (warning,) = require_in_bounds(scop)
    assert warning.array == "a" and not warning.always
    assert require_in_bounds(scop, {"n": 5, "m": 7}) == ()
    with pytest.raises(PolygpuError) as err:
        require_in_bounds(scop, {"n": 5, "m": 4})
    assert str(err.value) == (f"{src}:6: a[i][j] reads outside array 'a' (extent [n][m]): "
                              "at n = 5, m = 4, i = 0, j = 4 it reads a[0][4]")
    refused(polygpu("check", str(src), "-p", "n=6", "-p", "m=5"), src, 6)
    ok = polygpu("compile", str(src), "-o", str(tmp_path / "out"), "-p", "n=5", "-p", "m=5")
    assert ok.returncode == 0, ok.stderr


def test_two_dimensional_row_out_for_every_size(tmp_path):
    src = c_file(tmp_path, "int n, float a[n][n], float b[n][n]", """
        for (int i = 0; i < n; i++)
          for (int j = 0; j < n; j++)
            b[i][j] = a[i + 1][j];
    """)
    with pytest.raises(PolygpuError, match=r"a\[i \+ 1\]\[j\] reads outside array 'a' "
                       r"\(extent \[n\]\[n\]\): at n = 1, i = 0, j = 0 it reads a\[1\]\[0\]"):
        require_in_bounds(scop_of(src))


# ------------------------------------------------------------------ writes, guards


def test_guarded_access_is_checked_only_where_it_runs(tmp_path):
    src = c_file(tmp_path, "int n, float a[n], float b[n]", """
        for (int i = 0; i < n; i++)
          if (i > 0)
            b[i] = a[i - 1];
    """)
    scop = scop_of(src)
    assert check_bounds(scop) == ()
    assert require_in_bounds(scop, {"n": 2000000000}) == ()


def test_access_that_never_runs_at_the_given_sizes(tmp_path):
    """Out of bounds only when it runs: ``i < n - 5`` never runs at ``n = 3``."""
    src = c_file(tmp_path, "int n, float a[n], float b[n]", """
        for (int i = 0; i < n; i++)
          b[i] = 0;
        for (int i = 0; i < n - 5; i++)
          b[i] = a[i + 6];
    """)
    scop = scop_of(src)
    assert require_in_bounds(scop, {"n": 3}) == ()
    with pytest.raises(PolygpuError, match="at n = 7, i = 1 it reads a.7."):
        require_in_bounds(scop, {"n": 7})


# ------------------------------------------------------------------ the catalog


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_catalog_kernels_are_proven_inside(name):
    entry = CATALOG[name]
    scop = scop_of(KERNELS / name, entry["function"])
    assert require_in_bounds(scop) == ()  # not even a warning
    assert require_in_bounds(scop, entry["small"]) == ()
    assert require_in_bounds(scop, entry["gpu"]) == ()


# ------------------------------------------------------------------ cost


def test_huge_sizes_are_symbolic_and_cached(tmp_path):
    src = c_file(tmp_path, "int n, int m, float a[n][m], float b[n][m], float c[10]", """
        for (int i = 0; i < n; i++)
          for (int j = 0; j < m; j++)
            b[i][j] = a[i][j] + c[0];
    """)
    scop = scop_of(src)
    start = time.perf_counter()
    assert require_in_bounds(scop, {"n": 2000000000, "m": 2000000000}) == ()
    first = time.perf_counter() - start
    assert first < 5  # isl is symbolic: no point is enumerated
    start = time.perf_counter()
    for _ in range(1000):
        require_in_bounds(scop, {"n": 2000000000, "m": 2000000000})
    assert time.perf_counter() - start < 0.5  # launch-time calls hit the cache
    assert id(scop) in _CACHE


def test_huge_sizes_error_quickly(tmp_path):
    src = c_file(tmp_path, "int n, float a[n], float b[n]", """
        for (int i = 0; i < n; i++)
          b[i] = a[i + 1];
    """)
    scop = scop_of(src)
    start = time.perf_counter()
    with pytest.raises(PolygpuError, match="at n = 2000000000, i = 1999999999 it reads "
                       "a.2000000000."):
        require_in_bounds(scop, {"n": 2000000000})
    with pytest.raises(PolygpuError):  # cached errors are raised again
        require_in_bounds(scop, {"n": 2000000000})
    assert time.perf_counter() - start < 5
    result = polygpu("check", str(src), "-p", "n=2000000000")
    assert result.returncode == 2 and "a[2000000000]" in result.stderr


def test_parameters_that_are_not_of_the_region_are_ignored(tmp_path):
    src = c_file(tmp_path, "int n, float a[n]", """
        for (int i = 0; i < n; i++)
          a[i] = 0;
    """)
    scop = scop_of(src)
    assert require_in_bounds(scop, {"n": 4, "other": -1}) == ()
    assert require_in_bounds(scop, {"n": np.int64(4)}) == ()  # the API's sizes
    assert require_in_bounds(scop, {"n": 10**20}) == ()  # beyond 64 bits: still exact
