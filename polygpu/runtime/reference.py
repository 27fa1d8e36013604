"""The sequential reference: the user's original function, run as written.

**C input.**  The original file is compiled with ``gcc -O3 -shared -fPIC`` (with the
user's ``-D``/``-I``) into the cache and the function is called by name through ctypes.
C99 array parameters (``float a[n][n]``) are plain pointers in the ABI, so numpy arrays
pass as addresses; ``int`` -> c_int, ``long``/``long long`` -> 64-bit, ``float`` -> c_float,
``double`` -> c_double.  A small prelude supplies what the input language lets a kernel call
without declaring it: ``min``/``max``/``MIN``/``MAX`` (2 to 4 arguments, integer or float)
and ``rsqrtf``/``rsqrt``.

**Float64 reference for float32 code.**  The file is compiled a second time with every
``float`` read as ``double`` and every ``f``-suffixed math function (``sqrtf``, ``expf``, ...)
mapped to its double version.  This is sound for the input language: ``float`` occurs there
only as a type name (of arrays, scalar parameters, temporaries and casts), bodies are
arithmetic on values and calls to pure math functions, and the frontend rejects what could
observe a type's representation (pointers, ``sizeof``, unions, I/O, calls with effects).  So
the substitution yields the same computation with 53-bit instead of 24-bit rounding -- the
exact-arithmetic result the float32 program approximates, which is what a transformed
kernel (summing in another order) must be compared against.  Unlike a bare
``-Dfloat=double``, the substitution is made *after* the system headers are included, so
glibc's ``float sqrtf(float)`` keeps its real type (with ``-Dfloat=double`` a call would pass
a double where the library reads a float).  ``f``-suffixed literals stay float constants,
the same values the kernel sees.  A region without float data keeps its ``f`` functions:
there ``sqrtf`` on a double is a deliberate float operation, which the kernel performs
too (:func:`_keeping_float_functions`).  If the file does not compile that way (code outside the
region that depends on ``float`` itself), the float32 build is used and the run says so.

**Python input.**  The module is imported from its path and the function called with
float64 numpy arrays (``@affine`` functions are unwrapped to the plain function).

**Further runs for the conditioning bound** (``arithmetic``/``rounding`` of
:func:`run_reference`; :mod:`polygpu.runtime.check` asks for them only when a float
element misses the fixed tolerance):

* *long double*: the same substitution once more, ``float`` and ``double`` both read as
  ``long double`` (through a typedef, so a ``double`` in the prelude's macros stays one
  type) and every math function mapped to its ``l`` version (``sqrt``/``sqrtf`` ->
  ``sqrtl``); the arrays are numpy ``longdouble``.  It is only run where that type is wider
  than double -- numpy's ``finfo(longdouble)`` says so at runtime and a ``_Static_assert``
  checks that the C compiler's ``long double`` is the same type (80-bit x87 with gcc on
  x86-64, IEEE quad on aarch64 Linux); elsewhere (MSVC, Apple arm64: long double is double)
  :class:`VariantUnavailable` says why.  A Python function is called with ``longdouble``
  arrays: what it computes through ``math`` or in float64 temporaries rounds to double,
  which can only make the estimate smaller (the check stricter).
* *directed rounding*: the float64 build run under ``fesetround(FE_UPWARD)`` or
  ``FE_DOWNWARD`` (compiled with ``-frounding-math``); an exported helper sets the mode in
  the calling thread and, in an OpenMP build, in every thread of the OpenMP pool, and
  restores round-to-nearest afterwards.  C only.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from polygpu.errors import PolygpuError
from polygpu.frontend import ir
from polygpu.runtime import compiler
from polygpu.runtime.inputs import eval_int

# -O3 without -ffast-math keeps every floating-point operation and its order (gcc does not
# reassociate or contract without FMA in the target); its loop interchange makes the
# reference of a large mm minutes faster, which is what GPU-sized checks need
FLAGS = ("-O3", "-fno-fast-math", "-shared", "-fPIC", "-w",
         "-Werror=implicit-function-declaration")

# sqrtf -> sqrt, ..., erff -> erf (erf itself ends in f but "er" is no function)
_F32_FUNCTIONS = sorted(
    f for f in ir.PURE_FUNCTIONS if f.endswith("f") and f[:-1] in ir.PURE_FUNCTIONS
)

_HEADERS = """#include <assert.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
"""

# the float types by typedef names, which the float/double substitutions below leave alone
_EXTRAS = """typedef float polygpu_f32;
typedef double polygpu_f64;
typedef long double polygpu_fld;
static inline long long polygpu_llmin(long long a, long long b) { return a < b ? a : b; }
static inline long long polygpu_llmax(long long a, long long b) { return a < b ? b : a; }
#define POLYGPU_PICK(_1, _2, _3, _4, NAME, ...) NAME
#define POLYGPU_MIN2(a, b) _Generic((a) + (b), polygpu_f32: fminf, polygpu_f64: fmin, \\
    polygpu_fld: fminl, default: polygpu_llmin)(a, b)
#define POLYGPU_MAX2(a, b) _Generic((a) + (b), polygpu_f32: fmaxf, polygpu_f64: fmax, \\
    polygpu_fld: fmaxl, default: polygpu_llmax)(a, b)
#define POLYGPU_MIN3(a, b, c) POLYGPU_MIN2(POLYGPU_MIN2(a, b), c)
#define POLYGPU_MAX3(a, b, c) POLYGPU_MAX2(POLYGPU_MAX2(a, b), c)
#define POLYGPU_MIN4(a, b, c, d) POLYGPU_MIN2(POLYGPU_MIN3(a, b, c), d)
#define POLYGPU_MAX4(a, b, c, d) POLYGPU_MAX2(POLYGPU_MAX3(a, b, c), d)
#define min(...) POLYGPU_PICK(__VA_ARGS__, POLYGPU_MIN4, POLYGPU_MIN3, POLYGPU_MIN2, -)(__VA_ARGS__)
#define max(...) POLYGPU_PICK(__VA_ARGS__, POLYGPU_MAX4, POLYGPU_MAX3, POLYGPU_MAX2, -)(__VA_ARGS__)
#ifndef MIN
#define MIN min
#endif
#ifndef MAX
#define MAX max
#endif
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
"""

_AS_DOUBLE = "#define float double\n" + "".join(
    f"#define {f} {f[:-1]}\n" for f in _F32_FUNCTIONS
)

# sqrt -> sqrtl, sqrtf -> sqrtl, ... (a double function is one with a float version)
_DOUBLE_FUNCTIONS = sorted(f for f in ir.PURE_FUNCTIONS if f + "f" in ir.PURE_FUNCTIONS)


def _as_long_double() -> str:
    """The prelude of a long double build: the compiler's long double must be numpy's."""
    info = np.finfo(np.longdouble)
    lines = [
        f"_Static_assert(LDBL_MANT_DIG == {info.nmant + 1} && sizeof(long double) == "
        f'{np.dtype(np.longdouble).itemsize}, "long double is not numpy\'s longdouble");',
        "typedef long double polygpu_fld;",  # also without the extras (C11 allows it twice)
        "static inline long double polygpu_rsqrtl(long double x) { return 1.0L / sqrtl(x); }",
        "#define float polygpu_fld",
        "#define double polygpu_fld",
    ]
    for f in _DOUBLE_FUNCTIONS:
        target = "polygpu_rsqrtl" if f == "rsqrt" else f + "l"
        lines += [f"#define {f} {target}", f"#define {f}f {target}"]
    return "\n".join(lines) + "\n"


# exported from a directed-rounding build: set the rounding mode (1 upward, -1 downward,
# 0 to nearest) in this thread and in every thread of the OpenMP pool; 0 on success
_ROUNDING_HELPER = """
int polygpu_set_rounding(int polygpu_which)
{
#if defined(FE_UPWARD) && defined(FE_DOWNWARD) && defined(FE_TONEAREST)
  int polygpu_mode = polygpu_which > 0 ? FE_UPWARD : polygpu_which < 0 ? FE_DOWNWARD
                                                                        : FE_TONEAREST;
  int polygpu_bad = fesetround(polygpu_mode) != 0;
  /* ignored unless built with -fopenmp (the -E step does not define _OPENMP) */
#pragma omp parallel reduction(| : polygpu_bad)
  polygpu_bad = fesetround(polygpu_mode) != 0;
  return polygpu_bad;
#else
  return 1;
#endif
}
"""

ROUNDINGS = {"nearest": 0, "upward": 1, "downward": -1}

_CTYPES = {
    "float32": ctypes.c_float,
    "float64": ctypes.c_double,
    "int32": ctypes.c_int32,
    "int64": ctypes.c_int64,
}


@dataclass(frozen=True)
class ReferenceRun:
    """How the reference ran: ``precision`` of its float arithmetic ('float64', 'longdouble'
    or, after a fallback, 'float32') and ``note`` saying why when it is float32."""

    precision: str
    note: str = ""


class VariantUnavailable(PolygpuError):
    """The reference cannot run in the arithmetic or rounding asked for, here; the message
    says why (no long double wider than double, a file that needs float, a Python
    function, ...)."""


def long_double_unavailable() -> str:
    """Empty when numpy's ``longdouble`` (and so C's ``long double``, checked at compile
    time) has a wider significand than double, else why a long double reference cannot
    help."""
    info = np.finfo(np.longdouble)
    if info.nmant <= np.finfo(np.float64).nmant:
        return (f"long double is no wider than double on this platform ({info.nmant + 1}-bit "
                "significand)")
    return ""


@dataclass(frozen=True)
class ParallelLoop:
    """An outermost loop of a C region that carries no dependence (proven with isl), by
    the line of its ``for`` and the iterators of its inner loops that are declared in the
    function (they must be private to each OpenMP thread)."""

    line: int
    private: tuple[str, ...]


def run_reference(
    program: ir.Program,
    values: Mapping[str, object],
    defines: Sequence[str] = (),
    include_dirs: Sequence[str] = (),
    parallel: Sequence[ParallelLoop] = (),
    *,
    arithmetic: str = "double",
    rounding: str = "nearest",
) -> ReferenceRun:
    """Run ``program``'s original function on ``values`` (name -> Python scalar or numpy
    array), updating the arrays in place.  Float arrays must be float64 (``longdouble``
    with ``arithmetic="long double"``), integer arrays of their own dtype.

    ``arithmetic="long double"`` computes in long double, ``rounding`` ("upward",
    "downward") in double under that rounding mode (C only); both raise
    :class:`VariantUnavailable` where they cannot run (see the module docstring).

    ``parallel`` loops of a C reference run their iterations on OpenMP threads.  The
    result is bit-identical to the sequential run: no dependence crosses iterations of
    such a loop, so every memory location sees the same operations in the same order.
    That is what makes GPU-sized references (mm at n = 4096) affordable."""
    if arithmetic not in ("double", "long double"):
        raise ValueError(f"reference: unknown arithmetic {arithmetic!r}")
    if rounding not in ROUNDINGS:
        raise ValueError(f"reference: unknown rounding {rounding!r}")
    if arithmetic == "long double" and rounding != "nearest":
        raise ValueError("reference: directed rounding is for the double reference only")
    float_type = np.longdouble if arithmetic == "long double" else np.float64
    for a in program.arrays:
        v = values[a.name]
        want = np.dtype(float_type if a.dtype.startswith("float") else a.dtype)
        if not isinstance(v, np.ndarray) or v.dtype != want or not v.flags.c_contiguous:
            kind = "numpy longdouble" if want == np.longdouble else str(want)
            raise TypeError(f"reference: {a.name} must be a C-contiguous {kind} array")
    if arithmetic == "long double" and (why := long_double_unavailable()):
        raise VariantUnavailable(why)
    if program.language == "python":
        if rounding != "nearest":
            raise VariantUnavailable("directed rounding is only applied to a C reference")
        if arithmetic == "double":
            _run_python(program, values)
            return ReferenceRun("float64")
        try:
            _run_python(program, values, np.longdouble)
        except Exception as e:  # the user's function, on a type it may not expect
            raise VariantUnavailable(
                f"{program.file}: {program.name} fails on long double arrays "
                f"({type(e).__name__}: {e})") from None
        return ReferenceRun("longdouble")
    if arithmetic == "long double":
        return _run_variant(program, values, defines, include_dirs, tuple(parallel),
                            "long double", 0)
    if rounding != "nearest":
        return _run_variant(program, values, defines, include_dirs, tuple(parallel),
                            "directed", ROUNDINGS[rounding])
    return _run_c(program, values, defines, include_dirs, tuple(parallel))


def with_openmp(path: str, loops: Sequence[ParallelLoop]) -> str | None:
    """The text of ``path`` with ``#pragma omp parallel for`` before each loop (line
    numbers kept with ``#line``), or None when a loop's line does not start with ``for``
    (the pragma could not be placed without parsing the line)."""
    lines = open(path).read().splitlines()
    for loop in sorted(loops, key=lambda lp: -lp.line):
        if not lines[loop.line - 1].lstrip().startswith("for"):
            return None
        private = f" private({', '.join(loop.private)})" if loop.private else ""
        lines[loop.line - 1:loop.line - 1] = [
            f"#pragma omp parallel for{private}", f'#line {loop.line} "{path}"']
    return f'#line 1 "{path}"\n' + "\n".join(lines) + "\n"


# --------------------------------------------------------------------------
# Python
# --------------------------------------------------------------------------


def python_function(program: ir.Program):
    """The plain Python function behind ``program`` (imported from its file)."""
    path = os.path.abspath(program.file)
    name = f"_polygpu_reference_{compiler.source_hash(path)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise PolygpuError(f"{program.file}: cannot import")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, program.name)
    while hasattr(fn, "__wrapped__"):
        fn = fn.__wrapped__
    return fn


def _run_python(program: ir.Program, values: Mapping[str, object], float_type=None) -> None:
    """Call the function; ``float_type`` (long double) converts its float scalars."""
    fn = python_function(program)
    floats = {p.name for p in program.params if p.dtype.startswith("float")}
    fn(*[float_type(values[name]) if float_type and name in floats else values[name]
         for name in program.signature])


# --------------------------------------------------------------------------
# C
# --------------------------------------------------------------------------


def _run_c(program, values, defines, include_dirs, parallel) -> ReferenceRun:
    try:
        library = _library(program, defines, include_dirs, "float64", parallel)
        run = ReferenceRun("float64")
    except compiler.CompileError as e:
        library = _library(program, defines, include_dirs, "float32", parallel)
        first = next((x for x in str(e).splitlines() if "error" in x), "")
        run = ReferenceRun(
            "float32",
            f"{program.file} does not compile with float read as double ({first.strip()}); "
            "the reference computes in float32",
        )
    _call(program, library, values, run.precision)
    return run


def _run_variant(program, values, defines, include_dirs, parallel, mode, rounding):
    """The long double run, or the double run under a directed ``rounding`` (+1/-1)."""
    try:
        library = _library(program, defines, include_dirs, mode, parallel)
    except compiler.CompileError as e:
        first = next((x for x in str(e).splitlines() if "error" in x), "").strip()
        how = ("with float and double read as long double" if mode == "long double"
               else "with float read as double under directed rounding")
        raise VariantUnavailable(f"{program.file} does not compile {how} ({first})") from None
    if mode == "long double":
        _call(program, library, values, "longdouble")
        return ReferenceRun("longdouble")
    set_rounding = compiler.load_library(library).polygpu_set_rounding
    set_rounding.restype, set_rounding.argtypes = ctypes.c_int, [ctypes.c_int]
    try:
        if set_rounding(rounding) != 0:
            raise VariantUnavailable("the C library cannot set the rounding mode here")
        _call(program, library, values, "float64")
    finally:
        set_rounding(0)
    return ReferenceRun("float64")


def _call(program, library, values, precision: str) -> None:
    """Call the function of ``library`` on ``values``, its float arithmetic in
    ``precision`` ('float64', 'float32' or 'longdouble')."""
    float_ctype = {"float64": ctypes.c_double, "longdouble": ctypes.c_longdouble}.get(precision)
    args, argtypes, copies = [], [], []
    arrays = {a.name: a for a in program.arrays}
    scalars = {s.name: s for s in program.params}
    for name in program.signature:
        if name in arrays:
            v = values[name]
            if arrays[name].dtype == "float32" and precision == "float32":
                c = np.ascontiguousarray(v, dtype=np.float32)
                copies.append((v, c))
                v = c
            args.append(v.ctypes.data)
            argtypes.append(ctypes.c_void_p)
        else:
            dtype = scalars[name].dtype
            ctype = float_ctype if dtype.startswith("float") and float_ctype else _CTYPES[dtype]
            args.append(values[name])
            argtypes.append(ctype)
    fn = getattr(compiler.load_library(library), program.name, None)
    if fn is None:
        raise PolygpuError(f"{program.file}: function {program.name} is not exported (static?)")
    fn.restype = None
    fn.argtypes = argtypes
    _on_a_stack_for_locals(program, values, precision, lambda: fn(*args))
    for original, c in copies:
        original[...] = c


# the calling thread's stack is trusted with this many bytes of a function's local
# arrays (of the usual 8 MB); more run on a thread with a stack sized for them, up to
# LOCAL_STACK_LIMIT
LOCAL_STACK_TRUSTED = 4 << 20
LOCAL_STACK_LIMIT = 64 << 30
_STACK_MARGIN = 16 << 20


def _on_a_stack_for_locals(program, values, precision: str, call) -> None:
    """Run ``call`` (the C function) where its local arrays fit: C puts them on the
    stack, and at GPU sizes they can pass the calling thread's (a crash, not an
    error); then on a thread whose stack is sized for them (mapped lazily).  Beyond
    :data:`LOCAL_STACK_LIMIT`, bad input."""
    size = {"float64": 8, "float32": 4, "longdouble": np.dtype(np.longdouble).itemsize}
    need = 0
    for a in program.local_arrays:
        points = 1
        for e in a.shape:
            points *= max(eval_int(e, values), 0)
        element = size[precision] if a.dtype.startswith("float") else \
            np.dtype(a.dtype).itemsize
        need += points * element
    if need <= LOCAL_STACK_TRUSTED:
        call()
        return
    if need > LOCAL_STACK_LIMIT:
        raise PolygpuError(
            f"{program.file}: the local arrays of {program.name} take {need / 2**30:.1f} "
            f"GiB at these sizes, more than the {LOCAL_STACK_LIMIT >> 30} GiB stack the "
            "reference gives them: check at smaller sizes, or pass them as parameters")
    stack = -(-(need + _STACK_MARGIN) // (1 << 16)) << 16
    failed: list[BaseException] = []

    def run():
        try:
            call()
        except BaseException as e:  # noqa: BLE001 -- raised again in the caller
            failed.append(e)

    worker = threading.Thread(target=run, name="polygpu-reference")
    previous = threading.stack_size(stack)  # (read when the thread starts)
    try:
        worker.start()
    finally:
        threading.stack_size(previous)
    worker.join()
    if failed:
        raise failed[0]


# mode -> (prelude after the headers and extras, text after the file, flags, file stem, what)
_MODES = {
    "float32": ("", "", (), "f32", ""),
    "float64": (_AS_DOUBLE, "", (), "f64", ", float read as double"),
    "directed": ("#include <fenv.h>\n" + _AS_DOUBLE, _ROUNDING_HELPER, ("-frounding-math",),
                 "f64r", ", float read as double, for directed rounding"),
    "long double": (None, "", (), "fld", ", float and double read as long double"),
}


def _has_float(program: ir.Program) -> bool:
    """Whether the region declares float data (an array, a scalar argument or a
    temporary).  The IR has no float cast (the frontend drops them), so these are all."""
    return any(d.dtype == "float32"
               for d in (*program.arrays, *program.params, *program.temporaries))


def _keeping_float_functions(prelude: str) -> str:
    """``prelude`` without its remapping of the ``f`` functions (``#define sqrtf sqrt``).

    In a region without float data, ``sqrtf(x)`` on a double is a deliberate float
    operation -- the kernel rounds its argument and result to float, as C does -- not a
    float32 program's approximation of ``sqrt``; a reference computing ``sqrt`` would
    differ from the exact kernel by float rounding and fail the check falsely."""
    names = set(_F32_FUNCTIONS)
    return "".join(line for line in prelude.splitlines(keepends=True)
                   if not (line.startswith("#define ") and line.split()[1] in names))


def _library(program, defines, include_dirs, mode: str, parallel):
    """The reference library (``mode``: a key of ``_MODES``), with OpenMP loops when OpenMP
    accepts them (a loop whose condition is not in OpenMP's canonical form is not), else
    sequential."""
    if parallel:
        try:
            return _build_c(program, defines, include_dirs, mode, parallel)
        except compiler.CompileError:
            pass
    return _build_c(program, defines, include_dirs, mode)


def _build_c(program, defines, include_dirs, mode: str, parallel=()):
    """Preprocess (to hash exactly what is compiled, headers included), then compile.

    The prelude's min/max macros would break a file that defines functions of those names,
    so a failed build is retried without them.
    """
    prelude, after, mode_flags, stem, described = _MODES[mode]
    if prelude is None:
        prelude = _as_long_double()
    if not _has_float(program):
        prelude = _keeping_float_functions(prelude)
    gcc, _ = compiler.find_compiler("gcc")
    flags = ["-D" + d.removeprefix("-D") for d in defines]
    flags += ["-I" + i.removeprefix("-I") for i in include_dirs]
    path = os.path.abspath(program.file)
    what = f"{program.file} (the reference{described})"
    openmp = with_openmp(path, parallel) if parallel else None
    include, extra_flags = f'#include "{path}"\n', ()
    if openmp is not None:
        # the rewritten copy is included from the cache; its own "..." includes still
        # resolve next to the original
        copy = compiler.cache_dir() / f"omp-{compiler.source_hash(openmp)}.c"
        if copy.exists():
            compiler.mark_used(copy)  # (a recent file is never pruned)
        else:
            compiler.write_atomically(copy, openmp)
        include, extra_flags = f'#include "{copy}"\n', ("-fopenmp",)
        flags.append("-iquote" + os.path.dirname(path))
    errors = None
    for extras in (_EXTRAS, ""):
        wrapper = _HEADERS + extras + prelude + include + after
        pre = subprocess.run(
            [gcc, "-E", *flags, "-x", "c", "-"], input=wrapper, capture_output=True, text=True,
            env=compiler.C_LOCALE,
        )
        if pre.returncode != 0:
            raise compiler.CompileError(
                f"cannot preprocess {program.file}; gcc says:\n" + compiler.first_errors(pre.stderr)
            )
        try:
            return compiler.build_shared_library(
                pre.stdout, "gcc", ("-x", "cpp-output", *FLAGS, *mode_flags, *extra_flags),
                stem=f"ref-{program.name}-{stem}", suffix=".i",
                what=what,
            )
        except compiler.CompileError as e:
            errors = errors or e
    raise errors
