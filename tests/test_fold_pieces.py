"""A thread's loops split at a packed triangle's fold (codegen/fold_pieces.py): the
statement's instances on each side of the fold of each reference whose side changes
inside a thread's work, as pieces that partition its instances, each printed with that
side's affine subscript -- and the result exact against the loop nest."""

from __future__ import annotations

import re

import pytest

from polygpu.codegen.expressions import packed_subscript
from polygpu.codegen.fold_pieces import LOWER, UPPER, fold_pieces
from polygpu.pipeline import compile_variant, prepare
from polygpu.runtime.check import check_program
from polygpu.schedule.variant import Variant

CHOLESKY = "kernels/batched_cholesky.c"
UPPER_CHOLESKY = "kernels/batched_cholesky_upper.c"
DOUBLE = ("DATA_TYPE=double", "SQRT_FUN=sqrt")
# a warp per element, four a block (the default's plan at n = 64), and a block of 64
# threads per element
GROUPS = dict(tile=(64, 64), threads=(4, 8), time_tile=32, shared=False, specialize=True,
              device_steps=True, resident=True, packed=True, elements_per_block=4)
BLOCK64 = dict(tile=(64, 64), threads=(8, 8), time_tile=32, specialize=True,
               device_steps=True, resident=True, packed=True)


def _compiled(params, fields, defines=(), spec=CHOLESKY):
    prepared = prepare(spec, defines=defines, params=params)
    batch = next(k for k, tr in enumerate(prepared.candidates)
                 if tr.host is not None and tr.host.kind == "batch")
    compiled = compile_variant(prepared, Variant(candidate=batch, **fields), params)
    # (the region the kernels were generated from: the batch's step, specialized)
    return compiled, compiled.transformation.step.scop.specialized(params)


def test_a_known_side_prints_its_affine_subscript():
    assert packed_subscript("r", "c", 32, side=UPPER) == "[(r) - 32][c]"
    assert packed_subscript("r", "c", 32, side=LOWER) == "[31 - (r)][64 - (c)]"
    assert packed_subscript("r", "c", 32, upper=True, side=UPPER) == "[(c) - 32][r]"
    for upper in (False, True):  # each side's subscript is the select's value there
        for r in range(64):
            for c in range(r + 1):
                rc = (c, r) if upper else (r, c)
                side = UPPER if r >= 32 else LOWER
                assert _indices(packed_subscript(*map(str, rc), 32, upper, side)) == \
                    _indices(packed_subscript(*map(str, rc), 32, upper))


def _indices(subscript: str) -> list[int]:
    """The values of a subscript of constants (C selects evaluated)."""
    values = []
    for part in re.findall(r"\[([^\[\]]*)\]", subscript):
        if "?" in part:
            cond, rest = part.split("?", 1)
            then, else_ = rest.split(":", 1)
            part = then if eval(cond) else else_
        values.append(eval(part))
    return values


def _pieces(compiled):
    compiled, scop = compiled
    (residence,) = compiled.residences
    return scop, {k.index: fold_pieces(scop, k, residence.buffers)
                  for k in compiled.kernels}


def test_the_update_is_split_and_its_pieces_partition_it():
    """n = 64, the warp plan: the trailing update ``a[i][j] -= a[i][k] * a[j][k]`` runs
    rows ``i`` and columns ``j`` in a thread's loops, both crossing the fold (32): three
    pieces (``j <= i`` leaves no upper ``j`` with a lower ``i``), disjoint, covering
    its instances.  The column scaling (a warp over 64 rows: two points a thread, one
    each side) is split in two; the substitutions, one-thread steps, are not split."""
    compiled = _compiled({"nb": 37, "n": 64}, GROUPS, DOUBLE)
    scop, by_kernel = _pieces(compiled)
    split = {p.statement: [] for pieces in by_kernel.values()
             for p in pieces.pieces.values()}
    for pieces in by_kernel.values():
        for name, p in pieces.pieces.items():
            split[p.statement].append((tuple(s for _, s in p.sides),
                                       pieces.domains[name]))
    assert {scop.statement(s).body.op for s in split} == {"-=", "="}
    (update,) = (s for s in split if scop.statement(s).body.op == "-=")
    (scaling,) = (s for s in split if s != update)
    # (by reference: the scaling's a[i][k] read and written; the update's a[i][k],
    # a[j][k], and a[i][j] read and written)
    assert sorted(sides for sides, _ in split[scaling]) == [(LOWER,) * 2, (UPPER,) * 2]
    assert sorted(sides for sides, _ in split[update]) == \
        [(LOWER,) * 4, (UPPER, LOWER, UPPER, UPPER), (UPPER,) * 4]
    for stmt, parts in split.items():
        domains = [d.set_tuple_name(stmt) for _, d in parts]
        whole = scop.statement(stmt).domain
        union = domains[0]
        for k, a in enumerate(domains):
            for b in domains[k + 1:]:
                assert a.intersect(b.align_params(a.get_space())).is_empty()
            if k:
                union = union.union(a.align_params(union.get_space()))
        assert union.align_params(whole.get_space()).is_equal(
            whole.align_params(union.get_space()))


def test_the_split_update_prints_no_select():
    compiled, _ = _compiled({"nb": 37, "n": 64}, GROUPS, DOUBLE)
    source = compiled.program.source
    updates = [line for line in source.splitlines() if "-= (pg_inv0 *" in line]
    assert len(updates) == 3 and not any("?" in line for line in updates)
    # both sides of both rows: [31 - (i)][64 - (j)] ... [(i) - 32][j]
    assert any(re.search(r"\[31 - \(\(h2 \+ ty", u) for u in updates)
    assert any(re.search(r"\[\(\(h2 \+ ty [^]]*\)\) - 32\]", u) for u in updates)
    # (the pieces' loops are kept rolled, as the unsplit triangle's was)
    assert source.count("#pragma unroll 1") >= 3
    # the substitutions (one-thread steps, their loops shared by a warp's lanes) keep
    # their selects
    assert re.search(r"\(c\d\) >= 32 \?", source)


@pytest.mark.parametrize("n", [17, 64])
@pytest.mark.parametrize("fields", [GROUPS, BLOCK64], ids=["groups", "block64"])
def test_split_factorizations_are_exact(n, fields):
    params = {"nb": 37, "n": n}
    compiled = _compiled(params, fields, DOUBLE)
    assert any(p for p in _pieces(compiled)[1].values())
    compiled = compiled[0]
    result = check_program(compiled.program, compiled.source_scop, CHOLESKY, params,
                           seed=13, defines=DOUBLE)
    assert result.ok, result.message


def test_the_upper_triangle_is_split_at_its_columns():
    """``U^T U``: the fold is on the box's columns (the transposed box's rows); its
    update is split there and exact."""
    params = {"nb": 37, "n": 64}
    compiled = _compiled(params, GROUPS, (), UPPER_CHOLESKY)
    _, by_kernel = _pieces(compiled)
    # the update's three pieces and the row scaling's two
    assert sorted(len(p.pieces) for p in by_kernel.values() if p) == [2, 3]
    compiled = compiled[0]
    updates = [line for line in compiled.program.source.splitlines()
               if "-= (pg_inv0 *" in line]
    assert len(updates) == 3 and not any("?" in line for line in updates)
    result = check_program(compiled.program, compiled.source_scop, UPPER_CHOLESKY, params,
                           seed=3)
    assert result.ok, result.message


def test_no_packed_triangle_no_pieces():
    """Unpacked resident elements: nothing is split, the code is as before."""
    fields = {**GROUPS, "packed": False}
    _, by_kernel = _pieces(_compiled({"nb": 37, "n": 17}, fields))
    assert not any(by_kernel.values())
