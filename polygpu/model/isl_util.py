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

import functools
from collections import OrderedDict
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



def detached(x: isl.Map | isl.Set | isl.UnionMap | isl.UnionSet):
    """An equal isl object in the same representation (the same basic maps/sets, with
    the same constraints in the same order) that shares no internal data with ``x``.

    islpy's ``copy`` and isl's ``__isl_keep`` arguments share the representation, and
    some isl operations rewrite a shared representation in place (into an equal set,
    by intent): isl's scheduler (``compute_schedule``) left the analysis' dependence
    maps in a form on which the next ``is_subset`` failed inside isl (assertion
    "i >= 0", isl_tab.c).  Handing such an operation detached copies keeps the
    caller's objects as they were, and isl answers as it would on the originals."""
    if isinstance(x, isl.UnionMap):
        return union_of((detached(m) for m in maps_of(x)), x.get_space())
    if isinstance(x, isl.UnionSet):
        return union_of_sets((detached(s) for s in sets_of(x)), x.get_space())
    # a new tuple name makes isl copy a shared basic map/set before changing it; an
    # anonymous tuple is named and the name dropped again
    if isinstance(x, isl.Map):
        dt = isl.dim_type.in_
        name = x.get_tuple_name(dt)
        parts = [isl.Map.from_basic_map(b.set_tuple_name(dt, name or "_"))
                 for b in x.get_basic_maps()]
    else:
        name = x.get_tuple_name()
        parts = [isl.Set.from_basic_set(b.set_tuple_name(name or "_"))
                 for b in x.get_basic_sets()]
    if not parts:
        return type(x).empty(x.get_space())
    result = parts[0]
    for part in parts[1:]:
        result = result.union_disjoint(part)
    if name is None:
        result = result.reset_tuple_id(dt) if isinstance(x, isl.Map) else \
            result.reset_tuple_id()
    return result


def unsourced_reads(read: isl.UnionMap, writes: isl.UnionMap, earlier: isl.UnionMap
                    ) -> isl.UnionMap:
    """``read`` (instance -> element) restricted to the instances no earlier write of
    their element precedes: the values it takes from before the region.  ``earlier``:
    instance -> the instances before it (``schedule.lex_gt_union_map(schedule)``)."""
    sourced = read.apply_range(writes.reverse()).intersect(earlier).domain()
    return read.subtract_domain(sourced)


def max_int_val(pa: isl.PwAff) -> isl.Val:
    """The maximum of ``pa`` over the integer points of its domain, for a ``pa`` that
    takes integer values there (a bound, an extent): isl's ``max_val`` refuses
    rational affine pieces ("expecting integer affine expression"), which isl makes
    of such values (``(h0)/2 : h0 mod 2 = 0``); their floor is the same function with
    integer pieces.  NaN on an empty domain, infinity when unbounded."""
    return pa.floor().max_val()


def extent_at(extent: isl.PwAff, params: dict[str, int]) -> int:
    """A parametric extent (an array dimension) at ``params``: its largest value there,
    0 where that is unknown."""
    ctx = isl.Set.universe(extent.get_domain_space())
    for name, v in params.items():
        k = ctx.find_dim_by_name(isl.dim_type.param, name)
        if k >= 0:
            ctx = ctx.fix_val(isl.dim_type.param, k, isl.Val(v))
    top = extent.intersect_params(ctx).max_val()
    return 0 if top.is_nan() or not top.is_int() else int(top.to_python())


def count_points(s: isl.Set) -> int:
    """The integer points of ``s``, whose parameters are fixed (one value each), exactly.
    Counted symbolically with barvinok (``card``): isl's ``count_val`` scans the points,
    which takes seconds at a few million and forever at n = 2**31; ``count_val`` remains
    the fallback (an islpy without barvinok, a count that is not an integer)."""
    if s.is_empty():
        return 0
    if s.params().is_singleton():
        try:
            fixed = s.project_out(isl.dim_type.param, 0, s.dim(isl.dim_type.param))
            card = fixed.card()
            value = card.eval(isl.Set.universe(card.get_domain_space()).sample_point())
            if value.is_int():
                return int(value.to_python())
        except (isl.Error, AttributeError):  # an islpy without barvinok
            pass
    return s.count_val().to_python()


_PLAIN = (str, int, bool, float, type(None), frozenset)


def memo_by_identity(maxsize: int = 256, by_value: tuple[int, ...] = ()):
    """Memoize a pure function of isl objects (and plain values) by the *identity* of
    its object arguments.  Not by value: islpy's ``==`` is isl's semantic equality, and
    two representations of one set may give different-looking (equal) results, which
    would show in the generated code.  Each entry keeps its arguments alive, so an id
    is never reused while it is a key.  For the stages that ask isl the same question
    of the same objects many times (per access, per dimension, per buffer).  The
    arguments at the positions ``by_value`` (hashable values without isl objects, such
    as variants) are compared by value."""

    def decorate(fn):
        entries: OrderedDict = OrderedDict()

        @functools.wraps(fn)
        def wrapper(*args):
            key = tuple(a if isinstance(a, _PLAIN) or k in by_value else id(a)
                        for k, a in enumerate(args))
            hit = entries.get(key)
            if hit is not None:
                entries.move_to_end(key)
                return hit[1]
            result = fn(*args)
            entries[key] = (args, result)
            if len(entries) > maxsize:
                entries.popitem(last=False)
            return result

        wrapper.cache_clear = entries.clear
        return wrapper

    return decorate
