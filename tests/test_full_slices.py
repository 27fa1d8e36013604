"""Full/partial slice separation (polygpu/codegen/full_slices.py): the work of a full
slice has constant loop bounds, the last partial slice keeps its guard, the branch is
uniform in a block, and the split kernels compute what the loops compute."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from polygpu.codegen import staging
from polygpu.pipeline import compile_region, compile_variant, prepare
from polygpu.runtime.check import check_program
from polygpu.schedule.variant import Variant

L2 = "kernels/allpairs/l2dist.c"
SLICED = Variant(tile=(32, 32), threads=(8, 8), jam=True, time_tile=16, chunk=4,
                 prefetch=True)
FULL_LOOP = re.compile(r"for \(int (\w+) = 16 \* (\w+); \1 <= 16 \* \2 \+ 15; \1 \+= 1\)")
PARTIAL_LOOP = re.compile(r"for \(int (\w+) = 16 \* (\w+); \1 <= min\(d - 1, 16 \* \2 \+ 15\)")


def _split_conditions(src: str) -> list[str]:
    """The conditions of the ``if`` right before a full-slice loop."""
    out = []
    for m in FULL_LOOP.finditer(src):
        head = src[:m.start()]
        out.append(head[head.rindex("if ("):].splitlines()[0])
    return out


def test_parametric_slices_are_split_into_full_and_last(monkeypatch):
    src = compile_region(L2, variant=SLICED).program.source
    assert FULL_LOOP.search(src) and PARTIAL_LOOP.search(src)
    conditions = _split_conditions(src)
    assert conditions
    for cond in conditions:
        # parameters and tile coordinates only: every thread of a block agrees
        assert not re.search(r"\bt[xyz]\b|pg_tid", cond), cond
        assert re.search(r"\bd\b", cond), cond  # the slice is full below d
    # without the separation there is no constant-bound slice loop at all
    monkeypatch.setattr(staging, "full_slices", lambda *args: None)
    # (another unroll factor: a program of its own, whatever a cache holds)
    plain = compile_region(L2, variant=replace(SLICED, unroll=2)).program.source
    assert not FULL_LOOP.search(plain) and PARTIAL_LOOP.search(plain)


def test_no_second_copy_where_every_slice_is_full(monkeypatch):
    sizes = {"n1": 40, "n2": 24, "d": 48}  # 48 = 3 slices of 16
    p = prepare(L2, params=sizes)
    variant = replace(SLICED, specialize=True)
    src = compile_variant(p, variant, params=sizes).program.source
    monkeypatch.setattr(staging, "full_slices", lambda *args: None)
    plain = compile_variant(p, replace(variant, unroll=2), params=sizes).program.source
    assert src.count("for (int c6") == plain.count("for (int c6") > 0


@pytest.mark.parametrize("sizes", [{"n1": 37, "n2": 33, "d": 17},   # one full, one of 1
                                   {"n1": 9, "n2": 40, "d": 5},     # only a partial one
                                   {"n1": 33, "n2": 9, "d": 48}])   # only full ones
def test_split_kernels_match_the_loops(sizes):
    c = compile_region(L2, variant=SLICED)
    r = check_program(c.program, c.source_scop, L2, sizes, seed=11)
    assert r.ok, r.message


def test_mm_with_a_partial_last_slice_matches_the_loops():
    v = Variant(tile=(32, 32), threads=(8, 8), jam=True, time_tile=8, chunk=4, prefetch=True)
    c = compile_region("kernels/mm.c", variant=v)
    assert re.search(r"for \(int (\w+) = 8 \* (\w+); \1 <= 8 \* \2 \+ 7; \1 \+= 1\)",
                     c.program.source)
    r = check_program(c.program, c.source_scop, "kernels/mm.c", {"n": 29}, seed=2)
    assert r.ok, r.message
