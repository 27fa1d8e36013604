"""The runners: a candidate that is wrong, crashes, hangs or does not compile is isolated in
its child process, reported with its reason, and the search goes on; replayed records.

Everything runs on the CPU emulator (no GPU in CI); the GPU path shares the child process,
the statuses and the rotation count tested here.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import shutil
import time
from pathlib import Path

import pytest

from polygpu.pipeline import compile_region
from polygpu.schedule.variant import Variant
from polygpu.search.measurement import Environment, Job, Measurement, canonical
from polygpu.search.runner import (
    MAX_ROTATIONS,
    Cubin,
    ProcessRunner,
    ReplayRunner,
    _arch_matches,
    _cuda_text,
    compile_cubin,
    compile_cubins,
    default_nvcc_options,
    rotations,
)

ROOT = Path(__file__).resolve().parent.parent
MV = str(ROOT / "kernels" / "mv.c")
TIMEOUT_S = 8.0
# one thread per row, no staging: short code that is easy to break on purpose
VARIANT = Variant(tile=(32,), threads=(32,), shared=False, registers=False)


pytestmark = pytest.mark.usefixtures("private_cache")  # tests/conftest.py


@pytest.fixture(scope="module")
def job() -> Job:
    program = compile_region(MV, variant=VARIANT).program
    return Job(canonical(VARIANT.to_json()), MV, None, program, {"n": 61}, {"n": 37}, seed=7)


@pytest.fixture(scope="module")
def runner() -> ProcessRunner:
    return ProcessRunner("cpu", timeout_s=TIMEOUT_S, repeats=3, warmup=1)


def broken(job: Job, key: str, old: str, new: str) -> Job:
    """``job`` with ``old`` replaced by ``new`` in its kernel source."""
    assert old in job.program.source
    program = dataclasses.replace(job.program, source=job.program.source.replace(old, new))
    return dataclasses.replace(job, key=key, program=program)


def in_kernel(job: Job, key: str, code: str) -> Job:
    """``job`` with ``code`` run by every thread at the start of the kernel."""
    anchor = "const int tx = threadIdx.x;"
    return broken(job, key, anchor, f"{anchor}\n  {code}")


def test_good_candidate_is_ok_and_timed(runner, job):
    m = runner.measure(job)
    assert m.status == "ok", m.reason
    assert m.time_ms > 0 and len(m.times_ms) == 3 and m.score == m.time_ms
    assert m.check.endswith("ok") or ": ok" in m.check
    assert m.extra["timer"] == "cpu-wallclock" and m.extra["rotations"] == 1
    assert m.extra["check_error"] <= m.extra["check_threshold"]


def test_broken_candidates_are_isolated_and_reported(runner, job):
    # a write far out of bounds: the child dies of SIGSEGV (or, should the address be
    # mapped, the check sees the damage); either way it is reported, not raised
    far = runner.measure(in_kernel(job, "far", "x[1 << 28] = 1.0f;"))
    assert far.status in ("crash", "wrong"), far
    assert far.reason and far.score == float("inf")
    if far.status == "crash":
        assert "SIG" in far.reason

    # a write just past the end lands in the check's red zone
    near = runner.measure(in_kernel(job, "near", "if (tx == 0) x[n + 5] = 1.0f;"))
    assert near.status == "wrong" and "outside the array" in near.reason

    # a wrong result
    wrong = runner.measure(broken(job, "wrong", "] * y[", "] + y["))
    assert wrong.status == "wrong" and "WRONG" in wrong.reason and wrong.time_ms is None

    # source that does not compile: the compiler's first lines
    bad = runner.measure(in_kernel(job, "cerr", "this is not cuda;"))
    assert bad.status == "compile-error" and "error" in bad.reason

    # a kernel that never returns: killed at the timeout (volatile, so the compiler keeps
    # the loop)
    start = time.monotonic()
    hung = runner.measure(in_kernel(job, "hang", "volatile int spin = 1; while (spin) {}"))
    elapsed = time.monotonic() - start
    assert hung.status == "timeout", hung
    assert f"{TIMEOUT_S:g} s" in hung.reason
    assert TIMEOUT_S <= elapsed < TIMEOUT_S + 5

    # ... and the search goes on: the same runner still measures a good candidate
    again = runner.measure(job)
    assert again.status == "ok" and again.time_ms > 0


def test_a_warmed_runner_measures_in_the_child_it_set_up(job):
    """``warm`` spawns the serving child at once and has it set up (imports, device,
    the region); the first job is measured by that child, exactly as an unwarmed one
    would; a warm-up that fails (no such file) is ignored, and the job still runs."""
    for spec in (job.spec, "/nonexistent/region.c"):
        with ProcessRunner("cpu", timeout_s=30, repeats=2, warmup=0) as runner:
            runner.warm(spec)
            child = runner._server.proc.pid
            runner.warm(spec)  # started already: the same child
            assert runner._server.proc.pid == child and runner._server.unread == 1
            first, second = runner.measure(job), runner.measure(job)
            assert first.status == second.status == "ok", first
            assert first.extra["worker_pid"] == second.extra["worker_pid"] == child
            assert first.check == second.check and runner._server.unread == 0


def test_one_child_serves_job_after_job_and_is_replaced_after_a_crash(job):
    """The persistent child measures many jobs (set up once); a job that kills it is a
    crash with its reason and the next job gets a fresh child; ``persistent=False``
    starts one per job."""
    with ProcessRunner("cpu", timeout_s=30, repeats=2, warmup=0) as runner:
        first, second = runner.measure(job), runner.measure(job)
        assert first.status == second.status == "ok"
        assert first.extra["worker_pid"] == second.extra["worker_pid"]
        assert set(second.extra["stages_s"]) == {"setup_and_check", "timing"}
        dead = runner.measure(in_kernel(job, "trap", "__builtin_trap();"))
        assert dead.status == "crash" and "SIG" in dead.reason, dead
        after = runner.measure(job)
        assert after.status == "ok" and after.extra["worker_pid"] != first.extra["worker_pid"]
    single = ProcessRunner("cpu", timeout_s=30, repeats=2, warmup=0, persistent=False)
    one, two = single.measure(job), single.measure(job)
    assert one.status == two.status == "ok"
    assert one.extra["worker_pid"] != two.extra["worker_pid"]


def test_cutoff_stops_the_timing_and_is_recorded(job):
    m = ProcessRunner("cpu", timeout_s=30, repeats=10, warmup=0).measure(
        dataclasses.replace(job, cutoff_ms=1e-9))
    # far over the cutoff: one timed run decides (RunBudget.SURE)
    assert m.status == "ok" and len(m.times_ms) == 1 and m.extra["cut_off_ms"] == 1e-9
    full = ProcessRunner("cpu", timeout_s=30, repeats=5, warmup=0).measure(job)
    assert len(full.times_ms) == 5 and "cut_off_ms" not in full.extra


def test_bad_job_is_an_error_not_an_exception(runner, job):
    m = runner.measure(dataclasses.replace(job, key="bad-params", params={"m": 5}))
    assert m.status == "error" and "parameter" in m.reason


def test_cpu_rotation_copies_buffers(job):
    # 61x61 + 2x61 floats = 15372 bytes; a pretend 64 KB L2 asks for ceil(131072/15372) = 9
    m = ProcessRunner("cpu", timeout_s=30, repeats=2, warmup=0, l2_bytes=64 * 1024).measure(job)
    assert m.status == "ok", m.reason
    assert m.extra["bytes"] == 15372 and m.extra["rotations"] == 9
    assert m.extra["timed_runs"] == 2 == len(m.times_ms)


def test_tune_cli_time_budget():
    """``--time-budget`` reaches the runner: the default, a given one, 0 for none."""
    from polygpu.cli import tune as tune_cli
    from polygpu.search.runner import DEFAULT_BUDGET_MS

    for argv, expected in (([], DEFAULT_BUDGET_MS), (["--time-budget", "500"], 500.0),
                           (["--time-budget", "0"], None)):
        args = argparse.Namespace(replay=None, backend="cpu", timeout=30.0, repeats=None,
                                  gpus=None, scheduler=None,
                                  time_budget=float(argv[1]) if argv else None)
        assert tune_cli._runner(args).budget_ms == expected, argv


def test_runner_budget_cuts_repeats(job):
    """A budget the first runs already exceed leaves three timed runs of the asked ten."""
    m = ProcessRunner("cpu", timeout_s=30, repeats=10, warmup=0, budget_ms=1e-6).measure(job)
    assert m.status == "ok", m.reason
    assert m.extra["timed_runs"] == 3 == len(m.times_ms) and m.extra["budget_ms"] == 1e-6


def test_rotations():
    assert rotations(10 << 20, 50 << 20) == 10  # 10 MB in a 50 MB L2: 100 MB over 10 copies
    assert rotations(30 << 20, 50 << 20) == 4  # ceil(100 / 30)
    assert rotations(60 << 20, 50 << 20) == 2  # above L2, still below 2 L2
    assert rotations(100 << 20, 50 << 20) == 1  # twice L2: nothing to rotate
    assert rotations(1000, 50 << 20) == MAX_ROTATIONS  # capped
    assert rotations(0, 50 << 20) == MAX_ROTATIONS
    assert rotations(1000, 0) == 1  # no L2 known
    for total in (1, 1000, 3 << 20, 17 << 20, 49 << 20, 99 << 20):
        k = rotations(total, 50 << 20, cap=10**9)
        assert (k - 1) * total >= 50 << 20  # the other copies evict one L2 in between


def test_cubin_arch_and_version_text():
    assert _arch_matches("sm_90", 9, 0) and _arch_matches("sm_90a", 9, 0)
    assert not _arch_matches("sm_80", 9, 0) and not _arch_matches("", 9, 0)
    assert not _arch_matches("sm_900", 9, 0)
    assert _cuda_text((12, 4, 0)) == "12.4" and _cuda_text(12040) == "12.4"
    assert _cuda_text(13000) == "13.0"


@pytest.mark.skipif(importlib.util.find_spec("pycuda") is not None, reason="PyCUDA installed")
def test_gpu_backend_without_pycuda_is_reported(job):
    m = ProcessRunner("gpu", timeout_s=30).measure(job)
    assert m.status == "error" and "GpuUnavailableError" in m.reason


def test_environment_cpu():
    env = ProcessRunner("cpu").environment()
    assert env.gpu_name == "cpu-emulator" and env.compute_capability == ""
    assert env.driver_version == "" and env.polygpu_version


def test_replay_round_trip(tmp_path, job):
    env = Environment("NVIDIA H100 80GB HBM3", "9.0", "13.0", "580.65", "0.1.0")
    records = [
        Measurement(job.key, "ok", 0.125, (0.12, 0.125, 0.13), check="ok",
                    extra={"rotations": 9, "device": "NVIDIA H100 80GB HBM3"}),
        Measurement("hang", "timeout", reason="no result after 60 s"),
        Measurement("wrong", "wrong", reason="x: WRONG", extra={"check_error": float("inf")}),
    ]
    path = tmp_path / "replay.json"
    ReplayRunner.save(path, records, env)
    loaded, loaded_env = ReplayRunner.load(path)
    assert loaded_env == env and list(loaded.values()) == records

    replay = ReplayRunner(path)
    assert replay.environment() == env
    assert replay.measure(job) == records[0]
    assert replay.measure(dataclasses.replace(job, key="hang")).score == float("inf")
    unknown = replay.measure(dataclasses.replace(job, key="never"))
    assert unknown.status == "error" and unknown.reason == "no recorded measurement"
    replay.measure(job)
    assert replay.calls[job.key] == 2 and sum(replay.calls.values()) == 4

    with pytest.raises(TypeError):
        ReplayRunner({})


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_compile_cubins_in_parallel(job):
    bad = dataclasses.replace(job.program, source=job.program.source + "\nnot cuda;\n")
    good, failed = compile_cubins([job.program, bad], "sm_90", jobs=2)
    assert isinstance(good, Cubin) and good.binary.startswith(b"\x7fELF")
    assert good.resources["mv_kernel0"].registers > 0
    assert isinstance(failed, Exception) and "error" in str(failed)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_a_cubin_is_compiled_once_and_kept(job, tmp_path, monkeypatch):
    """The second compile of the same source, architecture and options is the cache's
    (no process started); anything else that changes the result compiles again."""
    import subprocess

    monkeypatch.setenv("POLYGPU_CACHE_DIR", str(tmp_path))
    first = compile_cubin(job.program, "sm_90")
    assert len(list((tmp_path / "cubins").glob("*.cubin"))) == 1
    calls = []
    real = subprocess.run

    def counting(argv, *a, **k):
        calls.append(argv)
        return real(argv, *a, **k)

    monkeypatch.setattr(subprocess, "run", counting)
    again = compile_cubin(job.program, "sm_90")
    assert calls == [] and again == first  # the same binary, report and resources
    other = compile_cubin(job.program, "sm_90", options=(*default_nvcc_options(), "-G"))
    assert len(calls) == 1 and other.binary != first.binary
    monkeypatch.setenv("NVCC_APPEND_FLAGS", "-lineinfo")
    compile_cubin(job.program, "sm_90")
    assert len(calls) == 2
    assert len(list((tmp_path / "cubins").glob("*.cubin"))) == 3


def test_tune_progress_without_a_terminal_prints_plain_lines():
    """CI logs and ``| tee``: no bar, but one line a phase and one per measurement."""
    import io

    from polygpu.cli.tune import ProgressDisplay
    from polygpu.search.tuner import Progress

    out = io.StringIO()
    with ProgressDisplay(quiet=False, stream=out) as show:
        show(Progress(phase="compile"))
        show(Progress(phase="nvcc", pruned=3))
        show(Progress(phase="measure", total=2))
        show(Progress(phase="measure", total=2, done=1, best_ms=1.5))
        show(Progress(phase="measure", total=2, done=1, best_ms=1.5))  # no change
        show(Progress(phase="measure", total=2, done=2, best_ms=1.25))
        show(Progress(phase="done", total=2, done=2, best_ms=1.25))
    lines = out.getvalue().splitlines()
    assert [line.split(":")[0].split()[0] for line in lines] == [
        "compile", "nvcc", "measure", "measured", "measured", "done"]
    assert "measured 2/2" in lines[4] and "best 1.25 ms" in lines[4]
    quiet = io.StringIO()
    with ProgressDisplay(quiet=True, stream=quiet) as show:
        show(Progress(phase="measure", total=2, done=1))
    assert quiet.getvalue() == ""


def test_an_inconclusive_check_is_an_error_not_a_wrong_candidate(job, monkeypatch):
    # inputs too ill-conditioned to tell a wrong result from rounding: not timed, but
    # not "wrong" either (which says polygpu computed something else)
    from polygpu.runtime import check
    from polygpu.runtime.device import RunBudget
    from polygpu.search.runner import _run_job

    verdict = check.CheckResult(
        ok=False, max_relative_error={"x": 1e-8, "a": 0.0, "y": 0.0}, threshold=1e-10,
        message="mv at n=37: INCONCLUSIVE: inputs too ill-conditioned for a meaningful "
        "check\n  x[3] ...", inconclusive=True)
    monkeypatch.setattr(check, "check_program", lambda *a, **k: verdict)
    m = _run_job(job, "cpu", RunBudget(1, 0), 0, {"extra": {}})
    assert m.status == "error" and m.time_ms is None and m.extra["check_inconclusive"]
    assert m.check.endswith("INCONCLUSIVE: inputs too ill-conditioned for a meaningful check")
    wrong = dataclasses.replace(verdict, inconclusive=False, message="mv at n=37: WRONG")
    monkeypatch.setattr(check, "check_program", lambda *a, **k: wrong)
    m = _run_job(job, "cpu", RunBudget(1, 0), 0, {"extra": {}})
    assert m.status == "wrong" and not m.extra["check_inconclusive"]


def test_a_hopeless_check_at_the_timed_sizes_is_given_up(job, monkeypatch):
    # the check runs the kernel first; at the timed sizes, a run over give_up_ms ends the
    # job as "slow" before the float64 reference runs (it never does), neither verified
    # nor timed, with the run's time for the search's calibration
    from polygpu.runtime import reference
    from polygpu.runtime.device import RunBudget
    from polygpu.search.runner import _run_job

    at_timed = dataclasses.replace(job, check_params=dict(job.params), give_up_ms=1e-9)
    ran = []
    real = reference.run_reference
    monkeypatch.setattr(reference, "run_reference",
                        lambda *a, **k: ran.append(1) or real(*a, **k))
    m = _run_job(at_timed, "cpu", RunBudget(3, 1), 0, {"extra": {}})
    assert m.status == "slow" and m.time_ms is None and m.score == float("inf")
    assert m.extra["check_run_ms"] > 1e-9 and "given up" in m.reason and not ran
    # the same limit where the check runs at other (smaller) sizes: checked and timed
    smaller = dataclasses.replace(job, give_up_ms=1e-9)
    m = _run_job(smaller, "cpu", RunBudget(3, 1), 0, {"extra": {}})
    assert m.status == "ok" and ran and "check_run_ms" not in m.extra
    # a run within the limit: the full check, then the timing
    ran.clear()
    m = _run_job(dataclasses.replace(at_timed, give_up_ms=1e9), "cpu", RunBudget(3, 1), 0,
                 {"extra": {}})
    assert m.status == "ok" and ran and len(m.times_ms) == 3
    # a serving child keeps serving after a slow verdict (a clean one)
    runner = ProcessRunner("cpu", timeout_s=30, repeats=2, warmup=0)
    try:
        one = runner.measure(at_timed)
        two = runner.measure(job)
    finally:
        runner.close()
    assert one.status == "slow" and two.status == "ok"
    assert one.extra["worker_pid"] == two.extra["worker_pid"]


def test_a_serving_child_times_every_job_on_copies_of_one_input_set(job, monkeypatch):
    """The timed runs' inputs are the job's seeded random values; a serving child makes
    them once and hands each job a copy (runs leave results in the arrays), a new set
    for other sizes or another seed; a one-job child makes them afresh."""
    import numpy as np

    from polygpu.frontend import load
    from polygpu.runtime import inputs
    from polygpu.search import runner as runner_module

    source = load(job.spec, job.function, job.defines, job.include_dirs)
    ints = inputs.integer_parameters(source, job.params)
    fresh = inputs.random_values(source, ints, inputs.array_shapes(source, ints),
                                 np.random.default_rng(job.seed))
    made = []
    real = inputs.random_values
    monkeypatch.setattr(inputs, "random_values", lambda *a, **k: made.append(1) or real(*a, **k))
    monkeypatch.setattr(runner_module, "_KEPT", {})
    first = runner_module._timing_values(job, source, ints)
    first["a"][:] = -1.0  # what a run leaves behind
    second = runner_module._timing_values(job, source, ints)
    assert len(made) == 1 and np.array_equal(second["a"], fresh["a"])
    assert all(np.array_equal(second[n], v) for n, v in fresh.items()
               if isinstance(v, np.ndarray))
    other = runner_module._timing_values(dataclasses.replace(job, seed=8), source, ints)
    assert len(made) == 2 and not np.array_equal(other["a"], fresh["a"])
    monkeypatch.setattr(runner_module, "_KEPT", None)
    runner_module._timing_values(job, source, ints)
    assert len(made) == 3


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie -- exited, not yet reaped -- does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_a_serving_child_ends_with_its_parent_even_in_a_hanging_job(job, tmp_path):
    """A parent killed outright (a Dask worker restarted, a tune killed) takes its
    serving child along, even one spinning in a kernel that never returns: the child
    lives in a session of its own (so a timeout can kill it whole), and would spin on."""
    import os
    import pickle
    import signal
    import subprocess
    import sys

    hung = in_kernel(job, "hang", "volatile int spin = 1; while (spin) {}")
    (tmp_path / "job.pkl").write_bytes(pickle.dumps(hung))
    script = tmp_path / "parent.py"
    script.write_text(
        "import pickle, threading, time\n"
        "from polygpu.search.runner import ProcessRunner\n"
        f"job = pickle.loads(open({str(tmp_path / 'job.pkl')!r}, 'rb').read())\n"
        "runner = ProcessRunner('cpu', timeout_s=600, repeats=2, warmup=0)\n"
        "threading.Thread(target=runner.measure, args=(job,), daemon=True).start()\n"
        "while runner._server is None:\n"
        "    time.sleep(0.05)\n"
        "print(runner._server.proc.pid, flush=True)\n"
        "time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                              text=True, cwd=ROOT)
    child = int(parent.stdout.readline())
    time.sleep(5)  # into its job: compiled, checking (spinning)
    assert _alive(child)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 15
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _alive(child):
        os.kill(child, signal.SIGKILL)
        raise AssertionError(f"the serving child {child} outlived its parent")
