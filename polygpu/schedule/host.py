"""Host loops: outer sequential loops that the host drives, launching kernels per step.

A stencil's time loop, an LU or Cholesky pivot loop, Floyd-Warshall's ``k``: they
carry dependences between *all* threads, so no single kernel can run them -- a global
barrier is needed between their iterations, and on a GPU the only global barrier is the
end of a kernel.  The host therefore runs these loops itself and launches the kernels
of one step at every iteration.

A host schedule ``H`` maps each statement to ``[h0, ..., h{g-1}]``; instances with
equal ``H`` form one *step*, steps run in lexicographic order with a global barrier
between them.  Inside a step the host iterators are fixed, so they become *parameters*
of a per-step region (:func:`step_scop`): the whole optimizer -- dependences, scheduler,
tiling, memory placement, code generation -- runs on that region unchanged, and the
kernels receive the host iterators as extra integer arguments.

Four kinds of ``H`` are proposed (:func:`host_schedules`):

* ``loops`` -- the outermost loops that carry a dependence (and whose enclosing loops
  all do) with the statement-order constants of the original 2d+1 schedule around
  them, so a statement after a host loop gets its own steps;
* ``wavefront`` -- when those loops are *all* of a perfect nest's loops (Gauss-Seidel:
  every loop carries a dependence), one hyperplane ``c . x`` that every dependence
  crosses forwards; a step is one wavefront, whose instances are independent;
* ``isl`` -- the first member of the outermost band of isl's schedule when it is not
  coincident (isl asked for outer coincidence, so it splits a sequential pivot off as
  a band of its own), with the position of a top-level sequence around it.  The
  original loops of row-oriented LU or Cholesky give poor host schedules (LU's ``i``,
  ``j`` and ``k`` all carry dependences: five host dimensions); isl finds the pivot
  ``k`` of right-looking LU, one host loop whose steps are parallel.
* ``batch`` -- a batch of independent elements (seed 000: a per-element Cholesky and
  solve, ``for e: for k: ...``): an outermost *parallel* loop around every statement,
  then the ``loops`` schedule of one element.  Its first dimension is not a host loop
  but the grid: the generated program runs one element per thread block, the element's
  own steps inside the block with barriers between them
  (``codegen/cuda.py``, ``Variant.device_steps``).  Only loops with parallel loops
  inside are steps: a sequential loop without (a substitution's rows) runs on one
  thread inside its step.  It is proposed only where an element has steps of its own:
  without them the ordinary mappings already give one element to a block or a group
  of threads.
* ``fused batch`` -- the same over *several* nests, each with its own outermost
  parallel loop over the elements (seed 003's chain of per-element functions joined by
  intermediate arrays): the element loops aligned, ``[e, position, ..]``, so one block
  (or a group of threads) runs every nest's instances of its element, a barrier after
  each nest -- the fusion of nests of different granularities (threads per element) in
  one kernel, their intermediates resident in shared memory
  (:mod:`polygpu.memory.residence`).  Proposed only where no dependence crosses
  elements; ranked after every other candidate (the fusion search prices it).

Nothing here is trusted: the scheduler proves every host transformation against the
original dependences (host dimensions as global barriers) before offering it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

import islpy as isl

from polygpu.model.analysis import Analysis
from polygpu.model.isl_util import maps_of, union_of
from polygpu.model.scop import Scop, Statement
from polygpu.schedule.isl_fallback import isl_schedule

MAX_WAVEFRONT_COEFFICIENT = 4


@dataclass(frozen=True)
class HostSchedule:
    """``schedule``: each statement -> its step ``[h0..]`` (all with ``len(names)``
    dimensions); ``names``: the C/isl names of the host iterators."""

    schedule: isl.UnionMap
    names: tuple[str, ...]
    kind: str  # 'loops' | 'wavefront' | 'isl' | 'batch' | 'fused batch'

    @property
    def grid_dims(self) -> int:
        """Leading dimensions that are thread blocks, not steps (``batch``: one)."""
        return 1 if self.kind in ("batch", "fused batch") else 0

    def of(self, statement: str) -> isl.Map:
        for m in maps_of(self.schedule):
            if m.get_tuple_name(isl.dim_type.in_) == statement:
                return m
        raise KeyError(statement)


def _free_names(scop: Scop, n: int) -> tuple[str, ...]:
    taken = set(scop.signature) | {it for s in scop.statements for it in s.iterators}
    taken |= {a.name for a in scop.arrays}
    names = []
    for k in range(n):
        name = f"h{k}"
        while name in taken:
            name = "_" + name
        names.append(name)
    return tuple(names)


def _prefix(stmt: Statement, n_dims: int, width: int) -> isl.Map:
    """The first ``n_dims`` dimensions of ``stmt``'s 2d+1 schedule, then zeros up to
    ``width``."""
    m = stmt.schedule
    total = m.dim(isl.dim_type.out)
    m = m.project_out(isl.dim_type.out, n_dims, total - n_dims)
    m = m.add_dims(isl.dim_type.out, width - n_dims)
    for k in range(n_dims, width):
        m = m.fix_val(isl.dim_type.out, k, isl.Val(0))
    return m.reset_tuple_id(isl.dim_type.out)


def _drop_constant_dims(maps: list[isl.Map]) -> list[isl.Map]:
    """Remove the dimensions that are the same constant for every statement (the
    leading statement position of a region with one top-level loop, say)."""
    width = maps[0].dim(isl.dim_type.out)
    keep = []
    for k in range(width):
        values = set()
        for m in maps:
            v = m.plain_get_val_if_fixed(isl.dim_type.out, k)
            values.add(None if v.is_nan() else int(v.to_python()))
        if None in values or len(values) > 1:
            keep.append(k)
    out = []
    for m in maps:
        for k in reversed(range(width)):
            if k not in keep:
                m = m.project_out(isl.dim_type.out, k, 1)
        out.append(m)
    return out


def host_loops(an: Analysis) -> HostSchedule | None:
    """The ``loops`` host schedule: per statement, its enclosing loops that carry a
    dependence from the outside in (stopping at the first that does not)."""
    return _loop_prefix(an, batch=False)


def batch_loops(an: Analysis) -> HostSchedule | None:
    """The ``batch`` host schedule (module doc): the outermost loop, when it encloses
    every statement and carries no dependence, then the ``loops`` schedule inside it;
    None when there is no such loop or an element has no steps of its own."""
    return _loop_prefix(an, batch=True)


def _loop_prefix(an: Analysis, batch: bool) -> HostSchedule | None:
    scop = an.scop
    statements = [s for s in scop.statements if not s.domain.is_empty()]
    sequential = {lp.loop for lp in an.loops if not lp.parallel and not lp.reduction}
    first = 0
    several = False
    if batch:
        parallel = {lp.loop for lp in an.loops if lp.parallel}
        outer = {s.loops[0] if s.loops else None for s in statements}
        if not outer or None in outer or not outer <= parallel:
            return None
        first = 1
        # several nests, each over the elements (seed 003's chain of per-element
        # functions): their element loops are aligned, one block runs every nest's
        # instances of its element in the nests' order -- the fusion of nests of any
        # granularity, a barrier between them
        several = len(outer) > 1
        # a sequential loop with no parallel loop inside it (a substitution's rows)
        # runs on one thread, in its kernel's time loops: no barrier steps
        threaded = {lp for t in statements for d, lp in enumerate(t.loops)
                    if any(inner in parallel for inner in t.loops[d + 1:])}
        sequential &= threaded
    host_depth = {}
    for s in statements:
        m = first
        while m < len(s.loops) and s.loops[m] in sequential:
            m += 1
        host_depth[s.name] = m
    g = max(host_depth.values(), default=0)
    if g == first and not several:
        return None
    maps = []
    for s in statements:
        m = host_depth[s.name]
        # inside all g host loops: [c0, i0, .., c{g-1}, i{g-1}] -- the statement order
        # inside the innermost host loop is left to the per-step scheduler; with fewer,
        # the position after its last host loop orders it among the deeper steps
        prefix = _prefix(s, 2 * m if m == g else 2 * m + 1, 2 * g)
        if several:  # the element first, the nest's position a step: [i0, c0, ..]
            prefix = prefix.apply_range(_swap_first_two(2 * g, prefix.get_space()))
        maps.append(prefix)
    maps = _drop_constant_dims(maps)
    if several and not _within_elements(an, maps):
        return None
    names = _free_names(scop, maps[0].dim(isl.dim_type.out))
    return HostSchedule(union_of(maps, scop.context.get_space()), names,
                        ("fused batch" if several else "batch") if batch else "loops")


def _swap_first_two(width: int, space: isl.Space) -> isl.Map:
    """``[o0, o1, o2, ..] -> [o1, o0, o2, ..]`` over ``width`` dimensions."""
    names = [f"o{k}" for k in range(width)]
    swapped = [names[1], names[0]] + names[2:]
    params = ", ".join(space.get_var_names(isl.dim_type.param))
    return isl.Map(f"[{params}] -> {{ [{', '.join(names)}] -> [{', '.join(swapped)}] }}")


def _within_elements(an: Analysis, maps: list[isl.Map]) -> bool:
    """Whether every dependence of ``an`` joins instances of one element (the first
    dimension of ``maps``): aligned nests whose dependences cross elements (gemver's
    ``x[i]`` reading a column ``A[j][i]``) are no batch."""
    element = union_of([m.project_out(isl.dim_type.out, 1, m.dim(isl.dim_type.out) - 1)
                        for m in maps], an.scop.context.get_space())
    deps = an.dependences.union()
    if deps.is_empty():
        return True
    crossing = deps.apply_domain(element).apply_range(element)
    return all(m.is_subset(isl.Map.identity(m.get_space())) for m in maps_of(crossing))


def _loop_deltas(an: Analysis, stmts: list[Statement]) -> list[tuple[isl.Set, int]]:
    """Per dependence, the differences sink - source of its instances' loop positions
    (the odd schedule dimensions ``±i0, ±i1, ..``), and the least wavefront time step
    it needs (1 within a statement, which the wavefront has to carry; 0 between
    statements, ordered inside a step).  A wavefront ``t = c . x`` is legal iff
    ``c . delta >= bound`` on each: computed once, as the difference of linear maps is
    the map of the differences, so each coefficient vector tried costs a check on a
    small set instead of a composition of the dependence with two schedules."""
    schedules = {s.name: isl.UnionMap.from_map(s.schedule) for s in stmts}
    out = []
    for d in an.dependences.items:
        if d.source not in schedules or d.sink not in schedules:
            continue  # a statement that never runs: no instance depends
        pairs = isl.UnionMap.from_map(d.relation).apply_domain(
            schedules[d.source]).apply_range(schedules[d.sink])
        for m in maps_of(pairs):
            if m.is_empty():
                continue
            delta = m.deltas()
            n = delta.dim(isl.dim_type.set)
            for k in reversed(range(0, n, 2)):  # statement positions: not in c . x
                delta = delta.project_out(isl.dim_type.set, k, 1)
            out.append((delta.coalesce(), 1 if d.source == d.sink else 0))
    return out


def _forwards(deltas: list[tuple[isl.Set, int]], c: tuple[int, ...]) -> bool:
    """Every dependence goes forwards under the wavefront ``t = c . x``."""
    for delta, bound in deltas:
        ls = isl.LocalSpace.from_space(delta.get_space())
        aff = isl.Aff.zero_on_domain(ls).add_constant_val(isl.Val(-bound))
        for k, v in enumerate(c):
            if v:
                aff = aff.add(isl.Aff.var_on_domain(ls, isl.dim_type.set, k)
                              .scale_val(isl.Val(v)))
        if not delta.subtract(isl.PwAff.from_aff(aff).nonneg_set()).is_empty():
            return False
    return True


def wavefront(an: Analysis) -> HostSchedule | None:
    """A ``wavefront`` host schedule for a perfect nest whose loops all carry
    dependences, or None.  Coefficients are tried smallest sum first (fewer steps)."""
    scop = an.scop
    stmts = [s for s in scop.statements if not s.domain.is_empty()]
    if not stmts or any(s.loops != stmts[0].loops for s in stmts):
        return None
    depth = len(stmts[0].loops)
    sequential = {lp.loop for lp in an.loops if not lp.parallel and not lp.reduction}
    if depth < 2 or not all(lid in sequential for lid in stmts[0].loops):
        return None
    deltas = _loop_deltas(an, stmts)
    candidates = sorted(itertools.product(range(MAX_WAVEFRONT_COEFFICIENT + 1),
                                          repeat=depth), key=lambda c: (sum(c), c[::-1]))
    for c in candidates:
        if sum(1 for v in c if v) < 2:
            continue  # one loop alone is the host-loops schedule
        if not _forwards(deltas, c):
            continue
        maps = {}
        for s in stmts:
            sched = s.schedule  # [p0, ±i0, p1, ±i1, ...]: order-preserving signs
            terms = " + ".join(f"{v} * o{2 * k + 1}" for k, v in enumerate(c) if v)
            outs = ", ".join(f"o{k}" for k in range(sched.dim(isl.dim_type.out)))
            proj = isl.Map(f"{{ [{outs}] -> [{terms}] }}")
            proj = proj.align_params(sched.get_space())
            maps[s.name] = sched.apply_range(proj)
        names = _free_names(scop, 1)
        return HostSchedule(union_of(list(maps.values()), scop.context.get_space()), names,
                            "wavefront")
    return None


_nt = isl.schedule_node_type


def _host_member(node: isl.ScheduleNode) -> isl.UnionMap | None:
    """``S -> [h]``: the first member of the band at ``node`` (below filters and
    marks), if it is not coincident; None otherwise."""
    while node.get_type() not in (_nt.band, _nt.sequence, _nt.set, _nt.leaf):
        node = node.child(0)
    if node.get_type() != _nt.band or node.band_member_get_coincident(0):
        return None
    partial = node.band_get_partial_schedule_union_map().intersect_domain(node.get_domain())
    members = node.band_n_member()
    names = ", ".join(f"d{k}" for k in range(members))
    return partial.apply_range(isl.UnionMap(f"{{ [{names}] -> [d0] }}"))


def _with_position(umap: isl.UnionMap, position: int) -> list[isl.Map]:
    """Each map of ``umap`` (``S -> [h]``) as ``S -> [position, h]``."""
    out = []
    for m in maps_of(umap):
        m = m.insert_dims(isl.dim_type.out, 0, 1).fix_val(isl.dim_type.out, 0,
                                                          isl.Val(position))
        out.append(m.reset_tuple_id(isl.dim_type.out))
    return out


def isl_host(an: Analysis) -> HostSchedule | None:
    """The ``isl`` host schedule (module doc), or None when isl's outermost band (of
    the region, or of each part of a top-level sequence) starts coincident."""
    scop = an.scop
    if all(lp.parallel or lp.reduction for lp in an.loops):
        return None  # no loop carries a dependence: nothing for the host to run
    schedule = isl_schedule(an, outer_coincidence=True)
    if schedule is None:
        return None
    node = schedule.get_root().child(0)
    while node.get_type() not in (_nt.band, _nt.sequence, _nt.set, _nt.leaf):
        node = node.child(0)
    if node.get_type() == _nt.band:
        h = _host_member(node)
        if h is None:
            return None
        maps = [m.reset_tuple_id(isl.dim_type.out) for m in maps_of(h)]
    elif node.get_type() in (_nt.sequence, _nt.set):
        order = {s.name: k for k, s in enumerate(scop.statements)}
        parts = []
        for k in range(node.n_children()):
            child = node.child(k)
            h = _host_member(child)
            if h is None:  # one step for the whole part
                below = child.child(0) if child.get_type() == _nt.filter else child
                zero = isl.UnionMap.from_domain(below.get_domain())
                h = zero.apply_range(isl.UnionMap("{ [] -> [0] }"))
                found = False
            else:
                found = True
            first = min(order[m.get_tuple_name(isl.dim_type.in_)] for m in maps_of(h))
            parts.append((first, h, found))
        if not any(found for _, _, found in parts):
            return None
        if node.get_type() == _nt.set:  # independent parts: take the textual order
            parts.sort(key=lambda p: p[0])
        maps = [m for pos, (_, h, _) in enumerate(parts) for m in _with_position(h, pos)]
    else:
        return None
    maps = _drop_constant_dims([m for m in maps if not m.is_empty()])
    if not maps or maps[0].dim(isl.dim_type.out) == 0:
        return None
    names = _free_names(scop, maps[0].dim(isl.dim_type.out))
    return HostSchedule(union_of(maps, scop.context.get_space()), names, "isl")


def host_schedules(an: Analysis) -> list[HostSchedule]:
    """The host schedules worth trying for ``an``'s region, preferred first (an
    ``isl`` one only where it differs from the ``loops`` one)."""
    found = []
    for make in (host_loops, wavefront, isl_host, batch_loops):
        host = make(an)
        if host is not None and not any(
                h.schedule.is_equal(host.schedule) for h in found):
            found.append(host)
    return found


def step_scop(scop: Scop, host: HostSchedule) -> Scop:
    """The region of one step: ``host.names`` are parameters, every statement's domain
    (and its accesses and schedule) is cut to the instances with ``H = names``."""
    params = list(scop.parameters) + list(host.names)
    space = isl.Space.create_from_names(isl.DEFAULT_CONTEXT, set=[], params=params)
    context = scop.context.align_params(space)
    statements = []
    for s in scop.statements:
        domain = s.domain.align_params(space)
        if not s.domain.is_empty():  # one that never runs has no step (and no map)
            h = host.of(s.name).align_params(space)
            n = h.dim(isl.dim_type.out)
            fix = isl.Set.universe(h.range().get_space())
            outs = ", ".join(f"o{j}" for j in range(n))
            for k in range(n):
                fix = fix.intersect(isl.Set(
                    f"[{host.names[k]}] -> {{ [{outs}] : o{k} = {host.names[k]} }}"
                ).align_params(fix.get_space()))
            domain = domain.intersect(h.intersect_range(fix).domain())
        domain = domain.intersect_params(context)
        statements.append(replace(
            s, domain=domain,
            schedule=s.schedule.align_params(space).intersect_domain(domain),
            accesses=tuple(replace(a, relation=a.relation.align_params(space)
                                   .intersect_domain(domain)) for a in s.accesses)))
    arrays = tuple(replace(a, extent=a.extent.align_params(space)) for a in scop.arrays)
    return replace(scop, context=context, statements=tuple(statements), arrays=arrays,
                   host=tuple(host.names))


def determined_iterators(domain: isl.Set) -> frozenset[int]:
    """Iterators of a step's statement that the step fixes, given the others: a host
    loop's own iterator, or one coordinate of a wavefront.  They are useless as space
    dimensions (a single value per thread block or grid line), so the scheduler keeps
    them out.  Greedy from the innermost: an iterator is dropped when it is a function
    of the parameters and of the iterators still kept."""
    n = domain.dim(isl.dim_type.set)
    dropped: set[int] = set()
    for k in reversed(range(n)):
        keep = [j for j in range(n) if j != k and j not in dropped]
        m = isl.Map.from_domain(domain)
        # out: x_k alone; in: the kept iterators (the dropped ones projected out)
        m = m.move_dims(isl.dim_type.out, 0, isl.dim_type.in_, k, 1)
        for j in sorted((j for j in range(n) if j != k and j not in keep), reverse=True):
            m = m.project_out(isl.dim_type.in_, j if j < k else j - 1, 1)
        if not domain.is_empty() and m.is_single_valued():
            dropped.add(k)
    return frozenset(dropped)
