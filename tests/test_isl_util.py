"""The shared isl helpers (polygpu/model/isl_util.py) on literal sets and maps."""

from __future__ import annotations

import islpy as isl
import pytest

from polygpu.model import dependences
from polygpu.model.isl_util import (
    detached,
    maps_of,
    sets_of,
    union_of,
    union_of_sets,
    union_optional,
)


def _params(x) -> list[str]:
    return [x.get_space().get_dim_name(isl.dim_type.param, k)
            for k in range(x.get_space().dim(isl.dim_type.param))]


def test_maps_of_splits_by_space():
    u = isl.UnionMap("[n] -> { S[i] -> a[i] : 0 <= i < n; S[i] -> a[i + 1] : 0 <= i < n;"
                     " T[i, j] -> b[j] : 0 <= i, j < n }")
    maps = maps_of(u)
    assert len(maps) == 2
    by_name = {m.get_tuple_name(isl.dim_type.in_): m for m in maps}
    assert by_name["S"].is_equal(isl.Map("[n] -> { S[i] -> a[o] : 0 <= i < n and "
                                         "i <= o <= i + 1 }"))
    assert by_name["T"].is_equal(isl.Map("[n] -> { T[i, j] -> b[j] : 0 <= i, j < n }"))
    assert maps_of(isl.UnionMap("{ }")) == []


def test_sets_of_splits_by_space():
    u = isl.UnionSet("[n] -> { S[i] : 0 <= i < n; T[i, j] : 0 <= j <= i < n }")
    sets = sets_of(u)
    assert sorted(s.get_tuple_name() for s in sets) == ["S", "T"]
    assert union_of_sets(sets).is_equal(u)
    assert sets_of(isl.UnionSet("{ }")) == []


def test_union_of_maps_and_union_maps():
    a = isl.Map("[n] -> { S[i] -> [i, 0] : 0 <= i < n }")
    b = isl.UnionMap("[m] -> { T[j] -> [j, 1] : 0 <= j < m }")
    c = isl.Map("[n] -> { S[i] -> [i, 0] : n <= i < 2n }")
    u = union_of([a, b, c])
    assert u.is_equal(isl.UnionMap("[n, m] -> { S[i] -> [i, 0] : 0 <= i < 2n; "
                                   "T[j] -> [j, 1] : 0 <= j < m }"))
    assert _params(u) == ["n", "m"]  # from the first piece on
    assert union_of(x for x in [a]).is_equal(isl.UnionMap.from_map(a))  # any iterable


def test_union_of_in_a_space():
    context = isl.Set("[m, n] -> { : 0 < m and 0 < n }")
    a = isl.Map("[n] -> { S[i] -> a[i] : 0 <= i < n }")
    u = union_of([a], context.get_space())
    assert u.is_equal(isl.UnionMap("[n] -> { S[i] -> a[i] : 0 <= i < n }"))
    assert sorted(_params(u)) == ["m", "n"]  # all of the space's parameters
    assert _params(union_of([a])) == ["n"]  # only the pieces'
    empty = union_of([], context.get_space())
    assert empty.is_empty() and _params(empty) == ["m", "n"]


def test_union_of_sets_in_a_space_and_from_the_first():
    context = isl.Set("[m, n] -> { : }")
    s = isl.Set("[n] -> { S[i] : 0 <= i < n }")
    t = isl.Set("[n] -> { S[i] : n <= i < 2n }")
    expected = isl.UnionSet("[n] -> { S[i] : 0 <= i < 2n }")
    assert union_of_sets([s, t]).is_equal(expected)
    assert _params(union_of_sets([s, t])) == ["n"]
    assert union_of_sets([s, t], context.get_space()).is_equal(expected)
    assert sorted(_params(union_of_sets([s, t], context.get_space()))) == ["m", "n"]
    assert union_of_sets([], context.get_space()).is_empty()
    u = isl.UnionSet("{ T[0] }")
    assert union_of_sets([s, u]).is_equal(
        isl.UnionSet("[n] -> { S[i] : 0 <= i < n; T[0] }"))


def test_union_of_nothing_without_a_space():
    with pytest.raises(ValueError):
        union_of([])
    with pytest.raises(ValueError):
        union_of_sets([])


def test_union_optional():
    a = isl.Set("[n] -> { a[i] : 0 <= i < n }")
    b = isl.Set("[n] -> { a[i] : i = n }")
    assert union_optional(a, b).is_equal(isl.Set("[n] -> { a[i] : 0 <= i < n or i = n }"))
    assert union_optional(a, None) is a
    assert union_optional(None, b) is b
    assert union_optional(None, None) is None


def test_dependences_reexports_the_helpers():
    assert dependences.maps_of is maps_of
    assert dependences.union_of is union_of


@pytest.mark.parametrize("text", [
    "[n] -> { [i] -> [j = 1 + i]; [i] -> [j = 2i] : (i) mod 3 = 0 }",
    "[n] -> { S[i] -> T[j] : j > i and exists (e : i = 2e) ; S[i] -> T[i] : i < n }",
    "{ [i] : 0 <= i <= 3; [i = 7] }",
    "{ S[i] : (-1 + i) mod 3 = 0 }",
    "{ S[i] -> [j] : false }",
])
def test_detached_is_equal_in_the_same_representation(text):
    x = (isl.Map if "->" in text else isl.Set)(text)
    d = detached(x)
    assert d.is_equal(x) and str(d) == str(x)
    u = isl.UnionMap("[n] -> { A[i] -> A[1 + i]; S[i] -> T[j] : j > i > n }")
    assert str(detached(u)) == str(u)
    v = isl.UnionSet("{ T[]; S[i] : 0 < i <= 3 }")
    assert str(detached(v)) == str(v)
