"""Runners: measure candidates in a child process (GPU or CPU emulator), or replay records.

:class:`ProcessRunner` runs jobs in a child process (``python -m polygpu.search.runner``,
its own session and process group), so nothing a candidate does can take the search
down: a segfault, an illegal address that poisons the CUDA context, or a kernel that
never returns ends the child, not the parent, and comes back as a
:class:`~polygpu.search.measurement.Measurement` with status ``crash`` or ``timeout``.
The parent never imports PyCUDA, never creates a CUDA context and never forks one.
By default one child serves job after job (``--serve``: Python, the region's model and
the CUDA context are set up once, not per candidate -- seconds of a one-minute tune) and
is replaced after any job that did not end ``ok``, ``wrong`` or ``compile-error`` (a
crash, a timeout, a runner error: whatever could have left its context or memory in
doubt); ``persistent=False`` starts a fresh child per job.

In the child, a job is

1. compiled (``compile-error`` with nvcc's or g++'s first lines);
2. checked against the sequential reference at ``job.check_params``
   (:func:`polygpu.runtime.check.check_program`, poisoned outputs and red zones), every
   time, nothing of another job's check reused (a serving child keeps only the region's
   parsed model, by the file's size and time, and its device): a wrong candidate
   (``wrong``) is never timed, so it can never win;
3. timed at ``job.params`` on fresh random inputs.  GPU: CUDA events around all launches
   of one run, ``warmup`` untimed runs then ``repeats`` timed ones, the median; runs stop
   early once they add up to ``budget_ms`` (at least three timed:
   :class:`~polygpu.runtime.device.RunBudget`), ``extra["timed_runs"]`` says how many ran.
   When the
   program's arrays total less than twice the L2 cache, ``rotations()`` copies of them are
   made and used in turn, so every run starts with the data out of L2, as it is when the
   kernel runs on inputs of realistic size; ``extra["rotations"]`` records the count.
   CPU: ``time.perf_counter`` around the emulator (only for tests and CI:
   ``extra["timer"] == "cpu-wallclock"``).  A job with ``launch_times`` is timed through
   the device layer's ``time_launches`` instead: the same runs, each broken down by
   launch, and ``extra["launch_ms"]`` holds each launch's median.

Check and timing go through the device layer (:mod:`polygpu.runtime.device`), the same
code the API launches with.  On the GPU the child runs the exact binary it checks:
``job.cubin`` through ``module_from_buffer`` when its ``job.arch`` is the device's, else the
source compiled as the device layer compiles it; either way the module is installed on the
child's :class:`~polygpu.runtime.device.GpuDevice` (``use_module``), so the check
(``check_program(backend=device)``) and the timing both launch it.

:func:`compile_cubins` compiles many candidates in parallel with nvcc (no GPU needed) and
returns each one's cubin and ptxas resources, so the search can prune on occupancy and hand
the binaries to the runner; each cubin is kept in the build cache (``cubins/``) under a
hash of all that makes it, so a tune run again, resumed, or at other sizes whose code is
the same does not wait for nvcc again.  :class:`ReplayRunner` returns recorded
measurements: it drives the search in CI, where there is no GPU; :class:`SyntheticRunner`
returns times from a formula, to measure the search's own cost and to test it at sizes
nothing could run.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import json
import math
import os
import pickle
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import polygpu
from polygpu.codegen.program import KernelProgram
from polygpu.errors import PolygpuError
from polygpu.runtime import grid
from polygpu.runtime.compiler import (
    CompileError,
    cache_dir,
    mark_used,
    source_hash,
    usable_cpus,
    write_atomically,
)
from polygpu.runtime.device import RunBudget
from polygpu.search.measurement import Closing, Environment, Job, Measurement, Runner
from polygpu.search.occupancy import Resources, parse_ptxas

__all__ = [
    "Cubin", "ProcessRunner", "ReplayRunner", "Runner", "SyntheticRunner", "compile_cubin",
    "compile_cubins", "rotations",
]

MAX_ROTATIONS = 64
_ROOT = Path(polygpu.__file__).resolve().parent.parent  # what the child needs on sys.path
_REASON_LINES = 20  # lines of compiler output or stderr kept in a reason
_DEFAULTS = {"gpu": (20, 3), "cpu": (3, 1)}  # backend -> (repeats, warmup)
# milliseconds of timed runs per candidate beyond which fewer than ``repeats`` are taken:
# a second of runs fixes the median of a slow candidate as well as 20 runs do (a 100 ms
# host-stepped stencil: 10 runs, spread under 1 % on the H100), and a one-minute tune
# of ten such candidates cannot afford more
DEFAULT_BUDGET_MS = 1000.0
# CUDA errors that mean the kernel faulted (an error of the candidate, not of the runner)
_GPU_FAULT = re.compile(r"illegal|misaligned|launch fail|unspecified launch|exception|trap"
                        r"|address space|cuCtxSynchronize|cuMemcpy|cuEvent"
                        r"|hardware stack|launch timeout|timed out|out of resources", re.I)


def rotations(total_bytes: int, l2_bytes: int, cap: int = MAX_ROTATIONS) -> int:
    """How many copies of a program's arrays to rotate through so each run starts with a
    cold L2: ``ceil(2 * L2 / bytes)`` (capped) when they total less than twice the L2,
    else 1.  With k copies, the k - 1 others touched between two uses of one copy total at
    least one L2 (2 L2 - bytes when bytes <= L2, bytes itself otherwise).  The cap bounds
    set-up time for tiny problems (under 2 L2 / cap bytes), which then run partly warm."""
    if l2_bytes <= 0 or total_bytes >= 2 * l2_bytes:
        return 1
    return max(1, min(cap, math.ceil(2 * l2_bytes / max(total_bytes, 1))))


# --------------------------------------------------------------------------------------
# Parallel nvcc
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cubin:
    """One candidate compiled for one architecture: the binary and ptxas' report
    (``binary`` None: resources from a rule, no compiler -- the runner compiles)."""

    binary: bytes | None
    arch: str
    resources: Mapping[str, Resources]  # per kernel (C linkage names)
    log: str  # nvcc's output (the ptxas -v report)


def _nvcc() -> str:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise PolygpuError("nvcc not found on PATH: it is needed to compile candidates")
    return nvcc


def default_nvcc_options() -> tuple[str, ...]:
    """The options :mod:`polygpu.runtime.gpu` compiles with, so a cubin made here is the
    code the GPU backend would run."""
    from polygpu.runtime.device import nvcc_options

    return ("-std=c++17", *nvcc_options())


def compile_cubin(source: str | KernelProgram, arch: str,
                  options: Sequence[str] | None = None) -> Cubin:
    """Compile one candidate (a KernelProgram or its CUDA text) to a cubin for ``arch``;
    :class:`CompileError` with nvcc's first lines if it does not compile."""
    from polygpu.runtime.device import device_source

    text = device_source(source)  # C linkage for the kernels, as the device layer does
    opts = default_nvcc_options() if options is None else tuple(options)
    nvcc = _nvcc()
    key = source_hash(*_nvcc_identity(nvcc), arch, *opts, *(
        os.environ.get(v, "") for v in ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS")), text)
    kept = _kept_cubin(key, arch)
    if kept is not None:
        return kept
    with tempfile.TemporaryDirectory(prefix="polygpu-cubin-") as tmp:
        cu, out = Path(tmp) / "kernels.cu", Path(tmp) / "kernels.cubin"
        cu.write_text(text)
        result = subprocess.run(
            [nvcc, f"-arch={arch}", "-cubin", "-Xptxas", "-v", *opts, "-o", str(out), str(cu)],
            capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"},
        )
        if result.returncode != 0 or not out.exists():
            raise CompileError(f"nvcc cannot compile the program for {arch}:\n"
                               + _head(result.stderr or result.stdout))
        binary = out.read_bytes()
    _keep_cubin(key, binary, result.stderr)
    return Cubin(binary, arch, parse_ptxas(result.stderr), result.stderr)


@functools.cache
def _nvcc_identity(nvcc: str) -> tuple[str, str]:
    """nvcc's path and its whole ``--version`` text (its first line names no release)."""
    return nvcc, subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout


def _cubin_paths(key: str) -> tuple[Path, Path]:
    folder = cache_dir() / "cubins"
    folder.mkdir(exist_ok=True)
    return folder / f"{key}.cubin", folder / f"{key}.log"


def _kept_cubin(key: str, arch: str) -> Cubin | None:
    """The cubin compiled before under ``key`` (nvcc, its version, the architecture, the
    options and the whole source), with its ptxas report; None if there is none or the
    cache cannot be read (then nvcc runs)."""
    try:
        binary_path, log_path = _cubin_paths(key)
        log = log_path.read_text()  # written before the binary: both, or no entry
        binary = binary_path.read_bytes()
    except (OSError, PolygpuError):
        return None
    mark_used(log_path)  # (the pruning's recency: runtime/compiler.py)
    mark_used(binary_path)
    return Cubin(binary, arch, parse_ptxas(log), log)


def _keep_cubin(key: str, binary: bytes, log: str) -> None:
    """Into the cache, each file through a private name and a rename (a parallel tune
    may read the entry meanwhile); a cache that cannot be written keeps nothing."""
    try:
        binary_path, log_path = _cubin_paths(key)
        write_atomically(log_path, log)  # first: a binary there means both are
        write_atomically(binary_path, binary)
    except (OSError, PolygpuError):
        pass


def compile_cubins(sources: Sequence[str | KernelProgram], arch: str, jobs: int | None = None,
                   options: Sequence[str] | None = None) -> list[Cubin | Exception]:
    """Compile many candidates at once (nvcc processes on ``jobs`` threads, default one per
    CPU); per source, in order, its :class:`Cubin` or the exception that stopped it."""
    _nvcc()  # a missing nvcc is the caller's problem, not every candidate's
    if options is None:
        options = default_nvcc_options()
    workers = max(1, min(jobs or usable_cpus(), len(sources) or 1))

    def one(src):
        try:
            return compile_cubin(src, arch, options)
        except Exception as e:  # a bad candidate is a result, not a failure of the batch
            return e

    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, sources))


# --------------------------------------------------------------------------------------
# The parent side
# --------------------------------------------------------------------------------------


class ProcessRunner(Closing):
    """Measures each job in a fresh child process (see the module docstring).

    ``backend`` is "gpu" (PyCUDA, CUDA events) or "cpu" (the emulator, wall clock).
    ``repeats``/``warmup`` default to 20/3 on the GPU and 3/1 on the CPU, cut short once
    the timed runs add up to ``budget_ms`` (None: never; see
    :class:`~polygpu.runtime.device.RunBudget`).  ``l2_bytes``
    overrides the device's L2 size for the rotation count (on the CPU, rotation happens
    only when it is given).  ``timeout_s`` bounds the whole child: compile, check, timing.
    ``device``: the CUDA device index the children measure on.  ``persistent``: one child
    serves many jobs (see the module docstring); :meth:`close` (or ``with``) ends it, and
    it ends by itself when the parent exits.
    """

    def __init__(self, backend: str = "gpu", timeout_s: float = 60.0, repeats: int | None = None,
                 warmup: int | None = None, l2_bytes: int | None = None, device: int = 0,
                 budget_ms: float | None = DEFAULT_BUDGET_MS, persistent: bool = True):
        if backend not in _DEFAULTS:
            raise ValueError(f"unknown backend {backend!r} (gpu or cpu)")
        self.backend = backend
        self.timeout_s = timeout_s
        self.repeats = _DEFAULTS[backend][0] if repeats is None else repeats
        self.warmup = _DEFAULTS[backend][1] if warmup is None else warmup
        self.l2_bytes = l2_bytes
        self.device = device
        self.budget_ms = budget_ms
        self.persistent = persistent
        self._environment: Environment | None = None
        self._server: _Server | None = None

    def close(self) -> None:
        """End the serving child, if any (a later job starts another)."""
        if self._server is not None:
            self._server.kill()
            self._server = None

    def warm(self, spec: str, function: str | None = None, defines: Sequence[str] = (),
             include_dirs: Sequence[str] = ()) -> None:
        """Start the serving child now and have it import what a job needs, open the
        device and parse ``spec``'s region while the caller goes on (a tune costs and
        builds its first candidate meanwhile): the first job's child otherwise spends
        seconds on them before its check.  A failure here is left for the first job to
        meet and report."""
        if not self.persistent or self._server is not None:
            return
        self._server = _Server(self.backend)
        self._server.warm({"backend": self.backend, "device": self.device, "spec": spec,
                           "function": function, "defines": list(defines),
                           "include_dirs": list(include_dirs)})

    def environment(self) -> Environment:
        """Where this runner measures; asked of a child once (the parent never opens a
        CUDA context), then cached.  Raises when the backend cannot be used at all."""
        if self._environment is None:
            with tempfile.TemporaryDirectory(prefix="polygpu-env-") as tmp:
                out = Path(tmp) / "environment.json"
                rc, timed_out, log = self._spawn(
                    ["--environment", self.backend, str(out), str(self.device)], Path(tmp),
                    self.timeout_s)
                if timed_out or rc != 0 or not out.exists():
                    why = "timed out" if timed_out else _exit_text(rc)
                    raise PolygpuError(f"cannot query the {self.backend} environment ({why}):\n"
                                       + _tail(log))
                self._environment = Environment(**json.loads(out.read_text()))
        return self._environment

    def measure(self, job: Job) -> Measurement:
        """The job's measurement; never raises for a bad candidate (or a bad job)."""
        start = time.monotonic()
        try:
            m = self._measure(job)
        except Exception as e:  # the runner's own trouble still must not stop the search
            m = Measurement(job.key, "error", reason=f"runner: {type(e).__name__}: {e}")
        extra = {**m.extra, "wall_s": round(time.monotonic() - start, 3)}
        return dataclasses.replace(m, extra=extra)

    def _measure(self, job: Job) -> Measurement:
        with tempfile.TemporaryDirectory(prefix="polygpu-job-") as tmp:
            directory = Path(tmp)
            # plain dicts: a mappingproxy (or any exotic Mapping) does not pickle
            job = dataclasses.replace(job, params=dict(job.params),
                                      check_params=dict(job.check_params))
            task = {"job": job, "backend": self.backend, "repeats": self.repeats,
                    "warmup": self.warmup, "l2_bytes": self.l2_bytes, "device": self.device,
                    "budget_ms": self.budget_ms}
            (directory / "job.pkl").write_bytes(pickle.dumps(task))
            if self.persistent:
                return self._served(job, directory)
            rc, timed_out, log = self._spawn([str(directory)], directory, self.timeout_s)
            result = _read_result(directory / "result.pkl")
        if result is not None:
            return result
        return self._failed(job, timed_out, rc, log)

    def _served(self, job: Job, directory: Path) -> Measurement:
        """The job measured by the serving child (started now if there is none); the
        child replaced after anything but a clean verdict."""
        if self._server is None:
            self._server = _Server(self.backend)
        server = self._server
        start = server.log_size()
        outcome = server.run(directory, self.timeout_s)
        result = _read_result(directory / "result.pkl") if outcome == "done" else None
        if result is not None and result.status in _CLEAN:
            return result
        log = server.log_since(start)
        rc = server.returncode() if outcome == "died" else None
        self.close()  # its context or memory may be in doubt: the next job starts afresh
        return result if result is not None else \
            self._failed(job, outcome == "timeout", rc, log)

    def _failed(self, job: Job, timed_out: bool, rc: int | None, log: str) -> Measurement:
        if timed_out:
            return Measurement(job.key, "timeout", reason=(
                f"no result after {self.timeout_s:g} s (compile, check, {self.warmup} warm-up "
                f"and {self.repeats} timed runs); the child was killed"),
                extra={"timeout_s": self.timeout_s})
        return Measurement(job.key, "crash", reason=f"the child {_exit_text(rc)} without a "
                           f"result; its output ends:\n{_tail(log)}",
                           extra={"exit_code": rc})


    def _spawn(self, args: list[str], directory: Path, timeout: float) -> tuple[int, bool, str]:
        """Run the child in its own session; on timeout kill its whole process group (the
        emulator's threads, a compiler it started).  (exit code, timed out, its output)."""
        env = _child_env()
        log = directory / "output.txt"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-X", "faulthandler", "-m", "polygpu.search.runner", *args],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                start_new_session=True,
            )
            timed_out = False
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                # the child is not yet reaped here, so its group id is still ours to kill
                if proc.returncode is None:
                    try:
                        os.killpg(proc.pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    proc.wait()
        return proc.returncode, timed_out, log.read_text(errors="replace")


# statuses after which a serving child goes on to the next job: the candidate ran to a
# verdict in an intact process (a wrong result is seen by the check, in red-zoned
# buffers that are freed after it)
_CLEAN = frozenset({"ok", "wrong", "compile-error", "slow"})


class _Server:
    """The parent's handle on a serving child: job directories go down one pipe, one
    line per job, and come back up another when the child has written the result."""

    def __init__(self, backend: str):
        self.directory = Path(tempfile.mkdtemp(prefix=f"polygpu-{backend}-serve-"))
        self.log = self.directory / "output.txt"
        job_r, self.jobs = os.pipe()
        self.done, done_w = os.pipe()
        try:
            with open(self.log, "wb") as out:
                self.proc = subprocess.Popen(
                    [sys.executable, "-X", "faulthandler", "-m", "polygpu.search.runner",
                     "--serve", str(job_r), str(done_w)],
                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    env=_child_env(), start_new_session=True, pass_fds=(job_r, done_w))
        except BaseException:
            for fd in (self.jobs, self.done):
                os.close(fd)
            raise
        finally:
            os.close(job_r)
            os.close(done_w)
        self._buffer = b""
        self.unread = 0  # replies to warm-up lines, read before the next job's

    def warm(self, what: Mapping) -> None:
        """One ``#warm`` line: the child prepares ``what`` (see :func:`_warm`)."""
        try:
            os.write(self.jobs, f"{_WARM} {json.dumps(what)}\n".encode())
            self.unread += 1
        except OSError:
            pass  # the first job finds the child dead

    def log_size(self) -> int:
        try:
            return self.log.stat().st_size
        except OSError:
            return 0

    def log_since(self, offset: int) -> str:
        try:
            with open(self.log, "rb") as f:
                f.seek(offset)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def run(self, directory: Path, timeout: float) -> str:
        """"done", "timeout" or "died" (the child exited, or closed its pipe)."""
        try:
            os.write(self.jobs, f"{directory}\n".encode())
        except OSError:
            return "died"
        deadline = time.monotonic() + timeout
        while self._buffer.count(b"\n") <= self.unread:
            left = deadline - time.monotonic()
            if left <= 0:
                return "timeout"
            ready, _, _ = select.select([self.done], [], [], left)
            if ready:
                chunk = os.read(self.done, 4096)
                if not chunk:
                    return "died"
                self._buffer += chunk
        for _ in range(self.unread + 1):
            _, _, self._buffer = self._buffer.partition(b"\n")
        self.unread = 0
        return "done"

    def returncode(self) -> int | None:
        try:
            return self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        """The child's whole process group killed, the pipes closed, its files gone."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        for fd in (self.jobs, self.done):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.directory, ignore_errors=True)


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(_ROOT), env.get("PYTHONPATH", "")) if p)
    return env

def _read_result(path: Path) -> Measurement | None:
    try:
        result = pickle.loads(path.read_bytes())
    except Exception:  # absent, or cut short by a kill
        return None
    return result if isinstance(result, Measurement) else None


def _exit_text(rc: int | None) -> str:
    if rc is not None and rc < 0:
        try:
            return f"was killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"was killed by signal {-rc}"
    return f"exited with status {rc}"


def _head(text: str, lines: int = _REASON_LINES) -> str:
    return "\n".join(text.strip().splitlines()[:lines])


def _tail(text: str, lines: int = _REASON_LINES) -> str:
    return "\n".join(text.strip().splitlines()[-lines:]) or "(no output)"


# --------------------------------------------------------------------------------------
# The replay runner
# --------------------------------------------------------------------------------------

REPLAY_FORMAT = "polygpu-replay"


class ReplayRunner:
    """Returns recorded measurements by ``job.key`` (status "error" for a key never
    recorded): lets the search run in CI exactly as it ran on the GPU, without one.
    ``calls`` counts measure() calls per key."""

    def __init__(self, records: Mapping[str, Measurement] | str | os.PathLike,
                 env: Environment | None = None):
        if isinstance(records, str | os.PathLike):
            records, recorded_env = ReplayRunner.load(records)
            env = env or recorded_env
        elif env is None:
            raise TypeError("ReplayRunner: give the environment the records were taken in")
        self.records = dict(records)
        self.env = env
        self.calls: Counter[str] = Counter()

    def environment(self) -> Environment:
        return self.env

    def measure(self, job: Job) -> Measurement:
        self.calls[job.key] += 1
        found = self.records.get(job.key)
        if found is None:
            return Measurement(job.key, "error", reason="no recorded measurement")
        return found

    @staticmethod
    def save(path: str | os.PathLike, measurements: Mapping[str, Measurement]
             | Iterable[Measurement], env: Environment) -> None:
        """Write ``measurements`` (and the environment they were taken in) as JSON."""
        items = measurements.values() if isinstance(measurements, Mapping) else measurements
        data = {"format": REPLAY_FORMAT, "version": 1, "environment": env.to_json(),
                "measurements": [measurement_to_json(m) for m in items]}
        Path(path).write_text(json.dumps(data, indent=1, default=_plain) + "\n")

    @staticmethod
    def load(path: str | os.PathLike) -> tuple[dict[str, Measurement], Environment]:
        data = json.loads(Path(path).read_text())
        if data.get("format") != REPLAY_FORMAT:
            raise PolygpuError(f"{path}: not a {REPLAY_FORMAT} file")
        records = {}
        for item in data["measurements"]:
            m = measurement_from_json(item)
            records[m.key] = m
        return records, Environment(**data["environment"])


SYNTHETIC_ENV = Environment("synthetic device", "", "", "", polygpu.__version__)


def _unit(*parts) -> float:
    """A pseudo-random number in [0, 1) drawn from ``parts`` (the same every run)."""
    import hashlib

    text = json.dumps(parts, sort_keys=True, default=str)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") / 2**64


class SyntheticRunner:
    """A measuring device without a device: times from a formula, never running the
    code.  What the search does besides timing (costing, code generation, ptxas, its
    bookkeeping) is then all that costs, so this measures the search itself
    (``tuning/search_cpu.py``) and drives tests at sizes no emulator could run.

    ``launch_ms(job, k)`` gives launch ``k``'s milliseconds (default: a pseudo-random
    number in [1, 2) drawn from kernel ``k``'s own merged variant, so a kernel's time
    does not depend on its neighbours, as on a GPU to first order); a run is the sum of
    its launches, reported with the breakdown when the job asks for it, or a check
    given up (``slow``) where the child's would be (``Job.give_up_ms``).  ``calls``
    lists the keys measured, in order."""

    def __init__(self, launch_ms=None, env: Environment = SYNTHETIC_ENV):
        self.launch_ms = launch_ms or self._default
        self.env = env
        self.calls: list[str] = []

    @staticmethod
    def _default(job: Job, k: int) -> float:
        from polygpu.schedule.variant import Variant

        v = Variant.from_json(job.key)
        return 1.0 + _unit(k, v.for_kernel(k).to_json())

    def environment(self) -> Environment:
        return self.env

    def measure(self, job: Job) -> Measurement:
        self.calls.append(job.key)
        per = [float(self.launch_ms(job, k)) for k in range(len(job.program.launches))]
        total = sum(per)
        give_up = job.check_give_up_ms
        if give_up is not None and total > give_up:  # as the child's check gives up
            return Measurement(job.key, "slow", reason="synthetic: given up",
                               extra={"check_run_ms": total})
        extra = {"launch_ms": per} if job.launch_times else {}
        return Measurement(job.key, "ok", time_ms=total, times_ms=(total,),
                           check="synthetic: not run", extra=extra)


def measurement_to_json(m: Measurement) -> dict:
    return {"key": m.key, "status": m.status, "time_ms": m.time_ms,
            "times_ms": list(m.times_ms), "reason": m.reason, "check": m.check,
            "extra": dict(m.extra)}


def measurement_from_json(d: Mapping) -> Measurement:
    return Measurement(key=d["key"], status=d["status"], time_ms=d.get("time_ms"),
                       times_ms=tuple(d.get("times_ms", ())), reason=d.get("reason", ""),
                       check=d.get("check", ""), extra=dict(d.get("extra", {})))


def _plain(o):
    """JSON for what json does not know (numpy scalars, tuples of them)."""
    return o.item() if hasattr(o, "item") else str(o)


# --------------------------------------------------------------------------------------
# The child side
# --------------------------------------------------------------------------------------


def run_job(job: Job, backend: str, repeats: int, warmup: int,
            l2_bytes: int | None = None, device: int = 0,
            budget_ms: float | None = None) -> Measurement:
    """Compile, check and time ``job`` in *this* process, every failure turned into its
    status.  The child's body; call it directly only where a crash may take you down.
    ``device``: the CUDA device index (GPU backend); ``budget_ms``: see
    :class:`~polygpu.runtime.device.RunBudget`."""
    state: dict[str, object] = {"check": "", "extra": {}}
    try:
        return _run_job(job, backend, RunBudget(repeats, warmup, budget_ms, job.cutoff_ms),
                        l2_bytes, state, device)
    except CompileError as e:
        status, reason = "compile-error", _head(str(e))
    except Exception as e:
        from polygpu.runtime.grid import LaunchError

        fault = isinstance(e, LaunchError) or (_is_pycuda_error(e) and _GPU_FAULT.search(str(e)))
        status, reason = ("crash" if fault else "error"), f"{type(e).__name__}: {e}"
    return Measurement(job.key, status, reason=reason, check=str(state["check"]),
                       extra=dict(state["extra"]))


def _is_pycuda_error(e: Exception) -> bool:
    return type(e).__module__.startswith("pycuda")


def _run_job(job, backend, budget, l2_bytes, state, index=0) -> Measurement:
    from polygpu.runtime import inputs
    from polygpu.runtime.check import CheckAbandoned, check_program
    from polygpu.runtime.device import CpuEmulator

    extra = state["extra"]
    extra["worker_pid"] = os.getpid()  # which child measured it (a serving one: many)
    started = time.perf_counter()
    source, scop = _kept_region(job.spec, job.function, job.defines, job.include_dirs)
    # compile first, so a compiler error is reported as one, not as a failed check
    if backend == "gpu":
        device = _kept_gpu(index)
        _install_gpu_module(job, extra, device)
    else:
        device = CpuEmulator()
        device.load(job.program)

    checked = job.check_program or job.program
    # a check at the timed sizes runs what would be timed: give it up where that run
    # alone shows the candidate hopeless (Job.check_give_up_ms)
    try:
        result = check_program(checked, scop, job.spec, job.check_params, backend=device,
                               seed=job.seed, defines=job.defines,
                               include_dirs=job.include_dirs, scalars=job.scalars,
                               give_up_ms=job.check_give_up_ms)
    except CheckAbandoned as e:
        extra["check_run_ms"] = e.took_ms
        extra["stages_s"] = {"setup_and_check": round(time.perf_counter() - started, 3)}
        return Measurement(job.key, "slow", reason=f"not verified, not timed: {e}",
                           extra=extra)
    checked_at = time.perf_counter()
    state["check"] = result.message.splitlines()[0]
    extra["check_error"] = max(result.max_relative_error.values(), default=0.0)
    extra["check_threshold"] = result.threshold
    if not result.ok:
        # inconclusive (inputs too ill-conditioned to tell a wrong result from rounding)
        # is not "wrong", which says polygpu computed something else: an unverified
        # candidate, not timed, recorded as an error with the check's account
        extra["check_inconclusive"] = result.inconclusive
        return Measurement(job.key, "error" if result.inconclusive else "wrong",
                           reason=result.message, check=state["check"], extra=extra)

    import numpy as np

    ints = inputs.integer_parameters(source, job.params)
    values = _timing_values(job, source, ints)
    total = sum(v.nbytes for v in values.values() if isinstance(v, np.ndarray))
    extra["bytes"] = total
    extra["blocks"] = grid.launch_blocks(job.program, ints)
    timer = _time_gpu if backend == "gpu" else _time_cpu
    times = timer(job.program, values, total, budget, l2_bytes, device, extra, job.launch_times)
    extra["timed_runs"] = len(times)
    # where the child's time went (the time to start it is the job's wall_s minus these)
    extra["stages_s"] = {"setup_and_check": round(checked_at - started, 3),
                         "timing": round(time.perf_counter() - checked_at, 3)}
    return Measurement(job.key, "ok", time_ms=statistics.median(times), times_ms=tuple(times),
                       check=state["check"], extra=extra)


# what a serving child keeps between jobs (None in a one-job child: nothing to keep)
_KEPT: dict | None = None
# inputs up to this many bytes are kept between jobs (a copy handed to each)
KEPT_INPUT_BYTES = 2 << 30


def _timing_values(job: Job, source, ints: Mapping[str, int]) -> dict[str, object]:
    """The timed runs' inputs: random values from the job's seed, as
    :func:`~polygpu.runtime.inputs.random_values` makes them.  A serving child keeps the
    last set (up to :data:`KEPT_INPUT_BYTES`) and hands each job a copy: every candidate
    of a tune is timed on the same values, and making them took 0.34 s a candidate for
    Floyd-Warshall at n = 5600 (31 M random integers), a copy 0.03 s.  A copy, because
    the runs leave their results in the arrays."""
    import numpy as np

    from polygpu.runtime import inputs

    def make():
        shapes = inputs.array_shapes(source, ints)
        return inputs.random_values(source, ints, shapes, np.random.default_rng(job.seed),
                                    scalars=job.scalars)

    key = ("inputs", job.spec, job.function, job.defines, job.include_dirs, _stamp(job.spec),
           tuple(sorted(ints.items())), job.seed, tuple(sorted((job.scalars or {}).items())))
    if _KEPT is None:
        return make()
    kept = _KEPT.get("inputs")
    if kept is None or kept[0] != key:
        _KEPT.pop("inputs", None)  # one set at a time: the old one freed first
        values = make()
        if sum(v.nbytes for v in values.values() if isinstance(v, np.ndarray)) \
                > KEPT_INPUT_BYTES:
            return values
        kept = (key, values)
        _KEPT["inputs"] = kept
    return {n: (v.copy() if isinstance(v, np.ndarray) else v) for n, v in kept[1].items()}


def _kept(key, make):
    """``make()``, kept under ``key`` while this child serves jobs."""
    if _KEPT is None:
        return make()
    if key not in _KEPT:
        _KEPT[key] = make()
    return _KEPT[key]


def _stamp(spec: str) -> tuple:
    """The region file's size and modification time: an edit between two jobs is seen."""
    try:
        st = os.stat(spec.split(":")[0] if not os.path.exists(spec) else spec)
        return st.st_size, st.st_mtime_ns
    except OSError:
        return ()


def _kept_region(spec: str, function: str | None, defines: tuple[str, ...],
                 include_dirs: tuple[str, ...]):
    """The region's source and model, kept while this child serves jobs (keyed by the
    file's size and time too: an edit between two jobs is seen)."""
    from polygpu.frontend import load
    from polygpu.model.build import build_scop

    def make():
        source = load(spec, function, defines, include_dirs)
        return source, build_scop(source)

    return _kept(("region", spec, function, tuple(defines), tuple(include_dirs),
                  _stamp(spec)), make)


def _kept_gpu(index: int):
    """The :class:`~polygpu.runtime.device.GpuDevice` of CUDA device ``index``, kept
    (its context) while this child serves jobs."""
    from polygpu.runtime.device import GpuDevice

    return _kept(("gpu", index), lambda: GpuDevice(index))


def _rotated(values: Mapping[str, object], k: int) -> list[dict[str, object]]:
    """``k`` argument sets: the given arrays, then independent copies of them."""
    import numpy as np

    first = dict(values)
    return [first] + [{n: (v.copy() if isinstance(v, np.ndarray) else v)
                       for n, v in first.items()} for _ in range(k - 1)]


def _time_cpu(program, values, total, budget, l2_bytes, device, extra,
              by_launch: bool = False) -> list[float]:
    k = rotations(total, l2_bytes) if l2_bytes else 1
    extra.update(rotations=k, timer="cpu-wallclock", device="cpu-emulator")
    return _timed(device, program, _rotated(values, k), budget, extra, by_launch)


def _timed(device, program, value_sets, budget: RunBudget, extra, by_launch: bool
           ) -> list[float]:
    """The runs' times; with ``by_launch`` through ``time_launches``, each launch's
    median in ``extra["launch_ms"]``."""
    if budget.budget_ms is not None:
        extra["budget_ms"] = budget.budget_ms
    cutoff = {} if budget.cutoff_ms is None else {"cutoff_ms": budget.cutoff_ms}
    if not by_launch:
        times = device.time(program, value_sets, budget.repeats, budget.warmup,
                            budget.budget_ms, **cutoff)
    else:
        timed = device.time_launches(program, value_sets, budget.repeats, budget.warmup,
                                     budget.budget_ms, **cutoff)
        extra["launch_ms"] = list(timed.medians())
        times = list(timed.times_ms)
    if budget.cut_off(times):
        extra["cut_off_ms"] = budget.cutoff_ms  # slower than the race's cutoff: stopped
    return times


def _arch_matches(arch: str, major: int, minor: int) -> bool:
    """A cubin for sm_XY (or its arch-specific sm_XYa / family sm_XYf flavour) runs on a
    device of compute capability X.Y."""
    return re.fullmatch(rf"sm_{major}{minor}[af]?", arch) is not None


def _install_gpu_module(job: Job, extra: dict, device) -> None:
    """Load the job's binary (its cubin when built for this device, else its source through
    nvcc as the device layer compiles it) and make it the module ``device`` launches for
    this program, so the reference check runs exactly what is timed (a specialized
    variant's check program, other sizes baked in, is compiled from its own source)."""
    major, minor = device.compute_capability()
    if job.cubin is not None and _arch_matches(job.arch, major, minor):
        device.use_module(job.program, device.load_binary(job.cubin))
        extra["binary"] = f"cubin {job.arch}"
    else:
        extra["binary"] = f"nvcc sm_{major}{minor}" + (
            f" (the cubin is for {job.arch or 'an unknown arch'})" if job.cubin else "")
    device.load(job.program)  # CompileError on failure; kernels prepared
    extra["device"] = device.name
    extra["sms"] = device.attribute("MULTIPROCESSOR_COUNT")


def _time_gpu(program, values, total, budget, l2_bytes, device, extra,
              by_launch: bool = False) -> list[float]:
    """CUDA events around each run's launches (not the copies); runs rotate through k
    independent sets of device buffers so each starts with a cold L2.  ``by_launch``:
    also an event after each launch (``extra["launch_ms"]``)."""
    l2 = device.attribute("L2_CACHE_SIZE") if l2_bytes is None else l2_bytes
    k = rotations(total, l2)
    extra.update(rotations=k, l2_bytes=l2, timer="cuda-events")
    return _timed(device, program, _rotated(values, k), budget, extra, by_launch)


def child_environment(backend: str, index: int = 0) -> Environment:
    """The environment of ``backend`` as seen from this process (the child's side of
    :meth:`ProcessRunner.environment`: on the GPU it retains device ``index``'s primary
    context)."""
    toolkit = _nvcc_version()
    if backend == "cpu":
        return Environment("cpu-emulator", "", toolkit, "", polygpu.__version__)
    from polygpu.runtime.device import get_device

    device = get_device("gpu", index)
    cuda = device.open()
    major, minor = device.compute_capability()
    return Environment(device.name, f"{major}.{minor}", toolkit or _cuda_text(cuda.get_version()),
                       _smi_driver() or _cuda_text(cuda.get_driver_version()),
                       polygpu.__version__)


def _nvcc_version() -> str:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return ""
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"release (\d+\.\d+)", out)
    return m[1] if m else ""


def _smi_driver() -> str:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return ""
    try:
        out = subprocess.run([smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (out.splitlines() or [""])[0].strip()


def _cuda_text(version) -> str:
    """PyCUDA's versions as "major.minor": a tuple (12, 4, 0) or an int 12040."""
    if isinstance(version, tuple):
        return ".".join(map(str, version[:2]))
    return f"{version // 1000}.{version % 1000 // 10}"


def _child(argv: list[str]) -> int:
    if argv[:1] == ["--environment"]:
        backend, out = argv[1], Path(argv[2])
        index = int(argv[3]) if len(argv) > 3 else 0
        out.write_text(json.dumps(child_environment(backend, index).to_json()))
        return 0
    if argv[:1] == ["--compile"]:  # the tuner's parallel compile (tuner._compile_all)
        from polygpu.search.tuner import compile_worker

        return compile_worker(Path(argv[1]))
    if argv[:1] == ["--compile-serve"]:  # the same, batch after batch (tuner._SERVICE)
        from polygpu.search.tuner import compile_server

        return compile_server(int(argv[1]))
    _exit_with_parent(os.getppid())  # a measuring child: serving, or one job
    if argv[:1] == ["--serve"]:  # ProcessRunner's persistent child
        return _serve(int(argv[1]), int(argv[2]))
    _job_in(Path(argv[0]))
    return 0


def _job_in(directory: Path) -> None:
    """The job in ``directory`` run, its result written there."""
    task = pickle.loads((directory / "job.pkl").read_bytes())
    m = run_job(task["job"], task["backend"], task["repeats"], task["warmup"], task["l2_bytes"],
                task.get("device", 0), task.get("budget_ms"))
    tmp = directory / "result.pkl.tmp"
    tmp.write_bytes(pickle.dumps(m))
    os.replace(tmp, directory / "result.pkl")  # whole or absent, even if killed now


_WARM = "#warm"  # a line to a serving child that is not a job directory


def _warm(text: str) -> None:
    """What the first job would set up, done before it comes: the modules a job
    imports, the device (its context kept, as a job's is) and the region's model; any
    failure is ignored here -- the job meets it again and reports it."""
    try:
        what = json.loads(text)
        from polygpu.runtime import check, inputs  # noqa: F401 -- imported for the job

        if what["backend"] == "gpu":
            _kept_gpu(int(what["device"]))
        _kept_region(what["spec"], what["function"], tuple(what["defines"]),
                     tuple(what["include_dirs"]))
    except Exception:  # noqa: BLE001 -- the job reports it
        pass


# how often a serving child looks whether its parent is still there
PARENT_POLL_S = 1.0


def _exit_with_parent(parent: int) -> None:
    """End this process (its whole group: an emulator's threads, a compiler) once its
    parent is gone.  Why: a serving child runs in a session of its own, so that a
    timeout can kill it whole; a parent killed outright -- a Dask worker restarted
    because it stopped answering, a tune killed by the user -- would otherwise leave
    it running, and a candidate that never returns would spin (or hold a GPU) for
    ever.  A pipe's end is seen only between jobs; this thread sees it during one."""
    def watch():
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        try:
            if os.getpgrp() == os.getpid():  # its own group (never the caller's)
                os.killpg(os.getpgrp(), signal.SIGKILL)
        finally:
            os._exit(1)

    threading.Thread(target=watch, name="polygpu-parent-watch", daemon=True).start()


def _serve(jobs_fd: int, done_fd: int) -> int:
    """Job after job: a directory per line in, the same line out once its result is
    written; ends when the parent closes the pipe (or exits, also in the middle of a
    job: :func:`_exit_with_parent`).  The region's model and the device are kept
    between jobs (:data:`_KEPT`)."""
    global _KEPT
    _KEPT = {}
    with os.fdopen(jobs_fd, "r", encoding="utf-8") as jobs, \
            os.fdopen(done_fd, "w", encoding="utf-8", buffering=1) as done:
        for line in jobs:
            if line.startswith(_WARM):
                _warm(line[len(_WARM):])
            else:
                _job_in(Path(line.rstrip("\n")))
            sys.stdout.flush()
            sys.stderr.flush()
            done.write(line if line.endswith("\n") else line + "\n")
    return 0


if __name__ == "__main__":
    code = _child(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # skip interpreter teardown: a CUDA context a faulting kernel poisoned can hang or
    # abort in its atexit handler, after the result is safely written
    os._exit(code)
