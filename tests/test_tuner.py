"""The search without a GPU: strategies, pruning, budget, database reuse and a kill in the
middle of a run, driven by deterministic fake runners and the replay runner.

Registers and shared memory come from a fixed rule (:class:`FixedResources`), not from
ptxas, so none of this needs nvcc; the tests that do (the real oracle, its cubin handed
to the runner) say so and skip without it."""

from __future__ import annotations

import functools
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from polygpu.cli import main
from polygpu.errors import PolygpuError
from polygpu.schedule.variant import Variant
from polygpu.search import resources, tuner
from polygpu.search.database import TuningDatabase
from polygpu.search.measurement import Environment, Measurement
from polygpu.search.occupancy import SM_90, Resources
from polygpu.search.resources import FixedResources
from polygpu.search.runner import ReplayRunner
from polygpu.search.space import SpaceOptions
from polygpu.search.tuner import (
    LAUNCH_SECONDS,
    Candidate,
    LaunchCost,
    TuneOptions,
    check_parameters,
    concurrency,
    predicted_cost,
    register_limited_threads,
    tune,
)
from tests.compile_cache import cached_compile_all

ROOT = Path(__file__).resolve().parent.parent
MV = str(ROOT / "kernels" / "mv.c")
PARAMS = {"n": 256}
SMALL = SpaceOptions(thread_totals=(256, 128, 64), factors=(1, 2), time_tiles=(16, 32),
                     unrolls=(1,), blocked=(False,), double_buffers=(False,))
ENV = Environment("Fake GPU", "9.0", "13.0", "580", "0.1.0")
needs_nvcc = pytest.mark.skipif(not shutil.which("nvcc"),
                                reason="the real resource oracle runs nvcc and ptxas")


@pytest.fixture
def no_nvcc_needed(monkeypatch):
    """``polygpu tune`` asks the fixed rule instead of ptxas, in the small space (the one
    the replay files of these tests record)."""
    monkeypatch.setattr(resources, "default_oracle", FixedResources)
    monkeypatch.setattr(tuner, "TuneOptions", functools.partial(TuneOptions, space=SMALL))


@pytest.fixture(scope="module", autouse=True)
def compile_once():
    """Each variant compiled (isl, code generation, traffic) once for the whole module:
    the searches here differ in what they do with the compiled space, not in the space,
    and the compile is most of their time.  The first search compiles for real."""
    cached = cached_compile_all()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tuner, "_compile_all", cached)
        yield


def fake_time(key: str) -> float:
    """A deterministic 'time' with a unique minimum: favours 128 threads and tile 256."""
    v = Variant.from_json(key)
    return 1.0 + abs(v.threads[-1] - 128) / 64 + abs(v.tile[-1] - 256) / 256 \
        + v.time_tile / 1000 + 0.5 * (not v.shared) + 0.1 * v.candidate


class FakeRunner:
    """Times by formula; the fastest-looking variant computes a wrong result."""

    def __init__(self, wrong: str | None = None, delay: float = 0.0):
        self.calls: list[str] = []
        self.wrong = wrong
        self.delay = delay

    def environment(self) -> Environment:
        return ENV

    def measure(self, job) -> Measurement:
        self.calls.append(job.key)
        assert job.program.source, "the runner gets the code"
        assert all(job.check_params[k] <= job.params[k] for k in job.params)
        # the space specializes: the timed code is for the timed sizes, and the check
        # runs the same variant specialized for the check sizes
        assert dict(job.program.specialized) == dict(job.params)
        assert dict(job.check_program.specialized) == dict(job.check_params)
        time.sleep(self.delay)
        if job.key == self.wrong:
            return Measurement(job.key, "wrong", reason="x[3]: got 1, expected 2")
        return Measurement(job.key, "ok", time_ms=fake_time(job.key), times_ms=(1.0,))


def _tune(runner, oracle=None, **kw):
    db = kw.pop("database", None)
    return tune(MV, PARAMS, runner, options=TuneOptions(space=SMALL, jobs=4, **kw),
                database=db, oracle=oracle or FixedResources())


@pytest.fixture(scope="module")
def exhaustive():
    runner = FakeRunner()
    return _tune(runner, strategy="exhaustive"), runner


def test_exhaustive_times_every_distinct_valid_candidate(exhaustive):
    result, runner = exhaustive
    stages = {c.stage for c in result.candidates}
    assert stages <= {"timed", "duplicate", "invalid"}
    timed = [c.key for c in result.candidates if c.stage == "timed"]
    assert sorted(timed) == sorted(runner.calls) and len(set(timed)) == len(timed) > 10
    # a duplicate points at a timed candidate that generated the same code
    for c in result.candidates:
        if c.stage == "duplicate":
            assert c.duplicate_of in timed
            assert result.programs[c.duplicate_of].source
    best = min(timed, key=fake_time)
    assert result.best.key == best
    assert result.best.measurement.time_ms == fake_time(best)


def test_model_prunes_and_lands_near_exhaustive(exhaustive):
    full, _ = exhaustive
    runner = FakeRunner()
    result = _tune(runner, strategy="model")
    counts = result.counts()
    pruned = sum(v for k, v in counts.items() if k.startswith("pruned"))
    assert pruned > 0 and len(runner.calls) < len(full.measured)
    # the model's default plans first (never pruned), then survivors of the space
    plans = [c.key for c in result.candidates if c.origin == "plan"]
    assert plans and runner.calls[:len(plans)] == plans
    assert set(runner.calls) - set(plans) <= {c.key for c in full.measured}
    for c in result.candidates:
        if c.stage == "pruned-traffic":
            least = min(x.traffic_bytes for x in result.candidates
                        if x.traffic_bytes is not None and x.stage != "invalid")
            assert c.traffic_bytes > 1.5 * least
        if c.stage == "pruned-occupancy":
            assert c.concurrency < 0.25 * max(x.concurrency or 0 for x in result.candidates)
    # every timed candidate passed the occupancy rule and had ptxas numbers
    for c in result.candidates:
        if c.stage == "timed":
            assert c.registers and c.registers > 0 and 0 < c.occupancy <= 1


def test_slack_zero_keeps_only_the_least_traffic():
    runner = FakeRunner()
    result = _tune(runner, strategy="model", traffic_slack=0.0)
    # (the model's default plans are timed whatever their traffic)
    kept = [c for c in result.candidates if c.traffic_bytes is not None
            and c.stage not in ("pruned-traffic", "duplicate", "invalid")
            and c.origin != "plan"]
    valid = [c for c in result.candidates if c.traffic_bytes is not None
             and c.stage != "invalid"]
    # the floor is the least traffic of a grid that gives every SM a block, when one does
    # (a few huge tiles move little but leave the GPU idle)
    filling = [c for c in valid if max(c.launches, key=lambda x: x.traffic_bytes).blocks
               >= SM_90.multiprocessors]
    least = min(c.traffic_bytes for c in filling or valid)
    # kept: the floor's own, and smaller grids with even less traffic (the model orders
    # those by the SMs they leave idle)
    assert kept and all(c.traffic_bytes <= least for c in kept)
    assert any(c.traffic_bytes == least for c in kept)


def test_random_strategy_is_seeded_and_budgeted():
    a, b, c = FakeRunner(), FakeRunner(), FakeRunner()
    ra = _tune(a, strategy="random", budget=4, seed=7)
    _tune(b, strategy="random", budget=4, seed=7)
    _tune(c, strategy="random", budget=4, seed=8)
    assert len(a.calls) == 4 and a.calls == b.calls and a.calls != c.calls
    assert sum(1 for x in ra.candidates if x.stage == "budget") > 0
    assert ra.best.key == min(a.calls, key=fake_time)


@pytest.mark.parametrize("strategy", ["model", "exhaustive"])
def test_a_time_limit_stops_the_timing_once_it_has_passed(monkeypatch, strategy):
    """Each measurement takes 10 s of a fake clock: under a limit of 25 s the third is
    the last one started in time, and what the search kept beyond it says why it was
    not timed."""
    clock = [0.0]
    monkeypatch.setattr(tuner, "clock", lambda: clock[0])

    class Slow(FakeRunner):
        def measure(self, job):
            clock[0] += 10.0
            return super().measure(job)

    runner = Slow()
    result = _tune(runner, strategy=strategy, time_limit_s=25.0)
    assert len(runner.calls) == 3
    stopped = [c for c in result.candidates if c.stage == "budget"]
    assert stopped and {c.reason for c in stopped} == {
        "the time limit of 25 s was reached"}
    assert result.best.key == min(runner.calls, key=fake_time)


def test_a_time_limit_never_leaves_a_search_without_a_result(monkeypatch):
    """A limit that has passed before anything was timed still times one candidate."""
    clock = [1000.0]
    monkeypatch.setattr(tuner, "clock", lambda: clock.append(clock[-1] + 500.0) or clock[-1])
    runner = FakeRunner()
    result = _tune(runner, strategy="exhaustive", time_limit_s=1.0)
    assert len(runner.calls) == 1 and result.best is not None


def test_a_time_limit_must_be_positive(capsys):
    with pytest.raises(PolygpuError, match="--time-limit must be more than 0"):
        TuneOptions(time_limit_s=0.0)
    with pytest.raises(SystemExit) as exited:
        main(["tune", MV, "-p", "n=256", "-o", "/nonexistent/out", "--time-limit", "0"])
    assert exited.value.code == 2
    assert "--time-limit: 0: must be a number greater than 0" in capsys.readouterr().err


def test_a_wrong_candidate_never_wins(exhaustive):
    full, _ = exhaustive
    fastest = full.best.key
    runner = FakeRunner(wrong=fastest)
    result = _tune(runner, strategy="exhaustive")
    assert result.best.key != fastest
    loser = next(c for c in result.candidates if c.key == fastest)
    assert loser.measurement.status == "wrong" and math.isinf(loser.score)
    assert result.counts()["failed"] == 1


def test_database_reuse_and_budget(tmp_path):
    path = tmp_path / "db.sqlite"
    first = FakeRunner()
    with TuningDatabase(path) as db:
        r1 = _tune(first, strategy="model", budget=3, database=db)
    assert len(first.calls) == 3
    second = FakeRunner()
    with TuningDatabase(path) as db:
        r2 = _tune(second, strategy="model", budget=3, database=db)
        assert db.count() == 6
    # what was measured before is reused (not counted), three new ones are measured: the
    # plans first in both; after them the walk's order learns from the times it has
    # (Explorer.calibrate), which the database gives the second search sooner
    assert len(second.calls) == 3 and not set(second.calls) & set(first.calls)
    reused = {c.key for c in r2.candidates if c.stage == "reused"}
    assert set(first.calls[:2]) <= reused <= set(first.calls)
    assert r2.best.score <= r1.best.score


def test_replay_runner_drives_the_search(tmp_path, exhaustive):
    full, _ = exhaustive
    records = {c.key: c.measurement for c in full.measured}
    replay_file = tmp_path / "replay.json"
    ReplayRunner.save(replay_file, records, ENV)
    replay = ReplayRunner(replay_file)
    result = tune(MV, PARAMS, replay, options=TuneOptions(space=SMALL, strategy="model"),
                  oracle=FixedResources())
    assert result.best is not None
    assert result.best.measurement == records[result.best.key]
    assert sum(replay.calls.values()) == sum(1 for c in result.candidates
                                             if c.stage == "timed")


def _child_run(db_path: str) -> None:  # run in a child process by the kill test
    runner = FakeRunner(delay=0.3)

    def report(p):
        print(f"done {p.done}", flush=True)

    with TuningDatabase(db_path) as db:
        tune(MV, PARAMS, runner, options=TuneOptions(space=SMALL, strategy="exhaustive",
                                                     jobs=2), database=db, progress=report,
             oracle=FixedResources())


def test_database_survives_a_kill_mid_run(tmp_path):
    db_path = tmp_path / "db.sqlite"
    code = f"from tests.test_tuner import _child_run; _child_run({str(db_path)!r})"
    child = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE,
                             text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 240
    done = 0
    while done < 5 and time.monotonic() < deadline:
        line = child.stdout.readline()
        if not line:
            break
        if line.startswith("done "):
            done = int(line.split()[1])
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert done >= 5, "the child never got to measuring"
    with TuningDatabase(db_path) as db:
        assert db.count() >= done  # every result reported was already committed
    # resume: what was measured is reused, the rest measured; nothing is measured twice
    runner = FakeRunner()
    with TuningDatabase(db_path) as db:
        before = db.count()
        result = _tune(runner, strategy="exhaustive", database=db)
        assert db.count() == before + len(runner.calls)
    reused = [c.key for c in result.candidates if c.stage == "reused"]
    assert len(reused) == before and not set(reused) & set(runner.calls)
    assert result.best.key == min((c.key for c in result.measured), key=fake_time)


def test_cli_tune_with_replay_writes_the_best(tmp_path, exhaustive, capsys, no_nvcc_needed):
    full, _ = exhaustive
    replay = tmp_path / "replay.json"
    ReplayRunner.save(replay, {c.key: c.measurement for c in full.measured}, ENV)
    out = tmp_path / "out"
    rc = main(["tune", MV, "-p", "n=256", "-o", str(out), "--replay", str(replay),
               "--strategy", "exhaustive", "--no-db", "-q", "--jobs", "4"])
    assert rc == 0
    data = json.loads((out / "mv.json").read_text())
    assert (out / "mv.cu").read_text().count("__global__") >= 1
    assert data["tuning"]["time_ms"] > 0 and data["tuning"]["flops"] == 2 * 256 * 256
    printed = capsys.readouterr().out
    assert "Top variants of mv" in printed


def test_cli_tune_writes_nothing_when_every_candidate_fails(tmp_path, exhaustive, capsys,
                                                            no_nvcc_needed):
    full, _ = exhaustive
    replay = tmp_path / "replay.json"
    failed = {c.key: Measurement(c.key, "crash", reason="killed by SIGSEGV")
              for c in full.measured}
    ReplayRunner.save(replay, failed, ENV)
    out = tmp_path / "out"
    rc = main(["tune", MV, "-p", "n=256", "-o", str(out), "--replay", str(replay),
               "--no-db", "-q"])
    assert rc == 1 and not out.exists()
    assert "no candidate passed" in capsys.readouterr().err


def test_tune_needs_every_parameter(capsys):
    assert main(["tune", MV, "-o", "/nonexistent/out", "--no-db", "-q",
                 "--backend", "cpu"]) == 2
    assert "needs a value for n" in capsys.readouterr().err


def test_register_limited_threads_and_concurrency():
    assert register_limited_threads(32) == 1024  # 32 x 1024 = the whole register file
    assert register_limited_threads(64) == 1024  # 64K per block: 1024 x 64 fits
    assert register_limited_threads(65) == 896  # 72 per thread after rounding: 28 warps
    assert register_limited_threads(255) == 256
    # 256 threads, 32 registers, no shared memory: 8 blocks of 8 warps fill an SM
    occ, conc = concurrency(256, 32, 0, blocks=10_000, sms=132, limits=SM_90)
    assert occ == 1.0 and conc == 1.0
    # a grid of 66 such blocks fills at most 66 * 8 of 132 * 64 warp slots
    occ, conc = concurrency(256, 32, 0, blocks=66, sms=132, limits=SM_90)
    assert occ == 1.0 and conc == pytest.approx(66 * 8 / (132 * 64))


def test_predicted_cost_and_check_parameters():
    v = Variant(tile=(4, 64), threads=(4, 32))
    low = Candidate("a", v, "kept", traffic_bytes=1000, concurrency=0.05, blocks=500)
    high = Candidate("b", v, "kept", traffic_bytes=1000, concurrency=0.5, blocks=500)
    few = Candidate("c", v, "kept", traffic_bytes=1000, concurrency=0.5, blocks=33)
    second = 1000 / SM_90.dram_bytes_per_s  # memory-bound: traffic over bandwidth
    launch = LAUNCH_SECONDS  # and one launch's latency
    assert predicted_cost(high) == pytest.approx(second + launch)
    assert predicted_cost(low) == pytest.approx(5 * second + launch)  # a fifth of the bandwidth
    assert predicted_cost(few) == pytest.approx(4 * second + launch)  # a quarter of the SMs
    # compute-bound (mm-like): the issue time of instances and operand loads decides,
    # so a register tile with fewer loads per instance comes first at equal traffic
    rate = SM_90.multiprocessors * SM_90.fp32_lanes_per_sm * SM_90.clock_hz
    tile8 = Candidate("d", v, "kept", traffic_bytes=1000, concurrency=0.5, blocks=500,
                      instances=10**12, operand_loads=10**12 // 16)
    tile2 = replace(tile8, key="e", operand_loads=10**12)
    assert predicted_cost(tile8) == pytest.approx((10**12 + 10**12 // 16) / rate + launch)
    assert predicted_cost(tile8) < predicted_cost(tile2)
    # issue needs fewer warps than hiding DRAM latency: 1/8 of the slots saturate it
    eighth = replace(tile8, key="f", concurrency=0.125)
    assert predicted_cost(eighth) == pytest.approx(predicted_cost(tile8))
    # a prefetching staged kernel's memory time does not depend on its concurrency
    staged = Variant(tile=(4, 64), threads=(4, 32), time_tile=16, prefetch=True)
    early = Candidate("g", staged, "kept", traffic_bytes=1000, concurrency=0.05,
                      blocks=500, prefetched=True)
    assert predicted_cost(early) == pytest.approx(second + launch)
    # launches are priced one by one: a wide product kernel beside a 16-block reduction
    # is as slow as the reduction's grid makes it, and each host step pays a launch
    wide = LaunchCost("wide", 1, 10**9, 0, 0, blocks=4096, concurrency=1.0)
    narrow = LaunchCost("narrow", 1, 10**7, 0, 0, blocks=16, concurrency=16 * 8 / (132 * 64))
    pair = Candidate("h", v, "kept", traffic_bytes=10**9 + 10**7, concurrency=1.0,
                     blocks=4096, launches=(wide, narrow))
    alone = 10**9 / SM_90.dram_bytes_per_s + launch
    slow = 10**7 / SM_90.dram_bytes_per_s * (132 / 16) * (0.25 / narrow.concurrency)
    assert predicted_cost(pair) == pytest.approx(alone + slow + launch)
    stepped = replace(pair, key="i", launches=(replace(wide, runs=1000),))
    assert predicted_cost(stepped) == pytest.approx(10**9 / SM_90.dram_bytes_per_s
                                                    + 1000 * launch)
    assert check_parameters({"n": 4096, "m": 10}, v) == {"n": 2 * 64 + 19, "m": 10}
    # specialized: the same remainder modulo the tiles as the timed size
    s = Variant(tile=(128, 128), threads=(16, 16), time_tile=32, specialize=True)
    assert check_parameters({"n": 4096, "m": 10}, s) == {"n": 256, "m": 10}
    assert check_parameters({"n": 4100}, s) == {"n": 260}
    assert check_parameters({"n": 200}, s) == {"n": 200}
    # a time loop's count (step_parameters): a few steps, or two time tiles and the
    # timed count's remainder modulo them; never more than the timed count
    steps = frozenset({"t"})
    assert check_parameters({"t": 1000, "n": 200}, replace(s, time_tile=0), steps) == \
        {"t": 3, "n": 200}
    assert check_parameters({"t": 1000, "n": 4096}, s, steps) == {"t": 40, "n": 256}
    assert check_parameters({"t": 2, "n": 4096}, s, steps)["t"] == 2
    assert check_parameters({"t": 1000, "n": 4096}, v, steps) == \
        {"t": 2 * v.time_tile + 1, "n": 2 * 64 + 19}


def test_traffic_bound_is_the_fewest_of_a_variant_without_spills():
    """When the least-traffic tilings spill (here: made to, for every tile of 256
    points), the traffic bound moves up to the fewest of the rest, and the variants it
    admits are compiled too -- rather than every non-spilling variant being pruned for
    traffic against one that never runs well."""
    def big(program) -> bool:
        tile = re.search(r"'tile': \(([\d, ]+)\)", program.source).group(1)
        return max(int(t) for t in tile.split(",") if t.strip()) >= 256

    def spilling(program, kernel):
        return Resources(kernel, 32, 0, 0, 64 * big(program), 64 * big(program), 0)

    result = _tune(FakeRunner(), traffic_slack=0.0, oracle=FixedResources(rule=spilling))
    by_stage = {}
    for c in result.candidates:
        by_stage.setdefault(c.stage, []).append(c)
    spilled = by_stage["pruned-spills"]
    assert spilled and all(max(c.variant.tile) >= 256 for c in spilled)
    fits = [c for c in result.candidates if c.origin != "plan"  # timed, never pruned
            and c.stage in ("timed", "budget", "pruned-threads", "pruned-occupancy")]
    assert fits and all(max(c.variant.tile) < 256 for c in fits)
    # the floor: the fewest traffic of a non-spilling variant whose main launch gives
    # every SM a block (smaller grids with less traffic are kept beside it)
    # (per program: a scheduler candidate, with host or device steps)
    def group(c):
        return c.variant.candidate, c.variant.device_steps

    least = {}
    for g in {group(c) for c in fits}:
        mine = [c for c in fits if group(c) == g]
        filling = [c for c in mine if max(c.launches, key=lambda x: x.traffic_bytes).blocks
                   >= SM_90.multiprocessors]
        least[g] = min(c.traffic_bytes for c in filling or mine)
    # the fewest traffic of all is a spilling variant's; the bound is the fewest of the rest
    assert any(c.traffic_bytes < least[group(c)] for c in spilled if group(c) in least)
    assert all(c.traffic_bytes <= least[group(c)] for c in fits)
    assert all(any(c.traffic_bytes == least[g] for c in fits) for g in least)
    pruned = by_stage["pruned-traffic"]
    assert pruned and all(c.traffic_bytes > least.get(group(c), 0)
                          and "without spills" in c.reason for c in pruned)


def test_every_strategy_is_registered_and_offered_by_the_cli():
    from polygpu.cli import build_parser
    from polygpu.search.strategies import STRATEGIES

    tune_parser = build_parser()._subparsers._group_actions[0].choices["tune"]
    (strategy,) = [a for a in tune_parser._actions if a.dest == "strategy"]
    assert tuple(strategy.choices) == tuple(STRATEGIES) == ("model", "exhaustive", "random",
                                                           "per-kernel")
    with pytest.raises(Exception, match="one of model, exhaustive, random"):
        TuneOptions(strategy="greedy")


def test_pruning_rules_on_literal_candidates():
    from polygpu.search.pruning import prune_concurrency, prune_threads, prune_traffic

    v = Variant(tile=(4, 64), threads=(4, 32))
    c = Candidate("a", v, "kept", traffic_bytes=1500, threads=128, registers=255,
                  concurrency=0.1, occupancy=0.5)
    assert prune_traffic(c, least=1000, slack=50.0) is None  # exactly at the bound
    assert prune_traffic(c, least=999, slack=50.0).stage == "pruned-traffic"
    # 255 registers allow T = 256 threads: 64..256 kept, 32 and 512 not
    assert prune_threads(c, widest=1024) is None
    for threads in (32, 512):
        pruned = prune_threads(replace(c, threads=threads), widest=1024)
        assert pruned.stage == "pruned-threads" and "T = 256" in pruned.reason
    assert prune_concurrency(c, best=0.4, fraction=0.25) is None
    assert prune_concurrency(c, best=0.41, fraction=0.25).stage == "pruned-occupancy"


def test_the_oracle_decides_the_resources(exhaustive):
    result, _ = exhaustive
    timed = [c for c in result.candidates if c.stage == "timed"]
    assert timed and all(c.registers == 32 and c.spill_bytes == 0 for c in timed)
    oracle = FixedResources(registers=200)
    heavy = [c for c in _tune(FakeRunner(), oracle=oracle, strategy="exhaustive").candidates
             if c.stage == "timed"]
    assert oracle.calls == [len(heavy)]  # one batch, one question per distinct candidate
    assert all(c.registers == 200 for c in heavy)
    # 200 registers: 6400 per warp, 10 of an SM's 64 warps at most
    assert max(c.occupancy for c in heavy) <= 10 / 64 < max(c.occupancy for c in timed)


@needs_nvcc
def test_ptxas_oracle_hands_the_runner_its_cubin():
    """The default oracle is ptxas: real registers, and the cubin it built is what the
    runner gets (the child does not compile again)."""
    runner = FakeRunner()
    cubins = []
    measure = runner.measure
    runner.measure = lambda job: (cubins.append(job.cubin), measure(job))[1]
    result = tune(MV, PARAMS, runner, options=TuneOptions(
        space=SMALL, jobs=2, strategy="exhaustive", budget=2))
    assert len(cubins) == 2 and all(c.startswith(b"\x7fELF") for c in cubins)
    assert all(c.registers > 0 for c in result.candidates if c.stage == "timed")


def test_time_steps_are_cut_only_under_host_loops():
    """heat-3d's plans step ``tsteps`` on the host: checked at a few steps. seidel-2d's
    steps are wavefronts through ``t``, ``i`` and ``j``: its kernels' guards depend on
    ``tsteps``, which the check keeps at the usual cap."""
    v = Variant(tile=(32, 32), threads=(8, 32), time_tile=0, specialize=True)
    heat = tuner._prepared("kernels/polybench/heat_3d.c", None, (), ())
    assert tuner._steps_of(heat, v) == {"tsteps"}
    seidel = tuner._prepared("kernels/seidel2d.c", None, (), ())
    assert all(c.host is not None and c.host.kind == "wavefront" for c in seidel.candidates)
    assert tuner._steps_of(seidel, v) == frozenset()
    assert tuner._check_params(tuner.TuneOptions(), {"tsteps": 500, "n": 1000}, v,
                               tuner._steps_of(seidel, v))["tsteps"] > 3
