"""Names a kernel's own identifiers may not take, and why.

Every user name that reaches generated code -- array and scalar parameters, scalar
temporaries, loop iterators -- is printed as it is into CUDA C++ (``nvcc``) and into the
C++ translation unit of the CPU emulator (``g++ -std=c++20``, with
``runtime/cuda_emulation.h`` and the ``polygpu_run`` entry point of
``runtime/cpu.py``).  A name that is fine in C or Python but means something else
there would give a ``.cu`` that does not compile, or worse, one that silently
refers to the wrong object.  Both frontends call :func:`check_name` on every name
they declare and :func:`check_signature` on the whole parameter list, and refuse
with ``FILE:LINE``, the reason and a suggested rename.  The groups:

* ``CPP_KEYWORDS`` -- keywords of C and C++20 (and the alternative operator tokens
  ``and``, ``or``, ``not``, ...): ``new``, ``class``, ``this``, ``template`` are valid C
  identifiers but not C++ ones, and ``float``, ``int``, ``double`` are valid Python
  parameter names.
* ``CUDA_BUILTINS`` -- the CUDA built-in variables and types the generated kernels and
  the launcher use (``threadIdx.x``, ``dim3(...)``), and the device functions they
  call (``__syncthreads``, ``atomicAdd``, the warp intrinsics of
  ``pg_atomic_add_warp``).  A parameter of that name would hide them.
* ``LIBRARY_FUNCTIONS`` -- the math functions a statement may call (``PURE_FUNCTIONS``
  of :mod:`polygpu.frontend.ir`; ``min``/``max`` are also what integer ``min``/``max``
  and loop bounds print as), ``floord`` (a macro of the generated prologue) and
  ``memcpy`` (the emulator's ``__constant__`` upload): a variable of that name would
  hide the function in the kernel or the launcher.
* ``GENERATED_NAMES`` -- fixed identifiers of generated code that share a scope with
  the parameters: ``g0``, ``g1``, ``g2`` are the grid locals of the emulator's
  ``polygpu_run``, whose parameters are the kernel's arguments.
* ``RESERVED_PREFIXES`` -- ``pg_`` (helpers ``pg_floordiv``/``pg_mod``/
  ``pg_atomic_add``, temporaries ``pg_tmp_*``, staging locals ``pg_tid``, ``pg_i``,
  ``pg_u0``, ...) and ``polygpu_`` (the emulator, the entry point).  Names containing
  ``__`` or starting with ``_`` and an upper-case letter are reserved to the
  implementation by the C++ standard (and used by CUDA: ``__global__``, ...).

Not reserved, because code generation already steers clear of them: the names of
block and thread coordinates (``bx``, ``tx``), thread-local loop iterators (``c0``,
``s0``, ``rx``), tile levels (``o_c0``) and host-step iterators (``h0``) are chosen
to avoid every parameter name (``schedule/tiling.py``, ``schedule/host.py``), and
statement bodies never print an original loop iterator (isl's expression replaces
it).  Only names of generated code that *derive from* a parameter's name can still
collide; :func:`check_signature` refuses those: the shared, register and constant
copies of array ``X`` (``X_sh``, ``X_reg``, ``X_const``, ``memory/placement.py``,
``codegen/expressions.py``) when another parameter has that name, and the kernels
``F_kernel0``, ``F_kernel1``, ... of function ``F`` (the launcher names them where
its parameters are in scope).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from polygpu.errors import PolygpuError, SourceLoc, UnsupportedError
from polygpu.frontend.ir import PURE_FUNCTIONS

CPP_KEYWORDS = frozenset(
    """
    alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t
    char16_t char32_t class compl concept const consteval constexpr constinit const_cast
    continue co_await co_return co_yield decltype default delete do double dynamic_cast
    else enum explicit export extern false float for friend goto if inline int long
    mutable namespace new noexcept not not_eq nullptr operator or or_eq private protected
    public register reinterpret_cast requires restrict return short signed sizeof static
    static_assert static_cast struct switch template this thread_local throw true try
    typedef typeid typename union unsigned using virtual void volatile wchar_t while xor
    xor_eq _Alignas _Alignof _Atomic _Bool _Complex _Generic _Imaginary _Noreturn
    _Static_assert _Thread_local
    """.split()
)

CUDA_BUILTINS = frozenset(
    """
    threadIdx blockIdx blockDim gridDim warpSize dim3 uint3
    atomicAdd atomicSub atomicExch atomicMin atomicMax atomicInc atomicDec atomicCAS
    atomicAnd atomicOr atomicXor
    """.split()
)

LIBRARY_FUNCTIONS = frozenset(PURE_FUNCTIONS | {"min", "max", "floord", "memcpy"})

GENERATED_NAMES = frozenset({"g0", "g1", "g2"})

RESERVED_PREFIXES = ("pg_", "polygpu_")

# suffixes of the per-array buffers and copies that code generation names after an array
DERIVED_SUFFIXES = {
    "_sh": "shared-memory copy",
    "_reg": "register copy",
    "_const": "__constant__ copy",
}


def reserved_reason(name: str) -> str | None:
    """Why ``name`` cannot be a kernel's identifier, or None if it can."""
    if name in CPP_KEYWORDS:
        return "a C++ keyword (the generated .cu is C++)"
    if name in CUDA_BUILTINS:
        return "a CUDA built-in the generated code uses"
    if name in LIBRARY_FUNCTIONS:
        return "a function the generated code calls"
    if name in GENERATED_NAMES:
        return "a local variable of the code polygpu generates"
    for prefix in RESERVED_PREFIXES:
        if name.startswith(prefix):
            return f"reserved for polygpu's generated code (prefix '{prefix}')"
    if "__" in name or re.match(r"_[A-Z]", name):
        return "reserved to the C++ implementation ('__' or '_' and a capital letter)"
    return None


def suggestion(name: str) -> str:
    """A rename of ``name`` that is not reserved."""
    base = re.sub(r"_+", "_", name).strip("_") or "v"
    for prefix in RESERVED_PREFIXES:
        if base.startswith(prefix):
            base = base[len(prefix):] or "v"
    candidate = f"{base}_"
    while reserved_reason(candidate) is not None:
        candidate = "v" + candidate
    return candidate


def check_name(name: str, what: str, loc: SourceLoc) -> None:
    """Refuse ``name`` (a parameter, array, iterator or temporary: ``what``) if reserved."""
    reason = reserved_reason(name)
    if reason is not None:
        raise UnsupportedError(
            f"{what} '{name}': the name is {reason}; rename it (e.g. '{suggestion(name)}')",
            loc,
        )


def check_signature(
    function: str,
    params: Iterable[tuple[str, SourceLoc]],
    arrays: Iterable[str],
) -> None:
    """Refuse parameter names that coincide with a name polygpu derives from another
    parameter (``X_sh`` of array ``X``) or from the function (``F_kernel0``)."""
    params = list(params)
    arrays = set(arrays)
    kernel = re.compile(rf"{re.escape(function)}_kernel\d+")
    for name, loc in params:
        if kernel.fullmatch(name):
            raise PolygpuError(
                f"parameter '{name}': the name is that of a kernel polygpu generates for "
                f"function '{function}'; rename it (e.g. '{name}_')",
                loc,
            )
        for suffix, what in DERIVED_SUFFIXES.items():
            if name.endswith(suffix) and name[: -len(suffix)] in arrays:
                array = name[: -len(suffix)]
                raise PolygpuError(
                    f"parameter '{name}': the name is that of the {what} polygpu may make "
                    f"of array '{array}'; rename it (e.g. '{name}_')",
                    loc,
                )
