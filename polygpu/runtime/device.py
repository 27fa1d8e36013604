"""The device layer: the one place where a KernelProgram meets concrete arguments and runs.

Every runner of generated code goes through it -- ``check_program`` (the reference
check), the tuner's child (:mod:`polygpu.search.runner`), the Python API
(:class:`polygpu.api.Kernel`) and the thin wrappers of :mod:`polygpu.runtime.cpu` and
:mod:`polygpu.runtime.gpu` -- so what the API runs is exactly what ``check`` verified:
the same argument binding, the same host steps, the same grids, the same ``__constant__``
copies and shared-memory opt-in, the same refusals.

A :class:`Device` (:class:`CpuEmulator` or :class:`GpuDevice`) does, for one call:

1. **bind** the arguments (:func:`polygpu.runtime.arguments.bind`): scalars converted,
   NumPy arrays of exactly the argument's dtype and size, on the GPU also device arrays
   (``__cuda_array_interface__``: PyCUDA ``GPUArray``, CuPy, PyTorch CUDA tensors);
   array arguments that overlap in memory are refused unless neither is written;
2. **plan** the launches (:func:`launch_plan`): the parameter values (a specialized
   program refuses others), every host step of ``program.steps`` in order, each launch's
   grid evaluated (:mod:`polygpu.runtime.grid`) and checked against CUDA's limits;
3. **run** the plan: the emulator through its compiled ``polygpu_run`` with the plan's
   step list; the GPU by allocating and copying NumPy arrays and allocating the scratch
   arrays of expanded temporaries (after checking free device memory for both; scratch
   arrays are poisoned, never copied in or back), copying ``__constant__`` arrays,
   opting kernels into more than 48 KiB of dynamic shared memory, launching every step,
   synchronising and copying back the arrays the region writes;
4. **time** runs (:meth:`Device.time`): several argument sets used in turn (the tuner's
   L2 rotation); CUDA events on the GPU, the wall clock on the emulator.
   A ``budget_ms`` bounds a measurement's cost (:class:`RunBudget`): once the timed runs
   add up to it, and at least three ran, the rest are skipped (warm-ups likewise stop
   at a quarter of it, and a warm-up that long is the first timed run too), so a
   200 ms host-stepped candidate costs the tuner seconds, not 23 runs' worth; a
   ``cutoff_ms`` stops the timed runs once more than half of them (two at least) are
   slower than it, after one when that run took over twice the cutoff (the tuner's
   race against its best candidate).
   :meth:`Device.time_launches` also breaks each run down by launch (each entry of
   ``program.launches``, summed over its host steps): on the GPU one event before the
   first launch and one after each launch, so the launches' times add up to the run's;
   on the emulator the wall clock around each launch.  A device-steps program has one
   launch, so its breakdown is that launch.  :meth:`Device.time` is unchanged by it:
   no event between launches unless the breakdown is asked for.

:class:`GpuDevice` takes a device index and uses that device's *primary* context
(``pycuda.driver.Device(i).retain_primary_context()``), the one CuPy and PyTorch
allocate in, so their pointers are valid in polygpu's launches.  The context is pushed
around each operation and popped after, so several devices can be used from one
process.  ``driver`` and ``compiler`` may be given to test the launch logic without a
GPU (``tests/test_device.py`` does, with a fake driver that records launches).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import statistics
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from polygpu.codegen.program import KernelProgram
from polygpu.errors import PolygpuError
from polygpu.runtime import grid
from polygpu.runtime.arguments import Bound, DeviceArray, Scratch, bind, check_aliasing
from polygpu.runtime.compiler import CompileError

__all__ = [
    "CpuEmulator", "Device", "GpuCall", "GpuDevice", "GpuUnavailableError", "LaunchTimes",
    "RunBudget", "Step", "device_source", "get_device", "launch_plan", "nvcc_options",
]

DEFAULT_SHARED_LIMIT = 48 * 1024  # more dynamic shared memory must be opted into
_KERNEL = re.compile(r'(?<!extern "C" )\b__global__\b')


class GpuUnavailableError(PolygpuError):
    """PyCUDA is not installed, or no CUDA device can be used."""


def device_source(program: KernelProgram | str) -> str:
    """The text handed to nvcc: the program with C linkage for its kernels (idempotent)."""
    text = program.source if isinstance(program, KernelProgram) else program
    return _KERNEL.sub('extern "C" __global__', text)


def nvcc_options() -> tuple[str, ...]:
    """Extra nvcc options from ``POLYGPU_NVCC_OPTIONS`` (space-separated), e.g.
    ``-Xptxas -dlcm=cg`` to keep global loads out of L1."""
    return tuple(os.environ.get("POLYGPU_NVCC_OPTIONS", "").split())


# --------------------------------------------------------------------------------------
# The plan
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One launch to run: its index in ``program.launches``, the evaluated grid, and the
    host iterators' values (the kernels' trailing ``int`` arguments)."""

    index: int
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    host: tuple[int, ...] = ()


def launch_plan(program: KernelProgram, values: Mapping[str, object]) -> tuple[Step, ...]:
    """Every launch ``program`` makes on ``values``, in order (host steps included), with
    its grid evaluated and checked; a specialized program refuses other parameters
    (:class:`~polygpu.codegen.program.SpecializationError`), a 32-bit one sizes beyond
    its index bounds.  Cached per program and sizes: an API kernel called again at the
    same sizes (a 1000-step stencil: 2000 launches) does not enumerate them again."""
    params = program.parameter_values(values)
    return _plan(program, tuple(sorted(params.items())))


@functools.lru_cache(maxsize=256)
def _plan(program: KernelProgram, key: tuple[tuple[str, int], ...]) -> tuple[Step, ...]:
    params = dict(key)
    plan = []
    steps = program.steps(params)
    for (k, host), dims in zip(steps, grid.step_grids(program, params, steps), strict=True):
        launch = program.launches[k]
        grid.check_launch(launch.kernel, dims, launch.block)
        plan.append(Step(k, launch.kernel, dims, tuple(launch.block), launch.shared_bytes,
                         tuple(int(h) for h in host)))
    return tuple(plan)


@dataclass(frozen=True)
class LaunchTimes:
    """Timed runs broken down by launch: ``times_ms[r]`` is run ``r``'s total and
    ``launch_ms[r][k]`` the milliseconds of ``program.launches[k]`` in it (all its host
    steps).  On the GPU the launches of a run add up to its total (consecutive events);
    on the emulator to a little less (the host code between launches is nobody's)."""

    times_ms: tuple[float, ...]
    launch_ms: tuple[tuple[float, ...], ...]

    def medians(self) -> tuple[float, ...]:
        """Per launch, the median over the runs."""
        if not self.launch_ms:
            return ()
        return tuple(statistics.median(run[k] for run in self.launch_ms)
                     for k in range(len(self.launch_ms[0])))


@dataclass(frozen=True)
class RunBudget:
    """How many warm-up and timed runs a measurement makes: ``warmup`` then ``repeats``,
    cut short by ``budget_ms``.  Why: a run of a host-stepped plan at full size takes
    0.1-2 s (LU at n = 4000: 8 000 launches), so the tuner's 3 + 20 runs cost up to a
    minute per candidate; beyond a second of timed runs the median barely moves.  With a
    budget, warm-ups stop once they add up to a quarter of it (the first always runs),
    timed runs once they add up to all of it and at least ``MIN_TIMED`` ran (or
    ``repeats``, if fewer).  ``budget_ms=None``: exactly ``warmup`` and ``repeats``.

    A single warm-up that took a quarter of the budget or more is also the first timed
    run (:meth:`counted_warmups`).  Why: what a first run pays for (lazy module loading,
    cold caches and TLBs) costs milliseconds, under 2 % of such a run, and the median of
    at least ``MIN_TIMED`` runs discards it anyway: a first run inflated by it is the
    slowest.  Floyd-Warshall at n = 5600 (0.8 s a run) saves a quarter of its runs.

    ``cutoff_ms`` races a candidate against the best one measured so far: once more
    than half of the timed runs (and at least two) took longer than ``cutoff_ms``, the
    rest are skipped -- the median of what ran is above the cutoff, so a search
    comparing medians loses nothing by it (the tuner sets a margin above its best
    median), and two runs agreeing rule out one noisy run.  One timed run over
    :data:`SURE` times the cutoff is enough: run-to-run noise of a warm kernel is a few
    percent, not a factor of two, and a plan that loses by 14x (LU's other schedule at
    n = 4000: 1.9 s a run against 0.13 s) would otherwise cost more seconds-long runs."""

    repeats: int
    warmup: int
    budget_ms: float | None = None
    cutoff_ms: float | None = None

    MIN_TIMED = 3
    SURE = 2.0  # a warm run this many times the cutoff cannot be the median's winner
    AGREE = 2  # runs over the cutoff that stop the timing without SURE

    def more_warmups(self, done_ms: Sequence[float]) -> bool:
        if len(done_ms) >= self.warmup:
            return False
        return self.budget_ms is None or not done_ms or sum(done_ms) < self.budget_ms / 4

    def counted_warmups(self, warm_ms: Sequence[float]) -> list[float]:
        """The warm-up times that count as timed runs too (see the class doc): the one
        warm-up when it alone took a quarter of the budget, else none.  A breakdown by
        launch never counts it: its warm-ups record no breakdown."""
        if self.budget_ms is None or len(warm_ms) != 1 or self.repeats < self.MIN_TIMED:
            return []
        return list(warm_ms) if warm_ms[0] >= self.budget_ms / 4 else []

    def more_timed(self, done_ms: Sequence[float]) -> bool:
        if len(done_ms) >= self.repeats:
            return False
        if self.cut_off(done_ms):
            return False
        return (self.budget_ms is None or len(done_ms) < self.MIN_TIMED
                or sum(done_ms) < self.budget_ms)

    def cut_off(self, done_ms: Sequence[float]) -> bool:
        """Whether the timed runs ``done_ms`` stop at the cutoff (see the class doc)."""
        if self.cutoff_ms is None or not done_ms:
            return False
        if min(done_ms) > self.SURE * self.cutoff_ms:
            return True
        over = sum(t > self.cutoff_ms for t in done_ms)
        return over >= self.AGREE and 2 * over > len(done_ms)


# --------------------------------------------------------------------------------------
# The interface
# --------------------------------------------------------------------------------------


class Device(Protocol):
    """Where programs run.  ``kind`` is "cpu" or "gpu"; ``name`` describes the device."""

    kind: str
    name: str

    def load(self, program: KernelProgram) -> object:
        """Compile ``program`` for this device now (cached), so errors surface early."""

    def run(self, program: KernelProgram, values: Mapping[str, object], *,
            written: Collection[str] | None = None) -> None:
        """Run every launch of ``program`` on ``values`` (name -> scalar or array);
        arrays are updated in place.  ``written``: the arrays the region writes (None:
        any may be written), the only ones copied back and the ones aliasing refuses."""

    def time(self, program: KernelProgram, value_sets: Sequence[Mapping[str, object]],
             repeats: int, warmup: int, budget_ms: float | None = None,
             cutoff_ms: float | None = None) -> list[float]:
        """Milliseconds of ``repeats`` runs after ``warmup`` untimed ones, run ``r`` on
        ``value_sets[r % len(value_sets)]``; fewer where ``budget_ms`` or ``cutoff_ms``
        says so (:class:`RunBudget`)."""

    def time_launches(self, program: KernelProgram,
                      value_sets: Sequence[Mapping[str, object]], repeats: int,
                      warmup: int, budget_ms: float | None = None,
                      cutoff_ms: float | None = None) -> LaunchTimes:
        """As :meth:`time`, with each run broken down by launch (:class:`LaunchTimes`)."""


def _bind(device_kind: str, program: KernelProgram, values: Mapping[str, object],
          written: Collection[str] | None) -> tuple[tuple[Bound, ...], tuple[Step, ...]]:
    bound = bind(program, values, device_arrays=device_kind == "gpu")
    check_aliasing(program.function, bound, written)
    return bound, launch_plan(program, values)


# --------------------------------------------------------------------------------------
# The CPU emulator
# --------------------------------------------------------------------------------------


class CpuEmulator:
    """The CUDA emulator of :mod:`polygpu.runtime.cpu` (blocks in turn, threads as
    ``std::thread``\\ s): correct, slow, no GPU needed."""

    kind = "cpu"
    name = "cpu-emulator"

    def __init__(self) -> None:
        self._compiled: dict[KernelProgram, Any] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return "CpuEmulator()"

    def load(self, program: KernelProgram):
        from polygpu.runtime import cpu

        with self._lock:
            compiled = self._compiled.get(program)
        if compiled is None:
            compiled = cpu.compile_program(program)
            with self._lock:
                self._compiled[program] = compiled
        return compiled

    def run(self, program: KernelProgram, values: Mapping[str, object], *,
            written: Collection[str] | None = None) -> None:
        compiled = self.load(program)  # a compile error first, whatever the values
        _, plan = _bind(self.kind, program, values, written)
        compiled.run(values, steps=[(s.index, s.host) for s in plan])

    def time(self, program: KernelProgram, value_sets: Sequence[Mapping[str, object]],
             repeats: int, warmup: int, budget_ms: float | None = None,
             cutoff_ms: float | None = None) -> list[float]:
        budget = RunBudget(repeats, warmup, budget_ms, cutoff_ms)
        return list(self._timed(program, value_sets, budget, by_launch=False).times_ms)

    def time_launches(self, program: KernelProgram,
                      value_sets: Sequence[Mapping[str, object]], repeats: int,
                      warmup: int, budget_ms: float | None = None,
                      cutoff_ms: float | None = None) -> LaunchTimes:
        """As :meth:`time`; each launch timed by the wall clock in the emulator's host
        code (``polygpu_run_timed``)."""
        budget = RunBudget(repeats, warmup, budget_ms, cutoff_ms)
        return self._timed(program, value_sets, budget, by_launch=True)

    def _timed(self, program: KernelProgram, value_sets: Sequence[Mapping[str, object]],
               budget: RunBudget, by_launch: bool) -> LaunchTimes:
        compiled = self.load(program)
        steps = []
        for values in value_sets:
            _, plan = _bind(self.kind, program, values, None)
            steps.append([(s.index, s.host) for s in plan])
        k = len(value_sets)
        warm: list[float] = []
        while budget.more_warmups(warm):
            r = len(warm)
            t0 = time.perf_counter()
            compiled.run(value_sets[r % k], steps=steps[r % k])
            warm.append((time.perf_counter() - t0) * 1e3)
        times: list[float] = [] if by_launch else budget.counted_warmups(warm)
        launches = []
        while budget.more_timed(times):
            r = len(warm) + len(times)
            t0 = time.perf_counter()
            if by_launch:
                launches.append(tuple(compiled.run_timed(value_sets[r % k], steps=steps[r % k])))
            else:
                compiled.run(value_sets[r % k], steps=steps[r % k])
            times.append((time.perf_counter() - t0) * 1e3)
        return LaunchTimes(tuple(times), tuple(launches))


# --------------------------------------------------------------------------------------
# The GPU
# --------------------------------------------------------------------------------------


def _import_pycuda():
    try:
        import pycuda.driver as cuda
    except ImportError as e:
        raise GpuUnavailableError(
            "the gpu backend needs PyCUDA: pip install 'polygpu[cuda]' (or pycuda)"
        ) from e
    return cuda


def _gb(n: int) -> str:
    return f"{n / 1e9:.3g} GB"


@dataclass
class _Loaded:
    """A program's module on one device, and its kernels prepared for launching."""

    module: object
    functions: list  # per launch of the program


class GpuDevice:
    """CUDA device ``index`` through PyCUDA, in its primary context (see the module
    docstring).  ``driver``: a ``pycuda.driver``-like module (default: PyCUDA's);
    ``compiler``: ``(source, arch, options) -> module`` (default: PyCUDA's
    ``SourceModule``)."""

    kind = "gpu"

    def __init__(self, index: int = 0, *, driver=None,
                 compiler: Callable[[str, str, tuple[str, ...]], object] | None = None):
        if not isinstance(index, int) or index < 0:
            raise PolygpuError(f"GPU device index {index!r}: a non-negative integer")
        self.index = index
        self._driver = driver
        self._compiler = compiler
        self._cuda = None
        self._device = None
        self._context = None
        self._modules: dict[tuple[str, tuple[str, ...]], object] = {}
        self._loaded: dict[KernelProgram, _Loaded] = {}
        self._lock = threading.RLock()
        self._depth = threading.local()

    def __repr__(self) -> str:
        return f"GpuDevice({self.index})"

    # -- the context ------------------------------------------------------------------

    def open(self):
        """The driver module, after retaining this device's primary context (once);
        :class:`GpuUnavailableError` with the reason when it cannot be used."""
        with self._lock:
            if self._context is None:
                cuda = self._driver if self._driver is not None else _import_pycuda()
                try:
                    cuda.init()
                    count = cuda.Device.count()
                    if self.index >= count:
                        raise GpuUnavailableError(
                            f"no CUDA device {self.index}: this machine has {count}")
                    device = cuda.Device(self.index)
                    context = device.retain_primary_context()
                except GpuUnavailableError:
                    raise
                except Exception as e:  # pycuda raises its own types for every failure
                    raise GpuUnavailableError(f"no usable CUDA device: {e}") from e
                self._cuda, self._device, self._context = cuda, device, context
            return self._cuda

    def available(self) -> bool:
        try:
            self.open()
        except GpuUnavailableError:
            return False
        return True

    @contextlib.contextmanager
    def active(self) -> Iterator[Any]:
        """This device's primary context made current for the block (re-entrant); yields
        the driver module."""
        cuda = self.open()
        depth = getattr(self._depth, "n", 0)
        if depth == 0:
            self._context.push()
        self._depth.n = depth + 1
        try:
            yield cuda
        finally:
            self._depth.n = depth
            if depth == 0:
                cuda.Context.pop()

    @property
    def name(self) -> str:
        self.open()
        return self._device.name()

    def compute_capability(self) -> tuple[int, int]:
        self.open()
        return tuple(self._device.compute_capability())

    def attribute(self, name: str) -> int:
        """A ``pycuda.driver.device_attribute`` of the device, by name."""
        cuda = self.open()
        return self._device.get_attribute(getattr(cuda.device_attribute, name))

    def synchronize(self) -> None:
        with self.active() as cuda:
            cuda.Context.synchronize()

    # -- code -------------------------------------------------------------------------

    def module(self, program: KernelProgram):
        """The compiled module of ``program`` (nvcc for this device's architecture, once
        per source and ``POLYGPU_NVCC_OPTIONS``), or the one :meth:`use_module` set."""
        source, options = device_source(program), nvcc_options()
        with self._lock:
            found = self._modules.get((source, options))
            if found is not None:
                return found
            with self.active() as cuda:
                major, minor = self.compute_capability()
                arch = f"sm_{major}{minor}"
                if self._compiler is not None:
                    module = self._compiler(source, arch, options)
                else:
                    from pycuda.compiler import SourceModule

                    try:
                        module = SourceModule(source, no_extern_c=True, arch=arch,
                                              options=["-std=c++17", *options])
                    except cuda.CompileError as e:
                        raise CompileError(f"nvcc cannot compile the program:\n{e}") from e
            self._modules[(source, options)] = module
            return module

    def load_binary(self, binary: bytes):
        """A module from a cubin (what ``runner.compile_cubins`` made)."""
        with self.active() as cuda:
            return cuda.module_from_buffer(binary)

    def use_module(self, program: KernelProgram, module) -> None:
        """Launch ``module`` for ``program`` from now on (the tuner's child runs the exact
        binary it checks and times)."""
        with self._lock:
            self._modules[(device_source(program), nvcc_options())] = module
            self._loaded.pop(program, None)

    def load(self, program: KernelProgram) -> _Loaded:
        """The module and prepared kernels of ``program``: arrays as pointers, scalars in
        their dtype, host iterators as ``int``; kernels needing more than 48 KiB of dynamic
        shared memory opted in (and refused if the device cannot give it)."""
        with self._lock:
            loaded = self._loaded.get(program)
            if loaded is not None:
                return loaded
            module = self.module(program)
            types = ["P" if a.pointer else np.dtype(a.dtype)
                     for a in program.arguments] + ["i"] * len(program.host_iterators)
            shared: dict[str, int] = {}
            for launch in program.launches:
                shared[launch.kernel] = max(shared.get(launch.kernel, 0), launch.shared_bytes)
            with self.active() as cuda:
                limit = None
                functions, by_kernel = [], {}
                for launch in program.launches:
                    func = by_kernel.get(launch.kernel)
                    if func is None:
                        func = module.get_function(launch.kernel)
                        func.prepare(types)
                        need = shared[launch.kernel]
                        if need > DEFAULT_SHARED_LIMIT:
                            if limit is None:
                                limit = self.attribute("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN")
                            if need > limit:
                                raise grid.LaunchError(
                                    f"launch of {launch.kernel}: {need} bytes of dynamic shared "
                                    f"memory, the device allows {limit}")
                            func.set_attribute(
                                cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, need)
                        by_kernel[launch.kernel] = func
                    functions.append(func)
            loaded = _Loaded(module, functions)
            self._loaded[program] = loaded
            return loaded

    # -- calls ------------------------------------------------------------------------

    def prepare(self, program: KernelProgram, values: Mapping[str, object], *,
                written: Collection[str] | None = None) -> GpuCall:
        """Bind and plan, allocate and copy the NumPy arrays, copy the ``__constant__``
        arrays: a call ready to launch (several times).  Free it with ``close()``."""
        loaded = self.load(program)  # a compile error first, whatever the values
        bound, plan = _bind(self.kind, program, values, written)
        buffers: dict[str, object] = {}
        with self.active() as cuda:
            # the NumPy arrays copied in and the scratch arrays allocated for the call
            need = sum(b.value.nbytes for b in bound
                       if isinstance(b.value, np.ndarray | Scratch))
            if need:
                free, _total = cuda.mem_get_info()
                if need > free:
                    raise PolygpuError(
                        f"{program.function}: needs {_gb(need)} on the GPU for its arrays, "
                        f"{_gb(free)} free (device {self.index})")
            call = GpuCall(self, program, bound, plan, buffers, [], written)
            try:
                pointers, sizes = {}, {}
                for b in bound:
                    if not b.argument.pointer:
                        continue
                    name, v = b.argument.name, b.value
                    if isinstance(v, Scratch):  # device memory only, poisoned, never copied
                        buffers[name] = cuda.mem_alloc(max(v.nbytes, 1))
                        cuda.memset_d8(buffers[name], 0xFF, v.nbytes)  # NaN, or -1
                        pointers[name], sizes[name] = int(buffers[name]), v.nbytes
                    elif isinstance(v, np.ndarray):
                        buffers[name] = cuda.mem_alloc(max(v.nbytes, 1))
                        cuda.memcpy_htod(buffers[name], v)
                        pointers[name], sizes[name] = int(buffers[name]), v.nbytes
                    else:
                        assert isinstance(v, DeviceArray)
                        pointers[name], sizes[name] = v.pointer, v.nbytes
                # read-only arrays the kernels read from __constant__ memory
                for name in program.constants:
                    symbol, size = loaded.module.get_global(f"{name}_const")
                    cuda.memcpy_dtod(symbol, pointers[name], min(size, sizes[name]))
                args = [pointers[b.argument.name] if b.argument.pointer else b.value
                        for b in bound]
                call.launches = [
                    (loaded.functions[s.index], s.grid, s.block, s.shared_bytes,
                     args + [np.int32(h) for h in s.host])
                    for s in plan]
            except BaseException:
                call.close()
                raise
        return call

    def run(self, program: KernelProgram, values: Mapping[str, object], *,
            written: Collection[str] | None = None) -> None:
        """Synchronise (after whatever the caller queued), copy in, launch every step,
        synchronise, copy back the written arrays, free."""
        with self.active() as cuda:
            cuda.Context.synchronize()
            call = self.prepare(program, values, written=written)
            try:
                call.launch_all()
                cuda.Context.synchronize()
                call.copy_back()
            finally:
                call.close()

    def time_calls(self, calls: Sequence[GpuCall], repeats: int, warmup: int,
                   budget_ms: float | None = None, cutoff_ms: float | None = None
                   ) -> list[float]:
        """CUDA events around each run's launches (not the copies), run ``r`` on
        ``calls[r % len(calls)]``; warm-ups are timed too, for the budget only."""
        budget = RunBudget(repeats, warmup, budget_ms, cutoff_ms)
        with self.active():
            warm = self._warm_up(calls, budget)
            times = budget.counted_warmups(warm)
            while budget.more_timed(times):
                times.append(self._one_run(calls[(len(warm) + len(times)) % len(calls)]))
        return times

    def _one_run(self, call: GpuCall) -> float:
        """Milliseconds of one run of ``call``'s launches, between two CUDA events."""
        with self.active() as cuda:
            start, end = cuda.Event(), cuda.Event()
            start.record()
            call.launch_all()
            end.record()
            end.synchronize()
            return end.time_since(start)

    def _warm_up(self, calls: Sequence[GpuCall], budget: RunBudget) -> list[float]:
        """The warm-up runs ``budget`` asks for, each timed (for the budget only)."""
        warm: list[float] = []
        while budget.more_warmups(warm):
            warm.append(self._one_run(calls[len(warm) % len(calls)]))
        with self.active() as cuda:
            cuda.Context.synchronize()
        return warm

    def time(self, program: KernelProgram, value_sets: Sequence[Mapping[str, object]],
             repeats: int, warmup: int, budget_ms: float | None = None,
             cutoff_ms: float | None = None) -> list[float]:
        """As :meth:`time_calls` on freshly prepared ``value_sets``; every NumPy array is
        left as the last run on it made it."""
        return self._on_prepared(program, value_sets, lambda calls: self.time_calls(
            calls, repeats, warmup, budget_ms, cutoff_ms))

    def time_launches(self, program: KernelProgram,
                      value_sets: Sequence[Mapping[str, object]], repeats: int,
                      warmup: int, budget_ms: float | None = None,
                      cutoff_ms: float | None = None) -> LaunchTimes:
        """As :meth:`time`, each run broken down by launch: an event before the first
        launch and one after every launch (host steps included), so a launch's time is
        the gap between its two events and the launches add up to the run.  The events
        between launches cost the GPU a little (what :meth:`time` avoids): ask for the
        breakdown only where it is used."""
        return self._on_prepared(program, value_sets, lambda calls: self.time_calls_by_launch(
            calls, repeats, warmup, budget_ms, cutoff_ms))

    def _on_prepared(self, program: KernelProgram,
                     value_sets: Sequence[Mapping[str, object]], measure):
        """``measure`` on ``value_sets`` prepared as calls, whose arrays are then copied
        back (NumPy arrays left as the last run made them); the calls are closed even
        when ``measure`` raises."""
        calls: list[GpuCall] = []
        try:
            for values in value_sets:
                calls.append(self.prepare(program, values))
            result = measure(calls)
            for call in calls:
                call.copy_back()
            return result
        finally:
            for call in calls:
                call.close()

    def time_calls_by_launch(self, calls: Sequence[GpuCall], repeats: int,
                             warmup: int, budget_ms: float | None = None,
                      cutoff_ms: float | None = None) -> LaunchTimes:
        """:meth:`time_calls` with the breakdown of :meth:`time_launches`."""
        budget = RunBudget(repeats, warmup, budget_ms, cutoff_ms)
        k = len(calls)
        n = len(calls[0].program.launches)
        with self.active() as cuda:
            warm = self._warm_up(calls, budget)
            marks = [cuda.Event() for _ in range(1 + max(len(c.launches) for c in calls))]
            times: list[float] = []
            launches = []
            while budget.more_timed(times):
                call = calls[(len(warm) + len(times)) % k]
                marks[0].record()
                for i, (func, g, block, shared, args) in enumerate(call.launches):
                    func.prepared_async_call(g, block, None, *args, shared_size=shared)
                    marks[i + 1].record()
                last = marks[len(call.launches)]
                last.synchronize()
                row = [0.0] * n
                for i, step in enumerate(call.plan):
                    row[step.index] += marks[i + 1].time_since(marks[i])
                times.append(last.time_since(marks[0]))
                launches.append(tuple(row))
        return LaunchTimes(tuple(times), tuple(launches))

    def time_by_kernel(self, program: KernelProgram, values: Mapping[str, object],
                       repeats: int = 5, warmup: int = 1) -> dict[str, float]:
        """Per kernel, the milliseconds of all its launches in one run (events around
        each launch; median over ``repeats``)."""
        call = self.prepare(program, values)
        try:
            with self.active() as cuda:
                for _ in range(warmup):
                    call.launch_all()
                cuda.Context.synchronize()
                events = [(cuda.Event(), cuda.Event()) for _ in call.launches]
                runs = []
                for _ in range(repeats):
                    for (func, g, block, shared, args), (start, end) in zip(
                            call.launches, events, strict=True):
                        start.record()
                        func.prepared_async_call(g, block, None, *args, shared_size=shared)
                        end.record()
                    cuda.Context.synchronize()
                    totals = [0.0] * len(program.launches)
                    for step, (start, end) in zip(call.plan, events, strict=True):
                        totals[step.index] += end.time_since(start)
                    runs.append(totals)
                call.copy_back()
        finally:
            call.close()
        return {launch.kernel: statistics.median(r[k] for r in runs)
                for k, launch in enumerate(program.launches)}


class GpuCall:
    """One prepared call on a :class:`GpuDevice`: device buffers of the NumPy arrays,
    and per step (function, grid, block, shared bytes, arguments)."""

    def __init__(self, device: GpuDevice, program: KernelProgram, bound, plan, buffers,
                 launches, written):
        self.device = device
        self.program = program
        self.bound = bound
        self.plan = plan
        self.buffers = buffers
        self.launches = launches
        self.written = written

    def launch_all(self, stream=None) -> None:
        with self.device.active():
            for func, g, block, shared, args in self.launches:
                func.prepared_async_call(g, block, stream, *args, shared_size=shared)

    def copy_back(self) -> None:
        """Copy the written NumPy arrays back (all of them when ``written`` is None)."""
        with self.device.active() as cuda:
            for b in self.bound:
                name = b.argument.name
                if b.argument.kind == "scratch":
                    continue  # the call's own memory, not the caller's
                if name in self.buffers and (self.written is None or name in self.written):
                    cuda.memcpy_dtoh(b.value, self.buffers[name])

    def close(self) -> None:
        if not self.buffers:
            return
        with self.device.active():
            for buffer in self.buffers.values():
                buffer.free()
        self.buffers = {}


# --------------------------------------------------------------------------------------
# Choosing a device
# --------------------------------------------------------------------------------------

_DEVICES: dict[str, Device] = {}
_DEVICES_LOCK = threading.Lock()


def get_device(backend: str | Device = "cpu", index: int | None = None) -> Device:
    """The shared device for ``backend``: "cpu", "gpu" (device ``index``, default 0),
    "gpu:N", or a :class:`Device` (returned as is).  One object per device in the
    process, so compiled code is cached once."""
    if not isinstance(backend, str):
        if callable(getattr(backend, "run", None)) and \
                getattr(backend, "kind", None) in ("cpu", "gpu"):
            return backend
        raise PolygpuError(f"backend {backend!r}: 'cpu', 'gpu', 'gpu:N' or a Device")
    kind, _, number = backend.partition(":")
    if kind == "gpu" and number:
        if not number.isdigit():
            raise PolygpuError(f"backend {backend!r}: 'gpu:N' with N a device index")
        if index is not None and index != int(number):
            raise PolygpuError(f"backend {backend!r} but device index {index}")
        index = int(number)
    elif kind not in ("cpu", "gpu") or number:
        raise PolygpuError(f"unknown backend {backend!r} (cpu, gpu or gpu:N)")
    key = "cpu" if kind == "cpu" else f"gpu:{index or 0}"
    with _DEVICES_LOCK:
        device = _DEVICES.get(key)
        if device is None:
            device = CpuEmulator() if kind == "cpu" else GpuDevice(index or 0)
            _DEVICES[key] = device
    return device
