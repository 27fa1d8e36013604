"""The scheduler's entry point: legal GPU transformations of a region, best first.

Sources, in this order:

1. Algorithm 1 (:mod:`polygpu.schedule.algorithm1`): the transformations coalescing
   the largest number of no-reuse references;
2. always, the original loop order with the parallel loops as space dimensions;
3. only if Algorithm 1 finds none, isl's scheduler (:mod:`polygpu.schedule.isl_fallback`);
4. loop distribution (:mod:`polygpu.schedule.distribution`): each dependence SCC
   scheduled by 1-3 on its own statements, so a loop carrying another group's
   dependence no longer serialises it; plain and fused;
5. host loops (:mod:`polygpu.schedule.host`): outer loops that carry dependences (or
   isl's sequential outer band member) run on the host, and sources 1-4 schedule one
   step (with the host iterators as parameters); each is proven against the
   *original* dependences, the host dimensions counted as global barriers;
6. the single-thread original program -- only when nothing else is legal.

Transformations with atomic statements (sum reductions spread over threads,
:mod:`polygpu.model.atomic`) come after all others: they trade atomics for parallelism,
which only measurement can judge, so the paper's mapping stays the default and the
search (:mod:`polygpu.search`) tries both.

Every transformation returned has passed :func:`~polygpu.schedule.legality.prove_legal`
(the prover is the only judge; the searches merely propose).  Transformations without
any space dimension are dropped from 1-5: they are no better than 6.  The ranking is
:func:`polygpu.schedule.ranking.rank_key`; ties keep the order found in, which puts
Algorithm 1 first and the original loop order before permuted ones.
"""

from __future__ import annotations

from dataclasses import replace

import islpy as isl

from polygpu.model.analysis import Analysis, analyze
from polygpu.schedule import algorithm1
from polygpu.schedule.distribution import distributions
from polygpu.schedule.host import host_schedules, step_scop
from polygpu.schedule.isl_fallback import isl_transformation
from polygpu.schedule.legality import prove_legal, transformation_schedule
from polygpu.schedule.ranking import proven, rank_key, same, space_dims
from polygpu.schedule.transformation import Transformation

_proven = proven  # the prover's verdict, as the tests know it


def _proposals(an: Analysis, limit: int, isl_scheduler: bool = True
               ) -> list[Transformation]:
    proposed = algorithm1.search(an, wanted=4 * limit)
    fallback = None if proposed or not isl_scheduler else isl_transformation(an)
    original = algorithm1.original(an)
    return proposed + [tr for tr in (original, fallback) if tr is not None] + \
        distributions(an)


def _host_proposals(an: Analysis, limit: int) -> list[Transformation]:
    """Transformations of one host step, for every host schedule of the region."""
    found = []
    for host in host_schedules(an):
        try:
            step = analyze(step_scop(an.scop, host))
            proposals = _proposals(step, limit)
        except isl.Error:
            # isl fails inside on some step regions (an internal assertion of its
            # tableau, seen on fuzzed triangular nests with isl-derived host loops):
            # proposals are optional, so that host schedule is simply not offered
            continue
        for tr in proposals:
            if space_dims(tr):
                found.append(replace(tr, host=host, step=step,
                                     origin=f"{tr.origin}, host {host.kind}"))
    return found


def _per_statement_space(tr: Transformation) -> dict[str, int]:
    return {s: k.n_space for k in tr.kernels for s in k.statements}


def _dominates(a: Transformation, b: Transformation) -> bool:
    """Whether ``a`` makes ``b`` pointless: fewer kernels with the same host loops and
    atomics, every statement on at least as many space dimensions, every reference
    ``b`` coalesces coalesced too (a distribution that gains nothing over the fused
    nest only adds a launch)."""
    if len(a.kernels) >= len(b.kernels) or a.host is not b.host or set(a.atomic) != set(
            b.atomic):
        return False
    sa, sb = _per_statement_space(a), _per_statement_space(b)
    return all(sa.get(s, 0) >= n for s, n in sb.items()) and set(b.coalesced) <= set(
        a.coalesced)


def candidates(an: Analysis, limit: int = 8, host_loops: bool = True,
               isl_scheduler: bool = True) -> tuple[Transformation, ...]:
    """Up to ``limit`` legal transformations of ``an``'s region, best first; at least
    one (the single-thread original program when nothing else is legal).
    ``host_loops=False``: without source 5 (a recursion's pieces are its steps already;
    its host proposals ranked last and took three quarters of the scheduler's time).
    ``isl_scheduler=False``: without source 3 on the whole region (a recursion's split
    region: its 100-400 statements, where isl's search for schedule coefficients took
    0.4 s at 96 statements and more than 10 minutes at 192; its proposal fused pieces
    and ranked below the recursion's own order at every size checked).  The groups of
    source 4 still use it: each is one small SCC."""
    proposed = _proposals(an, limit, isl_scheduler) + (
        _host_proposals(an, limit) if host_loops else [])

    kept: list[Transformation] = []
    for tr in proposed:
        if space_dims(tr) and not any(same(tr, k) for k in kept) and proven(an, tr):
            kept.append(tr)
    kept = [tr for tr in kept if not any(_dominates(k, tr) for k in kept)]
    kept.sort(key=lambda tr: rank_key(an, tr))  # stable: ties keep the search order
    # nests fused over their elements after the ``limit`` others, beside them (a plan of
    # another kind -- its worth is the cost model's and the measurement's call -- which
    # leaves the others' numbers, recorded variants', as they were)
    fused = [tr for tr in kept if tr.host is not None and tr.host.kind == "fused batch"]
    kept = [tr for tr in kept if tr not in fused][:limit] + fused[:1]
    if kept:
        return tuple(kept)
    safety_net = algorithm1.sequential(an)
    prove_legal(an.dependences, transformation_schedule(safety_net))  # never fails
    return (safety_net,)
