"""Tests of the Python frontend: ``@affine`` source -> loop-tree IR.

Besides checking the IR's shape, several tests *run* the IR with a tiny interpreter and
compare with running the Python function itself, so the translation's semantics (range
forms, floor division, min/max, select, ...) are checked, not just its spelling.
"""

from __future__ import annotations

import importlib.util
import math
import operator
import re
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from polygpu import PolygpuError, UnsupportedError, affine, f32, f64, i32, i64
from polygpu.errors import SourceLoc
from polygpu.frontend import ir, load
from polygpu.frontend.python_frontend import parse_python_function
from polygpu.frontend.types import ArrayType

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "kernels"
BAD_INPUTS = Path(__file__).resolve().parent / "bad_inputs"

HEADER = "from __future__ import annotations\n\nfrom polygpu import affine, f32, f64, i32, i64\n"


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------


def parse_source(tmp_path: Path, body: str, name: str = "k") -> ir.Program:
    """Write ``HEADER + body`` to a file and parse function ``name`` from it."""
    path = tmp_path / "kernel.py"
    path.write_text(HEADER + textwrap.dedent(body))
    return parse_python_function(str(path), name)


def import_file(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def line_of(path: Path, text: str) -> int:
    """1-based number of the only line of ``path`` containing ``text``."""
    hits = [k for k, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    assert len(hits) == 1, (text, hits)
    return hits[0]


def statements(nodes):
    """All Assign nodes of a loop tree, in textual order."""
    for n in nodes:
        if isinstance(n, ir.Assign):
            yield n
        elif isinstance(n, ir.For):
            yield from statements(n.body)
        else:
            yield from statements(n.then)
            yield from statements(n.else_)


def strip_locs(e):
    """An ArrayRef/expression without locations, to compare spellings on different lines."""
    if isinstance(e, ir.ArrayRef):
        return (e.array, e.index)
    return e


# A small interpreter of the IR, used as an executable specification.
_INT_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul,
            "floordiv": operator.floordiv, "mod": operator.mod}
_VALUE_OPS = _INT_OPS | {"/": operator.truediv, "%": math.fmod}
_CMP = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
        "==": operator.eq, "!=": operator.ne}
_FUNCS = {"sqrt": math.sqrt, "exp": math.exp, "log": math.log, "fabs": math.fabs, "abs": abs,
          "pow": math.pow, "fmin": min, "fmax": max, "min": min, "max": max,
          "tanh": math.tanh, "sin": math.sin, "cos": math.cos, "floor": math.floor}


def eval_int(e: ir.IntExpr, env: dict) -> int:
    if isinstance(e, ir.IntConst):
        return e.value
    if isinstance(e, ir.IntVar):
        return env[e.name]
    if isinstance(e, ir.IntBinOp):
        return _INT_OPS[e.op](eval_int(e.lhs, env), eval_int(e.rhs, env))
    if isinstance(e, ir.IntNeg):
        return -eval_int(e.arg, env)
    if isinstance(e, ir.IntMinMax):
        return (min if e.op == "min" else max)(eval_int(a, env) for a in e.args)
    assert isinstance(e, ir.IntSelect)
    return eval_int(e.then if eval_cond(e.cond, env) else e.else_, env)


def eval_cond(c: ir.Cond, env: dict) -> bool:
    if isinstance(c, ir.Compare):
        return _CMP[c.op](eval_int(c.lhs, env), eval_int(c.rhs, env))
    if isinstance(c, ir.BoolOp):
        results = (eval_cond(a, env) for a in c.args)
        return all(results) if c.op == "and" else any(results)
    if isinstance(c, ir.Not):
        return not eval_cond(c.arg, env)
    assert isinstance(c, ir.BoolConst)
    return c.value


def eval_value(e: ir.Expr, env: dict):
    if isinstance(e, ir.Const):
        return e.value
    if isinstance(e, ir.ArrayRef):
        return env[e.array][tuple(eval_int(i, env) for i in e.index)]
    if isinstance(e, ir.ScalarRef):
        return env[e.name]
    if isinstance(e, ir.IntValue):
        return eval_int(e.expr, env)
    if isinstance(e, ir.BinOp):
        return _VALUE_OPS[e.op](eval_value(e.lhs, env), eval_value(e.rhs, env))
    if isinstance(e, ir.UnaryOp):
        v = eval_value(e.arg, env)
        return -v if e.op == "-" else v
    if isinstance(e, ir.Call):
        return _FUNCS[e.func](*(eval_value(a, env) for a in e.args))
    if isinstance(e, ir.ValueCompare):
        return _CMP[e.op](eval_value(e.lhs, env), eval_value(e.rhs, env))
    if isinstance(e, ir.ValueLogical):
        values = [eval_value(a, env) for a in e.args]
        return {"and": all, "or": any}[e.op](values) if e.op != "not" else not values[0]
    assert isinstance(e, ir.Select)
    return eval_value(e.then if eval_value(e.cond, env) else e.else_, env)


def run_nodes(nodes, env: dict) -> None:
    for n in nodes:
        if isinstance(n, ir.Assign):
            value = eval_value(n.value, env)
            if n.op != "=":
                value = _VALUE_OPS[n.op[0]](eval_value(n.target, env), value)
            if isinstance(n.target, ir.ArrayRef):
                env[n.target.array][tuple(eval_int(i, env) for i in n.target.index)] = value
            else:
                env[n.target.name] = value
        elif isinstance(n, ir.For):
            env[n.iterator] = eval_int(n.init, env)
            while eval_cond(n.cond, env):
                run_nodes(n.body, env)
                env[n.iterator] += n.step
            del env[n.iterator]
        else:
            run_nodes(n.then if eval_cond(n.cond, env) else n.else_, env)


def run_program(program: ir.Program, *args) -> None:
    run_nodes(program.body, dict(zip(program.signature, args, strict=True)))


def check_against_reference(fn, *args) -> None:
    """Run the IR and the Python function on copies of ``args``; arrays must agree."""
    ours = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    theirs = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    run_program(fn.program, *ours)
    fn(*theirs)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def check_source(source: str, name: str, *args) -> None:
    """Compare the IR interpreter with running ``source`` (hypothesis forbids tmp_path)."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "kernel_src.py"
        path.write_text(source)
        check_against_reference(affine(vars(import_file(path))[name]), *args)


def calls(nodes):
    """All Call nodes in the right-hand sides of a loop tree."""

    def walk(e):
        if isinstance(e, ir.Call):
            yield e
        for child in vars(e).values() if hasattr(e, "__dataclass_fields__") else ():
            for c in child if isinstance(child, tuple) else (child,):
                if isinstance(c, ir.Expr):
                    yield from walk(c)

    for s in statements(nodes):
        yield from walk(s.value)


# --------------------------------------------------------------------------
# The paper's kernels
# --------------------------------------------------------------------------

VI, VJ, VN = (ir.IntVar(v) for v in "ijn")


def test_mv_exact_ir():
    path = str(KERNELS / "mv.py")
    p = parse_python_function(path, "mv")

    def at(line):
        return SourceLoc(path, line)

    x_i = ir.ArrayRef("x", (VI,), at(13))
    expected_body = (
        ir.For("i", ir.IntConst(0), ir.Compare("<", VI, VN), 1, (
            ir.Assign(ir.ArrayRef("x", (VI,), at(11)), "=", ir.Const(0.0, "float64"), at(11)),
            ir.For("j", ir.IntConst(0), ir.Compare("<", VJ, VN), 1, (
                ir.Assign(x_i, "+=", ir.BinOp(
                    "*", ir.ArrayRef("a", (VI, VJ), at(13)), ir.ArrayRef("y", (VJ,), at(13))
                ), at(13)),
            ), at(12)),
        ), at(10)),
    )
    assert p.body == expected_body
    assert (p.name, p.file, p.loc, p.language) == ("mv", path, at(9), "python")
    assert p.signature == ("n", "a", "x", "y")
    assert p.params == (ir.ScalarDecl("n", "int32", at(9), "param"),)
    assert p.arrays == (
        ir.ArrayDecl("a", "float32", (VN, VN), at(9)),
        ir.ArrayDecl("x", "float32", (VN,), at(9)),
        ir.ArrayDecl("y", "float32", (VN,), at(9)),
    )
    assert p.temporaries == ()


def test_tmv_reads_a_transposed():
    p = parse_python_function(str(KERNELS / "tmv.py"), "tmv")
    init, update = statements(p.body)
    assert str(init) == "x[i] = 0.0"
    assert str(update) == "x[i] += (a[j][i] * y[j])"
    (outer,) = p.body
    assert outer.iterator == "i" and outer.body[1].iterator == "j"


def test_mvt_has_two_nests():
    path = KERNELS / "mvt.py"
    p = parse_python_function(str(path), "mvt")
    assert p.signature == ("n", "a", "x1", "x2", "y1", "y2")
    assert [a.name for a in p.arrays] == ["a", "x1", "x2", "y1", "y2"]
    assert len(p.body) == 2
    for nest in p.body:
        assert nest.iterator == "i" and len(nest.body) == 1 and nest.body[0].iterator == "j"
    s1, s2 = statements(p.body)
    assert str(s1) == "x1[i] += (a[i][j] * y1[j])"
    assert str(s2) == "x2[i] += (a[j][i] * y2[j])"
    assert s1.loc.line == line_of(path, "x1[i] +=")
    assert s2.loc.line == line_of(path, "x2[i] +=")


def test_mm_triple_nest():
    path = KERNELS / "mm.py"
    p = parse_python_function(str(path), "mm")
    (i_loop,) = p.body
    (j_loop,) = i_loop.body
    (k_loop,) = j_loop.body
    (s,) = k_loop.body
    assert [loop.iterator for loop in (i_loop, j_loop, k_loop)] == ["i", "j", "k"]
    assert all(loop.cond == ir.Compare("<", ir.IntVar(loop.iterator), VN)
               for loop in (i_loop, j_loop, k_loop))
    assert str(s) == "c[i][j] += (a[i][k] * b[k][j])"
    assert k_loop.loc.line == line_of(path, "for k in")
    assert s.loc.line == s.target.loc.line == line_of(path, "c[i][j] +=")


@pytest.mark.parametrize("name", ["mv", "tmv", "mvt", "mm"])
def test_kernels_ir_matches_reference(name):
    kernel = getattr(import_file(KERNELS / f"{name}.py"), name)
    rng = np.random.default_rng(0)
    n = 5
    arrays = [rng.standard_normal((n, n) if a.shape == (VN, VN) else n).astype(np.float32)
              for a in kernel.program.arrays]
    check_against_reference(kernel, n, *arrays)


def test_load_with_function_suffix():
    p = load(f"{KERNELS / 'mm.py'}:mm")
    assert p.name == "mm" and p.language == "python"


# --------------------------------------------------------------------------
# The decorator
# --------------------------------------------------------------------------


def test_decorated_kernel_is_the_reference():
    mv = import_file(KERNELS / "mv.py").mv
    a = np.arange(16, dtype=np.float32).reshape(4, 4)
    x = np.zeros(4, np.float32)
    y = np.array([1, 2, 3, 4], np.float32)
    mv(4, a, x, y)
    np.testing.assert_allclose(x, a @ y)
    assert mv.__name__ == "mv" and callable(mv.__wrapped__)
    assert mv.program is mv.program  # parsed once, cached
    assert mv.program.file == str(KERNELS / "mv.py")


def test_decorator_with_parentheses_and_lazy_parse(tmp_path):
    path = tmp_path / "lazy.py"
    path.write_text(HEADER + textwrap.dedent("""
        @affine()
        def scale(n: int, x: f32[n]):
            for i in range(n):
                x[i] *= 2.0

        @affine
        def bad(n: int, x: f32[n]):
            while True:
                pass
    """))
    module = import_file(path)  # a bad kernel is only reported when its IR is needed
    x = np.ones(3)
    module.scale(3, x)
    assert list(x) == [2.0, 2.0, 2.0]
    assert module.scale.program.name == "scale"
    with pytest.raises(UnsupportedError, match="'while' loop"):
        _ = module.bad.program


def test_parsing_does_not_execute_the_module(tmp_path):
    marker = tmp_path / "executed"
    p = parse_source(tmp_path, f"""
        open({str(marker)!r}, "w").close()
        raise SystemExit("imported!")

        def k(n: int, x: f32[n]):
            for i in range(n):
                x[i] = 1.0
    """)
    assert p.name == "k" and not marker.exists()


def test_runtime_types():
    assert (f32.dtype, f64.dtype, i32.dtype, i64.dtype) == ("float32", "float64", "int32", "int64")
    t = f32[4, "n"]
    assert isinstance(t, ArrayType) and t.dtype == "float32" and t.shape == (4, "n")
    assert f64[8].shape == (8,)
    assert set(ir.DTYPES) == {"float32", "float64", "int32", "int64"}


# --------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------


def test_parameter_annotations(tmp_path):
    p = parse_source(tmp_path, """
        import polygpu
        import polygpu as pg

        def k(n: int, m: i64, alpha: float, beta: f32, gamma: f64, c: i32,
              a: polygpu.f32[n, m], b: pg.f64["n", "2 * m"], d: "i32[n + 1]", e: f32[3]):
            pass
    """)
    assert p.signature == ("n", "m", "alpha", "beta", "gamma", "c", "a", "b", "d", "e")
    assert [(s.name, s.dtype, s.kind) for s in p.params] == [
        ("n", "int32", "param"), ("m", "int64", "param"), ("alpha", "float64", "param"),
        ("beta", "float32", "param"), ("gamma", "float64", "param"), ("c", "int32", "param"),
    ]
    shapes = {a.name: (a.dtype, tuple(map(str, a.shape))) for a in p.arrays}
    assert shapes == {
        "a": ("float32", ("n", "m")),
        "b": ("float64", ("n", "(2 * m)")),
        "d": ("int32", ("(n + 1)",)),
        "e": ("float32", ("3",)),
    }
    assert p.body == ()


def test_missing_function_lists_available(tmp_path):
    path = tmp_path / "kernel.py"
    path.write_text("def one():\n    pass\n\ndef two():\n    pass\n")
    with pytest.raises(PolygpuError) as e:
        parse_python_function(str(path), "three")
    assert str(path) in str(e.value) and "one, two" in str(e.value)


def test_unreadable_file():
    with pytest.raises(PolygpuError, match="cannot read"):
        parse_python_function("/nonexistent/kernel.py", "k")


# --------------------------------------------------------------------------
# Loops, guards and integer expressions
# --------------------------------------------------------------------------


def test_range_forms(tmp_path):
    p = parse_source(tmp_path, """
        def k(n: int, x: f32[n]):
            for i in range(n):
                x[i] = 1.0
            for i in range(2, n - 1):
                x[i] = 2.0
            for i in range(n - 1, -1, -2):
                x[i] = 3.0
            for i in range(1, n, +3):
                x[i] = 4.0
    """)
    forms = [(str(loop.init), str(loop.cond), loop.step) for loop in p.body]
    assert forms == [
        ("0", "i < n", 1),
        ("2", "i < (n - 1)", 1),
        ("(n - 1)", "i > -1", -2),
        ("1", "i < n", 3),
    ]


@given(
    lb=st.integers(-8, 8),
    ub=st.integers(-8, 8),
    step=st.integers(-4, 4).filter(bool),
)
def test_range_semantics(lb, ub, step):
    """The For produced for range(lb, ub, step) visits exactly range's values."""
    source = HEADER + textwrap.dedent(f"""
        def k(x: f64[64]):
            for i in range({lb}, {ub}, {step}):
                x[i + 16] += 1.0 + i
    """)
    check_source(source, "k", np.zeros(64))


def test_min_max_floordiv_mod_bounds(tmp_path):
    src = """
        def k(n: int, x: f32[n, n]):
            for i in range(n):
                for j in range(max(0, i - 2), min(n, i + 3, 2 * n)):
                    x[i, j] += 1.0
                for j in range(i // 2, n if i % 2 == 0 else i):
                    x[i][j] += j - n // 3
                x[i][n - 1 - i] = -abs(i - 2)
    """
    p = parse_source(tmp_path, src)
    (outer,) = p.body
    band, half, _ = outer.body
    assert band.init == ir.IntMinMax("max", (ir.IntConst(0), ir.IntBinOp("-", VI, ir.IntConst(2))))
    assert str(band.cond) == "j < min(n, (i + 3), (2 * n))"
    assert half.init == ir.IntBinOp("floordiv", VI, ir.IntConst(2))
    assert isinstance(half.cond.rhs, ir.IntSelect)
    assert half.cond.rhs.cond.lhs == ir.IntBinOp("mod", VI, ir.IntConst(2))
    (s,) = half.body
    assert s.value.rhs == ir.BinOp("floordiv", ir.IntValue(VN), ir.Const(3))
    source = HEADER + textwrap.dedent(src)
    check_source(source, "k", 7, np.zeros((7, 7)))


def test_both_subscript_spellings_are_equal(tmp_path):
    p = parse_source(tmp_path, """
        def k(n: int, a: f32[n, n, n], b: f32[n, n, n]):
            for i in range(n):
                for j in range(n):
                    a[i][j][0] = b[i, j, 0] + b[i][j, 1]
                    a[i, j, 0] = b[i][j][0]
    """)
    first, second = statements(p.body)
    assert strip_locs(first.target) == strip_locs(second.target)
    assert strip_locs(first.value.lhs) == strip_locs(second.value)
    assert first.value.rhs.index == (VI, VJ, ir.IntConst(1))


def test_conditions_and_elif(tmp_path):
    src = """
        def k(n: int, x: f32[n]):
            for i in range(n):
                if 0 < i - 1 <= n - 3 and not i == 4:
                    x[i] = 1.0
                elif i % 3 or i > n - 2:
                    x[i] = 2.0
                elif True:
                    x[i] = 3.0
                else:
                    x[i] = 4.0
    """
    p = parse_source(tmp_path, src)
    (guard,) = p.body[0].body
    chained, negated = guard.cond.args
    assert guard.cond.op == "and"
    i_minus_1 = ir.IntBinOp("-", VI, ir.IntConst(1))
    assert chained == ir.BoolOp("and", (
        ir.Compare("<", ir.IntConst(0), i_minus_1),
        ir.Compare("<=", i_minus_1, ir.IntBinOp("-", VN, ir.IntConst(3))),
    ))
    assert negated == ir.Not(ir.Compare("==", VI, ir.IntConst(4)))
    (elif1,) = guard.else_
    assert isinstance(elif1, ir.If) and elif1.cond.op == "or"
    assert elif1.cond.args[0] == ir.Compare("!=", ir.IntBinOp("mod", VI, ir.IntConst(3)),
                                            ir.IntConst(0))
    (elif2,) = elif1.else_
    assert elif2.cond == ir.BoolConst(True) and len(elif2.else_) == 1
    assert [guard.loc.line, elif1.loc.line, elif2.loc.line] == [
        line_of(tmp_path / "kernel.py", text) for text in ("if 0 <", "elif i % 3", "elif True")
    ]
    check_source(HEADER + textwrap.dedent(src), "k", 9, np.zeros(9))


# --------------------------------------------------------------------------
# Statement bodies
# --------------------------------------------------------------------------


def test_math_calls(tmp_path):
    src = """
        import math
        import numpy as np
        from math import tanh as th

        def k(n: int, alpha: float, x: f64[n], y: f64[n]):
            for i in range(n):
                y[i] = math.sqrt(abs(x[i])) + np.exp(-x[i] ** 2) * math.pi
                y[i] += min(x[i], alpha, 0.5) - max(i, n) + th(alpha * x[i])
                y[i] -= np.maximum(x[i], 0.0) + abs(i - 3) + math.fabs(x[i])
    """
    p = parse_source(tmp_path, src)
    s1, s2, s3 = statements(p.body)
    assert str(s1.value) == "(sqrt(fabs(x[i])) + (exp(-pow(x[i], 2)) * 3.141592653589793))"
    assert str(s2.value) == "((fmin(fmin(x[i], alpha), 0.5) - max(i, n)) + tanh((alpha * x[i])))"
    assert str(s3.value) == "((fmax(x[i], 0.0) + abs((i - 3))) + fabs(x[i]))"
    assert all(c.func in ir.PURE_FUNCTIONS for c in calls(p.body))
    assert s2.value.lhs.lhs.args[1] == ir.Const(0.5, "float64")
    rng = np.random.default_rng(1)
    check_source(HEADER + textwrap.dedent(src), "k", 6, 0.25,
                 rng.standard_normal(6), rng.standard_normal(6))


def test_value_expressions(tmp_path):
    src = """
        def k(n: int, x: f64[n], y: f64[n]):
            for i in range(n):
                y[i] = x[i] if x[i] > 0 and not i == 2 else -x[i] / 2 + i // 2 % 3 + True
                y[i] += 0.0 < x[i] < 1.0 or i >= n - 1
    """
    p = parse_source(tmp_path, src)
    s1, s2 = statements(p.body)
    assert isinstance(s1.value, ir.Select)
    assert s1.value.cond == ir.ValueLogical("and", (
        ir.ValueCompare(">", s1.value.then, ir.Const(0)),
        ir.ValueLogical("not", (ir.ValueCompare("==", ir.IntValue(VI), ir.Const(2)),)),
    ))
    assert str(s1.value.else_) == "(((-x[i] / 2) + ((i // 2) % 3)) + 1)"
    assert s2.value.op == "or" and s2.value.args[0].op == "and"
    check_source(HEADER + textwrap.dedent(src), "k", 5, np.linspace(-1, 2, 5), np.zeros(5))


def test_true_division_of_integers_stays_true_division(tmp_path):
    src = """
        def k(n: int, x: f64[n], c: i32[n]):
            for i in range(n):
                x[i] = i / n + 7 / 2 + c[i] / 4 + x[i] / 2
    """
    (s,) = statements(parse_source(tmp_path, src).body)
    assert str(s.value) == "(((((1.0 * i) / n) + (7.0 / 2)) + ((1.0 * c[i]) / 4)) + (x[i] / 2))"
    check_source(HEADER + textwrap.dedent(src), "k", 5, np.ones(5), np.arange(5, dtype=np.int32))


def test_temporaries(tmp_path):
    src = """
        def k(n: int, a: f32[n, n], x: f32[n]):
            \"\"\"Row sums, with a carried temporary read before its assignment.\"\"\"
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
            return
    """
    p = parse_source(tmp_path, src)
    temps = [(t.name, t.dtype, t.kind) for t in p.temporaries]
    assert temps == [("s", "float64", "temporary"), ("c", "int32", "temporary"),
                     ("t", "float32", "temporary"), ("prev", "float64", "temporary")]
    assert p.temporaries[0].loc.line == line_of(tmp_path / "kernel.py", "s = 0")
    first = next(statements(p.body))
    assert first.value == ir.ScalarRef("prev", first.loc)
    rng = np.random.default_rng(2)
    check_source(HEADER + textwrap.dedent(src), "k", 4, rng.standard_normal((4, 4)),
                 np.zeros(4))


def test_pass_docstring_and_strings_are_ignored(tmp_path):
    p = parse_source(tmp_path, """
        def k(n: int, x: f32[n]):
            "doc"
            for i in range(n):
                pass
                "a comment"
                ...
    """)
    (loop,) = p.body
    assert loop.body == ()


def test_non_affine_products_are_left_to_the_model_builder(tmp_path):
    p = parse_source(tmp_path, """
        def k(n: int, x: f32[n]):
            for i in range(n):
                for j in range(n):
                    x[i * j] = 0.0
    """)
    (s,) = statements(p.body)
    assert s.target.index == (ir.IntBinOp("*", VI, VJ),)


# --------------------------------------------------------------------------
# Rejected inputs
# --------------------------------------------------------------------------

FRONTEND_BAD_INPUTS = sorted(
    p for p in BAD_INPUTS.glob("*.py") if not p.name.startswith(("nonaffine_", "bounds_"))
)


def test_there_are_enough_bad_inputs():
    assert len(FRONTEND_BAD_INPUTS) >= 12


@pytest.mark.parametrize("path", FRONTEND_BAD_INPUTS, ids=lambda p: p.stem)
def test_bad_input(path):
    """Each file says what to expect in its first two lines and marks the offending line
    with ``# <- error``."""
    text = path.read_text()
    expect = re.match(r"# expect: (.*)\n# function: (\w+)\n", text)
    assert expect, "bad input files start with '# expect:' and '# function:' lines"
    substring, function = expect.groups()
    line = line_of(path, "# <- error")
    with pytest.raises(PolygpuError) as e:
        parse_python_function(str(path), function)
    message = str(e.value)
    assert message.startswith(f"{path}:{line}: "), message
    assert substring in message, message


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("for i in range(n):\n    x[i] = x[i:]", "slicing"),
        ("for i in range(n):\n    x.shape = 3", "attribute assignment 'x.shape'"),
        ("for i in range(n):\n    x[i] = (y := 1.0)", "assignment expression ':='"),
        ("for i in range(n):\n    x[i] = sum([1.0 for j in range(3)])", "call to 'sum'"),
        ("for i in range(n):\n    x[i] = [1.0 for j in range(3)]", "list comprehension"),
        ("for i in range(n):\n    x[i] = 'a' + 'b'", "constant 'a'"),
        ("for i in range(n):\n    x[i] = x[i].sum()", "call to 'x[i].sum'"),
        ("for i in range(n):\n    x[i] = math.sqrt(x[i], 2)", "takes 1 argument"),
        ("for i in range(n):\n    x[i] = n.real", "attribute 'n.real'"),
        ("for i in range(n):\n    x[i] //= 2", "augmented assignment '//='"),
        ("for i in range(n):\n    x[i] = y = 0.0", "chained assignment"),
        ("for i in range(n):\n    x[i] = x", "array 'x' used without subscripts"),
        ("for i in range(n):\n    x[i] = n[i]", "'n' is not an array"),
        ("for i in range(n):\n    x[math.floor(i)] = 0.0", "only min, max and abs"),
        ("for i in range(n):\n    x[i ** 2] = 0.0", "operator '**'"),
        ("for i in range(n):\n    for i in range(n):\n        x[i] = 0.0", "enclosing loop"),
        ("for n in range(3):\n    x[n] = 0.0", "reuses the name of a parameter"),
        ("for i in range(n):\n    x[i] = 0.0\nx[i] = 1.0", "'i' used outside its loop"),
        ("for i in range(0, n, 0):\n    x[i] = 0.0", "step must not be zero"),
        ("for i in range(n, step=2):\n    x[i] = 0.0", "range() takes"),
        ("for i, j in range(n):\n    x[i] = 0.0", "loop target '(i, j)'"),
        ("for i in range(n):\n    return\n", "early 'return'"),
        ("for i in range(n):\n    global g\n", "'global'"),
        ("with open('f') as f:\n    pass\n", "'with'"),
        ("try:\n    pass\nexcept Exception:\n    pass\n", "'try'"),
        ("for i in range(n):\n    if x[i] is None:\n        pass\n", "comparison 'is'"),
        ("for i in range(n):\n    if i in (1, 2):\n        pass\n", "comparison 'in' in if"),
        ("math.sqrt(2.0)", "has no effect"),
    ],
)
def test_rejected_constructs(tmp_path, body, expected):
    source = "def k(n: int, x: f32[n]):\n" + textwrap.indent(body, "    ")
    with pytest.raises(UnsupportedError, match=re.escape(expected)):
        parse_source(tmp_path, source)


@pytest.mark.parametrize(
    ("signature", "expected"),
    [
        ("n: int, *rest: int", "only plain positional parameters"),
        ("n: int, *, m: int", "only plain positional parameters"),
        ("n: str", "unsupported annotation 'str'"),
        ("n: int, x: float[n]", "unsupported array element type 'float'"),
        ("n: int, x: f32[n / 2]", "true division"),
        ("n: int, x: f32[q]", "unknown name 'q' in shape of 'x'"),
        ("alpha: float, x: f32[alpha]", "float64 parameter 'alpha' in shape of 'x'"),
        ("n: int, x: f32['n +']", "invalid annotation string"),
    ],
)
def test_rejected_signatures(tmp_path, signature, expected):
    with pytest.raises(UnsupportedError, match=re.escape(expected)):
        parse_source(tmp_path, f"def k({signature}):\n    pass\n")


def test_async_function_is_rejected(tmp_path):
    with pytest.raises(UnsupportedError, match="async"):
        parse_source(tmp_path, "async def k(n: int):\n    pass\n")


# --------------------------------------------------------------------------
# Issue 17: reserved names, duplicate parameters, scalars set before the loops
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "name", "why"),
    [
        ("n: int, float: f32[n]", "float", "C++ keyword"),
        ("n: int, int: f32[n]", "int", "C++ keyword"),
        ("n: int, new: f32[n]", "new", "C++ keyword"),
        ("n: int, blockDim: f32[n]", "blockDim", "CUDA built-in"),
        ("n: int, exp: f32[n]", "exp", "function the generated code calls"),
        ("n: int, max: int", "max", "function the generated code calls"),
        ("n: int, pg_x: f32[n]", "pg_x", "prefix 'pg_'"),
        ("n: int, x: f32[n], x_sh: f32[n]", "x_sh", "shared-memory copy"),
    ],
)
def test_reserved_parameter_names_are_refused(tmp_path, params, name, why):
    with pytest.raises(PolygpuError) as info:
        parse_source(tmp_path, f"def k({params}):\n    pass\n")
    err = str(info.value)
    assert f"parameter '{name}': " in err and why in err and "rename it" in err, err


def test_reserved_iterator_and_temporary_names_are_refused(tmp_path):
    with pytest.raises(PolygpuError, match="loop iterator 'this'"):
        parse_source(tmp_path, "def k(n: int, x: f32[n]):\n"
                     "    for this in range(n):\n        x[this] = 0.0\n")
    with pytest.raises(PolygpuError, match="variable 'sqrt'"):
        parse_source(tmp_path, "def k(n: int, x: f32[n]):\n"
                     "    for i in range(n):\n        sqrt = x[i]\n        x[i] = sqrt\n")


def test_ordinary_names_like_generated_ones_are_accepted(tmp_path):
    program = parse_source(tmp_path, "def k(n: int, c0: f32[n], bx: f32[n], tid: f32[n]):\n"
                           "    for tx in range(n):\n        c0[tx] = bx[tx] + tid[tx]\n")
    assert [a.name for a in program.arrays] == ["c0", "bx", "tid"]


def test_duplicate_parameter_is_refused(tmp_path):
    with pytest.raises(PolygpuError, match="duplicate parameter 'x'"):
        parse_source(tmp_path, "def k(n: int, x: f32[n], x: f32[n]):\n    pass\n")


def test_scalar_assigned_before_the_loops_is_a_temporary(tmp_path):
    program = parse_source(tmp_path, "def k(n: int, x: f32[n]):\n    eps = 0.1\n"
                           "    for i in range(n):\n        x[i] = x[i] + eps\n")
    assert [t.name for t in program.temporaries] == ["eps"]
    assert str(program.body[0]) == "eps = 0.1"
