"""Compile C or C++ text into a shared library once, and load it.

Every build is keyed by a hash of everything that determines its result -- the compiler
(its path and version line), the flags and the complete source text -- so a library is
rebuilt exactly when something that matters changed, and a cached one is never stale.
Builds go to a temporary name and are renamed into place, so concurrent test processes
sharing the cache never load a half-written library.

The cache directory is ``$POLYGPU_CACHE_DIR``, else ``$XDG_CACHE_HOME/polygpu``, else
``~/.cache/polygpu``.  It is kept under ``$POLYGPU_CACHE_MAX_MB`` megabytes (default
:data:`DEFAULT_MAX_MB`; 0: no limit): a tune builds a library and a cubin per
candidate, and two test runs leave half a gigabyte.  After a new build (at most every
:data:`PRUNE_EVERY` seconds a process) the least recently used builds' files go until
the cache is a fifth below the limit (the emulation header's folder and the tuning
database beside them count, but stay); a hit marks its file used (its modification
time), and a file used in the last :data:`KEEP_RECENT` seconds is never removed --
another process may be about to load it.  A removed entry is simply built again.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from polygpu.errors import PolygpuError

# plain ASCII messages (g++ quotes with Unicode marks under a UTF-8 locale)
C_LOCALE = {**os.environ, "LC_ALL": "C"}


DIAGNOSTIC_LINES = 40  # compiler output shown in an error; the whole of it goes to a log
DEFAULT_MAX_MB = 2048  # the build cache's size limit unless $POLYGPU_CACHE_MAX_MB says
PRUNE_EVERY = 300.0  # seconds between a process's looks at the cache's size
KEEP_RECENT = 3600.0  # files used this recently (seconds) are never pruned
_last_prune = [float("-inf")]  # when this process last looked (time.monotonic)


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity mask, not the machine's count, so
    a tune pinned to some cores (``taskset``, a container's cpuset, one of several tunes
    sharing a host) starts one compiler per core it has rather than per core it sees."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity on this platform
        return os.cpu_count() or 1


class CompileError(PolygpuError):
    """The compiler rejected a source; the message holds its diagnostic (from just before
    the first error, :data:`DIAGNOSTIC_LINES` lines at most, then where the rest is)."""


def cache_dir() -> Path:
    """The build cache, created if needed; a directory that cannot be created or written
    is the user's problem (``PolygpuError`` naming the variable that sets it)."""
    root = os.environ.get("POLYGPU_CACHE_DIR")
    if root:
        path, origin = Path(root), "$POLYGPU_CACHE_DIR"
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        path = (Path(xdg) if xdg else Path.home() / ".cache") / "polygpu"
        origin = "$XDG_CACHE_HOME/polygpu" if xdg else "~/.cache/polygpu"
    return _writable_cache(path, origin)


@cache
def _writable_cache(path: Path, origin: str) -> Path:
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".probe-", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise PolygpuError(
            f"{path}: cannot use it as polygpu's build cache ({err.strerror or err}); set "
            f"POLYGPU_CACHE_DIR to a writable directory (this one comes from {origin})"
        ) from None
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


def write_atomically(path: Path, text: str | bytes) -> None:
    """Write ``text`` (or bytes) to ``path`` through a private file and a rename:
    another process (a parallel test worker, a second tune) may be reading or compiling
    the same cached file, and rewriting it in place would hand that one a truncated
    source."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}-", suffix=path.suffix, dir=path.parent)
    try:
        with os.fdopen(fd, "wb" if isinstance(text, bytes) else "w") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


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
        mark_used(library)
        return library
    src = directory / f"{stem}-{key}{suffix}"
    try:
        write_atomically(src, source)
        fd, tmp = tempfile.mkstemp(prefix=f".{stem}-", suffix=".so", dir=directory)
    except OSError as err:
        raise PolygpuError(f"{directory}: cannot write to polygpu's build cache "
                           f"({err.strerror or err}); set POLYGPU_CACHE_DIR to a writable "
                           "directory") from None
    os.close(fd)
    try:
        result = subprocess.run(
            [path, *flags, "-o", tmp, str(src), "-lm"], capture_output=True, text=True,
            env=C_LOCALE,
        )
        if result.returncode != 0:
            output = result.stderr or result.stdout
            log = directory / f"{stem}-{key}.log"
            try:
                log.write_text(output)
            except OSError:
                log = None
            raise CompileError(
                f"cannot compile {what} ({src}); {compiler} says:\n"
                + first_errors(output, log=log)
            )
        os.replace(tmp, library)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    prune_cache()
    return library


def mark_used(path: Path) -> None:
    """Mark a cache entry as used now (the pruning's recency); a file another process
    removed meanwhile is no error here (its build repeats)."""
    try:
        os.utime(path)
    except OSError:
        pass


def cache_limit() -> int:
    """The build cache's size limit in bytes ($POLYGPU_CACHE_MAX_MB; 0: none)."""
    text = os.environ.get("POLYGPU_CACHE_MAX_MB", "")
    try:
        megabytes = float(text) if text.strip() else DEFAULT_MAX_MB
    except ValueError:
        raise PolygpuError(f"POLYGPU_CACHE_MAX_MB={text!r}: not a number of megabytes") \
            from None
    return max(0, int(megabytes * 2**20))


def prune_cache(force: bool = False) -> list[Path]:
    """Remove the least recently used files of the build cache (module doc) until it is
    a fifth below :func:`cache_limit`, sparing files used in the last
    :data:`KEEP_RECENT` seconds; at most every :data:`PRUNE_EVERY` seconds a process
    unless ``force``.  Returns what it removed.  A cache that cannot be read or a file
    that cannot be removed is skipped (pruning never fails a build)."""
    limit = cache_limit()
    now = time.monotonic()
    if not limit or (not force and now - _last_prune[0] < PRUNE_EVERY):
        return []
    _last_prune[0] = now
    try:
        files = list(_cache_files(cache_dir()))
    except (OSError, PolygpuError):
        return []
    total = sum(s.st_size for _, s, _ in files)
    if total <= limit:
        return []
    removed = []
    target = limit * 4 // 5
    for _, size, path in sorted((s.st_mtime, s.st_size, p) for p, s, ok in files if ok):
        if total <= target:
            break
        try:
            if time.time() - path.stat().st_mtime < KEEP_RECENT:
                continue  # (used since the listing, or recently: another process's)
            path.unlink()
        except OSError:
            continue
        total -= size
        removed.append(path)
    return removed


PRUNED_FOLDERS = ("cubins",)  # folders of the cache whose files are pruned too (the
# emulation header's is not: every CPU build includes it, and it is rewritten only with
# a new header or compiler)
# what the builders write at the top: STEM-KEY.so and its source (KEY: source_hash), and
# a killed build's private names (.STEM-XXXX.so); nothing else there is pruned (the
# tuning database, tuning.sqlite, lives in the same folder by default)
BUILT = re.compile(r"(?:[\w.+-]+-[0-9a-f]{24}|\.[\w.+-]+-\w+)\.(?:so|c|cpp|cu|i|log)")


def _cache_files(directory: Path):
    """``(path, stat, prunable)`` of every file in the cache and its folders, one level
    down (prunable: a build's file at the top (:data:`BUILT`), or any file in
    :data:`PRUNED_FOLDERS`)."""
    for entry in os.scandir(directory):
        if entry.is_dir(follow_symlinks=False):
            for inner in os.scandir(entry.path):
                if inner.is_file(follow_symlinks=False):
                    yield (Path(inner.path), inner.stat(follow_symlinks=False),
                           entry.name in PRUNED_FOLDERS)
        elif entry.is_file(follow_symlinks=False):
            yield (Path(entry.path), entry.stat(follow_symlinks=False),
                   BUILT.fullmatch(entry.name) is not None)


def first_errors(output: str, count: int = DIAGNOSTIC_LINES,
                 log: Path | str | None = None) -> str:
    """The compiler output from just before its first error, ``count`` lines at most,
    then a note of how many lines were left out (and ``log``, the file holding them all).
    Never empty: a compiler that failed silently says so."""
    lines = output.rstrip().splitlines()
    if not lines:
        return "(no output; exit status only)"
    first = next((k for k, line in enumerate(lines) if "error" in line), 0)
    start = first - 1 if first > 0 and "In function" in lines[first - 1] else first
    if start <= 2:  # a few lines of context before it: keep them
        start = 0
    shown = lines[start : start + count]
    left = len(lines) - start - len(shown)
    if start:
        shown.insert(0, f"[{start} line{'s' * (start > 1)} before the first error left out]")
    if left > 0:
        shown.append(f"[... {left} more line{'s' * (left > 1)}"
                     + (f"; the full output is in {log}]" if log else "]"))
    elif start and log:
        shown.append(f"[the full output is in {log}]")
    return "\n".join(shown)


@cache
def load_library(path: Path) -> ctypes.CDLL:
    return ctypes.CDLL(str(path))
