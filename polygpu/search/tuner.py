"""The model-pruned empirical search (paper §6): compile, prune, time, keep the best.

:func:`tune` runs the pipeline for one region and parameter set:

1. **Space** (:mod:`polygpu.search.space`): the variants of the strategy's space.
2. **Compile** every variant in parallel processes (isl tiling, memory placement, CUDA
   text, and the fast traffic estimate of :func:`polygpu.memory.traffic.estimated_traffic`);
   variants that generate identical code are measured once.  The worker processes are
   forked from a fresh ``python -m polygpu.search.runner --compile`` child, never spawned
   from the caller's process, so a plain script without an ``if __name__ ==
   "__main__":`` guard is not re-run in each worker.
3. **Prune** (strategy ``model`` only):

   * *traffic*: drop structures whose modelled global loads and stores exceed the fewest
     by more than ``traffic_slack`` percent (the paper's p);
   * *occupancy*: nvcc compiles the survivors (in parallel, no GPU needed) and ptxas
     reports registers and shared memory; with the target's limits (the device's, sm_90
     without one) this gives resident warps per SM.  A variant's *concurrency* is the
     fraction of the whole GPU's warp slots its launch can fill (resident warps per SM,
     and no more blocks than the grid has).  Drop variants below ``min_concurrency``
     (25 %) of the best concurrency among the candidates, and variants outside
     {T, T/2, T/4} threads per block, T being the largest warp multiple the kernel's
     registers allow.

4. **Order and budget**: ``model`` times survivors by :func:`predicted_cost` (per
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
import random
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
from polygpu.search.measurement import (
    Environment,
    Job,
    Measurement,
    Runner,
    canonical,
    source_hash,
)
from polygpu.search.occupancy import SM_90, Limits, occupancy
from polygpu.search.space import SpaceOptions

STRATEGIES = ("model", "exhaustive", "random")
REGISTERS_PER_BLOCK = 65536


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
class LaunchCost:
    """One launch of a candidate as the cost model sees it, over all its ``runs`` (its
    host steps; 1 without host loops): modelled global traffic, statement instances and
    operand loads, and the grid.  ``concurrency`` comes from ptxas (None before nvcc).
    The model prices each launch on its own: a small reduction kernel of 16 blocks
    beside a wide product kernel is slow because of its grid, whatever the product's."""

    kernel: str
    runs: int
    traffic_bytes: int
    instances: int
    operand_loads: int
    blocks: int
    prefetched: bool = False
    concurrency: float | None = None


@dataclass(frozen=True)
class Candidate:
    """One variant and what the search learnt about it.

    ``stage`` is where it stopped: ``timed`` (it has a measurement), ``reused`` (its
    measurement came from the database), ``pruned-traffic``, ``pruned-spills``,
    ``pruned-occupancy``, ``pruned-threads``, ``duplicate`` (same code as
    ``duplicate_of``), ``invalid`` (polygpu or nvcc could not compile it: ``reason``),
    ``budget`` (not reached)."""

    key: str
    variant: Variant
    stage: str
    reason: str = ""
    traffic_bytes: int | None = None
    instances: int = 0  # statement instances (one arithmetic instruction each, modelled)
    operand_loads: int = 0  # load instructions for their operands (operand_loads model)
    prefetched: bool = False  # some shared copy-in is prefetched through registers
    shared_bytes: int = 0
    threads: int = 0  # per block (the largest over the launches)
    blocks: int = 0  # in the largest grid
    registers: int | None = None
    spill_bytes: int = 0  # ptxas's spill stores + loads, all kernels
    occupancy: float | None = None  # resident warps / maximum, per SM (widest launch)
    concurrency: float | None = None  # fraction of the GPU's warp slots (widest launch)
    duplicate_of: str = ""
    measurement: Measurement | None = None
    launches: tuple[LaunchCost, ...] = ()  # per launch; () = one, as the totals say

    @property
    def score(self) -> float:
        return self.measurement.score if self.measurement else math.inf


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
    from polygpu.codegen.staging import prefetched
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
                prefetched=prefetched(scop, k, list(c.memory.of_kernel(k.index).values()))))
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


# ------------------------------------------------------------------------------- prune


def _main_grid(c: Candidate) -> int:
    """Blocks of the launch that moves the most data (the one that sets the time)."""
    if not c.launches:
        return c.blocks
    return max(c.launches, key=lambda x: x.traffic_bytes).blocks


def register_limited_threads(registers: int, limits: Limits = SM_90) -> int:
    """T: the most threads per block (a warp multiple, <= 1024) that ``registers`` per
    thread allow, registers being allocated per warp in units of 256."""
    per_warp = -(-max(registers, 1) * limits.warp_size // limits.register_unit) \
        * limits.register_unit
    warps = min(REGISTERS_PER_BLOCK // per_warp, 1024 // limits.warp_size)
    return warps * limits.warp_size


def concurrency(threads: int, registers: int, shared: int, blocks: int, sms: int,
                limits: Limits = SM_90) -> tuple[float, float]:
    """(occupancy per SM, fraction of the GPU's warp slots a grid of ``blocks`` fills).

    The second counts only the blocks that can be resident at once, and a grid of fewer
    blocks than SMs leaves SMs idle: 8 blocks of 1024 threads fill 8 SMs, not 4 % of
    every SM."""
    occ = occupancy(threads, registers, shared, limits)
    if occ.blocks_per_sm == 0:
        return 0.0, 0.0
    warps = -(-threads // limits.warp_size)
    resident = min(blocks, occ.blocks_per_sm * sms) * warps
    return occ.fraction, resident / (sms * limits.max_threads_per_sm // limits.warp_size)


def active_sms(blocks: int, sms: int) -> float:
    """The fraction of SMs a grid of ``blocks`` gives work to."""
    return min(1.0, blocks / sms)


SATURATION = 0.25  # concurrency from which memory-level parallelism stops helping
# ... from which issue stops helping: two warps per scheduler whose register tiles give
# each many independent FMAs (mm's 8 x 8 tiles at 8 warps per SM reach 0.8x cuBLAS)
ISSUE_SATURATION = 0.125


# what one launch costs beyond its work: the launch latency of back-to-back launches
# (a few microseconds); what a host loop of thousands of steps pays per step
LAUNCH_SECONDS = 3e-6


def _launches(c: Candidate) -> tuple[LaunchCost, ...]:
    """``c``'s launches; one standing for them all when only the totals are known."""
    return c.launches or (LaunchCost("", 1, c.traffic_bytes or 0, c.instances,
                                     c.operand_loads, c.blocks, c.prefetched,
                                     c.concurrency),)


def _launch_times(x: LaunchCost, limits: Limits) -> tuple[float, float]:
    sms = limits.multiprocessors
    active = active_sms(max(x.blocks, 1), sms)
    concurrency_ = max(x.concurrency or 0.0, 1e-6)
    # a prefetching staged kernel issues a tile's loads a whole tile before their use:
    # its warps do not wait for DRAM, so concurrency need not hide the latency
    memory_share = active * (1.0 if x.prefetched else min(1.0, concurrency_ / SATURATION))
    issue_share = active * min(1.0, concurrency_ / ISSUE_SATURATION)
    memory = x.traffic_bytes / limits.dram_bytes_per_s / max(memory_share, 1e-9)
    issue = (x.instances + x.operand_loads) / (
        sms * limits.fp32_lanes_per_sm * limits.clock_hz) / max(issue_share, 1e-9)
    return memory, issue


def model_times(c: Candidate, limits: Limits = SM_90) -> tuple[float, float]:
    """(memory, issue) seconds of the model, summed over the launches (see
    :func:`predicted_cost`)."""
    times = [_launch_times(x, limits) for x in _launches(c)]
    return sum(m for m, _ in times), sum(i for _, i in times)


def predicted_cost(c: Candidate, limits: Limits = SM_90) -> float:
    """The model's order for timing (a budget times the most promising first), in
    seconds: per launch, the longer of

    * the memory time: modelled traffic over the DRAM bandwidth, and
    * the issue time: one instruction per statement instance plus its operand loads
      (:mod:`polygpu.memory.operand_loads`) over the GPU's FP32 issue rate --
      what orders compute-bound kernels like mm, whose traffic a good tiling has made
      small: bigger register tiles and vector loads need fewer loads per FMA;

    each over the share of the GPU that launch can use: the SMs its grid occupies and,
    on each, its concurrency up to what hides latency (a quarter of the warp slots for
    loads, unless the kernel prefetches; an eighth for issue); summed over the launches,
    plus :data:`LAUNCH_SECONDS` per run of each.  Only an order: the times decide."""
    return sum(max(_launch_times(x, limits)) + x.runs * LAUNCH_SECONDS
               for x in _launches(c))


def model_order(c: Candidate, limits: Limits = SM_90) -> tuple:
    """Sort key of the ``model`` strategy: predicted cost, then the sum of the two
    times (of two compute-bound variants, the one with less traffic), then the key."""
    memory, issue = model_times(c, limits)
    return (predicted_cost(c, limits), memory + issue, c.key)


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
         progress: Callable[[Progress], None] | None = None) -> TuneResult:
    """Search the variants of ``spec``'s region at ``params`` (see the module doc)."""
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

    from polygpu.search.runner import compile_cubins

    cubins: dict[str, bytes] = {}

    def build(batch: list[Candidate]) -> None:
        """nvcc for ``batch``, in parallel: resources (occupancy, spills), the binary."""
        built = compile_cubins([programs[c.key] for c in batch], arch, jobs=options.jobs)
        for c, b in zip(batch, built, strict=True):
            if isinstance(b, Exception):
                candidates[c.key] = replace(c, stage="invalid", reason=str(b).splitlines()[0]
                                            if str(b) else repr(b))
                continue
            cubins[c.key] = b.binary
            program = programs[c.key]
            regs, occ, conc, most_threads, spills = 0, math.inf, math.inf, -1, 0
            by_kernel = {}
            for launch, blocks in zip(program.launches, launch_blocks(program, params),
                                      strict=True):
                res = b.resources.get(launch.kernel)
                r = res.registers if res else 0
                smem = launch.shared_bytes + (res.shared_static if res else 0)
                o, k = concurrency(math.prod(launch.block), r, smem, blocks,
                                   limits.multiprocessors, limits)
                by_kernel[launch.kernel] = k
                regs = max(regs, r)
                spills += (res.spill_stores + res.spill_loads) if res else 0
                # the launch with the most threads stands for the program: a small
                # initialisation kernel beside it says nothing about the bandwidth drawn
                if blocks * math.prod(launch.block) > most_threads:
                    most_threads, occ, conc = blocks * math.prod(launch.block), o, k
            costs = tuple(replace(x, concurrency=by_kernel.get(x.kernel))
                          for x in c.launches)
            candidates[c.key] = replace(c, registers=regs, occupancy=occ, concurrency=conc,
                                        spill_bytes=spills, launches=costs)
            if options.strategy == "model" and spills:
                # a register tile that does not fit the registers the block size leaves
                # (ptxas caps them by __launch_bounds__) spills to local memory: traffic
                # the model does not count, and it costs far more than the tile saves
                candidates[c.key] = replace(candidates[c.key], stage="pruned-spills",
                                            reason=(
                    f"ptxas spills {spills} bytes of registers to local memory "
                    f"({regs} registers per thread, {c.threads} threads per block)"))

    state.phase = "nvcc"
    notify(state)
    kept = [c for c in candidates.values() if c.stage == "kept"]
    if options.strategy == "model" and kept:
        # traffic pruning against the fewest loads and stores of a variant that runs
        # without spills: the least-traffic tilings are often the largest register
        # tiles, which spill; then the bound moves up and nvcc sees the newly admitted
        least = None
        while True:
            unbuilt = [c for c in candidates.values()
                    if c.stage in ("kept", "pruned-traffic") and c.registers is None]
            built_ok = [c for c in candidates.values() if c.stage == "kept"
                        and c.registers is not None]
            pool = built_ok + unbuilt
            # a grid of fewer blocks than SMs leaves the rest idle: its small traffic
            # (a few huge tiles, one loop on a thread) is no floor for the variants
            # whose main launch fills the GPU
            filling = [c for c in pool if _main_grid(c) >= limits.multiprocessors]
            floor = min((c.traffic_bytes for c in filling or pool), default=None)
            if floor is None or floor == least:
                break
            least = floor
            bound = least * (1 + options.traffic_slack / 100)
            for c in unbuilt:
                if c.traffic_bytes > bound:
                    candidates[c.key] = replace(c, stage="pruned-traffic", reason=(
                        f"{c.traffic_bytes:,} bytes modelled, more than "
                        f"{options.traffic_slack:g}% above the fewest of a variant "
                        f"without spills ({least:,})"))
                else:
                    candidates[c.key] = replace(c, stage="kept", reason="")
            build([c for c in candidates.values()
                   if c.stage == "kept" and c.registers is None])
    else:
        build(kept)
    kept = [c for c in candidates.values() if c.stage == "kept"]

    if options.strategy == "model" and kept:
        widest = max(c.threads for c in kept)  # the space's own largest block
        for c in kept:
            t = min(register_limited_threads(c.registers or 1, limits), widest)
            if c.threads > t or c.threads < t // 4:
                candidates[c.key] = replace(c, stage="pruned-threads", reason=(
                    f"{c.threads} threads per block, outside {{T, T/2, T/4}} for "
                    f"T = {t} ({c.registers} registers per thread)"))
        kept = [c for c in candidates.values() if c.stage == "kept"]
        best_conc = max((c.concurrency for c in kept), default=0.0)
        for c in kept:
            if c.concurrency < options.min_concurrency * best_conc:
                candidates[c.key] = replace(c, stage="pruned-occupancy", reason=(
                    f"concurrency {c.concurrency:.1%} (occupancy {c.occupancy:.0%}), below "
                    f"{options.min_concurrency:.0%} of the best ({best_conc:.1%})"))
        kept = [c for c in candidates.values() if c.stage == "kept"]
        kept.sort(key=lambda c: model_order(c, limits))
    elif options.strategy == "random":
        random.Random(options.seed).shuffle(kept)

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
