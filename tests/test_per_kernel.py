"""Per-kernel tuning without a GPU: per-launch times from the device layer (the CPU
emulator, a fake CUDA driver), the database's kernel-times table (round trip, an older
file without it), and the ``per-kernel`` strategy's descent on atax (a plan of three
kernels) driven by a fake runner that times each kernel by a formula of its own
variant, so the kernel each sweep must pick is known.

Registers come from :class:`FixedResources` (no nvcc) and the space is tiny, so the
descent compiles a few dozen programs."""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import re
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from polygpu.cli import db as db_cli
from polygpu.cli import main
from polygpu.pipeline import compile_region, prepare
from polygpu.schedule.variant import Variant
from polygpu.search import database as database_
from polygpu.search import plan_model, resources, tuner
from polygpu.search.database import KernelTime, TuningDatabase, plan_identity
from polygpu.search.measurement import Environment, Job, Measurement, canonical, source_hash
from polygpu.search.resources import FixedResources
from polygpu.search.runner import ReplayRunner, run_job
from polygpu.search.space import SpaceOptions
from polygpu.search.tuner import TuneOptions, tune
from tests.compile_cache import cached_compile_all

ROOT = Path(__file__).resolve().parent.parent
ATAX = str(ROOT / "kernels" / "polybench" / "atax.c")
TRANSPOSE = str(ROOT / "kernels" / "transpose.c")
PARAMS = {"m": 64, "n": 64}
TINY = SpaceOptions(thread_totals=(128, 64), x_threads=(32, 64), factors=(1, 2),
                    time_tiles=(16,), unrolls=(1,), blocked=(False,), shared=(True,),
                    reduction_factors=(16,), reduction_jam=(16,))
ENV = Environment("Fake GPU", "9.0", "13.0", "580", "0.1.0")


pytestmark = pytest.mark.usefixtures("private_cache")  # tests/conftest.py


@pytest.fixture(scope="module", autouse=True)
def compile_once(private_cache):
    """Each variant compiled once for the module (the searches differ in what they do
    with the programs, not in the programs)."""
    cached = cached_compile_all()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tuner, "_compile_all", cached)
        yield


# ------------------------------------------------------------------ per-launch timing


def _atax_values(program, params, seed=0):
    from polygpu.frontend import load
    from polygpu.runtime import inputs

    source = load(ATAX, None, (), ())
    ints = inputs.integer_parameters(source, params)
    return inputs.random_values(source, ints, inputs.array_shapes(source, ints),
                                np.random.default_rng(seed))


def test_cpu_emulator_times_each_launch_and_they_add_up_to_the_run():
    from polygpu.runtime.device import CpuEmulator

    params = {"m": 96, "n": 80}
    program = compile_region(ATAX, None, Variant(), params=params).program
    assert len(program.launches) >= 2
    device = CpuEmulator()
    timed = device.time_launches(program, [_atax_values(program, params)], 3, 1)
    assert len(timed.times_ms) == len(timed.launch_ms) == 3
    for total, per_launch in zip(timed.times_ms, timed.launch_ms, strict=True):
        assert len(per_launch) == len(program.launches) and min(per_launch) > 0
        # the launches are the run, but for the host code between them
        assert 0.7 * total <= sum(per_launch) <= total
    assert len(timed.medians()) == len(program.launches)
    # the run without the breakdown still computes the same thing
    a, b = _atax_values(program, params, 3), _atax_values(program, params, 3)
    device.run(program, a)
    device.time_launches(program, [b], 1, 0)
    assert all(np.array_equal(a[k], b[k]) for k in a if isinstance(a[k], np.ndarray))


def test_runner_reports_each_launch_when_asked():
    params, check = {"m": 40, "n": 33}, {"m": 21, "n": 19}
    program = compile_region(ATAX, None, Variant(), params=params).program
    job = Job("{}", ATAX, None, program, params, check, launch_times=True)
    m = run_job(job, "cpu", repeats=2, warmup=0)
    assert m.status == "ok", m.reason
    assert len(m.launch_ms) == len(program.launches) == len(m.extra["launch_ms"])
    assert sum(m.launch_ms) <= max(m.times_ms)
    plain = run_job(Job("{}", ATAX, None, program, params, check), "cpu", repeats=2, warmup=0)
    assert plain.status == "ok" and plain.launch_ms is None
    assert "launch_ms" not in plain.extra


def test_gpu_events_between_launches_only_when_the_breakdown_is_asked():
    from tests.test_device import fake_gpu, launches, random_inputs

    spec = str(ROOT / "kernels" / "jacobi1d_steps.c")
    params = {"tsteps": 3, "n": 37}
    driver, device = fake_gpu()
    records = []

    class Clock:  # every launch takes 1 ms; an event reads the launches so far
        def record(self):
            driver.require_context()
            records.append(self)
            self.t = float(len(launches(driver)))

        def synchronize(self):
            pass

        def time_since(self, other):
            return self.t - other.t

    driver.Event = Clock
    compiled = compile_region(spec, None, Variant(), params=params)
    program = compiled.program
    steps = len(program.steps(params))
    _, values = random_inputs(spec, None, params)
    times = device.time(program, [values], 2, 1)
    # start and end of each run, the warm-up's too (timed for the budget only)
    assert times == [float(steps)] * 2 and len(records) == 2 * (1 + 2)
    records.clear()
    timed = device.time_launches(program, [values], 2, 1)
    assert len(records) == 2 + 2 * (1 + steps)  # and one after each timed run's launch
    assert timed.times_ms == (float(steps),) * 2
    per_launch = [sum(1 for k, _ in program.steps(params) if k == i)
                  for i in range(len(program.launches))]
    assert timed.launch_ms == (tuple(map(float, per_launch)),) * 2


# ------------------------------------------------------------------ the kernel-times table


def test_kernel_times_round_trip_and_an_older_file_without_the_table(tmp_path, capsys,
                                                                    monkeypatch):
    path = tmp_path / "old.sqlite"
    # a file as polygpu wrote it before the table existed: schema 1, measurements only
    conn = sqlite3.connect(path)
    conn.executescript(database_._SCHEMA)
    conn.executemany("INSERT INTO meta VALUES (?, ?)", [("schema_version", "1"),
                                                        ("created", "2025-01-01")])
    conn.commit()
    conn.close()
    src = source_hash("atax")
    key = canonical(Variant(candidate=1).to_json())
    m = Measurement(key, "ok", 2.0, (2.0,), extra={"launch_ms": [0.5, 1.5]})
    with TuningDatabase(path) as db:
        assert db.kernel_times(src, "atax", PARAMS, ENV) == {} and db.kernel_count() == 0
        row = db.record(spec=ATAX, function="atax", source_hash=src, params=PARAMS, env=ENV,
                        m=m)
        tables = {r[0] for r in db._conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "kernel_times" not in tables  # reading and recording leave the file as it was
        plan = plan_identity(1, ["S0", "S1"])
        times = [KernelTime(plan, 0, canonical(Variant(tile=(32,), threads=(32,)).to_json()),
                            0.5),
                 KernelTime(plan, 1, canonical(Variant(tile=(8, 32), threads=(8, 32))
                                               .to_json()), 1.5)]
        db.record_kernel_times(spec=ATAX, function="atax", source_hash=src, params=PARAMS,
                               env=ENV, program=key, times=times, measurement=row)
        with pytest.raises(ValueError):
            db.record_kernel_times(spec=ATAX, function="atax", source_hash=src,
                                   params=PARAMS, env=ENV, program=key,
                                   times=[KernelTime(plan, 0, times[0].variant, float("nan"))])
    with TuningDatabase(path) as db:
        found = db.kernel_times(src, "atax", PARAMS, ENV)
        assert found == {t.key: [t.time_ms] for t in times}
        # another key (parameters, environment) sees none of them
        assert db.kernel_times(src, "atax", {"m": 64, "n": 65}, ENV) == {}
        assert db.kernel_times(src, "atax", PARAMS, ENV.__class__(
            "Other", "9.0", "13.0", "580", "0.1.0")) == {}
        # a second program with the same kernel variant adds a time beside the first
        db.record_kernel_times(spec=ATAX, function="atax", source_hash=src, params=PARAMS,
                               env=ENV, program="{}", times=times[:1])
        assert db.kernel_times(src, "atax", PARAMS, ENV)[times[0].key] == [0.5, 0.5]
        assert db.kernel_count() == 3 and db.count() == 1
        assert db.lookup(src, "atax", PARAMS, ENV)[key] == m
        version = db._conn.execute(
            "SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
        assert version == "1"  # older polygpu versions still open the file
    # polygpu db reads only what it knows
    monkeypatch.setenv("COLUMNS", "300")
    parser = argparse.ArgumentParser(prog="polygpu")
    db_cli.add_parser(parser.add_subparsers(dest="command", required=True))
    for argv in (["list"], ["show", "1"], ["export", "--format", "json"]):
        args = parser.parse_args(["db", "--db", str(path), *argv])
        assert args.run(args) == 0
    out = capsys.readouterr().out
    assert "atax" in out and json.loads(out[out.index("[\n"):])[0]["time_ms"] == 2.0


def test_kernel_code_depends_only_on_its_own_variant():
    """Why kernel times combine: changing one kernel's variant leaves the others' code
    as it was (comments aside)."""
    prepared = prepare(ATAX)
    base = Variant(candidate=1, tile=(4, 128), threads=(4, 128), specialize=True)
    other = base.with_kernel(2, Variant(tile=(32, 32), threads=(8, 32)))
    from polygpu.pipeline import compile_variant

    def kernels(variant):
        source = compile_variant(prepared, variant, PARAMS).program.source
        code = "\n".join(line for line in source.splitlines()
                         if not line.lstrip().startswith("//"))
        return {re.search(r"\b(atax_kernel\d+)\s*\(", part)[1]: part
                for part in re.split(r"\n(?=__global__)", code)[1:]}

    a, b = kernels(base), kernels(other)
    assert sorted(a) == sorted(b) == ["atax_kernel0", "atax_kernel1", "atax_kernel2"]
    assert a["atax_kernel0"] == b["atax_kernel0"] and a["atax_kernel1"] == b["atax_kernel1"]
    assert a["atax_kernel2"] != b["atax_kernel2"]


# ------------------------------------------------------------------ the descent


def _unit(*parts) -> float:
    digest = hashlib.sha256(canonical(list(parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def kernel_ms(k: int, variant: Variant) -> float:
    """Kernel ``k``'s 'time' in a program of ``variant``: a function of the kernel's
    own variant only (what the strategy relies on)."""
    return 1.0 + k + _unit(k, canonical(variant.for_kernel(k).to_json()))


def total_noise(key: str) -> float:
    """Noise of a whole program's total, larger than the kernels' differences: a search
    that ranked kernels by the total would pick differently."""
    return 3.0 * _unit("noise", key)


class KernelRunner:
    """Times a program as the sum of its kernels' formula times plus noise, with the
    breakdown when asked."""

    def __init__(self):
        self.calls: list[str] = []
        self.jobs: list[Job] = []

    def environment(self) -> Environment:
        return ENV

    def measure(self, job) -> Measurement:
        self.calls.append(job.key)
        self.jobs.append(job)
        variant = Variant.from_json(job.key)
        per = [kernel_ms(k, variant) for k in range(len(job.program.launches))]
        total = sum(per) + total_noise(job.key)
        extra = {"launch_ms": per} if job.launch_times else {}
        return Measurement(job.key, "ok", time_ms=total, times_ms=(total,), extra=extra)


def _tune(runner, spec=ATAX, params=PARAMS, database=None, **kw):
    options = TuneOptions(strategy=kw.pop("strategy", "per-kernel"), space=TINY, jobs=2,
                          traffic_slack=kw.pop("traffic_slack", 1e6),
                          min_concurrency=kw.pop("min_concurrency", 0.0), **kw)
    return tune(spec, params, runner, options=options, database=database,
                oracle=FixedResources())


@functools.cache
def _plan() -> Variant:
    from dataclasses import replace

    return replace(plan_model.choose(prepare(ATAX), PARAMS).variant, specialize=True)


@pytest.fixture(scope="module")
def descent(tmp_path_factory):
    path = tmp_path_factory.mktemp("db") / "tuning.sqlite"
    runner = KernelRunner()
    with TuningDatabase(path) as db:
        result = _tune(runner, database=db)
    return result, runner, path


def test_descent_picks_each_kernels_best_by_its_own_launch_time(descent):
    result, runner, _ = descent
    plan = _plan()
    n = len(prepare(ATAX).candidates[plan.candidate].kernels)
    assert n == 3
    assert runner.calls[0] == canonical(plan.to_json())  # the model's plan first
    # every program of several launches was timed with the breakdown
    assert all(job.launch_times for job in runner.jobs)
    best = result.best
    assert best is not None and result.chosen == best.key == result.ranking[0].key
    assert best.stage == "timed" and best.key in runner.calls  # measured as a whole
    seen = [c for c in result.candidates if c.stage in ("timed", "reused", "kernel-reused")]
    assert len(seen) > 10
    for k in range(n):
        mine = kernel_ms(k, best.variant)
        # no program the search saw had a faster kernel k: each sweep kept its best, and
        # every program outside sweep k had kernel k at the plan's or the final variant
        assert all(mine <= kernel_ms(k, c.variant) for c in seen), k
    changed = [k for k in range(n) if best.variant.for_kernel(k) != plan.for_kernel(k)]
    assert len(changed) >= 2, "the sweeps found better kernel variants than the plan's"
    # the totals' noise would have misled a search that compared programs by them
    fastest_total = min((c for c in result.measured), key=lambda c: c.score)
    assert fastest_total.key != best.key
    # each kernel swept over its own space, the others fixed
    for k in range(1, n):
        sweep = [c for c in seen if all(
            c.variant.for_kernel(j) == (best.variant if j < k else plan).for_kernel(j)
            for j in range(n) if j != k)]
        assert len(sweep) >= 5, k


def test_kernel_times_are_recorded_per_kernel(descent):
    result, runner, path = descent
    with TuningDatabase(path) as db:
        assert db.count() == len(runner.calls)
        assert db.kernel_count() == 3 * len(runner.calls)
        table = db.kernel_times(result.source_hash, result.function, PARAMS, ENV)
    best = result.best.variant
    prepared = prepare(ATAX)
    for k in range(3):
        statements = prepared.candidates[best.candidate].kernels[k].statements
        key = (plan_identity(best.candidate, statements), k,
               canonical(best.for_kernel(k).to_json()))
        assert table[key] and all(t == kernel_ms(k, best) for t in table[key])


def test_a_second_search_reuses_every_time(descent):
    first, _, path = descent
    runner = KernelRunner()
    with TuningDatabase(path) as db:
        again = _tune(runner, database=db)
    assert runner.calls == []  # whole programs and kernel times all recorded
    assert again.best.key == first.best.key
    assert any(c.stage == "kernel-reused" for c in again.candidates)


def test_recorded_kernel_times_are_reused_beside_other_kernels(descent, tmp_path):
    """Only the kernel times recorded (no whole program): the sweeps time nothing, the
    plan and the combination are measured as wholes."""
    first, _, path = descent
    fresh = tmp_path / "kernels-only.sqlite"
    with TuningDatabase(path) as old, TuningDatabase(fresh) as new:
        for (plan, k, variant), times in old.kernel_times(
                first.source_hash, first.function, PARAMS, ENV).items():
            new.record_kernel_times(spec=ATAX, function=first.function,
                                    source_hash=first.source_hash, params=PARAMS, env=ENV,
                                    program="{}", times=[KernelTime(plan, k, variant, t)
                                                         for t in times])
    runner = KernelRunner()
    with TuningDatabase(fresh) as db:
        result = _tune(runner, database=db)
    plan_key = canonical(_plan().to_json())
    assert runner.calls == [plan_key] + ([first.best.key] if first.best.key != plan_key
                                         else [])
    assert result.best.key == first.best.key and result.best.stage == "timed"
    reused = [c for c in result.candidates if c.stage == "kernel-reused"]
    assert len(reused) > 10 and all("median" in c.reason for c in reused)


def test_budget_is_shared_and_the_combination_still_measured():
    runner = KernelRunner()
    result = _tune(runner, budget=6)
    assert len(runner.calls) <= 6
    assert result.best is not None and result.chosen == result.best.key
    assert result.best.stage == "timed"
    assert any(c.stage == "budget" for c in result.candidates)
    # the descent ran: some sweep beyond the plan was timed
    assert len(set(runner.calls)) >= 3


def test_one_kernel_plan_is_the_model_search():
    plan = plan_model.choose(prepare(TRANSPOSE), {"n": 64, "m": 64}).variant
    assert len(prepare(TRANSPOSE).candidates[plan.candidate].kernels) == 1
    runner, model_runner = KernelRunner(), KernelRunner()
    params = {"n": 64, "m": 64}
    result = _tune(runner, spec=TRANSPOSE, params=params, traffic_slack=50.0,
                   min_concurrency=0.25)
    by_model = _tune(model_runner, spec=TRANSPOSE, params=params, strategy="model",
                     traffic_slack=50.0, min_concurrency=0.25)
    assert result.chosen is None and not any(j.launch_times for j in runner.jobs)
    # the same search: its plans first, the same pruning of the space, the same
    # candidates timed.  Not quite the same order: the walk's order learns from the
    # measurements (Explorer.calibrate), and the model strategy's walk picks each
    # candidate while the one before is still measured (it is pipelined), this one after
    assert result.counts() == by_model.counts()
    assert runner.calls[:2] == model_runner.calls[:2]
    assert sorted(runner.calls) == sorted(model_runner.calls)
    from dataclasses import replace

    plan_key = canonical(replace(plan, specialize=True).to_json())
    assert set(runner.calls) <= set(model_runner.calls) | {plan_key}


def test_cli_per_kernel_strategy_with_replay(descent, tmp_path, monkeypatch, capsys):
    first, _, _ = descent
    replay = tmp_path / "replay.json"
    ReplayRunner.save(replay, {c.key: c.measurement for c in first.measured}, ENV)
    monkeypatch.setattr(resources, "default_oracle", FixedResources)
    monkeypatch.setattr(tuner, "TuneOptions", functools.partial(
        TuneOptions, space=TINY))
    out = tmp_path / "out"
    rc = main(["tune", ATAX, "-p", "m=64", "-p", "n=64", "-o", str(out), "--replay",
               str(replay), "--strategy", "per-kernel", "--no-db", "-q",
               "--traffic-slack", "1000000", "--min-concurrency", "0"])
    assert rc == 0
    data = json.loads((out / "atax.json").read_text())
    assert Variant.from_json(data["variant"]) == first.best.variant
    assert data["tuning"]["time_ms"] == first.best.measurement.time_ms
    printed = capsys.readouterr().out
    assert "strategy per-kernel" in printed and "kernel 2:" in printed
    assert (out / "atax.cu").read_text().count("__global__") == 3


def test_per_kernel_needs_the_tuner():
    from polygpu.errors import PolygpuError
    from polygpu.search.strategies import STRATEGIES

    with pytest.raises(PolygpuError, match="through polygpu.search.tuner.tune"):
        STRATEGIES["per-kernel"](object(), TuneOptions())
    assert TuneOptions(strategy="per-kernel").strategy == "per-kernel"
