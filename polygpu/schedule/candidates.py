"""The scheduler's entry point: legal GPU transformations of a region, best first.

Sources, in this order:

1. Algorithm 1 (:mod:`polygpu.schedule.algorithm1`): the transformations coalescing
   the largest number of no-reuse references;
2. always, the original loop order with the parallel loops as space dimensions;
3. only if Algorithm 1 finds none, isl's scheduler (:mod:`polygpu.schedule.isl_fallback`);
4. host loops (:mod:`polygpu.schedule.host`): outer loops that carry dependences run
   on the host, and sources 1-3 schedule one step (with the host iterators as
   parameters); each is proven against the *original* dependences, the host
   dimensions counted as global barriers;
5. the single-thread original program -- only when nothing else is legal.

Transformations with atomic statements (sum reductions spread over threads,
:mod:`polygpu.model.atomic`) come after all others: they trade atomics for parallelism,
which only measurement can judge, so the paper's mapping stays the default and the
search (:mod:`polygpu.search`) tries both.

Every transformation returned has passed :func:`~polygpu.schedule.legality.prove_legal`
(the prover is the only judge; the searches merely propose).  Transformations without
any space dimension are dropped from 1-4: they are no better than 5.  The ranking is
no atomic statements before some, then fewest statements in single-thread kernels,
then no host loops before host loops (one launch per kernel beats one per step when
both are legal), then most coalesced no-reuse
references (Algorithm 1's objective), then most coalesced references of any class,
then more space dimensions (summed over statements), then fewer kernels, then the
order found in -- which puts Algorithm 1 first and the original loop order before
permuted ones.  Space dimensions before kernels: fusing a one-dimensional statement
(fdtd-2d's ``ey[0][j] = fict[t]``) with two-dimensional ones forces them all onto one
space dimension, so each thread walks a whole loop; an extra launch costs microseconds.
"""

from __future__ import annotations

from dataclasses import replace

from polygpu.model.analysis import Analysis, analyze
from polygpu.schedule import algorithm1
from polygpu.schedule.host import host_schedules, step_scop
from polygpu.schedule.isl_fallback import isl_transformation
from polygpu.schedule.legality import LegalityError, prove_legal, transformation_schedule
from polygpu.schedule.transformation import Transformation


def _proven(an: Analysis, tr: Transformation) -> bool:
    if any(s not in an.combinable for s in tr.atomic):
        return False  # atomic only within a step: not provable against the region
    try:
        prove_legal(an.dependences_with(tr.atomic), transformation_schedule(tr))
    except LegalityError:
        return False  # a proposal the prover rejects is simply not a candidate
    return True


def _same(a: Transformation, b: Transformation) -> bool:
    return a.host is b.host and len(a.kernels) == len(b.kernels) and all(
        ka.statements == kb.statements and ka.space.is_equal(kb.space)
        and ka.time.is_equal(kb.time)
        for ka, kb in zip(a.kernels, b.kernels, strict=True))


def _space_dims(tr: Transformation) -> int:
    return sum(k.n_space * len(k.statements) for k in tr.kernels)


def _serial_statements(tr: Transformation) -> int:
    """Statements in kernels of a single thread (a whole loop nest on one thread)."""
    return sum(len(k.statements) for k in tr.kernels if k.n_space == 0)


def _rank_key(an: Analysis, tr: Transformation) -> tuple:
    no_reuse = {(r.statement, r.ref) for r in an.reuse if r.reuse == "no-reuse"}
    return (bool(tr.atomic), _serial_statements(tr), tr.host is not None,
            -len(no_reuse.intersection(tr.coalesced)), -len(tr.coalesced),
            -_space_dims(tr), len(tr.kernels))


def _proposals(an: Analysis, limit: int) -> list[Transformation]:
    proposed = algorithm1.search(an, wanted=4 * limit)
    fallback = None if proposed else isl_transformation(an)
    original = algorithm1.original(an)
    return proposed + [tr for tr in (original, fallback) if tr is not None]


def _host_proposals(an: Analysis, limit: int) -> list[Transformation]:
    """Transformations of one host step, for every host schedule of the region."""
    found = []
    for host in host_schedules(an):
        step = analyze(step_scop(an.scop, host))
        for tr in _proposals(step, limit):
            if _space_dims(tr):
                found.append(replace(tr, host=host, step=step,
                                     origin=f"{tr.origin}, host {host.kind}"))
    return found


def candidates(an: Analysis, limit: int = 8) -> tuple[Transformation, ...]:
    """Up to ``limit`` legal transformations of ``an``'s region, best first; at least
    one (the single-thread original program when nothing else is legal)."""
    proposed = _proposals(an, limit) + _host_proposals(an, limit)

    kept: list[Transformation] = []
    for tr in proposed:
        if _space_dims(tr) and not any(_same(tr, k) for k in kept) and _proven(an, tr):
            kept.append(tr)
    kept.sort(key=lambda tr: _rank_key(an, tr))  # stable: ties keep the search order
    if kept:
        return tuple(kept[:limit])
    safety_net = algorithm1.sequential(an)
    prove_legal(an.dependences, transformation_schedule(safety_net))  # never fails
    return (safety_net,)
