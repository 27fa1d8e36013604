"""The scheduler's entry point: legal GPU transformations of a region, best first.

Sources, in this order:

1. Algorithm 1 (:mod:`polygpu.schedule.algorithm1`): the transformations coalescing
   the largest number of no-reuse references;
2. always, the original loop order with the parallel loops as space dimensions;
3. only if Algorithm 1 finds none, isl's scheduler (:mod:`polygpu.schedule.isl_fallback`);
4. the single-thread original program -- only when nothing else is legal.

Transformations with atomic statements (sum reductions spread over threads,
:mod:`polygpu.model.atomic`) come after all others: they trade atomics for parallelism,
which only measurement can judge, so the paper's mapping stays the default and the
search (:mod:`polygpu.search`) tries both.

Every transformation returned has passed :func:`~polygpu.schedule.legality.prove_legal`
(the prover is the only judge; the searches merely propose).  Transformations without
any space dimension are dropped from 1-3: they are no better than 4.  The ranking is
no atomic statements before some, then most coalesced no-reuse references (Algorithm
1's objective), then most coalesced references of any class, then fewer kernels, then
more space dimensions (summed over statements), then the order found in -- which puts
Algorithm 1 first and the original loop order before permuted ones.
"""

from __future__ import annotations

from polygpu.model.analysis import Analysis
from polygpu.schedule import algorithm1
from polygpu.schedule.isl_fallback import isl_transformation
from polygpu.schedule.legality import LegalityError, prove_legal, transformation_schedule
from polygpu.schedule.transformation import Transformation


def _proven(an: Analysis, tr: Transformation) -> bool:
    try:
        prove_legal(an.dependences_with(tr.atomic), transformation_schedule(tr))
    except LegalityError:
        return False  # a proposal the prover rejects is simply not a candidate
    return True


def _same(a: Transformation, b: Transformation) -> bool:
    return len(a.kernels) == len(b.kernels) and all(
        ka.statements == kb.statements and ka.space.is_equal(kb.space)
        and ka.time.is_equal(kb.time)
        for ka, kb in zip(a.kernels, b.kernels, strict=True))


def _space_dims(tr: Transformation) -> int:
    return sum(k.n_space * len(k.statements) for k in tr.kernels)


def _rank_key(an: Analysis, tr: Transformation) -> tuple:
    no_reuse = {(r.statement, r.ref) for r in an.reuse if r.reuse == "no-reuse"}
    return (bool(tr.atomic), -len(no_reuse.intersection(tr.coalesced)),
            -len(tr.coalesced), len(tr.kernels), -_space_dims(tr))


def candidates(an: Analysis, limit: int = 8) -> tuple[Transformation, ...]:
    """Up to ``limit`` legal transformations of ``an``'s region, best first; at least
    one (the single-thread original program when nothing else is legal)."""
    proposed = algorithm1.search(an, wanted=4 * limit)
    fallback = None if proposed else isl_transformation(an)
    original = algorithm1.original(an)
    proposed += [tr for tr in (original, fallback) if tr is not None]

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
