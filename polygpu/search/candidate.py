"""What the search knows about one variant: :class:`Candidate` and its launches.

Plain data shared by the tuner, the strategies, the pruning rules and the cost model,
so none of them has to import another to read a candidate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from polygpu.schedule.variant import Variant
from polygpu.search.measurement import Measurement


@dataclass(frozen=True)
class LaunchCost:
    """One launch of a candidate as the cost model sees it, over all its ``runs`` (its
    host steps; 1 without host loops): modelled global traffic, statement instances and
    operand loads, and the grid.  ``concurrency`` comes from ptxas (None before nvcc).
    The model prices each launch on its own: a small reduction kernel of 16 blocks
    beside a wide product kernel is slow because of its grid, whatever the product's.
    ``barriers`` counts the ``__syncthreads`` its blocks pass (summed over blocks and
    runs, :mod:`polygpu.memory.barriers`), ``resident_blocks`` how many of its blocks
    share a multiprocessor (None before nvcc without a guess): a barrier idles the
    multiprocessor only where no other block is there to issue.  ``threads``: each
    block's threads (0: not known), whose every thread issues its setup whether it has
    a point or not (:data:`polygpu.search.cost.THREAD_INSTRUCTIONS`).  ``l2_bytes``: the
    bytes its threads' loads and stores of arrays left in global memory move through L2
    (0: not counted), which bound its memory time beside the DRAM traffic."""

    kernel: str
    runs: int
    traffic_bytes: int
    instances: int
    operand_loads: int
    blocks: int
    prefetched: bool = False
    concurrency: float | None = None
    barriers: int = 0
    resident_blocks: int | None = None
    threads: int = 0
    l2_bytes: int = 0  # its threads' own global accesses through L2 (memory/self_reuse.py)


@dataclass(frozen=True)
class Candidate:
    """One variant and what the search learnt about it.

    ``stage`` is where it stopped: ``timed`` (it has a measurement), ``reused`` (its
    measurement came from the database), ``pruned-traffic``, ``pruned-spills``,
    ``pruned-occupancy``, ``pruned-threads``, ``pruned-measured`` (its program's
    measurements put it far behind the best), ``duplicate`` (same code as
    ``duplicate_of``), ``invalid`` (polygpu or nvcc could not compile it: ``reason``),
    ``budget`` (not reached: never costed, or costed and not timed); while a search
    runs, also ``unexplored`` (in the space, not costed yet) and ``measuring`` (handed
    to the runner, no measurement back yet).  Until it is built,
    ``registers`` is None and ``launches`` carry the concurrency of guessed registers.
    ``origin`` is ``"plan"`` for the model's default plans, which a search times
    first and never prunes, and ``"ranked"`` for the other plans the default ranked
    (outside the space: costed to seed the search, never timed, left out of the
    result)."""

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
    origin: str = ""  # "plan" (timed first, never pruned), "ranked"; "" for the space

    @property
    def score(self) -> float:
        return self.measurement.score if self.measurement else math.inf
