"""The CPU-side speed-ups keep every result: compiled grid expressions agree with the
tree walk (values and errors), identity memos never conflate equal objects, tiling
returns the same kernels for variants that differ only after tiling, and the legality
verdict is the one of the difference test."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import islpy as isl
import pytest

from polygpu.frontend import load
from polygpu.model.analysis import analyze
from polygpu.model.build import build_scop
from polygpu.model.isl_util import memo_by_identity
from polygpu.runtime import grid
from polygpu.schedule.candidates import candidates
from polygpu.schedule.legality import LegalityError, _orders, _violated, prove_legal
from polygpu.schedule.tiling import execution_schedule, tile
from polygpu.schedule.variant import Variant

KERNELS = Path(__file__).resolve().parent.parent / "kernels"


def _walk(node, values):
    """The grid language by its definition (module doc of runtime/grid.py)."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return int(values[node.id])
    if isinstance(node, ast.UnaryOp):
        v = _walk(node.operand, values)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.Call):
        args = [_walk(a, values) for a in node.args]
        return max(args) if node.func.id == "max" else min(args)
    a, b = _walk(node.left, values), _walk(node.right, values)
    op = type(node.op)
    return {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}.get(op, None) \
        if op is not ast.Div else a // b


@pytest.mark.parametrize("text", ["(n + 31) / 32", "max(1, (n - 2 * m + 127) / 128)",
                                  "-(-n) + +m", "min(n, m, 7) * (h0 + 1)", "42"])
def test_compiled_grid_expressions_agree_with_the_tree(text):
    for values in ({"n": 1000, "m": 3, "h0": 5}, {"n": 0, "m": 0, "h0": 0}):
        assert grid.evaluate(text, values) == _walk(grid.parse(text), values)


def test_compiled_grid_expressions_raise_as_before():
    with pytest.raises(grid.GridExpressionError, match="unknown parameter 'q'"):
        grid.evaluate("n + q", {"n": 1})
    with pytest.raises(grid.GridExpressionError, match=r"-1 / 32 \(division needs"):
        grid.evaluate("(n - 2) / 32", {"n": 1})


def test_identity_memo_keeps_equal_objects_apart():
    calls = []

    @memo_by_identity(maxsize=4)
    def text(s, k):
        calls.append(k)
        return str(s)

    a = isl.Set("{ [i] : 0 <= i < 10 }")
    b = isl.Set("{ [i] : 0 <= i < 5 or 5 <= i < 10 }")  # equal to a, another form
    assert a == b  # islpy's == is isl's semantic equality: no key for a memo
    assert text(a, 1) == str(a) and text(b, 1) == str(b) and text(a, 1) == str(a)
    assert calls == [1, 1]


def _heat():
    return analyze(build_scop(load(str(KERNELS / "polybench" / "heat_3d.c"), "heat_3d")))


def test_tiling_is_shared_across_memory_only_variants_and_proven():
    an = _heat()
    tr = candidates(an)[0]
    step = tr.step or an
    deps = step.dependences_with(tr.atomic)
    v = Variant(tile=(32, 32), threads=(8, 32))
    kernels = tile(step.scop, deps, tr, v)
    assert tile(step.scop, deps, tr, replace(v, shared=False, padding=1)) is kernels
    other = tile(step.scop, deps, tr, replace(v, jam=True))
    assert other is not kernels
    assert str(other[0].schedule) != str(kernels[0].schedule)


def test_legality_verdict_is_the_difference_test():
    an = _heat()
    tr = candidates(an)[0]
    step = tr.step or an
    deps = step.dependences_with(tr.atomic)
    kernels = tile(step.scop, deps, tr, Variant(tile=(32, 32), threads=(8, 32)))
    es = execution_schedule(kernels)
    # every dimension parallel, the kernel index too: S0 -> S1 is violated
    bad = replace(es, kinds=("parallel",) * len(es.kinds))
    items = list(deps.items)
    good = _orders(bad.kinds)
    found = _violated(items, bad.schedule, good)
    for d in items:
        rel = d.relation.apply_domain(isl.Map.from_union_map(
            bad.schedule.intersect_domain(isl.UnionSet(d.relation.domain()))))
        rel = rel.apply_range(isl.Map.from_union_map(
            bad.schedule.intersect_domain(isl.UnionSet(d.relation.range()))))
        wrong = not rel.deltas().subtract(good.align_params(
            rel.deltas().get_space())).is_empty()
        assert (d in found) == wrong
    with pytest.raises(LegalityError):
        prove_legal(deps, bad)


def test_the_ast_cache_gives_the_code_of_a_cold_start():
    """Code generation reuses ASTs by the text of their schedule and context: a variant's
    code is the same generated first in a fresh cache, after other variants filled it, and
    again from the cache -- and the cache was used."""
    from polygpu.codegen import thread_ast
    from polygpu.pipeline import compile_region

    spec, sizes = str(KERNELS / "polybench" / "mm3.c"), {
        "ni": 37, "nj": 41, "nk": 43, "nl": 47, "nm": 53}
    first = Variant(tile=(32, 32), threads=(8, 32), time_tile=16, jam=True)
    other = Variant(tile=(16, 64), threads=(4, 64), time_tile=8, jam=True, chunk=4)

    def code(v):
        return compile_region(spec, variant=v, params=sizes).program.source

    thread_ast._ast_of_text.cache_clear()
    cold = code(first)
    entries = thread_ast._ast_of_text.cache_info().currsize
    assert entries > 0
    thread_ast._ast_of_text.cache_clear()
    code(other)
    assert code(first) == cold  # after another variant filled the cache
    hits = thread_ast._ast_of_text.cache_info().hits
    assert code(first) == cold  # all from the cache
    assert thread_ast._ast_of_text.cache_info().hits >= hits + entries
    assert thread_ast._ast_of_text.cache_info().currsize >= entries
