"""The model builder: exact domains, schedules and accesses, and its affinity errors."""

from __future__ import annotations

import textwrap

import islpy as isl
import pytest

from polygpu.errors import UnsupportedError
from polygpu.frontend.python_frontend import parse_python_function
from polygpu.model.analysis import analyze
from polygpu.model.build import build_scop

HEADER = "from __future__ import annotations\nfrom polygpu import affine, f32, f64\n\n"


def scop_of(tmp_path, body: str, signature: str = "n: int, A: f64[n, n], x: f64[n]"):
    src = HEADER + f"@affine\ndef k({signature}):\n" + textwrap.indent(
        textwrap.dedent(body), "    ")
    path = tmp_path / "k.py"
    path.write_text(src)
    return build_scop(parse_python_function(str(path), "k"))


def domain(scop, k=0):
    return scop.statements[k].domain


def test_triangular_min_max_bounds(tmp_path):
    scop = scop_of(tmp_path, """
        for i in range(n):
            for j in range(max(i - 1, 0), min(i + 2, n)):
                A[i, j] = 1.0
    """)
    assert domain(scop).is_equal(isl.Set(
        "[n] -> { S0[i, j] : 0 <= i < n and j >= i - 1 and j >= 0 and j < i + 2 and j < n }"))


def test_strided_and_descending_loops(tmp_path):
    scop = scop_of(tmp_path, """
        for i in range(1, n, 3):
            x[i] = 1.0
        for j in range(n - 1, -1, -2):
            x[j] = 2.0
    """)
    assert domain(scop, 0).is_equal(isl.Set(
        "[n] -> { S0[i] : 1 <= i < n and exists e: i = 1 + 3e }"))
    assert domain(scop, 1).is_equal(isl.Set(
        "[n] -> { S1[j] : 0 <= j <= n - 1 and exists e: j = n - 1 - 2e }"))
    # a descending loop runs its iterator backwards in time
    assert scop.statements[1].schedule.is_equal(isl.Map(
        "[n] -> { S1[j] -> [1, -j, 0] : 0 <= j < n and exists e: j = n - 1 - 2e }"))


def test_if_else_split_domains_and_share_a_level(tmp_path):
    scop = scop_of(tmp_path, """
        for i in range(n):
            if i < n // 2:
                x[i] = 1.0
            else:
                x[i] = 2.0
    """)
    assert domain(scop, 0).is_equal(isl.Set(
        "[n] -> { S0[i] : 0 <= i < n and i < floor(n / 2) }"))
    assert domain(scop, 1).is_equal(isl.Set(
        "[n] -> { S1[i] : 0 <= i < n and i >= floor(n / 2) }"))
    s0, s1 = (s.schedule for s in scop.statements)
    assert s0.is_equal(isl.Map("[n] -> { S0[i] -> [0, i, 0] : 0 <= i < floor(n / 2) }"))
    assert s1.is_equal(isl.Map("[n] -> { S1[i] -> [0, i, 1] : floor(n / 2) <= i < n }"))


def test_scalar_temporary_is_a_zero_dimensional_array(tmp_path):
    scop = scop_of(tmp_path, """
        for i in range(n):
            t = 0.0
            for j in range(n):
                t += A[i, j]
            x[i] = t
    """)
    assert scop.array("t").rank == 0 and scop.array("t").kind == "temporary"
    write_t = scop.statements[0].writes[0]
    assert write_t.relation.is_equal(isl.Map("[n] -> { S0[i] -> t[] : 0 <= i < n }"))
    an = analyze(scop)
    # the temporary serialises i: flow, anti and output dependences on t cross iterations
    assert not an.loops[0].parallel


def test_context_requires_every_extent_to_be_positive(tmp_path):
    scop = scop_of(tmp_path, "for i in range(m):\n    x[i] = 1.0\n",
                   "n: int, m: int, A: f64[n + 1, 2 * n], x: f64[m - 1]")
    assert scop.parameters == ("n", "m")
    assert scop.context.is_equal(isl.Set("[n, m] -> { : n >= 1 and m >= 2 }"))


def test_modulo_and_floor_division_subscripts(tmp_path):
    scop = scop_of(tmp_path, """
        for i in range(n):
            x[i // 2] += A[i % 3, i]
    """)
    read_a = scop.statements[0].reads[0]
    assert read_a.relation.is_equal(isl.Map(
        "[n] -> { S0[i] -> A[i mod 3, i] : 0 <= i < n }"))
    write = scop.statements[0].writes[0]
    assert write.relation.is_equal(isl.Map("[n] -> { S0[i] -> x[floor(i / 2)] : 0 <= i < n }"))


@pytest.mark.parametrize("body, message", [
    ("for i in range(n):\n    for j in range(n):\n        x[i * j] = 1.0\n", "non-affine"),
    ("for i in range(n):\n    for j in range(i * i):\n        x[j] = 1.0\n", "non-affine"),
    ("for i in range(n):\n    x[n // i] = 1.0\n", "non-constant"),
    ("for i in range(n):\n    for i in range(n):\n        x[i] = 1.0\n", "enclosing loop"),
])
def test_non_affine_input_is_reported_with_its_line(tmp_path, body, message):
    with pytest.raises(UnsupportedError) as err:
        scop_of(tmp_path, body)
    assert message in str(err.value)
    assert str(err.value).startswith(f"{tmp_path / 'k.py'}:")
    assert err.value.loc.line > 5


def test_reduction_written_over_two_lines_and_reset_temporary(tmp_path):
    an = analyze(scop_of(tmp_path, """
        for i in range(n):
            t = 0.0
            for j in range(n):
                t += A[i, j]
            for j in range(n):
                x[j] = (
                    x[j] + A[i, j])
    """))
    reductions = {(r.statement, r.array): r.loops for r in an.reductions}
    # t is reset for every i: only j reduces into it; x[j] accumulates along i
    assert reductions == {("S1", "t"): ("j",), ("S2", "x"): ("i",)}


def test_register_class_needs_one_owner_per_element(tmp_path):
    an = analyze(scop_of(tmp_path, """
        for i in range(n):
            for j in range(n):
                A[i, j] += x[i // 2]
    """))
    assert [lp.parallel for lp in an.loops] == [True, True]
    by_text = {r.text: r.reuse for r in an.reuse}
    # x[i // 2] varies only with the parallel i, but threads 2k and 2k+1 share it
    assert by_text["x[(i // 2)]"] == "reuse"
    assert by_text["A[i][j]"] == "no-reuse"


def test_out_of_bounds_accesses_are_reported(tmp_path):
    an = analyze(scop_of(tmp_path, """
        for i in range(n):
            x[i] = A[i, i + 1]
    """))
    (warning,) = an.warnings
    assert (warning.array, warning.text) == ("A", "A[i][(i + 1)]")
    assert str(warning).startswith(f"{tmp_path / 'k.py'}:8: warning:")
    assert "[n = 1]" in warning.example  # the smallest instance that overruns


@pytest.mark.parametrize("kernel", ["mv", "tmv", "mvt", "mm"])
def test_lexmax_dataflow_equals_isl_compute_flow(kernel):
    from polygpu.frontend import load
    from polygpu.model.dependences import last_source_by_lexmax

    scop = build_scop(load(f"kernels/{kernel}.c"))
    for array in scop.arrays:
        reads, writes = scop.access_map("read", array.name), scop.access_map("write", array.name)
        for sinks in (reads, writes):
            info = isl.UnionAccessInfo.from_sink(sinks).set_must_source(writes)
            expected = info.set_schedule_map(scop.schedule).compute_flow().get_must_dependence()
            assert last_source_by_lexmax(sinks, writes, scop.schedule).is_equal(expected)
