"""``per-kernel``: the cost model's plan, then its kernels tuned one at a time.

A plan of several kernels (atax's row reduction and its column update, a
factorization's pivot column and trailing update) rarely wants one tile shape for all,
and the product of every kernel's space is far too large to time.  This strategy

1. starts from the model's plan (:func:`polygpu.search.plan_model.choose`, specialized
   like the space) and times it with its launches broken down
   (:attr:`~polygpu.search.measurement.Measurement.launch_ms`);
2. for a plan of one kernel, searches like ``model`` (its plans first, then the space,
   pruned and ordered by the model);
3. otherwise descends kernel by kernel, 0 first: kernel ``k``'s per-kernel fields (tile,
   threads, jam, chunk, shared, unroll, time_tile, blocked, prefetch) take every value
   of :func:`polygpu.search.space.kernel_variants` -- the space built from that kernel's
   own shape -- with the other kernels fixed (``Variant.with_kernel``); the sweep is
   walked lazily from the incumbent (:class:`~polygpu.search.explore.Explorer`: costed,
   built and timed in the model's order only as far as the kernel's share of the budget
   can use), pruned on kernel ``k``'s own launch (below) and timed with the breakdown;
   kernel ``k``'s variant is the one with the least time *of its own launch* (not the
   program's total: the other kernels' times only add noise), and it is fixed before
   kernel ``k + 1``;
4. measures the combination as a whole (reference check first, like every candidate)
   unless that exact program was timed already, and names it the result
   (:attr:`~polygpu.search.tuner.TuneResult.chosen`) -- unless the plan it started from
   measured faster as a whole (both timed the same way): then the plan, so the result
   is never slower than the default.

Why the kernels' results combine: the kernels of a plan run one after another (each
launch finishes before the next starts), and a kernel's code and launch depend only on
its own merged variant (``Variant.for_kernel``), so its time is, to first order, the
same whatever the other kernels' variants; the program's time is the sum of its
kernels' (plus launch gaps that do not depend on the variants).  A sum of independent
terms is minimised by minimising each, so one pass of the descent is enough.  The same
independence lets a kernel's time be reused across programs: the database keys it by
the plan, the kernel and the kernel's own variant (:mod:`polygpu.search.database`), and
a kernel variant with a recorded time is not timed again (stage ``kernel-reused``); a
kernel's time is the median of every time recorded for it, the incumbent's taken beside
many neighbours.

Where they may not combine: caches (a kernel reading what the previous one wrote finds
part of it in L2, and how much depends on the previous kernel's tiling and order), the
``__constant__`` bank shared by the kernels (one kernel's variant can change whether
another's array fits it), the 32/64-bit index width chosen for the whole program, and
clocks (a long kernel heats the GPU for the next).  The final whole measurement is what
is reported, so none of these can make the result claim a time it does not have.

Pruning in a sweep, on kernel ``k``'s own launch: variants that spill more registers
than the least-spilling one (``pruned-spills``), whose modelled traffic exceeds the
least of a grid that fills the GPU by more than ``traffic_slack`` percent
(``pruned-traffic``), and whose concurrency is below ``min_concurrency`` of the best
(``pruned-occupancy``); the rest are timed in the model's order.  With a budget, one
program is kept back for the final measurement and the rest is shared evenly among the
kernels still to tune (what one kernel leaves unspent passes on; the last kernel gets the
kept one too when whatever it picks is measured anyway).  A device-steps plan
(one launch running every kernel) has no time per kernel: its sweeps compare the
program's total, and it records no kernel times.
"""

from __future__ import annotations

import math
from dataclasses import replace

from polygpu.errors import PolygpuError
from polygpu.schedule.variant import Variant
from polygpu.search import space
from polygpu.search.explore import Explorer, Rules
from polygpu.search.strategies import model


def _kernels(session, variant) -> int:
    return len(session.prepared.of(variant)[0].transformation(variant).kernels)


def first_space(session) -> list:
    """What the tuner puts in the pool before :func:`select`: the model's plan, and for
    a plan of one kernel the whole space (the ``model`` search runs on it)."""
    plan = session.plan()
    if _kernels(session, plan) > 1:
        return [plan]
    return [plan, *space.space(session.prepared, session.params, session.options.space)]


def select(pool, options):
    session = getattr(pool, "session", None)
    if session is None:
        raise PolygpuError("the per-kernel strategy measures as it searches: run it "
                           "through polygpu.search.tuner.tune")
    return _search(pool, session, options)


select.first_space = first_space  # type: ignore[attr-defined]


def _search(pool, session, options):
    plan = session.plan()
    if _kernels(session, plan) <= 1:
        yield from model.select(pool, options)
        return
    start = pool.sketch([plan])[0]
    if start.stage == "kept":
        pool.build([start])
        start = pool.candidates[start.key]
    if start.stage != "kept":  # the plan itself does not build: the model's search
        session.explore(space.space(session.prepared, session.params, options.space))
        yield from model.select(pool, options)
        return
    pool.set(replace(start, origin="plan"))
    _descend(pool, session, options, pool.candidates[start.key], _kernels(session, plan))


def _descend(pool, session, options, start, n: int) -> None:
    device_steps = start.variant.device_steps
    reserve = 0 if options.budget is None else 1  # the final whole measurement
    session.expect(1)
    current = session.measure(start, launch_times=True) or start
    for k in range(n):
        configs = space.kernel_variants(session.prepared, session.params,
                                        current.variant.candidate, k, options.space)
        if device_steps:  # one block runs every kernel: no staging (as space.space)
            configs = [replace(v, shared=False, prefetch=False) for v in configs]
        # as JSON reads them back (with_kernel's overrides in another order)
        variants = list(dict.fromkeys(Variant.from_json(current.variant.with_kernel(
            k, v).to_json()) for v in configs))
        variants = [v for v in variants if v != current.variant]
        session.explore(variants)
        left = session.budget_left()
        # the last sweep keeps nothing back when its pick is sure to be measured: the
        # incumbent was, and every program it may pick is timed in it
        keep = reserve if k < n - 1 or pool.candidates[current.key].measurement is None \
            or any(session.kernel_time(v, k) is not None for v in variants) else 0
        share = None if left is None else max(0, left - keep) // (n - k)
        spent = session.timed
        session.expect(len(variants) if share is None else min(len(variants), share))

        def sweep_left(share=share, spent=spent):
            return None if share is None else max(0, share - (session.timed - spent))

        best, best_ms = current, _incumbent_ms(session, current, k, device_steps)
        walk = Explorer(pool, variants, [pool.candidates[current.key]],
                        _rules(pool, options, k, current), sweep_left)
        for c in walk:
            t = None if device_steps else session.kernel_time(c.variant, k)
            if t is not None:
                c = replace(c, stage="kernel-reused", reason=(
                    f"kernel {k}: {t:.4g} ms, the median of the times recorded for its "
                    "variant in this plan"))
                pool.set(c)
            else:
                measured = session.measure(c, launch_times=True)
                if measured is None:
                    continue
                c, t = measured, _measured_ms(measured, k, device_steps)
            if t is not None and t < best_ms:
                best, best_ms = c, t
        for c in walk.candidates("kept"):
            if c.measurement is None and share is not None:
                pool.set(replace(c, stage="budget", reason=(
                    f"kernel {k}: its share of the budget ({share}) was spent")))
        current = best
    final = pool.candidates[current.key]
    if final.measurement is None:
        session.expect(1)
        final = session.measure(final, launch_times=True)
    # never worse than the plan it started from: both are measured as wholes, the same
    # way (with the breakdown), so their totals compare
    first = pool.candidates[start.key].measurement
    if first is not None and first.status == "ok" and (
            final is None or final.measurement is None
            or final.measurement.score > first.time_ms):
        final = pool.candidates[start.key]
    session.chosen = final.key if final is not None else None


def _measured_ms(c, k: int, device_steps: bool) -> float | None:
    """Kernel ``k``'s time in ``c``'s measurement (device steps: the program's)."""
    m = c.measurement
    if m is None or m.status != "ok":
        return None
    if device_steps:
        return m.time_ms
    launch_ms = m.launch_ms
    return launch_ms[k] if launch_ms is not None and k < len(launch_ms) else None


def _incumbent_ms(session, current, k: int, device_steps: bool) -> float:
    """What a sweep of kernel ``k`` must beat: the current kernel variant's time (the
    median over the programs it was timed in), infinite when it has none."""
    if device_steps:
        m = current.measurement
        return m.time_ms if m is not None and m.status == "ok" else math.inf
    t = session.kernel_time(current.variant, k)
    if t is None:
        t = _measured_ms(current, k, device_steps)
    return math.inf if t is None else t


def _rules(pool, options, k: int, current) -> Rules:
    """A sweep's rules on kernel ``k``'s own launch (see the module docstring), for the
    :class:`~polygpu.search.explore.Explorer` that walks it; the incumbent ``current``
    takes part in every comparison."""

    def costed(walk) -> None:  # traffic: the floor among the costed (+ the incumbent)
        mine = [c for c in walk.candidates() if c.traffic_bytes is not None
                and c.stage not in ("invalid", "duplicate")]
        costs = {c.key: _launch_of(pool, c, k) for c in mine}
        known = [x for x in costs.values() if x is not None]
        if not known:
            return
        filling = [x for x in known if x.blocks >= pool.limits.multiprocessors]
        floor = min(x.traffic_bytes for x in filling or known)
        for c in walk.candidates("kept", "pruned-traffic"):
            x = costs.get(c.key)
            if x is None or c.measurement is not None:
                continue
            if x.traffic_bytes > floor * (1 + options.traffic_slack / 100):
                pool.set(replace(c, stage="pruned-traffic", reason=(
                    f"kernel {k}: {x.traffic_bytes:,} bytes modelled, more than "
                    f"{options.traffic_slack:g}% above the fewest ({floor:,})")))
            elif c.stage == "pruned-traffic":
                pool.set(replace(c, stage="kept", reason=""))

    def built(walk) -> None:  # spills, then concurrency on kernel k's launch
        mine = [c for c in walk.candidates() if walk.is_built(c)
                and c.stage not in ("invalid", "duplicate")]
        if not mine:
            return
        least = min(c.spill_bytes for c in mine)
        for c in walk.window():
            if c.spill_bytes > least:
                pool.set(replace(c, stage="pruned-spills", reason=(
                    f"kernel {k}: ptxas spills {c.spill_bytes - least} more bytes of "
                    "registers than the least-spilling variant of the kernel")))
        launches = [x for x in (_launch_of(pool, c, k) for c in mine) if x is not None]
        best = max((x.concurrency or 0.0 for x in launches), default=0.0)
        for c in walk.window():
            x = _launch_of(pool, c, k)
            if x is not None and x.concurrency is not None \
                    and x.concurrency < options.min_concurrency * best:
                pool.set(replace(c, stage="pruned-occupancy", reason=(
                    f"kernel {k}: concurrency {x.concurrency:.1%}, below "
                    f"{options.min_concurrency:.0%} of the best ({best:.1%})")))

    return Rules(costed=costed, built=built)


def _launch_of(pool, c, k: int):
    """Kernel ``k``'s :class:`~polygpu.search.candidate.LaunchCost` in ``c`` (None for a
    device-steps program, whose one launch runs every kernel)."""
    if c.variant.device_steps:
        return None
    program = pool.programs.get(c.key)
    if program is not None:
        if k >= len(program.launches):
            return None
        name = program.launches[k].kernel
    else:  # costed only: the launches are named as codegen/cuda.py names them
        name = next((x.kernel for x in c.launches if x.kernel.endswith(f"_kernel{k}")),
                    None)
    return next((x for x in c.launches if x.kernel == name), None)
