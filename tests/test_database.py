"""The tuning database: what is stored comes back, keys never mix, a killed writer loses
nothing it committed, and ``polygpu db`` shows it (no GPU needed)."""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from polygpu.cli import db as db_cli
from polygpu.errors import PolygpuError
from polygpu.search.database import (
    EXPORT_COLUMNS,
    SCHEMA_VERSION,
    TuningDatabase,
    default_path,
)
from polygpu.search.measurement import Environment, Measurement, canonical, source_hash

ROOT = Path(__file__).resolve().parent.parent
ENV = Environment("NVIDIA H100 80GB HBM3", "9.0", "13.0", "580.65", "0.1.0")
SRC = source_hash("void mv(...) { ... }")


def variant(tile: int, threads: int = 32) -> str:
    return canonical({"tile": [4, tile], "threads": [4, threads], "jam": False})


def ok(key: str, ms: float) -> Measurement:
    return Measurement(key, "ok", ms, (ms * 0.99, ms, ms * 1.02), check="max error 0",
                       extra={"registers": 40})


def record(db: TuningDatabase, m: Measurement, *, params=None, env=ENV, src=SRC,
           spec="kernels/mv.c", function="mv") -> int:
    return db.record(spec=spec, function=function, source_hash=src,
                     params=params or {"n": 4096}, env=env, m=m)


@pytest.fixture
def db(tmp_path):
    with TuningDatabase(tmp_path / "tuning.sqlite") as d:
        yield d


def test_round_trip_and_reopen(tmp_path):
    path = tmp_path / "sub" / "dir" / "tuning.sqlite"  # directories are created
    failed = Measurement(variant(256), "compile-error", reason="ptxas: too many [regs]\n..")
    with TuningDatabase(path) as db:
        ids = [record(db, ok(variant(128), 1.25)), record(db, failed)]
        assert ids[1] > ids[0]
    with TuningDatabase(path) as db:  # a fresh connection reads what was committed
        found = db.lookup(SRC, "mv", {"n": 4096}, ENV)
        assert found == {variant(128): ok(variant(128), 1.25), variant(256): failed}
        assert found[variant(128)].times_ms == (1.25 * 0.99, 1.25, 1.25 * 1.02)
        assert dict(found[variant(128)].extra) == {"registers": 40}
        (rec, _) = db.records()
        assert rec.spec == "kernels/mv.c" and rec.function == "mv" and rec.env == ENV
        assert rec.params == {"n": 4096} and rec.created.endswith("+00:00")
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(Environment)])
def test_no_environment_field_is_ignored(db, field):
    record(db, ok(variant(128), 1.0))
    other = dataclasses.replace(ENV, **{field: getattr(ENV, field) + "x"})
    assert db.lookup(SRC, "mv", {"n": 4096}, other) == {}
    assert set(db.lookup(SRC, "mv", {"n": 4096}, ENV)) == {variant(128)}


def test_parameters_source_and_function_are_part_of_the_key(db):
    record(db, ok(variant(128), 1.0))
    record(db, ok(variant(128), 2.0), params={"n": 8192})
    record(db, ok(variant(128), 3.0), src=source_hash("edited"))
    record(db, ok(variant(128), 4.0), function="mvt")
    times = {(p, s, f): db.lookup(s, f, {"n": p}, ENV)[variant(128)].time_ms
             for p, s, f in [(4096, SRC, "mv"), (8192, SRC, "mv"),
                             (4096, source_hash("edited"), "mv"), (4096, SRC, "mvt")]}
    assert list(times.values()) == [1.0, 2.0, 3.0, 4.0]
    assert db.lookup(SRC, "mv", {"n": 4096, "m": 1}, ENV) == {}
    # parameter order does not matter: the key is canonical
    record(db, ok(variant(64), 5.0), params={"m": 2, "n": 3})
    assert set(db.lookup(SRC, "mv", {"n": 3, "m": 2}, ENV)) == {variant(64)}


def test_most_recent_measurement_wins(db):
    record(db, Measurement(variant(128), "timeout", reason="killed after 10 s"))
    record(db, ok(variant(128), 2.0))
    record(db, ok(variant(256), 3.0))
    record(db, ok(variant(128), 1.5))
    found = db.lookup(SRC, "mv", {"n": 4096}, ENV)
    assert found[variant(128)].time_ms == 1.5 and found[variant(256)].time_ms == 3.0
    (run,) = db.runs()
    assert (run.measurements, run.variants, run.ok, run.failed) == (4, 2, 2, 0)
    assert (run.best_ms, run.best_variant) == (1.5, variant(128))
    assert [r.measurement.time_ms for r in db.records(run, latest=True)] == [3.0, 1.5]


def test_runs_are_numbered_stably_and_filtered(db):
    record(db, ok(variant(128), 1.0))
    record(db, ok(variant(128), 2.0), params={"n": 8192})
    record(db, ok(variant(128), 3.0), spec="kernels/mm.c", function="mm")
    a100 = dataclasses.replace(ENV, gpu_name="NVIDIA A100-SXM4-40GB", compute_capability="8.0")
    record(db, Measurement(variant(64), "crash", reason="SIGSEGV"), env=a100)
    record(db, ok(variant(256), 0.5))  # joins run 1: numbers stay
    runs = db.runs()
    assert [(r.number, r.spec, r.params["n"], r.best_ms) for r in runs] == [
        (1, "kernels/mv.c", 4096, 0.5), (2, "kernels/mv.c", 8192, 2.0),
        (3, "kernels/mm.c", 4096, 3.0), (4, "kernels/mv.c", 4096, None)]
    assert runs[3].failed == 1 and runs[3].best_variant is None
    assert [r.number for r in db.runs(spec="mv.c")] == [1, 2, 4]
    assert [r.number for r in db.runs(spec="kernels/mm.c", function="mm")] == [3]
    assert [r.number for r in db.runs(spec="v.c")] == []  # path parts, not substrings
    assert [r.number for r in db.runs(params={"n": 8192})] == [2]
    assert [r.number for r in db.runs(gpu="a100")] == [4]
    assert [r.number for r in db.runs(number=3)] == [3]
    assert len(db.rows(spec="mv.c", gpu="H100")) == 3


def test_export_csv_and_json(db):
    record(db, ok(variant(128), 1.25))
    record(db, Measurement(variant(256), "wrong", reason="C[3] differs", check="bad"),
           params={"n": 8192})
    out = io.StringIO()
    assert db.export("json", out) == 2
    data = json.loads(out.getvalue())
    assert [list(d) for d in data] == [list(EXPORT_COLUMNS)] * 2
    assert data[0]["variant"] == json.loads(variant(128)) and data[0]["time_ms"] == 1.25
    assert data[0]["times_ms"] == [1.25 * 0.99, 1.25, 1.25 * 1.02]
    assert data[0]["gpu_name"] == ENV.gpu_name and data[0]["extra"] == {"registers": 40}
    assert (data[1]["status"], data[1]["time_ms"], data[1]["reason"]) == (
        "wrong", None, "C[3] differs")
    out = io.StringIO()
    assert db.export("csv", out, params={"n": 8192}) == 1
    (row,) = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert tuple(row) == EXPORT_COLUMNS
    assert row["status"] == "wrong" and row["time_ms"] == "" and row["params"] == '{"n":8192}'
    assert json.loads(row["variant"]) == json.loads(variant(256))
    with pytest.raises(PolygpuError, match="xml"):
        db.export("xml", io.StringIO())


def test_bad_records_are_refused_before_they_are_stored(db):
    with pytest.raises(ValueError, match="JSON object"):
        record(db, Measurement("tile 4x128", "crash"))
    with pytest.raises(ValueError, match="integer"):
        record(db, ok(variant(128), 1.0), params={"n": 4096.0})
    with pytest.raises(ValueError, match="finite"):
        record(db, ok(variant(128), float("nan")))
    assert db.count() == 0


def test_garbage_file_is_a_clear_error(tmp_path):
    path = tmp_path / "tuning.sqlite"
    path.write_bytes(b"certainly not SQLite\n" * 200)
    with pytest.raises(PolygpuError) as err:
        TuningDatabase(path)
    assert str(path) in str(err.value) and "move the file away" in str(err.value)
    assert len(str(err.value).splitlines()) == 1


def test_damaged_pages_are_a_clear_error(tmp_path):
    path = tmp_path / "tuning.sqlite"
    with TuningDatabase(path) as db:
        for i in range(300):
            record(db, Measurement(variant(i + 1), "crash", reason="x" * 200))
    size = path.stat().st_size
    assert size > 16384  # closed cleanly: everything is in the main file
    with open(path, "r+b") as f:
        f.seek(8192)
        f.write(b"\xa5" * (size - 8192))
    with pytest.raises(PolygpuError, match="tuning database") as err:
        with TuningDatabase(path) as db:
            db.runs()
    assert str(path) in str(err.value)


def test_foreign_and_newer_databases_are_refused(tmp_path):
    foreign = tmp_path / "other.sqlite"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE songs (title TEXT)")
    with pytest.raises(PolygpuError, match="not a polygpu tuning database"):
        TuningDatabase(foreign)
    newer = tmp_path / "newer.sqlite"
    TuningDatabase(newer).close()
    with sqlite3.connect(newer) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                     (str(SCHEMA_VERSION + 1),))
    with pytest.raises(PolygpuError, match="newer polygpu"):
        TuningDatabase(newer)


def test_default_path(monkeypatch, tmp_path):
    monkeypatch.setenv("POLYGPU_TUNING_DB", str(tmp_path / "x.db"))
    assert default_path() == tmp_path / "x.db"
    monkeypatch.delenv("POLYGPU_TUNING_DB")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert default_path() == tmp_path / "cache" / "polygpu" / "tuning.sqlite"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    assert default_path() == Path.home() / ".cache" / "polygpu" / "tuning.sqlite"


# -- a killed writer ---------------------------------------------------------------------

WRITER = textwrap.dedent("""
    import sys
    from polygpu.search.database import TuningDatabase
    from polygpu.search.measurement import Environment, Measurement, canonical
    env = Environment("NVIDIA H100 80GB HBM3", "9.0", "13.0", "580.65", "0.1.0")
    start, stop = int(sys.argv[2]), int(sys.argv[3])
    db = TuningDatabase(sys.argv[1])
    for i in range(start, stop):
        key = canonical({"tile": [4, i + 1], "threads": [4, 1]})
        db.record(spec="kernels/mv.c", function="mv", source_hash="h", params={"n": 64},
                  env=env, m=Measurement(key, "ok", float(i + 1), (float(i + 1),)))
        print(i, flush=True)
    """)


def writer(path: Path, start: int, stop: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(start), str(stop)],
                            stdout=subprocess.PIPE, text=True, env=env)


def test_a_killed_writer_loses_nothing_it_committed_and_a_new_one_resumes(tmp_path):
    path = tmp_path / "tuning.sqlite"
    n = 40
    child = writer(path, 0, 1_000_000)  # never finishes by itself
    watchdog = threading.Timer(60, child.kill)  # a stuck child fails the test, not hangs it
    watchdog.start()
    try:
        printed = [int(child.stdout.readline()) for _ in range(n)]
        child.send_signal(signal.SIGKILL)  # mid-insert, most likely
    finally:
        watchdog.cancel()
        child.kill()
        child.wait(timeout=30)
        child.stdout.close()
    assert printed == list(range(n))
    assert child.returncode == -signal.SIGKILL
    # the commits sit in the write-ahead log: this exercises recovery from it
    assert Path(str(path) + "-wal").exists()

    with TuningDatabase(path) as db:
        assert db.count() >= n
        found = db.lookup("h", "mv", {"n": 64}, Environment(
            "NVIDIA H100 80GB HBM3", "9.0", "13.0", "580.65", "0.1.0"))
        for i in range(n):  # every row the writer reported is there, whole
            m = found[canonical({"tile": [4, i + 1], "threads": [4, 1]})]
            assert (m.status, m.time_ms, m.times_ms) == ("ok", float(i + 1), (float(i + 1),))
        done = db.count()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"

    resumed = writer(path, done, done + 5)  # a second run picks up where it stopped
    out, _ = resumed.communicate(timeout=60)
    assert resumed.returncode == 0 and out.split() == [str(i) for i in range(done, done + 5)]
    with TuningDatabase(path) as db:
        (run,) = db.runs()
        assert run.measurements == run.variants == run.ok == done + 5
        assert [r.measurement.time_ms for r in db.records()] == [
            float(i + 1) for i in range(done + 5)]


# -- polygpu db ----------------------------------------------------------------------------

def polygpu_db(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="polygpu")
    db_cli.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["db", *argv])
    return args.run(args)


@pytest.fixture
def filled(tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")  # rich: one line per row
    path = tmp_path / "tuning.sqlite"
    with TuningDatabase(path) as db:
        record(db, ok(variant(128), 2.5))
        record(db, Measurement(variant(512, 1024), "compile-error",
                               reason="ptxas error: [entry] uses too much shared data\nmore"))
        record(db, ok(variant(256), 1.125))
        record(db, ok(variant(128), 9.0), params={"n": 8192})
    return path


def test_db_list(filled, capsys):
    assert polygpu_db("list", "--db", str(filled)) == 0
    lines = capsys.readouterr().out.splitlines()
    (run1,) = [line for line in lines if "n=4096" in line]
    assert "kernels/mv.c:mv" in run1 and "NVIDIA H100 80GB HBM3 (sm_90)" in run1
    assert " 3 " in run1 and " 2 " in run1 and " 1 " in run1  # measured, ok, failed
    assert "1.125" in run1 and "tile=4,256 threads=4,32" in run1
    assert any("n=8192" in line and " 9 " in line for line in lines)
    assert polygpu_db("--db", str(filled), "list", "--gpu", "A100") == 0
    assert "no tuning runs matching the filters" in capsys.readouterr().out


def test_db_show_sorts_by_time_with_failures_last(filled, capsys):
    assert polygpu_db("show", "--db", str(filled), "-p", "n=4096") == 0
    lines = capsys.readouterr().out.splitlines()
    assert "run 1: kernels/mv.c:mv" in lines[0] and "n=4096" in lines[0]
    rows = [line for line in lines if "threads=" in line]
    assert ["1.125" in rows[0], "2.5" in rows[1], "compile-error" in rows[2]] == [True] * 3
    assert "ptxas error: [entry] uses too much shared data" in rows[2]
    assert "more" not in rows[2]  # the first line of the reason only
    assert polygpu_db("show", "--db", str(filled), "2") == 0
    assert "9" in capsys.readouterr().out
    with pytest.raises(PolygpuError, match=r"2 tuning runs match \(numbers 1, 2\)"):
        polygpu_db("show", "--db", str(filled), "--spec", "mv.c")
    with pytest.raises(PolygpuError, match="no tuning run matches"):
        polygpu_db("show", "--db", str(filled), "7")
    with pytest.raises(PolygpuError, match="no tuning database"):
        polygpu_db("show", "--db", str(filled.parent / "missing.sqlite"), "1")
    assert not (filled.parent / "missing.sqlite").exists()  # looking creates nothing


def test_db_export(filled, tmp_path, capsys):
    out = tmp_path / "all.json"
    assert polygpu_db("export", "--db", str(filled), "--format", "json", "-o", str(out)) == 0
    assert "wrote 4 measurements" in capsys.readouterr().out
    assert [d["status"] for d in json.loads(out.read_text())] == [
        "ok", "compile-error", "ok", "ok"]
    assert polygpu_db("export", "--db", str(filled), "-p", "n=8192") == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["params"], r["time_ms"]) for r in rows] == [('{"n":8192}', "9.0")]
    with pytest.raises(PolygpuError, match="NAME=INTEGER"):
        polygpu_db("export", "--db", str(filled), "-p", "n")


def test_db_export_kernel_times(filled, tmp_path, capsys):
    from polygpu.search.database import KernelTime, plan_identity

    # the file has no kernel_times table yet: no rows, and the file is left as it was
    assert polygpu_db("export", "--db", str(filled), "--kernel-times") == 0
    assert capsys.readouterr().out.splitlines() == [",".join(db_cli.KERNEL_EXPORT_COLUMNS)]
    plan = plan_identity(1, ["S0", "S1"])
    times = [KernelTime(plan, 0, variant(32), 0.5), KernelTime(plan, 1, variant(64), 1.5)]
    with TuningDatabase(filled) as db:
        (row, *_) = [r.id for r in db.records()]
        db.record_kernel_times(spec="kernels/mv.c", function="mv", source_hash=SRC,
                               params={"n": 4096}, env=ENV, program=variant(128),
                               times=times, measurement=row)
        db.record_kernel_times(spec="kernels/mv.c", function="mv", source_hash=SRC,
                               params={"n": 8192}, env=ENV, program=variant(256),
                               times=times[:1])
    out = tmp_path / "kernels.json"
    assert polygpu_db("export", "--db", str(filled), "--kernel-times", "--format", "json",
                      "-o", str(out)) == 0
    assert "wrote 3 kernel times" in capsys.readouterr().out
    rows = json.loads(out.read_text())
    assert [tuple(r) for r in rows] == [db_cli.KERNEL_EXPORT_COLUMNS] * 3
    assert [(r["kernel"], r["time_ms"], r["measurement"], r["params"]) for r in rows] == [
        (0, 0.5, row, {"n": 4096}), (1, 1.5, row, {"n": 4096}), (0, 0.5, None, {"n": 8192})]
    assert rows[0]["plan"] == {"candidate": 1, "statements": ["S0", "S1"]}
    assert rows[1]["variant"] == json.loads(variant(64))
    assert rows[0]["program"] == json.loads(variant(128))
    assert rows[0]["gpu_name"] == ENV.gpu_name and rows[0]["spec"] == "kernels/mv.c"
    # CSV, the filters choosing runs as for the measurements
    assert polygpu_db("export", "--db", str(filled), "--kernel-times", "-p", "n=8192") == 0
    (only,) = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert (only["kernel"], only["time_ms"], only["measurement"], only["plan"],
            only["variant"]) == ("0", "0.5", "", plan, variant(32))
    with pytest.raises(PolygpuError, match="--latest does not apply"):
        polygpu_db("export", "--db", str(filled), "--kernel-times", "--latest")
    # the measurements' export is unchanged
    assert polygpu_db("export", "--db", str(filled), "--format", "json") == 0
    assert len(json.loads(capsys.readouterr().out)) == 4
