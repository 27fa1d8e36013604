"""The search at PolyBench's EXTRALARGE sizes without a GPU: the model's default plan is
timed first and the result is never worse than it, and the search costs, compiles and
checks only a bounded number of candidates beyond the budget.

Times come from :class:`~polygpu.search.runner.SyntheticRunner` (a formula, nothing
runs), registers from :class:`~polygpu.search.resources.FixedResources` (no nvcc), so
what these searches do besides timing is real: the model's plans, costing, code
generation at the full sizes."""

from __future__ import annotations

import collections
import math
import os
from dataclasses import replace
from pathlib import Path

import pytest

from polygpu.schedule.variant import Variant
from polygpu.search import explore, plan_model, tuner
from polygpu.search.explore import distance
from polygpu.search.measurement import canonical
from polygpu.search.resources import FixedResources
from polygpu.search.runner import SyntheticRunner
from polygpu.search.space import SpaceOptions
from polygpu.search.strategies import model
from polygpu.search.tuner import GIVE_UP_FLOOR_MS, TuneOptions, tune

ROOT = Path(__file__).resolve().parent.parent
ATAX = str(ROOT / "kernels" / "polybench" / "atax.c")
EXTRALARGE = {"m": 1900, "n": 2100}  # PolyBench/C 4.2.1, as PPCG was timed


@pytest.fixture(scope="module")
def plan() -> Variant:
    """The default plan at these sizes (what ``compile -p`` compiles), as the search
    specializes it."""
    chosen = plan_model.choose(tuner._prepared(ATAX, None, (), ()), EXTRALARGE).variant
    return replace(chosen, specialize=True)


@pytest.fixture
def counted(monkeypatch):
    """Variants through each compile mode (sketch, program, check), counted."""
    calls: collections.Counter[str] = collections.Counter()
    real = tuner._compile_all

    def counting(spec, function, options, variants, params, mode="program"):
        calls.update([mode] * len(variants) if isinstance(mode, str) else mode)
        return real(spec, function, options, variants, params, mode)

    monkeypatch.setattr(tuner, "_compile_all", counting)
    return calls


def _search(runner, strategy="model", budget=6, oracle=None):
    return tune(ATAX, EXTRALARGE, runner, options=TuneOptions(
        strategy=strategy, budget=budget, jobs=1), oracle=oracle or FixedResources())


def _slower_than(fast: str):
    """Launch times under which the program ``fast`` is the fastest of all (every
    launch of another at least three times slower)."""
    def launch_ms(job, k):
        return 1.0 if job.key == fast else 3.0 * SyntheticRunner._default(job, k)
    return launch_ms


@pytest.mark.parametrize("strategy", ["model", "per-kernel"])
def test_the_default_plan_is_timed_first_and_never_beaten_by_a_slower_one(plan, strategy):
    key = canonical(plan.to_json())
    runner = SyntheticRunner(_slower_than(key))
    result = _search(runner, strategy)
    assert runner.calls[0] == key  # the model's default plan is the first measurement
    assert result.best is not None and result.best.key == key  # nothing beat it
    first = next(c for c in result.candidates if c.key == key)
    assert first.origin == "plan" and first.stage == "timed"
    # and the search did look further than the plan
    assert len(set(runner.calls)) > 2


@pytest.mark.parametrize("strategy", ["model", "per-kernel"])
def test_a_faster_variant_found_by_the_search_wins(plan, strategy):
    key = canonical(plan.to_json())

    def launch_ms(job, k):  # the plan is the slowest program the search can see
        return 10.0 if job.key == key else SyntheticRunner._default(job, k)

    runner = SyntheticRunner(launch_ms)
    result = _search(runner, strategy)
    assert runner.calls[0] == key
    plan_ms = next(c for c in result.candidates if c.key == key).measurement.time_ms
    assert result.best.key != key and result.best.measurement.time_ms < plan_ms


def test_per_kernel_keeps_the_plan_when_the_combination_is_slower(plan):
    """The kernels' own launch times favour other variants, but every program other
    than the plan pays a fixed extra (what per-launch times cannot see): the
    combination, measured as a whole, is slower than the plan, which stays the
    result."""
    key = canonical(plan.to_json())

    class Runner(SyntheticRunner):
        def measure(self, job):
            m = super().measure(job)
            if job.key == key:
                return m
            total = m.time_ms + 100.0  # the whole costs more than its launches say
            return replace(m, time_ms=total, times_ms=(total,))

    runner = Runner()
    result = _search(runner, "per-kernel", budget=8)
    assert runner.calls[0] == key and len(set(runner.calls)) > 2
    assert result.chosen == key and result.best.key == key


def test_each_candidate_races_the_best_so_far():
    """Every job after the first carries a cutoff of ``race`` x the best median measured
    before it (the runner stops timing it there); ``race=None`` times all in full."""
    class Recording(SyntheticRunner):
        def __init__(self):
            super().__init__()
            self.jobs = []

        def measure(self, job):
            m = super().measure(job)
            self.jobs.append((job.cutoff_ms, m.time_ms))
            self.give_up.append(job.give_up_ms)
            return m

    runner = Recording()
    runner.give_up = []
    tune(ATAX, EXTRALARGE, runner, options=TuneOptions(budget=5, jobs=1),
         oracle=FixedResources())
    assert runner.jobs[0][0] is None and len(runner.jobs) == 5
    assert runner.give_up[0] is None
    for i, (cutoff, _) in enumerate(runner.jobs[1:], 1):
        best = min(t for _, t in runner.jobs[:i])
        assert cutoff == pytest.approx(1.25 * best)
        # a check at the timed sizes is given up over HOPELESS x the best, never below
        # the floor (the synthetic times are 1-2 ms)
        assert runner.give_up[i] == max(explore.HOPELESS * best, GIVE_UP_FLOOR_MS) == 50.0
    off = Recording()
    off.give_up = []
    tune(ATAX, EXTRALARGE, off, options=TuneOptions(budget=3, jobs=1, race=None),
         oracle=FixedResources())
    assert [c for c, _ in off.jobs] == [None] * 3 and off.give_up == [None] * 3


def test_overlapped_measurement_is_the_same_search(monkeypatch):
    """The model strategy is drawn from while the runner measures (in the tuner's
    measuring thread), and that changes nothing: the same candidates are measured in
    the same order, with the same cutoffs, as when each is measured before the next is
    drawn."""
    import threading

    class Threads(SyntheticRunner):
        def __init__(self):
            super().__init__()
            self.threads, self.cutoffs = set(), []

        def measure(self, job):
            self.threads.add(threading.current_thread().name)
            self.cutoffs.append(job.cutoff_ms)
            return super().measure(job)

    overlapped = Threads()
    first = _search(overlapped, budget=6)
    monkeypatch.setattr(model.select, "pipelined", False)
    sequential = Threads()
    second = _search(sequential, budget=6)
    assert all(t.startswith("polygpu-measure") for t in overlapped.threads)
    assert sequential.threads == {threading.current_thread().name}
    assert overlapped.calls == sequential.calls and len(overlapped.calls) == 6
    assert overlapped.cutoffs == sequential.cutoffs
    assert first.best.key == second.best.key


@pytest.mark.parametrize("budget", [3, 8])
def test_the_search_compiles_a_bounded_number_beyond_the_budget(counted, budget):
    oracle = FixedResources()
    runner = SyntheticRunner()
    result = _search(runner, "model", budget, oracle)
    plans = model.PLANS
    assert len(runner.calls) == budget
    space = sum(1 for c in result.candidates if c.origin != "plan")
    assert space > 400  # the space is large ...
    # ... but only a few of it is costed, built and checked
    walk = budget - plans
    # tiles costed: a tile in all its thread layouts counts once (at most one layout
    # per x extent of the space)
    tiles = {explore.layout_family(c.variant) for c in result.candidates
             if c.traffic_bytes is not None}
    assert len(tiles) <= explore.COSTED_PER_TIMED * walk + plan_model_plans()
    assert counted["sketch"] <= len(SpaceOptions().x_threads) * len(tiles)
    # code generated: at most what was costed; not counting the candidates whose code
    # was another's (duplicates, which no ptxas run follows), a few per timed one
    duplicates = sum(1 for c in result.candidates if c.stage == "duplicate")
    assert counted["program"] <= counted["sketch"]
    assert counted["program"] - duplicates <= \
        explore.BUILT_PER_TIMED * walk + explore.LOOKAHEAD + plans
    assert sum(oracle.calls) <= counted["program"]  # ptxas: only what was generated
    assert counted["check"] == budget  # a check program only for what is timed
    assert result.work == {"costed": counted["sketch"], "generated": counted["program"],
                           "checks": counted["check"]}
    never = [c for c in result.candidates if c.stage == "budget" and c.traffic_bytes is None]
    assert len(never) > space // 2 and all("not costed" in c.reason for c in never)


def plan_model_plans() -> int:
    """How many plans the default ranks for atax at these sizes (all are costed)."""
    return len(plan_model.plan_variants(tuner._prepared(ATAX, None, (), ()), EXTRALARGE))


def test_per_kernel_sweeps_are_bounded_too(counted):
    runner = SyntheticRunner()
    result = _search(runner, "per-kernel", 6)
    assert len(runner.calls) <= 6
    sweeps = sum(1 for c in result.candidates if c.origin != "plan")
    assert counted["sketch"] < sweeps // 2
    duplicates = sum(1 for c in result.candidates if c.stage == "duplicate")
    assert counted["program"] - duplicates <= \
        explore.BUILT_PER_TIMED * 6 + 3 * explore.LOOKAHEAD + 1
    assert counted["check"] == len(set(runner.calls))


def test_distance_counts_steps():
    a = Variant(candidate=0, tile=(32, 32), threads=(8, 32))
    assert distance(a, a) == 0
    assert distance(a, replace(a, tile=(64, 32))) == 1  # twice the points along y
    assert distance(a, replace(a, tile=(64, 32), threads=(16, 32))) == 1  # twice the threads
    assert distance(a, replace(a, shared=False)) == 1
    assert distance(a, replace(a, candidate=1)) == 3
    # per-kernel overrides: the kernel that differs decides
    b = a.with_kernel(1, replace(a, tile=(128, 32)))
    assert distance(a, b) == 2 and distance(b, b) == 0


def test_thread_layouts_of_one_tile_are_one_family():
    a = Variant(candidate=0, tile=(128, 128), threads=(32, 16))
    family = explore.layout_family(a)
    assert explore.layout_family(replace(a, threads=(16, 32))) == family
    assert explore.layout_family(replace(a, threads=(8, 64))) == family
    assert explore.layout_family(replace(a, threads=(16, 16))) != family  # fewer threads
    assert explore.layout_family(replace(a, tile=(64, 128))) != family
    assert explore.layout_family(replace(a, double_buffer=True)) != family
    # per-kernel threads too
    b = a.with_kernel(1, replace(a, threads=(16, 32)))
    c = a.with_kernel(1, replace(a, threads=(8, 64)))
    assert explore.layout_family(b) == explore.layout_family(c) != family


def test_the_walk_costs_every_thread_layout_of_a_tile_it_costs():
    """l2dist at the paper's shape: every tile timed was costed in all its thread
    layouts of the same size (32 x 16 ran 3 % behind the never-costed 16 x 32 on the
    H200, distance() putting them four steps apart), though the walk is bounded."""
    spec = str(ROOT / "kernels" / "allpairs" / "l2dist.c")
    result = tune(spec, {"n1": 2000, "n2": 2000, "d": 5419}, SyntheticRunner(),
                  function="l2dist", options=TuneOptions(budget=8, jobs=1),
                  oracle=FixedResources())
    families = collections.defaultdict(list)
    for c in result.candidates:
        families[explore.layout_family(c.variant)].append(c)
    timed = [f for f in families.values() if any(c.measurement for c in f)]
    assert any(len(f) > 1 for f in timed)  # the check is not vacuous
    for family in timed:
        assert all(c.traffic_bytes is not None for c in family), \
            [(c.variant.threads, c.stage) for c in family]
    assert any(c.traffic_bytes is None for c in result.candidates)  # a bounded walk


def test_one_compile_child_serves_every_batch():
    """A lazy search sends many small batches; one ``--compile-serve`` child prepares
    the region once and compiles them all, with the results compiled here."""
    mv = str(ROOT / "kernels" / "mv.c")
    tasks = [(mv, None, (), (), canonical(Variant(tile=(t,), threads=(t,)).to_json()),
              {"n": 64}, {"n": 64}, mode) for t in (32, 64) for mode in tuner.MODES]
    service = tuner._CompileService(2)
    try:
        first, second = service.map(tasks[:3]), service.map(tasks[3:])
        process = service.process
        assert process is not None and not service.broken
    finally:
        service.close()
    assert process.returncode == 0  # closed cleanly: its workers' CPU is counted
    here = [tuner._compile_one(*task) for task in tasks]
    assert [sorted(r) for r in first + second] == [sorted(r) for r in here]
    assert [r.get("program") for r in first + second] == [r.get("program") for r in here]
    assert [r.get("traffic") for r in first + second] == [r.get("traffic") for r in here]


@pytest.mark.parametrize("kernel, sizes", [
    ("heat_3d", {"tsteps": 1000, "n": 200}), ("fdtd_2d", {"tmax": 1000, "nx": 2600, "ny": 3000}),
    ("atax", EXTRALARGE)])
def test_distance_rows_are_the_functions_floats(kernel, sizes):
    """The explorer's vectorized distances are exactly :func:`distance`'s (the walk's
    order depends on the floats), variants with per-kernel overrides included."""
    import numpy as np

    from polygpu.search import space

    prepared = tuner._prepared(str(ROOT / "kernels" / "polybench" / f"{kernel}.c"), None,
                               (), ())
    variants = space.space(prepared, sizes, space.SpaceOptions())
    overridden = [v.with_kernel(0, replace(v.for_kernel(0), shared=not v.shared))
                  for v in variants[:5]]
    profiles = [explore._profile(v) for v in variants + overridden]
    table = explore._Distances(profiles)
    for mine in (profiles[0], profiles[len(variants) // 2], profiles[-1]):
        expected = np.array([explore._profile_distance(mine, p) for p in profiles])
        assert np.array_equal(table.row(mine), expected)


def test_a_warmed_compile_service_is_the_same_service():
    """``warm`` has the child prepare the region while the caller goes on; the batches
    after it get their own results (the warm-up's reply is read first), and a service
    warmed but never used ends at once when closed."""
    import time

    mv = str(ROOT / "kernels" / "mv.c")
    region = (mv, None, (), ())
    tasks = [(*region, canonical(Variant(tile=(t,), threads=(t,)).to_json()),
              {"n": 64}, {"n": 64}, mode) for t in (32, 64) for mode in ("program", "check")]
    service = tuner._CompileService(2)
    try:
        service.warm(region)
        assert service.unread == 1
        found = service.map(tasks)
        assert service.unread == 0 and not service.broken
    finally:
        service.close()
    here = [tuner._compile_one(*task) for task in tasks]
    assert [r.get("program") for r in found] == [r.get("program") for r in here]
    assert [r.get("check_program") for r in found] == [r.get("check_program") for r in here]

    unused = tuner._CompileService(2)
    unused.warm(region)
    process = unused.process
    workers = []
    for _ in range(100):  # until it has forked its workers
        workers = _children(process.pid)
        if len(workers) >= 2:
            break
        time.sleep(0.1)
    start = time.monotonic()
    unused.close()
    assert process.poll() is not None and time.monotonic() - start < 10
    # and its workers with it (orphans would wait on their queue forever)
    for _ in range(50):
        if not [w for w in workers if os.path.exists(f"/proc/{w}")]:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"the compile service's workers {workers} outlived it")


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux's /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry))
    return found


def test_checks_generated_beside_programs_change_nothing_but_when(monkeypatch):
    """With compile workers, each candidate's check program is generated in the batch
    that generates its program (never alone, on the search's path); the search times the
    same candidates in the same order with the same programs as one compiling in this
    process, which generates a check only for what it times."""
    batches = []
    real = tuner._compile_all

    def recording(spec, function, options, variants, params, mode="program"):
        batches.append([mode] * len(variants) if isinstance(mode, str) else list(mode))
        return real(spec, function, options, variants, params, mode)

    monkeypatch.setattr(tuner, "_compile_all", recording)
    results = {}
    for jobs in (1, 2):
        runner = SyntheticRunner()
        batches.clear()
        result = tune(ATAX, EXTRALARGE, runner, options=TuneOptions(budget=4, jobs=jobs),
                      oracle=FixedResources())
        results[jobs] = (runner.calls, result, [list(b) for b in batches])
    (calls1, one, batches1), (calls2, two, batches2) = results[1], results[2]
    assert calls1 == calls2 and one.best.key == two.best.key
    assert {k: p.source for k, p in one.programs.items()} == \
        {k: p.source for k, p in two.programs.items()}
    # in this process: a check alone, for each candidate timed
    assert sum(b == ["check"] for b in batches1) == len(set(calls1))
    # with workers: never alone, always with the programs of the same batch
    checks = [b for b in batches2 if "check" in b]
    assert checks and all("program" in b for b in checks)
    assert two.work["checks"] >= len(set(calls2))


def _fake(c: int, tile: int, traffic: float, ms: float | None = None):
    """A built candidate of scheduler candidate ``c`` whose model cost is its traffic
    alone (no instances, a grid that fills the GPU), measured at ``ms`` if given."""
    from polygpu.search.candidate import Candidate
    from polygpu.search.measurement import Measurement
    from polygpu.search.pool import Pool

    v = Variant(candidate=c, tile=(tile,), threads=(32,))
    key = Pool.key_of(v)
    m = Measurement(key, "ok", time_ms=ms, times_ms=(ms,)) if ms is not None else None
    return Candidate(key, v, "timed" if m else "kept", traffic_bytes=int(traffic),
                     blocks=10_000, threads=32, registers=32, concurrency=1.0,
                     measurement=m)


def _walk(candidates, variants):
    from polygpu.search.occupancy import SM_90
    from polygpu.search.pool import Pool

    pool = Pool({c.key: c for c in candidates}, {}, {}, SM_90, "sm_90", FixedResources())
    return pool, explore.Explorer(pool, variants, [c for c in candidates if c.measurement],
                                  explore.Rules(), lambda: 4)


def test_the_walk_puts_a_program_that_measured_slow_behind_the_other():
    """Explorer.calibrate: the model prices scheduler candidate 1's variants at half of
    candidate 0's, but its measured variant ran 14x its prediction where candidate 0's
    ran at its own; from then on candidate 0's next variant comes first."""
    bw = 3.0e12
    plan0, tried1 = _fake(0, 32, 3e9, ms=1e3 * 3e9 / bw), _fake(1, 32, 1.5e9,
                                                              ms=14e3 * 1.5e9 / bw)
    next0, next1 = _fake(0, 64, 3.3e9), _fake(1, 64, 1.6e9)
    _, walk = _walk([plan0, tried1, next0, next1], [next0.variant, next1.variant])
    assert walk.order(next1) < walk.order(next0)  # the model's own order
    walk.calibrate()
    assert walk.order(next0) < walk.order(next1)
    assert walk.scales[(1, False)] > 10 * walk.scales[(0, False)]
    # one program measured: no other to judge it against, the model's order stands
    _, alone = _walk([plan0, next0, next1], [next0.variant, next1.variant])
    alone.calibrate()
    assert alone.order(next1) < alone.order(next0)


def test_the_traffic_rule_compares_variants_of_one_program():
    """model's traffic floor is per scheduler candidate: candidate 1's tilings model a
    third of candidate 0's traffic, and candidate 0's best stays in the walk (a floor
    over both pruned LU's every variant of its faster schedule); candidate 0's variant
    far above its own floor is pruned."""
    options = TuneOptions(traffic_slack=50.0, min_concurrency=0.0)
    best0, heavy0, best1 = _fake(0, 32, 3e9), _fake(0, 64, 6e9), _fake(1, 32, 1e9)
    pool, walk = _walk([best0, heavy0, best1], [best0.variant, heavy0.variant,
                                                best1.variant])
    walk.considered.update(dict.fromkeys(c.key for c in (best0, heavy0, best1)))
    floors = model._apply(walk, pool, options)
    assert floors == {(0, False): 3_000_000_000, (1, False): 1_000_000_000}
    stages = {k: c.stage for k, c in pool.candidates.items()}
    assert stages == {best0.key: "kept", heavy0.key: "pruned-traffic", best1.key: "kept"}


def test_a_floor_is_built_with_the_variants_next_above_it():
    """model._ladder: the unbuilt variants one program's traffic floor may move to,
    fewest bytes first, up to the first built one (valid, so it does not spill) -- built
    in one batch, as the largest register tiles at the floor spill in a row."""
    from polygpu.search.occupancy import SM_90

    def unbuilt(c):
        return replace(c, registers=None)

    low, mid, high = (unbuilt(_fake(0, t, b)) for t, b in ((32, 1e9), (64, 2e9), (128, 3e9)))
    built = _fake(0, 256, 2.5e9)
    _, walk = _walk([low, mid, high, built], [])
    assert model._ladder([high, built, low, mid], walk, SM_90) == [low, mid]
    assert model._ladder([high, low, mid], walk, SM_90) == [low, mid, high]


def test_a_variant_its_program_measured_far_behind_is_not_timed():
    """Explorer: once a variant of candidate 1's program ran 2000x its prediction, its
    other variants are estimated from that (the program's least ratio) and not timed
    when the estimate is over HOPELESS times the best time (``pruned-measured``, with the
    estimate); candidate 0's untried variant, whose program measured well, stays."""
    bw = 3.0e12
    best0 = _fake(0, 32, 3e9, ms=1e3 * 3e9 / bw)
    slow1 = _fake(1, 32, 1e9, ms=2000e3 * 1e9 / bw)
    next0, next1 = _fake(0, 64, 3.3e9), _fake(1, 64, 1.1e9)
    pool, walk = _walk([best0, slow1, next0, next1], [next0.variant, next1.variant])
    walk.calibrate()
    assert walk.estimate(next1) > explore.HOPELESS * walk.best_s
    assert walk.estimate(next0) < 2 * walk.best_s
    walk._prune_hopeless()
    assert pool.candidates[next0.key].stage == "kept"
    pruned = pool.candidates[next1.key]
    assert pruned.stage == "pruned-measured" and "over 4x the best time" in pruned.reason
    assert next(iter(walk)) == pool.candidates[next0.key]  # the walk times the other


def test_a_program_measured_far_behind_costs_one_measurement():
    """syrk at EXTRALARGE, its second schedule 2000x slower than the first: the walk picks
    each candidate while the one before is measured, so a second variant of the slow
    schedule was already picked when the first one's time came; it is ruled out before
    it is timed (``Pool.recheck``), and so are the others (``pruned-measured``)."""
    from polygpu.schedule.variant import Variant as V

    def launch_ms(job, k):
        return 2000.0 if V.from_json(job.key).candidate == 1 else 1.0 + 0.01 * k

    runner = SyntheticRunner(launch_ms)
    # a budget that reaches past the slow schedule's first measurement (with the space's
    # double-buffered twins, the walk reaches candidate 1 at its tenth timing)
    result = tune(str(ROOT / "kernels" / "polybench" / "syrk.c"), {"n": 2600, "m": 2000},
                  runner, options=TuneOptions(budget=14, jobs=1), oracle=FixedResources())
    slow = [k for k in runner.calls if V.from_json(k).candidate == 1]
    assert len(slow) == 1, runner.calls
    assert any(c.stage == "pruned-measured" and c.variant.candidate == 1
               for c in result.candidates)
    assert result.best.variant.candidate == 0


def test_a_check_given_up_at_full_size_prunes_its_program():
    """syrk at EXTRALARGE, the slow schedule's checks at the timed sizes (1024-point tiles):
    its first variant's check is given up after its run (``slow``: not verified, not
    timed, not a failure), whose time calibrates its program, so no other variant of it
    is measured; the report counts it with the pruned, not the failed."""
    from polygpu.schedule.variant import Variant as V

    def launch_ms(job, k):
        return 2000.0 if V.from_json(job.key).candidate == 1 else 1.0 + 0.01 * k

    class AtFullSize(SyntheticRunner):
        def measure(self, job):
            slow = V.from_json(job.key).candidate == 1
            return super().measure(replace(job, check_params=dict(job.params)) if slow
                                   else job)

    runner = AtFullSize(launch_ms)
    # a budget that reaches the slow schedule (the walk costs each of the fast one's
    # tiles in all its thread layouts, explore.layout_family, and times some of them first)
    result = tune(str(ROOT / "kernels" / "polybench" / "syrk.c"), {"n": 2600, "m": 2000},
                  runner, options=TuneOptions(budget=14, jobs=1), oracle=FixedResources())
    slow = [c for c in result.candidates if c.variant.candidate == 1
            and c.measurement is not None]
    assert len(slow) == 1 and slow[0].measurement.status == "slow"
    assert slow[0].measurement.extra["check_run_ms"] == 2000.0
    counts = result.counts()
    assert "failed" not in counts and counts["pruned-measured"] >= 2
    assert result.best.variant.candidate == 0 and math.isfinite(result.best.score)


def test_first_builds_go_ahead_while_the_compile_service_warms(monkeypatch):
    """While the compile child still prepares the region (its warm-up reply not there),
    a batch of at most ``WHILE_WARMING`` tasks is compiled in this process instead of
    waiting; once the reply is there, batches go to the child."""
    import time

    mv = str(ROOT / "kernels" / "mv.c")
    region = (mv, None, (), ())
    options = tuner.TuneOptions(jobs=2)
    variants = [Variant(tile=(32,), threads=(32,)), Variant(tile=(64,), threads=(64,))]
    sent = []
    service = tuner._CompileService(2)
    real_map = service.map
    monkeypatch.setattr(service, "map", lambda tasks: sent.append(len(tasks)) or real_map(tasks))
    monkeypatch.setattr(tuner, "_SERVICE", service)
    try:
        service.warm(region)
        assert service.warming()  # preparing mv takes the child far longer than this
        here = tuner._compile_all(mv, None, options, variants, {"n": 64},
                                  ["program", "check"])
        assert sent == [] and [r.get("program") for r in here] == [
            tuner._compile_one(*region, canonical(v.to_json()), {"n": 64},
                               tuner._check_params(options, {"n": 64}, v), m).get("program")
            for v, m in zip(variants, ["program", "check"], strict=True)]
        for _ in range(600):  # until the child has prepared the region
            if not service.warming():
                break
            time.sleep(0.1)
        assert not service.warming()
        tuner._compile_all(mv, None, options, variants, {"n": 64}, "program")
        assert sent == [2] and service.unread == 0 and not service.broken
    finally:
        service.close()
