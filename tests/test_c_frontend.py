"""Tests of the C frontend: ``#pragma scop`` regions -> loop-tree IR.

Shape tests check the IR of the shipped kernels and of each supported construct; a
semantic test compiles a feature-rich kernel with the system C compiler and compares
its results with a small interpreter of the IR (so C's truncating ``/``, casts, MIN/MAX
macros and negative steps are checked, not just spelled); the bad-input corpus checks
that every rejected construct gets a located one-line error.
"""

from __future__ import annotations

import ctypes
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polygpu.errors import PolygpuError, SourceLoc, UnsupportedError
from polygpu.frontend import c_frontend, ir, load
from polygpu.frontend.c_frontend import parse_c_file

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "kernels"
BAD_INPUTS = Path(__file__).resolve().parent / "bad_inputs"
# Non-affine products and accesses outside an array are the model's to reject (see
# tests/test_cli.py).
BAD_C = sorted(p for p in BAD_INPUTS.glob("*.c")
               if not p.name.startswith(("nonaffine_", "bounds_")))


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------


def parse_source(tmp_path: Path, source: str, **kwargs) -> ir.Program:
    path = tmp_path / "kernel.c"
    path.write_text(source)
    return parse_c_file(str(path), **kwargs)


def tree(nodes) -> list:
    """A compact, comparable rendering of a loop tree: loops and guards as nested lists,
    statements as ``(text, line)``."""
    out = []
    for node in nodes:
        if isinstance(node, ir.For):
            head = f"for {node.iterator} = {node.init}; {node.cond}; {node.step:+d}"
            out.append((head, node.loc.line, tree(node.body)))
        elif isinstance(node, ir.If):
            out.append((f"if {node.cond}", node.loc.line, tree(node.then), tree(node.else_)))
        else:
            out.append((str(node), node.loc.line))
    return out


def line_of(path: Path, text: str) -> int:
    hits = [k for k, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    assert len(hits) == 1, (text, hits)
    return hits[0]


def error_of(tmp_path: Path, source: str, **kwargs) -> PolygpuError:
    with pytest.raises(PolygpuError) as info:
        parse_source(tmp_path, source, **kwargs)
    return info.value


# --------------------------------------------------------------------------
# The shipped kernels
# --------------------------------------------------------------------------

MV_TREE = [
    (
        "for i = 0; i < n; +1",
        5,
        [
            ("x[i] = 0", 6),
            ("for j = 0; j < n; +1", 7, [("x[i] += (a[i][j] * y[j])", 8)]),
        ],
    )
]
TMV_TREE = [
    (
        "for i = 0; i < n; +1",
        5,
        [
            ("x[i] = 0", 6),
            ("for j = 0; j < n; +1", 7, [("x[i] += (a[j][i] * y[j])", 8)]),
        ],
    )
]
MVT_TREE = [
    ("for i = 0; i < n; +1", 5, [("for j = 0; j < n; +1", 6, [("x1[i] += (a[i][j] * y1[j])", 7)])]),
    (
        "for i = 0; i < n; +1",
        8,
        [("for j = 0; j < n; +1", 9, [("x2[i] += (a[j][i] * y2[j])", 10)])],
    ),
]
MM_TREE = [
    (
        "for i = 0; i < n; +1",
        5,
        [
            (
                "for j = 0; j < n; +1",
                6,
                [("for k = 0; k < n; +1", 7, [("c[i][j] += (a[i][k] * b[k][j])", 8)])],
            )
        ],
    )
]


@pytest.mark.parametrize(
    "name, expected",
    [("mv", MV_TREE), ("tmv", TMV_TREE), ("mvt", MVT_TREE), ("mm", MM_TREE)],
)
def test_kernel_loop_trees(name, expected):
    path = str(KERNELS / f"{name}.c")
    program = parse_c_file(path)
    assert program.name == name and program.language == "c"
    assert program.file == path and program.loc == SourceLoc(path, 2)
    assert tree(program.body) == expected
    assert program.params == (ir.ScalarDecl("n", "int32", SourceLoc(path, 2), "param"),)
    assert program.temporaries == ()
    for array in program.arrays:
        assert array.dtype == "float32"
        assert all(extent == ir.IntVar("n") for extent in array.shape)


def test_mv_declarations_and_references():
    path = str(KERNELS / "mv.c")
    program = parse_c_file(path)
    assert program.signature == ("n", "a", "x", "y")
    assert [(a.name, len(a.shape)) for a in program.arrays] == [("a", 2), ("x", 1), ("y", 1)]
    outer = program.body[0]
    init, inner = outer.body
    assert init == ir.Assign(
        ir.ArrayRef("x", (ir.IntVar("i"),), SourceLoc(path, 6)),
        "=",
        ir.Const(0),
        SourceLoc(path, 6),
    )
    update = inner.body[0]
    assert update.op == "+=" and isinstance(update.value, ir.BinOp) and update.value.op == "*"
    assert update.value.lhs == ir.ArrayRef(
        "a", (ir.IntVar("i"), ir.IntVar("j")), SourceLoc(path, 8)
    )


def test_load_dispatches_c_files():
    program = load(str(KERNELS / "mm.c"))
    assert program.name == "mm"


def test_relative_path_is_kept_as_given(monkeypatch):
    monkeypatch.chdir(ROOT)
    program = parse_c_file("kernels/../kernels/mv.c")
    assert program.file == "kernels/../kernels/mv.c"
    assert program.body[0].loc == SourceLoc("kernels/../kernels/mv.c", 5)


# --------------------------------------------------------------------------
# Supported constructs
# --------------------------------------------------------------------------


def test_min_max_select_and_division_bounds(tmp_path):
    program = parse_source(
        tmp_path,
        """\
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
void k(int n, int m, float a[n][m])
{
#pragma scop
  for (int i = MAX(0, m - n); i < min(n, m) && i <= (n - 1) / 2; i++)
    for (int j = max(i, 1); j < MIN(m, i + 4); j += 1)
      for (int k = n % 3; k < (n > 3 ? m : n); ++k)
        a[i][j] = a[k][(j / 2) - 1];
#pragma endscop
}
""",
    )
    i_loop = program.body[0]
    assert i_loop.init == ir.IntMinMax(
        "max", (ir.IntConst(0), ir.IntBinOp("-", ir.IntVar("m"), ir.IntVar("n")))
    )
    assert i_loop.cond == ir.BoolOp(
        "and",
        (
            ir.Compare("<", ir.IntVar("i"), ir.IntMinMax("min", (ir.IntVar("n"), ir.IntVar("m")))),
            ir.Compare(
                "<=",
                ir.IntVar("i"),
                ir.IntBinOp(
                    "truncdiv", ir.IntBinOp("-", ir.IntVar("n"), ir.IntConst(1)), ir.IntConst(2)
                ),
            ),
        ),
    )
    j_loop = i_loop.body[0]
    assert j_loop.init == ir.IntMinMax("max", (ir.IntVar("i"), ir.IntConst(1)))
    assert str(j_loop.cond) == "j < min(m, (i + 4))" and j_loop.step == 1
    k_loop = j_loop.body[0]
    assert k_loop.init == ir.IntBinOp("rem", ir.IntVar("n"), ir.IntConst(3))
    assert k_loop.cond.rhs == ir.IntSelect(
        ir.Compare(">", ir.IntVar("n"), ir.IntConst(3)), ir.IntVar("m"), ir.IntVar("n")
    )
    assert str(k_loop.body[0]) == "a[i][j] = a[k][((j / 2) - 1)]"


def test_iterators_declared_in_the_function(tmp_path):
    program = parse_source(
        tmp_path,
        """\
void k(int n, double a[n][n])
{
  int i, j;
#pragma scop
  for (i = 0; i < n; i++)
    for (j = 0; j <= i; j++)
      a[i][j] = i + j;
  for (i = 0; i < n; i = i + 1)
    a[i][i] = 1.0;
#pragma endscop
}
""",
    )
    assert tree(program.body) == [
        ("for i = 0; i < n; +1", 5, [("for j = 0; j <= i; +1", 6, [("a[i][j] = (i + j)", 7)])]),
        ("for i = 0; i < n; +1", 8, [("a[i][i] = 1.0", 9)]),
    ]
    assert program.temporaries == ()  # iterators are not temporaries
    value = program.body[0].body[0].body[0].value
    assert value == ir.BinOp("+", ir.IntValue(ir.IntVar("i")), ir.IntValue(ir.IntVar("j")))


@pytest.mark.parametrize("define", ["N=10", "-DN=10"])
def test_defines_give_constant_extents(tmp_path, define):
    program = parse_source(
        tmp_path,
        """\
void k(float a[N][N + 2], float x[N])
{
#pragma scop
  for (int i = 0; i < N; i++)
    x[i] = a[i][i + 1];
#pragma endscop
}
""",
        defines=[define],
    )
    assert program.params == ()
    assert program.arrays[0].shape == (
        ir.IntConst(10),
        ir.IntBinOp("+", ir.IntConst(10), ir.IntConst(2)),
    )
    assert program.body[0].cond == ir.Compare("<", ir.IntVar("i"), ir.IntConst(10))


def test_undefined_macro_is_an_unknown_variable(tmp_path):
    err = error_of(
        tmp_path, "void k(float x[N])\n{\n#pragma scop\n  x[0] = 1;\n#pragma endscop\n}\n"
    )
    assert str(err) == f"{tmp_path / 'kernel.c'}:1: unknown variable 'N'"


def test_include_dirs_and_typedefs(tmp_path):
    include = tmp_path / "inc"
    include.mkdir()
    (include / "sizes.h").write_text("#define STEP 2\ntypedef double real;\n")
    program = parse_source(
        tmp_path,
        """\
#include <stdint.h>
#include "sizes.h"
void k(int64_t n, real alpha, real x[n], int32_t idx[n])
{
#pragma scop
  for (long i = 0; i < n; i += STEP)
    x[i] = alpha * idx[i];
#pragma endscop
}
""",
        include_dirs=[str(include)],
    )
    assert [(p.name, p.dtype) for p in program.params] == [("n", "int64"), ("alpha", "float64")]
    assert [(a.name, a.dtype) for a in program.arrays] == [("x", "float64"), ("idx", "int32")]
    assert program.body[0].step == 2


def test_math_calls(tmp_path):
    program = parse_source(
        tmp_path,
        """\
#include <math.h>
void k(int n, float x[n], double y[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    y[i] = sqrtf(x[i]) + exp(y[i]) * pow(fabs(y[i]), 2.0) - fmaxf(x[i], 0.0f);
#pragma endscop
}
""",
    )
    calls = []

    def collect(expr):
        if isinstance(expr, ir.Call):
            calls.append(expr.func)
        for child in vars(expr).values():
            if isinstance(child, ir.Expr):
                collect(child)
            elif isinstance(child, tuple):
                for item in child:
                    if isinstance(item, ir.Expr):
                        collect(item)

    collect(program.body[0].body[0].value)
    assert sorted(calls) == ["exp", "fabs", "fmaxf", "pow", "sqrtf"]


def test_scalar_temporaries(tmp_path):
    program = parse_source(
        tmp_path,
        """\
void k(int n, float beta, float a[n][n], float x[n])
{
  float t;
  int i;
#pragma scop
  for (i = 0; i < n; i++) {
    double s = 0;
    for (int j = 0; j < n; j++)
      s += a[i][j];
    t = s * beta;
    x[i] = t;
  }
#pragma endscop
}
""",
    )
    path = str(tmp_path / "kernel.c")
    assert program.temporaries == (
        ir.ScalarDecl("s", "float64", SourceLoc(path, 7), "temporary"),
        ir.ScalarDecl("t", "float32", SourceLoc(path, 3), "temporary"),
    )
    body = program.body[0].body
    assert body[0] == ir.Assign(
        ir.ScalarRef("s", SourceLoc(path, 7)), "=", ir.Const(0), SourceLoc(path, 7)
    )
    assert str(body[2]) == "t = (s * beta)"
    assert body[2].value.rhs == ir.ScalarRef("beta", SourceLoc(path, 10))  # a float parameter
    assert [p.name for p in program.params] == ["n", "beta"]


def test_if_else(tmp_path):
    program = parse_source(
        tmp_path,
        """\
void k(int n, float a[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    if (i % 2 == 0 && !(i == n - 1) || i > 10)
      a[i] = 1;
    else if (i)
      a[i] = 2;
    else
      a[i]++;
#pragma endscop
}
""",
    )
    assert tree(program.body) == [
        (
            "for i = 0; i < n; +1",
            4,
            [
                (
                    "if (((i % 2) == 0 and not (i == (n - 1))) or i > 10)",
                    5,
                    [("a[i] = 1", 6)],
                    [("if i != 0", 7, [("a[i] = 2", 8)], [("a[i] += 1", 10)])],
                )
            ],
        )
    ]


@pytest.mark.parametrize(
    "header, init, cond, step",
    [
        ("for (int i = n - 1; i >= 0; i--)", "(n - 1)", "i >= 0", -1),
        ("for (int i = n; i > 0; --i)", "n", "i > 0", -1),
        ("for (int i = n - 1; i >= 0; i -= 2)", "(n - 1)", "i >= 0", -2),
        ("for (int i = n; 0 < i; i = i - 3)", "n", "0 < i", -3),
        ("for (int i = 0; i < n; i = 2 + i)", "0", "i < n", 2),
        ("for (int i = 0; i < n; i += -(-4))", "0", "i < n", 4),
    ],
)
def test_steps(tmp_path, header, init, cond, step):
    program = parse_source(
        tmp_path,
        f"void k(int n, float a[n])\n{{\n#pragma scop\n  {header}\n    a[i] = 0;\n"
        "#pragma endscop\n}\n",
    )
    loop = program.body[0]
    assert (str(loop.init), str(loop.cond), loop.step) == (init, cond, step)


def test_value_expressions(tmp_path):
    program = parse_source(
        tmp_path,
        """\
void k(int n, float alpha, double a[n], int b[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    a[i] = (a[i] > 0 && !b[i] ? -a[i] : alpha * 1.5f) + (double)i / n + (int)2.7 * 0
           + (float)b[i] + (double)3 + (int)b[i];
#pragma endscop
}
""",
    )
    path = str(tmp_path / "kernel.c")
    value = program.body[0].body[0].value
    assert str(value) == (
        "((((((((a[i] > 0) && !b[i]) ? -a[i] : (alpha * 1.5)) + ((1.0 * i) / n)) + (2 * 0))"
        " + (1.0 * b[i])) + 3.0) + b[i])"
    )
    terms = []
    while isinstance(value, ir.BinOp) and value.op == "+":
        terms.append(value.rhs)
        value = value.lhs
    select, float_div, trunc, float_b, three, int_b = [value, *terms[::-1]]
    a_i = ir.ArrayRef("a", (ir.IntVar("i"),), SourceLoc(path, 5))
    b_i = ir.ArrayRef("b", (ir.IntVar("i"),), SourceLoc(path, 5))
    b_i_next_line = ir.ArrayRef("b", (ir.IntVar("i"),), SourceLoc(path, 6))
    assert select == ir.Select(
        ir.ValueLogical(
            "and", (ir.ValueCompare(">", a_i, ir.Const(0)), ir.ValueLogical("not", (b_i,)))
        ),
        ir.UnaryOp("-", a_i),
        ir.BinOp("*", ir.ScalarRef("alpha", SourceLoc(path, 5)), ir.Const(1.5, "float32")),
    )
    # (double)i / n keeps C's meaning (float division): the cast becomes an exact 1.0 * i
    assert float_div == ir.BinOp(
        "/",
        ir.BinOp("*", ir.Const(1.0, "float64"), ir.IntValue(ir.IntVar("i"))),
        ir.IntValue(ir.IntVar("n")),
    )
    assert trunc == ir.BinOp("*", ir.Const(2), ir.Const(0))  # (int)2.7 folds to 2
    assert float_b == ir.BinOp("*", ir.Const(1.0, "float32"), b_i_next_line)
    assert three == ir.Const(3.0, "float64")
    assert int_b == b_i_next_line  # int -> int casts are dropped


def test_int_and_float_literals(tmp_path):
    program = parse_source(
        tmp_path,
        "void k(double a[4])\n{\n#pragma scop\n"
        "  a[0x1] = 010 + 0b11 + 10UL + 1e2 + 2.5f + 0x1p3;\n#pragma endscop\n}\n",
    )
    stmt = program.body[0]
    assert stmt.target.index == (ir.IntConst(1),)
    consts = []
    expr = stmt.value
    while isinstance(expr, ir.BinOp):
        consts.append(expr.rhs)
        expr = expr.lhs
    consts.append(expr)
    assert consts[::-1] == [
        ir.Const(8),
        ir.Const(3),
        ir.Const(10),
        ir.Const(100.0, "float64"),
        ir.Const(2.5, "float32"),
        ir.Const(8.0, "float64"),
    ]


def test_other_pragmas_and_empty_statements_are_ignored(tmp_path):
    program = parse_source(
        tmp_path,
        """\
void k(int n, float a[n])
{
#pragma scop
  ;
#pragma unroll
  for (int i = 0; i < n; i++) {
    ;
    a[i] = 0;
  }
#pragma endscop
  ;
}
""",
    )
    assert tree(program.body) == [("for i = 0; i < n; +1", 6, [("a[i] = 0", 8)])]


def test_function_selection(tmp_path):
    source = """\
static int helper(int x) { return x + 1; }
void f(int n, float a[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    a[i] = 0;
#pragma endscop
}
void g(int n, float a[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    a[i] = 1;
#pragma endscop
}
"""
    path = tmp_path / "two.c"
    path.write_text(source)
    with pytest.raises(PolygpuError) as info:
        parse_c_file(str(path))
    assert str(info.value) == (
        f"{path}:2: several functions have a #pragma scop (f, g): choose one with --function"
    )
    assert parse_c_file(str(path), "g").body[0].body[0].value == ir.Const(1)
    with pytest.raises(
        PolygpuError, match=r"no function 'h' is defined \(functions: helper, f, g\)"
    ):
        parse_c_file(str(path), "h")
    with pytest.raises(UnsupportedError) as info:
        parse_c_file(str(path), "helper")
    assert str(info.value) == (
        f"{path}:1: no #pragma scop ... #pragma endscop region in function 'helper'"
    )
    # a single scop among several functions is picked without --function
    path.write_text(
        source.replace(
            "#pragma scop\n  for (int i = 0; i < n; i++)\n    a[i] = 1;\n#pragma endscop\n",
            "a[0] = 1;\n",
        )
    )
    assert parse_c_file(str(path)).name == "f"


def test_every_fake_header_parses(tmp_path):
    headers = sorted(p.name for p in Path(c_frontend.FAKE_LIBC_DIR).glob("*.h"))
    assert {"math.h", "stdio.h", "stdlib.h", "string.h", "stdint.h", "stdbool.h"} <= set(headers)
    includes = "".join(f"#include <{h}>\n" for h in headers if not h.startswith("_"))
    program = parse_source(
        tmp_path,
        includes + "void k(int n, float a[n])\n{\n#pragma scop\n"
        "  for (int i = 0; i < n; i++)\n    a[i] = sqrtf(a[i]) + M_PI;\n#pragma endscop\n}\n",
    )
    assert program.body[0].loc.line == len(headers) - 2 + 4  # lines survive the includes


# --------------------------------------------------------------------------
# Semantics: run the IR and the C compiler on the same kernel
# --------------------------------------------------------------------------

SEMANTIC_KERNEL = """\
#include <math.h>
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
void k(int n, int m, double alpha, double a[n][m], double x[n + m], int c[n + m])
{
  int i, j;
  double t;
#pragma scop
  for (i = n - 1; i >= -2; i -= 2) {
    t = 0;
    for (j = MAX(0, i - 3); j < MIN(m, i + 2) && j <= (i - n / 2) % 5 + 4; j++) {
      t += a[i >= 0 ? i : 0][j] * alpha - (double)(i - 7) / 3 + (i - 7) / 3;
      if ((j - 5) / 2 * 2 == j - 5 || j % 3 == -1)
        x[j] -= t > 1.5 ? sqrt(fabs(t)) : (int)c[j] + (double)c[j] / 4;
      else
        c[j] += (i - 11) % 4;
    }
    x[MAX(i, 0)] = t + (i < 0 || i % 3 != 0);
  }
  for (i = 0; i < n; i = i + 3)
    for (j = (i > 2 ? i - 2 : 0); j < m; j += 2)
      a[i][j] *= -x[i] / (2 + c[i] * c[i]);
#pragma endscop
}
"""


def _c_div(a, b):
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _c_binop(op, a, b):
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    ints = isinstance(a, int) and isinstance(b, int)
    if op in ("/", "truncdiv"):
        return _c_div(a, b) if ints else a / b
    if op in ("%", "rem"):
        return a - _c_div(a, b) * b if ints else math.fmod(a, b)
    raise AssertionError(op)


_MATH = {"sqrt": math.sqrt, "fabs": abs, "exp": math.exp, "pow": math.pow}


def run_ir(program: ir.Program, env: dict) -> None:
    """Interpret the loop tree in place on numpy arrays (``env`` maps every name)."""

    def iv(e):
        if isinstance(e, ir.IntConst):
            return e.value
        if isinstance(e, ir.IntVar):
            return env[e.name]
        if isinstance(e, ir.IntBinOp):
            return _c_binop(e.op, iv(e.lhs), iv(e.rhs))
        if isinstance(e, ir.IntNeg):
            return -iv(e.arg)
        if isinstance(e, ir.IntMinMax):
            return (min if e.op == "min" else max)(iv(a) for a in e.args)
        if isinstance(e, ir.IntSelect):
            return iv(e.then) if cond(e.cond) else iv(e.else_)
        raise AssertionError(e)

    def cond(c):
        if isinstance(c, ir.Compare):
            return _compare(c.op, iv(c.lhs), iv(c.rhs))
        if isinstance(c, ir.BoolOp):
            return (all if c.op == "and" else any)(cond(a) for a in c.args)
        if isinstance(c, ir.Not):
            return not cond(c.arg)
        return c.value

    def val(e):
        if isinstance(e, ir.Const):
            return e.value
        if isinstance(e, ir.ArrayRef):
            return env[e.array][tuple(iv(i) for i in e.index)].item()
        if isinstance(e, ir.ScalarRef):
            return env[e.name]
        if isinstance(e, ir.IntValue):
            return iv(e.expr)
        if isinstance(e, ir.BinOp):
            return _c_binop(e.op, val(e.lhs), val(e.rhs))
        if isinstance(e, ir.UnaryOp):
            return -val(e.arg) if e.op == "-" else val(e.arg)
        if isinstance(e, ir.Call):
            return _MATH[e.func](*map(val, e.args))
        if isinstance(e, ir.ValueCompare):
            return int(_compare(e.op, val(e.lhs), val(e.rhs)))
        if isinstance(e, ir.ValueLogical):
            args = [bool(val(a)) for a in e.args]
            return int(not args[0] if e.op == "not" else (all if e.op == "and" else any)(args))
        if isinstance(e, ir.Select):
            return val(e.then) if val(e.cond) else val(e.else_)
        raise AssertionError(e)

    def run(nodes):
        for node in nodes:
            if isinstance(node, ir.For):
                env[node.iterator] = iv(node.init)
                while cond(node.cond):
                    run(node.body)
                    env[node.iterator] += node.step
            elif isinstance(node, ir.If):
                run(node.then if cond(node.cond) else node.else_)
            else:
                value = val(node.value)
                t = node.target
                old = val(t) if node.op != "=" else None
                new = value if node.op == "=" else _c_binop(node.op[0], old, value)
                if isinstance(t, ir.ArrayRef):
                    env[t.array][tuple(iv(i) for i in t.index)] = new
                else:
                    env[t.name] = new

    run(program.body)


def _compare(op, a, b):
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[op]


@pytest.fixture(scope="module")
def compiled_kernel(tmp_path_factory):
    if shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    tmp = tmp_path_factory.mktemp("semantic")
    source = tmp / "kernel.c"
    source.write_text(SEMANTIC_KERNEL.replace("#include <math.h>", "#include <math.h>\n", 1))
    lib = tmp / "kernel.so"
    subprocess.run(
        ["gcc", "-std=c99", "-shared", "-fPIC", "-O0", "-o", str(lib), str(source), "-lm"],
        check=True,
    )
    return str(source), ctypes.CDLL(str(lib))


@pytest.mark.parametrize("n, m", [(1, 1), (5, 7), (9, 4), (12, 12)])
def test_ir_computes_what_the_c_compiler_computes(compiled_kernel, n, m):
    source, lib = compiled_kernel
    program = parse_c_file(source)
    rng = np.random.default_rng(n * 100 + m)
    a = rng.uniform(-2, 2, (n, m))
    x = rng.uniform(-2, 2, n + m)
    c = rng.integers(-5, 5, n + m).astype(np.int32)
    ref = {"a": a.copy(), "x": x.copy(), "c": c.copy()}
    ptr = ctypes.c_void_p
    lib.k(
        ctypes.c_int(n),
        ctypes.c_int(m),
        ctypes.c_double(0.75),
        ptr(ref["a"].ctypes.data),
        ptr(ref["x"].ctypes.data),
        ptr(ref["c"].ctypes.data),
    )
    env = {"n": n, "m": m, "alpha": 0.75, "a": a, "x": x, "c": c}
    run_ir(program, env)
    np.testing.assert_allclose(a, ref["a"], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(x, ref["x"], rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(c, ref["c"])


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------


def test_bad_input_corpus_is_large_enough():
    assert len(BAD_C) >= 15


@pytest.mark.parametrize("path", BAD_C, ids=[p.name for p in BAD_C])
def test_bad_input_is_a_located_error(path):
    lines = path.read_text().splitlines()
    expect = re.match(r"//\s*expect:\s*(.+)", lines[0]).group(1).strip()
    line = line_of(path, "<- error")
    with pytest.raises(PolygpuError) as info:
        parse_c_file(str(path))
    message = str(info.value)
    assert message.startswith(f"{path}:{line}: "), message
    assert expect in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "body, line, expected",
    [
        ("for (int i = 0; i < n; )\n    a[i] = 0;", 4, "for loop without increment"),
        ("for (; 0 < n; n++)\n    a[0] = 0;", 4, "for loop without initialisation"),
        ("for (int i = 0; i < n; i *= 2)\n    a[i] = 0;", 4, "unsupported loop increment 'i *= 2'"),
        ("for (int i = 0; i < n; i += 0)\n    a[i] = 0;", 4, "the loop step is zero"),
        (
            "for (int i = 0; i < n; i++)\n    for (int i = 0; i < n; i++)\n      a[i] = 0;",
            5,
            "loop reuses iterator 'i' of an enclosing loop",
        ),
        (
            "for (int i = 0; n > 0; i++)\n    a[i] = 0;",
            4,
            "the loop condition does not bound the iterator 'i'",
        ),
        ("for (int i = 0, j = 0; i < n; i++)\n    a[i] = 0;", 4, "(one iterator)"),
        ("for (int i = 0; i < n; j++)\n    a[i] = 0;", 4, "does not step the loop iterator 'i'"),
        (
            "for (float f = 0; f < n; f++)\n    a[0] = 0;",
            4,
            "loop iterator 'f' must have an integer type",
        ),
        ("for (int i = 0; i < n; i++)\n    a[i] %= 2;", 5, "compound assignment '%='"),
        ("for (int i = 0; i < n; i++)\n    a[i] = a[i] << 1;", 5, "operator '<<' is not supported"),
        ("for (int i = 0; i < n; i++)\n    a[i] = a[i++];", 5, "increment inside an expression"),
        ("for (int i = 0; i < n; i++)\n    a[i] = a;", 5, "array 'a' used without subscripts"),
        (
            "for (int i = 0; i < n; i++)\n    a[i] = sqrt(a[i]) + a[(int)sqrt(n)];",
            5,
            "call to 'sqrt' in a subscript",
        ),
        ("for (int i = 0; i < n; i++)\n    a[i] = (int)a[i];", 5, "cast of a floating-point"),
        ('for (int i = 0; i < n; i++)\n    a[i] = "s";', 5, "string literal"),
        ("for (int i = 0; i < n; i++)\n    a[i] = sizeof(a);", 5, "sizeof"),
        (
            "for (int i = 0; i < n; i++) {\n    float loc[4];\n    a[i] = 0;\n  }",
            5,
            "local array or pointer 'loc'",
        ),
        ("a[0] = n[0];", 4, "n[0]: 'n' is not an array"),
        ("a[0] = 0;\n#pragma scop\n  a[1] = 0;", 5, "several #pragma scop regions"),
        ("sqrt(a[0]);", 4, "call to 'sqrt' as a statement has no effect"),
        ("a[0] + 1;", 4, "statement has no effect"),
        ("a[n < 2] = 0;", 4, "condition 'n < 2' used as a number"),
        ("a = 0;", 4, "assignment to the whole array 'a'"),
        ("", 3, "the #pragma scop region has no statements"),
    ],
)
def test_rejected_constructs(tmp_path, body, line, expected):
    source = "void k(int n, float a[n])\n{\n#pragma scop\n  " + body + "\n#pragma endscop\n}\n"
    err = error_of(tmp_path, source)
    assert isinstance(err, UnsupportedError)
    assert str(err).startswith(f"{tmp_path / 'kernel.c'}:{line}: "), str(err)
    assert expected in str(err)


def test_pragma_scop_must_be_in_the_outermost_block(tmp_path):
    err = error_of(
        tmp_path,
        "void k(int n, float a[n])\n{\n  {\n#pragma scop\n    a[0] = 0;\n#pragma endscop\n  }\n}\n",
    )
    assert str(err) == (
        f"{tmp_path / 'kernel.c'}:4: #pragma scop must be in the outermost block of the "
        "function body"
    )


def test_temporary_initialised_outside_the_scop(tmp_path):
    err = error_of(
        tmp_path,
        "void k(int n, float a[n])\n{\n  float t = 1;\n#pragma scop\n  a[0] = t;\n"
        "  t = 2;\n#pragma endscop\n}\n",
    )
    assert str(err).startswith(f"{tmp_path / 'kernel.c'}:5: 't' is initialised outside")


def test_unexpected_end_of_file(tmp_path):
    err = error_of(tmp_path, "void k(int n, float a[n])\n{\n#pragma scop\n  a[0] = 0;\n")
    assert (
        str(err) == f"{tmp_path / 'kernel.c'}:4: syntax error: unexpected end of file "
        "(missing '}'?)"
    )


def test_missing_preprocessor(tmp_path, monkeypatch):
    monkeypatch.setattr(c_frontend.shutil, "which", lambda name: None)
    err = error_of(tmp_path, "void k(void) {}\n")
    assert "no C preprocessor found" in str(err)


def test_failing_preprocessor_reports_its_first_error(tmp_path):
    err = error_of(tmp_path, "#if\n#endif\n#error second\n")
    assert str(err).startswith(f"{tmp_path / 'kernel.c'}:1: preprocessor: ")
    assert "second" not in str(err)


def test_missing_file():
    with pytest.raises(PolygpuError, match="no_such.c: no such file"):
        parse_c_file("no_such.c")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_damaged_sources_never_crash(tmp_path_factory, data):
    """Deleting or duplicating a random slice of a good kernel gives a Program or a
    PolygpuError, never another exception."""
    source = (KERNELS / "mv.c").read_text()
    start = data.draw(st.integers(0, len(source) - 1))
    stop = data.draw(st.integers(start, min(len(source), start + 12)))
    damaged = (
        source[:start] + source[stop:]
        if data.draw(st.booleans())
        else source[:stop] + source[start:]
    )
    path = tmp_path_factory.mktemp("fuzz") / "damaged.c"
    path.write_text(damaged)
    try:
        parse_c_file(str(path))
    except PolygpuError as err:
        assert str(err).startswith(str(path)) and "\n" not in str(err)


# ---- issue 17: reserved names, region edges, scalars initialised before the region ----


@pytest.mark.parametrize(
    ("decl", "name", "why"),
    [
        ("float new[n]", "new", "C++ keyword"),
        ("float class[n]", "class", "C++ keyword"),
        ("float blockIdx[n]", "blockIdx", "CUDA built-in"),
        ("float warpSize[n]", "warpSize", "CUDA built-in"),
        ("float sqrt[n]", "sqrt", "function the generated code calls"),
        ("float min[n]", "min", "function the generated code calls"),
        ("float pg_tmp_x[n]", "pg_tmp_x", "prefix 'pg_'"),
        ("float polygpu_run[n]", "polygpu_run", "prefix 'polygpu_'"),
        ("float g0[n]", "g0", "local variable of the code polygpu generates"),
        ("float __syncthreads[n]", "__syncthreads", "reserved to the C++ implementation"),
        ("float k_kernel0[n]", "k_kernel0", "kernel polygpu generates"),
        ("float a_const[n]", "a_const", "__constant__ copy"),
        ("float a_reg[n]", "a_reg", "register copy"),
    ],
)
def test_reserved_parameter_names_are_refused(tmp_path, decl, name, why):
    err = error_of(
        tmp_path,
        f"void k(int n, float a[n],\n  {decl})\n{{\n#pragma scop\n"
        "  for (int i = 0; i < n; i++)\n    a[i] = 0;\n#pragma endscop\n}\n",
    )
    assert str(err).startswith(f"{tmp_path / 'kernel.c'}:2: parameter '{name}': "), str(err)
    assert why in str(err) and "rename it" in str(err)


def test_ordinary_names_like_generated_ones_are_accepted(tmp_path):
    # bx, tx, c0, s0, rx, h0, tid, b0: code generation picks its own names around these
    program = parse_source(
        tmp_path,
        "void k(int n, float c0[n], float bx[n], float tid[n], float b0[n], float h0[n])\n"
        "{\n#pragma scop\n  for (int tx = 0; tx < n; tx++)\n"
        "    c0[tx] = bx[tx] + tid[tx] + b0[tx] + h0[tx];\n#pragma endscop\n}\n",
    )
    assert [a.name for a in program.arrays] == ["c0", "bx", "tid", "b0", "h0"]


def test_reserved_iterator_and_temporary_names_are_refused(tmp_path):
    err = error_of(
        tmp_path,
        "void k(int n, float a[n])\n{\n#pragma scop\n  for (int this = 0; this < n; this++)\n"
        "    a[this] = 0;\n#pragma endscop\n}\n",
    )
    assert str(err).startswith(f"{tmp_path / 'kernel.c'}:4: loop iterator 'this'")
    err = error_of(
        tmp_path,
        "void k(int n, float a[n])\n{\n#pragma scop\n  for (int i = 0; i < n; i++) {\n"
        "    float delete = a[i];\n    a[i] = delete;\n  }\n#pragma endscop\n}\n",
    )
    assert str(err).startswith(f"{tmp_path / 'kernel.c'}:5: variable 'delete'")


def test_duplicate_parameter(tmp_path):
    err = error_of(tmp_path, "void k(int n, float a[n],\n int n)\n{\n#pragma scop\n"
                   "  a[0] = 0;\n#pragma endscop\n}\n")
    assert str(err) == f"{tmp_path / 'kernel.c'}:2: duplicate parameter 'n'"


def test_scalars_initialised_before_the_region_are_substituted(tmp_path):
    program = parse_source(
        tmp_path,
        """\
void k(int n, float alpha, float a[n], double b[n])
{
  float eps = 0.1;
  double float_n = (double)n;
  int k = 3;
  int half = n / 2 + k;
  double scaled = alpha * eps;
#pragma scop
  for (int i = k; i < half; i++)
    a[i] = a[i] + eps + k;
  for (int i = 0; i < n; i++)
    b[i] = b[i] / float_n + scaled;
#pragma endscop
}
""",
    )
    assert program.temporaries == ()
    assert tree(program.body) == [
        ("for i = 3; i < ((n / 2) + 3); +1", 9,
         [("a[i] = ((a[i] + 0.10000000149011612) + 3)", 10)]),
        ("for i = 0; i < n; +1", 11,
         [("b[i] = ((b[i] / (1.0 * n)) + (alpha * 0.10000000149011612))", 12)]),
    ]


@pytest.mark.parametrize(
    ("init", "message"),
    [
        ("float eps = a[0];", "'eps' is initialised before #pragma scop with 'a[0]', "
         "which reads an array"),
        ("float u; float eps = u;", "which reads 'u'"),
        ("float eps = eps2;", "which reads 'eps2'"),
    ],
)
def test_scalars_initialised_before_the_region_need_constant_initialisers(
    tmp_path, init, message
):
    err = error_of(
        tmp_path,
        f"float eps2;\nvoid k(int n, float a[n])\n{{\n  {init}\n#pragma scop\n"
        "  for (int i = 0; i < n; i++)\n    a[i] = a[i] + eps;\n#pragma endscop\n}\n",
    )
    assert str(err).startswith(f"{tmp_path / 'kernel.c'}:4: "), str(err)
    assert message in str(err)


def test_float_scalar_in_a_bound_is_refused(tmp_path):
    err = error_of(
        tmp_path,
        "void k(int n, float a[n])\n{\n  float e = 2;\n#pragma scop\n"
        "  for (int i = 0; i < e; i++)\n    a[i] = 0;\n#pragma endscop\n}\n",
    )
    assert "floating-point variable 'e' in a loop bound" in str(err)


@pytest.mark.parametrize(
    ("before", "after", "line", "message"),
    [
        ("  a[0] = 1;\n", "", 4, "'a[0] = 1' before #pragma scop writes 'a'"),
        ("  eps = 2;\n", "", 4,
         "'eps = 2' before #pragma scop writes 'eps' (read by the region)"),
        ("  init(n, a);\n", "", 4, "'init(n, a)' before #pragma scop may write 'a'"),
        ("", "  b[0]++;\n", 8, "'b[0]++' after #pragma scop writes 'b'"),
    ],
)
def test_statements_outside_the_region_writing_its_data_are_refused(
    tmp_path, before, after, line, message
):
    err = error_of(
        tmp_path,
        "void k(int n, float a[n], float b[n])\n{\n  float eps = 1;\n" + before
        + "#pragma scop\n  for (int i = 0; i < n; i++)\n    b[i] = a[i] * eps;\n"
        "#pragma endscop\n" + after + "}\n",
    )
    assert str(err).startswith(f"{tmp_path / 'kernel.c'}:{line}: {message}"), str(err)
    assert "only the #pragma scop region is compiled" in str(err)


def test_statements_outside_the_region_that_touch_nothing_of_it_are_fine(tmp_path):
    program = parse_source(
        tmp_path,
        "void k(int n, float a[n], float b[n])\n{\n  int i, c;\n  c = 0;\n"
        "#pragma scop\n  for (i = 0; i < n; i++)\n    b[i] = a[i];\n#pragma endscop\n"
        "  c++;\n}\n",
    )
    assert len(program.body) == 1


PRE_REGION_KERNEL = """\
#define DATA_TYPE double
void scale(int n, DATA_TYPE data[n][n], DATA_TYPE mean[n], DATA_TYPE stddev[n])
{
  int i, j;
  DATA_TYPE eps = 0.1;
  DATA_TYPE float_n = (double)n;
#pragma scop
  for (j = 0; j < n; j++) {
    mean[j] = 0.0;
    for (i = 0; i < n; i++)
      mean[j] += data[i][j];
    mean[j] /= float_n;
    stddev[j] = sqrt(mean[j] * mean[j] + eps);
    stddev[j] = stddev[j] <= eps ? 1.0 : stddev[j];
  }
#pragma endscop
}
"""


def test_pre_region_scalars_check_on_the_cpu_emulator(tmp_path):
    src = tmp_path / "scale.c"
    src.write_text(PRE_REGION_KERNEL)
    result = subprocess.run(
        [sys.executable, "-m", "polygpu", "check", str(src), "-p", "n=37"],
        capture_output=True, text=True, cwd=ROOT, check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert ": ok" in result.stdout + result.stderr
