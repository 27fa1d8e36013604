"""What code generation hands to the runtimes: CUDA text plus a launch plan.

The plan is data, not host code, so every backend follows the same one: the CPU
emulator generates its host loop from it, the GPU backend launches through PyCUDA.
Kernels take the original function's arguments in signature order: integer and
float scalars by value, arrays as flat row-major ``T *__restrict__`` pointers; then one
pointer per *scratch* array (an expanded temporary, :mod:`polygpu.transform.expand`),
which the runtime allocates for the call and nobody sees.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

import islpy as isl

from polygpu.codegen.index_width import INT32_MAX, IndexBound, violated
from polygpu.errors import PolygpuError
from polygpu.model.scop import fix_parameters


@dataclass(frozen=True)
class Argument:
    """One argument of the original function, as every kernel receives it, or a scratch
    array (after the function's arguments; allocated by the runtime, never returned)."""

    name: str
    kind: str  # 'scalar' | 'array' | 'scratch'
    dtype: str  # key of polygpu.frontend.ir.DTYPES
    shape: tuple[str, ...]  # arrays: extents as C integer expressions over the parameters

    @property
    def pointer(self) -> bool:
        """Passed as a device pointer (an array or a scratch array)."""
        return self.kind != "scalar"


@dataclass(frozen=True)
class Launch:
    """One kernel launch.  ``grid`` holds C integer expressions over the integer
    parameters, using only ``+ - *``, integer literals, parentheses, ``/`` on
    non-negative operands (so C and floor division agree) and ``max(a, b)``."""

    kernel: str
    grid: tuple[str, str, str]
    block: tuple[int, int, int]
    shared_bytes: int = 0  # dynamic shared memory


@dataclass(frozen=True)
class KernelProgram:
    function: str
    source: str  # CUDA C: the __global__ kernels (self-contained, no host code)
    arguments: tuple[Argument, ...]
    parameters: tuple[str, ...]  # the integer parameters, a subset of the arguments
    launches: tuple[Launch, ...]  # run in this order, each finishing before the next
    # arrays the kernels read from a `__constant__` copy named `<array>_const`: the host
    # copies each array there before the first launch
    constants: tuple[str, ...] = ()
    # parameter values the kernels were specialized for (empty: any values): the
    # runtimes refuse to launch them at other values, where they would be wrong
    specialized: tuple[tuple[str, int], ...] = ()
    # host loops (schedule/host.py): the kernels' trailing integer arguments, and the
    # steps at which each launch runs, an isl union set ``[params] -> { kernel[h..] }``
    # (tuple named after the launch's kernel): the launches run at every host step in
    # lexicographic order of ``h``, in launch order within a step.  Empty: each launch
    # runs once, in order.  The grids may use the host iterators.
    host_iterators: tuple[str, ...] = ()
    host_steps: str = ""
    # index arithmetic (codegen/index_width.py): 64-bit (`long long` iterators and
    # offsets) when a specialized program needs it; a 32-bit program that is not
    # specialized records the bounds it is proven for, and the runtimes refuse to
    # launch it beyond them (IndexWidthError)
    index64: bool = False
    index_bounds: tuple[IndexBound, ...] = ()
    # float math through CUDA's fast intrinsics (Variant.fast_math): the check says so
    fast_math: bool = False

    def steps(self, values: Mapping[str, object]) -> tuple[tuple[int, tuple[int, ...]], ...]:
        """Every launch to run at parameter ``values``, in order: (index into
        ``launches``, values of the host iterators)."""
        params = self.parameter_values(values)
        if not self.host_iterators:
            return tuple((k, ()) for k in range(len(self.launches)))
        return _host_steps(self.host_steps, tuple(sorted(params.items())),
                           tuple(launch.kernel for launch in self.launches))

    def grid_values(self, params: Mapping[str, int], host: tuple[int, ...]
                    ) -> dict[str, int]:
        """The names a grid expression may use at one step, with their values."""
        return {**params, **dict(zip(self.host_iterators, host, strict=True))}

    def parameter_values(self, values: Mapping[str, object]) -> dict[str, int]:
        """The integer parameters among ``values`` (a call's arguments), refused when
        the program was specialized for others."""
        params = {p: int(values[p]) for p in self.parameters}
        self.check_parameters(params)
        return params

    def check_parameters(self, values: Mapping[str, int]) -> None:
        """Refuse parameter values a specialized program was not generated for."""
        wrong = {k: v for k, v in self.specialized if int(values[k]) != v}
        if wrong:
            raise SpecializationError(
                f"{self.function}: the kernels are specialized for "
                + ", ".join(f"{k}={v}" for k, v in self.specialized) + "; got "
                + ", ".join(f"{k}={values[k]}" for k in wrong))
        if self.index_bounds and not self.index64:
            bad = violated(self.index_bounds, {p: int(values[p]) for p in self.parameters})
            if bad is not None:
                bound, value = bad
                at = ", ".join(f"{p}={values[p]}" for p in self.parameters)
                raise IndexWidthError(
                    f"{self.function}: the kernels use 32-bit index arithmetic, proven "
                    f"only while {bound.what} is at most {INT32_MAX}; at {at} it is "
                    + ("unbounded" if value is None else str(value))
                    + ". Compile it for these sizes (-p with compile/check/tune, params= "
                    "with polygpu.optimize): polygpu then generates 64-bit indices")


@lru_cache(maxsize=64)
def _host_steps(text: str, params: tuple[tuple[str, int], ...], kernels: tuple[str, ...]
                ) -> tuple[tuple[int, tuple[int, ...]], ...]:
    steps = isl.UnionSet(text)
    steps = steps.intersect_params(
        fix_parameters(isl.Set.universe(steps.get_space().params()), dict(params)))
    index = {name: k for k, name in enumerate(kernels)}
    points: list[tuple[tuple[int, ...], int]] = []

    def add(point: isl.Point) -> None:
        space = point.get_space()
        k = index[space.get_tuple_name(isl.dim_type.set)]
        h = tuple(int(point.get_coordinate_val(isl.dim_type.set, d).to_python())
                  for d in range(space.dim(isl.dim_type.set)))
        points.append((h, k))

    steps.foreach_point(add)
    points.sort()
    return tuple((k, h) for h, k in points)


class SpecializationError(PolygpuError, ValueError):
    """A specialized program launched at other parameter values."""


class IndexWidthError(PolygpuError, ValueError):
    """A 32-bit program launched at parameter values its index arithmetic would
    overflow at."""
