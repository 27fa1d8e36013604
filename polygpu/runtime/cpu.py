"""Run a KernelProgram on the CPU, through the CUDA emulation header.

The program's CUDA text is compiled as C++20 by g++ after ``cuda_emulation.h``, together
with a generated host function::

    extern "C" int polygpu_run(<the original arguments, in signature order>)

that evaluates each launch's grid expressions in C and runs the launches in order through
``polygpu_emulate_launch``.  A program with host loops takes two more arguments, the
steps to run (``KernelProgram.steps``: per step the launch's index and the host
iterators' values) and their number, so both backends follow one enumeration.

The library is cached by a hash of its full text, so a program is compiled once; it
is called with ctypes on numpy arrays, which it updates in place.  It also exports
``polygpu_run_timed``, the same arguments and then a ``double *`` of one entry per launch
to which each launch adds its wall-clock milliseconds (the device layer's
:meth:`~polygpu.runtime.device.CpuEmulator.time_launches`); both run one body, which
reads the clock only when that pointer is given.

Every program includes the same header, and parsing it (``<thread>``, ``<map>``,
``<barrier>``...) was most of each compile: g++ took 1.0 s for a trivial program with it,
0.3 s with the header precompiled.  So the header is written once into the build cache,
in a directory keyed by its text, the compiler and :data:`FLAGS`, beside its precompiled
form (``.gch``, built through a private name and a rename), and programs include it by
that path.  g++ takes the ``.gch`` only where it was made with matching options and
otherwise reads the header itself, and the key ties the ``.gch`` to the header's text:
the precompiled form can make a compile faster, never different.

Launches run their blocks' threads as std::threads only when the program calls
``__syncthreads()``; otherwise each block's threads run one after another, a schedule CUDA
allows for code without barriers and much cheaper to emulate.
"""

from __future__ import annotations

import ctypes
import os
import re
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from polygpu.codegen.launch_grid import device_expression
from polygpu.codegen.program import KernelProgram
from polygpu.frontend.ir import DTYPES
from polygpu.runtime import compiler, grid
from polygpu.runtime.arguments import bind
from polygpu.runtime.grid import LaunchError

HEADER = Path(__file__).with_name("cuda_emulation.h")
FLAGS = ("-std=c++20", "-O1", "-shared", "-fPIC", "-pthread", "-w", "-fmax-errors=10")

_CTYPES = {
    "float32": ctypes.c_float,
    "float64": ctypes.c_double,
    "int32": ctypes.c_int32,
    "int64": ctypes.c_int64,
}

# `extern __shared__ T name[];` (dynamic shared memory) cannot become a static array of unknown
# size: it becomes a pointer into the launch's dynamic shared buffer.
_DYNAMIC_SHARED = re.compile(
    r"extern\s+__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s*)?"
    r"(?P<type>[A-Za-z_][\w\s]*?)\s*(?:__align__\s*\(\s*\d+\s*\)\s*)?"
    r"(?P<name>[A-Za-z_]\w*)\s*\[\s*\]\s*;"
)


def host_source(program: KernelProgram, header: Path | None = None) -> str:
    """The complete C++ translation unit compiled for ``program``: after the emulation
    header's text, or after an ``#include`` of ``header`` (its copy in the build cache,
    :func:`emulation_header`)."""
    for launch in program.launches:
        for e in launch.grid:
            unknown = grid.names(e) - set(program.parameters) - set(program.host_iterators)
            if unknown:
                raise grid.GridExpressionError(
                    f"grid expression {e!r} of {launch.kernel}: {', '.join(sorted(unknown))} "
                    "is not an integer parameter"
                )
    source = _DYNAMIC_SHARED.sub(
        lambda m: f"{m['type']} *{m['name']} = "
        f"reinterpret_cast<{m['type']} *>(polygpu_emu::dynamic_shared);",
        program.source,
    )
    concurrent = "true" if any(word in program.source for word in (
        "__syncthreads", "__syncwarp", "pg_group_sync(", "pg_dmma(")) else "false"
    params = ", ".join(
        f"{DTYPES[a.dtype][0]} {'*' if a.pointer else ''}{a.name}"
        for a in program.arguments
    )
    names = ", ".join([a.name for a in program.arguments] + list(program.host_iterators))
    body = [f"    memcpy({name}_const, {name}, sizeof {name}_const);  // __constant__ copy\n"
            for name in program.constants]
    host = program.host_iterators
    launch_code = []
    for k, launch in enumerate(program.launches):
        # evaluated in long long: the parameters are int, and n + 255 or a folded
        # grid's product of block counts must not overflow before the limits are checked
        g = [device_expression(e) for e in launch.grid]
        b = ", ".join(map(str, launch.block))
        launch_code.append(
            f"    // launch {k}\n"
            f"    g0 = {g[0]}; g1 = {g[1]}; g2 = {g[2]};\n"
            f"    if (g0 < 1 || g1 < 1 || g2 < 1 || g0 > 2147483647LL || g1 > 65535 || g2 > 65535)"
            f"\n        return polygpu_emu::bad_grid(\"{launch.kernel}\", g0, g1, g2);\n"
            "    if (polygpu_launch_ms) polygpu_t0 = std::chrono::steady_clock::now();\n"
            f"    if (polygpu_emulate_launch(\"{launch.kernel}\", {launch.kernel}, "
            f"dim3(g0, g1, g2), dim3({b}), {launch.shared_bytes}, {concurrent}"
            f"{', ' if names else ''}{names}))\n"
            "        return 1;\n"
            f"    if (polygpu_launch_ms) polygpu_launch_ms[{k}] += std::chrono::duration<"
            "double, std::milli>(std::chrono::steady_clock::now() - polygpu_t0).count();\n"
        )
    call = [a.name for a in program.arguments]
    if host:
        params += ", const long long *polygpu_steps, long long polygpu_n_steps"
        call += ["polygpu_steps", "polygpu_n_steps"]
        width = 1 + len(host)
        body.append("    for (long long polygpu_s = 0; polygpu_s < polygpu_n_steps; "
                    "polygpu_s++) {\n"
                    "        const long long *polygpu_step = polygpu_steps + polygpu_s * "
                    f"{width};\n")
        body += [f"        const int {h} = (int)polygpu_step[{d + 1}];\n"
                 for d, h in enumerate(host)]
        body.append("        switch (polygpu_step[0]) {\n")
        for k, code in enumerate(launch_code):
            body.append(f"        case {k}: {{\n{code}        }} break;\n")
        body.append("        }\n    }\n")
    else:
        body += launch_code
    body_params = ", ".join(p for p in (params, "double *polygpu_launch_ms") if p)
    prelude = HEADER.read_text() if header is None else f'#include "{header}"\n'
    return (
        prelude
        + f'\n#line 1 "{program.function}.cu"\n'
        + source
        + '\n#line 1 "polygpu_run.cpp"\n'
        + "#include <chrono>\n"
        + 'extern "C" const char *polygpu_last_error() { return polygpu_emu::last_error; }\n'
        # one body; polygpu_launch_ms (per launch, milliseconds added) null: no clock
        + f"static int polygpu_body({body_params}) {{\n"
        + "    long long g0, g1, g2;\n"
        + "    std::chrono::steady_clock::time_point polygpu_t0;\n"
        + "".join(body)
        + "    return 0;\n}\n"
        + f'extern "C" int polygpu_run({params}) {{\n'
        + f"    return polygpu_body({', '.join([*call, 'nullptr'])});\n}}\n"
        + f'extern "C" int polygpu_run_timed({body_params}) {{\n'
        + f"    return polygpu_body({', '.join([*call, 'polygpu_launch_ms'])});\n}}\n"
    )


@dataclass(frozen=True)
class CpuProgram:
    """A KernelProgram compiled for the CPU emulator."""

    program: KernelProgram
    library: Path

    def run(self, values: Mapping[str, object],
            steps: Sequence[tuple[int, tuple[int, ...]]] | None = None) -> None:
        """Run every launch in order on ``values`` (name -> int/float or numpy array); arrays
        are updated in place.  ``steps``: the launches to run, (index, host iterators) --
        the device layer's plan (:func:`polygpu.runtime.device.launch_plan`); default
        ``program.steps(values)``.  Prefer :class:`polygpu.runtime.device.CpuEmulator`,
        which also checks grids and aliasing before running."""
        self._call(values, steps, None)

    def run_timed(self, values: Mapping[str, object],
                  steps: Sequence[tuple[int, tuple[int, ...]]] | None = None) -> list[float]:
        """As :meth:`run`; returns each launch's wall-clock milliseconds (one entry per
        ``program.launches``, summed over its host steps)."""
        launch_ms = np.zeros(len(self.program.launches), dtype=np.float64)
        self._call(values, steps, launch_ms)
        return [float(t) for t in launch_ms]

    def _call(self, values, steps, launch_ms: np.ndarray | None) -> None:
        bound = bind(self.program, values)
        lib = compiler.load_library(self.library)
        fn = lib.polygpu_run if launch_ms is None else lib.polygpu_run_timed
        fn.restype = ctypes.c_int
        fn.argtypes = [
            ctypes.c_void_p if b.argument.pointer else _CTYPES[b.argument.dtype]
            for b in bound
        ]
        # scratch arrays live for this call only (kept referenced until it returns)
        scratch = {b.argument.name: b.value.host_array() for b in bound
                   if b.argument.kind == "scratch"}
        args = [
            scratch[b.argument.name].ctypes.data if b.argument.kind == "scratch"
            else b.value.ctypes.data if b.argument.kind == "array" else b.value.item()
            for b in bound
        ]
        if self.program.host_iterators:
            if steps is None:
                steps = self.program.steps(values)
            steps = np.array([(k, *h) for k, h in steps],
                             dtype=np.int64).reshape(-1, 1 + len(self.program.host_iterators))
            fn.argtypes = fn.argtypes + [ctypes.c_void_p, ctypes.c_longlong]
            args += [steps.ctypes.data, len(steps)]
        if launch_ms is not None:
            fn.argtypes = fn.argtypes + [ctypes.c_void_p]
            args.append(launch_ms.ctypes.data)
        if fn(*args) != 0:
            lib.polygpu_last_error.restype = ctypes.c_char_p
            raise LaunchError(f"{self.program.function}: {lib.polygpu_last_error().decode()}")


def emulation_header() -> Path | None:
    """The emulation header's copy in the build cache, precompiled beside it where g++
    could (module doc); None where it cannot be written there (programs then carry the
    header's text).  A failed precompile is no error: g++ reads the header instead."""
    path, version = compiler.find_compiler("g++")
    text = HEADER.read_text()
    directory = compiler.cache_dir() / (
        "emulation-" + compiler.source_hash(path, version, " ".join(FLAGS), text))
    header = directory / HEADER.name
    pch = directory / f"{HEADER.name}.gch"
    if any(c in str(header) for c in '"\\\n'):
        return None  # not a path an #include can name
    try:
        directory.mkdir(exist_ok=True)
        if not header.exists():
            compiler.write_atomically(header, text)
        if not pch.exists():
            fd, tmp = tempfile.mkstemp(prefix=f".{HEADER.name}-", suffix=".gch",
                                       dir=directory)
            os.close(fd)
            try:
                built = subprocess.run(
                    [path, *(f for f in FLAGS if f != "-shared"), "-x", "c++-header",
                     str(header), "-o", tmp], capture_output=True, env=compiler.C_LOCALE)
                if built.returncode == 0:
                    os.replace(tmp, pch)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
    except OSError:
        return header if header.exists() else None
    return header


def compile_program(program: KernelProgram) -> CpuProgram:
    """Compile ``program`` for the emulator (or take it from the cache)."""
    def build(header: Path | None) -> Path:
        return compiler.build_shared_library(
            host_source(program, header), "g++", FLAGS, stem=f"cpu-{program.function}",
            suffix=".cpp", what=f"the CUDA program of {program.function} for the CPU emulator",
        )

    header = emulation_header()
    try:
        return CpuProgram(program, build(header))
    except compiler.CompileError as err:
        # a damaged .gch is fatal to g++ (a mismatched one is only skipped): the
        # header's text then, as without a cache
        if header is None or not re.search(r"PCH|precompiled header", str(err)):
            raise
        return CpuProgram(program, build(None))


def run_program(program: KernelProgram, values: Mapping[str, object]) -> None:
    """Compile (once) and run ``program`` on the CPU; arrays in ``values`` are updated.
    Goes through the device layer (:class:`polygpu.runtime.device.CpuEmulator`)."""
    from polygpu.runtime.device import get_device

    get_device("cpu").run(program, values)
