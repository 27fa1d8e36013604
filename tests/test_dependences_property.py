"""Property test: isl's dependences equal the brute-force ones on random affine nests.

Each example is a random nest (imperfect, triangular, strided, descending, guarded,
several statements, in-place updates).  isl's flow/anti/output relations, with the
parameter fixed, must enumerate exactly the instance pairs derived from a recorded
sequential run of the same Python source.  The equivalent C rendering must give the
same polyhedral model as the Python one (both frontends agree).
"""

from __future__ import annotations

import importlib.util
import itertools

import islpy as isl
import pytest
from hypothesis import HealthCheck, example, given, settings

from polygpu.frontend.c_frontend import parse_c_file
from polygpu.frontend.python_frontend import parse_python_function
from polygpu.model.build import build_scop
from polygpu.model.dependences import compute_dependences
from tests.random_nests import (
    NMIN,
    Guard,
    Loop,
    Stmt,
    brute_force_dependences,
    fuzz_nests,
    nests,
    render_c,
    render_python,
)

_counter = itertools.count()


def _points(relation: isl.Map, n: int):
    """(source instance, sink instance) pairs of ``relation`` at parameter n."""
    fixed = relation.fix_val(isl.dim_type.param, 0, isl.Val(n))
    n_in = fixed.dim(isl.dim_type.in_)
    src_name = fixed.get_tuple_name(isl.dim_type.in_)
    dst_name = fixed.get_tuple_name(isl.dim_type.out)
    pairs = []

    def visit(point):
        coords = [
            point.get_coordinate_val(isl.dim_type.set, k).to_python()
            for k in range(fixed.dim(isl.dim_type.in_) + fixed.dim(isl.dim_type.out))
        ]
        pairs.append(((src_name, tuple(coords[:n_in])), (dst_name, tuple(coords[n_in:]))))

    fixed.wrap().foreach_point(visit)
    return pairs


def _load(path, name):
    spec = importlib.util.spec_from_file_location(f"_nest_{next(_counter)}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name).__wrapped__


# derandomized so CI is reproducible; a known failing nest is in the issue notes
@settings(max_examples=220, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(tree=nests())
# regression: a statement pinned to i == 0 inside a descending strided loop took the
# counter +i' while its neighbours took -i' (the sign was read off its own schedule,
# where -i == i): dependences came out backwards and compile printed wrong code
@example(tree=[Loop("t", "0", "3", 1, [Loop("i", "n - 1", "-1", -2, [
    Guard(("i", "==", "0"), [Stmt(("y", ("0",)), "=", [("x", ("0",))])]),
    Stmt(("x", ("i",)), "=", [("y", ("0",)), ("x", ("i",))])])])])
# regression: isl's compute_flow failed on a union of reads over a strided domain
@example(tree=[Loop("i", "0", "n", 2, [Loop("j", "0", "min(i + 2, n)", 1, [
    Stmt(("y", ("0",)), "+=", [("y", ("i",))])])])])
# regression: ... and on a single read over a disjunctive strided domain (the lexmax path)
@example(tree=[Loop("i", "0", "n", 1, [Loop("j", "0", "n", 2, [
    Loop("k", "max(j - 1, 0)", "n", 1, [
        Stmt(("A", ("i + 0", "n - 1 - i")), "=", [("A", ("i + 0", "n - 1 - i"))])])])])])
# regression: isl's coalesce failed ("total dimensionality changed") on the strided
# domains; the analysis now runs on compressed domains
@example(tree=[Loop("i", "0", "n", 2, [Loop("j", "0", "n", 2, [
    Loop("k", "0", "min(j + 2, n)", 1, [
        Stmt(("B", ("j + 1", "i + k")), "=", []),
        Loop("l", "0", "n - 1", 1, [Stmt(("B", ("n - 1 - k", "n - 1 - k")), "=", [])])])])])])
# regression: isl's lexmax failed on strided times (the lexmax path retries simplified)
@example(tree=[
    Loop("i", "0", "n", 2, [Loop("j", "0", "i + 1", 1, [
        Guard(("i", "!=", "n - 2"),
              [Stmt(("x", ("2",)), "=", [("A", ("n - 1 - j", "j + i")), ("x", ("i",)),
                                         ("x", ("2",))])],
              [Stmt(("B", ("n - 1 - j", "n - 1 - j")), "+=", [("y", ("2",))])]),
        Stmt(("y", ("j + i",)), "=", [("B", ("j + i", "j")), ("x", ("n - 1 - j",)),
                                      ("y", ("j + i",))])])]),
    Loop("i", "0", "n - 1", 1, [
        Stmt(("x", ("i",)), "=", [("x", ("i",))]),
        Guard(("i", "!=", "n - 2"),
              [Stmt(("x", ("i + 0",)), "=", [("y", ("i",)), ("A", ("i", "i")),
                                             ("x", ("i + 0",))])],
              [Stmt(("x", ("i + 1",)), "+=", [])])])])
# regression: isl's compute_flow picked the first j of a strided loop as the last
# writer when times were strided ([.., 2j', ..]); compressed schedules use counters
@example(tree=[
    Loop("i", "0", "n", 1, [Loop("j", "0", "n", 2, [Loop("k", "j", "n", 1, [
        Stmt(("A", ("i + 0", "i + 0")), "=", [])])])]),
    Loop("i", "0", "n", 1, [Stmt(("A", ("i + 0", "i + 0")), "=", [])])])
# regression: j = i made isl report "stride 0" for j, which was taken as a stride
@example(tree=[Loop("i", "0", "n", 2, [Loop("j", "0", "n", 1, [Loop("k", "0", "n", 1, [
    Guard(("j", "!=", "i"), [Stmt(("A", ("i + 0", "i + 0")), "=", [])],
          [Stmt(("A", ("i + 0", "n - 1 - i")), "+=", [])])])])])])
# regression: a strided loop whose offset has rational coefficients (the parity of n
# fixes i's residue: offset n/2-style) made compression() build a constraint with a
# non-integer coefficient (exit 3); the equality is now scaled by the denominator
@example(tree=[Loop("t", "0", "3", 1, [Loop("i", "n - 2", "-1", -2, [
    Loop("j", "max(i - 3, 1)", "min(i + 2, n)", 1, [
        Stmt(("B", ("j + 1", "j + i - 1")), "=", []),
        Stmt(("A", ("2 * j - 1", "j + i - 1")), "=", [])])])])])
def test_isl_dependences_match_brute_force(tree, tmp_path):
    k = next(_counter)
    py_path = tmp_path / f"nest_{k}.py"
    py_path.write_text(render_python(tree))
    scop = build_scop(parse_python_function(str(py_path), "nest"))
    try:
        deps = compute_dependences(scop)
    except isl.Error as e:  # isl errors do not compare, which breaks hypothesis' report
        raise AssertionError(f"isl failed: {e}\n{render_python(tree)}") from None
    func = _load(py_path, "nest")
    for n in (3, 4, 5):
        expected = brute_force_dependences(func, n, scop.statements)
        got = {
            (d.kind, d.array, src, dst)
            for d in deps.items
            for src, dst in _points(d.relation, n)
        }
        assert got == expected, (render_python(tree), n, got ^ expected)

    c_path = tmp_path / f"nest_{k}.c"
    c_path.write_text(render_c(tree))
    c_scop = build_scop(parse_c_file(str(c_path), "nest"))
    assert [s.name for s in c_scop.statements] == [s.name for s in scop.statements]
    for cs, ps in zip(c_scop.statements, scop.statements, strict=True):
        assert cs.domain.is_equal(ps.domain), (render_c(tree), cs.domain, ps.domain)
        assert cs.schedule.is_equal(ps.schedule)
        for ca, pa in zip(cs.accesses, ps.accesses, strict=True):
            assert (ca.kind, ca.array) == (pa.kind, pa.array)
            assert ca.relation.is_equal(pa.relation)


# the richer nests of the fuzz test (tests/test_fuzz_nests.py): time-step loops, offset,
# windowed and min/max bounds, shifted and scaled subscripts, descending strided loops;
# in bounds from n = NMIN on.  Python only (the C side is the fuzz test's): ~0.15 s a nest
@pytest.mark.slow
@settings(max_examples=200, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(tree=fuzz_nests())
def test_isl_dependences_match_brute_force_on_fuzz_nests(tree, tmp_path):
    py_path = tmp_path / f"fuzz_{next(_counter)}.py"
    py_path.write_text(render_python(tree))
    scop = build_scop(parse_python_function(str(py_path), "nest"))
    try:
        deps = compute_dependences(scop)
    except isl.Error as e:
        raise AssertionError(f"isl failed: {e}\n{render_python(tree)}") from None
    func = _load(py_path, "nest")
    for n in (NMIN, NMIN + 1):
        expected = brute_force_dependences(func, n, scop.statements)
        got = {(d.kind, d.array, src, dst)
               for d in deps.items for src, dst in _points(d.relation, n)}
        assert got == expected, (render_python(tree), n, sorted(got - expected)[:4],
                                 sorted(expected - got)[:4])
