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


_PLAIN = (str, int, bool, float, type(None), frozenset)


_NAMED = (isl.dim_type.param, isl.dim_type.in_, isl.dim_type.out)


def _names(a) -> tuple:
    """The names of ``a``'s dimensions (None where unnamed), which its text does not
    show: isl prints an unnamed dimension as ``o5`` or ``i0``, as it would a named
    one."""
    if isinstance(a, (isl.UnionMap, isl.UnionSet)):
        pieces: list = []
        (a.foreach_map if isinstance(a, isl.UnionMap) else a.foreach_set)(
            lambda m: pieces.append(_names(m)))
        return tuple(sorted(pieces, key=repr))
    space = a.get_space()
    return tuple(tuple(space.get_dim_name(t, k) for k in range(space.dim(t)))
                 for t in _NAMED)


def _text_key(a):
    """``a``'s part of a :func:`memo_by_text` key: an isl object's class, text and
    dimension names, a tuple's parts in turn, anything else itself (hashable)."""
    if type(a).__module__.startswith("islpy"):
        return (type(a).__name__, str(a), _names(a))
    if isinstance(a, tuple):
        return tuple(_text_key(x) for x in a)
    return a


def memo_by_text(maxsize: int = 1024):
    """Memoize a pure function of isl objects (and hashable plain values, and tuples of
    either) by the *text* of its isl arguments, with their dimension names.  Where
    :func:`memo_by_identity` serves one object asked again, this serves the same set
    rebuilt: the search builds each variant's sets afresh (costing it, then its
    program, then its check's), and the variants of one tile share most of them (a tune
    of mm at 4096 asked for 668 distinct bounding boxes 3453 times).  Exact: isl prints
    a set or map completely, so equal texts and names are equal arguments, in one
    space.  An answer holding isl objects is the first asker's: equal in value and
    space for every later one (its form, the order of its pieces, is what isl gave the
    first)."""
    return _lru(lambda args: tuple(_text_key(a) for a in args), maxsize, keep_args=False)


def _lru(key_of, maxsize: int, keep_args: bool):
    """The least-recently-used memo both memos are: ``key_of(args)`` the key; with
    ``keep_args`` each entry keeps its arguments alive (an identity key must not be
    reused while it is one)."""

    def decorate(fn):
        entries: OrderedDict = OrderedDict()

        @functools.wraps(fn)
        def wrapper(*args):
            key = key_of(args)
            hit = entries.get(key)  # (args or None, answer): None is an answer too
            if hit is not None:
                entries.move_to_end(key)
                return hit[1]
            result = fn(*args)
            entries[key] = (args if keep_args else None, result)
            if len(entries) > maxsize:
                entries.popitem(last=False)
            return result

        wrapper.cache_clear = entries.clear
        return wrapper

    return decorate


@memo_by_text(maxsize=4096)
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


def memo_by_identity(maxsize: int = 256, by_value: tuple[int, ...] = ()):
    """Memoize a pure function of isl objects (and plain values) by the *identity* of
    its object arguments.  Not by value: islpy's ``==`` is isl's semantic equality, and
    two representations of one set may give different-looking (equal) results, which
    would show in the generated code.  Each entry keeps its arguments alive, so an id
    is never reused while it is a key.  For the stages that ask isl the same question
    of the same objects many times (per access, per dimension, per buffer).  The
    arguments at the positions ``by_value`` (hashable values without isl objects, such
    as variants) are compared by value."""
    return _lru(lambda args: tuple(a if isinstance(a, _PLAIN) or k in by_value else id(a)
                                   for k, a in enumerate(args)), maxsize, keep_args=True)
