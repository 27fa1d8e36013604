"""Compile C or C++ text into a shared library once, and load it.

Every build is keyed by a hash of everything that determines its result -- the compiler
(its path and version line), the flags and the complete source text -- so a library is
rebuilt exactly when something that matters changed, and a cached one is never stale.
Builds go to a temporary name and are renamed into place, so concurrent test processes
sharing the cache never load a half-written library.

The cache directory is ``$POLYGPU_CACHE_DIR``, else ``$XDG_CACHE_HOME/polygpu``, else
``~/.cache/polygpu``.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from polygpu.errors import PolygpuError

# plain ASCII messages (g++ quotes with Unicode marks under a UTF-8 locale)
C_LOCALE = {**os.environ, "LC_ALL": "C"}


class CompileError(PolygpuError):
    """The compiler rejected a source; the message holds its first error lines."""


def cache_dir() -> Path:
    root = os.environ.get("POLYGPU_CACHE_DIR")
    if root:
        path = Path(root)
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        path = (Path(xdg) if xdg else Path.home() / ".cache") / "polygpu"
    path.mkdir(parents=True, exist_ok=True)
    return path


@cache
def find_compiler(name: str) -> tuple[str, str]:
    """The path and version line of compiler ``name`` (``g++``, ``gcc``)."""
    path = shutil.which(name)
    if path is None:
        raise PolygpuError(f"{name} not found on PATH: it is needed to run code on the CPU")
    version = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
    return path, (version.splitlines() or [""])[0]


def source_hash(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def build_shared_library(
    source: str, compiler: str, flags: Sequence[str], stem: str, suffix: str, what: str
) -> Path:
    """Compile ``source`` (a file ending in ``suffix``) with ``compiler flags`` into a shared
    library in the cache, or return the cached one.  ``what`` names the source in errors."""
    path, version = find_compiler(compiler)
    key = source_hash(path, version, " ".join(flags), source)
    directory = cache_dir()
    library = directory / f"{stem}-{key}.so"
    if library.exists():
        return library
    src = directory / f"{stem}-{key}{suffix}"
    src.write_text(source)
    fd, tmp = tempfile.mkstemp(prefix=f".{stem}-", suffix=".so", dir=directory)
    os.close(fd)
    try:
        result = subprocess.run(
            [path, *flags, "-o", tmp, str(src), "-lm"], capture_output=True, text=True,
            env=C_LOCALE,
        )
        if result.returncode != 0:
            raise CompileError(
                f"cannot compile {what} ({src}); {compiler} says:\n"
                + first_errors(result.stderr or result.stdout)
            )
        os.replace(tmp, library)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return library


def first_errors(output: str, count: int = 12) -> str:
    """The compiler output from just before its first error, ``count`` lines at most."""
    lines = output.splitlines()
    first = next((k for k, line in enumerate(lines) if "error" in line), 0)
    start = first - 1 if first > 0 and "In function" in lines[first - 1] else first
    return "\n".join(lines[start : start + count])


@cache
def load_library(path: Path) -> ctypes.CDLL:
    return ctypes.CDLL(str(path))
