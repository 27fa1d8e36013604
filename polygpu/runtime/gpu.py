"""Run a KernelProgram on an NVIDIA GPU through PyCUDA, and time it: thin wrappers over
the device layer (:class:`polygpu.runtime.device.GpuDevice`, device 0 unless ``device``
names another), kept for scripts and tests.

PyCUDA is imported only when a GPU function is called, so this module imports anywhere;
without PyCUDA or a usable GPU the call raises :class:`GpuUnavailableError`
(:func:`gpu_available` asks without raising).

The source is compiled by ``SourceModule`` (``no_extern_c=True``) for the GPU's own
architecture, with every ``__global__`` function given C linkage (``extern "C"
__global__``), so each kernel is found by its plain name where C++ would mangle it.  Only
the kernels: wrapping the whole source in ``extern "C" { ... }`` would forbid the overloaded
``__device__`` helpers the generator emits (and break any ``#include``).  Kernels themselves
must therefore be neither overloaded nor templates.  Grid expressions are evaluated in
Python (:mod:`polygpu.runtime.grid`), at every host step.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass

from polygpu.codegen.program import KernelProgram
from polygpu.runtime.device import (
    DEFAULT_SHARED_LIMIT,
    GpuDevice,
    GpuUnavailableError,
    LaunchTimes,
    device_source,
    get_device,
    nvcc_options,
)

__all__ = [
    "DEFAULT_SHARED_LIMIT", "GpuUnavailableError", "LaunchTimes", "Timing", "device",
    "device_source", "gpu_available", "nvcc_options", "require_gpu", "run_program",
    "time_by_kernel", "time_launches", "time_program",
]


def device(index: int = 0) -> GpuDevice:
    """The process' :class:`GpuDevice` for CUDA device ``index``."""
    return get_device("gpu", index)  # type: ignore[return-value]


def require_gpu(index: int = 0) -> None:
    """Raise :class:`GpuUnavailableError` now, rather than midway through a check."""
    device(index).open()


def gpu_available(index: int = 0) -> bool:
    return device(index).available()


def run_program(program: KernelProgram, values: Mapping[str, object], index: int = 0) -> None:
    """Copy the arrays to the GPU, run every launch in order (every host step),
    synchronise, copy them back (in place)."""
    device(index).run(program, values)


@dataclass(frozen=True)
class Timing:
    """Milliseconds for one run of all launches: the median and every repeat."""

    median_ms: float
    times_ms: tuple[float, ...]


def time_program(program: KernelProgram, values: Mapping[str, object], repeats: int = 10,
                 warmup: int = 2, index: int = 0) -> Timing:
    """Time the program's launches (not the copies) with CUDA events: ``warmup`` untimed
    runs, then ``repeats`` timed ones.  The arrays are left as the last run made them."""
    times = device(index).time(program, [values], repeats, warmup)
    return Timing(statistics.median(times), tuple(times))


def time_launches(program: KernelProgram, values: Mapping[str, object], repeats: int = 10,
                  warmup: int = 2, index: int = 0) -> LaunchTimes:
    """:func:`time_program` broken down by launch: per run its total and each launch's
    milliseconds (all its host steps), from one event before the first launch and one
    after each (:meth:`GpuDevice.time_launches`): the launches add up to the run."""
    return device(index).time_launches(program, [values], repeats, warmup)


def time_by_kernel(program: KernelProgram, values: Mapping[str, object], repeats: int = 5,
                   warmup: int = 1, index: int = 0) -> dict[str, float]:
    """Where a run's time goes: per kernel, the milliseconds of all its launches in one
    run (CUDA events around each launch; median over ``repeats``).  The events cost a
    few microseconds a launch, so a many-step program reads a little slower than
    :func:`time_program` says; the shares are what this is for."""
    return device(index).time_by_kernel(program, values, repeats, warmup)
