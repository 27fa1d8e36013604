"""The ``model`` strategy's predicted cost: an order for timing, not a verdict.

Per launch, the longer of a memory time and an issue time, each over the share of the
GPU that launch's grid and concurrency can use; see :func:`predicted_cost` and
docs/search.md.
"""

from __future__ import annotations

from polygpu.search.candidate import Candidate, LaunchCost
from polygpu.search.occupancy import SM_90, Limits

SATURATION = 0.25  # concurrency from which memory-level parallelism stops helping
# ... from which issue stops helping: two warps per scheduler whose register tiles give
# each many independent FMAs (mm's 8 x 8 tiles at 8 warps per SM reach 0.8x cuBLAS)
ISSUE_SATURATION = 0.125


# what one launch costs beyond its work: the latency of a launch that depends on the one
# before (what a host loop of thousands of steps pays per step); on the H100, 8000
# launches of a triangular solve's steps took 72.8 ms, 9.1 us each (plans_polybench.md)
LAUNCH_SECONDS = 8e-6


# what a barrier costs a block alone on its multiprocessor: the wait for its slowest warp
# and the refill of its pipelines, no other block's warps issuing meanwhile.  On the
# H200, l2dist's tuned 512-thread blocks (one per SM) ran 2.263 / 2.244 ms with two
# barriers a tile and 2.159 ms with one (double-buffered): about 550 cycles each
# (tuning/results/NVIDIA-H200/probe_l2dist_barriers_*.json)
BARRIER_CYCLES = 500


# what each launched thread issues whether it has work or not: its block and thread
# ids, the decomposition of a linear block id, the guards of partial tiles, its exit.
# Without it a plan whose blocks are mostly idle threads looked free: the interleaved
# (SoA) 2 x 2 products in blocks of 256 threads for 4 points each ranked first
THREAD_INSTRUCTIONS = 16


def active_sms(blocks: int, sms: int) -> float:
    """The fraction of SMs a grid of ``blocks`` gives work to."""
    return min(1.0, blocks / sms)


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
    memory = max(x.traffic_bytes / limits.dram_bytes_per_s,
                 x.l2_bytes / limits.l2_access_bytes_per_s) / max(memory_share, 1e-9)
    launched = x.runs * x.blocks * x.threads * THREAD_INSTRUCTIONS
    issue = (x.instances + x.operand_loads + launched) / (
        sms * limits.fp32_lanes_per_sm * limits.clock_hz) / max(issue_share, 1e-9)
    return memory, issue + barrier_seconds(x, limits)


def barrier_seconds(x: LaunchCost, limits: Limits = SM_90) -> float:
    """The time ``x``'s barriers idle the multiprocessors: :data:`BARRIER_CYCLES` each,
    spread over the SMs the grid occupies, where a block is alone on its SM (with two or
    more resident, the others issue while one waits; unknown residency counts nothing)."""
    if not x.barriers or x.resident_blocks != 1:
        return 0.0
    sms = limits.multiprocessors * active_sms(max(x.blocks, 1), limits.multiprocessors)
    return x.barriers * BARRIER_CYCLES / limits.clock_hz / sms


def model_times(c: Candidate, limits: Limits = SM_90) -> tuple[float, float]:
    """(memory, issue) seconds of the model, summed over the launches (see
    :func:`predicted_cost`)."""
    times = [_launch_times(x, limits) for x in _launches(c)]
    return sum(m for m, _ in times), sum(i for _, i in times)


def predicted_cost(c: Candidate, limits: Limits = SM_90) -> float:
    """The model's order for timing (a budget times the most promising first), in
    seconds: per launch, the longer of

    * the memory time: modelled traffic over the DRAM bandwidth, or where longer, the
      threads' own accesses through L2 over its rate (``LaunchCost.l2_bytes``), and
    * the issue time: one instruction per statement instance plus its operand loads
      (:mod:`polygpu.memory.operand_loads`) over the GPU's FP32 issue rate --
      what orders compute-bound kernels like mm, whose traffic a good tiling has made
      small: bigger register tiles and vector loads need fewer loads per FMA -- and
      :data:`THREAD_INSTRUCTIONS` for each thread launched, plus
      the idle time of its barriers where a block is alone on its SM
      (:func:`barrier_seconds`: what double-buffered copies halve);

    each over the share of the GPU that launch can use: the SMs its grid occupies and,
    on each, its concurrency up to what hides latency (a quarter of the warp slots for
    loads, unless the kernel prefetches; an eighth for issue); summed over the launches,
    plus :data:`LAUNCH_SECONDS` per run of each.  Only an order: the times decide."""
    return sum(launch_seconds(x, limits) for x in _launches(c))


def launch_seconds(x: LaunchCost, limits: Limits = SM_90) -> float:
    """One launch's share of :func:`predicted_cost`: what a plan made of separately
    chosen kernels (a recursion's pieces, search/recursion_plans.py) sums."""
    return max(_launch_times(x, limits)) + x.runs * LAUNCH_SECONDS


def model_order(c: Candidate, limits: Limits = SM_90) -> tuple:
    """Sort key of the ``model`` strategy: predicted cost, then the sum of the two
    times (of two compute-bound variants, the one with less traffic), then one buffer
    before two (priced alike, two buffers save no barrier the model sees, and take
    twice the shared memory), then the key."""
    memory, issue = model_times(c, limits)
    return (predicted_cost(c, limits), memory + issue, c.variant.double_buffer, c.key)
