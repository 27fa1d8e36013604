"""Run a KernelProgram on an NVIDIA GPU through PyCUDA, and time it.

PyCUDA is imported only when a GPU function is called, so this module imports anywhere;
without PyCUDA or a usable GPU the call raises :class:`GpuUnavailableError`
(:func:`gpu_available` asks without raising).

The source is compiled by ``SourceModule`` (``no_extern_c=True``) for the GPU's own
architecture, with every ``__global__`` function given C linkage (``extern "C"
__global__``), so each kernel is found by its plain name where C++ would mangle it.  Only
the kernels: wrapping the whole source in ``extern "C" { ... }`` would forbid the overloaded
``__device__`` helpers the generator emits (and break any ``#include``).  Kernels themselves
must therefore be neither overloaded nor templates.  Grid expressions are evaluated in
Python (:mod:`polygpu.runtime.grid`).
"""

from __future__ import annotations

import os
import re
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from polygpu.codegen.program import KernelProgram
from polygpu.errors import PolygpuError
from polygpu.runtime import grid
from polygpu.runtime.arguments import Bound, bind, parameter_values
from polygpu.runtime.compiler import CompileError

_KERNEL = re.compile(r'(?<!extern "C" )\b__global__\b')
_DEFAULT_SHARED_LIMIT = 48 * 1024  # more dynamic shared memory must be opted into


class GpuUnavailableError(PolygpuError):
    """PyCUDA is not installed, or no CUDA device can be used."""


@lru_cache(maxsize=1)
def _cuda():
    """pycuda.driver, with a context on device 0 (made once, released at exit)."""
    try:
        import pycuda.driver as cuda
    except ImportError as e:
        raise GpuUnavailableError(
            "the gpu backend needs PyCUDA: pip install 'polygpu[cuda]' (or pycuda)"
        ) from e
    try:
        import pycuda.autoinit  # noqa: F401  (creates the context, pops it at exit)
    except Exception as e:  # pycuda raises its own error types for every CUDA failure
        raise GpuUnavailableError(f"no usable CUDA device: {e}") from e
    return cuda


def require_gpu() -> None:
    """Raise :class:`GpuUnavailableError` now, rather than midway through a check."""
    _cuda()


def gpu_available() -> bool:
    try:
        _cuda()
    except GpuUnavailableError:
        return False
    return True


def device_source(program: KernelProgram) -> str:
    """The text handed to nvcc: the program with C linkage for its kernels."""
    return _KERNEL.sub('extern "C" __global__', program.source)


def nvcc_options() -> tuple[str, ...]:
    """Extra nvcc options from ``POLYGPU_NVCC_OPTIONS`` (space-separated), e.g.
    ``-Xptxas -dlcm=cg`` to keep global loads out of L1 (what the experiments in
    ``tuning/memory_tables.py --l1-off`` use)."""
    return tuple(os.environ.get("POLYGPU_NVCC_OPTIONS", "").split())


def _module(source: str):
    return _compiled_module(source, nvcc_options())


@lru_cache(maxsize=64)
def _compiled_module(source: str, options: tuple[str, ...]):
    cuda = _cuda()
    from pycuda.compiler import SourceModule

    major, minor = cuda.Context.get_device().compute_capability()
    try:
        return SourceModule(source, no_extern_c=True, arch=f"sm_{major}{minor}",
                            options=["-std=c++17", *options])
    except cuda.CompileError as e:
        raise CompileError(f"nvcc cannot compile the program:\n{e}") from e


@dataclass
class _Prepared:
    """A program on the device: compiled module, device buffers, launch plan."""

    program: KernelProgram
    bound: tuple[Bound, ...]
    buffers: dict[str, object]
    launches: list[tuple[object, tuple[int, int, int], tuple[int, int, int], int, list]]
    indices: list[int]  # per entry of ``launches``: its launch in ``program.launches``

    def launch_all(self, stream=None) -> None:
        for func, grid_dims, block, shared, args in self.launches:
            func.prepared_async_call(grid_dims, block, stream, *args, shared_size=shared)

    def copy_back(self) -> None:
        cuda = _cuda()
        for b in self.bound:
            if b.argument.kind == "array":
                cuda.memcpy_dtoh(b.value, self.buffers[b.argument.name])


def bound_bytes(bound, name: str) -> int:
    return next(b.value.nbytes for b in bound if b.argument.name == name)


def _prepare(program: KernelProgram, values: Mapping[str, object]) -> _Prepared:
    cuda = _cuda()
    bound = bind(program, values)
    params = parameter_values(program, values)
    module = _module(device_source(program))
    buffers = {}
    for b in bound:
        if b.argument.kind == "array":
            buffers[b.argument.name] = cuda.mem_alloc(max(b.value.nbytes, 1))
            cuda.memcpy_htod(buffers[b.argument.name], b.value)
    # read-only arrays the kernels read from __constant__ memory: copied there once (the
    # region never writes them)
    for name in program.constants:
        symbol, size = module.get_global(f"{name}_const")
        cuda.memcpy_dtod(symbol, buffers[name], min(size, bound_bytes(bound, name)))
    # device pointers travel as "P" (void *), scalars as numpy scalars of their dtype
    args = [int(buffers[b.argument.name]) if b.argument.kind == "array" else b.value
            for b in bound]
    arg_types = ["P" if b.argument.kind == "array" else b.value.dtype for b in bound]
    arg_types += ["i"] * len(program.host_iterators)  # host steps: int iterators last
    funcs = []
    for launch in program.launches:
        func = module.get_function(launch.kernel)
        func.prepare(arg_types)
        if launch.shared_bytes > _DEFAULT_SHARED_LIMIT:
            func.set_attribute(
                cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, launch.shared_bytes
            )
        funcs.append(func)
    launches, indices = [], []
    for k, host in program.steps(values):  # each launch once, or once per host step
        indices.append(k)
        launch = program.launches[k]
        names = program.grid_values(params, host)
        dims = tuple(grid.evaluate(e, names) for e in launch.grid)
        grid.check_launch(launch.kernel, dims, launch.block)
        launches.append((funcs[k], dims, tuple(launch.block), launch.shared_bytes,
                         args + [np.int32(h) for h in host]))
    return _Prepared(program, bound, buffers, launches, indices)


def run_program(program: KernelProgram, values: Mapping[str, object]) -> None:
    """Copy the arrays to the GPU, run every launch in order, synchronise, copy them back
    (in place)."""
    cuda = _cuda()
    prepared = _prepare(program, values)
    prepared.launch_all()
    cuda.Context.synchronize()
    prepared.copy_back()


@dataclass(frozen=True)
class Timing:
    """Milliseconds for one run of all launches: the median and every repeat."""

    median_ms: float
    times_ms: tuple[float, ...]


def time_program(
    program: KernelProgram, values: Mapping[str, object], repeats: int = 10, warmup: int = 2
) -> Timing:
    """Time the program's launches (not the copies) with CUDA events: ``warmup`` untimed
    runs, then ``repeats`` timed ones.  The arrays are left as the last run made them."""
    cuda = _cuda()
    prepared = _prepare(program, values)
    for _ in range(warmup):
        prepared.launch_all()
    cuda.Context.synchronize()
    times = []
    start, end = cuda.Event(), cuda.Event()
    for _ in range(repeats):
        start.record()
        prepared.launch_all()
        end.record()
        end.synchronize()
        times.append(end.time_since(start))
    prepared.copy_back()
    return Timing(statistics.median(times), tuple(times))


def time_by_kernel(program: KernelProgram, values: Mapping[str, object], repeats: int = 5,
                   warmup: int = 1) -> dict[str, float]:
    """Where a run's time goes: per kernel, the milliseconds of all its launches in one
    run (CUDA events around each launch; median over ``repeats``).  The events cost a
    few microseconds a launch, so a many-step program reads a little slower than
    :func:`time_program` says; the shares are what this is for."""
    cuda = _cuda()
    prepared = _prepare(program, values)
    for _ in range(warmup):
        prepared.launch_all()
    cuda.Context.synchronize()
    events = [(cuda.Event(), cuda.Event()) for _ in prepared.launches]
    runs = []
    for _ in range(repeats):
        for (func, grid_dims, block, shared, args), (start, end) in zip(
                prepared.launches, events, strict=True):
            start.record()
            func.prepared_async_call(grid_dims, block, None, *args, shared_size=shared)
            end.record()
        cuda.Context.synchronize()
        totals = [0.0] * len(program.launches)
        for k, (start, end) in zip(prepared.indices, events, strict=True):
            totals[k] += end.time_since(start)
        runs.append(totals)
    return {launch.kernel: statistics.median(r[k] for r in runs)
            for k, launch in enumerate(program.launches)}
