"""The candidates of one search while a strategy decides about them, and the step
that asks the :class:`~polygpu.search.resources.ResourceOracle` for their registers.

A candidate is *costed* first (the model's numbers, no code: stage ``kept`` with no
program yet), then *built* (:meth:`Pool.build`: its code generated, then the oracle), then
timed; see :mod:`polygpu.search.explore` for why the three are kept apart.

The one piece of mutable state of a search, private to one :func:`~polygpu.search.
tuner.tune` call (like the frontends' translators): candidates themselves are frozen,
and every decision replaces one by a new one under its key.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace

from polygpu.codegen.program import KernelProgram
from polygpu.runtime.grid import launch_blocks
from polygpu.schedule.variant import Variant
from polygpu.search.candidate import Candidate
from polygpu.search.measurement import canonical
from polygpu.search.occupancy import Limits, occupancy
from polygpu.search.pruning import concurrency
from polygpu.search.resources import ResourceOracle


@dataclass
class Pool:
    # every variant of the space (and the plans), by key, in space order
    candidates: dict[str, Candidate]
    programs: Mapping[str, KernelProgram]  # the code of each distinct candidate
    params: Mapping[str, int]
    limits: Limits
    arch: str
    oracle: ResourceOracle
    jobs: int | None = None
    cubins: dict[str, bytes] = field(default_factory=dict)  # the binaries the oracle made
    # set by a walk that yields candidates ahead of their measurement: whether one it
    # yielded is still worth timing, asked just before it is (None: always)
    recheck: Callable[[Candidate], bool] | None = None

    def __iter__(self) -> Iterator[Candidate]:
        return iter(list(self.candidates.values()))

    def set(self, c: Candidate) -> None:
        self.candidates[c.key] = c

    @staticmethod
    def key_of(v: Variant) -> str:
        """A variant's key: its JSON as the workers read it back (per-kernel overrides
        in one order), canonical."""
        if v.kernels:
            v = Variant.from_json(v.to_json())
        return canonical(v.to_json())

    def sketch(self, variants: list[Variant]) -> list[Candidate]:
        """``variants`` costed by the model (no code): a pool whose candidates were all
        compiled up front has them already."""
        return [self.candidates[self.key_of(v)] for v in variants]

    def generate(self, batch: list[Candidate]) -> None:
        """Code for the candidates of ``batch`` that have none yet (a pool compiled up
        front has it for all)."""

    def at(self, *stages: str) -> list[Candidate]:
        """The candidates at one of ``stages``, in space order."""
        return [c for c in self.candidates.values() if c.stage in stages]

    def build(self, batch: list[Candidate]) -> None:
        """The oracle for ``batch`` at once, their code generated first where it was not:
        each candidate gets its registers, spills, occupancy and concurrency (per launch
        too), or becomes ``invalid`` with the compiler's first line (or ``duplicate``,
        when its code is another candidate's)."""
        self.generate(batch)
        batch = [self.candidates[c.key] for c in batch]
        batch = [c for c in batch if c.stage not in ("invalid", "duplicate")
                 and c.key in self.programs]
        if not batch:
            return
        built = self.oracle.compile([self.programs[c.key] for c in batch], self.arch,
                                    jobs=self.jobs)
        for c, b in zip(batch, built, strict=True):
            if isinstance(b, Exception):
                self.set(replace(c, stage="invalid", reason=str(b).splitlines()[0]
                                 if str(b) else repr(b)))
                continue
            if b.binary is not None:
                self.cubins[c.key] = b.binary
            self.set(self._with_resources(c, b.resources))

    def _with_resources(self, c: Candidate, resources) -> Candidate:
        program, limits = self.programs[c.key], self.limits
        regs, occ, conc, most_threads, spills = 0, math.inf, math.inf, -1, 0
        by_kernel = {}
        for launch, blocks in zip(program.launches, launch_blocks(program, self.params),
                                  strict=True):
            res = resources.get(launch.kernel)
            r = res.registers if res else 0
            smem = launch.shared_bytes + (res.shared_static if res else 0)
            o, k = concurrency(math.prod(launch.block), r, smem, blocks,
                               limits.multiprocessors, limits)
            by_kernel[launch.kernel] = k, occupancy(math.prod(launch.block), r, smem,
                                                    limits).blocks_per_sm
            regs = max(regs, r)
            spills += (res.spill_stores + res.spill_loads) if res else 0
            # the launch with the most threads stands for the program: a small
            # initialisation kernel beside it says nothing about the bandwidth drawn
            if blocks * math.prod(launch.block) > most_threads:
                most_threads, occ, conc = blocks * math.prod(launch.block), o, k
        # ptxas' concurrency (and blocks per SM) replaces the guess the candidate was
        # costed with
        costs = tuple(replace(x, concurrency=by_kernel[x.kernel][0],
                              resident_blocks=by_kernel[x.kernel][1])
                      if x.kernel in by_kernel else x for x in c.launches)
        return replace(c, registers=regs, occupancy=occ, concurrency=conc,
                       spill_bytes=spills, launches=costs)
