"""The build cache's size limit (runtime/compiler.py): least recently used files go
first, recently used ones and the emulation header's folder never, a hit counts as a
use, and a bad limit is a clear error."""

from __future__ import annotations

import os
import time

import pytest

from polygpu.errors import PolygpuError
from polygpu.runtime import compiler

MB = 2**20


def _file(path, megabytes: float, age_s: float):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\0" * int(megabytes * MB))
    then = time.time() - age_s
    os.utime(path, (then, then))
    return path


def test_the_oldest_files_go_first_until_a_fifth_below_the_limit(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYGPU_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("POLYGPU_CACHE_MAX_MB", "10")
    hour = compiler.KEEP_RECENT
    key = "0123456789abcdef01234567"
    oldest = _file(tmp_path / f"cpu-a-{key}.so", 4, 5 * hour)
    old_cubin = _file(tmp_path / "cubins" / "k1.cubin", 3, 4 * hour)
    old = _file(tmp_path / f"ref-b-f64-{key}.i", 1, 3 * hour)
    crashed = _file(tmp_path / ".cpu-b-x8k2_q.so", 2, 3 * hour)  # a killed build's
    kept = _file(tmp_path / f"cpu-c-{key}.so", 2, 2 * hour)
    recent = _file(tmp_path / f"cpu-d-{key}.so", 2, hour / 2)  # used within the hour
    header = _file(tmp_path / "emulation-x" / "cuda_emulation.h.gch", 2, 9 * hour)
    database = _file(tmp_path / "tuning.sqlite", 1, 9 * hour)  # not a build's
    # 17 MB: down to 8 (a fifth below 10), oldest first; the header's folder and the
    # database count but stay (4 + 3 + 1 + 2 go, leaving 7)
    removed = compiler.prune_cache(force=True)
    assert removed == [oldest, old_cubin, old, crashed] or \
        removed == [oldest, old_cubin, crashed, old]  # (the same age)
    assert kept.exists() and recent.exists() and header.exists() and database.exists()
    assert compiler.prune_cache(force=True) == []  # under the limit now


def test_recent_files_are_spared_even_over_the_limit(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYGPU_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("POLYGPU_CACHE_MAX_MB", "1")
    fresh = [_file(tmp_path / f"cpu-{k}.so", 1, 60) for k in range(3)]
    assert compiler.prune_cache(force=True) == []
    assert all(p.exists() for p in fresh)


def test_no_limit_and_a_bad_limit(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYGPU_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("POLYGPU_CACHE_MAX_MB", "0")
    old = _file(tmp_path / "cpu-a.so", 2, 10 * compiler.KEEP_RECENT)
    assert compiler.prune_cache(force=True) == [] and old.exists()
    monkeypatch.setenv("POLYGPU_CACHE_MAX_MB", "lots")
    with pytest.raises(PolygpuError, match="POLYGPU_CACHE_MAX_MB='lots': not a number"):
        compiler.cache_limit()
    monkeypatch.delenv("POLYGPU_CACHE_MAX_MB")
    assert compiler.cache_limit() == compiler.DEFAULT_MAX_MB * MB


def test_a_hit_marks_the_library_used(tmp_path, monkeypatch):
    """The second build of the same source finds the library and makes it recent, so a
    prune right after spares it; the source beside it, untouched, goes."""
    monkeypatch.setenv("POLYGPU_CACHE_DIR", str(tmp_path))
    source = "extern \"C\" int pg_one(void) { return 1; }\n"
    args = (source, "g++", ["-shared", "-fPIC"], "probe", ".cpp", "a probe")
    library = compiler.build_shared_library(*args)
    then = time.time() - 10 * compiler.KEEP_RECENT
    for path in tmp_path.iterdir():
        os.utime(path, (then, then))
    assert compiler.build_shared_library(*args) == library
    assert time.time() - library.stat().st_mtime < 60
    monkeypatch.setenv("POLYGPU_CACHE_MAX_MB", str(library.stat().st_size / MB))
    removed = compiler.prune_cache(force=True)
    assert library.exists() and library not in removed
    assert [p.suffix for p in removed] == [".cpp"]
