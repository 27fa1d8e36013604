"""Exact dependences between statement instances, computed by isl's dataflow analysis.

Three kinds, each between *consecutive* accesses to one memory location, which is
exactly what legality needs (every other ordering follows by transitivity):

* **flow** (read after write): from the write that produced the value a read sees --
  the last write to that element before the read (isl ``compute_flow``, value-based);
* **anti** (write after read): from a read to the first write by a *later*
  instance that overwrites the element (``compute_flow`` on the reversed schedule,
  reversed back);
* **output** (write after write): from a write to the next write of the same element.

Within one statement instance the reads happen before the write, so an instance
never depends on itself.

Strided loops (``range(0, n, 2)``) make isl describe domains with existentially
quantified variables, on which some isl operations fail ("affine expression involves
some of the domain dimensions", "total dimensionality changed").  So the analysis runs
on *compressed* domains, where each strided iterator is replaced by its trip counter
(``x = s * x' + offset(outer iterators)``, found by isl's stride detection) and the
results are mapped back: a bijection, so still exact.

Arrays are analysed one at a time (distinct arrays never alias -- the input language
guarantees it), which also tells which array carries each dependence.
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from polygpu.model.build import map_from_pw_affs
from polygpu.model.isl_util import maps_of, sets_of, union_of  # also re-exported
from polygpu.model.scop import Scop

KINDS = ("flow", "anti", "output")


@dataclass(frozen=True)
class Dependence:
    """Instances of ``sink`` that must run after instances of ``source``:
    ``relation`` is ``{ source[..] -> sink[..] }``."""

    kind: str  # 'flow' | 'anti' | 'output'
    array: str
    source: str
    sink: str
    relation: isl.Map


@dataclass(frozen=True)
class Dependences:
    items: tuple[Dependence, ...]
    space: isl.Space  # parameter space, for empty unions

    def union(self, kinds: tuple[str, ...] = KINDS) -> isl.UnionMap:
        """All dependences of the given kinds as one union map."""
        return union_of((d.relation for d in self.items if d.kind in kinds), self.space)

    def of_kind(self, kind: str) -> tuple[Dependence, ...]:
        return tuple(d for d in self.items if d.kind == kind)


# equal representations of a map, ever simpler, to retry an isl operation on where isl
# fails on some quasi-affine (floor/mod) ones: "total dimensionality changed unexpectedly",
# "affine expression involves some of the domain dimensions"
SIMPLIFICATIONS = (
    lambda x: x.coalesce(),
    lambda x: x.detect_equalities().remove_redundancies().coalesce(),
    lambda x: x.compute_divs().coalesce(),
)


def coalesce(x: isl.Map | isl.Set | isl.UnionMap) -> isl.Map | isl.Set | isl.UnionMap:
    """``x.coalesce()``; where isl fails on it (it does on some quasi-affine maps, "total
    dimensionality changed unexpectedly"), each map of ``x`` coalesced after another
    exact simplification, or as it is -- coalescing only changes the representation,
    never the set, so any of these is right."""
    try:
        return x.coalesce()
    except isl.Error:
        pass
    if isinstance(x, isl.UnionMap):
        maps = maps_of(x)
        return union_of(coalesce(m) for m in maps) if maps else x
    for simplify in SIMPLIFICATIONS[1:]:
        try:
            return simplify(x)
        except isl.Error:
            continue
    return x


def _reverse_time(schedule: isl.UnionMap) -> isl.UnionMap:
    """The schedule with time running backwards (every schedule dimension negated)."""
    maps = maps_of(schedule)
    if not maps:
        return schedule
    width = maps[0].dim(isl.dim_type.out)
    names = [f"t{k}" for k in range(width)]
    negated = ", ".join(f"-{n}" for n in names)
    neg = isl.Map(f"{{ [{', '.join(names)}] -> [{negated}] }}")
    return schedule.apply_range(isl.UnionMap.from_map(neg))


def _last_source(sinks, sources, schedule) -> isl.UnionMap:
    """For each sink instance, the last source instance before it touching the same
    element, as ``{ source -> sink }``: isl's dataflow analysis, or the same question
    posed as a parametric lexicographic maximum where isl's ``compute_flow`` fails
    (it does on some strided, disjunctive domains)."""
    try:
        info = isl.UnionAccessInfo.from_sink(sinks).set_must_source(sources)
        return info.set_schedule_map(schedule).compute_flow().get_must_dependence()
    except isl.Error:
        return last_source_by_lexmax(sinks, sources, schedule)


def _touching(sources: isl.UnionMap, sinks: isl.UnionMap) -> isl.UnionMap:
    """The statements' maps of ``sources`` that access an element ``sinks`` access.  A
    source statement that touches none of them can neither be a sink's last writer nor
    hide one, so the dataflow is the same without it -- and isl's ``compute_flow`` costs
    grow with the sources it is given (a recursion's split region: each piece touches a
    few of the 192 others' blocks at 4096 rows; its dependences took half the time)."""
    touched = {s.get_tuple_name()
               for s in sets_of(sources.intersect_range(sinks.range()).domain())}
    return union_of((m for m in maps_of(sources)
                     if m.get_tuple_name(isl.dim_type.in_) in touched), sources.get_space())


def last_source_by_lexmax(sinks, sources, schedule) -> isl.UnionMap:
    """``_last_source`` from first principles: among the source instances that touch a
    sink's element strictly earlier, the one with the lexicographically largest time."""
    same_element = sinks.apply_range(sources.reverse())  # sink -> source
    earlier = same_element.intersect(schedule.lex_gt_union_map(schedule))
    last_time = _lexmax(earlier.apply_range(schedule))  # sink -> time of its last source
    return coalesce(last_time.apply_range(schedule.reverse()).reverse())


def _lexmax(umap: isl.UnionMap) -> isl.UnionMap:
    """``umap.lexmax()``; where isl fails on a map (it does on some quasi-affine ones,
    "affine expression involves some of the domain dimensions"), the same map
    simplified first -- an equal set, in another representation."""
    try:
        return umap.lexmax()
    except isl.Error:
        pass
    result = isl.UnionMap.empty(umap.get_space())
    for m in maps_of(umap):
        for simplify in (lambda x: x, *SIMPLIFICATIONS):
            try:
                part = simplify(m).lexmax()
                break
            except isl.Error:
                continue
        else:
            part = m.coalesce().lexmax()  # let isl's error surface
        result = result.union(isl.UnionMap.from_map(part))
    return result


def _split(kind: str, array: str, umap: isl.UnionMap, expand: dict[str, isl.Map]
           ) -> list[Dependence]:
    out = []
    for m in maps_of(coalesce(umap)):
        if m.is_empty():
            continue
        source = m.get_tuple_name(isl.dim_type.in_)
        sink = m.get_tuple_name(isl.dim_type.out)
        relation = coalesce(m)
        if source in expand:
            relation = relation.apply_domain(expand[source])
        if sink in expand:
            relation = relation.apply_range(expand[sink])
        out.append(Dependence(kind=kind, array=array, source=source, sink=sink,
                              relation=relation))
    return out


def loop_strides(scop: Scop) -> dict[int, tuple[isl.Val, isl.Aff]]:
    """Loop id -> (stride > 1, offset as a function of the outer iterators) for every
    loop whose iterator isl finds strided over the union of the domains of the
    statements it encloses: one compression per *loop*, so statements that share a loop
    keep comparable time coordinates (one guarded to ``i = n - 2`` has no stride of its
    own, but its loop has)."""
    result = {}
    for loop in scop.loops:
        d = loop.depth
        prefix = None
        for name in loop.statements:
            dom = scop.statement(name).domain
            part = dom.project_out(isl.dim_type.set, d + 1, dom.dim(isl.dim_type.set) - d - 1)
            part = part.reset_tuple_id()
            prefix = part if prefix is None else prefix.union(part)
        if prefix is None or prefix.is_empty():
            continue
        m = isl.Map.from_domain(prefix).move_dims(isl.dim_type.out, 0, isl.dim_type.in_, d, 1)
        info = m.get_range_stride_info(0)
        stride, offset = info.get_stride(), info.get_offset()
        # stride 0: the iterator is fixed by the outer ones; offsets with divisions
        # cannot be written as one equality
        if stride.gt(isl.Val(1)) and offset.dim(isl.dim_type.div) == 0:
            result[loop.id] = (stride, offset)
    return result


def compression(statement, strides: dict[int, tuple[isl.Val, isl.Aff]]
                ) -> tuple[isl.Map, frozenset[int]] | None:
    """``{ S[x] -> S[x'] }`` with ``x_d = s_d * x'_d + offset_d(x_<d)`` for every strided
    loop around ``statement`` (:func:`loop_strides`), and those depths; None if none."""
    domain = statement.domain
    space = isl.Space.map_from_set(domain.get_space())
    bmap = isl.BasicMap.universe(space)
    strided = []
    for d in range(domain.dim(isl.dim_type.set)):
        c = isl.Constraint.alloc_equality(isl.LocalSpace.from_space(space))
        c = c.set_coefficient_val(isl.dim_type.in_, d, isl.Val(1))
        loop = statement.loops[d] if d < len(statement.loops) else None
        if loop not in strides:
            c = c.set_coefficient_val(isl.dim_type.out, d, isl.Val(-1))
        else:
            stride, aff = strides[loop]
            strided.append(d)
            # the offset may have rational coefficients (n/2 + i/2 where the parity of
            # n + i fixes the residue); a constraint needs integers, so the equality is
            # written times the offset's denominator: D x = D s x' + D offset
            aff = aff.align_params(space)
            scale = aff.get_denominator_val()
            c = c.set_coefficient_val(isl.dim_type.in_, d, scale)
            c = c.set_coefficient_val(isl.dim_type.out, d, stride.mul(scale).neg())
            for k in range(d):
                c = c.set_coefficient_val(isl.dim_type.in_, k, aff.get_coefficient_val(
                    isl.dim_type.in_, k).mul(scale).neg())
            for k in range(aff.dim(isl.dim_type.param)):
                c = c.set_coefficient_val(isl.dim_type.param, k, aff.get_coefficient_val(
                    isl.dim_type.param, k).mul(scale).neg())
            c = c.set_constant_val(aff.get_constant_val().mul(scale).neg())
        bmap = bmap.add_constraint(c)
    return (isl.Map.from_basic_map(bmap), frozenset(strided)) if strided else None


def _counter_schedule(schedule: isl.Map, domain: isl.Set, expand: isl.Map,
                      strided: frozenset[int], descending: frozenset[int]) -> isl.Map:
    """The schedule of the compressed statement, with the time dimension of each
    ``strided`` loop replaced by its counter (``2j'`` -> ``j'``; ``-2j'`` -> ``-j'`` for
    the depths in ``descending``).

    Same order: statements compared at such a dimension share the loop, hence its
    stride, offset and direction, and ``sign * j'`` is an increasing function of the
    time ``sign * j`` there.  The direction comes from the loop, never from the
    statement's own schedule: a statement pinned to ``j == 0`` has time ``0``, equal to
    both ``j`` and ``-j`` on its domain (taking ``+j'`` there under a descending loop
    reversed its dependences).  Needed because isl's ``compute_flow`` returned a wrong
    last writer with strided time dimensions (``[.., 2j', ..]``: a write from the first
    ``j`` instead of the last)."""
    pma = schedule.intersect_domain(domain).as_pw_multi_aff()
    to_original = expand.as_pw_multi_aff()  # S[x'] -> S[x]
    space = domain.get_space()
    compressed_domain = domain.apply(expand.reverse())
    c_space = compressed_domain.get_space()
    n = domain.dim(isl.dim_type.set)
    affs = []
    for p in range(pma.dim(isl.dim_type.out)):
        pa = pma.get_pw_aff(p)
        # 2d+1 schedules: odd dimension p is the iterator of loop (p - 1) / 2
        d = (p - 1) // 2
        if p % 2 == 1 and d < n and d in strided:
            var = isl.PwAff.var_on_domain(isl.LocalSpace.from_space(space), isl.dim_type.set,
                                          d).intersect_domain(domain)
            counter = isl.PwAff.var_on_domain(isl.LocalSpace.from_space(c_space),
                                              isl.dim_type.set, d)
            if d in descending:
                var, counter = var.neg(), counter.neg()
            if pa.is_equal(var):
                affs.append(counter)
                continue
        affs.append(pa.pullback_pw_multi_aff(to_original))
    m = map_from_pw_affs(affs, compressed_domain, None)
    return m.set_tuple_id(isl.dim_type.out, schedule.get_tuple_id(isl.dim_type.out)) \
        if schedule.has_tuple_id(isl.dim_type.out) else m


def _distinct_reads(scop: Scop, array: str) -> list:
    """The read accesses of ``array``, without a repeat of an earlier one of the same
    statement with the same relation (it has the same dependences)."""
    found: list = []
    for a in scop.accesses:
        if a.kind == "read" and a.array == array and not any(
                b.statement == a.statement and b.relation.is_equal(a.relation)
                for b in found):
            found.append(a)
    return found


def compute_dependences(scop: Scop) -> Dependences:
    """Flow, anti and output dependences of ``scop``, per array and statement pair."""
    compress, expand, strided = {}, {}, {}  # statement -> maps, strided loops
    strides = loop_strides(scop)
    for s in scop.statements:
        found = compression(s, strides)
        if found is not None:
            c, strided[s.name] = found
            compress[s.name] = isl.UnionMap.from_map(c.intersect_domain(s.domain))
            expand[s.name] = c.reverse()

    def compressed(umap: isl.UnionMap) -> isl.UnionMap:
        for c in compress.values():
            umap = umap.subtract_domain(c.domain()).union(c.reverse().apply_range(umap))
        return umap

    schedule = compressed(scop.schedule)
    for s in scop.statements:
        if s.name in compress:
            schedule = schedule.subtract_domain(
                isl.UnionSet.from_set(s.domain).apply(compress[s.name])).union(
                isl.UnionMap.from_map(_counter_schedule(
                    s.schedule, s.domain, expand[s.name], strided[s.name],
                    frozenset(d for d, loop in enumerate(s.loops)
                              if scop.loops[loop].descending))))
    backwards = _reverse_time(schedule)
    items: list[Dependence] = []
    for array in scop.arrays:
        writes = compressed(scop.access_map("write", array.name))
        if writes.is_empty():
            continue  # read-only: no dependence at all
        flow = anti = isl.UnionMap.empty(scop.context.get_space())
        # one read reference at a time: exact all the same (each read has its own last
        # writer), and it avoids an isl failure on unions of reads with strided domains
        # (a statement reading one element twice -- ``a[i] < b ? a[i] : b`` -- once)
        for read in _distinct_reads(scop, array.name):
            sink = compressed(isl.UnionMap.from_map(read.relation))
            sources = _touching(writes, sink)
            flow = flow.union(_last_source(sink, sources, schedule))
            # anti: in reversed time the "last" write before a read is the first one after
            anti = anti.union(_last_source(sink, sources, backwards).reverse())
        items += _split("flow", array.name, flow, expand)
        items += _split("anti", array.name, anti, expand)
        # writes of distinct elements (a snapshot's copy statement, an output written
        # once per element) have no output dependence: isl's dataflow on such a write
        # with a disjunctive strided domain took 40 s a call (tests/test_fuzz_nests.py)
        output = isl.UnionMap.empty(writes.get_space()) if writes.is_injective() \
            else union_of((_last_source(w, _touching(writes, w), schedule)
                           for w in map(isl.UnionMap.from_map, maps_of(writes))),
                          writes.get_space())
        items += _split("output", array.name, output, expand)
    order = {name: k for k, name in enumerate(s.name for s in scop.statements)}
    items.sort(key=lambda d: (KINDS.index(d.kind), order[d.source], order[d.sink], d.array))
    return Dependences(items=tuple(items), space=scop.context.get_space())
