"""Loop distribution: one kernel group per strongly connected component of the
statement dependence graph, each scheduled on its own.

Why: a loop is parallel for the region only if it carries no dependence of the
*whole* region.  In PolyBench's atax the loop ``i`` carries ``y[j] += A[i][j] *
tmp[i]``'s dependence, so ``tmp[i] = ...`` -- parallel in ``i`` on its own -- ran on one
thread.  Distributed, each group sees only its own dependences: ``{tmp}`` takes ``i``
as space, ``{y update}`` takes ``j`` (``i`` its thread's time loop).

The statements (those that run) are split into the SCCs of the graph "some instance of
``b`` depends on one of ``a``", put in a topological order (among the ready groups, one whose
first kernel fuses with the previous group's last kernel, else the textually first):
every dependence between groups then goes forwards, and a kernel boundary -- a global
barrier -- orders it.  Each group is analysed as a region of its own statements
(:func:`sub_analysis`) and scheduled by Algorithm 1, the original loop order or isl's
scheduler, whichever ranks best there; the groups' kernels are concatenated in order.
A group's analysis may see *more* dependences than the region (a write of another
group no longer kills one), never fewer between its statements, so its schedule is
legal for the group; the caller proves the combined transformation against the whole
region's dependences anyway.

Fused variants: consecutive kernels with the same number of space dimensions are
merged (saving a launch, reusing data in cache) when the prover accepts the merged
kernel for the dependences among its statements.  Each statement keeps its maps, so
fusion never costs space dimensions or coalescing; the merged kernel's time maps get a
leading constant (the position of the original kernel) so that one thread runs the
parts in their order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import islpy as isl

from polygpu.model.analysis import Analysis, analyze
from polygpu.model.dependences import Dependences, maps_of, union_of
from polygpu.schedule import algorithm1
from polygpu.schedule.adjacency import transformation
from polygpu.schedule.isl_fallback import isl_transformation
from polygpu.schedule.legality import insert_constants, transformation_schedule, violations
from polygpu.schedule.ranking import proven, rank_key, space_dims
from polygpu.schedule.transformation import KernelSchedule, Transformation


def _components(an: Analysis) -> tuple[list[tuple[str, ...]], list[set[int]]]:
    """The SCCs of the statement dependence graph (statements that run), in textual
    order of their first statements, and each one's predecessor components."""
    names = [s.name for s in an.scop.statements if not s.domain.is_empty()]
    succ: dict[str, set[str]] = {n: set() for n in names}
    for d in an.dependences.items:
        if d.source in succ and d.sink in succ and d.source != d.sink:
            succ[d.source].add(d.sink)
    reach = {}
    for n in names:  # graphs of a few statements: plain reachability is enough
        seen, todo = set(), [n]
        while todo:
            for m in succ[todo.pop()]:
                if m not in seen:
                    seen.add(m)
                    todo.append(m)
        reach[n] = seen
    comps: list[tuple[str, ...]] = []
    comp_of: dict[str, int] = {}
    for n in names:
        if n not in comp_of:
            members = tuple(m for m in names if m == n or (m in reach[n] and n in reach[m]))
            for m in members:
                comp_of[m] = len(comps)
            comps.append(members)
    preds: list[set[int]] = [set() for _ in comps]
    for a in names:
        for b in succ[a]:
            if comp_of[a] != comp_of[b]:
                preds[comp_of[b]].add(comp_of[a])
    return comps, preds


def _topological(preds: list[set[int]],
                 prefer: Callable[[list[int], int], bool]) -> list[int]:
    """A topological order of the components: among the ready ones, those ``prefer``
    (given the order so far) accepts first, then the textually first."""
    order: list[int] = []
    while len(order) < len(preds):
        ready = [c for c in range(len(preds)) if c not in order and preds[c] <= set(order)]
        order.append(min(ready, key=lambda c: (not prefer(order, c), c)))
    return order


def statement_sccs(an: Analysis) -> list[tuple[str, ...]]:
    """The SCCs of the statement dependence graph (statements that run), in a
    topological order; among ready components the textually first goes first."""
    comps, preds = _components(an)
    return [comps[c] for c in _topological(preds, lambda order, c: False)]


def sub_analysis(an: Analysis, names: tuple[str, ...]) -> Analysis:
    """The analysis of the region made of ``names`` only (same schedules, arrays,
    parameters and host iterators): its dependences, reductions and parallel loops
    are those of these statements alone."""
    scop = an.scop
    keep = set(names)
    loops = tuple(replace(lp, statements=tuple(s for s in lp.statements if s in keep))
                  for lp in scop.loops)
    return analyze(replace(scop, statements=tuple(s for s in scop.statements
                                                  if s.name in keep), loops=loops))


def _group_options(sub: Analysis) -> list[Transformation]:
    """The group's proven schedules, best first (at least the one-thread one)."""
    proposed = algorithm1.search(sub, wanted=8)
    if not proposed:
        fallback = isl_transformation(sub)
        proposed = [fallback] if fallback is not None else []
    original = algorithm1.original(sub)
    if original is not None:
        proposed.append(original)
    # one without any space dimension is no better than the one-thread original order
    # (isl may reorder it: a forward substitution by columns, whose inner loop then
    # updates a different element each time, where the rows keep one running value in
    # a register -- codegen/accumulator.py)
    found = [tr for tr in proposed if space_dims(tr) and proven(sub, tr)]
    found.sort(key=lambda tr: rank_key(sub, tr))
    return found + [algorithm1.sequential(sub)]


def _merged(kernels: list[KernelSchedule]) -> KernelSchedule:
    """One kernel running ``kernels``' statements with their maps; the time maps get
    the part's position in front and zeros behind (one width for the kernel)."""
    n_time = 1 + max(k.n_time for k in kernels)
    space, time = [], []
    for pos, k in enumerate(kernels):
        for m in maps_of(k.space):
            space.append(m.reset_tuple_id(isl.dim_type.out))
        for m in maps_of(k.time):
            m = insert_constants(m, 0, [pos])
            m = insert_constants(m, m.dim(isl.dim_type.out),
                                 [0] * (n_time - m.dim(isl.dim_type.out)))
            time.append(m.reset_tuple_id(isl.dim_type.out))
    return KernelSchedule(
        statements=tuple(s for k in kernels for s in k.statements),
        space=union_of(space), time=union_of(time), n_space=kernels[0].n_space,
        n_time=n_time, atomic=tuple(s for k in kernels for s in k.atomic),
        reduction_dims=tuple(sorted({d for k in kernels for d in k.reduction_dims})),
        warp_uniform=tuple(s for k in kernels for s in k.warp_uniform))


def _kernel_legal(an: Analysis, kernel: KernelSchedule) -> bool:
    """Whether one kernel respects the dependences among its own statements."""
    if any(s not in an.combinable for s in kernel.atomic):
        return False  # atomic only in its group's region: the caller refuses it too
    inside = set(kernel.statements)
    deps = an.dependences_with(kernel.atomic)
    deps = Dependences(tuple(d for d in deps.items if d.source in inside and d.sink in inside),
                       deps.space)
    es = transformation_schedule(Transformation((kernel,), (), (), "fusion"))
    return not violations(deps, es)


def fused(an: Analysis, kernels: tuple[KernelSchedule, ...]) -> tuple[KernelSchedule, ...]:
    """``kernels`` with consecutive ones of equal ``n_space`` merged, greedily from the
    first, wherever the merged kernel is legal."""
    runs: list[list[KernelSchedule]] = []
    for k in kernels:
        if runs and runs[-1][-1].n_space == k.n_space and \
                _kernel_legal(an, _merged(runs[-1] + [k])):
            runs[-1].append(k)
        else:
            runs.append([k])
    return tuple(run[0] if len(run) == 1 else _merged(run) for run in runs)


def _ordered(an: Analysis, preds: list[set[int]],
             choice: list[Transformation]) -> list[int]:
    """The groups in a topological order that puts, where it may, a group whose first
    kernel fuses with the previous group's last kernel right after it (Cholesky's
    diagonal update after the column scaling it reads, before the trailing update)."""

    def fuses(order: list[int], c: int) -> bool:
        if not order:
            return False
        last, first = choice[order[-1]].kernels[-1], choice[c].kernels[0]
        return last.n_space == first.n_space and _kernel_legal(an, _merged([last, first]))

    return _topological(preds, fuses)


def distributions(an: Analysis) -> list[Transformation]:
    """Distributed transformations of ``an``'s region (not yet proven against it): each
    SCC group's best schedule, and its best with atomic statements where that differs,
    each as it is and fused; empty when the region is one SCC."""
    comps, preds = _components(an)
    if len(comps) < 2:
        return []
    plain, with_atomics = [], []
    for names in comps:
        options = _group_options(sub_analysis(an, names))
        plain.append(options[0])
        atomic = [tr for tr in options if tr.atomic]
        with_atomics.append(atomic[0] if atomic else options[0])
    found = []
    for choice in (plain, with_atomics):
        if found and all(a is b for a, b in zip(plain, with_atomics, strict=True)):
            break
        order = _ordered(an, preds, choice)
        kernels = tuple(k for c in order for k in choice[c].kernels)
        found.append(transformation(an, kernels, "distribution"))
        merged = fused(an, kernels)
        if len(merged) < len(kernels):
            found.append(transformation(an, merged, "distribution, fused"))
    return found
