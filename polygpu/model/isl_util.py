"""Conversions between isl's union objects and Python lists, in one place.

islpy hands out the pieces of a union map or set as an isl list (``get_map_list``) and
builds a union one ``from_map`` at a time; an empty union needs a space to carry its
parameters.  Every stage needs these few conversions, and they used to be repeated in
each module with a difference that matters: a union started from the empty union in a
given space carries all that space's parameters (and may be empty), one started from
its first piece only the pieces' parameters, and their order differs -- which shows in
printed sets (the launch plan's host steps) and may in isl's AST.  So both forms are
here, chosen by passing a space or not, each doing exactly what the helpers it replaced
did.
"""

from __future__ import annotations

from collections.abc import Iterable

import islpy as isl


def maps_of(umap: isl.UnionMap) -> list[isl.Map]:
    """The maps of a union map, one per (domain, range) space pair."""
    ml = umap.get_map_list()
    return [ml.get_at(k) for k in range(ml.n_map())]


def sets_of(uset: isl.UnionSet) -> list[isl.Set]:
    """The sets of a union set, one per space."""
    sl = uset.get_set_list()
    return [sl.get_at(k) for k in range(sl.n_set())]


def union_of(items: Iterable[isl.Map | isl.UnionMap], space: isl.Space | None = None
             ) -> isl.UnionMap:
    """The union of isl maps or union maps.  With ``space`` (a parameter space, e.g. a
    context's): started from the empty union in it, so it may be empty and has all the
    space's parameters; without: started from the first item (at least one)."""
    result = None if space is None else isl.UnionMap.empty(space)
    for x in items:
        u = isl.UnionMap.from_map(x) if isinstance(x, (isl.Map, isl.BasicMap)) else x
        result = u if result is None else result.union(u)
    if result is None:
        raise ValueError("the union of nothing has no space")
    return result


def union_of_sets(items: Iterable[isl.Set | isl.UnionSet], space: isl.Space | None = None
                  ) -> isl.UnionSet:
    """The union of isl sets or union sets; ``space`` as for :func:`union_of`."""
    result = None if space is None else isl.UnionSet.empty(space)
    for x in items:
        u = isl.UnionSet.from_set(x) if isinstance(x, (isl.Set, isl.BasicSet)) else x
        result = u if result is None else result.union(u)
    if result is None:
        raise ValueError("the union of nothing has no space")
    return result


def union_optional(a, b):
    """``a.union(b)`` of two isl objects of one kind where either may be None (absent):
    then the other one, None if both are."""
    if a is None:
        return b
    return a if b is None else a.union(b)
