"""Measuring candidates on several GPUs (or machines) at once, on Dask distributed.

Why: a tune's wall time is mostly its measurements -- each candidate checked against the
reference, then timed -- one at a time on one GPU.  With ``k`` GPUs, ``k`` candidates
can be measured at once; the fairest comparison still needs every time taken on an
identical GPU and never two candidates on one GPU together.  Dask distributed is the
engine (pure Python, a few MB of wheels; Ray's wheel alone is 79 MB): its scheduler
hands tasks to workers, notices a worker that died and runs its task elsewhere, and
the same code drives a cluster of machines (``tcp://HOST:PORT``).

The pieces:

* **one measuring worker per GPU**: a Dask worker with one thread and one unit of the
  resource :data:`RESOURCE` (``GPU``), so it takes one measurement at a time; its GPU is
  the first of its ``CUDA_VISIBLE_DEVICES`` (set per worker by :func:`local_cluster`, or
  by whoever started the cluster's workers, as ``dask cuda worker`` does).  Inside the
  worker the job goes through the one device layer's runner,
  :class:`~polygpu.search.runner.ProcessRunner` -- the same child process, check and
  timing as a one-GPU tune, kept per worker -- so a candidate that crashes or hangs ends
  that child, not the worker: its per-candidate timeout (``timeout_s``) kills and
  replaces the child.  A worker that stops answering altogether is restarted after
  ``watchdog_s`` and the job recorded as a ``timeout``;
* **compilation stays in the client's CPU pool** (the tuner's compile service and
  ``nvcc``): a job carries its cubin, so a worker only loads and launches it;
* **one writer**: workers return measurements; only the tuner's own thread writes them
  to the SQLite database, each committed as it arrives (:meth:`Session.finish`).  A
  worker killed mid-measurement loses nothing: Dask runs its task again on a live
  worker (up to ``distributed.scheduler.allowed-failures`` times, then the job is a
  ``crash`` with the reason), and a row is written only for a finished measurement, so
  none is written twice; a tune that dies resumes from the database (recorded
  measurements are reused);
* **the same GPU everywhere**: before anything is measured every worker reports its
  :class:`~polygpu.search.measurement.Environment` (GPU, compute capability, toolkit,
  driver, polygpu version); workers that differ are refused, since their times could
  not be compared.  Each measurement names its worker and GPU in ``extra`` (the report
  shows them).

:class:`DaskRunner` is a :class:`~polygpu.search.measurement.Runner` with
``slots`` > 1: the tuner keeps that many candidates in flight
(:func:`polygpu.search.tuner._measure_overlapped`).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence

from polygpu.errors import PolygpuError
from polygpu.search.measurement import Closing, Environment, Job, Measurement
from polygpu.search.runner import DEFAULT_BUDGET_MS, ProcessRunner

# the worker resource a measurement holds: one per measuring worker, so no two
# candidates are ever timed together on one GPU
RESOURCE = "GPU"
# beyond its own timeout (the worker's child is killed then), how long a job may take
# before its worker is taken for stuck and restarted: the child's start, the region's
# preparation, the result's way back
WATCHDOG_GRACE_S = 120.0
# a local cluster's workers must come up within this
START_TIMEOUT_S = 120.0
# a running cluster's scheduler must answer within this (Dask retries until then)
CONNECT_TIMEOUT_S = 30.0


def _import_distributed():
    try:
        import distributed
    except ImportError as err:  # pragma: no cover -- a dependency in setup.cfg
        raise PolygpuError(f"several GPUs need Dask distributed ({err}); "
                           "pip install distributed") from None
    return distributed


# --------------------------------------------------------------------------------------
# Which GPUs
# --------------------------------------------------------------------------------------


def visible_gpus() -> tuple[str, ...]:
    """The GPUs this process may use, as ``CUDA_VISIBLE_DEVICES`` entries: that
    variable's list when it is set, else every GPU ``nvidia-smi -L`` lists (numbered in
    PCI bus order, as the workers are told to number them)."""
    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    if given is not None:
        return tuple(d.strip() for d in given.split(",") if d.strip())
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return ()
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return tuple(str(k) for k, line in enumerate(out.stdout.splitlines())
                 if line.startswith("GPU "))


def gpu_indices(text: str) -> list[int]:
    """``--gpus``' list of indices, each once and each a number (the emulator's workers
    are counted from it: a typo there is refused as it is for GPUs)."""
    try:
        picked = [int(p) for p in text.split(",")]
    except ValueError:
        raise PolygpuError(f"--gpus {text!r}: 'all' or GPU indices such as 0,1") from None
    if not picked or len(set(picked)) != len(picked) or min(picked) < 0:
        raise PolygpuError(f"--gpus {text!r}: each GPU once, indices from 0")
    return picked


def parse_gpus(text: str, visible: Sequence[str] | None = None) -> tuple[str, ...]:
    """``--gpus``: ``all`` or a comma-separated list of indices into the visible GPUs
    (:func:`visible_gpus`); the ``CUDA_VISIBLE_DEVICES`` entry of each.  Bad input is a
    :class:`PolygpuError` that says what is there."""
    visible = visible_gpus() if visible is None else tuple(visible)
    text = text.strip()
    if text == "all":
        if not visible:
            raise PolygpuError("--gpus all: no GPU is visible (nvidia-smi lists none, or "
                               "CUDA_VISIBLE_DEVICES is empty)")
        return visible
    picked = gpu_indices(text)
    bad = [k for k in picked if not 0 <= k < len(visible)]
    if bad:
        raise PolygpuError(f"--gpus {text!r}: no GPU {bad[0]} ({len(visible)} visible"
                           + (f": {', '.join(map(str, range(len(visible))))})" if visible
                              else ")"))
    return tuple(visible[k] for k in picked)


# --------------------------------------------------------------------------------------
# Clusters
# --------------------------------------------------------------------------------------


def local_cluster(devices: Sequence[str], backend: str = "gpu"):
    """A Dask cluster on this machine: one worker process per entry of ``devices``
    (its ``CUDA_VISIBLE_DEVICES``; on the CPU emulator, just a name), each with one
    thread and one :data:`RESOURCE`, kept alive by a nanny that restarts it if it dies;
    no dashboard, loopback only.  Built in the process that calls it: see
    :class:`LocalCluster` for the one a tune starts."""
    distributed = _import_distributed()
    workers = {}
    # entries of this process's CUDA_VISIBLE_DEVICES mean what they mean in its device
    # order; without it they are nvidia-smi's numbers (visible_gpus), its PCI bus order
    order = {} if "CUDA_VISIBLE_DEVICES" in os.environ else {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    for k, device in enumerate(devices):
        env = {**order, "CUDA_VISIBLE_DEVICES": str(device)} if backend == "gpu" else {}
        name = f"gpu{device}" if backend == "gpu" else f"emulator{k}"
        if name in workers:  # one GPU given twice (a probe's, never --gpus'): apart
            name = f"{name}-{k}"
        workers[name] = {
            "cls": distributed.Nanny,
            "options": {"nthreads": 1, "resources": {RESOURCE: 1}, "env": env,
                        "host": "127.0.0.1", "dashboard": False,
                        "silence_logs": logging.ERROR}}
    scheduler = {"cls": distributed.Scheduler,
                 "options": {"host": "127.0.0.1", "dashboard_address": None,
                             "dashboard": False}}
    return distributed.SpecCluster(workers=workers, scheduler=scheduler,
                                   silence_logs=logging.ERROR, name="polygpu")


class LocalCluster:
    """A :func:`local_cluster` in a child process of its own (``python -m
    polygpu.search.distributed --local-cluster``), its scheduler's address read from
    the child's first line.  Why a child: Dask starts its workers by spawning Python,
    which imports the caller's main script again -- a user's script that tunes at its
    top level, without an ``if __name__ == "__main__":`` guard, would start clusters
    without end.  The child (and every worker under it: its own session) ends with
    :meth:`close`, or when this process exits and its pipe closes."""

    def __init__(self, devices: Sequence[str], backend: str = "gpu"):
        from polygpu.search.runner import _child_env

        self.devices = tuple(devices)
        # its log in a file: a pipe nobody reads during a long tune could fill and block it
        self._log = tempfile.TemporaryFile(mode="w+", prefix="polygpu-cluster-")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "polygpu.search.distributed", "--local-cluster", backend,
             ",".join(self.devices)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
            env=_child_env(), start_new_session=True, text=True)
        ready, _, _ = select.select([self._proc.stdout], [], [], START_TIMEOUT_S)
        line = self._proc.stdout.readline().strip() if ready else ""
        if not line.startswith(("tcp://", "inproc://")):
            rc = self._proc.poll()
            if ready and rc is None:  # its output ended: it is exiting, not yet reaped
                try:
                    rc = self._proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
            self._stop()
            self._log.seek(0)
            err = self._log.read().strip()[-4000:]
            self._log.close()
            why = (f"its process exited with status {rc}" if rc is not None else
                   f"its first line was {line!r}, not an address" if ready else
                   f"no address within {START_TIMEOUT_S:g} s")
            raise PolygpuError(f"cannot start a local Dask cluster of {len(self.devices)} "
                               f"workers ({why})" + (f":\n{err}" if err else ""))
        self.address = line

    def close(self) -> None:
        self._stop()
        self._log.close()

    def _stop(self) -> None:
        proc = self._proc
        if proc.poll() is None:
            try:
                proc.stdin.close()  # the child closes its cluster and exits
                proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _serve_local_cluster(backend: str, devices: str) -> int:
    """The body of ``python -m polygpu.search.distributed --local-cluster BACKEND D,..``:
    the cluster up, its address printed, until standard input closes."""
    cluster = local_cluster(devices.split(","), backend)
    try:
        print(cluster.scheduler_address, flush=True)
        sys.stdin.read()  # until the parent closes the pipe (or dies)
    finally:
        cluster.close(timeout=30)
    return 0


# --------------------------------------------------------------------------------------
# The worker's side
# --------------------------------------------------------------------------------------

_RUNNERS: dict[tuple, ProcessRunner] = {}  # per worker process: its runner, by settings
_RUNNERS_LOCK = threading.Lock()


def _worker_runner(settings: tuple) -> ProcessRunner:
    backend, timeout_s, repeats, warmup, budget_ms = settings
    with _RUNNERS_LOCK:
        runner = _RUNNERS.get(settings)
        if runner is None:
            runner = ProcessRunner(backend, timeout_s=timeout_s, repeats=repeats,
                                   warmup=warmup, budget_ms=budget_ms, device=0)
            _RUNNERS[settings] = runner
        return runner


def _worker_name() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().name)
    except (ImportError, ValueError):
        return ""


def worker_environment(settings: tuple) -> dict:
    """On a worker: where its measurements are taken (asked of its runner's child, as a
    one-GPU tune asks), and its name and GPU."""
    env = _worker_runner(settings).environment()
    return {"environment": env.to_json(), "worker": _worker_name(),
            "gpu": os.environ.get("CUDA_VISIBLE_DEVICES", "")}


def worker_measure(job: Job, settings: tuple) -> Measurement:
    """On a worker: ``job`` measured by the worker's runner, tagged with who timed it."""
    m = _worker_runner(settings).measure(job)
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    return dataclasses.replace(m, extra={**m.extra, "worker": _worker_name(),
                                         **({"gpu": gpu} if gpu else {})})


def worker_warm(settings: tuple, spec: str, function: str | None, defines: tuple,
                include_dirs: tuple) -> None:
    """On a worker: start its runner's child and prepare the region there."""
    _worker_runner(settings).warm(spec, function, defines, include_dirs)


def worker_close() -> None:
    """On a worker: end its runners' children (the GPU is free for others after)."""
    with _RUNNERS_LOCK:
        for runner in _RUNNERS.values():
            runner.close()
        _RUNNERS.clear()


# --------------------------------------------------------------------------------------
# The client's side
# --------------------------------------------------------------------------------------


class DaskRunner(Closing):
    """Measures jobs on the measuring workers of a Dask cluster (the module doc).

    ``scheduler``: the address of a running cluster (``tcp://HOST:PORT``), or None with
    ``devices`` for a :func:`local_cluster` started now and ended by :meth:`close`.
    ``backend``, ``timeout_s``, ``repeats``, ``warmup``, ``budget_ms``: as for
    :class:`~polygpu.search.runner.ProcessRunner`, on every worker.  ``watchdog_s``:
    how long a job may take in all before its worker is restarted (default
    ``timeout_s`` + :data:`WATCHDOG_GRACE_S`).
    """

    def __init__(self, scheduler: str | None = None, devices: Sequence[str] = (), *,
                 backend: str = "gpu", timeout_s: float = 60.0, repeats: int | None = None,
                 warmup: int | None = None, budget_ms: float | None = DEFAULT_BUDGET_MS,
                 watchdog_s: float | None = None):
        distributed = _import_distributed()
        if (scheduler is None) == (not devices):
            raise ValueError("DaskRunner: a scheduler address or local devices, one of them")
        self.settings = (backend, timeout_s, repeats, warmup, budget_ms)
        self.backend = backend
        self.watchdog_s = timeout_s + WATCHDOG_GRACE_S if watchdog_s is None else watchdog_s
        self._cluster: LocalCluster | None = None
        self._environment: Environment | None = None
        self._warming: list = []
        try:
            if scheduler is None:
                self._cluster = LocalCluster(devices, backend)
                self.client = distributed.Client(self._cluster.address, set_as_default=False,
                                                 timeout=START_TIMEOUT_S)
                self.client.wait_for_workers(len(devices), timeout=START_TIMEOUT_S)
            else:
                self.client = distributed.Client(scheduler, set_as_default=False,
                                                 timeout=CONNECT_TIMEOUT_S)
        except PolygpuError:
            self.close()
            raise
        except Exception as err:  # noqa: BLE001 -- no scheduler there, a refused start
            self.close()
            where = scheduler or f"a local cluster of {len(devices)} workers"
            raise PolygpuError(f"cannot connect to {where}: {type(err).__name__}: "
                               f"{err}") from None

    # -- the cluster ---------------------------------------------------------------------

    def measuring_workers(self) -> list[str]:
        """The addresses of the workers that hold the :data:`RESOURCE`."""
        info = self.client.scheduler_info()["workers"]
        return sorted(addr for addr, w in info.items()
                      if w.get("resources", {}).get(RESOURCE, 0) >= 1)

    @property
    def slots(self) -> int:
        """How many measurements may run at once: the measuring workers."""
        return max(1, len(self.measuring_workers()))

    def environment(self) -> Environment:
        """The one environment of every measuring worker (asked once); a
        :class:`PolygpuError` when there is none or they differ."""
        if self._environment is not None:
            return self._environment
        workers = self.measuring_workers()
        if not workers:
            raise PolygpuError(f"the Dask cluster has no worker with the resource "
                               f"{RESOURCE}=1: start its workers with --nthreads 1 "
                               f"--resources {RESOURCE}=1 (docs/distributed.md)")
        try:  # as tasks, not client.run: a worker's event loop must not wait on its child
            futures = {addr: self.client.submit(
                worker_environment, self.settings, workers=[addr], pure=False,
                resources={RESOURCE: 1}, allow_other_workers=False,
                key=f"polygpu-environment-{uuid.uuid4().hex}") for addr in workers}
            found = {addr: f.result(timeout=self.watchdog_s) for addr, f in futures.items()}
        except Exception as err:  # noqa: BLE001 -- a worker that cannot measure at all
            raise PolygpuError(f"cannot query the workers' {self.backend} environment: "
                               f"{type(err).__name__}: {err}") from None
        self._environment = one_environment(found)
        return self._environment

    def limits(self):
        """The measuring GPUs' :class:`~polygpu.search.occupancy.Limits`, asked of one
        worker (the client may have no GPU; the workers' are one model)."""
        from polygpu.search.occupancy import device_limits

        workers = self.measuring_workers()
        future = self.client.submit(device_limits, workers=workers[:1], pure=False,
                                    resources={RESOURCE: 1},
                                    key=f"polygpu-limits-{uuid.uuid4().hex}")
        return future.result(timeout=self.watchdog_s)

    def warm(self, spec: str, function: str | None = None, defines: Sequence[str] = (),
             include_dirs: Sequence[str] = ()) -> None:
        """Every measuring worker starts its child and prepares the region (not waited
        for; a failure is left for the first job to meet)."""
        args = (self.settings, spec, function, tuple(defines), tuple(include_dirs))
        # kept: Dask forgets a task whose last future is dropped
        self._warming = [self.client.submit(
            worker_warm, *args, workers=[addr], pure=False, resources={RESOURCE: 1},
            allow_other_workers=False, priority=10, key=f"polygpu-warm-{uuid.uuid4().hex}")
            for addr in self.measuring_workers()]

    # -- measuring -----------------------------------------------------------------------

    def measure(self, job: Job) -> Measurement:
        """``job`` measured on whichever measuring worker is free; never raises for a
        bad candidate.  Safe to call from several threads at once (the tuner keeps
        :attr:`slots` of them busy)."""
        start = time.monotonic()
        future = self.client.submit(worker_measure, job, self.settings, pure=False,
                                    resources={RESOURCE: 1},
                                    key=f"polygpu-measure-{uuid.uuid4().hex}")
        try:
            m = future.result(timeout=self.watchdog_s)
        except TimeoutError:
            m = self._stuck(future, job)
        except Exception as err:  # noqa: BLE001 -- the workers died under it, every retry
            m = Measurement(job.key, "crash", reason=(
                f"the Dask worker measuring it died ({type(err).__name__}: {err}); "
                "Dask ran it again on another worker until its allowed failures were "
                "spent"), extra={"worker_error": type(err).__name__})
        extra = {**m.extra, "cluster_wall_s": round(time.monotonic() - start, 3)}
        return dataclasses.replace(m, extra=extra)

    def _stuck(self, future, job: Job) -> Measurement:
        """A job past the watchdog: its worker restarted, the job a ``timeout``."""
        where = [addr for addr, keys in self.client.processing().items()
                 if future.key in keys]
        future.cancel()
        if where:
            try:
                self.client.restart_workers(where, timeout=START_TIMEOUT_S)
            except Exception as err:  # noqa: BLE001 -- reported below, the search goes on
                logging.getLogger("polygpu").warning("restarting %s: %s", where, err)
        return Measurement(job.key, "timeout", reason=(
            f"no result after {self.watchdog_s:g} s: its worker "
            f"{', '.join(where) or '(none found)'} was restarted"),
            extra={"timeout_s": self.watchdog_s, "restarted": where})

    def close(self) -> None:
        """End the workers' children, and the local cluster if this runner started it."""
        client, self.client = getattr(self, "client", None), None
        if client is not None:
            try:
                client.run(worker_close, wait=True)
            except Exception:  # noqa: BLE001 -- closing: nothing left to report to
                pass
            client.close()
        cluster, self._cluster = self._cluster, None
        if cluster is not None:
            cluster.close()


def one_environment(found: dict[str, dict]) -> Environment:
    """The environment every worker reported (``{address: worker_environment()}``); a
    :class:`PolygpuError` naming each worker's when they differ: times taken on two GPU
    models (or toolkits, drivers, polygpu versions) are not compared."""
    envs = {addr: Environment(**r["environment"]) for addr, r in found.items()}
    if len(set(envs.values())) > 1:
        lines = "\n".join(f"  {found[a].get('worker') or a}: {e.gpu_name} (compute "
                          f"capability {e.compute_capability or '-'}, CUDA {e.cuda_version}, "
                          f"driver {e.driver_version or '-'}, polygpu {e.polygpu_version})"
                          for a, e in sorted(envs.items()))
        raise PolygpuError("the measuring workers differ, so their times cannot be "
                           "compared; use identical GPUs (--gpus to pick them):\n" + lines)
    return next(iter(envs.values()))


def runner_for(*, gpus: str | Sequence[str] | None = None, scheduler: str | None = None,
               backend: str = "gpu", **options):
    """The runner of a tune: a :class:`DaskRunner` for ``scheduler`` or for ``gpus``
    (``--gpus``' text or CUDA_VISIBLE_DEVICES entries; on the CPU emulator, a count of
    workers as text), else None (the caller's one-device runner)."""
    if scheduler is not None and gpus is not None:
        raise PolygpuError("--gpus and --scheduler: one of them (a cluster's workers have "
                           "their GPUs already)")
    if scheduler is not None:
        if not scheduler.startswith(("tcp://", "tls://", "ucx://", "inproc://")):
            raise PolygpuError(f"--scheduler {scheduler!r}: an address such as "
                               "tcp://HOST:8786")
        return DaskRunner(scheduler, backend=backend, **options)
    if gpus is None:
        return None
    if isinstance(gpus, str):
        if backend == "cpu":  # emulator workers: 'all' is the CPUs, a list its length
            from polygpu.runtime.compiler import usable_cpus

            devices = tuple(str(k) for k in range(
                usable_cpus() if gpus.strip() == "all" else len(gpu_indices(gpus))))
        else:
            devices = parse_gpus(gpus)
    else:
        devices = tuple(str(g) for g in gpus)
    return DaskRunner(devices=devices, backend=backend, **options)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--local-cluster":
        sys.exit(_serve_local_cluster(sys.argv[2], sys.argv[3]))
    sys.exit("usage: python -m polygpu.search.distributed --local-cluster BACKEND D,D,..")
