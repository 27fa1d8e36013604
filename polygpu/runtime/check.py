"""Check a KernelProgram against the sequential reference on random inputs.

Procedure (:func:`check_program`):

1. Draw fresh random inputs in the kernel's dtypes (:mod:`polygpu.runtime.inputs`).
2. Poison (NaN; a sentinel for integer arrays) the elements the region writes without
   reading them first (:mod:`polygpu.runtime.footprint`) -- in the kernel's input only.
3. Run the original function in float64 on the unpoisoned inputs
   (:mod:`polygpu.runtime.reference`), and the kernel program in its own dtypes on the
   poisoned ones, each array inside a red zone of poison on both sides.
4. Compare every argument array:

   * elements outside the written set must be bit-identical to the kernel's input;
   * written elements must satisfy ``|got - ref| <= atol + rtol * |ref|``: float32 arrays
     rtol = 1e-3, atol = 1e-5; float64 arrays rtol = 1e-10, atol = 1e-12; integer arrays
     exactly.  NaN where the reference is finite fails (a poisoned element never written);
   * the red zones must be untouched (a write outside the array).

Why these tolerances: inputs lie in [0.5, 1.5), so the reference involves no cancellation
and float32 rounding error relative to the result is bounded by about ``k * 2**-24`` for
a reduction chain of length ``k`` (6e-5 at k = 1000; typically ``sqrt(k) * 2**-24``,
around 1e-6).  rtol = 1e-3 therefore accepts any summation order for chains up to
~16000, while a wrong operation, a wrong element or a missing term of a chain of up to a few
hundred terms (sizes of 37 to 128, as the tests use) changes the result by far more.  The
reported error of an element is ``|got - ref| / (|ref| + atol / rtol)``, which is
``<= rtol`` exactly when the inequality above holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from polygpu.codegen.program import KernelProgram
from polygpu.errors import PolygpuError
from polygpu.frontend import ir, load
from polygpu.model.analysis import analyze
from polygpu.model.scop import Scop
from polygpu.runtime import footprint, inputs, reference
from polygpu.runtime.device import Device, get_device

TOLERANCES = {"float32": (1e-3, 1e-5), "float64": (1e-10, 1e-12)}  # dtype -> (rtol, atol)
INT_POISON = -123456789  # integer arrays cannot hold NaN


@dataclass(frozen=True)
class CheckResult:
    """The verdict: ``max_relative_error`` per argument array (see the module docstring;
    ``inf`` for a NaN, a changed unwritten element or an integer mismatch), ``threshold`` the
    largest rtol applied, ``message`` a readable account with the first wrong element."""

    ok: bool
    max_relative_error: dict[str, float]
    threshold: float
    message: str
    seed: int = 0
    reference_precision: str = "float64"


def check_program(
    program: KernelProgram,
    scop: Scop,
    spec: str,
    params: Mapping[str, int],
    backend: str | Device = "cpu",
    seed: int | None = None,
    defines: Sequence[str] = (),
    include_dirs: Sequence[str] = (),
    scalars: Mapping[str, float] | None = None,
) -> CheckResult:
    """Run ``program`` (on ``backend``: 'cpu' emulator, 'gpu', 'gpu:N' or a
    :class:`~polygpu.runtime.device.Device`) and the original function of ``spec`` on the
    same random inputs, at the integer parameters ``params``, and compare.  The program
    runs through the device layer, as the API runs it.  Float scalar parameters take
    their value from ``scalars`` (``-p alpha=1.5``) where given, else a random one.

    ``scop`` is the model of the *original* function (``Compiled.source_scop``), not the
    transformed one the kernels were generated from: its footprints say what the caller
    sees written, and its parallel loops may run the reference on several threads."""
    if any(a.kind == "scratch" for a in scop.arrays):
        raise ValueError(f"{scop.function}: check_program needs the original model "
                         "(Compiled.source_scop), not the transformed one")
    device = _backend(backend)
    source = load(spec, function=scop.function, defines=defines, include_dirs=include_dirs)
    _check_signature(program, source)
    ints = inputs.integer_parameters(source, params)
    if footprint.at_parameters(scop.context, ints).is_empty():
        raise PolygpuError(f"{source.name}: parameters {dict(ints)} violate {scop.context}")
    shapes = inputs.array_shapes(source, ints)
    if seed is None:
        seed = int(np.random.SeedSequence().entropy % 2**32)
    values = inputs.random_values(source, ints, shapes, np.random.default_rng(seed),
                                  scalars=scalars)

    written, poisoned = _masks(scop, source, ints, shapes)

    # the reference: float64 copies of the unpoisoned inputs
    ref_values = dict(values)
    for a in source.arrays:
        v = values[a.name]
        ref_values[a.name] = v.astype(np.float64) if v.dtype.kind == "f" else v.copy()
    ref_run = reference.run_reference(source, ref_values, defines, include_dirs,
                                      parallel_loops(scop, source))

    # the kernel: poisoned inputs inside red zones
    kernel_in = {a.name: _poisoned_copy(values[a.name], poisoned[a.name]) for a in source.arrays}
    buffers = {name: _in_red_zones(v) for name, v in kernel_in.items()}
    kernel_values = dict(values) | {name: view for name, (view, _, _) in buffers.items()}
    device.run(program, kernel_values)

    errors, problems, worst = {}, [], []
    for a in source.arrays:
        view, buf, pad = buffers[a.name]
        err, trouble, best = _compare(
            a, view, kernel_in[a.name], ref_values[a.name], written[a.name], poisoned[a.name],
            buf, pad,
        )
        errors[a.name] = err
        problems += trouble
        if best:
            worst.append(best)
    threshold = max(
        (TOLERANCES[a.dtype][0] for a in source.arrays if a.dtype in TOLERANCES),
        default=0.0,
    )
    context = f"{source.name} at {_params_text(ints)}, seed {seed}, {device.kind}"
    if ref_run.note:
        context += f"; {ref_run.note}"
    if problems:
        message = f"{context}: WRONG\n  " + "\n  ".join(problems)
    else:
        message = f"{context}: ok" + (f" (worst: {'; '.join(worst)})" if worst else "")
    return CheckResult(
        ok=not problems,
        max_relative_error=errors,
        threshold=threshold,
        message=message,
        seed=seed,
        reference_precision=ref_run.precision,
    )


def _masks(scop, source, ints, shapes):
    """Boolean arrays of the written and of the poisoned elements, per argument array."""
    feet = footprint.footprints(scop)
    written, poisoned = {}, {}
    for a in source.arrays:
        fp = feet.get(a.name)
        if fp is None:  # the region does not touch it
            written[a.name] = poisoned[a.name] = np.zeros(shapes[a.name], dtype=bool)
        else:
            written[a.name] = footprint.mask(fp.written, ints, shapes[a.name])
            poisoned[a.name] = footprint.mask(fp.poisoned, ints, shapes[a.name])
    return written, poisoned


def _poisoned_copy(v: np.ndarray, poisoned: np.ndarray) -> np.ndarray:
    v = v.copy()
    v[poisoned] = _poison(v.dtype)
    return v


def _in_red_zones(v: np.ndarray):
    """(a view holding ``v``, its buffer, the red zone's length): the view lies between two
    runs of poison, which a write past either end of the array would change."""
    pad = min(v.size, 1 << 16) + 64
    buf = np.full(v.size + 2 * pad, _poison(v.dtype), dtype=v.dtype)
    view = buf[pad : pad + v.size].reshape(v.shape)
    view[...] = v
    return view, buf, pad


def _compare(a: ir.ArrayDecl, got, given, ref, written, poisoned, buf, pad):
    """(max error, problems, description of the worst element) for one array."""
    name = a.name
    problems = []
    bits = f"u{got.dtype.itemsize}"
    changed = ~written & (got.view(bits) != given.view(bits))
    if changed.any():
        idx = _first(changed)
        problems.append(
            f"{name}: {int(changed.sum())} element(s) outside the written set changed, first "
            f"{name}{list(idx)}: {given[idx].item()!r} -> {got[idx].item()!r}"
        )
    zone = np.concatenate([buf[:pad], buf[pad + got.size :]])
    outside = zone.view(bits) != np.full(1, _poison(got.dtype), dtype=got.dtype).view(bits)[0]
    if outside.any():
        problems.append(f"{name}: {int(outside.sum())} write(s) outside the array")

    if got.dtype.kind == "f":
        rtol, atol = TOLERANCES[a.dtype]
        g, r = got.astype(np.float64), ref.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            err = np.abs(g - r) / (np.abs(r) + atol / rtol)
        same_nonfinite = ~np.isfinite(r) & ((np.isnan(r) & np.isnan(g)) | (g == r))
        err = np.where(same_nonfinite, 0.0, np.where(np.isfinite(err), err, np.inf))
    else:
        rtol = 0.0
        err = np.where(got.astype(np.int64) == ref.astype(np.int64), 0.0, np.inf)
    err = np.where(written, err, 0.0)
    if changed.any():
        err = np.where(changed, np.inf, err)
    max_err = float(err.max()) if err.size else 0.0

    wrong = written & (err > rtol)
    if wrong.any():
        idx = _first(wrong)
        value = got[idx]
        is_poison = np.isnan(value) if got.dtype.kind == "f" else value == INT_POISON
        why = ""
        if is_poison and poisoned[idx]:
            why = " (poisoned on entry: the kernel did not write it, or read it first)"
        problems.append(
            f"{name}: {int(wrong.sum())} of {int(written.sum())} written element(s) wrong, "
            f"first {name}{list(idx)}: got {got[idx].item()!r}, expected {ref[idx].item()!r}{why}"
        )
    best = ""
    if written.any() and got.dtype.kind == "f" and not wrong.any():
        idx = np.unravel_index(int(np.argmax(err)), err.shape)
        best = f"{name}{list(map(int, idx))} error {max_err:.2g} <= {rtol:g}"
    return max_err, problems, best


def parallel_loops(scop: Scop, source: ir.Program) -> tuple[reference.ParallelLoop, ...]:
    """The outermost loops of a C region that carry no dependence: the reference may run
    their iterations on several CPU threads with bit-identical results."""
    if source.language != "c":
        return ()
    status = {lp.loop: lp.parallel for lp in analyze(scop).loops}
    outer = {n.loc.line: n for n in source.body if isinstance(n, ir.For)}
    result = []
    for loop in scop.loops:
        node = outer.get(loop.loc.line)
        if loop.depth == 0 and status[loop.id] and node is not None:
            private = sorted({f.iterator for f in _inner_loops(node.body)
                              if not f.declares_iterator})
            result.append(reference.ParallelLoop(loop.loc.line, tuple(private)))
    return tuple(result)


def _inner_loops(nodes):
    for n in nodes:
        if isinstance(n, ir.For):
            yield n
            yield from _inner_loops(n.body)
        elif isinstance(n, ir.If):
            yield from _inner_loops(n.then)
            yield from _inner_loops(n.else_)


def _first(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argwhere(mask)[0])


def _poison(dtype: np.dtype):
    return np.nan if np.dtype(dtype).kind == "f" else INT_POISON


def _params_text(ints: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in ints.items()) or "no parameters"


def _check_signature(program: KernelProgram, source: ir.Program) -> None:
    """The kernel program must take the original arguments, in order, with their dtypes."""
    dtypes = {p.name: p.dtype for p in source.params} | {a.name: a.dtype for a in source.arrays}
    got = [(a.name, a.dtype) for a in program.arguments if a.kind != "scratch"]
    want = [(n, dtypes[n]) for n in source.signature]
    if got != want:
        raise ValueError(
            f"{program.function}: the kernel program takes {got}, the original function {want}"
        )


def _backend(backend: str | Device) -> Device:
    if isinstance(backend, str) and backend.partition(":")[0] not in ("cpu", "gpu"):
        raise ValueError(f"unknown backend {backend!r} (cpu or gpu)")
    device = get_device(backend)
    if device.kind == "gpu" and hasattr(device, "open"):
        device.open()  # GpuUnavailableError now, not midway through the check
    return device

