"""The scheduler's output: a *transformation* of the whole region for the GPU.

A transformation splits the statements into kernels launched in order (a global
barrier between consecutive kernels) and gives, per statement, two affine maps:

* ``space`` -- ``S[i..] -> [p0, ..., pk]``: the *space partition* (paper §4.2).  Instances
  with different space coordinates run on different threads, so no dependence may
  cross them inside one kernel.  The innermost dimension ``pk`` is the one mapped
  cyclically onto ``threadIdx.x``: the coalescing dimension.
* ``time`` -- ``S[i..] -> [t0, ..., tm]``: the *time schedule* (``θ``): the order in which
  one thread executes its instances, lexicographically.

All statements of a kernel share the number of space and of time dimensions (shorter
ones are padded with zeros), so a kernel's schedule is one union map.  A statement
whose space dimensions include one of its reduction loops is *atomic*: threads that
share its target element combine their partial sums with ``atomicAdd``
(:mod:`polygpu.model.atomic`), and legality is proven against the relaxed dependences.
With host loops (:mod:`polygpu.schedule.host`) the kernel sequence runs once per host
step, the host iterators being parameters inside it.
``Scop`` order and dependences are not stored here: :mod:`polygpu.schedule.legality`
proves a transformation against them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import islpy as isl

if TYPE_CHECKING:
    from polygpu.model.analysis import Analysis
    from polygpu.schedule.host import HostSchedule


@dataclass(frozen=True)
class KernelSchedule:
    """One kernel: its statements and their space and time maps."""

    statements: tuple[str, ...]
    space: isl.UnionMap  # S[..] -> [p0..pk]; k + 1 == n_space (0 dims: one thread)
    time: isl.UnionMap  # S[..] -> [t0..tm]
    n_space: int
    n_time: int
    atomic: tuple[str, ...] = ()  # statements combining their updates atomically
    # space dimensions (0 = outermost) that are reduction loops of atomic statements
    reduction_dims: tuple[int, ...] = ()
    # atomic statements whose target does not move along the innermost space dimension
    # (threads along x share it: their updates may be summed in the warp first)
    warp_uniform: tuple[str, ...] = ()


@dataclass(frozen=True)
class Transformation:
    """A candidate transformation for the search, with the references it coalesces.

    ``coalesced`` lists the ``(statement, ref)`` pairs whose consecutive elements along
    the array's fastest-varying dimension are touched by consecutive values of the
    innermost space dimension at the same time (the adjacency constraints hold);
    ``shared`` the references without that property that the memory stage should
    route through shared memory.  ``origin`` says how it was found: ``'adjacency'``
    (Algorithm 1) or ``'isl'`` (the fallback scheduler).
    """

    kernels: tuple[KernelSchedule, ...]
    coalesced: tuple[tuple[str, int], ...]
    shared: tuple[tuple[str, int], ...]
    origin: str
    # host loops (schedule/host.py): the kernels run once per step of ``host``, and
    # their statements, spaces and times are those of the step region analysed in
    # ``step`` (whose parameters include the host iterators); None: launched once
    host: HostSchedule | None = None
    step: Analysis | None = None

    @property
    def atomic(self) -> tuple[str, ...]:
        """Statements of all kernels that combine their updates atomically."""
        return tuple(s for k in self.kernels for s in k.atomic)

    def kernel_of(self, statement: str) -> int:
        for k, kernel in enumerate(self.kernels):
            if statement in kernel.statements:
                return k
        raise KeyError(statement)
