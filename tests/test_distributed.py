"""Measuring on several workers at once (search/distributed.py, issue 24), on a local
Dask cluster of CPU-emulator workers: the same child processes, checks and statuses as
one GPU, spread over workers that each take one job at a time; a hanging candidate, a
stuck worker and a killed worker cost no database row and stop nothing.

Without Dask: the tuner's slots (several measurements in flight, one writer), ``--gpus``
parsing, and the refusal of workers whose environments differ.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from polygpu.errors import PolygpuError
from polygpu.pipeline import compile_region
from polygpu.schedule.variant import Variant
from polygpu.search import distributed as dist
from polygpu.search.database import TuningDatabase
from polygpu.search.measurement import Environment, Job, canonical
from polygpu.search.resources import FixedResources
from polygpu.search.runner import SyntheticRunner
from polygpu.search.tuner import TuneOptions, tune

ROOT = Path(__file__).resolve().parent.parent
MV = str(ROOT / "kernels" / "mv.c")
VARIANT = Variant(tile=(32,), threads=(32,), shared=False, registers=False)
TIMEOUT_S = 8.0  # a worker's child: a hanging candidate is killed after this


pytestmark = pytest.mark.usefixtures("private_cache")  # tests/conftest.py


@pytest.fixture(scope="module")
def job() -> Job:
    program = compile_region(MV, variant=VARIANT).program
    return Job(canonical(VARIANT.to_json()), MV, None, program, {"n": 61}, {"n": 37}, seed=7)


@pytest.fixture(scope="module")
def cluster(private_cache):
    """Two emulator workers, each one measuring slot."""
    with dist.DaskRunner(devices=("0", "1"), backend="cpu", timeout_s=TIMEOUT_S,
                         repeats=2, warmup=0) as runner:
        yield runner


def hanging(job: Job, key: str) -> Job:
    anchor = "const int tx = threadIdx.x;"
    source = job.program.source.replace(
        anchor, f"{anchor}\n  volatile int spin = 1; while (spin) {{}}")
    assert source != job.program.source
    return dataclasses.replace(job, key=key,
                               program=dataclasses.replace(job.program, source=source))


# -- without Dask -------------------------------------------------------------------------


def test_gpus_are_parsed_against_the_visible_ones():
    visible = ("0", "1", "2", "3")
    assert dist.parse_gpus("all", visible) == visible
    assert dist.parse_gpus("0,2", visible) == ("0", "2")
    assert dist.parse_gpus(" 3 ", ("5", "6", "7", "9")) == ("9",)  # CUDA_VISIBLE_DEVICES
    for bad, said in (("4", "no GPU 4 (4 visible"), ("1,1", "each GPU once"),
                      ("x", "'all' or GPU indices"), ("", "'all' or GPU indices")):
        with pytest.raises(PolygpuError, match=said.replace("(", r"\(")):
            dist.parse_gpus(bad, visible)
    with pytest.raises(PolygpuError, match="no GPU is visible"):
        dist.parse_gpus("all", ())


def test_emulator_worker_lists_are_checked_like_gpu_lists():
    # --backend cpu counts the listed workers: a typo is refused, not counted
    for bad in ("0,x", "1,1", "-1", ""):
        with pytest.raises(PolygpuError, match="--gpus"):
            dist.runner_for(gpus=bad, backend="cpu")
    assert dist.gpu_indices("0, 2,5") == [0, 2, 5]


def test_visible_gpus_follow_cuda_visible_devices(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2, 3")
    assert dist.visible_gpus() == ("2", "3")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert dist.visible_gpus() == ()


def test_workers_on_different_gpus_are_refused():
    h200 = Environment("NVIDIA H200", "9.0", "13.0", "580.65", "0.1.0")
    h100 = dataclasses.replace(h200, gpu_name="NVIDIA H100 80GB HBM3")
    same = {"tcp://a": {"environment": h200.to_json(), "worker": "gpu0"},
            "tcp://b": {"environment": h200.to_json(), "worker": "gpu1"}}
    assert dist.one_environment(same) == h200
    mixed = {**same, "tcp://b": {"environment": h100.to_json(), "worker": "gpu1"}}
    with pytest.raises(PolygpuError, match="differ") as err:
        dist.one_environment(mixed)
    assert "gpu0: NVIDIA H200" in str(err.value) and "gpu1: NVIDIA H100" in str(err.value)
    driver = {**same, "tcp://b": {"environment": dataclasses.replace(
        h200, driver_version="570.1").to_json(), "worker": "gpu1"}}
    with pytest.raises(PolygpuError, match="driver 570.1"):
        dist.one_environment(driver)


class Slots(SyntheticRunner):
    """A synthetic runner with several slots: a measurement waits (2 s at most) until
    every slot is busy, so one that the tuner started alone shows; the most in flight
    at once is recorded."""

    def __init__(self, slots: int):
        super().__init__()
        self.slots, self.busy, self.most = slots, 0, 0
        self.full = threading.Condition()

    def measure(self, job):
        with self.full:
            self.busy += 1
            self.most = max(self.most, self.busy)
            self.full.notify_all()
            self.full.wait_for(lambda: self.busy >= self.slots, timeout=2.0)
        try:
            return super().measure(job)
        finally:
            with self.full:
                self.busy -= 1


def test_a_runner_of_several_slots_keeps_them_busy_with_one_writer(tmp_path):
    """Three in flight at once, each candidate measured once and recorded once, by the
    tuner's own thread."""
    params = {"n": 8192}
    options = TuneOptions(budget=9, jobs=1)
    writers = set()
    with TuningDatabase(tmp_path / "db.sqlite") as db:
        record = db.record

        def recording(**kw):
            writers.add(threading.current_thread().name)
            return record(**kw)

        db.record = recording
        three = Slots(3)
        result = tune(MV, params, three, options=options, database=db,
                      oracle=FixedResources())
        rows = db.rows()
    one = Slots(1)
    alone = tune(MV, params, one, options=options, oracle=FixedResources())
    assert three.most == 3 and one.most == 1
    assert len(three.calls) == 9 == len(set(three.calls))
    assert len(rows) == 9 and {r.measurement.key for r in rows} == set(three.calls)
    assert writers == {threading.current_thread().name}
    assert not any(c.stage == "measuring" for c in result.candidates)
    # the model's plans are timed first, in the first round, and never pruned: a
    # search of several slots, like one of one, is never slower than what compile -p
    # gives (its walk sees fewer times when it picks, so the rest may differ)
    for found in (result, alone):
        plans = [c for c in found.candidates if c.origin == "plan"]
        assert plans and all(c.measurement is not None for c in plans)
        assert found.best.score <= min(c.score for c in plans)
    assert {c.key for c in result.candidates if c.origin == "plan"} == \
        {c.key for c in alone.candidates if c.origin == "plan"}


# -- a local cluster of emulator workers --------------------------------------------------


def test_the_cluster_measures_on_every_worker(cluster, job):
    assert cluster.slots == 2
    assert cluster.environment().gpu_name == "cpu-emulator"
    m = cluster.measure(job)
    assert m.status == "ok" and m.time_ms > 0, m.reason
    assert m.extra["worker"] in ("emulator0", "emulator1")
    assert m.extra["check_error"] <= m.extra["check_threshold"]


def test_a_hanging_candidate_times_out_and_the_workers_go_on(cluster, job):
    start = time.monotonic()
    hung = cluster.measure(hanging(job, "hang"))
    assert hung.status == "timeout" and f"{TIMEOUT_S:g} s" in hung.reason, hung
    assert time.monotonic() - start < TIMEOUT_S + 30
    again = cluster.measure(job)
    assert again.status == "ok", again.reason


def test_a_stuck_worker_is_restarted_by_the_watchdog(cluster, job):
    """A job past the watchdog (here shorter than the worker's own timeout, as a worker
    that stopped answering would be) is a timeout, its worker restarted."""
    address = cluster._cluster.address
    with dist.DaskRunner(address, backend="cpu", timeout_s=600, repeats=2, warmup=0,
                         watchdog_s=5) as runner:
        m = runner.measure(hanging(job, "stuck"))
        assert m.status == "timeout" and "was restarted" in m.reason, m
        assert m.extra["restarted"]
    cluster.client.wait_for_workers(2, timeout=120)
    assert cluster.measure(job).status == "ok"


def test_a_tune_on_two_workers_records_every_row_once(cluster, tmp_path):
    """Both workers used; a worker killed while it measures loses no row: Dask runs its
    job again on a live worker, and the one writer records each measurement once."""
    pids = cluster.client.run(os.getpid)
    killed, done, over = [], [0], threading.Event()

    def killer():  # once a result is in, the first worker seen measuring is killed
        while not over.wait(0.1) and not killed:
            busy = [a for a, keys in cluster.client.processing().items()
                    if any("polygpu-measure" in str(k) for k in keys)]
            if done[0] >= 1 and busy:
                time.sleep(0.3)  # into its measurement
                os.kill(pids[busy[0]], signal.SIGKILL)
                killed.append(busy[0])

    thread = threading.Thread(target=killer)
    thread.start()
    try:  # the cluster's workers, with a timeout no loaded machine reaches
        with dist.DaskRunner(cluster._cluster.address, backend="cpu", timeout_s=300,
                             repeats=2, warmup=0) as runner, \
                TuningDatabase(tmp_path / "db.sqlite") as db:
            result = tune(MV, {"n": 96}, runner, database=db,
                          progress=lambda state: done.__setitem__(0, state.done),
                          options=TuneOptions(budget=5, check_params={"n": 37}, race=None))
            rows = db.rows()
    finally:
        over.set()
        thread.join()
    timed = [c for c in result.candidates if c.stage == "timed"]
    assert killed, "no worker was measuring after the first result came back"
    assert len(timed) == 5 == len(rows)
    assert {r.measurement.key for r in rows} == {c.key for c in timed}
    assert all(r.measurement.status == "ok" for r in rows), [r.measurement for r in rows]
    assert len({c.measurement.extra["worker"] for c in timed}) == 2
    cluster.client.wait_for_workers(2, timeout=120)


def test_the_cli_tunes_on_emulator_workers(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "polygpu", "tune", MV, "-p", "n=64", "--backend", "cpu",
         "--gpus", "0,1", "--budget", "2", "--no-db", "-o", str(out), "--check-param",
         "n=37", "--report", str(tmp_path / "report"), "-q"],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "timed on" in proc.stdout and "emulator" in proc.stdout
    assert (out / "mv.cu").exists()
    report = (tmp_path / "report" / "report.md").read_text()
    assert "Timed on" in report and "emulator" in report


@pytest.mark.parametrize("args, said", [
    (["--gpus", "x"], "'all' or GPU indices"),
    (["--gpus", "0", "--scheduler", "tcp://127.0.0.1:1"], "one of them"),
    (["--scheduler", "127.0.0.1:8786", "--backend", "cpu"], "tcp://HOST:8786"),
    (["--replay", "r.json", "--gpus", "0"], "takes no --gpus"),
])
def test_cli_mistakes_are_clear(tmp_path, args, said):
    if "--replay" in args:
        (tmp_path / "r.json").write_text("{}")
        args = [a if a != "r.json" else str(tmp_path / "r.json") for a in args]
    proc = subprocess.run(
        [sys.executable, "-m", "polygpu", "tune", MV, "-p", "n=64", "--no-db",
         "-o", str(tmp_path / "out"), *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and said in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_optimize_tunes_on_emulator_workers():
    import polygpu

    kernel = polygpu.optimize(MV, {"n": 64}, tune=True, backend="cpu", budget=2,
                              database=False, gpus=[0, 1])
    measured = [c for c in kernel.tuning.candidates if c.measurement is not None]
    assert measured and all(c.measurement.extra.get("worker", "").startswith("emulator")
                            for c in measured)
    assert kernel.origin == "tuned"


def test_a_scheduler_that_is_not_there_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(dist, "CONNECT_TIMEOUT_S", 2.0)
    with pytest.raises(PolygpuError, match="cannot connect to tcp://127.0.0.1:9"):
        dist.DaskRunner("tcp://127.0.0.1:9", backend="cpu")


def test_a_tune_killed_leaves_no_process_and_resumes_from_its_rows(tmp_path):
    """The client killed outright mid-tune: its cluster, workers and their children end
    with it (nothing spins on), the rows it wrote stay, and the same tune run again
    reuses them instead of measuring again."""
    import sqlite3

    import psutil

    db = tmp_path / "db.sqlite"
    cmd = [sys.executable, "-m", "polygpu", "tune", MV, "-p", "n=128", "--backend", "cpu",
           "--gpus", "0,1", "--budget", "4", "--db", str(db), "-o", str(tmp_path / "out"),
           "--check-param", "n=37", "-q"]

    def rows() -> set[str]:
        try:
            with sqlite3.connect(db, timeout=30) as conn:
                return {r[0] for r in conn.execute("SELECT variant FROM measurements")}
        except sqlite3.Error:
            return set()

    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not rows() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.5)
    assert proc.poll() is None, "the tune ended before a row was written"
    tree = psutil.Process(proc.pid).children(recursive=True)
    proc.kill()
    proc.wait()
    gone, alive = psutil.wait_procs(tree, timeout=60)
    for p in alive:
        p.kill()
    assert not alive, [(p.pid, p.cmdline()) for p in alive]
    first = rows()
    assert first
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    assert first < rows()  # the rows of the killed tune kept, new ones beside them
    with sqlite3.connect(db) as conn:
        total, distinct = conn.execute(
            "SELECT count(*), count(DISTINCT variant) FROM measurements").fetchone()
    assert total == distinct  # nothing measured twice: the first rows were reused


def test_a_cluster_that_cannot_start_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(sys, "executable", "/bin/false")
    with pytest.raises(PolygpuError, match=r"cannot start a local Dask cluster of 2 "
                       r"workers \(its process exited with status 1\)"):
        dist.DaskRunner(devices=("0", "1"), backend="cpu")
