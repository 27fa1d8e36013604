"""The model-pruned empirical search (paper §6): cost, prune, compile, time, keep the
best.

:func:`tune` runs the pipeline for one region and parameter set:

1. **Space** (:mod:`polygpu.search.space`): the variants of the strategy's space, put in
   the pool uncosted (stage ``unexplored``): nothing is compiled up front.
2. **Plans** (``model``, ``per-kernel``): the plans the model's default chose among
   (:func:`polygpu.search.plan_model.choose`) are timed first and never pruned, so the
   result is never slower than what ``compile -p`` gives.
3. **Walk** (:mod:`polygpu.search.explore`; each strategy is a function of
   :mod:`polygpu.search.strategies`, the rules are :mod:`polygpu.search.pruning`): the
   strategy asks for what it needs, as it needs it, in the model's order and only as
   far as the budget can use:

   * *costed* (:meth:`Session.sketch`): tiled, placed and priced without code
     (:func:`polygpu.search.plan_model.sketch`: modelled traffic, operand loads,
     grids, the concurrency of guessed registers);
   * *traffic*: drop variants whose modelled global loads and stores exceed the fewest
     of the costed ones by more than ``traffic_slack`` percent (the paper's p);
   * *built* (:meth:`~polygpu.search.pool.Pool.build`): code generated
     (:meth:`Session.generate`; variants that generate identical code are measured
     once) and the resource oracle asked (:mod:`polygpu.search.resources`: nvcc, no GPU
     needed; ptxas reports registers and shared memory); with the target's limits (the
     device's, sm_90 without one) this gives resident warps per SM.  A variant's
     *concurrency* is the fraction of the whole GPU's warp slots its launch can fill.
     Drop variants that spill, below ``min_concurrency`` (25 %) of the best concurrency
     built, and outside {T, T/2, T/4} threads per block, T being the largest warp
     multiple the kernel's registers allow.

   Costing and building run in worker processes forked from one fresh ``python -m
   polygpu.search.runner --compile-serve`` child kept for the whole call (the region is
   prepared there once), never spawned from the caller's process, so a plain script
   without an ``if __name__ == "__main__":`` guard is not re-run in each worker.
4. **Order and budget**: ``model`` times survivors by :func:`~polygpu.search.cost.
   predicted_cost` (per launch, the longer of the modelled traffic over the bandwidth
   and the instances' FMAs and operand loads over the issue rate, both scaled by how
   much of the GPU that launch's grid and concurrency can use; summed over the launches
   and their host steps, with a launch latency each); ``exhaustive`` every variant in
   space order; ``random`` a seeded random order.  All stop after ``budget`` timed
   candidates (measurements reused from the database do not count) and rank by the
   same cost: the median time of a candidate that passed the reference check, infinite
   otherwise.  ``per-kernel`` (:mod:`polygpu.search.strategies.per_kernel`) measures as
   it searches, through the pool's :class:`Session`, and names the variant it chose
   (:attr:`TuneResult.chosen`, ranked first).
5. **Measure** through a :class:`~polygpu.search.measurement.Runner`, the reference
   check's program generated just before (:meth:`Session.check_program`); every result
   is written to the tuning database as it arrives, and earlier results with the same
   key (source, function, parameters, variant, GPU, toolkit, driver, polygpu version)
   are reused instead of measured again.  A program of several kernels timed with its
   launches broken down (``Job.launch_times``) also leaves each kernel's time in the
   database's kernel-times table.

The padding of every survivor is Algorithm 2's choice (``Variant.padding = -1``).
"""

from __future__ import annotations

import concurrent.futures
import math
import multiprocessing
import os
import pickle
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

from polygpu.codegen.program import KernelProgram
from polygpu.errors import PolygpuError
from polygpu.model.analysis import step_parameters
from polygpu.model.bounds import require_in_bounds
from polygpu.runtime.compiler import usable_cpus
from polygpu.runtime.grid import launch_blocks
from polygpu.schedule.variant import Variant
from polygpu.search.candidate import Candidate, LaunchCost
from polygpu.search.cost import LAUNCH_SECONDS, model_order, model_times, predicted_cost
from polygpu.search.explore import HOPELESS
from polygpu.search.measurement import (
    Environment,
    Job,
    Measurement,
    Runner,
    canonical,
    source_hash,
)
from polygpu.search.occupancy import SM_90, Limits
from polygpu.search.pool import Pool
from polygpu.search.pruning import REGISTERS_PER_BLOCK, concurrency, register_limited_threads
from polygpu.search.resources import ResourceOracle
from polygpu.search.space import SpaceOptions
from polygpu.search.strategies import STRATEGIES

# the search's vocabulary, read from here by the API, the report and the scripts
__all__ = ["LAUNCH_SECONDS", "REGISTERS_PER_BLOCK", "STRATEGIES", "Candidate", "LaunchCost",
           "Measurement", "Progress", "SearchPool", "Session", "TuneOptions", "TuneResult",
           "check_parameters", "compile_worker", "concurrency", "model_order", "model_times",
           "predicted_cost", "register_limited_threads", "tune"]


@dataclass(frozen=True)
class TuneOptions:
    strategy: str = "model"
    budget: int | None = None  # timed candidates at most (None: all the strategy keeps)
    traffic_slack: float = 50.0  # p: percent above the fewest loads/stores kept
    min_concurrency: float = 0.25  # of the best candidate's concurrency
    seed: int = 0  # random strategy's order and the inputs' seed
    space: SpaceOptions = field(default_factory=SpaceOptions)
    jobs: int | None = None  # parallel compile processes (default: CPUs)
    check_params: Mapping[str, int] | None = None  # reference check sizes (default: derived)
    defines: tuple[str, ...] = ()
    include_dirs: tuple[str, ...] = ()
    scalars: Mapping[str, float] | None = None  # float scalar parameters (default: random)
    # race each candidate against the best median so far: its timed runs stop once more
    # than half of them (two at least) are slower than ``race`` x that median, after one
    # once it is over twice that (it cannot win: RunBudget.cut_off); None
    # or 0: every candidate timed in full (e.g. for plots of the whole space)
    race: float | None = 1.25
    # seconds the whole search may take (None: no limit): once they have passed and one
    # candidate at least was timed, nothing more is timed, as with a spent budget.  Soft:
    # the step in progress (a batch of builds, a measurement) ends first
    time_limit_s: float | None = None

    def __post_init__(self):
        if self.strategy not in STRATEGIES:
            raise PolygpuError(f"--strategy {self.strategy}: one of {', '.join(STRATEGIES)}")
        if self.budget is not None and self.budget < 1:
            raise PolygpuError("--budget must be at least 1")
        if self.traffic_slack < 0 or not 0 <= self.min_concurrency <= 1:
            raise PolygpuError("--traffic-slack >= 0 and 0 <= --min-concurrency <= 1")
        if self.race and self.race < 1:
            raise PolygpuError("--race must be at least 1 (or 0: off)")
        if self.time_limit_s is not None and not self.time_limit_s > 0:
            raise PolygpuError("--time-limit must be more than 0 seconds")


def clock() -> float:
    """Seconds for the search's time limit (a function of its own, so that tests can
    replace the clock of the search alone)."""
    return time.monotonic()


@dataclass(frozen=True)
class TuneResult:
    spec: str
    function: str
    params: Mapping[str, int]
    environment: Environment
    strategy: str
    options: TuneOptions
    candidates: tuple[Candidate, ...]
    programs: Mapping[str, KernelProgram]  # key -> code, for every compiled candidate
    source_hash: str
    function_option: str | None = None  # the function as the caller named it (or None)
    # the key of the variant the strategy chose (per-kernel: the kernels' best combined,
    # measured as a whole), ranked first when it passed; None: the fastest measured
    chosen: str | None = None
    order: tuple[str, ...] = ()  # the keys measured (timed or reused), in that order
    # what the search did besides timing: variants costed by the model, programs
    # generated, reference-check programs generated
    work: Mapping[str, int] = field(default_factory=dict)

    @property
    def measured(self) -> tuple[Candidate, ...]:
        return tuple(c for c in self.candidates if c.measurement is not None)

    @property
    def ranking(self) -> tuple[Candidate, ...]:
        """Measured candidates, best first (failures last); a :attr:`chosen` one that
        passed comes first whatever its time."""
        ranked = sorted(self.measured, key=lambda c: (c.score, c.key))
        first = [c for c in ranked if c.key == self.chosen and math.isfinite(c.score)]
        return tuple(first + [c for c in ranked if c not in first])

    @property
    def best(self) -> Candidate | None:
        ranked = self.ranking
        return ranked[0] if ranked and math.isfinite(ranked[0].score) else None

    def counts(self) -> dict[str, int]:
        result: dict[str, int] = {}
        for c in self.candidates:
            stage = c.stage
            if c.measurement is not None and c.measurement.failed:
                stage = "failed"
            elif c.measurement is not None and c.measurement.status == "slow":
                stage = "pruned-measured"  # its own check's run showed it hopeless
            result[stage] = result.get(stage, 0) + 1
        return result


@dataclass
class Progress:
    """What a progress display shows; the tuner updates it and calls back."""

    phase: str = "compile"
    total: int = 0  # candidates to time
    done: int = 0
    pruned: int = 0
    failed: int = 0
    reused: int = 0
    best_ms: float | None = None
    best_key: str = ""


# ----------------------------------------------------------------------------- compile


@lru_cache(maxsize=4)
def _prepared(spec, function, defines, include_dirs):
    from polygpu.pipeline import prepare

    return prepare(spec, function, defines, include_dirs)


# What a worker does with one variant (see explore.py for why they are apart):
# "sketch": the model's numbers without code; "program": the code that is timed;
# "check": the code of its reference check (the variant specialized at the check sizes);
# "prepare": nothing but the region's model (a compile service warming up)
MODES = ("sketch", "program", "check", "prepare")


def _compile_one(spec: str, function: str | None, defines: tuple[str, ...],
                 include_dirs: tuple[str, ...], variant_json: str,
                 params: Mapping[str, int], check_params: Mapping[str, int],
                 mode: str = "program") -> dict:
    """Worker: one variant in one of :data:`MODES` -> a picklable dict, or the error."""
    from polygpu.pipeline import compile_variant, program_at
    from polygpu.search import plan_model

    try:
        prepared = _prepared(spec, function, defines, include_dirs)
        if mode == "prepare":
            return {}
        variant = Variant.from_json(variant_json)
        if mode == "program":
            return {"program": compile_variant(prepared, variant, params).program}
        if mode == "check":
            # the same tiling and memory plan, generated at the check sizes
            c = replace(plan_model.sketch(prepared, variant), variant=variant)
            return {"check_program": program_at(c, check_params)}
        return _sketch_one(prepared, variant, params)
    except PolygpuError as e:
        return {"error": str(e).splitlines()[0]}
    except Exception as e:  # a polygpu bug on one variant must not end the search
        return {"error": f"internal error: {type(e).__name__}: {e}"}


def _sketch_one(prepared, variant: Variant, params: Mapping[str, int]) -> dict:
    """The model's numbers of ``variant`` (:func:`polygpu.search.plan_model.sketch`):
    per launch its traffic, instances, operand loads, grid and the concurrency of
    guessed registers (ptxas replaces it when the candidate is built)."""
    from polygpu.codegen.cuda import device_steps_possible
    from polygpu.pipeline import batch_on_device, launch_residences, plan_variant
    from polygpu.search import plan_model

    target = prepared.of(variant)[0]  # a relayout's: the relaid region
    if variant.candidate >= len(target.candidates):
        raise PolygpuError(f"variant: candidate {variant.candidate} does not exist")
    # a device-steps program (one launch running every kernel's steps) is counted on
    # its host-launched twin: the same kernels, one launch per kernel and step
    variant = batch_on_device(target.candidates[variant.candidate], variant)
    c = plan_model.sketch(prepared, variant)
    blocks = launch_blocks(c.program, params, c.modelled_steps(params)[0])
    resident = {}
    if variant.device_steps and variant.resident:
        # reads of arrays resident in a launch's block priced as shared loads, as the
        # default prices them (plan_model.estimate): its host-launched twin's scattered
        # global reads are ~64x too many (the batched Cholesky at n = 64)
        residences = launch_residences(plan_variant(prepared, variant, params),
                                       variant.cuts, params)
        resident = plan_model.resident_arrays(variant, len(c.kernels), residences)
    costs = list(plan_model.launch_costs(c, params, resident_arrays=resident))
    threads = max(math.prod(la.block) for la in c.program.launches)
    shared = max(la.shared_bytes for la in c.program.launches)
    if variant.device_steps:  # all of it in the one launch, of one block
        tr = target.transformation(variant)
        if tr.host is None:
            raise PolygpuError("variant: device_steps runs host loops on the device, but "
                               "this transformation has none")
        if not device_steps_possible(tr.step.scop, c.kernels, c.memory):
            raise PolygpuError("variant: device_steps is impossible for these kernels")
        double = any(a.dtype == "float64" for a in c.kernel_scop.arrays)
        # a batch: one block per element, its steps reusing the element from the caches
        elements = c.batch_elements(params)
        traffic = plan_model.compulsory_bytes(c, params) if tr.host.grid_dims else \
            sum(x.traffic_bytes for x in costs)
        _, guess = concurrency(threads, plan_model._registers(variant, double), 0, elements,
                               SM_90.multiprocessors)
        costs = [LaunchCost(kernel=f"{c.program.function}_steps", runs=1,
                            traffic_bytes=traffic,
                            instances=sum(x.instances for x in costs),
                            operand_loads=sum(x.operand_loads for x in costs),
                            blocks=elements, concurrency=guess)]
        blocks, shared = [elements], 0
    return {"traffic": sum(x.traffic_bytes for x in costs),
            "instances": sum(x.instances for x in costs),
            "prefetched": any(x.prefetched for x in costs),
            "operand_loads": sum(x.operand_loads for x in costs),
            "blocks": blocks, "launches": tuple(costs), "threads": threads,
            "shared_bytes": shared, "function": c.program.function}


# tasks compiled in this process, not sent, while the compile service still prepares the
# region (its model takes seconds: heat_3d at EXTRALARGE 9 s): the first plan's program
# and check, which the GPU waits for, go ahead on this process's own prepared region
WHILE_WARMING = 2

# the persistent compile child of the running tune() call (None: compile in this process
# or in a one-shot child)
_SERVICE: _CompileService | None = None


def _compile_all(spec, function, options: TuneOptions, variants: Sequence[Variant],
                 params: Mapping[str, int], mode: str | Sequence[str] = "program"
                 ) -> list[dict]:
    """``variants`` through :func:`_compile_one` in ``mode`` (one for all, or one per
    variant), in parallel processes when there are several (``options.jobs``, default
    one per CPU)."""
    texts = [canonical(v.to_json()) for v in variants]
    modes = [mode] * len(texts) if isinstance(mode, str) else list(mode)
    prepared = _prepared(spec, function, tuple(options.defines), tuple(options.include_dirs))
    checks = [_check_params(options, params, v, _steps_of(prepared, v)) for v in variants]
    tasks = [(*_region_args(spec, function, options), t, dict(params), c, m)
             for t, c, m in zip(texts, checks, modes, strict=True)]
    workers = _workers(options, len(texts))
    if workers > 1 and not (_SERVICE is not None and len(tasks) <= WHILE_WARMING
                            and _SERVICE.warming()):
        results = _SERVICE.map(tasks) if _SERVICE is not None else \
            _compile_in_child(tasks, workers) if len(texts) >= 8 else None
        if results is not None:
            return results
    return [_compile_one(*task) for task in tasks]


def _region_args(spec, function, options: TuneOptions) -> tuple:
    """What :func:`_compile_one` needs to prepare the region (its first four arguments)."""
    return spec, function, tuple(options.defines), tuple(options.include_dirs)


def _workers(options: TuneOptions, tasks: int) -> int:
    """The processes :func:`_compile_all` spreads ``tasks`` over (1: this one)."""
    return max(1, min(options.jobs or usable_cpus(), tasks)) if tasks >= 2 else 1


def _in_parallel(options: TuneOptions) -> bool:
    """Whether two tasks given to :func:`_compile_all` now run at once, in the running
    tune's compile service: then work done ahead costs no waiting, only idle CPUs."""
    return _SERVICE is not None and not _SERVICE.broken and _workers(options, 2) > 1


def _compile_in_child(tasks: list[tuple], workers: int) -> list[dict] | None:
    """``tasks`` compiled by :func:`compile_worker` in a fresh ``python -m
    polygpu.search.runner --compile DIR`` (its own ``__main__``, so the caller's script is
    never imported again, and nothing it prints or raises reaches the caller's output);
    None if that child failed (the caller then compiles in-process)."""
    from polygpu.search.runner import _ROOT

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_ROOT), env.get("PYTHONPATH", "")) if p)
    with tempfile.TemporaryDirectory(prefix="polygpu-compile-") as tmp:
        directory = Path(tmp)
        (directory / "tasks.pkl").write_bytes(pickle.dumps({"tasks": tasks,
                                                            "workers": workers}))
        try:
            subprocess.run([sys.executable, "-m", "polygpu.search.runner", "--compile",
                            str(directory)], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                           check=False)
            results = pickle.loads((directory / "results.pkl").read_bytes())
        except Exception:  # no result (a crash, a kill): compile here instead
            return None
    return results if isinstance(results, list) and len(results) == len(tasks) else None


def compile_worker(directory: Path) -> int:
    """The body of ``python -m polygpu.search.runner --compile DIR``: the tasks of
    ``DIR/tasks.pkl`` through :func:`_compile_one` on a pool of processes (forked from
    this fresh interpreter, after preparing the region once), results to
    ``DIR/results.pkl``."""
    data = pickle.loads((directory / "tasks.pkl").read_bytes())
    tasks, workers = data["tasks"], data["workers"]
    with _worker_pool(tasks, workers) as pool:
        results = list(pool.map(_compile_one, *zip(*tasks, strict=True)))
    tmp = directory / "results.pkl.tmp"
    tmp.write_bytes(pickle.dumps(results))
    os.replace(tmp, directory / "results.pkl")
    return 0


def _worker_pool(tasks: list[tuple], workers: int) -> concurrent.futures.ProcessPoolExecutor:
    """Processes forked from this interpreter after the region of ``tasks`` was prepared
    here once (each worker inherits it)."""
    if tasks:
        try:
            _prepared(*tasks[0][:4])
        except Exception:  # each task reports its own error
            pass
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    return concurrent.futures.ProcessPoolExecutor(
        max_workers=workers, mp_context=multiprocessing.get_context(method))


def _send(stream, obj) -> None:
    data = pickle.dumps(obj)
    stream.write(len(data).to_bytes(8, "little") + data)
    stream.flush()


def _receive(stream):
    """The next object :func:`_send` wrote, or None at the end of the stream."""
    head = stream.read(8)
    if len(head) < 8:
        return None
    size = int.from_bytes(head, "little")
    data = stream.read(size)
    if len(data) < size:
        return None
    return pickle.loads(data)


class _CompileService:
    """One ``python -m polygpu.search.runner --compile-serve N`` child for a whole
    :func:`tune` call: it prepares the region once and keeps its forked workers, and
    compiles each batch the search sends it (a lazy search sends many small ones; a
    fresh child per batch would prepare the region again each time).  Any failure
    turns it off: the caller then compiles in this process."""

    def __init__(self, workers: int):
        self.workers = workers
        self.process: subprocess.Popen | None = None
        self.broken = False
        self.unread = 0  # replies to batches sent without waiting (warm)

    def _start(self) -> None:
        if self.process is None:
            from polygpu.search.runner import _ROOT

            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (str(_ROOT), env.get("PYTHONPATH", "")) if p)
            # its own process group: a kill takes its forked workers with it
            self.process = subprocess.Popen(
                [sys.executable, "-m", "polygpu.search.runner", "--compile-serve",
                 str(self.workers)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, env=env, start_new_session=True)

    def warm(self, region: tuple) -> None:
        """Start the child now and have it prepare ``region`` (:func:`_region_args`) and
        fork its workers while this process goes on (plans, the first build): the
        region's model takes seconds (correlation: 5.8 s), and the first batch the search
        sends would otherwise wait for it.  The reply is read before the next batch's."""
        if self.broken or self.workers < 2:
            return
        try:
            self._start()
            _send(self.process.stdin, [(*region, "", {}, {}, "prepare")])
            self.unread += 1
        except Exception:
            self.broken = True
            self.close()

    def warming(self) -> bool:
        """Whether the child is still preparing the region (:meth:`warm`'s reply not
        there yet), asked without waiting."""
        if self.broken or not self.unread or self.process is None:
            return False
        try:
            ready, _, _ = select.select([self.process.stdout], [], [], 0)
        except (OSError, ValueError):
            return False
        return not ready

    def map(self, tasks: list[tuple]) -> list[dict] | None:
        if self.broken:
            return None
        try:
            self._start()
            while self.unread:
                if _receive(self.process.stdout) is None:
                    raise EOFError("the compile service ended")
                self.unread -= 1
            _send(self.process.stdin, tasks)
            results = _receive(self.process.stdout)
        except Exception:
            results = None
        if not isinstance(results, list) or len(results) != len(tasks):
            self.broken = True
            self.close()
            return None
        return results

    def close(self) -> None:
        process, self.process = self.process, None
        unused, self.unread = self.unread > 0, 0
        if process is None:
            return
        try:
            if unused:  # still warming up for a search that ended before using it
                raise TimeoutError
            process.stdin.close()
            process.wait(timeout=60)
        except Exception:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                process.kill()
            process.wait()


def compile_server(workers: int) -> int:
    """The body of ``python -m polygpu.search.runner --compile-serve N``: batches of
    tasks from stdin, their results to stdout (:func:`_send` framing), until stdin
    closes; the workers are forked once, after the first batch's region is prepared.
    Anything else printed goes to stderr, never into the replies."""
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    sys.stdout = sys.stderr
    requests = sys.stdin.buffer
    pool = None
    try:
        while True:
            tasks = _receive(requests)
            if tasks is None:
                return 0
            if pool is None:
                pool = _worker_pool(tasks, workers)
            _send(replies, list(pool.map(_compile_one, *zip(*tasks, strict=True))))
    finally:
        if pool is not None:
            pool.shutdown()


# the least time of a check's run that gives the check up (Session.start): what a check
# at the timed sizes costs beyond its run is the float64 reference on the host, which
# only matters for runs far longer than this
GIVE_UP_FLOOR_MS = 50.0

MIN_CHECK_STEPS = 3  # steps of a time loop a check runs at least (see check_parameters)


def check_parameters(params: Mapping[str, int], variant: Variant,
                     steps: frozenset[str] = frozenset()) -> dict[str, int]:
    """Sizes of the reference check: each parameter at most two block tiles plus an odd
    remainder (so full tiles, partial tiles and the time tile's remainder all run), and
    never more than the timed size.  ``steps`` (:func:`~polygpu.model.analysis.
    step_parameters`) only count a sequential loop's steps, each the same code: they get
    :data:`MIN_CHECK_STEPS` or more, enough for two time tiles (the only tiles a
    sequential loop can have) and their remainder."""
    # every kernel's own tiles (per-kernel overrides), and the program-wide ones
    merged = [variant.for_kernel(k) for k, _ in variant.kernels] + [replace(variant,
                                                                          kernels=())]
    span = max(max(*v.tile, v.time_tile or 1) for v in merged)
    cap = 2 * span + 19
    step_period = math.lcm(*(v.time_tile or 1 for v in merged))
    if not variant.specialize:
        return {k: min(v, max(MIN_CHECK_STEPS, 2 * step_period + 1) if k in steps else cap)
                for k, v in params.items()}
    # a specialized variant is checked as the same variant specialized at the check
    # sizes: keep each size's remainder modulo the tiles, so the checked code has the
    # same full and partial tiles (the same guards) as the timed code
    period = math.lcm(*(t for v in merged for t in (*v.tile, v.time_tile or 1)))
    sizes = {}
    for k, v in params.items():
        if k in steps:
            r = v % step_period
            sizes[k] = min(v, r + max(1, -(-(MIN_CHECK_STEPS - r) // step_period))
                           * step_period)
            continue
        r = v % period
        sizes[k] = v if v <= cap else min(v, r + max(1, min(2, (v - r) // period)) * period)
    return sizes


# ---------------------------------------------------------------------------------- run


@dataclass
class SearchPool(Pool):
    """The pool of one :func:`tune` call, with its :class:`Session`: candidates are
    costed (:meth:`sketch`) and their code generated (:meth:`generate`, by
    :meth:`~polygpu.search.pool.Pool.build`) only when a strategy asks, and a strategy
    that measures as it searches (``per-kernel``) times them through ``session``."""

    session: Session | None = None

    def sketch(self, variants):
        return self.session.sketch(variants)

    def generate(self, batch) -> None:
        self.session.generate(batch)


@dataclass(frozen=True)
class Pending:
    """A candidate handed to the runner: :meth:`Session.start` made its job,
    :meth:`Session.finish` records what the runner returns."""

    candidate: Candidate
    job: Job


class Session:
    """The measuring side of one :func:`tune` call: compiles variants into the pool
    (identical code measured once), measures candidates (reusing the database,
    counting the budget, recording every result, the kernel times included) and
    reports progress.  The tuner's own loop measures what a strategy returns through
    it, and a strategy may measure through it while it searches."""

    def __init__(self, spec: str, function: str | None, params: Mapping[str, int],
                 options: TuneOptions, runner: Runner, database, prepared, limits: Limits,
                 arch: str, state: Progress, notify: Callable[[Progress], None]):
        self.spec, self.function, self.params = spec, function, dict(params)
        self.options, self.runner, self.database = options, runner, database
        self.prepared, self.limits, self.arch = prepared, limits, arch
        self.state, self.notify = state, notify
        self.env = runner.environment()
        self.started = clock()  # for options.time_limit_s
        self.candidates: dict[str, Candidate] = {}
        self.programs: dict[str, KernelProgram] = {}
        # what generating each specialized variant's check program gave: the program
        # ("check_program") or the error ("error")
        self._checks: dict[str, dict] = {}
        self._seen: dict[tuple, str] = {}
        self.pool: SearchPool | None = None
        self.function_name = prepared.analysis.scop.function
        self.digest = ""
        self.recorded: dict[str, Measurement] = {}  # the database's, by variant key
        # (plan, kernel, kernel variant) -> every time recorded, oldest first
        self.kernel_table: dict[tuple[str, int, str], list[float]] = {}
        self.timed = 0
        self.order: list[str] = []  # keys measured (timed or reused), in that order
        self.chosen: str | None = None
        self._plans: list[Variant] | None = None
        self._plan_error: PolygpuError | None = None
        # what the search cost besides timing: variants costed, programs generated,
        # check programs generated (ptxas runs: the oracle's)
        self.sketched = self.generated = self.checked = 0

    # -- compiling --------------------------------------------------------------------

    def key_of(self, v: Variant) -> str:
        return Pool.key_of(v)

    def explore(self, variants: Sequence[Variant]) -> None:
        """``variants`` in the pool, not costed yet (stage ``unexplored``), those it
        holds already left as they are."""
        for v in variants:
            key = self.key_of(v)
            if key not in self.candidates:
                self._set(Candidate(key, Variant.from_json(key) if v.kernels else v,
                                    "unexplored"))

    def sketch(self, variants: Sequence[Variant]) -> list[Candidate]:
        """Each of ``variants`` costed by the model without its code (:func:`polygpu.
        search.plan_model.sketch`; done now unless it was before): ``kept`` (no program
        yet) or ``invalid``; in the order given."""
        # as read back from JSON (what the workers compile): per-kernel overrides in
        # one order, so a candidate's variant is the one its program names
        variants = [Variant.from_json(v.to_json()) if v.kernels else v for v in variants]
        keys = [self.key_of(v) for v in variants]
        new = {k: v for k, v in zip(keys, variants, strict=True)
               if k not in self.candidates or self.candidates[k].stage == "unexplored"}
        found = _compile_all(self.spec, self.function, self.options, list(new.values()),
                             self.params, "sketch") if new else []
        self.sketched += len(new)
        for (key, v), c in zip(new.items(), found, strict=True):
            if "error" in c:
                self._set(Candidate(key, v, "invalid", reason=c["error"]))
                continue
            self._set(Candidate(key, v, "kept", traffic_bytes=c["traffic"],
                                instances=c["instances"], operand_loads=c["operand_loads"],
                                prefetched=c["prefetched"], shared_bytes=c["shared_bytes"],
                                threads=c["threads"], blocks=max(c["blocks"]),
                                launches=c["launches"]))
        return [self.candidates[k] for k in keys]

    def generate(self, batch: Sequence[Candidate]) -> None:
        """The code of each candidate of ``batch`` at stage ``kept`` that has none yet;
        one whose code is another's becomes ``duplicate`` (measured once), one that does
        not compile ``invalid``."""
        todo = list({c.key: self.candidates[c.key] for c in batch
                     if self.candidates[c.key].stage == "kept"
                     and c.key not in self.programs}.values())
        if not todo:
            return
        # where the tasks run in parallel, each specialized candidate's check program is
        # generated beside its program: the one about to be timed then has it at once
        # (one core's seconds of isl per candidate, otherwise on the search's path)
        ahead = [c for c in todo if c.variant.specialize and c.key not in self._checks] \
            if _in_parallel(self.options) else []
        found = _compile_all(self.spec, self.function, self.options,
                             [c.variant for c in todo + ahead], self.params,
                             ["program"] * len(todo) + ["check"] * len(ahead))
        self.generated += len(todo)
        self.checked += len(ahead)
        for c, r in zip(ahead, found[len(todo):], strict=True):
            self._checks[c.key] = r
        for c, r in zip(todo, found[:len(todo)], strict=True):
            if "error" in r:
                self._set(replace(c, stage="invalid", reason=r["error"]))
                continue
            program = r["program"]
            # the same code whatever the header comment says (it names the variant)
            identity = ("\n".join(line for line in program.source.splitlines()
                                   if not line.startswith("//")), program.launches)
            if identity in self._seen and self._seen[identity] != c.key:
                self._set(replace(c, stage="duplicate", duplicate_of=self._seen[identity]))
                continue
            self._seen[identity] = c.key
            self.programs[c.key] = program

    def check_program(self, c: Candidate) -> KernelProgram | None:
        """The program ``c``'s reference check runs: for a specialized variant the same
        variant specialized at the check sizes (generated now, when it is about to be
        timed), else None (the check runs the timed program)."""
        if not c.variant.specialize:
            return None
        if c.key not in self._checks:
            (self._checks[c.key],) = _compile_all(self.spec, self.function, self.options,
                                                  [c.variant], self.params, "check")
            self.checked += 1
        r = self._checks[c.key]
        if "error" in r:
            raise PolygpuError(f"the reference check of {c.key}: {r['error']}")
        return r["check_program"]

    def compile(self, variants: Sequence[Variant]) -> list[Candidate]:
        """Each of ``variants`` costed and its code generated (no oracle): ``kept``,
        ``duplicate`` (same code as ``duplicate_of``) or ``invalid``; in the order
        given."""
        found = self.sketch(variants)
        self.generate(found)
        return [self.candidates[c.key] for c in found]

    def _set(self, c: Candidate) -> None:
        if self.pool is not None:
            self.pool.set(c)
        else:
            self.candidates[c.key] = c

    def plans(self, n: int | None = None) -> list[Variant]:
        """The plans the model's default chose among (:func:`polygpu.search.plan_model.
        choose`), best first, those that could be built, specialized as the space's
        variants are; the first ``n``."""
        if self._plans is None:
            from polygpu.search import plan_model

            try:
                ranking = plan_model.choose(self.prepared, self.params, self.limits).ranking
            except PolygpuError as e:  # no plan builds: the search goes on without
                self._plans, self._plan_error = [], e
                return []
            found = [replace(e.variant, specialize=self.options.space.specialize,
                             fast_math=self.options.space.fast_math)
                     for e in ranking if math.isfinite(e.seconds)]
            self._plans = list(dict.fromkeys(found))
        return self._plans[:n]

    def plan(self) -> Variant:
        """The cost model's plan at these sizes (:func:`polygpu.search.plan_model.
        choose`), specialized as the space's variants are."""
        found = self.plans(1)
        if not found:
            raise self._plan_error
        return found[0]

    # -- measuring --------------------------------------------------------------------

    def budget_left(self) -> int | None:
        """Programs the budget still allows to time (None: no budget); 0 too once the
        time limit has passed (and something was timed)."""
        if self.out_of_time():
            return 0
        budget = self.options.budget
        return None if budget is None else max(0, budget - self.timed)

    def out_of_time(self) -> bool:
        """Whether the search's time limit has passed, with a candidate timed: a search
        stopped by time still has a result."""
        limit = self.options.time_limit_s
        return limit is not None and self.timed > 0 and \
            clock() - self.started >= limit

    def _spent(self) -> str:
        """Why nothing more is timed (:meth:`budget_left` is 0)."""
        if self.out_of_time():
            return f"the time limit of {self.options.time_limit_s:g} s was reached"
        return f"the budget of {self.options.budget} was spent"

    def expect(self, n: int) -> None:
        """Progress: ``n`` more candidates to measure (as far as the budget allows)."""
        left = self.budget_left()
        self.state.phase = "measure"
        self.state.total = self.state.done + (n if left is None else min(n, left))
        self.notify(self.state)

    def measure(self, c: Candidate, *, launch_times: bool = False) -> Candidate | None:
        """``c`` measured -- its recorded measurement reused, else timed by the runner
        (reference check first) and recorded -- and set in the pool; None when the
        budget is spent (``c`` then at stage ``budget``).  ``launch_times``: a program
        of several launches is timed with its launches broken down (a recorded
        measurement without the breakdown is timed again)."""
        step = self.start(c, launch_times=launch_times)
        if not isinstance(step, Pending):
            return step
        return self.finish(step, self.runner.measure(step.job))

    def start(self, c: Candidate, *, launch_times: bool = False, hold: bool = False
              ) -> Pending | Candidate | None:
        """The first half of :meth:`measure`: ``c`` settled without the runner (measured
        earlier, reused, invalid, or None when the budget is spent), else the
        :class:`Pending` job for the runner, counted against the budget now.
        ``hold``: ``c`` is at stage ``measuring`` until :meth:`finish` (a runner of
        several slots: the walk goes on meanwhile and must not pick it again)."""
        c = self.candidates.get(c.key, c)
        program = self.programs.get(c.key)
        several = len(program.launches) > 1 if program is not None else len(c.launches) > 1
        wanted = launch_times and several
        if c.measurement is not None and c.stage in ("timed", "reused") and not (
                wanted and c.measurement.status == "ok" and c.measurement.launch_ms is None):
            return c  # measured earlier in this search
        if c.stage == "measuring":
            return c  # in flight already (held by a runner of several slots)
        found = self.recorded.get(c.key)
        if found is not None and not (wanted and found.status == "ok"
                                      and found.launch_ms is None):
            self.state.reused += 1
            return self._settle(replace(c, stage="reused", measurement=found))
        if self.budget_left() == 0:
            self._set(replace(c, stage="budget", reason=self._spent()))
            return None
        if program is None:  # costed only: its code now
            self.generate([c])
            c = self.candidates[c.key]
            program = self.programs.get(c.key)
            if program is None:
                return c  # invalid, or a duplicate of another candidate
        try:
            check_program = self.check_program(c)
        except PolygpuError as e:
            c = replace(c, stage="invalid", reason=str(e).splitlines()[0])
            self._set(c)
            return c
        options = self.options
        best = self.state.best_ms
        # no race where the launch breakdown is wanted: it feeds other plans' times
        cutoff = best * options.race if options.race and best is not None \
            and not wanted else None
        # a check at the timed sizes is given up once its run shows the candidate
        # hopeless (Job.give_up_ms); never below GIVE_UP_FLOOR_MS, where a first run's
        # own costs (lazy loading, cold caches) could pass for slowness
        give_up = max(HOPELESS * best, GIVE_UP_FLOOR_MS) if cutoff is not None else None
        job = Job(key=c.key, spec=self.spec, function=self.function,
                  program=program, check_program=check_program,
                  params=dict(self.params),
                  check_params=_check_params(options, self.params, c.variant,
                                             _steps_of(self.prepared, c.variant)),
                  defines=tuple(options.defines),
                  include_dirs=tuple(options.include_dirs),
                  cubin=self.pool.cubins.get(c.key) if self.pool is not None else None,
                  arch=self.arch, seed=options.seed, scalars=dict(options.scalars or {}),
                  launch_times=wanted, cutoff_ms=cutoff, give_up_ms=give_up)
        self.timed += 1
        if hold:
            self._set(replace(c, stage="measuring"))
        return Pending(c, job)

    def prefetch(self, c: Candidate) -> None:
        """Generate now what :meth:`start` would generate for ``c`` (its program, its
        check program), to overlap that work with a measurement; any failure is left
        for :meth:`start` to meet and record."""
        c = self.candidates.get(c.key, c)
        if c.measurement is not None or c.key in self.recorded or self.budget_left() == 0:
            return
        try:
            if c.key not in self.programs:
                self.generate([c])
            if c.key in self.programs:
                self.check_program(self.candidates[c.key])
        except PolygpuError:
            pass

    def finish(self, pending: Pending, m: Measurement) -> Candidate:
        """The second half of :meth:`measure`: the runner's measurement recorded (the
        database, the kernel times) and the candidate settled."""
        c = pending.candidate
        row = None
        if self.database is not None:
            row = self.database.record(spec=self.spec, function=self.function_name,
                                       source_hash=self.digest, params=self.params,
                                       env=self.env, m=m)
        self._record_kernels(c, m, row)
        return self._settle(replace(c, stage="timed", measurement=m))

    def _settle(self, c: Candidate) -> Candidate:
        self._set(c)
        self.order.append(c.key)
        state, m = self.state, c.measurement
        state.done += 1
        if m.failed:
            state.failed += 1
        elif m.status == "slow":
            state.pruned += 1
        elif state.best_ms is None or m.time_ms < state.best_ms:
            state.best_ms, state.best_key = m.time_ms, c.key
        self.notify(state)
        return c

    # -- kernel times -----------------------------------------------------------------

    def kernel_key(self, variant: Variant, kernel: int) -> tuple[str, int, str]:
        """The kernel-times key of kernel ``kernel`` of ``variant``'s plan."""
        from polygpu.search.database import plan_identity

        target, built = self.prepared.of(variant)
        tr = target.transformation(variant)
        # a relayout's kernels are those of the relaid region: never the same plan
        statements = tr.kernels[kernel].statements + (("relaid",) if variant.relayout else ())
        return (plan_identity(variant.candidate, statements), kernel,
                canonical(built.for_kernel(kernel).to_json()))

    def kernel_times(self, c: Candidate, m: Measurement):
        """The :class:`~polygpu.search.database.KernelTime` of each kernel of ``c``'s
        program in ``m``: one per launch when ``m`` has the breakdown and each launch is
        one kernel (not device steps); else none."""
        from polygpu.search.database import KernelTime

        launch_ms = m.launch_ms
        program = self.programs.get(c.key)
        if launch_ms is None or program is None or c.variant.device_steps \
                or len(program.launches) < 2 or len(launch_ms) != len(program.launches) \
                or len(self.prepared.of(c.variant)[0].candidates[c.variant.candidate]
                       .kernels) != len(program.launches):
            return []
        return [KernelTime(*self.kernel_key(c.variant, k), t)
                for k, t in enumerate(launch_ms)]

    def kernel_time(self, variant: Variant, kernel: int) -> float | None:
        """The median of every time recorded for kernel ``kernel`` of ``variant``'s plan
        with its merged variant (this search's and the database's), or None."""
        found = self.kernel_table.get(self.kernel_key(variant, kernel))
        return statistics.median(found) if found else None

    def _record_kernels(self, c: Candidate, m: Measurement, row: int | None) -> None:
        times = self.kernel_times(c, m)
        for t in times:
            self.kernel_table.setdefault(t.key, []).append(t.time_ms)
        if times and self.database is not None:
            self.database.record_kernel_times(
                spec=self.spec, function=self.function_name, source_hash=self.digest,
                params=self.params, env=self.env, program=c.key, times=times,
                measurement=row)


def tune(spec: str, params: Mapping[str, int], runner: Runner, *,
         function: str | None = None, options: TuneOptions = TuneOptions(),
         database=None, limits: Limits | None = None,
         arch: str | None = None,
         progress: Callable[[Progress], None] | None = None,
         oracle: ResourceOracle | None = None) -> TuneResult:
    """Search the variants of ``spec``'s region at ``params`` (see the module doc);
    ``oracle`` tells registers and shared memory (default: ptxas)."""
    global _SERVICE
    outer, _SERVICE = _SERVICE, _CompileService(max(1, options.jobs or usable_cpus()))
    _SERVICE.warm(_region_args(spec, function, options))  # beside this process's own
    try:
        return _tune(spec, params, runner, function, options, database, limits, arch,
                     progress, oracle)
    finally:
        _SERVICE.close()
        _SERVICE = outer


def _tune(spec, params, runner, function, options, database, limits, arch, progress,
          oracle) -> TuneResult:
    from polygpu.search import resources
    from polygpu.search import space as space_

    prepared = _prepared(spec, function, tuple(options.defines), tuple(options.include_dirs))
    scop = prepared.analysis.scop
    missing = [p for p in scop.parameters if p not in params]
    if missing:
        raise PolygpuError(f"tune needs a value for {', '.join(missing)} "
                           f"(e.g. -p {missing[0]}=4096)", scop.loc)
    # an access outside its array at these sizes (or the check's) is the user's to hear
    # once, not every candidate's to fail with
    require_in_bounds(scop, params)
    if options.check_params is not None:
        require_in_bounds(scop, options.check_params)
    limits = limits or SM_90
    arch = arch or limits.arch
    state = Progress()
    notify = progress or (lambda _p: None)
    session = Session(spec, function, params, options, runner, database, prepared, limits,
                      arch, state, notify)
    strategy = STRATEGIES[options.strategy]
    warm = getattr(runner, "warm", None)  # its child sets up while the search begins
    if callable(warm):
        warm(spec, function, options.defines, options.include_dirs)

    # the variants the strategy starts from (default: the whole space), not costed yet
    first = getattr(strategy, "first_space", None)
    variants = first(session) if first is not None else \
        space_.space(prepared, params, options.space)
    if not variants:
        raise PolygpuError(f"{scop.function}: the search space is empty")
    notify(state)
    session.explore(variants)
    session.function_name = scop.function
    session.digest = source_hash(_region_text(spec, prepared))
    if database is not None:
        session.recorded = database.lookup(session.digest, session.function_name, params,
                                           session.env)
        session.kernel_table = database.kernel_times(session.digest, session.function_name,
                                                     params, session.env)

    pool = SearchPool(session.candidates, session.programs, params, limits, arch,
                      oracle or resources.default_oracle(), options.jobs, session=session)
    session.pool = pool
    state.phase = "nvcc"
    notify(state)
    # a strategy returns the candidates to time in order, or yields them one by one as
    # it costs and builds them (reading the budget left after each)
    kept = strategy(pool, options)
    left = session.budget_left()
    session.expect(len(kept) if isinstance(kept, Sequence) else
                   left if left is not None else len(pool.candidates))
    if getattr(strategy, "pipelined", False):
        _measure_overlapped(session, kept)
    else:
        for c in kept:
            session.measure(c)
    candidates = pool.candidates
    for c in list(candidates.values()):  # what the search never reached
        if c.stage == "unexplored":
            pool.set(replace(c, stage="budget", reason="not costed: the search stopped "
                             "before it (the budget bounds how far it looks)"))
        elif c.origin == "ranked" and c.measurement is None:
            del candidates[c.key]  # a seed of the search, outside the space: not a result
        elif c.stage == "kept" and c.measurement is None:
            pool.set(replace(c, stage="budget", reason=(
                session._spent() if session.out_of_time() or options.budget is not None
                else "not reached")))
    state.pruned = sum(1 for c in candidates.values() if c.stage.startswith("pruned"))
    state.phase = "done"
    notify(state)
    return TuneResult(spec, session.function_name, dict(params), session.env,
                      options.strategy, options, tuple(candidates.values()), session.programs,
                      session.digest, function, chosen=session.chosen,
                      order=tuple(session.order),
                      work={"costed": session.sketched, "generated": session.generated,
                            "checks": session.checked})


def _measure_overlapped(session: Session, kept) -> None:
    """Measure what the strategy yields, the runner working while the strategy costs and
    builds the next candidates (CPU work: isl, code generation, nvcc).  A runner with
    one slot (one GPU) measures one at a time, in order, as :meth:`Session.measure`
    would: candidate i is finished (recorded, the best so far updated) before i + 1 is
    started, so its race cutoff and the budget are what a sequential search would use,
    and the strategy's walk may rule i + 1 out then (``Pool.recheck``: picked before
    i's time was known).  A runner with ``slots`` > 1 (several GPUs:
    :class:`~polygpu.search.distributed.DaskRunner`) keeps that many in flight: each
    round takes the strategy's next candidates while slots are free (each held at stage
    ``measuring``, so the walk picks another), and finishes them as they end, in this
    thread alone (the database's one writer); a candidate's race cutoff is the best
    known when it starts.  Only for strategies that never measure
    inside their walk (``pipelined``)."""
    slots = max(1, int(getattr(session.runner, "slots", 1)))
    items = iter(kept)
    with concurrent.futures.ThreadPoolExecutor(slots, thread_name_prefix="polygpu-measure") \
            as worker:
        running: dict[concurrent.futures.Future, tuple[int, Pending]] = {}
        started = 0

        def finish_some(everything: bool = False) -> None:
            done, _ = concurrent.futures.wait(
                running, return_when=concurrent.futures.ALL_COMPLETED if everything
                else concurrent.futures.FIRST_COMPLETED)
            for future in sorted(done, key=lambda f: running[f][0]):  # in start order
                session.finish(running.pop(future)[1], future.result())

        while True:
            c = next(items, None)  # the strategy's work overlaps the measurements
            if c is not None and running:
                session.prefetch(c)  # and so does generating c's programs
            if c is None:
                if running:
                    finish_some(everything=True)
                return
            while len(running) >= slots:
                finish_some()
            recheck = getattr(session.pool, "recheck", None)
            if recheck is not None and not recheck(c):
                continue  # ruled out by a measurement that ended since its pick
            step = session.start(c, hold=slots > 1)
            if isinstance(step, Pending):
                running[worker.submit(session.runner.measure, step.job)] = (started, step)
                started += 1


def _steps_of(prepared, variant: Variant) -> frozenset[str]:
    """The step parameters (:func:`~polygpu.model.analysis.step_parameters`) whose
    loop ``variant``'s plan runs as host steps (``loops``: on the host, or in one block
    with ``device_steps``), each step the same kernels.  Not under a wavefront or isl's
    host schedule, nor inside a kernel's schedule, which may mix the time loop with the
    others: a kernel's guards there depend on the count, and the check must keep it."""
    candidates = prepared.of(variant)[0].candidates
    c = variant.candidate
    host = candidates[c].host if 0 <= c < len(candidates) else None
    if host is None or host.kind != "loops":
        return frozenset()
    return step_parameters(prepared.analysis)


def _check_params(options: TuneOptions, params, variant, steps=frozenset()) -> dict[str, int]:
    if options.check_params is not None:
        return dict(options.check_params)
    return check_parameters(params, variant, steps)


def _region_text(spec: str, prepared) -> str:
    """What identifies the region in the database: the file's text (the function is a
    separate key), so any edit invalidates old times."""
    path = spec.split(":")[0] if not os.path.exists(spec) else spec
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        return str(prepared.analysis.scop.domain)
