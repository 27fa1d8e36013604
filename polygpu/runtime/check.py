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
   * written elements must satisfy ``|got - ref| <= atol + rtol * |ref|`` (the *fixed
     tolerance*): float32 arrays rtol = 1e-3, atol = 1e-5; float64 arrays rtol = 1e-10,
     atol = 1e-12; integer arrays exactly.  NaN where the reference is finite fails (a
     poisoned element never written);
   * the red zones must be untouched (a write outside the array).

5. Only if some written float elements miss the fixed tolerance (both values finite) and
   nothing fails regardless (no NaN where a number is due, no changed unwritten element,
   no write outside, no integer mismatch): re-judge them with the *conditioning bound*.

Why these tolerances: inputs lie in [0.5, 1.5), so a reference made of sums and products
involves no cancellation and float32 rounding error relative to the result is bounded by
about ``k * 2**-24`` for a reduction chain of length ``k`` (6e-5 at k = 1000; typically
``sqrt(k) * 2**-24``, around 1e-6).  rtol = 1e-3 therefore accepts any summation order for
chains up to ~16000, while a wrong operation, a wrong element or a missing term of a chain
of up to a few hundred terms (sizes of 37 to 128, as the tests use) changes the result by
far more.  float64 kernels keep the same margin with rtol = 1e-10.  The reported error of
an element is ``|got - ref| / (|ref| + atol / rtol)``, which is ``<= rtol`` exactly when
the inequality above holds.

The conditioning bound.  A computation with cancellation -- unpivoted LU of a random
matrix, whose elements grow -- amplifies rounding differences far beyond any fixed rtol:
nvcc contracts ``a -= b * c`` into an FMA, and on the H100 a correct plan of PolyBench's
lu at n = 501 differed from the host's float64 result in 33621 of 250500 elements, by up
to 1.9e-7 relative (bit-identical with ``-fmad=false``).  Such a result is judged by how
far correct float64 rounding itself moves each element:

* the reference runs once more in ``long double`` (64-bit significand with gcc on
  x86-64; where long double is no wider than double, or the file does not compile that
  way, there is no bound -- the fixed tolerance decides -- and the message says why), and
  twice more in float64 rounded upward and downward (C references only);
* an element's *sensitivity* ``s`` is the largest distance of the three float64 results
  (to nearest, upward, downward) from the long double one, maximised over the element and
  its neighbours (index distance at most 1 along every axis), scaled to the kernel's
  precision (float32: times ``2**29``, the ratio of the unit roundoffs);
* a written element beyond the fixed tolerance is accepted when
  ``|got - ref| <= atol + rtol * |ref| + K * min(s, L * (|ref| + atol / rtol))``, with
  ``K`` = :data:`CONDITIONING_K` = 32 and ``L`` = :data:`SENSITIVITY_LIMIT` (float64 1e-6,
  float32 3e-5); beyond that but within ``atol + rtol * |ref| + K * s`` (only possible
  where ``s`` exceeds the cap) it is *inconclusive*; otherwise wrong.

Why three samples and the neighbours: a single ``|ref64 - ref_ld|`` is one draw of a
rounding error and can be small by chance where the device's own draw is large -- the ratio
of two such draws has a Cauchy-like tail.  Measured on the CPU with PolyBench's lu at n =
99 to 751 (56 inputs) against FMA-contracted (``-ffp-contract=fast -mfma``), dot-product-
first and dot-product-first-with-FMA builds, the K each needs, ``max (|got - ref| - fixed)
/ s`` over the elements not capped, was: with ``s = |ref64 - ref_ld|`` of the element alone
up to 1.7e6 (median 100 to 320 per input); with its neighbourhood maximum up to 1.2e3; with
the estimate above at most 4.5 for FMA (median 1.25) and 13.9 for the reorderings (median
1.5 to 1.9), and 4.6 for a k-loop tiled by 32 (24 more inputs).  K = 32 leaves a factor of
2.3 over the worst element seen and 7 over FMA contraction.

Why the cap ``L``: the bound must never hide a wrong result, so whatever the estimate says
the relative error it admits is at most ``rtol + K * L`` -- 3.2e-5 for float64, about 1e-3
more for float32: a wrong element of relative 1e-3 or a dropped term still fails, and so
does a smaller error where the computation is well-conditioned (``s`` tiny).  An element
the cap rejects but rounding could explain makes the check fail as INCONCLUSIVE ("inputs
too ill-conditioned for a meaningful check": use smaller sizes or another seed), never a
silent pass.  Elements within the fixed tolerance are judged exactly as before, and the
three extra runs happen only in step 5.  The result counts, per array, the elements the
bound accepted and gives the largest ``K * s`` used (:class:`Conditioning`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

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

# the conditioning bound (module docstring): accept |got - ref| <= atol + rtol |ref| + K s
CONDITIONING_K = 32.0
# s / (|ref| + atol / rtol) above which the term is capped (at most K * L relative)
SENSITIVITY_LIMIT = {"float32": 3e-5, "float64": 1e-6}
_UNIT_ROUNDOFF = {"float32": 2.0**-24, "float64": 2.0**-53}
# host bytes per float element the conditioning runs keep alive (long double copy,
# a float64 copy, the sensitivity and its temporaries)
_CONDITIONING_BYTES = 16 + 8 + 3 * 8


class CheckAbandoned(Exception):
    """A check given up because the kernel's run took ``took_ms``, more than the
    ``limit_ms`` its caller allowed (``check_program(give_up_ms=...)``): no verdict."""

    def __init__(self, took_ms: float, limit_ms: float):
        super().__init__(f"one run took {took_ms:.4g} ms, over the {limit_ms:.4g} ms allowed; "
                         "the check was given up before the reference ran")
        self.took_ms = took_ms
        self.limit_ms = limit_ms


@dataclass(frozen=True)
class Conditioning:
    """What the conditioning bound made of one float array: ``beyond_fixed`` written
    elements missed the fixed tolerance (both values finite), ``accepted`` of
    them lie within it, ``largest_term`` is the largest ``K * s`` that accepted one (relative:
    over ``|ref| + atol / rtol``), ``ill_conditioned`` of the ``beyond_fixed`` had a
    sensitivity over :data:`SENSITIVITY_LIMIT` (their term capped), and ``inconclusive`` of
    those lie beyond the cap but within ``K * s``."""

    beyond_fixed: int
    accepted: int
    largest_term: float
    ill_conditioned: int
    inconclusive: int


@dataclass(frozen=True)
class CheckResult:
    """The verdict: ``max_relative_error`` per argument array (see the module docstring;
    ``inf`` for a NaN, a changed unwritten element or an integer mismatch), ``threshold`` the
    largest relative bound applied to an accepted element (the largest rtol, or more where
    the conditioning bound accepted one: ``ok`` implies every error is at most it),
    ``message`` a readable account with the first wrong element.

    ``conditioning`` holds, per float array the conditioning bound re-judged, what it
    decided; ``conditioning_note`` how the sensitivity was estimated, or why it was not;
    ``inconclusive`` is true when the check failed only on elements too ill-conditioned to
    tell from rounding."""

    ok: bool
    max_relative_error: dict[str, float]
    threshold: float
    message: str
    seed: int = 0
    reference_precision: str = "float64"
    conditioning: Mapping[str, Conditioning] = field(default_factory=dict)
    conditioning_note: str = ""
    inconclusive: bool = False

    @property
    def adaptive_elements(self) -> int:
        """Written elements beyond the fixed tolerance that the conditioning bound accepted."""
        return sum(c.accepted for c in self.conditioning.values())


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
    conditioning: bool = True,
    give_up_ms: float | None = None,
) -> CheckResult:
    """Run ``program`` (on ``backend``: 'cpu' emulator, 'gpu', 'gpu:N' or a
    :class:`~polygpu.runtime.device.Device`) and the original function of ``spec`` on the
    same random inputs, at the integer parameters ``params``, and compare.  The program
    runs through the device layer, as the API runs it.  Float scalar parameters take
    their value from ``scalars`` (``-p alpha=1.5``) where given, else a random one.
    ``conditioning=False`` judges by the fixed tolerance alone.

    ``give_up_ms``: the kernel's run is timed (CUDA events on the GPU) and, when it took
    longer, :class:`CheckAbandoned` is raised before the reference runs -- the tuner's
    way to drop a hopeless candidate whose check runs at the timed sizes, where the
    float64 reference on the host is dear (syrk at EXTRALARGE: 13 s on two cores);
    nothing of an abandoned check is ever used or reported as verified.

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

    # the reference (after the kernel): float64 copies of the unpoisoned inputs
    parallel = parallel_loops(scop, source)

    # the kernel: poisoned inputs inside red zones
    kernel_in = {a.name: _poisoned_copy(values[a.name], poisoned[a.name]) for a in source.arrays}
    buffers = {name: _in_red_zones(v) for name, v in kernel_in.items()}
    kernel_values = dict(values) | {name: view for name, (view, _, _) in buffers.items()}
    if give_up_ms is None:
        device.run(program, kernel_values)
    else:
        (took,) = device.time(program, [kernel_values], repeats=1, warmup=0)
        if took > give_up_ms:
            raise CheckAbandoned(took, give_up_ms)
    ref_values, ref_run = _reference(source, values, defines, include_dirs, parallel)

    found = []
    for a in source.arrays:
        view, buf, pad = buffers[a.name]
        found.append(_compare(a, view, kernel_in[a.name],
                              _due(source, a.name, view, ref_values[a.name], written[a.name]),
                              written[a.name], poisoned[a.name], buf, pad))
    # a fast-math program is held to the same tolerance, and says it is one
    fast = ", fast math (CUDA intrinsics)" if getattr(program, "fast_math", False) else ""
    return _judged(found, source, values, ref_values, ref_run,
                   f"{source.name} at {_params_text(ints)}, seed {seed}, {device.kind}{fast}",
                   seed, parallel, defines, include_dirs, conditioning)


def judge_outputs(
    scop: Scop,
    spec: str,
    params: Mapping[str, int],
    values: Mapping[str, object],
    outputs: Mapping[str, np.ndarray],
    seed: int = 0,
    where: str = "outputs",
    defines: Sequence[str] = (),
    include_dirs: Sequence[str] = (),
    conditioning: bool = True,
) -> CheckResult:
    """``check``'s judgement of outputs computed elsewhere -- the Python API on NumPy
    arrays or device tensors copied back (``outputs``: array name -> NumPy array) from
    the inputs ``values`` (as :func:`polygpu.runtime.inputs.random_values` draws them,
    with ``seed``): the original function of ``spec`` runs in float64 on ``values``,
    every element the region writes (``scop``: ``Compiled.source_scop``) must meet the
    fixed tolerance or the conditioning bound, every other element must keep its input
    bits.  Without poisoned inputs and red zones (the caller ran the kernel), so it
    cannot see a write outside an array or an element read before it is written;
    ``check_program`` can.  ``where`` names the run in the message."""
    source = load(spec, function=scop.function, defines=defines, include_dirs=include_dirs)
    ints = inputs.integer_parameters(source, params)
    shapes = inputs.array_shapes(source, ints)
    written, _ = _masks(scop, source, ints, shapes)
    parallel = parallel_loops(scop, source)
    ref_values, ref_run = _reference(source, values, defines, include_dirs, parallel)
    found = []
    for a in source.arrays:
        got, given = np.asarray(outputs[a.name]), values[a.name]
        if got.shape != given.shape or got.dtype != given.dtype:
            raise ValueError(f"{a.name}: output {got.dtype}{list(got.shape)}, input "
                             f"{given.dtype}{list(given.shape)}")
        found.append(_compare(a, got, given,
                              _due(source, a.name, got, ref_values[a.name], written[a.name]),
                              written[a.name], np.zeros(got.shape, dtype=bool), None, 0))
    return _judged(found, source, values, ref_values, ref_run,
                   f"{source.name} at {_params_text(ints)}, seed {seed}, {where}", seed,
                   parallel, defines, include_dirs, conditioning)


def _reference(source, values, defines, include_dirs, parallel):
    """(the original function's results on float64 copies of ``values``, its run)."""
    ref_values = dict(values)
    for a in source.arrays:
        v = values[a.name]
        ref_values[a.name] = v.astype(np.float64) if v.dtype.kind == "f" else v.copy()
    return ref_values, reference.run_reference(source, ref_values, defines, include_dirs,
                                               parallel)


def _judged(found, source, values, ref_values, ref_run, context, seed, parallel, defines,
            include_dirs, conditioning) -> CheckResult:
    """The verdict on the compared arrays ``found``: the conditioning bound where it can
    change it, the account, the message (``context`` first)."""
    note, judged = "", {}
    soft = [c for c in found if c.soft.any()]
    hard = any(c.problems or (c.wrong & ~c.soft).any() for c in found)
    if soft:
        if not conditioning:
            note = "the conditioning bound is off"
        elif hard:
            note = "the conditioning bound was not tried: the check fails regardless"
        elif ref_run.precision != "float64":
            note = "no conditioning bound: the reference computes in float32"
        else:
            sensitivity, note = _sensitivity(
                source, values, ref_values, [c.name for c in soft], defines, include_dirs,
                parallel)
            for c in soft:
                if c.name in sensitivity:
                    judged[c.name] = _condition(c, sensitivity[c.name])

    threshold = max(
        (TOLERANCES[a.dtype][0] for a in source.arrays if a.dtype in TOLERANCES),
        default=0.0,
    )
    problems, notes, worst, threshold, inconclusive = _account(
        found, judged, threshold, split=bool(soft) and not judged)
    if ref_run.note:
        context += f"; {ref_run.note}"
    report = {name: v.summary for name, v in judged.items()}
    adaptive = sum(v.accepted for v in report.values())
    if problems:
        head = ("INCONCLUSIVE: inputs too ill-conditioned for a meaningful check"
                if inconclusive else "WRONG")
        message = f"{context}: {head}\n  " + "\n  ".join(problems + notes)
    else:
        capped = sum(v.ill_conditioned for v in report.values())
        how = (f"ok with the conditioning bound ({adaptive} element(s) beyond the fixed "
               f"tolerance accepted{f', {capped} of them ill-conditioned' if capped else ''})"
               if adaptive else "ok")
        message = f"{context}: {how}" + (f" (worst: {'; '.join(worst)})" if worst else "")
        if notes:
            message += "\n  " + "\n  ".join(notes)
    if note:
        message += f"\n  {note}"
    return CheckResult(
        ok=not problems,
        max_relative_error={c.name: c.max_err for c in found},
        threshold=threshold,
        message=message,
        seed=seed,
        reference_precision=ref_run.precision,
        conditioning=report,
        conditioning_note=note,
        inconclusive=inconclusive,
    )


def _account(found, judged, threshold, split):
    """(problems, notes, worst elements, threshold, inconclusive) of the compared arrays
    ``found`` with the conditioning bound's ``judged`` verdicts; ``split``: the bound was
    not tried although it might have accepted some elements -- count those apart."""
    problems, notes, worst = [], [], []
    inconclusive_only = True
    for c in found:
        problems += c.problems
        inconclusive_only &= not c.problems
        verdict = judged.get(c.name)
        wrong = c.wrong if verdict is None else verdict.wrong
        if verdict is not None:
            notes += verdict.notes
            if verdict.inconclusive.any():
                problems.append(_wrong_text(c, verdict.inconclusive, verdict.inconclusive_text))
            if verdict.accepted.any():
                threshold = max(threshold, float(verdict.bound[verdict.accepted].max()))
        elif split and c.soft.any():
            # the plainly wrong ones first; those the bound might accept only counted
            cap = CONDITIONING_K * SENSITIVITY_LIMIT[c.decl.dtype]
            near_miss = c.soft & (c.err <= c.rtol + cap)
            if near_miss.any() and (wrong & ~near_miss).any():
                notes.append(f"{c.name}: {int(near_miss.sum())} more written element(s) miss "
                             f"the fixed tolerance by less than {cap:.2g} relative (not "
                             "re-judged by the conditioning bound)")
                wrong = wrong & ~near_miss
        if wrong.any():
            inconclusive_only = False
            why = " (beyond the conditioning bound too)" if verdict is not None else ""
            problems.append(_wrong_text(
                c, wrong, f"{int(wrong.sum())} of {int(c.written.sum())} written element(s) "
                f"wrong", why))
        elif c.written.any() and c.is_float:
            worst.append(_worst_text(c, verdict))
    return problems, notes, worst, threshold, bool(problems) and inconclusive_only


def _due(source: ir.Program, name: str, got: np.ndarray, ref: np.ndarray,
         written: np.ndarray) -> np.ndarray:
    """What array ``name`` must hold after the run: the reference's values, except in
    the written elements of an argument marked as not live-out, where whatever the
    kernel left is right (its unwritten elements must still be unchanged, and nothing
    may land outside it)."""
    if name not in source.not_live_out:
        return ref
    return np.where(written, got, ref)


def _masks(scop, source, ints, shapes):
    """Boolean arrays of the written and of the poisoned elements, per argument array."""
    feet = footprint.footprints(scop, ints)
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


@dataclass
class _Comparison:
    """One array compared by the fixed tolerance: ``problems`` that no bound can excuse
    (changed unwritten elements, writes outside), the per-element ``err``, the ``wrong``
    written elements and the ``soft`` ones among them (float, both values finite), which
    the conditioning bound may re-judge."""

    decl: ir.ArrayDecl
    got: np.ndarray
    ref: np.ndarray
    written: np.ndarray
    poisoned: np.ndarray
    err: np.ndarray
    max_err: float
    problems: list[str]
    wrong: np.ndarray
    soft: np.ndarray
    rtol: float
    atol: float

    @property
    def name(self) -> str:
        return self.decl.name

    @property
    def is_float(self) -> bool:
        return self.got.dtype.kind == "f"


def _compare(a: ir.ArrayDecl, got, given, ref, written, poisoned, buf, pad) -> _Comparison:
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
    if buf is not None:  # the red zones around the array (none: not run inside them)
        zone = np.concatenate([buf[:pad], buf[pad + got.size :]])
        outside = zone.view(bits) != np.full(1, _poison(got.dtype),
                                             dtype=got.dtype).view(bits)[0]
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
        rtol, atol = 0.0, 0.0
        err = np.where(got.astype(np.int64) == ref.astype(np.int64), 0.0, np.inf)
    err = np.where(written, err, 0.0)
    if changed.any():
        err = np.where(changed, np.inf, err)
    max_err = float(err.max()) if err.size else 0.0

    wrong = written & (err > rtol)
    soft = wrong & np.isfinite(err) if got.dtype.kind == "f" else np.zeros_like(wrong)
    return _Comparison(a, got, ref, written, poisoned, err, max_err, problems, wrong, soft,
                       rtol, atol)


def _wrong_text(c: _Comparison, mask: np.ndarray, what: str, why: str = "") -> str:
    """``what`` of array ``c`` with its first element in ``mask``: found and expected."""
    idx = _first(mask)
    value = c.got[idx]
    is_poison = np.isnan(value) if c.is_float else value == INT_POISON
    if is_poison and c.poisoned[idx]:
        why += " (poisoned on entry: the kernel did not write it, or read it first)"
    return (f"{c.name}: {what}, first {c.name}{list(idx)}: got {c.got[idx].item()!r}, "
            f"expected {c.ref[idx].item()!r}{why}")


def _worst_text(c: _Comparison, verdict) -> str:
    idx = np.unravel_index(int(np.argmax(c.err)), c.err.shape)
    bound = c.rtol
    if verdict is not None and verdict.accepted[idx]:
        bound = float(verdict.bound[idx])
    return f"{c.name}{list(map(int, idx))} error {c.max_err:.2g} <= {bound:.2g}"


# --------------------------------------------------------------------------
# The conditioning bound
# --------------------------------------------------------------------------


@dataclass
class _Verdict:
    """The conditioning bound's judgement of one array: the elements it ``accepted``, their
    relative ``bound`` (rtol + K s), those still ``wrong`` and those ``inconclusive``."""

    accepted: np.ndarray
    bound: np.ndarray
    wrong: np.ndarray
    inconclusive: np.ndarray
    inconclusive_text: str
    summary: Conditioning
    notes: list[str]


def _condition(c: _Comparison, sensitivity: np.ndarray) -> _Verdict:
    """Re-judge ``c``'s soft elements with their sensitivity (in float64 units)."""
    dtype = c.decl.dtype
    k, limit = CONDITIONING_K, SENSITIVITY_LIMIT[dtype]
    scale = np.abs(c.ref.astype(np.float64)) + c.atol / c.rtol
    s = sensitivity * (_UNIT_ROUNDOFF[dtype] / _UNIT_ROUNDOFF["float64"])
    with np.errstate(invalid="ignore", over="ignore"):
        relative = s / scale  # over |ref| + atol/rtol, as the error is
    ill = c.soft & ~(relative <= limit)
    bound = c.rtol + k * np.minimum(relative, limit)
    accepted = c.soft & (c.err <= bound)
    with np.errstate(invalid="ignore", over="ignore"):
        inconclusive = ill & ~accepted & (c.err <= c.rtol + k * relative)
    wrong = c.wrong & ~accepted & ~inconclusive
    largest = float((bound - c.rtol)[accepted].max()) if accepted.any() else 0.0
    summary = Conditioning(int(c.soft.sum()), int(accepted.sum()), largest, int(ill.sum()),
                           int(inconclusive.sum()))
    notes = []
    if accepted.any():
        text = (f"{c.name}: {summary.accepted} of {int(c.written.sum())} written element(s) "
                f"beyond the fixed tolerance are within the conditioning bound (largest "
                f"K * s {largest:.2g} relative, K = {k:g})")
        notes.append(text)
        capped = int((accepted & ill).sum())
        if capped:
            notes.append(
                f"warning: {c.name}: {capped} of them are too ill-conditioned for a fine check "
                f"({dtype} rounding alone moves them by more than {limit:g} relative): held "
                f"to the cap {k * limit:.2g}, the check is no finer than that there")
    inconclusive_text = (
        f"{int(inconclusive.sum())} written element(s) beyond the capped conditioning bound "
        f"{c.rtol + k * limit:.2g} but within K * s: {dtype} rounding alone may move them "
        f"that far (by more than {limit:g} relative), so they cannot be judged; use smaller "
        "sizes or another seed")
    return _Verdict(accepted, bound, wrong, inconclusive, inconclusive_text, summary, notes)


def _sensitivity(source, values, ref_values, names, defines, include_dirs, parallel):
    """(array name -> the sensitivity s of each element, in float64 units; how it was
    estimated, or why it could not be)."""
    sizes = sum(values[a.name].size for a in source.arrays if values[a.name].dtype.kind == "f")
    available = inputs.available_host_memory()
    if available is not None and sizes * _CONDITIONING_BYTES > available:
        return {}, ("no conditioning bound: its reference runs would need more host memory "
                    "than is available")

    def copy(float_type):
        return {k: (v.astype(float_type) if v.dtype.kind == "f" else v.copy())
                if isinstance(v, np.ndarray) else v for k, v in values.items()}

    exact = copy(np.longdouble)
    try:
        reference.run_reference(source, exact, defines, include_dirs, parallel,
                                arithmetic="long double")
    except reference.VariantUnavailable as e:
        return {}, f"no conditioning bound: {e}"
    exact = {name: exact[name] for name in names}
    s = {name: _distance(ref_values[name], exact[name]) for name in names}
    how = (f"sensitivity from a long double reference ({np.finfo(np.longdouble).nmant + 1}-bit "
           "significand)")
    for rounding in ("upward", "downward"):
        run = copy(np.float64)
        try:
            reference.run_reference(source, run, defines, include_dirs, parallel,
                                    rounding=rounding)
        except reference.VariantUnavailable as e:
            how += f", without directed rounding ({e})"
            break
        for name in names:
            np.maximum(s[name], _distance(run[name], exact[name]), out=s[name])
        del run
    else:
        how += " and upward/downward-rounded float64 ones"
    return {name: _near(v) for name, v in s.items()}, how


def _distance(a: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|a - exact| in float64; 0 where both are the same non-finite value, inf where only
    one is finite."""
    with np.errstate(invalid="ignore", over="ignore"):
        d = np.abs(a.astype(np.longdouble) - exact).astype(np.float64)
        same = (a == exact) | (np.isnan(a) & np.isnan(exact))
    return np.where(same, 0.0, np.where(np.isnan(d), np.inf, d))


def _near(x: np.ndarray) -> np.ndarray:
    """The maximum of ``x`` over each element and its neighbours (index distance at most
    1 along every axis)."""
    for axis in range(x.ndim):
        if x.shape[axis] < 2:
            continue
        y = x.copy()
        xs, ys = np.moveaxis(x, axis, 0), np.moveaxis(y, axis, 0)
        np.maximum(ys[1:], xs[:-1], out=ys[1:])
        np.maximum(ys[:-1], xs[1:], out=ys[:-1])
        x = y
    return x


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

