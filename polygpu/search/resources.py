"""Where the search learns each candidate's registers and shared memory: a
:class:`ResourceOracle`.

The real one is ptxas (:class:`PtxasOracle`: nvcc compiles every candidate, no GPU
needed, and the cubin is kept for the runner).  Behind this small interface the rest of
the search -- pruning, ordering, the database -- runs and is tested without nvcc:
:class:`FixedResources` answers from a rule instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from polygpu.codegen.program import KernelProgram
from polygpu.search.occupancy import Resources
from polygpu.search.runner import Cubin


class ResourceOracle(Protocol):
    """Per program, in order: its :class:`~polygpu.search.runner.Cubin` (per-kernel
    :class:`~polygpu.search.occupancy.Resources`, and the binary when there is one) or
    the exception that says why it does not compile for ``arch``."""

    def compile(self, programs: Sequence[KernelProgram], arch: str,
                jobs: int | None = None) -> list[Cubin | Exception]: ...


class PtxasOracle:
    """nvcc on ``jobs`` threads, ``ptxas -v``'s report (:func:`~polygpu.search.runner.
    compile_cubins`); a missing nvcc is a :class:`~polygpu.errors.PolygpuError`."""

    def __init__(self, options: Sequence[str] | None = None):
        self.options = None if options is None else tuple(options)

    def compile(self, programs, arch, jobs=None):
        from polygpu.search import runner

        return runner.compile_cubins(list(programs), arch, jobs=jobs, options=self.options)


def default_oracle() -> ResourceOracle:
    """What :func:`~polygpu.search.tuner.tune` asks when given no oracle: ptxas."""
    return PtxasOracle()


class FixedResources:
    """Resources from a rule, no compiler: by default ``registers`` per thread and no
    static shared memory for every kernel; ``rule(program, kernel)`` may decide per
    kernel.  No binary (the runner compiles for itself), so only for runners that do
    not run the code: tests, replays."""

    def __init__(self, registers: int = 32,
                 rule: Callable[[KernelProgram, str], Resources] | None = None):
        self.registers = registers
        self.rule = rule
        self.calls: list[int] = []  # the size of each batch asked

    def resources(self, program: KernelProgram) -> Mapping[str, Resources]:
        out = {}
        for launch in program.launches:
            name = launch.kernel
            out[name] = (self.rule(program, name) if self.rule else
                         Resources(name, self.registers, 0, 0, 0, 0, 0))
        return out

    def compile(self, programs, arch, jobs=None):
        self.calls.append(len(programs))
        return [Cubin(None, arch, self.resources(p), "") for p in programs]
