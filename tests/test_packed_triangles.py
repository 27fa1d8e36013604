"""Packed resident triangles (``Variant.packed``, memory/residence.py): a factorization's
element, a lower triangle, kept in shared memory as LAPACK's rectangular full packed
format -- half the words of its box, so twice the elements resident an SM; an upper
triangle (``U^T U``) packed as its transpose's lower one."""

from __future__ import annotations

import re

import pytest

from polygpu.codegen.expressions import packed_subscript
from polygpu.errors import PolygpuError
from polygpu.memory.footprints import triangle_pair
from polygpu.memory.residence import packable_at
from polygpu.pipeline import compile_variant, prepare
from polygpu.runtime.check import check_program
from polygpu.schedule.variant import Variant
from polygpu.search.space import SpaceOptions, space

CHOLESKY = "kernels/batched_cholesky.c"
UPPER = "kernels/batched_cholesky_upper.c"  # the same in the upper triangle
DOUBLE = ("DATA_TYPE=double", "SQRT_FUN=sqrt")
# a block per element (8 x 32 threads) and a warp per element, four a block
BLOCK = dict(tile=(32, 32), threads=(8, 32), time_tile=32, specialize=True,
             device_steps=True, resident=True, packed=True)
GROUPS = dict(tile=(64, 64), threads=(4, 8), time_tile=32, shared=False, specialize=True,
              device_steps=True, resident=True, packed=True, elements_per_block=4)


def _batch(prepared) -> int:
    return next(k for k, tr in enumerate(prepared.candidates)
                if tr.host is not None and tr.host.kind == "batch")


def _compiled(params, fields, defines=(), spec=CHOLESKY):
    prepared = prepare(spec, defines=defines, params=params)
    return compile_variant(prepared, Variant(candidate=_batch(prepared), **fields), params)


def test_the_fold_maps_a_triangle_one_to_one_into_half_the_words():
    """Every (r, c) with c <= r lands on its own cell of the (R - h) x (2 h + 1) rows,
    for even and odd R."""
    for rows in range(2, 12):
        fold = rows // 2
        cells = set()
        for r in range(rows):
            for c in range(r + 1):
                row = r - fold if r >= fold else fold - 1 - r
                column = c if r >= fold else 2 * fold - c
                assert 0 <= row < rows - fold and 0 <= column <= 2 * fold
                cells.add((row, column))
        assert len(cells) == rows * (rows + 1) // 2
        assert (rows - fold) * (2 * fold + 1) < rows * rows


def test_the_packed_subscript_is_the_fold():
    assert packed_subscript("r", "c", 32) == \
        "[(r) >= 32 ? (r) - 32 : 31 - (r)][(r) >= 32 ? (c) : 64 - (c)]"


def test_the_cholesky_element_is_packed_and_its_vector_is_not():
    """n = 64: a's lower triangle in 32 rows of 65 words (8320 bytes, not 16640: no
    padding, the odd rows keep a column's words on distinct banks); b as before."""
    compiled = _compiled({"nb": 37, "n": 64}, BLOCK)
    (residence,) = compiled.residences
    buffers = {b.array: b for b in residence.buffers}
    assert buffers["a"].packed == 32 and buffers["a"].row_extents == (1, 32, 65)
    assert buffers["a"].bytes == 4 * 32 * 65 and buffers["a"].padding == 0
    assert buffers["b"].packed == 0
    assert buffers["a"].to_json()["packed_triangle"] == \
        {"fold": 32, "rows": [1, 32, 65], "upper": False}
    source = compiled.program.source
    assert "__shared__ __align__(16) float pg_res_a[1][32][65];" in source
    # the column scaling's row moves with the thread alone: both sides, a select; the
    # update's rows move with its loops, split at the fold (tests/test_fold_pieces.py)
    assert re.search(r"pg_res_a\[0\]\[\(\(h2 \+ tx \+ 1\)\) >= 32 \?", source)
    assert re.search(r"pg_res_a\[0\]\[\(\(h2 \+ ty \+ 8 \* ry \+ 1\)\) - 32\]", source)


@pytest.mark.parametrize("n", [3, 5, 17])
@pytest.mark.parametrize("fields", [BLOCK, GROUPS], ids=["block", "groups"])
def test_packed_factorizations_are_exact_at_odd_sizes(n, fields):
    params = {"nb": 37, "n": n}
    compiled = _compiled(params, fields)
    assert "? (" in compiled.program.source  # the fold's selects
    result = check_program(compiled.program, compiled.source_scop, CHOLESKY, params,
                           seed=11)
    assert result.ok, result.message


def test_packed_in_double():
    params = {"nb": 37, "n": 17}
    compiled = _compiled(params, GROUPS, DOUBLE)
    assert "double (*pg_res_a)[9][17]" in compiled.program.source
    result = check_program(compiled.program, compiled.source_scop, CHOLESKY, params,
                           seed=5, defines=DOUBLE)
    assert result.ok, result.message


SOA = "kernels/batched_cholesky_soa.c"  # the same, elements interleaved: a[i][j][e]


def test_the_triangle_pair_skips_trailing_unit_dimensions():
    assert triangle_pair((1, 64, 64)) == (1, 2)
    assert triangle_pair((64, 64, 1)) == (0, 1)
    assert triangle_pair((64, 1)) == (0, 1)  # (no triangle: refused by its words)


@pytest.mark.parametrize("n", [5, 17])
@pytest.mark.parametrize("fields", [BLOCK, GROUPS], ids=["block", "groups"])
def test_an_interleaved_element_is_packed_before_its_unit_dimension(n, fields):
    """Interleaved (SoA) elements: the box of ``a[i][j][e]`` is one word wide along
    ``e``, so the triangle is in the two dimensions before it -- packed into
    ``[h][2 h + 1][1]`` (n = 17: 9 rows of 17 words, not the box's 17 x 17), the
    element's word ``[0]`` last; exact at nb = 37, in double, with a block per element
    and a warp per element four a block (whose copies run element-fastest)."""
    params = {"nb": 37, "n": n}
    compiled = _compiled(params, fields, DOUBLE, SOA)
    (residence,) = compiled.residences
    a = next(b for b in residence.buffers if b.array == "a")
    fold = n // 2
    assert a.packed == fold and a.triangle == (0, 1)
    assert a.row_extents == (n - fold, 2 * fold + 1, 1)
    source = compiled.program.source
    assert f"[{n - fold}][{2 * fold + 1}][1];" in source
    assert re.search(r"pg_res_a\[\(pg_u0\) >= \d+ \? .*\]\[pg_u2\] = ", source)
    result = check_program(compiled.program, compiled.source_scop, SOA, params,
                           seed=7, defines=DOUBLE)
    assert result.ok, result.message


def test_the_upper_fold_is_the_transposes():
    assert packed_subscript("r", "c", 32, upper=True) == packed_subscript("c", "r", 32)


@pytest.mark.parametrize("n, defines", [(64, ()), (5, ()), (17, DOUBLE)])
def test_an_upper_factorization_is_packed_and_exact(n, defines):
    """``U^T U`` (kernels/batched_cholesky_upper.c): isl proves a's footprint an upper
    triangle (column at least row), so it is packed as its transpose's lower triangle --
    as many words as the lower form's (n = 64: 32 rows of 65); checked against the loop
    nest."""
    params = {"nb": 37, "n": n}
    compiled = _compiled(params, GROUPS, defines, UPPER)
    (residence,) = compiled.residences
    buffers = {b.array: b for b in residence.buffers}
    fold = n // 2
    assert buffers["a"].packed == fold and buffers["a"].packed_upper
    assert buffers["a"].row_extents == (1, n - fold, 2 * fold + 1)
    assert buffers["a"].to_json()["packed_triangle"]["upper"] is True
    # the column is the fold's row: a[i][j] at [j >= h ? j - h : h - 1 - j][...]
    assert re.search(rf"pg_res_a\[0\]\[\(\([^?]*\)\) >= {fold} \?", compiled.program.source)
    result = check_program(compiled.program, compiled.source_scop, UPPER, params,
                           seed=7, defines=defines)
    assert result.ok, result.message


# a batched LU without pivoting: its elements are whole squares
LU = """void batched_lu(int nb, int n, float a[nb][n][n])
{
#pragma scop
  for (int e = 0; e < nb; e++)
    for (int k = 0; k < n; k++) {
      for (int i = k + 1; i < n; i++)
        a[e][i][k] = a[e][i][k] / a[e][k][k];
      for (int i = k + 1; i < n; i++)
        for (int j = k + 1; j < n; j++)
          a[e][i][j] -= a[e][i][k] * a[e][k][j];
    }
#pragma endscop
}
"""


def test_packed_is_refused_where_nothing_is_a_triangle(tmp_path):
    """A 1 x 1 element (nothing to fold), an LU's square elements, and packed without
    resident: clear errors."""
    with pytest.raises(PolygpuError, match="no resident array's footprint is a lower "
                       "or upper triangle"):
        _compiled({"nb": 37, "n": 1}, BLOCK)
    path = tmp_path / "batched_lu.c"
    path.write_text(LU)
    params = {"nb": 37, "n": 8}
    prepared = prepare(str(path), params=params)
    assert not packable_at(prepared.candidates[_batch(prepared)], params)
    with pytest.raises(PolygpuError, match="no resident array's footprint is a lower"):
        compile_variant(prepared, Variant(candidate=_batch(prepared), **BLOCK), params)
    with pytest.raises(PolygpuError, match="packed .* needs resident"):
        Variant(packed=True)


def test_the_search_twins_resident_triangles_only():
    params = {"nb": 37, "n": 17}
    cholesky = prepare(CHOLESKY, params=params)
    found = space(cholesky, params, SpaceOptions(specialize=True, candidates=3))
    resident = [v for v in found if v.resident and not v.packed]
    assert resident and all(v.resident for v in found if v.packed)
    assert {v for v in found if v.packed} == {Variant(**{
        **{f: getattr(v, f) for f in v.__dataclass_fields__}, "packed": True})
        for v in resident}
    upper = prepare(UPPER, params=params)  # an upper triangle is twinned as well
    assert packable_at(upper.candidates[_batch(upper)], params)
    assert packable_at(cholesky.candidates[_batch(cholesky)], params)
    assert Variant.from_json(Variant(**{**BLOCK}).to_json()).packed
    assert "packed" not in Variant().to_json()
