"""The model-pruned empirical search (paper §6): compile, prune, time, keep the best.

:func:`tune` runs the pipeline for one region and parameter set:

1. **Space** (:mod:`polygpu.search.space`): the variants of the strategy's space.
2. **Compile** every variant in parallel processes (isl tiling, memory placement, CUDA
   text, and the fast traffic estimate of :func:`polygpu.memory.traffic.estimated_traffic`);
   variants that generate identical code are measured once.  The worker processes are
   forked from a fresh ``python -m polygpu.search.runner --compile`` child, never spawned
   from the caller's process, so a plain script without an ``if __name__ ==
   "__main__":`` guard is not re-run in each worker.
3. **Prune** (strategy ``model`` only; each strategy is a function of
   :mod:`polygpu.search.strategies`, the rules are :mod:`polygpu.search.pruning`):

   * *traffic*: drop structures whose modelled global loads and stores exceed the fewest
     by more than ``traffic_slack`` percent (the paper's p);
   * *occupancy*: the resource oracle (:mod:`polygpu.search.resources`: nvcc compiles
     the survivors in parallel, no GPU needed, and ptxas reports registers and shared
     memory); with the target's limits (the device's, sm_90
     without one) this gives resident warps per SM.  A variant's *concurrency* is the
     fraction of the whole GPU's warp slots its launch can fill (resident warps per SM,
     and no more blocks than the grid has).  Drop variants below ``min_concurrency``
     (25 %) of the best concurrency among the candidates, and variants outside
     {T, T/2, T/4} threads per block, T being the largest warp multiple the kernel's
     registers allow.

4. **Order and budget**: ``model`` times survivors by :func:`~polygpu.search.cost.
   predicted_cost` (per
   launch, the longer of the modelled traffic over the bandwidth and the instances'
   FMAs and operand loads over the issue rate, both scaled by how much of the GPU that
   launch's grid and concurrency can use; summed over the launches and their host
   steps, with a launch latency each);
   ``exhaustive`` every variant in space order; ``random`` a seeded random order.  All
   stop after ``budget`` timed candidates (measurements reused from the database do not
   count) and rank by the same cost: the median time of a candidate that passed the
   reference check, infinite otherwise.  ``per-kernel``
   (:mod:`polygpu.search.strategies.per_kernel`) measures as it searches: it compiles
   only the cost model's plan first (``first_space``), then more variants and their
   measurements through the pool's :class:`Session`, and names the variant it chose
   (:attr:`TuneResult.chosen`, ranked first).
5. **Measure** through a :class:`~polygpu.search.measurement.Runner`; every result is
   written to the tuning database as it arrives, and earlier results with the same key
   (source, function, parameters, variant, GPU, toolkit, driver, polygpu version) are
   reused instead of measured again.  A program of several kernels timed with its
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
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

from polygpu.codegen.program import KernelProgram
from polygpu.errors import PolygpuError
from polygpu.model.bounds import require_in_bounds
from polygpu.runtime.grid import launch_blocks
from polygpu.schedule.variant import Variant
from polygpu.search.candidate import Candidate, LaunchCost
from polygpu.search.cost import LAUNCH_SECONDS, model_order, model_times, predicted_cost
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

    def __post_init__(self):
        if self.strategy not in STRATEGIES:
            raise PolygpuError(f"--strategy {self.strategy}: one of {', '.join(STRATEGIES)}")
        if self.budget is not None and self.budget < 1:
            raise PolygpuError("--budget must be at least 1")
        if self.traffic_slack < 0 or not 0 <= self.min_concurrency <= 1:
            raise PolygpuError("--traffic-slack >= 0 and 0 <= --min-concurrency <= 1")


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
            if c.measurement is not None and c.measurement.status != "ok":
                stage = "failed"
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


def _compile_one(spec: str, function: str | None, defines: tuple[str, ...],
                 include_dirs: tuple[str, ...], variant_json: str,
                 params: Mapping[str, int], check_params: Mapping[str, int]) -> dict:
    """Worker: one variant -> its program and model numbers (picklable), or the error.
    A specializing variant also gets the program of its reference check: the same
    variant specialized at ``check_params``."""
    from polygpu.pipeline import compile_variant, program_at
    from polygpu.search.plan_model import launch_costs

    try:
        prepared = _prepared(spec, function, defines, include_dirs)
        variant = Variant.from_json(variant_json)
        c = compile_variant(prepared, variant, params)
        checked = program_at(c, check_params) if variant.specialize else None
        # a device-steps program (one launch running every kernel's steps) is counted on
        # its host-launched twin: the same kernels, one launch per kernel and step
        model = compile_variant(prepared, replace(variant, device_steps=False), params) \
            if variant.device_steps else c
        blocks = launch_blocks(c.program, params)
        costs = list(launch_costs(model, params, guess_concurrency=False))
        if variant.device_steps:  # all of it in the one launch, of one block
            costs = [LaunchCost(kernel=c.program.launches[0].kernel, runs=1,
                                traffic_bytes=sum(x.traffic_bytes for x in costs),
                                instances=sum(x.instances for x in costs),
                                operand_loads=sum(x.operand_loads for x in costs),
                                blocks=blocks[0])]
        return {"program": c.program, "check_program": checked,
                "traffic": sum(x.traffic_bytes for x in costs),
                "instances": sum(x.instances for x in costs),
                "prefetched": any(x.prefetched for x in costs),
                "operand_loads": sum(x.operand_loads for x in costs),
                "blocks": blocks, "launches": tuple(costs),
                "function": c.program.function}
    except PolygpuError as e:
        return {"error": str(e).splitlines()[0]}
    except Exception as e:  # a polygpu bug on one variant must not end the search
        return {"error": f"internal error: {type(e).__name__}: {e}"}


def _compile_all(spec, function, options: TuneOptions, variants: Sequence[Variant],
                 params: Mapping[str, int]) -> list[dict]:
    texts = [canonical(v.to_json()) for v in variants]
    checks = [_check_params(options, params, v) for v in variants]
    args = (spec, function, tuple(options.defines), tuple(options.include_dirs))
    workers = max(1, min(options.jobs or os.cpu_count() or 1, len(texts)))
    tasks = [(*args, t, dict(params), c) for t, c in zip(texts, checks, strict=True)]
    if workers > 1 and len(texts) >= 8:
        results = _compile_in_child(tasks, workers)
        if results is not None:
            return results
    return [_compile_one(*task) for task in tasks]


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
    if tasks:
        try:  # once here, inherited by every forked worker
            _prepared(*tasks[0][:4])
        except Exception:  # each task reports its own error
            pass
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    with concurrent.futures.ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context(method)) as pool:
        results = list(pool.map(_compile_one, *zip(*tasks, strict=True)))
    tmp = directory / "results.pkl.tmp"
    tmp.write_bytes(pickle.dumps(results))
    os.replace(tmp, directory / "results.pkl")
    return 0


def check_parameters(params: Mapping[str, int], variant: Variant) -> dict[str, int]:
    """Sizes of the reference check: each parameter at most two block tiles plus an odd
    remainder (so full tiles, partial tiles and the time tile's remainder all run), and
    never more than the timed size."""
    # every kernel's own tiles (per-kernel overrides), and the program-wide ones
    merged = [variant.for_kernel(k) for k, _ in variant.kernels] + [replace(variant,
                                                                          kernels=())]
    span = max(max(*v.tile, v.time_tile or 1) for v in merged)
    cap = 2 * span + 19
    if not variant.specialize:
        return {k: min(v, cap) for k, v in params.items()}
    # a specialized variant is checked as the same variant specialized at the check
    # sizes: keep each size's remainder modulo the tiles, so the checked code has the
    # same full and partial tiles (the same guards) as the timed code
    period = math.lcm(*(t for v in merged for t in (*v.tile, v.time_tile or 1)))
    sizes = {}
    for k, v in params.items():
        r = v % period
        sizes[k] = v if v <= cap else min(v, r + max(1, min(2, (v - r) // period)) * period)
    return sizes


# ---------------------------------------------------------------------------------- run


@dataclass
class SearchPool(Pool):
    """The pool of one :func:`tune` call, with its :class:`Session`: a strategy that
    measures as it searches (``per-kernel``) compiles more variants and times them
    through ``session``; the others never touch it."""

    session: Session | None = None


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
        self.candidates: dict[str, Candidate] = {}
        self.programs: dict[str, KernelProgram] = {}
        self.check_programs: dict[str, KernelProgram] = {}  # of specialized variants
        self._seen: dict[tuple, str] = {}
        self.pool: SearchPool | None = None
        self.function_name = prepared.analysis.scop.function
        self.digest = ""
        self.recorded: dict[str, Measurement] = {}  # the database's, by variant key
        # (plan, kernel, kernel variant) -> every time recorded, oldest first
        self.kernel_table: dict[tuple[str, int, str], list[float]] = {}
        self.timed = 0
        self.chosen: str | None = None
        self._plan: Variant | None = None

    # -- compiling --------------------------------------------------------------------

    def compile(self, variants: Sequence[Variant]) -> list[Candidate]:
        """Each of ``variants`` as a candidate of the pool (compiled now unless it is
        there already): ``kept``, ``duplicate`` (same code as ``duplicate_of``) or
        ``invalid``; in the order given."""
        # as read back from JSON (what the workers compile): per-kernel overrides in
        # one order, so a candidate's variant is the one its program names
        variants = [Variant.from_json(v.to_json()) if v.kernels else v for v in variants]
        keys = [canonical(v.to_json()) for v in variants]
        new = {k: v for k, v in zip(keys, variants, strict=True) if k not in self.candidates}
        compiled = _compile_all(self.spec, self.function, self.options, list(new.values()),
                                self.params) if new else []
        for (key, v), c in zip(new.items(), compiled, strict=True):
            self._add(key, v, c)
        return [self.candidates[k] for k in keys]

    def _add(self, key: str, v: Variant, c: dict) -> None:
        if "error" in c:
            self._set(Candidate(key, v, "invalid", reason=c["error"]))
            return
        program = c["program"]
        # the same code whatever the header comment says (it names the variant)
        identity = ("\n".join(line for line in program.source.splitlines()
                               if not line.startswith("//")), program.launches)
        launches = program.launches
        cand = Candidate(key, v, "kept", traffic_bytes=c["traffic"],
                         instances=c["instances"], operand_loads=c["operand_loads"],
                         prefetched=c["prefetched"],
                         shared_bytes=max(la.shared_bytes for la in launches),
                         threads=max(math.prod(la.block) for la in launches),
                         blocks=max(c["blocks"]), launches=c["launches"])
        if identity in self._seen:
            cand = replace(cand, stage="duplicate", duplicate_of=self._seen[identity])
        else:
            self._seen[identity] = key
            self.programs[key] = program
            if c["check_program"] is not None:
                self.check_programs[key] = c["check_program"]
        self._set(cand)

    def _set(self, c: Candidate) -> None:
        if self.pool is not None:
            self.pool.set(c)
        else:
            self.candidates[c.key] = c

    def plan(self) -> Variant:
        """The cost model's plan at these sizes (:func:`polygpu.search.plan_model.
        choose`), specialized as the space's variants are."""
        if self._plan is None:
            from polygpu.search import plan_model

            chosen = plan_model.choose(self.prepared, self.params, self.limits).variant
            self._plan = replace(chosen, specialize=self.options.space.specialize)
        return self._plan

    # -- measuring --------------------------------------------------------------------

    def budget_left(self) -> int | None:
        """Programs the budget still allows to time (None: no budget)."""
        budget = self.options.budget
        return None if budget is None else max(0, budget - self.timed)

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
        c = self.candidates.get(c.key, c)
        several = len(self.programs[c.key].launches) > 1
        wanted = launch_times and several
        if c.measurement is not None and c.stage in ("timed", "reused") and not (
                wanted and c.measurement.status == "ok" and c.measurement.launch_ms is None):
            return c  # measured earlier in this search
        found = self.recorded.get(c.key)
        if found is not None and not (wanted and found.status == "ok"
                                      and found.launch_ms is None):
            c = replace(c, stage="reused", measurement=found)
            self.state.reused += 1
        elif self.budget_left() == 0:
            self._set(replace(c, stage="budget",
                              reason=f"the budget of {self.options.budget} was spent"))
            return None
        else:
            options = self.options
            job = Job(key=c.key, spec=self.spec, function=self.function,
                      program=self.programs[c.key], check_program=self.check_programs.get(
                          c.key), params=dict(self.params),
                      check_params=_check_params(options, self.params, c.variant),
                      defines=tuple(options.defines),
                      include_dirs=tuple(options.include_dirs),
                      cubin=self.pool.cubins.get(c.key) if self.pool is not None else None,
                      arch=self.arch, seed=options.seed, scalars=dict(options.scalars or {}),
                      launch_times=wanted)
            m = self.runner.measure(job)
            self.timed += 1
            row = None
            if self.database is not None:
                row = self.database.record(spec=self.spec, function=self.function_name,
                                           source_hash=self.digest, params=self.params,
                                           env=self.env, m=m)
            self._record_kernels(c, m, row)
            c = replace(c, stage="timed", measurement=m)
        self._set(c)
        state, m = self.state, c.measurement
        state.done += 1
        if m.status != "ok":
            state.failed += 1
        elif state.best_ms is None or m.time_ms < state.best_ms:
            state.best_ms, state.best_key = m.time_ms, c.key
        self.notify(state)
        return c

    # -- kernel times -----------------------------------------------------------------

    def kernel_key(self, variant: Variant, kernel: int) -> tuple[str, int, str]:
        """The kernel-times key of kernel ``kernel`` of ``variant``'s plan."""
        from polygpu.search.database import plan_identity

        tr = self.prepared.candidates[variant.candidate]
        return (plan_identity(variant.candidate, tr.kernels[kernel].statements), kernel,
                canonical(variant.for_kernel(kernel).to_json()))

    def kernel_times(self, c: Candidate, m: Measurement):
        """The :class:`~polygpu.search.database.KernelTime` of each kernel of ``c``'s
        program in ``m``: one per launch when ``m`` has the breakdown and each launch is
        one kernel (not device steps); else none."""
        from polygpu.search.database import KernelTime

        launch_ms = m.launch_ms
        program = self.programs.get(c.key)
        if launch_ms is None or program is None or c.variant.device_steps \
                or len(program.launches) < 2 or len(launch_ms) != len(program.launches) \
                or len(self.prepared.candidates[c.variant.candidate].kernels) \
                != len(program.launches):
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

    # a strategy that compiles as it goes says what to compile first
    first = getattr(strategy, "first_space", None)
    variants = first(session) if first is not None else \
        space_.space(prepared, params, options.space)
    if not variants:
        raise PolygpuError(f"{scop.function}: the search space is empty")
    notify(state)
    session.compile(variants)
    session.function_name = next((p.function for p in session.programs.values()),
                                 scop.function)
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
    kept = strategy(pool, options)
    candidates = pool.candidates

    state.pruned = sum(1 for c in candidates.values() if c.stage.startswith("pruned"))
    session.expect(len(kept))
    for c in kept:
        session.measure(c)
    state.phase = "done"
    notify(state)
    return TuneResult(spec, session.function_name, dict(params), session.env,
                      options.strategy, options, tuple(candidates.values()), session.programs,
                      session.digest, function, chosen=session.chosen)


def _check_params(options: TuneOptions, params, variant) -> dict[str, int]:
    if options.check_params is not None:
        return dict(options.check_params)
    return check_parameters(params, variant)


def _region_text(spec: str, prepared) -> str:
    """What identifies the region in the database: the file's text (the function is a
    separate key), so any edit invalidates old times."""
    path = spec.split(":")[0] if not os.path.exists(spec) else spec
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        return str(prepared.analysis.scop.domain)
