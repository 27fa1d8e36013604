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
   reference check, infinite otherwise.
5. **Measure** through a :class:`~polygpu.search.measurement.Runner`; every result is
   written to the tuning database as it arrives, and earlier results with the same key
   (source, function, parameters, variant, GPU, toolkit, driver, polygpu version) are
   reused instead of measured again.

The padding of every survivor is Algorithm 2's choice (``Variant.padding = -1``).
"""

from __future__ import annotations

import concurrent.futures
import math
import multiprocessing
import os
import pickle
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
           "Measurement", "Progress", "TuneOptions", "TuneResult", "check_parameters",
           "compile_worker", "concurrency", "model_order", "model_times", "predicted_cost",
           "register_limited_threads", "tune"]


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

    @property
    def measured(self) -> tuple[Candidate, ...]:
        return tuple(c for c in self.candidates if c.measurement is not None)

    @property
    def ranking(self) -> tuple[Candidate, ...]:
        """Measured candidates, best first (failures last)."""
        return tuple(sorted(self.measured, key=lambda c: (c.score, c.key)))

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
    from polygpu.memory.operand_loads import operand_loads
    from polygpu.memory.traffic import estimated_traffic
    from polygpu.pipeline import compile_variant, program_at

    try:
        prepared = _prepared(spec, function, defines, include_dirs)
        variant = Variant.from_json(variant_json)
        c = compile_variant(prepared, variant, params)
        checked = program_at(c, check_params) if variant.specialize else None
        scop = c.kernel_scop
        blocks = launch_blocks(c.program, params)
        names = [la.kernel for la in c.program.launches]
        costs = []
        for k, name, values, times in c.modelled_launches(params):
            # host loops: counted at a middle step, times the steps
            loads = operand_loads(scop, k, values, c.memory)
            costs.append(LaunchCost(
                kernel=name, runs=times,
                traffic_bytes=sum(t.bytes for t in estimated_traffic(
                    scop, k, name, values, c.memory)) * times,
                instances=loads.instances * times,
                operand_loads=round(loads.loads * times),
                blocks=blocks[names.index(name)],
                prefetched=c.memory.prefetches(k.index)))
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
    span = max(max(variant.tile), variant.time_tile or 1)
    cap = 2 * span + 19
    if not variant.specialize:
        return {k: min(v, cap) for k, v in params.items()}
    # a specialized variant is checked as the same variant specialized at the check
    # sizes: keep each size's remainder modulo the tiles, so the checked code has the
    # same full and partial tiles (the same guards) as the timed code
    period = math.lcm(*variant.tile, variant.time_tile or 1)
    sizes = {}
    for k, v in params.items():
        r = v % period
        sizes[k] = v if v <= cap else r + max(1, min(2, (v - r) // period)) * period
    return sizes


# ---------------------------------------------------------------------------------- run


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
    env = runner.environment()
    state = Progress()
    notify = progress or (lambda _p: None)

    variants = space_.space(prepared, params, options.space)
    if not variants:
        raise PolygpuError(f"{scop.function}: the search space is empty")
    notify(state)
    compiled = _compile_all(spec, function, options, variants, params)

    candidates: dict[str, Candidate] = {}
    programs: dict[str, KernelProgram] = {}
    check_programs: dict[str, KernelProgram] = {}  # of specialized variants
    seen: dict[tuple, str] = {}
    for v, c in zip(variants, compiled, strict=True):
        key = canonical(v.to_json())
        if "error" in c:
            candidates[key] = Candidate(key, v, "invalid", reason=c["error"])
            continue
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
        if identity in seen:
            cand = replace(cand, stage="duplicate", duplicate_of=seen[identity])
        else:
            seen[identity] = key
            programs[key] = program
            if c["check_program"] is not None:
                check_programs[key] = c["check_program"]
        candidates[key] = cand
    function_name = next((p.function for p in programs.values()), scop.function)
    digest = source_hash(_region_text(spec, prepared))

    pool = Pool(candidates, programs, params, limits, arch,
                oracle or resources.default_oracle(), options.jobs)
    state.phase = "nvcc"
    notify(state)
    kept = STRATEGIES[options.strategy](pool, options)
    candidates, cubins = pool.candidates, pool.cubins

    state.pruned = sum(1 for c in candidates.values() if c.stage.startswith("pruned"))
    state.phase = "measure"
    state.total = len(kept) if options.budget is None else min(len(kept), options.budget)
    notify(state)

    recorded = database.lookup(digest, function_name, params, env) if database else {}
    timed = 0
    for c in kept:
        if c.key in recorded:
            m = recorded[c.key]
            candidates[c.key] = replace(c, stage="reused", measurement=m)
            state.reused += 1
        elif options.budget is not None and timed >= options.budget:
            candidates[c.key] = replace(c, stage="budget",
                                        reason=f"the budget of {options.budget} was spent")
            continue
        else:
            job = Job(key=c.key, spec=spec, function=function, program=programs[c.key],
                      check_program=check_programs.get(c.key),
                      params=dict(params), check_params=_check_params(options, params,
                                                                      c.variant),
                      defines=tuple(options.defines),
                      include_dirs=tuple(options.include_dirs), cubin=cubins.get(c.key),
                      arch=arch, seed=options.seed, scalars=dict(options.scalars or {}))
            m = runner.measure(job)
            timed += 1
            if database is not None:
                database.record(spec=spec, function=function_name, source_hash=digest,
                                params=params, env=env, m=m)
            candidates[c.key] = replace(c, stage="timed", measurement=m)
        state.done += 1
        m = candidates[c.key].measurement
        if m.status != "ok":
            state.failed += 1
        elif state.best_ms is None or m.time_ms < state.best_ms:
            state.best_ms, state.best_key = m.time_ms, c.key
        notify(state)
    state.phase = "done"
    notify(state)
    return TuneResult(spec, function_name, dict(params), env, options.strategy, options,
                      tuple(candidates.values()), programs, digest, function)


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
