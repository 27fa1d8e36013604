"""Golden tests: the model of the paper's kernels (mv, tmv, mvt, mm), from both frontends.

The expectations are the paper's §4.1/§4.3 observations: in tmv ``a[j][i]`` has
full rank over the 2-D domain (no higher-order reuse) while ``y[j]`` has reuse; in mv
the parallel loop is ``i`` and ``j`` carries the reduction into ``x[i]``; in mm
``a``/``b`` have reuse along the loop they do not use and ``c[i][j]`` is invariant
along ``k``.
"""

from __future__ import annotations

from pathlib import Path

import islpy as isl
import pytest

from polygpu.frontend import load
from polygpu.model.analysis import analyze
from polygpu.model.build import build_scop

KERNELS = Path(__file__).resolve().parent.parent / "kernels"


def _analysis(name: str, language: str):
    spec = str(KERNELS / f"{name}.c") if language == "c" else f"{KERNELS / name}.py:{name}"
    return analyze(build_scop(load(spec)))


def _reuse(an, text: str):
    (r,) = [r for r in an.reuse if r.text == text and r.kind == "read"]
    return r


def _dep(an, kind, source, sink, array):
    found = [d for d in an.dependences.items
             if (d.kind, d.source, d.sink, d.array) == (kind, source, sink, array)]
    assert len(found) == 1, (kind, source, sink, array, an.dependences.items)
    return found[0].relation


def _status(lp) -> str:
    return "parallel" if lp.parallel else "reduction" if lp.reduction else "sequential"


def _loops(an):
    return {lp.iterator: _status(lp) for lp in an.loops}


LANGS = pytest.mark.parametrize("lang", ["c", "python"])


@LANGS
def test_mv(lang):
    an = _analysis("mv", lang)
    scop = an.scop
    assert scop.parameters == ("n",)
    assert scop.context.is_equal(isl.Set("[n] -> { : n >= 1 }"))
    s0, s1 = scop.statements
    assert s0.domain.is_equal(isl.Set("[n] -> { S0[i] : 0 <= i < n }"))
    assert s1.domain.is_equal(isl.Set("[n] -> { S1[i, j] : 0 <= i < n and 0 <= j < n }"))
    # original order: S0[i] before all S1[i, j], and S1[i, *] before S0[i + 1]
    assert s1.schedule.is_equal(isl.Map(
        "[n] -> { S1[i, j] -> [0, i, 1, j, 0] : 0 <= i < n and 0 <= j < n }"))
    a, y, x = _reuse(an, "a[i][j]"), _reuse(an, "y[j]"), _reuse(an, "x[i]")
    assert (a.rank, a.dimensions, a.higher_order_reuse, a.reuse) == (2, 2, False, "no-reuse")
    assert (y.rank, y.higher_order_reuse, y.redundant_loops) == (1, True, ("i",))
    assert y.reuse == "constant"  # read-only, the same y[j] for every thread i
    assert (x.redundant_loops, x.reuse) == (("j",), "register")
    assert _dep(an, "flow", "S0", "S1", "x").is_equal(
        isl.Map("[n] -> { S0[i] -> S1[i, 0] : 0 <= i < n }"))
    assert _dep(an, "flow", "S1", "S1", "x").is_equal(
        isl.Map("[n] -> { S1[i, j] -> S1[i, j + 1] : 0 <= i < n and 0 <= j < n - 1 }"))
    assert _dep(an, "anti", "S1", "S1", "x").is_equal(
        isl.Map("[n] -> { S1[i, j] -> S1[i, j + 1] : 0 <= i < n and 0 <= j < n - 1 }"))
    assert {d.array for d in an.dependences.items} == {"x"}  # a and y are read-only
    assert _loops(an) == {"i": "parallel", "j": "reduction"}
    (red,) = an.reductions
    assert (red.statement, red.array, red.op, red.loops) == ("S1", "x", "+", ("j",))


@LANGS
def test_tmv(lang):
    an = _analysis("tmv", lang)
    a, y = _reuse(an, "a[j][i]"), _reuse(an, "y[j]")
    # the paper: a[j][i] has rank 2 over a 2-D domain (no higher-order reuse), y[j] has reuse
    assert (a.rank, a.dimensions, a.higher_order_reuse, a.reuse) == (2, 2, False, "no-reuse")
    assert (y.rank, y.dimensions, y.higher_order_reuse) == (1, 2, True)
    assert _reuse(an, "x[i]").reuse == "register"
    assert _loops(an) == {"i": "parallel", "j": "reduction"}


@LANGS
def test_mvt(lang):
    an = _analysis("mvt", lang)
    s0, s1 = an.scop.statements
    assert str(s0.body).startswith("x1[i] +=") and str(s1.body).startswith("x2[i] +=")
    assert _reuse(an, "a[i][j]").reuse == "no-reuse"
    assert _reuse(an, "a[j][i]").reuse == "no-reuse"
    # the two nests touch disjoint written arrays: no dependence between them
    assert all(d.source == d.sink for d in an.dependences.items)
    assert {d.array for d in an.dependences.items} == {"x1", "x2"}
    assert [_status(lp) for lp in an.loops] == ["parallel", "reduction"] * 2


@LANGS
def test_mm(lang):
    an = _analysis("mm", lang)
    (s,) = an.scop.statements
    assert s.iterators == ("i", "j", "k")
    a, b, c = _reuse(an, "a[i][k]"), _reuse(an, "b[k][j]"), _reuse(an, "c[i][j]")
    assert (a.rank, a.redundant_loops, a.reuse) == (2, ("j",), "reuse")
    assert (b.rank, b.redundant_loops, b.reuse) == (2, ("i",), "reuse")
    assert (c.rank, c.redundant_loops, c.reuse) == (2, ("k",), "register")
    assert all(x.higher_order_reuse for x in (a, b, c))  # rank 2 < 3 dimensions
    assert _loops(an) == {"i": "parallel", "j": "parallel", "k": "reduction"}
    assert _dep(an, "flow", "S0", "S0", "c").is_equal(isl.Map(
        "[n] -> { S0[i, j, k] -> S0[i, j, k + 1] : 0 <= i, j < n and 0 <= k < n - 1 }"))


@pytest.mark.parametrize("name", ["mv", "tmv", "mvt", "mm", "map_chain"])
def test_c_and_python_kernels_give_the_same_model(name):
    c, py = _analysis(name, "c").scop, _analysis(name, "python").scop
    assert c.parameters == py.parameters
    for cs, ps in zip(c.statements, py.statements, strict=True):
        assert cs.domain.is_equal(ps.domain) and cs.schedule.is_equal(ps.schedule)
        for ca, pa in zip(cs.accesses, ps.accesses, strict=True):
            assert ca.relation.is_equal(pa.relation)
