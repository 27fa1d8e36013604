"""How candidate transformations are judged: the prover's verdict and the ranking key.

Shared by :mod:`polygpu.schedule.candidates` (ranking the region's candidates) and
:mod:`polygpu.schedule.distribution` (picking each distributed kernel's best schedule
on its own sub-region), so that both judge plans by the same measure.
"""

from __future__ import annotations

import islpy as isl

from polygpu.model.analysis import Analysis
from polygpu.model.dependences import maps_of
from polygpu.schedule.host import determined_iterators
from polygpu.schedule.legality import LegalityError, prove_legal, transformation_schedule
from polygpu.schedule.transformation import Transformation


def proven(an: Analysis, tr: Transformation) -> bool:
    """Whether the prover accepts ``tr`` against ``an``'s dependences (relaxed for its
    atomic statements)."""
    if any(s not in an.combinable for s in tr.atomic):
        return False  # atomic only within a step: not provable against the region
    try:
        prove_legal(an.dependences_with(tr.atomic), transformation_schedule(tr))
    except LegalityError:
        return False  # a proposal the prover rejects is simply not a candidate
    return True


def same(a: Transformation, b: Transformation) -> bool:
    """Equal kernels, space maps and host schedule, and time maps that order every
    pair of instances alike (they may differ in constant statement-order dimensions:
    a fused plan and the original one): one of the two is redundant."""
    return a.host is b.host and len(a.kernels) == len(b.kernels) and all(
        ka.statements == kb.statements and ka.space.is_equal(kb.space)
        and (ka.time.is_equal(kb.time) or _same_order(ka.time, kb.time))
        for ka, kb in zip(a.kernels, b.kernels, strict=True))


def _same_order(t1, t2) -> bool:
    """Whether two time maps put every pair of instances in the same order."""
    return t1.lex_lt_union_map(t1).is_equal(t2.lex_lt_union_map(t2))


def space_dims(tr: Transformation) -> int:
    """Space dimensions summed over statements."""
    return sum(k.n_space * len(k.statements) for k in tr.kernels)


def serial_statements(an: Analysis, tr: Transformation) -> int:
    """Statements in one-thread kernels that run more than one instance there (a whole
    loop nest on one thread).  A statement of which a launch runs one instance (LU's
    or Cholesky's pivot of one host step) is not serial work: no thread could share it."""
    scop = tr.step.scop if tr.step is not None else an.scop
    count = 0
    for k in tr.kernels:
        if k.n_space:
            continue
        for name in k.statements:
            domain = scop.statement(name).domain
            n = domain.dim(isl.dim_type.set)
            if n == 0 or len(determined_iterators(domain)) < n:
                count += 1
    return count


def host_loop_dims(tr: Transformation) -> int:
    """Host dimensions that are loops (a parametric number of steps), not the
    statement-position constants that order a few groups of steps."""
    if tr.host is None:
        return 0
    maps = maps_of(tr.host.schedule)
    return sum(1 for d in range(len(tr.host.names))
               if any(m.plain_get_val_if_fixed(isl.dim_type.out, d).is_nan() for m in maps))


def rank_key(an: Analysis, tr: Transformation) -> tuple:
    """Smaller is better.  No atomics; then at most one host loop (launches must stay
    within one loop's trip count: two host loops launch n^2 times); then fewest serial
    statements; then fewest host loops (one launch beats one per step); then most
    coalesced no-reuse references (Algorithm 1's objective), most coalesced references,
    most space dimensions, fewest kernels."""
    no_reuse = {(r.statement, r.ref) for r in an.reuse if r.reuse == "no-reuse"}
    loops = host_loop_dims(tr)
    return (bool(tr.atomic), max(0, loops - 1), serial_statements(an, tr), loops,
            -len(no_reuse.intersection(tr.coalesced)), -len(tr.coalesced),
            -space_dims(tr), len(tr.kernels))
