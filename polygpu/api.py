"""The Python API: :func:`optimize` turns a loop nest into a callable :class:`Kernel`.

``optimize`` runs the whole pipeline once (frontend, model, scheduler, tiling, memory
placement, CUDA generation) for one variant and compiles the result for a backend; the
returned kernel is then called like the original function, with the same arguments in
the same order (or by name), and modifies its array arguments in place as the loop nest
would.  One kernel serves every size the region's assumptions allow.  A plan chosen at
known sizes (``params``: the cost model's, a tuned or a recorded one) is *specialized*
for them -- their values baked in: constant bounds, and no guards inside whole register
tiles, which nvcc cannot hoist (all-pairs L1 distances at 2000 x 5419 on an H100: 2.8 ms
against 6.5 ms for the same plan left parametric); a call at other sizes compiles the
same plan without them once (a parametric twin) and keeps it.  A parametric program's
grids are expressions of the integer parameters; at sizes its 32-bit offsets or its
unfolded grid cannot reach, a call compiles the same variant for its sizes once (64-bit
indices, blocks folded onto grid x) and runs that.

Which variant: the one given; else, with ``tune=True``, the best one a search measures
(:func:`polygpu.search.tuner.tune`); else the fastest one the tuning database holds for
this source, function, ``params`` and environment (what an earlier ``polygpu tune``
measured); else, with ``params``, the cost model's top plan at those sizes
(:func:`polygpu.search.plan_model.choose`); else the default
:class:`~polygpu.schedule.variant.Variant`.
``Kernel.origin`` says which.

Arrays (see :meth:`Kernel.__call__`):

* **NumPy arrays** of exactly the declared dtype and shape, C-contiguous and writeable:
  on the GPU they are copied to the device before the launches and back afterwards, into
  the same arrays; the CPU emulator works on them directly.
* **Device arrays**, anything with ``__cuda_array_interface__`` (PyCUDA ``GPUArray``,
  CuPy arrays, PyTorch CUDA tensors, Numba device arrays): the kernels use their memory
  directly, without copies.  GPU backend only.

Array arguments must not overlap in memory unless neither is written by the region
(reading one array under two names is fine): a :class:`PolygpuError` names the two.

A call runs through the device layer (:mod:`polygpu.runtime.device`), exactly as
``polygpu check`` and the tuner run a program: every host step, grids evaluated and
checked, ``__constant__`` copies, dynamic shared memory opt-in, a specialized program
run only at its own sizes (its parametric twin at others), and (where
:func:`polygpu.model.bounds.require_in_bounds` exists)
sizes at which an access would leave its array refused before anything runs.

Stream semantics: the kernels are launched on the legacy default stream.  Each call
synchronises the whole CUDA context before its first launch and after its last one, so
it is ordered after all work queued before it on any stream of the context (a CuPy or
PyTorch current stream included) and finished when it returns.  What it does not order
is work another host thread queues concurrently: synchronise that yourself.

Device arrays must belong to the CUDA context polygpu launches in: the *primary* context
of the chosen device (``optimize(..., device=N)``, default 0), the one CuPy and PyTorch
allocate in.  PyCUDA arrays must be allocated there too: ``import
pycuda.autoprimaryctx`` (not ``pycuda.autoinit``, which makes a private context), or
allocate inside ``with polygpu.runtime.gpu.device(N).active(): ...``.
"""

from __future__ import annotations

import functools
import inspect
import operator
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from polygpu.codegen.program import (
    IndexWidthError,
    KernelProgram,
    Launch,
    SpecializationError,
)
from polygpu.errors import PolygpuError
from polygpu.frontend import ir, load
from polygpu.model.bounds import require_in_bounds
from polygpu.pipeline import Compiled, Prepared, compile_variant, prepare
from polygpu.runtime import inputs
from polygpu.runtime.arguments import DeviceArray, device_array
from polygpu.runtime.device import Device, GpuUnavailableError, get_device, launch_plan
from polygpu.runtime.footprint import at_parameters
from polygpu.runtime.grid import GridLimitError
from polygpu.schedule.variant import Variant
from polygpu.search import plan_model
from polygpu.search.measurement import Environment, Measurement, canonical, source_hash

__all__ = ["BACKENDS", "ORIGINS", "Kernel", "lookup_environment", "optimize"]

BACKENDS = ("auto", "gpu", "cpu")
ORIGINS = ("given", "tuned", "database", "model", "default")


# --------------------------------------------------------------------------------------
# optimize
# --------------------------------------------------------------------------------------


def optimize(
    func_or_path: Any,
    params: Mapping[str, int] | None = None,
    *,
    function: str | None = None,
    variant: Variant | Mapping | str | None = None,
    tune: bool = False,
    strategy: str = "model",
    budget: int | None = None,
    time_limit: float | None = None,
    database: Any = None,
    backend: str | Device = "auto",
    device: int | Device = 0,
    defines: Sequence[str] = (),
    include_dirs: Sequence[str] = (),
    fast_math: bool = False,
    gpus: str | Sequence[int] | None = None,
    scheduler: str | None = None,
) -> Kernel:
    """Compile a loop nest into a callable :class:`Kernel` (see the module docstring).

    ``func_or_path``: an ``@affine`` function (or any module-level function in a ``.py``
    file: it is read from its source, never run), or a spec: ``"file.c"``,
    ``"file.c:function"``, ``"module.py:function"`` or a path (with ``function=``).

    ``params``: integer parameter values (``{"n": 4096}``), the size to tune for and the
    key of the tuning database; required with ``tune=True``.  The cost model's plan at
    them is specialized for them; they do not restrict the sizes the kernel may be
    called with (others get the plan's parametric twin, compiled on first use).

    ``variant``: a :class:`Variant`, its JSON object (dict) or text; overrides tuning.
    ``tune``: search the variants at ``params`` now (``strategy``, ``budget`` and
    ``time_limit``, seconds, as in :class:`~polygpu.search.tuner.TuneOptions`), measuring
    on the resolved backend.
    ``database``: a :class:`~polygpu.search.database.TuningDatabase`, a path, None for
    the default file (:func:`~polygpu.search.database.default_path`), or False for none.
    A lookup never creates a missing file; tuning records into it.

    ``backend``: ``"gpu"`` (PyCUDA), ``"cpu"`` (the CUDA emulator: small sizes, tests)
    or ``"auto"`` (the GPU when PyCUDA and a device are usable, else the emulator), or a
    :class:`~polygpu.runtime.device.Device` object.  ``device``: the CUDA device index
    (its primary context is used, so CuPy and PyTorch arrays on it can be passed).

    ``gpus``, ``scheduler``: with ``tune=True``, measure on several GPUs at once
    (:mod:`polygpu.search.distributed`, docs/distributed.md): ``gpus`` this machine's
    (``"all"``, ``"0,1"`` or a list of indices; on the CPU emulator, emulator workers, as
    many as listed), ``scheduler`` the workers of a running Dask cluster
    (``"tcp://HOST:8786"``).  The same candidates, checks and database as one GPU.

    ``fast_math``: float ``expf logf sinf cosf powf`` through CUDA's fast intrinsics
    (:attr:`~polygpu.schedule.variant.Variant.fast_math`) in whatever is compiled or
    tuned (a given variant too); checked like any program.
    """
    if not isinstance(device, int):  # a Device object given as device=
        backend, device = device, 0
    target, why = _resolve_backend(backend, device)
    resolved = target.kind
    spec, function = _spec(func_or_path, function)
    defines, include_dirs = tuple(defines), tuple(include_dirs)
    prepared = prepare(spec, function, defines, include_dirs)
    source = load(spec, function, defines, include_dirs)
    if params is not None:
        params = inputs.integer_parameters(source, params)  # all of them, nothing else

    measurement: Measurement | None = None
    tuning = None
    compiled: Compiled | None = None
    if variant is not None:
        origin, chosen = "given", _variant(variant)
        if fast_math:
            chosen = replace(chosen, fast_math=True)
    elif tune:
        if params is None:
            example = ", ".join(f"{p!r}: 4096" for p in prepared.analysis.scop.parameters)
            raise PolygpuError(f"{source.name}: tune=True needs params, the sizes to tune "
                               f"for (e.g. params={{{example}}})")
        if backend == "auto" and resolved != "gpu" and scheduler is None:
            raise PolygpuError(f"tune=True measures on the GPU, and none is usable "
                               f"({why}); pass backend='cpu' to tune on the CPU "
                               "emulator (for tests only: its times say nothing about a GPU)")
        tuning = _tune(spec, function, params, resolved, strategy, budget, database, defines,
                       include_dirs, getattr(target, "index", 0), fast_math, time_limit,
                       gpus, scheduler)
        best = tuning.best
        if best is None:
            counts = ", ".join(f"{n} {stage}" for stage, n in sorted(tuning.counts().items()))
            raise PolygpuError(f"{source.name}: tuning found no variant that passed the "
                               f"reference check ({counts or 'no candidates'})")
        origin, chosen, measurement = "tuned", best.variant, best.measurement
    else:
        origin, chosen = "default", Variant(fast_math=fast_math)
        if params is not None:
            for m in recorded_measurements(spec, prepared, params, resolved, database,
                                           getattr(target, "index", 0)):
                try:  # a record from an older variant format, say: try the next one
                    recorded = Variant.from_json(m.key)
                    if recorded.fast_math != fast_math:  # the math asked for, only
                        continue
                    compiled = compile_variant(prepared, recorded, params)
                except PolygpuError:
                    continue
                origin, chosen, measurement = "database", compiled.variant, m
                break
            else:  # sizes known, nothing measured: the cost model's top plan, specialized
                # for them as the tuner's variants are (other sizes: its parametric twin)
                origin, chosen = "model", replace(plan_model.choose(prepared, params).variant,
                                                  specialize=True, fast_math=fast_math)
    if compiled is None:
        compiled = compile_variant(prepared, chosen, params)
    kernel = Kernel(compiled, source, spec, target, origin, measurement, tuning)
    kernel._cpu_reason = why
    return kernel


def _spec(func_or_path: Any, function: str | None) -> tuple[str, str | None]:
    """The frontend spec of ``func_or_path`` and the function to pass with it."""
    if isinstance(func_or_path, str | os.PathLike):
        return os.fspath(func_or_path), function
    fn = getattr(func_or_path, "__wrapped__", func_or_path)  # an AffineFunction
    if not inspect.isfunction(fn):
        raise PolygpuError(f"optimize: expected an @affine function or a spec such as "
                           f"'kernels/mv.c' or 'module.py:function', got "
                           f"{type(func_or_path).__name__}")
    if fn.__qualname__ != fn.__name__:  # the frontend reads top-level definitions only
        raise PolygpuError(f"'{fn.__qualname__}': only module-level functions can be affine "
                           "kernels")
    if function is not None and function != fn.__name__:
        raise PolygpuError(f"optimize: function={function!r} but the function given is "
                           f"'{fn.__name__}'")
    try:
        path = inspect.getsourcefile(fn)
    except TypeError:
        path = None
    if path is None or not os.path.exists(path):
        raise PolygpuError(f"cannot find the source file of '{fn.__name__}' (the frontend "
                           "reads the function from its file: define it in a .py module)")
    return f"{path}:{fn.__name__}", None


def _variant(variant: Variant | Mapping | str) -> Variant:
    if isinstance(variant, Variant):
        return variant
    if isinstance(variant, str):
        return Variant.from_json(variant)
    if isinstance(variant, Mapping):
        return Variant.from_json(dict(variant))
    raise PolygpuError(f"variant: expected a Variant, a dict or JSON text, got "
                       f"{type(variant).__name__}")


def _tune(spec, function, params, backend, strategy, budget, database, defines,
          include_dirs, index=0, fast_math=False, time_limit=None, gpus=None,
          scheduler=None):
    from polygpu.search import tuner
    from polygpu.search.distributed import runner_for
    from polygpu.search.runner import ProcessRunner
    from polygpu.search.space import SpaceOptions

    options = tuner.TuneOptions(strategy=strategy, budget=budget, defines=defines,
                                include_dirs=include_dirs, time_limit_s=time_limit,
                                space=SpaceOptions(fast_math=fast_math))
    db, owned = _open_database(database, create=True)
    try:
        if scheduler is not None and backend != "cpu":
            backend = "gpu"  # the cluster's GPUs measure, whatever this machine has
        if gpus is not None and not isinstance(gpus, str):
            gpus = ",".join(str(int(g)) for g in gpus)
        runner = runner_for(gpus=gpus, scheduler=scheduler, backend=backend) or \
            ProcessRunner(backend, device=index)
        with runner:  # its measuring child (or cluster) ends
            limits_of = getattr(runner, "limits", None)
            limits = limits_of() if limits_of is not None and backend == "gpu" else None
            return tuner.tune(spec, params, runner, function=function, options=options,
                              database=db, limits=limits)
    finally:
        if owned:
            db.close()


# --------------------------------------------------------------------------------------
# The tuning database
# --------------------------------------------------------------------------------------


@functools.cache
def lookup_environment(backend: str, index: int = 0) -> Environment:
    """The :class:`Environment` measurements for ``backend`` ("gpu" or "cpu") are
    recorded under: what ``ProcessRunner(backend).environment()`` reports, computed in
    this process (which launches on the GPU anyway) instead of a child."""
    from polygpu.search.runner import child_environment

    if backend not in ("gpu", "cpu"):
        raise PolygpuError(f"backend {backend!r}: gpu or cpu")
    return child_environment(backend, index)


def region_hash(spec: str, prepared) -> str:
    """The source hash the tuner records the region's measurements under."""
    from polygpu.search.tuner import _region_text

    return source_hash(_region_text(spec, prepared))


def recorded_measurements(spec: str, prepared, params: Mapping[str, int], backend: str,
                          database: Any = None, index: int = 0) -> list[Measurement]:
    """The ok measurements the database holds for this region, ``params`` and the
    environment of ``backend``, fastest first (the latest one of each variant)."""
    db, owned = _open_database(database, create=False)
    if db is None:
        return []
    try:
        found = db.lookup(region_hash(spec, prepared), prepared.analysis.scop.function,
                          params, lookup_environment(backend, index))
    finally:
        if owned:
            db.close()
    ok = [m for m in found.values() if m.status == "ok"]
    return sorted(ok, key=lambda m: (m.time_ms, m.key))


def _open_database(database: Any, create: bool):
    """(the database or None, whether this call opened it and must close it)."""
    from polygpu.search.database import TuningDatabase, default_path

    if database is False:
        return None, False
    if isinstance(database, TuningDatabase):
        return database, False
    if database is not None and not isinstance(database, str | os.PathLike):
        raise PolygpuError(f"database: expected a TuningDatabase, a path, None or False, "
                           f"got {type(database).__name__}")
    path = default_path() if database is None else Path(database)
    if not create and not path.exists():
        return None, False
    return TuningDatabase(path), True


# --------------------------------------------------------------------------------------
# Backends
# --------------------------------------------------------------------------------------


def _gpu_problem(index: int = 0) -> str:
    try:
        get_device("gpu", index).open()
    except GpuUnavailableError as e:
        return str(e)
    return ""


def _resolve_backend(backend: str | Device, index: int = 0) -> tuple[Device, str]:
    """(the device to use, why "auto" chose the CPU emulator)."""
    if not isinstance(backend, str):
        device = get_device(backend)
        if device.kind == "gpu" and hasattr(device, "open"):
            device.open()
        return device, ""
    if backend not in BACKENDS:
        raise PolygpuError(f"backend {backend!r}: one of {', '.join(BACKENDS)}")
    if backend == "gpu":
        device = get_device("gpu", index)
        device.open()  # GpuUnavailableError (a PolygpuError) with the reason
        return device, ""
    if backend == "auto":
        problem = _gpu_problem(index)
        return (get_device("cpu"), problem) if problem else (get_device("gpu", index), "")
    return get_device("cpu"), ""


# --------------------------------------------------------------------------------------
# Kernel
# --------------------------------------------------------------------------------------


class Kernel:
    """A compiled variant of a loop nest, callable like the original function.

    Attributes: ``name``, ``spec``, ``backend`` ("gpu" or "cpu"), ``source`` (the CUDA
    text), ``variant``, ``origin`` ("given", "tuned", "database", "model" or "default"),
    ``measurement`` (the time behind a tuned or database variant), ``tuning`` (the
    :class:`~polygpu.search.tuner.TuneResult` with ``tune=True``), ``program``,
    ``launches``, ``compiled`` (every stage's result), ``signature`` (argument names) and
    ``written`` (the arrays the region writes: the only ones copied back from the GPU).
    """

    def __init__(self, compiled: Compiled, source: ir.Program, spec: str,
                 backend: str | Device, origin: str, measurement: Measurement | None = None,
                 tuning=None):
        if origin not in ORIGINS:
            raise ValueError(f"origin {origin!r}: one of {ORIGINS}")
        self.compiled = compiled
        self.spec = spec
        self.device = get_device(backend)  # the device layer every call goes through
        self.backend = self.device.kind
        self.origin = origin
        self.measurement = measurement
        self.tuning = tuning
        self._source = source
        scop = compiled.analysis.scop
        self._scop = scop
        self._in_bounds: set[tuple] = set()  # parameter values already proven in bounds
        self._twins: list[KernelProgram] = []  # compiled for sizes the program can't reach
        self._context = scop.context
        writes = scop.access_map("write").range().get_set_list()
        # arrays the region writes: only these are copied back from the device
        self.written = frozenset(writes.get_at(k).get_tuple_name()
                                 for k in range(writes.n_set()))
        self._cpu_reason = ""  # why "auto" chose the emulator, for error messages
        self.__signature__ = inspect.Signature([
            inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
            for name in source.signature])
        # compile now, so a compiler error surfaces here and the first call is not slow
        self.device.load(self.program)

    @property
    def name(self) -> str:
        return self.program.function

    @property
    def program(self) -> KernelProgram:
        return self.compiled.program

    @property
    def source(self) -> str:
        return self.program.source

    @property
    def variant(self) -> Variant:
        return self.compiled.variant

    @property
    def launches(self) -> tuple[Launch, ...]:
        return self.program.launches

    @property
    def signature(self) -> tuple[str, ...]:
        return self._source.signature

    def __repr__(self) -> str:
        time = f", {self.measurement.time_ms:.4g} ms" if self.measurement and \
            self.measurement.time_ms is not None else ""
        return (f"<polygpu.Kernel {self.name}({', '.join(self.signature)}) on {self.backend}, "
                f"{len(self.launches)} launch{'es' * (len(self.launches) != 1)}, "
                f"{self.origin} variant {canonical(self.variant.to_json())}{time}>")

    # -- calling ---------------------------------------------------------------------

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        """Run the kernels on these arguments, in the original function's order (or by
        name).  Arrays are modified in place; returns None like the loop nest.

        Every argument is checked before anything runs: integer parameters must be
        integers within their C type, satisfy the region's assumptions, and agree with
        the arrays' shapes; arrays must have exactly the declared dtype and shape, be
        contiguous, and not overlap an array the region writes.  Any violation is a
        :class:`PolygpuError` naming the argument.  The launches go through the device
        layer (:meth:`polygpu.runtime.device.Device.run`), as ``check`` runs them.
        """
        values = self._arguments(args, kwargs)
        scalars, ints = self._scalars(values)
        shapes = inputs.array_shapes(self._source, ints)
        arrays = {a.name: self._array(a, values[a.name], shapes[a.name], ints)
                  for a in self._source.arrays}
        if self.backend == "cpu":
            device = [n for n, v in arrays.items() if isinstance(v, DeviceArray)]
            if device:
                raise PolygpuError(
                    f"{self.name}(): argument '{device[0]}' is a device array "
                    "(__cuda_array_interface__), but this kernel runs on the CPU emulator "
                    f"(backend 'cpu'{self._cpu_reason and ': ' + self._cpu_reason}); pass a "
                    "NumPy array")
        self._require_in_bounds(ints)
        program = self._program_for(ints)
        self.device.run(program, scalars | arrays, written=self.written)

    def _program_for(self, ints: Mapping[str, int]) -> KernelProgram:
        """The program to run at these sizes: the compiled one, or -- where it was
        specialized for other sizes, or its 32-bit offsets or its grid cannot reach these
        (it was compiled without sizes, or for smaller ones) -- the same variant compiled
        for these sizes and not specialized, with 64-bit indices and blocks folded onto
        grid x as needed (the same pipeline, proven legal the same way), made once and
        kept for later calls."""
        for program in (self.program, *self._twins):
            try:
                launch_plan(program, ints)
            except (IndexWidthError, GridLimitError, SpecializationError):
                continue
            return program
        compiled = self.compiled
        prepared = Prepared(compiled.spec, compiled.analysis, compiled.candidates,
                            compiled.source_scop, compiled.expansion, compiled.splitting,
                            compiled.snapshot)
        twin = compile_variant(prepared, replace(compiled.variant, specialize=False),
                               dict(ints)).program
        launch_plan(twin, ints)  # what the twin cannot do either is the user's to hear
        self.device.load(twin)
        self._twins.append(twin)
        return twin

    def _require_in_bounds(self, ints: Mapping[str, int]) -> None:
        """Refuse sizes at which an access leaves its array (the model's exact check,
        :func:`polygpu.model.bounds.require_in_bounds`), once per size."""
        key = tuple(sorted(ints.items()))
        if key not in self._in_bounds:
            require_in_bounds(self._scop, dict(ints))
            self._in_bounds.add(key)

    def _arguments(self, args: tuple, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        names = self.signature
        if len(args) > len(names):
            raise PolygpuError(f"{self.name}() takes {len(names)} arguments "
                               f"({', '.join(names)}), {len(args)} given")
        values = dict(zip(names, args, strict=False))
        for name, value in kwargs.items():
            if name not in names:
                raise PolygpuError(f"{self.name}() has no argument '{name}' (its arguments: "
                                   f"{', '.join(names)})")
            if name in values:
                raise PolygpuError(f"{self.name}(): argument '{name}' given twice")
            values[name] = value
        missing = [n for n in names if n not in values]
        if missing:
            raise PolygpuError(f"{self.name}(): missing argument"
                               f"{'s' * (len(missing) > 1)} {', '.join(map(repr, missing))} "
                               f"(it takes {', '.join(names)})")
        return values

    def _scalars(self, values: Mapping[str, Any]) -> tuple[dict, dict[str, int]]:
        """(every scalar as a NumPy scalar of its dtype, the integer parameters)."""
        scalars, ints = {}, {}
        for p in self._source.params:
            v = values[p.name]
            if p.dtype in inputs.INT_RANGES:
                if isinstance(v, bool | np.bool_) or not inputs.is_integer(v):
                    raise PolygpuError(f"{self.name}(): argument '{p.name}' must be an "
                                       f"integer, got {_describe(v)}")
                low, high = inputs.INT_RANGES[p.dtype]
                if not low <= operator.index(v) <= high:
                    raise PolygpuError(f"{self.name}(): argument '{p.name}' = {v} does not "
                                       f"fit the kernel's {p.dtype}")
                ints[p.name] = operator.index(v)
            elif not isinstance(v, int | float | np.integer | np.floating) \
                    or isinstance(v, bool | np.bool_):
                raise PolygpuError(f"{self.name}(): argument '{p.name}' must be a real "
                                   f"number, got {_describe(v)}")
            scalars[p.name] = np.dtype(p.dtype).type(v)
        if at_parameters(self._context, ints).is_empty():
            raise PolygpuError(f"{self.name}(): the parameters ({_params_text(ints)}) "
                               f"violate the region's assumptions {self._context}")
        return scalars, ints

    def _array(self, decl: ir.ArrayDecl, v: Any, shape: tuple[int, ...],
               ints: Mapping[str, int]) -> np.ndarray | DeviceArray:
        dtype = np.dtype(decl.dtype)
        where = f"{self.name}(): argument '{decl.name}'"
        wanted = f"a {dtype} array of shape {shape}" + (
            f" (from {_params_text(ints)})" if ints else "")
        if isinstance(v, np.ndarray):
            if v.dtype != dtype:
                raise PolygpuError(f"{where} must be {wanted}, got dtype {v.dtype} "
                                   f"(convert with .astype(np.{dtype}))")
            if v.shape != shape:
                raise PolygpuError(f"{where} must be {wanted}, got shape {v.shape}")
            if not v.flags.c_contiguous:
                raise PolygpuError(f"{where} must be C-contiguous (results are written into "
                                   "it): pass np.ascontiguousarray(...) and use that array")
            if not v.flags.writeable:
                raise PolygpuError(f"{where} is read-only; the kernel writes into its "
                                   "arguments")
            return v
        try:
            interface = v.__cuda_array_interface__
        except AttributeError:
            interface = None
        if interface is None:
            raise PolygpuError(f"{where} must be {wanted}: a NumPy array or a device array "
                               f"(__cuda_array_interface__), got {_describe(v)}")
        return device_array(interface, where, dtype, shape, wanted)


def _describe(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return f"a {v.dtype} NumPy array of shape {v.shape}"
    text = repr(v)
    return f"{type(v).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


def _params_text(ints: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in ints.items())
