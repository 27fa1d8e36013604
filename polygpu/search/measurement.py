"""What the search hands a runner, and what a runner hands back.

The search (:mod:`polygpu.search.tuner`) decides *what* to measure; a runner
(:mod:`polygpu.search.runner`) decides *how*: compile and time through PyCUDA in a child
process, emulate on the CPU, or replay recorded numbers in CI.  Everything crossing that
boundary is one of the plain, picklable records below, so a runner can live in another
process and the database (:mod:`polygpu.search.database`) can store them as they are.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Protocol, Self

from polygpu.codegen.program import KernelProgram

# A measurement's outcome.  Only "ok" has a time; every other status scores infinite.
# "slow": the check's own run, at the timed sizes, took longer than the job's
# ``give_up_ms`` -- neither verified nor timed; ``extra["check_run_ms"]`` holds that
# run's time (a first, cold run: about a warm run's time where it matters, runs of
# tens of milliseconds or more), which the search calibrates its model by
STATUSES = ("ok", "wrong", "compile-error", "crash", "timeout", "error", "slow")


@dataclass(frozen=True)
class Environment:
    """Where a measurement was taken: part of every database key, since a time on one GPU,
    toolkit or polygpu version says nothing about another."""

    gpu_name: str  # e.g. "NVIDIA H100 80GB HBM3"; "cpu-emulator" for the CPU backend
    compute_capability: str  # e.g. "9.0"; "" for the CPU backend
    cuda_version: str  # toolkit (nvcc) version, e.g. "13.0"
    driver_version: str  # e.g. "580.65"; "" without a driver
    polygpu_version: str

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Job:
    """One candidate to measure.

    ``program`` is the generated code (parameter-independent: grids are expressions);
    ``spec``/``function``/``defines``/``include_dirs`` name the original region, which
    the runner needs for the reference check.  ``check_params`` are the (small)
    parameters of the reference check every candidate passes before it is timed;
    ``params`` the parameters it is timed at.  ``cubin`` is the program already
    compiled for ``arch`` (the search compiles candidates in parallel while pruning),
    or None to compile in the runner.
    """

    key: str  # the variant as canonical JSON: identifies the candidate in the search
    spec: str
    function: str | None
    program: KernelProgram
    params: Mapping[str, int]
    check_params: Mapping[str, int]
    defines: tuple[str, ...] = ()
    include_dirs: tuple[str, ...] = ()
    cubin: bytes | None = None
    arch: str = ""
    seed: int = 0
    # what the reference check runs when it is not ``program``: a specialized program
    # runs only at ``params``, so its check runs the same variant specialized at
    # ``check_params``
    check_program: KernelProgram | None = None
    # values of float scalar parameters (``-p alpha=1.5``); the others are random
    scalars: Mapping[str, float] = field(default_factory=dict)
    # also time each launch (Measurement.launch_ms): events between the launches, so
    # asked only where the breakdown is used (the per-kernel strategy's programs)
    launch_times: bool = False
    # race against the search's best so far: stop timing once more than half of the runs
    # (two at least) are slower than this, after one over twice it (RunBudget.cut_off); None:
    # time in full
    cutoff_ms: float | None = None
    # give up a check that runs at ``params`` once its kernel run takes longer than this
    # (status "slow", neither verified nor timed): a candidate many times slower than
    # the best would otherwise cost its float64 reference at full size on the host
    # (syrk's second schedule at EXTRALARGE: 13 s on two cores); None: check in full
    give_up_ms: float | None = None

    @property
    def check_give_up_ms(self) -> float | None:
        """``give_up_ms`` where the check runs at the timed sizes (only there does its
        run show what a timed run would take), else None."""
        return self.give_up_ms if dict(self.check_params) == dict(self.params) else None


@dataclass(frozen=True)
class Measurement:
    """The outcome of one job.  ``time_ms`` is the median of ``times_ms`` (CUDA events,
    after warm-up) and is None unless ``status == "ok"``; ``reason`` says why a
    candidate failed (compiler output, the check's account, the signal that killed the
    child, the timeout).  A job timed with ``launch_times`` has ``extra["launch_ms"]``:
    per entry of ``program.launches``, the median over the runs of its milliseconds in
    a run (all its host steps); :attr:`launch_ms` reads it."""

    key: str
    status: str
    time_ms: float | None = None
    times_ms: tuple[float, ...] = ()
    reason: str = ""
    check: str = ""  # the reference check's one-line account
    extra: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self):
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r} (one of {STATUSES})")
        if (self.status == "ok") != (self.time_ms is not None):
            raise ValueError("a time exactly when status is 'ok'")

    @property
    def failed(self) -> bool:
        """Whether the candidate was measured and failed (wrong, crashed, ...): not
        ``ok``, and not ``slow`` -- a check given up as hopeless is pruned, not failed."""
        return self.status not in ("ok", "slow")

    @property
    def score(self) -> float:
        """What the search minimises: the median time, infinite for a failed candidate."""
        return self.time_ms if self.status == "ok" else float("inf")

    @property
    def launch_ms(self) -> tuple[float, ...] | None:
        """Per launch of the program, its median milliseconds per run, when the job was
        timed with ``launch_times`` and passed; None otherwise."""
        found = self.extra.get("launch_ms") if self.status == "ok" else None
        if not isinstance(found, list | tuple) or not found:
            return None
        try:
            return tuple(float(t) for t in found)
        except (TypeError, ValueError):
            return None


class Runner(Protocol):
    """Measures candidates.  Implementations must never raise for a bad candidate: a
    candidate that fails to compile, crashes, hangs or computes a wrong result comes
    back as a :class:`Measurement` with that status and its reason."""

    def environment(self) -> Environment: ...

    def measure(self, job: Job) -> Measurement: ...


class Closing:
    """A runner that holds processes or a cluster: :meth:`close` ends them.  Usable in a
    ``with`` block, and closed when collected (a tune interrupted mid-way leaves no
    serving child or local cluster behind)."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 -- interpreter teardown
            pass


def canonical(data: Mapping) -> str:
    """Canonical JSON text (sorted keys, no spaces): equal data, equal text, equal key."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


def source_hash(text: str) -> str:
    """sha256 of a kernel's source text: the database keys measurements by it, so an edit
    to the user's loop nest never reuses an old time."""
    return hashlib.sha256(text.encode()).hexdigest()
