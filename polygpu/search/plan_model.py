"""The default plan at known sizes: the cost model's top plan among a few, no GPU needed.

Without a search, a program used to be compiled as scheduler candidate 0 with one fixed
tile.  When the sizes are known (``compile -p``, ``optimize(params=...)``), that choice
can be made by the model instead: :func:`plan_variants` lists a handful of plans -- the
best scheduler candidates, each with a few block shapes (a wide row, a square tile, a
register tile), and for candidates with host loops the same loops run on the device in
one block (``device_steps``) -- and :func:`choose` ranks them by :func:`estimate`.

The estimate reuses the search's model (:func:`polygpu.search.cost.predicted_cost`: per
launch the longer of the modelled traffic over the bandwidth and the instances' issue
time, each over the share of the GPU the grid and its concurrency use, plus a latency
per launch).  Two things it adds, because the default must also choose between
launching host steps and running them on the device:

* without ptxas, registers are guessed from the points per thread (:func:`_registers`),
  so the concurrency is the occupancy calculator's for that guess;
* a device-steps plan runs every step's kernels one after the other in *one* block: per
  kernel and step, its instances over the block's threads in rounds of one dependent
  global access each (:data:`ROUND_SECONDS`), and never faster than one SM's share of
  the bandwidth and issue rate;
* a batch (a ``batch`` host schedule: one element per block, or per group of a block's
  threads, its steps inside) is that block's rounds on every resident block at once,
  and never faster than the issue its warps need -- every round and every block
  iteration costs each of an element's warps a few cycles, working or idle
  (:data:`RESIDENT_WARP_CYCLES`, fitted on the H200), the compulsory traffic (each
  array read and written once: an element's steps reuse it from the caches) and the
  issue rate of the whole GPU (an element resident in shared memory loads its
  operands from there, never scattered).

The constants were measured on the H100 (``tuning/results/NVIDIA-H100-80GB-HBM3/
plans_polybench.md``): 8000 host launches of triangular solve took 72.8 ms (9.1 us per
dependent launch); its device steps took 36.5 ms for 4000 steps of ~16 rounds (0.57 us a
round) with 128 threads and 114 ms for ~62 rounds (0.46 us) with 32.  The estimate is an
order, not a prediction of the time: ``tests/test_plan_model.py`` replays the recorded
measurements and checks the order picks a plan close to the best measured one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from polygpu.codegen.cuda import copied_together, group_threads
from polygpu.codegen.staging import interleaved
from polygpu.errors import PolygpuError
from polygpu.memory.placement import neighbour_reuse_only
from polygpu.memory.residence import Residence, packable_at
from polygpu.memory.traffic import SECTOR_BYTES
from polygpu.pipeline import (
    Compiled,
    Prepared,
    batch_on_device,
    launch_residences,
    plan_variant,
)
from polygpu.runtime.grid import launch_blocks
from polygpu.schedule.variant import MAX_MAPPED, Variant
from polygpu.search.candidate import Candidate, LaunchCost
from polygpu.search.cost import ISSUE_SATURATION, LAUNCH_SECONDS, predicted_cost
from polygpu.search.occupancy import SM_90, Limits, occupancy
from polygpu.search.pruning import concurrency

CANDIDATES = 3  # scheduler candidates the default considers
# blocks of groups of threads over small elements (plan_variants), smallest first: the
# paper's rule grows a block from one warp until the occupancy target is met
FITTED_THREADS = (256, 512, 1024)
ROUND_SECONDS = 0.5e-6  # one dependent round of global accesses of a block (device steps)
# the same round when the block's data is resident in shared memory (memory/residence.py):
# a warp per element of the batched Cholesky at n = 64 in double, 12 elements an SM (the
# rounds bound it: 1200 an element), took 2.98 ms on the H100 -- 0.17 us a round
# (2026-12-06, after codegen/fold_pieces.py; 0.1 us before, fitted on the H200's runs of
# 2026-11-29, made a warp per element look 1.7x faster than it is, and the blocks of 2 and
# 4 warps an element that beat it, 2.67 and 2.53 ms, slower: tuning/results/
# NVIDIA-H100-80GB-HBM3/batched.md)
RESIDENT_ROUND_SECONDS = 0.17e-6
# a batch's rounds are issue-bound: many blocks share an SM, and each warp of a block
# issues its guards, index arithmetic and barrier every round, working or idle, and
# again for every block of a kernel's grid the block loops over.  Issue cycles per warp
# (per round, per block iteration), fitted by least squares on the H200's per-element
# Cholesky, 46 plans (2026-11-29, tuning/results/NVIDIA-H200/
# batched_cholesky_resident.json; within 0.5-1.4x of every measured time): the element
# resident in shared memory, and in global memory (loads wait, and stall issue, longer)
RESIDENT_WARP_CYCLES = (12.0, 2.5)
GLOBAL_WARP_CYCLES = (18.0, 7.5)
DEVICE_STEP_THREADS = 1024  # a device-steps block: the widest, fewest rounds per step
# one block reads at most this multiple of an even share (1/SMs) of the DRAM bandwidth
SINGLE_SM_BANDWIDTH_SHARE = 2.0
# plans predicted within this fraction of the best tie: the estimate's own error is
# larger (fdtd-2d's 32 x 32 tile and 4 x 128 row differ by 0.3 % in the model and by
# 13 % on the H100, the row faster)
NEAR_TIE = 0.01
# ... and a batch's element plans (space.element_variants) within this fraction of the
# best win: the traffic model prices them as parametric tiles and does not see what the
# plans they beat pay in scattered copies and bank conflicts (H200, interleaved 16 x 16
# products: the element plan predicted 0.46 ms against 0.37, measured 0.44 against 1.10;
# results/NVIDIA-H200/batched.md) -- not against a device-steps best, which the batch
# model prices with its copies' sectors (H100, interleaved Cholesky in float at n = 16:
# a launched thread per element predicted 3.37 ms against four resident warps' 2.67,
# measured 3.45 against 2.96) -- nor against an element plan on the caller's layout: of
# two, the model's order is what it sees, the accesses through L2 (H100, interleaved
# Cholesky in double at n = 8: two schedules' threads per element predicted 1.487 and
# 1.334 ms, measured 1.494 and 1.335); an element plan on the relaid copy still gives
# way (H200, interleaved 16 x 16 products in double: the relaid plan predicted 5 %
# faster, measured 1.387 ms against 1.115)
ELEMENT_TIE = 0.3
# a cover (search/covers.py) replaces the one-launch fused plan only when the model
# gives it this much: each launch is priced by the larger of its rounds and its traffic,
# so a cut's round trip through DRAM is hidden where launches are round-bound, and no
# cover has been measured yet (the search times them)
COVER_MARGIN = 0.1


@dataclass(frozen=True)
class PlanEstimate:
    """One plan as the model sees it: predicted seconds (an order), launches per run
    and the terms behind the number, or why it could not be built."""

    variant: Variant
    seconds: float
    launches: int
    detail: str
    error: str = ""
    # a device-steps plan's seconds per launch (Variant.cuts), in order
    parts: tuple[float, ...] = ()

    def to_json(self) -> dict:
        out = {"variant": self.variant.to_json(), "predicted_ms": (
            None if math.isinf(self.seconds) else round(self.seconds * 1e3, 4)),
            "launches": self.launches, "detail": self.detail}
        if self.error:
            out["error"] = self.error
        return out


@dataclass(frozen=True)
class PlanChoice:
    """The model's top plan and the ranking it came from (best first)."""

    variant: Variant
    ranking: tuple[PlanEstimate, ...]

    def to_json(self) -> dict:
        return {"chosen": self.variant.to_json(),
                "ranking": [e.to_json() for e in self.ranking]}


def _shapes(n_mapped: int, has_time_loop: bool, double: bool) -> list[dict]:
    """Block shapes worth a default: a wide row of 512 threads (coalesced, few rounds),
    a square 32x32 tile (reuse along both dimensions), and with a time loop (a
    reduction inside the kernel) register tiles, which cut the loads per operation.

    Order matters where the model ties (:func:`choose` keeps the earlier): with a time
    loop the square tile comes first -- each staged element then serves 32 operations
    along both dimensions, where a 4-row tile stages a 32 x 128 slab for 4 rows (symm
    on the H100: 5.0 ms against 12.1, which the traffic model alone does not tell
    apart); without one, the wide row.  The 64 x 64 tile in runs of 4 (float4 loads)
    is for 4-byte elements: in double it was slower than the 32 x 32 tiles in every
    PolyBench kernel measured on the H100 (doitgen 0.69 against 0.24 ms, LU 323 against
    182, Cholesky 203 against 116; plans_polybench.md)."""
    if n_mapped <= 1:
        return [dict(tile=(256,), threads=(256,)), dict(tile=(128,), threads=(128,))]
    row, square = dict(tile=(4, 128), threads=(4, 128)), dict(tile=(32, 32), threads=(8, 32))
    if not has_time_loop:
        return [row, square]
    shapes = [square, row, dict(tile=(32, 32), threads=(8, 32), jam=True)]
    if not double:
        shapes.append(dict(tile=(64, 64), threads=(16, 16), jam=True, chunk=4,
                           prefetch=True))
    return shapes


def _shared_accumulator(c: Compiled) -> str:
    """Why a register-tiled (jam) variant is no default: a kernel whose written array
    is staged in shared memory accumulates there, not in registers, so the tile saves
    none of the loads the model credits it with and adds bank conflicts (symm in double
    on the H100: 35 ms against 5.0 untiled).  Empty when there is no such kernel."""
    for b in c.memory.buffers:
        if b.space == "shared" and b.writes is not None and \
                c.built.for_kernel(b.kernel).jam:
            return (f"kernel {b.kernel}: register tile over {b.array} accumulated in "
                    "shared memory (search only)")
    return ""


def _beyond_memory(c: Compiled, params: Mapping[str, int], limits: Limits) -> str:
    """Why a plan whose scratch arrays (a relayout's twins, expanded temporaries, local
    arrays) do not fit in the device's memory beside the caller's arrays cannot run
    ("" if they fit):
    the device layer would refuse it for want of memory, so the default must not take
    it.  Unknown extents count as zero; a region whose own arrays do not fit is left to
    the device layer (no plan of it could run)."""
    from polygpu.search.space import _value

    total = scratch = 0
    for a in c.analysis.scop.program_arrays:
        points = 1
        for extent in a.shape:
            points *= max(_value(extent, params), 0)
        total += points * a.element_size
        scratch += points * a.element_size if a.kind in ("local", "scratch") else 0
    if not scratch or total <= limits.memory_bytes:
        return ""
    return (f"its arrays and scratch arrays take {total / 1e9:.1f} GB, more than the "
            f"device's {limits.memory_bytes / 1e9:.1f} GB")


def _sized_to_elements(tr) -> bool:
    """Whether a candidate's plans may be sized to a batch's elements: launched (no
    host loops) and with a reference coalesced along its innermost mapped dimension.
    Interleaved elements mapped element-outermost coalesce none: their "elements" are
    the batch's rows, and the element plans took 2.15 ms against 0.79 for the batch
    innermost (1.5 GB of 16 x 16 products, H200)."""
    return tr.host is None and bool(tr.coalesced)


def plan_variants(prepared: Prepared, params: Mapping[str, int]) -> list[Variant]:
    """The plans the default chooses among (see the module docstring), in a fixed
    order: ties keep the earlier."""
    return _plans(prepared, params)[0]


def _plans(prepared: Prepared, params: Mapping[str, int]
           ) -> tuple[list[Variant], frozenset[Variant]]:
    """:func:`plan_variants`, and those of them sized to a batch's elements (see
    :data:`ELEMENT_TIE`)."""
    from polygpu.search.space import (
        LARGEST_ELEMENT_EXTENT,
        element_variants,
        fitted_threads,
        group_variants,
        shapes,
    )

    found, elements = [], set()
    double = any(a.dtype == "float64" for a in prepared.analysis.scop.arrays)
    for shape in shapes(prepared, params, CANDIDATES):
        c = shape.candidate
        host = prepared.candidates[c].host
        if host is not None and host.kind == "fused batch" and \
                max(shape.extents, default=0) > LARGEST_ELEMENT_EXTENT:
            # nests fused over large elements (mvt's rows): the batch model is fitted
            # on small ones and this plan was never measured there -- the search's
            continue
        # a batch of elements: staged blocks sized to them, specialized, first (the
        # traffic model prices them as the parametric tiles: measured, they are faster)
        if _sized_to_elements(prepared.candidates[c]):
            sized = element_variants(shape)
            elements.update(sized)
            found += [v for v in sized if v not in found]
        # many small elements: a block of groups of threads, each group one element
        # (space.fitted_threads), first: the fixed shapes below leave most threads idle
        # (the smallest block in which the outermost mapped dimension holds 2 at least)
        extents = shape.extents[-min(shape.n_mapped, MAX_MAPPED):]
        fitted = next((f for f in (fitted_threads(extents, t) for t in FITTED_THREADS)
                       if f is not None and f[0] >= 2), None)
        if fitted is not None:  # unstaged: a group's element stays in L1, and the copy
            # with its barriers cost 5x (H100, 4 x 4 products: 2.29 against 0.40 ms,
            # tuning/results/NVIDIA-H100-80GB-HBM3/batched.md); the search stages too
            found.append(Variant(candidate=c, tile=fitted, threads=fitted, shared=False))
        for fields in _shapes(shape.n_mapped, shape.has_time_loop, double):
            v = Variant(candidate=c, **fields)
            if v not in found:
                found.append(v)
        if host is not None:
            wide = (DEVICE_STEP_THREADS,) if shape.n_mapped <= 1 else (
                DEVICE_STEP_THREADS // 128, 128)
            found.append(Variant(candidate=c, tile=wide, threads=wide, shared=False,
                                 device_steps=True))
            # a batch's plans also with each element resident in shared memory for its
            # block's life (specialized: the buffers need constant extents; the estimate
            # refuses elements that do not fit).  One block running a whole region's
            # steps may be resident too, but only the search tries that: unmeasured
            if host.grid_dims:
                found += [replace(v, device_steps=True, resident=True, specialize=True)
                          for v in found if v.candidate == c]
                found += group_variants(c, shape.extents, shape.n_mapped, kernel_dims=[
                    k.n_space for k in prepared.candidates[c].kernels],
                    narrow=host.kind == "fused batch",
                    interleaved=prepared.relaid_body is not None)
                # resident elements that are triangles (a factorization's) also packed,
                # after the rest: half the shared memory, more blocks resident (H100,
                # Cholesky at n = 64: fp32 3.68 ms against 4.53, fp64 3.20 against
                # 3.99; results/NVIDIA-H100-80GB-HBM3/batched.md); ties keep unpacked
                if packable_at(prepared.candidates[c], params):
                    found += [replace(v, packed=True) for v in found
                              if v.candidate == c and v.resident and not v.packed]
    # an interleaved batch: its element plans also on the element-outermost copy, the
    # transposes' cost counted (transform/layout.py; after the plans above: ties keep
    # the layout the caller gave)
    body = prepared.relaid_body
    if body is not None:
        sized, body_elements = _plans(body, params)
        relaid = [replace(v, relayout=True) for v in sized if v in body_elements]
        elements.update(relaid)
        found += relaid
    return found, frozenset(elements)


def _registers(variant: Variant, double: bool) -> int:
    """A guess of registers per thread without ptxas: a base for indices and addresses,
    plus one (two in double) per point of the register tile (``jam``; without it a
    thread's points are a loop, one at a time: ptxas gives 38-44 registers to a warp
    per Cholesky element with 128 points a thread, where 160-255 were guessed and the
    element's shared memory was never seen to limit its blocks)."""
    points = math.prod(t // n for t, n in zip(variant.tile, variant.threads, strict=True)
                       ) if variant.jam else 1
    return min(255, 32 + points * (2 if double else 1) * (2 if variant.jam else 1))


def sketch(prepared: Prepared, variant: Variant) -> Compiled:
    """``variant`` tiled and placed, with the launches of its program but not its code:
    what :func:`launch_costs` counts, without the code generator (isl's AST of every
    kernel body, most of a compile: 0.3-20 s per variant of symm at PolyBench's
    EXTRALARGE sizes, against 0.1-0.5 s for this).  The launches are those
    :func:`~polygpu.codegen.cuda.generate` plans (names, grids, blocks, dynamic shared
    memory, host steps; a grid too large for CUDA is left unfolded: the same blocks), so
    the model's numbers are the same as on the compiled program; ``program.source`` is
    empty.  A device-steps variant is sketched as its host-launched twin (the model
    counts it so); whether it can run its steps on the device is decided when it is
    compiled."""
    from polygpu.codegen import staging
    from polygpu.codegen.cuda import arguments, launch_steps
    from polygpu.codegen.launch_grid import grid_expression, launch_block
    from polygpu.codegen.program import KernelProgram, Launch
    from polygpu.memory.placement import STATIC_SHARED_BYTES, plan_memory
    from polygpu.model.isl_util import union_of_sets
    from polygpu.schedule.tiling import tile

    requested = variant
    prepared, variant = prepared.of(variant)  # a relayout's: the relaid region
    an, found = prepared.analysis, prepared.candidates
    twin = replace(variant, device_steps=False)
    tr = prepared.transformation(twin)
    step = tr.step or an
    kernels = tile(step.scop, step.dependences_with(tr.atomic), tr, twin)
    memory = plan_memory(step, tr, kernels, twin)
    scop = step.scop
    launches, steps = [], []
    for k in kernels:
        name = f"{scop.function}_kernel{k.index}"
        shared = [b for b in memory.of_kernel(k.index).values() if b.space == "shared"]
        dynamic = memory.shared_bytes(k.index) > STATIC_SHARED_BYTES
        grid = [grid_expression(e, t) for e, t in zip(k.extent, k.tile, strict=True)]
        launches.append(Launch(kernel=name, grid=tuple(grid + ["1"] * (3 - len(grid))),
                               block=launch_block(k.threads, k.lanes),
                               shared_bytes=staging.dynamic_bytes(shared) if dynamic else 0))
        if scop.host:
            steps.append(launch_steps(scop, k.statements, name))
    program = KernelProgram(function=scop.function, source="", arguments=arguments(scop),
                            parameters=scop.parameters, launches=tuple(launches),
                            host_iterators=scop.host,
                            host_steps=str(union_of_sets(steps)) if steps else "")
    requested = replace(requested, device_steps=False)
    return Compiled(prepared.spec, an, found, tr, requested, kernels, program, memory,
                    prepared.source_scop, prepared.expansion, prepared.splitting,
                    prepared.snapshot, relayout=prepared.relayout,
                    built_variant=twin if twin != requested else None)


def launch_costs(c: Compiled, params: Mapping[str, int], limits: Limits = SM_90,
                 guess_concurrency: bool = True,
                 resident_arrays: Mapping[int, frozenset[str]] | None = None
                 ) -> tuple[LaunchCost, ...]:
    """Per launch of a host-launched variant, what the cost model counts: modelled
    traffic, instances and operand loads over all its runs (host loops: counted at a
    middle step, times the steps), its grid, and -- with ``guess_concurrency`` -- the
    concurrency the occupancy calculator gives for guessed registers (the tuner leaves
    it None and takes it from ptxas later).  ``resident_arrays``: per kernel, the arrays its
    device-steps twin reads from a resident shared copy (their loads never scatter)."""
    from polygpu.memory.barriers import block_barriers
    from polygpu.memory.operand_loads import operand_loads
    from polygpu.memory.self_reuse import (
        SPILLED_RATE_SHARE,
        self_reuse,
        spilled,
        through_l2,
    )
    from polygpu.memory.traffic import estimated_traffic

    scop = c.kernel_scop
    blocks = launch_blocks(c.program, params, c.modelled_steps(params)[0])
    names = [la.kernel for la in c.program.launches]
    double = any(a.dtype == "float64" for a in scop.arrays)
    costs = []
    for k, name, values, times in c.modelled_launches(params):
        launch = c.program.launches[names.index(name)]
        grid = blocks[names.index(name)]
        in_shared = (resident_arrays or {}).get(k.index, frozenset())
        loads = operand_loads(scop, k, values, c.memory, in_shared)
        threads = math.prod(launch.block)
        shared = c.memory.shared_bytes(k.index) + launch.shared_bytes
        registers = _registers(c.built.for_kernel(k.index), double)
        per_sm = occupancy(threads, registers, shared, limits).blocks_per_sm
        conc = resident = None
        if guess_concurrency:
            _, conc = concurrency(threads, registers, shared, max(grid, 1),
                                  limits.multiprocessors, limits)
            resident = per_sm
        # threads' re-reads and re-writes of their own elements beyond what L2 holds
        # for all the threads running at once (memory/self_reuse.py), counted in the
        # bytes a copy would move in their time
        running = min(grid, per_sm * limits.multiprocessors) * threads
        reuse = self_reuse(scop, k, values, c.memory, in_shared)
        spilled_bytes = spilled(reuse, running, k.block_threads,
                                limits.l2_bytes) / SPILLED_RATE_SHARE
        # ... and every access of theirs through L2, which an SM's L1 (what its blocks'
        # shared memory leaves) may not keep
        l1 = max(limits.l1_bytes - per_sm * shared, 0)
        l2 = through_l2(reuse, min(per_sm * threads, limits.max_threads_per_sm), l1)
        costs.append(LaunchCost(
            kernel=name, runs=times,
            traffic_bytes=round((sum(t.bytes for t in estimated_traffic(
                scop, k, name, values, c.memory)) + spilled_bytes) * times),
            instances=loads.instances * times, operand_loads=round(loads.loads * times),
            blocks=grid, prefetched=c.memory.prefetches(k.index),
            concurrency=conc, barriers=block_barriers(scop, k, values, c.memory) * times,
            resident_blocks=resident, threads=threads, l2_bytes=round(l2 * times)))
    return tuple(costs)


def device_steps_seconds(costs: Sequence[LaunchCost], widths: Sequence[int], threads: int,
                         limits: Limits = SM_90, round_seconds: float = ROUND_SECONDS
                         ) -> tuple[float, str]:
    """Seconds of ``costs``' kernels run as device steps in one block of ``threads``
    threads: per kernel, the longer of its rounds and one SM's share of the bandwidth
    and issue rate.  A kernel's instances of one step are spread over at most its own
    width (``widths``: blocks x threads of its widest step when launched; a kernel that
    loops on one thread stays one thread) and at most the block, one instance per
    thread and round, ``round_seconds`` a round (:data:`RESIDENT_ROUND_SECONDS` where
    the block's data is resident in shared memory)."""
    sms = limits.multiprocessors
    bandwidth = limits.dram_bytes_per_s / sms * SINGLE_SM_BANDWIDTH_SHARE
    share = min(1.0, threads / limits.max_threads_per_sm / 0.125)  # issue saturation
    issue_rate = limits.fp32_lanes_per_sm * limits.clock_hz * share
    total, rounds_all = 0.0, 0
    for x, width in zip(costs, widths, strict=True):
        per_step = x.instances / max(x.runs, 1)
        rounds = x.runs * max(1, math.ceil(per_step / max(1, min(threads, width))))
        rounds_all += rounds
        total += max(rounds * round_seconds, x.traffic_bytes / bandwidth,
                     (x.instances + x.operand_loads) / issue_rate)
    return total, f"one block of {threads} threads, {rounds_all:,} rounds"


def compulsory_bytes(c: Compiled, params: Mapping[str, int]) -> int:
    """Every array of the region read once and, where written, written once: the
    traffic of a plan that reuses all it touches from the caches."""
    scop = c.analysis.scop
    written = {a.array for s in scop.statements for a in s.writes}
    read = {a.array for s in scop.statements for a in s.reads}
    return _read_and_written_bytes(scop.arrays, read, written, params)


def _read_and_written_bytes(arrays, read: set[str], written: set[str],
                            params: Mapping[str, int],
                            skipped: frozenset[str] | set[str] = frozenset()) -> int:
    """The bytes of ``arrays`` (scalar temporaries and ``skipped`` aside) read once where
    in ``read`` and written once where in ``written``."""
    from polygpu.runtime.inputs import eval_int

    total = 0
    for a in arrays:
        if a.kind == "temporary" or a.name in skipped:
            continue
        words = math.prod(eval_int(e, params) for e in a.shape_exprs)
        total += words * a.element_size * ((a.name in read) + (a.name in written))
    return total

def batch_seconds(costs: Sequence[LaunchCost], widths: Sequence[int], threads: int,
                  elements: int, registers: int, traffic: int, limits: Limits = SM_90,
                  shared_bytes: int = 0, round_seconds: float = ROUND_SECONDS,
                  warp_cycles: tuple[float, float] = GLOBAL_WARP_CYCLES,
                  per_block: int = 1) -> tuple[float, str]:
    """Seconds of a batch's device steps (``costs``: its host-launched twin's launches,
    counted over all elements): each element's rounds as in
    :func:`device_steps_seconds`, run by as many blocks at once as are resident (with
    ``shared_bytes`` of shared memory each), and never faster than every warp's
    ``warp_cycles`` issue cycles -- per round, and per block of a kernel's grid at a
    step (``x.blocks``, at the middle step), which the block runs one after another --
    on all SMs; at least ``traffic`` over the bandwidth and the instances over the
    issue rate.  With ``per_block`` elements per block, ``threads`` and ``shared_bytes``
    are one element's (its group's: a fraction of a warp issues as one)."""
    block = threads * per_block
    blocks = -(-max(elements, 1) // per_block)
    _, share = concurrency(block, registers, shared_bytes * per_block, blocks,
                           limits.multiprocessors, limits)
    occupied = occupancy(block, registers, shared_bytes * per_block, limits).blocks_per_sm
    resident = max(1, min(elements, occupied * limits.multiprocessors * per_block))
    rounds = iterations = 0
    for x, width in zip(costs, widths, strict=True):
        per_step = x.instances / max(x.runs, 1)
        rounds += x.runs * max(1, math.ceil(per_step / max(1, min(threads, width))))
        iterations += x.runs * max(1, x.blocks)
    issue = sum(x.instances + x.operand_loads for x in costs) / (
        limits.multiprocessors * limits.fp32_lanes_per_sm * limits.clock_hz
    ) / max(min(1.0, share / ISSUE_SATURATION), 1e-9)
    warps = -(-threads // 32) if per_block == 1 else threads / 32
    per_round, per_iteration = warp_cycles  # (rounds, iterations: of all elements)
    issued = (rounds * per_round + iterations * per_iteration) * warps / (
        limits.multiprocessors * limits.clock_hz)
    seconds = max(rounds * round_seconds / resident, issued,
                  traffic / limits.dram_bytes_per_s, issue)
    each = (f"one block of {threads} threads each" if per_block == 1 else
            f"{per_block} per block, {threads} threads each")
    return seconds, (f"{elements:,} elements, {each}, "
                     f"{rounds // max(elements, 1):,} rounds per element, "
                     f"{resident:,} elements resident at once")


def estimate(prepared: Prepared, variant: Variant, params: Mapping[str, int],
             limits: Limits = SM_90) -> PlanEstimate:
    """The model's seconds for ``variant`` at ``params`` (infinite, with the reason, for
    a plan that cannot be built)."""
    try:
        target = prepared.of(variant)[0]  # a relayout's: the relaid region
    except PolygpuError as e:
        return PlanEstimate(variant, math.inf, 0, "", str(e).splitlines()[0])
    if variant.candidate < len(target.candidates):
        variant = batch_on_device(target.candidates[variant.candidate], variant)
    try:
        # a device-steps plan is counted on its host-launched twin (same kernels), which
        # the model needs tiled and placed, not generated
        c = sketch(prepared, variant)
        # kernels whose shared buffers only hold stencil halos: the L1 cache serves that
        # reuse without the copy loop, its guards and barriers (H100, 200 steps:
        # jacobi-2d 20.1 ms global against 23.0 staged, fdtd-2d 48.4 against 55.6;
        # polybench_notes.md), so the default leaves them in global memory (the search
        # still tries them staged)
        halo = [k for k in neighbour_reuse_only(c.memory, c.transformation, c.kernels)
                if variant.for_kernel(k).shared]
        if halo and not variant.relayout:  # (a relayout's copies stage no halo)
            if len(halo) == len(c.kernels) and not variant.kernels:
                variant = replace(variant, shared=False)  # every kernel: program-wide
            for k in halo:
                if variant.for_kernel(k).shared:
                    variant = variant.with_kernel(k, replace(variant.for_kernel(k),
                                                             shared=False))
            c = sketch(prepared, variant)
        refused = _shared_accumulator(c) or _beyond_memory(c, params, limits)
        if refused:
            return PlanEstimate(variant, math.inf, 0, "", refused)
        residences, resident = (), {}
        if variant.device_steps:  # proven and generated, or refused
            planned = plan_variant(prepared, variant, params)
            residences = launch_residences(planned, variant.cuts, params)
            resident = resident_arrays(variant, len(c.kernels), residences)
        costs = launch_costs(c, params, limits, resident_arrays=resident)
    except PolygpuError as e:
        return PlanEstimate(variant, math.inf, 0, "", str(e).splitlines()[0])
    if variant.device_steps:
        return device_steps_estimate(c, variant, costs, residences, params, limits)
    candidate = Candidate("", variant, "kept", launches=costs)
    launches = sum(x.runs for x in costs)
    traffic = sum(x.traffic_bytes for x in costs)
    return PlanEstimate(variant, predicted_cost(candidate, limits), launches,
                        f"{launches:,} launches, {traffic / 1e6:,.1f} MB modelled traffic")


def resident_arrays(variant: Variant, n_kernels: int, residences: Sequence[Residence]
                    ) -> dict[int, frozenset[str]]:
    """Per kernel of a device-steps ``variant`` cut into launches (``Variant.cuts``),
    the arrays resident in its launch's block (``residences``: one per launch, none
    where nothing is resident): what :func:`launch_costs` prices as shared loads."""
    found = {}
    for ks, residence in zip(variant.launches(n_kernels), residences, strict=False):
        arrays = frozenset(b.array for b in residence.buffers)
        found |= {k: arrays for k in ks}
    return found


def device_steps_estimate(c: Compiled, variant: Variant, costs: Sequence[LaunchCost],
                           residences: Sequence[Residence], params: Mapping[str, int],
                           limits: Limits) -> PlanEstimate:
    """A device-steps plan (``c`` its host-launched twin): each of its launches
    (``Variant.cuts``; one without) priced by :func:`batch_seconds` (a batch) or
    :func:`device_steps_seconds` (one block) over its kernels' costs, the launches'
    seconds added, every launch after the first with :data:`LAUNCH_SECONDS` more (the
    one-launch plan is priced as always, without).  A fused batch's traffic is counted
    per launch (:func:`launch_bytes`: what it touches, its contracted temporaries not),
    so that covers compare."""
    host = c.transformation.host
    launches = variant.launches(len(c.kernels))
    kernel_of = [k.index for k, *_ in c.modelled_launches(params)]
    # the block is as wide as the widest kernel's (codegen/cuda.py _steps_kernel)
    threads = {la.kernel: math.prod(la.block) for la in c.program.launches}
    elements = c.batch_elements(params)
    double = any(a.dtype == "float64" for a in c.kernel_scop.arrays)
    per_launch = bool(variant.cuts) or host.kind == "fused batch"
    total, details, parts = 0.0, [], []
    for n, ks in enumerate(launches):
        part = [x for x, k in zip(costs, kernel_of, strict=True) if k in ks]
        own = {x.kernel: threads[x.kernel] for x in part}
        if variant.elements_per_block > 1:  # one element's group of threads
            group = group_threads(tuple(c.kernels[k] for k in ks), c.memory,
                                  host.grid_dims)
            own = {k: group for k in own}
        widths = [x.blocks * own[x.kernel] for x in part]
        residence = residences[n] if residences else None
        shared = residence.bytes if residence is not None else 0
        # the resident rates where all of the element is resident; a part in global
        # memory waits on it as before
        whole = residence is not None and not residence.left
        round_seconds = RESIDENT_ROUND_SECONDS if whole else ROUND_SECONDS
        warp_cycles = RESIDENT_WARP_CYCLES if whole else GLOBAL_WARP_CYCLES
        where = f", {shared:,} bytes resident" if residence is not None else ""
        if residence is not None and residence.left:
            where += " (" + ", ".join(a for a, _ in residence.left) + " in global memory)"
        if host.grid_dims:
            traffic = launch_bytes(c, params, ks, residence) if per_launch else \
                compulsory_bytes(c, params)
            if residence is not None:
                traffic += copy_sector_bytes(c, params, residence,
                                             variant.elements_per_block, max(own.values()))
            seconds, detail = batch_seconds(
                part, widths, max(own.values()), elements, _registers(variant, double),
                traffic, limits, shared, round_seconds, warp_cycles,
                variant.elements_per_block)
        else:
            seconds, detail = device_steps_seconds(part, widths, max(own.values()), limits,
                                                   round_seconds)
        if n:  # a cut's launch: its overhead, and the wait for the launch before
            seconds += LAUNCH_SECONDS
        total += seconds
        parts.append(seconds)
        details.append(detail + where)
    if len(details) == 1:
        return PlanEstimate(variant, total, 1, details[0], parts=tuple(parts))
    return PlanEstimate(variant, total, len(details), "; ".join(
        f"launch {n} (kernels {', '.join(map(str, ks))}): {d}"
        for n, (ks, d) in enumerate(zip(launches, details, strict=True))),
        parts=tuple(parts))


def copy_sector_bytes(c: Compiled, params: Mapping[str, int], residence: Residence,
                      elements: int, group: int) -> int:
    """The bytes a batch's resident copies move beyond their words where its elements
    are interleaved (SoA, ``a[i][j][e]``: :func:`polygpu.codegen.staging.interleaved`):
    a warp's copy reads and writes runs of as many words as elements it copies together
    -- the block's ``elements`` (groups of ``group`` threads) where the generated code
    copies them together (:func:`polygpu.codegen.cuda.copied_together`), else one --
    and each run costs a whole sector.  Every copied array is counted whole, once per
    direction, as the compulsory traffic counts it."""
    element = c.kernel_scop.host[0] if c.kernel_scop.host else None
    together = elements if copied_together(residence.buffers, element, elements,
                                           group) else 1
    extra = 0
    for b in residence.buffers:
        if not interleaved(b, element) or (b.reads is None and b.writes is None):
            continue
        run = b.element_size * together
        waste = SECTOR_BYTES / min(SECTOR_BYTES, run) - 1
        words = _read_and_written_bytes(
            [c.analysis.scop.array(b.array)], {b.array} if b.reads is not None else set(),
            {b.array} if b.writes is not None else set(), params)
        extra += int(words * waste)
    return extra


def launch_bytes(c: Compiled, params: Mapping[str, int], kernels: Sequence[int],
                 residence: Residence | None) -> int:
    """The compulsory traffic of one launch of ``kernels``: every array they touch read
    once and, where written, written once -- a temporary contracted in ``residence``
    (never loaded nor stored) not at all."""
    scop = c.kernel_scop
    contracted = {b.array for b in residence.buffers if b.reads is None
                  and b.writes is None} if residence is not None else set()
    read, written = set(), set()
    for k in kernels:
        for s in c.kernels[k].statements:
            read |= {a.array for a in scop.statement(s).reads}
            written |= {a.array for a in scop.statement(s).writes}
    return _read_and_written_bytes(c.analysis.scop.arrays, read, written, params,
                                   contracted)

def choose(prepared: Prepared, params: Mapping[str, int], limits: Limits = SM_90,
           variants: Sequence[Variant] | None = None) -> PlanChoice:
    """The model's top plan at ``params`` among ``variants`` (default:
    :func:`plan_variants`); ties keep the earlier plan."""
    found, elements = (list(variants), frozenset()) if variants is not None else \
        _plans(prepared, params)
    ranking = [estimate(prepared, v, params, limits) for v in found]
    order = sorted(range(len(ranking)), key=lambda k: (ranking[k].seconds, k))
    # within the model's precision of the best, the earliest plan wins: the order of
    # plan_variants carries what the model cannot see (see _shapes); a batch's element
    # plans within ELEMENT_TIE of a launched best that is not one of them on the
    # caller's layout
    best, top = ranking[order[0]].seconds, found[order[0]]
    element_tie = 1 + (NEAR_TIE if top.device_steps or (
        top in elements and not top.relayout) else ELEMENT_TIE)
    near = [k for k in order if ranking[k].seconds <= best * (1 + NEAR_TIE) or (
        found[k] in elements and ranking[k].seconds <= best * element_tie)]
    if math.isfinite(best) and min(near) != order[0]:
        order.remove(min(near))
        order.insert(0, min(near))
    ranked = tuple(ranking[k] for k in order)
    if math.isinf(ranked[0].seconds):
        raise PolygpuError(f"no default plan could be built: {ranked[0].error}")
    ranked = _with_covers(prepared, ranked, params, limits)
    return PlanChoice(ranked[0].variant, ranked)


def _with_covers(prepared: Prepared, ranked: tuple[PlanEstimate, ...],
                 params: Mapping[str, int], limits: Limits) -> tuple[PlanEstimate, ...]:
    """``ranked`` with the best covers of its top plan (:mod:`polygpu.search.covers`:
    a fused batch's kernels split into launches, or a launched plan's fused nests into
    kernels), each placed by its seconds after the plans as fast; the top plan stays
    first unless a cover beats it by more than :data:`COVER_MARGIN`."""
    from polygpu.search import covers

    top = ranked[0]
    if covers.fused(prepared, top.variant):
        found = covers.rank_covers(prepared, top.variant, params, limits, whole=top)
    elif covers.splittable(prepared, top.variant):
        found = covers.rank_splits(prepared, top.variant, params, limits, whole=top)
    else:
        return ranked
    extra = [e for e in found if e.variant != top.variant]
    rest = sorted(ranked[1:] + tuple(extra), key=lambda e: e.seconds)  # (stable)
    if extra and extra[0].seconds < top.seconds * (1 - COVER_MARGIN):
        rest.remove(extra[0])
        return (extra[0], top, *rest)
    return (top, *rest)
