"""Bind concrete values to a KernelProgram's arguments, checking them before any backend
hands raw pointers to native code (a wrong dtype or a short array there would be a silent
memory error, not an exception).  Also: device arrays (``__cuda_array_interface__``) and
the refusal of overlapping array arguments (:func:`check_aliasing`)."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass

import numpy as np

from polygpu.codegen.program import Argument, KernelProgram
from polygpu.errors import PolygpuError
from polygpu.runtime import grid


@dataclass(frozen=True)
class DeviceArray:
    """A validated ``__cuda_array_interface__`` argument: its data pointer and size."""

    pointer: int
    nbytes: int
    shape: tuple[int, ...] = ()
    dtype: str = ""


def device_array(interface: Mapping, where: str, dtype: np.dtype | str,
                 shape: tuple[int, ...] | None = None, wanted: str = "") -> DeviceArray:
    """Check a ``__cuda_array_interface__`` (version 0 to 3) against the declaration
    (``shape`` None: any shape); :class:`PolygpuError` starting with ``where``."""
    dtype = np.dtype(dtype)
    wanted = wanted or f"a {dtype} array" + (f" of shape {shape}" if shape is not None else "")
    try:
        got_dtype = np.dtype(interface["typestr"])
        got_shape = tuple(int(n) for n in interface["shape"])
        pointer, readonly = interface["data"]
    except (KeyError, TypeError, ValueError) as e:
        raise PolygpuError(f"{where}: malformed __cuda_array_interface__ ({e})") from None
    if got_dtype != dtype:
        raise PolygpuError(f"{where} must be {wanted}, got a device array of dtype "
                           f"{got_dtype} (typestr {interface['typestr']!r})")
    if shape is not None and got_shape != shape:
        raise PolygpuError(f"{where} must be {wanted}, got a device array of shape "
                           f"{got_shape}")
    strides = interface.get("strides")
    if strides is not None:
        expected = [dtype.itemsize * math.prod(got_shape[d + 1:])
                    for d in range(len(got_shape))]
        if any(n > 1 and int(s) != e
               for n, s, e in zip(got_shape, strides, expected, strict=True)):
            raise PolygpuError(f"{where} must be C-contiguous, got a device array with "
                               f"strides {tuple(strides)} (bytes; contiguous is "
                               f"{tuple(expected)}): pass a contiguous copy")
    if interface.get("mask") is not None:
        raise PolygpuError(f"{where}: masked device arrays are not supported")
    if readonly:
        raise PolygpuError(f"{where} is a read-only device array; the kernel writes into "
                           "its arguments")
    nbytes = dtype.itemsize * math.prod(got_shape)
    if not pointer and nbytes:
        raise PolygpuError(f"{where}: the device array has a null data pointer")
    return DeviceArray(int(pointer or 0), nbytes, got_shape, dtype.name)


@dataclass(frozen=True)
class Scratch:
    """A scratch array to allocate for one call (its shape evaluated at the call's
    parameters): every backend allocates it itself -- the emulator in host memory, the
    GPU on the device only -- poisoned (NaN, or all bits set for integers), because
    the kernels write every element before they read it."""

    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * np.dtype(self.dtype).itemsize

    def host_array(self) -> np.ndarray:
        dtype = np.dtype(self.dtype)
        return np.full(self.shape, np.nan if dtype.kind == "f" else -1, dtype=dtype)


@dataclass(frozen=True)
class Bound:
    """One argument with its value: a numpy scalar of the argument's dtype, the array,
    or for a scratch array its :class:`Scratch`."""

    argument: Argument
    value: np.generic | np.ndarray | DeviceArray | Scratch


def bind(program: KernelProgram, values: Mapping[str, object],
         device_arrays: bool = False) -> tuple[Bound, ...]:
    """The program's arguments, in signature order, bound to ``values`` (name -> value).

    Scalars are converted to their dtype; arrays must be C-contiguous numpy arrays of exactly
    the argument's dtype (no silent copy: the backends write results into them).  When an
    array's shape expressions are grid expressions (see :mod:`polygpu.runtime.grid`), its
    size is checked too.  With ``device_arrays`` (the GPU), an array may also be a
    :class:`DeviceArray` or any object with ``__cuda_array_interface__``.
    """
    missing = [a.name for a in program.arguments
               if a.name not in values and a.kind != "scratch"]
    if missing:
        raise ValueError(f"{program.function}: no value for {', '.join(missing)}")
    params = program.parameter_values(values)
    out = []
    for a in program.arguments:
        if a.kind == "scratch":
            out.append(Bound(a, _scratch(program, a, params)))
            continue
        v = values[a.name]
        dtype = np.dtype(a.dtype)
        if a.kind == "scalar":
            out.append(Bound(a, dtype.type(v)))
            continue
        if not isinstance(v, np.ndarray):
            interface = getattr(v, "__cuda_array_interface__", None)
            if not isinstance(v, DeviceArray) and interface is None:
                raise TypeError(f"{program.function}: argument {a.name} must be a numpy array")
            if not device_arrays:
                raise PolygpuError(
                    f"{program.function}(): argument '{a.name}' is a device array "
                    "(__cuda_array_interface__), but this runs on the CPU emulator; pass a "
                    "NumPy array")
            if not isinstance(v, DeviceArray):
                v = device_array(interface, f"{program.function}(): argument '{a.name}'",
                                 dtype)
            elif v.dtype and np.dtype(v.dtype) != dtype:
                raise TypeError(f"{program.function}: {a.name} is {v.dtype}, the kernel "
                                f"takes {dtype}")
            size = _size(a, params)
            if size is not None and v.nbytes != size * dtype.itemsize:
                raise ValueError(
                    f"{program.function}: {a.name} has {v.nbytes // dtype.itemsize} "
                    f"elements, its shape [{']['.join(a.shape)}] needs {size}")
            out.append(Bound(a, v))
            continue
        if v.dtype != dtype:
            raise TypeError(f"{program.function}: {a.name} is {v.dtype}, the kernel takes {dtype}")
        if not v.flags.c_contiguous or not v.flags.writeable:
            raise ValueError(f"{program.function}: {a.name} must be C-contiguous and writeable")
        size = _size(a, params)
        if size is not None and v.size != size:
            raise ValueError(
                f"{program.function}: {a.name} has {v.size} elements, its shape "
                f"[{']['.join(a.shape)}] needs {size}"
            )
        out.append(Bound(a, v))
    return tuple(out)


def check_aliasing(function: str, bound: tuple[Bound, ...],
                   written: Collection[str] | None = None) -> None:
    """Refuse two array arguments whose memory overlaps (byte ranges ``[ptr, ptr +
    nbytes)``; NumPy arrays are C-contiguous here, so this is exactly
    ``np.shares_memory``) unless neither is written by the region (``written``; None:
    any may be): a kernel assumes its arrays are distinct (``__restrict__``), and a
    write through one name would change what the other reads."""
    ranges = []
    for b in bound:
        if b.argument.kind != "array":
            continue
        v = b.value
        if isinstance(v, np.ndarray):
            start, size, space = v.ctypes.data, v.nbytes, "host"
        else:
            start, size, space = v.pointer, v.nbytes, "device"
        if size:
            ranges.append((b.argument.name, space, start, start + size))
    for i, (a, sa, lo_a, hi_a) in enumerate(ranges):
        for b, sb, lo_b, hi_b in ranges[i + 1:]:
            if sa != sb or hi_a <= lo_b or hi_b <= lo_a:
                continue
            if written is None:
                why = "the kernels may write them"
            else:
                writes = [n for n in (a, b) if n in written]
                if not writes:
                    continue  # both only read: the same data under two names is fine
                why = f"the region writes {' and '.join(repr(n) for n in writes)}"
            raise PolygpuError(f"{function}(): arguments '{a}' and '{b}' share memory, and "
                               f"{why}; pass separate arrays (e.g. a .copy())")


def _scratch(program: KernelProgram, a: Argument, params: Mapping[str, int]) -> Scratch:
    try:
        shape = tuple(max(grid.evaluate(e, params), 0) for e in a.shape)
    except grid.GridExpressionError as e:  # pragma: no cover - expand.py prints affine ones
        raise PolygpuError(f"{program.function}: the shape of scratch array {a.name} "
                           f"cannot be evaluated: {e}") from None
    return Scratch(shape, a.dtype)


def _size(a: Argument, params: Mapping[str, int]) -> int | None:
    try:
        return math.prod(grid.evaluate(e, params) for e in a.shape)
    except grid.GridExpressionError:
        return None  # an extent outside the grid language: the caller vouches for the size


def parameter_values(program: KernelProgram, values: Mapping[str, object]) -> dict[str, int]:
    return program.parameter_values(values)
