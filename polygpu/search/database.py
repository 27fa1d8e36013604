"""The tuning database: every measurement the search takes, kept so that no time is
taken twice.

One SQLite file (:func:`default_path`, overridable) holds one row per measurement, keyed
by what can change a time: the kernel's source hash, the function, the parameter
values, the variant, and the :class:`~polygpu.search.measurement.Environment` (GPU name
and compute capability, CUDA and driver versions, polygpu version).  A lookup matches
the whole key, so a time taken on another GPU, toolkit, driver or polygpu version, or
for an edited kernel, is never reused.

Measurements take seconds each and a search may be killed at any point (Ctrl-C, a
crashing driver, a CI timeout), so each one is committed the moment it arrives: the
file is in WAL mode with ``synchronous=FULL`` and every :meth:`TuningDatabase.record` is
its own transaction.  A committed row then survives the writer being killed (and even a
power loss); at worst the measurement in flight is lost, and a rerun measures only that.

A *run* (:meth:`TuningDatabase.runs`) is everything under one lookup key but the
variant: the measurements a search of that kernel, parameters and environment reuses.
Runs are numbered by their first measurement, so the numbers ``polygpu db list`` prints
stay valid as more is recorded.  Rows are never updated: measuring a variant again (a
retried timeout, say) appends a row, and the most recent one is what counts.

**Kernel times** (table ``kernel_times``): a program of several kernels timed with its
launches broken down (``Measurement.launch_ms``, the ``per-kernel`` strategy) also leaves
one row per kernel, keyed by the run's key (source, function, parameters, environment),
the *plan* (:func:`plan_identity`: the scheduler candidate and the kernel's statements),
the kernel's index and the kernel's own merged variant (``Variant.for_kernel``) -- not
the whole program's: a kernel's time does not depend on how the other kernels are tiled,
so a time taken beside one set of neighbours serves every program of that plan with the
same kernel variant.  :meth:`TuningDatabase.kernel_times` returns every row of a run's
key, so the search can take the median of a kernel variant measured beside many
neighbours.  The table is created by the first write to it: a file written before it
existed is read as having no kernel times, and a polygpu that does not know the table
ignores it (so the schema version stays 1).
"""

from __future__ import annotations

import csv
import json
import math
import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from polygpu.errors import PolygpuError
from polygpu.search.measurement import Environment, Measurement, canonical

SCHEMA_VERSION = 1
BUSY_TIMEOUT_S = 30.0  # another tuner's commit takes milliseconds; a stuck one, forever

ENV_COLUMNS = ("gpu_name", "compute_capability", "cuda_version", "driver_version",
               "polygpu_version")
# the lookup key without the variant: one tuning run
RUN_COLUMNS = ("source_hash", "function", "params", *ENV_COLUMNS)
# the export's columns, in order (also the JSON export's keys)
EXPORT_COLUMNS = ("id", "created", "spec", "function", "source_hash", "params", "variant",
                  *ENV_COLUMNS, "status", "time_ms", "times_ms", "reason", "check", "extra")

_SCHEMA = f"""
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE measurements (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created TEXT NOT NULL,
    source_hash TEXT NOT NULL,
    function TEXT NOT NULL,
    spec TEXT NOT NULL,
    params TEXT NOT NULL,
    variant TEXT NOT NULL,
    gpu_name TEXT NOT NULL,
    compute_capability TEXT NOT NULL,
    cuda_version TEXT NOT NULL,
    driver_version TEXT NOT NULL,
    polygpu_version TEXT NOT NULL,
    status TEXT NOT NULL,
    time_ms REAL,
    times_ms TEXT NOT NULL,
    reason TEXT NOT NULL,
    "check" TEXT NOT NULL,
    extra TEXT NOT NULL
);
CREATE INDEX measurements_key ON measurements ({", ".join(RUN_COLUMNS)}, variant);
"""

# created on the first write to it (older files have no such table; see the docstring)
_KERNEL_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS kernel_times (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created TEXT NOT NULL,
    source_hash TEXT NOT NULL,
    function TEXT NOT NULL,
    spec TEXT NOT NULL,
    params TEXT NOT NULL,
    gpu_name TEXT NOT NULL,
    compute_capability TEXT NOT NULL,
    cuda_version TEXT NOT NULL,
    driver_version TEXT NOT NULL,
    polygpu_version TEXT NOT NULL,
    plan TEXT NOT NULL,
    kernel INTEGER NOT NULL,
    variant TEXT NOT NULL,
    time_ms REAL NOT NULL,
    program TEXT NOT NULL,
    measurement INTEGER
);
CREATE INDEX IF NOT EXISTS kernel_times_key ON kernel_times
    ({", ".join(RUN_COLUMNS)}, plan, kernel, variant);
"""


def plan_identity(candidate: int, statements) -> str:
    """What identifies a kernel's plan in the kernel-times table: the scheduler
    candidate and the statements of the kernel (canonical JSON)."""
    return canonical({"candidate": int(candidate), "statements": [str(s) for s in statements]})


@dataclass(frozen=True)
class KernelTime:
    """One kernel's time in one timed program: ``plan`` (:func:`plan_identity`),
    ``kernel`` (its index in the plan), ``variant`` (its merged variant, canonical
    JSON), ``time_ms`` (the median of its launches' milliseconds per run)."""

    plan: str
    kernel: int
    variant: str
    time_ms: float

    @property
    def key(self) -> tuple[str, int, str]:
        return (self.plan, self.kernel, self.variant)


def default_path() -> Path:
    """``$POLYGPU_TUNING_DB`` if set, else ``$XDG_CACHE_HOME/polygpu/tuning.sqlite``
    (``~/.cache`` without XDG_CACHE_HOME): a cache, since every row can be measured
    again.  The directories are created when the database is opened."""
    explicit = os.environ.get("POLYGPU_TUNING_DB")
    if explicit:
        return Path(explicit).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME", "")
    # the XDG spec says to ignore a relative XDG_CACHE_HOME
    base = Path(cache) if os.path.isabs(cache) else Path.home() / ".cache"
    return base / "polygpu" / "tuning.sqlite"


@dataclass(frozen=True)
class Record:
    """One row: a measurement with its key."""

    id: int
    created: str  # UTC, ISO 8601
    spec: str
    function: str
    source_hash: str
    params: dict[str, int]
    env: Environment
    measurement: Measurement

    def to_json(self) -> dict:
        """A flat object with :data:`EXPORT_COLUMNS` as keys (JSON columns decoded)."""
        m = self.measurement
        return {"id": self.id, "created": self.created, "spec": self.spec,
                "function": self.function, "source_hash": self.source_hash,
                "params": self.params, "variant": json.loads(m.key), **self.env.to_json(),
                "status": m.status, "time_ms": m.time_ms, "times_ms": list(m.times_ms),
                "reason": m.reason, "check": m.check, "extra": dict(m.extra)}


@dataclass(frozen=True)
class Run:
    """Summary of one tuning run (see the module docstring).  The counts are of the
    latest measurement of each variant; ``measurements`` counts every row, retries
    included.  ``spec`` is the most recent name the kernel was tuned under (the source
    hash, not the name, is the key)."""

    number: int
    source_hash: str
    function: str
    spec: str
    params: dict[str, int]
    env: Environment
    measurements: int
    variants: int
    ok: int
    failed: int
    best_ms: float | None
    best_variant: str | None  # canonical JSON, like Measurement.key
    first: str
    last: str

    @property
    def key(self) -> tuple[str, ...]:
        """The values of :data:`RUN_COLUMNS`: this run's rows in the table."""
        return (self.source_hash, self.function, canonical(self.params),
                *(getattr(self.env, c) for c in ENV_COLUMNS))


class TuningDatabase:
    """The tuning database at ``path`` (created if missing), as a context manager.

    Safe to share between threads, and between processes: several tuners may write to
    one file at once (SQLite serialises the commits).  Every problem with the file
    (unreadable, corrupt, locked for too long, written by a newer polygpu) is a
    :class:`PolygpuError` naming the file and what to do.
    """

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path) if path is not None else default_path()
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise PolygpuError(f"{self.path}: cannot create the tuning database's "
                               f"directory: {err.strerror or err}") from None
        # isolation_level=None: no implicit transactions, so each INSERT commits at once
        try:
            self._conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S,
                                         isolation_level=None, check_same_thread=False)
        except sqlite3.Error as err:
            raise self._error(err) from None
        self._conn.row_factory = sqlite3.Row
        try:
            with self._guard():
                self._setup()
        except BaseException:
            self.close()
            raise

    def _setup(self) -> None:
        conn = self._conn
        conn.execute("PRAGMA journal_mode=WAL")  # reads never wait for a writer
        conn.execute("PRAGMA synchronous=FULL")  # a commit is on disk when it returns
        if not self._tables():
            # two tuners may create the file at once: the write lock decides who
            conn.execute("BEGIN IMMEDIATE")
            try:
                if not self._tables():
                    for statement in filter(str.strip, _SCHEMA.split(";")):
                        conn.execute(statement)
                    conn.executemany("INSERT INTO meta VALUES (?, ?)", [
                        ("schema_version", str(SCHEMA_VERSION)), ("created", _now())])
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        tables = self._tables()
        if not {"meta", "measurements"} <= tables:
            raise PolygpuError(f"{self.path}: not a polygpu tuning database (tables: "
                               f"{', '.join(sorted(tables))}); choose another file with "
                               "--db or POLYGPU_TUNING_DB")
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        try:
            version = int(row[0])
        except (TypeError, ValueError):
            raise PolygpuError(f"{self.path}: the tuning database has no valid schema "
                               "version; move it away (a new one is created)") from None
        if version > SCHEMA_VERSION:
            raise PolygpuError(f"{self.path}: the tuning database has schema version "
                               f"{version}, written by a newer polygpu (this one reads "
                               f"up to {SCHEMA_VERSION}); upgrade polygpu or choose "
                               "another file with --db or POLYGPU_TUNING_DB")

    def _tables(self) -> set[str]:
        return {r[0] for r in self._conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' "
            "AND name NOT LIKE 'sqlite_%'")}

    # -- lifetime ------------------------------------------------------------------------

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> TuningDatabase:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- writing -------------------------------------------------------------------------

    def record(self, *, spec: str, function: str | None, source_hash: str,
               params: Mapping[str, int], env: Environment, m: Measurement) -> int:
        """Store one measurement and commit it before returning; returns the row id.

        ``m.key`` is the variant as canonical JSON; ``spec`` only names the kernel for
        display.  Raises ValueError for a record that could not be read back (a key that
        is not a JSON object, non-integer parameters, a non-finite time).
        """
        try:
            variant = json.loads(m.key)
        except (TypeError, ValueError):
            variant = None
        if not isinstance(variant, dict):
            raise ValueError(f"measurement key is not a JSON object: {m.key!r}")
        params_text = _params_text(params)
        if m.time_ms is not None and not math.isfinite(m.time_ms):
            raise ValueError(f"time {m.time_ms} of {m.key} is not finite")
        row = (_now(), source_hash, function or "", spec, params_text, m.key,
               *(getattr(env, c) for c in ENV_COLUMNS), m.status, m.time_ms,
               json.dumps([float(t) for t in m.times_ms]), m.reason, m.check,
               _json_text(dict(m.extra)))
        with self._guard():
            cur = self._conn.execute(
                f"INSERT INTO measurements (created, source_hash, function, spec, params, "
                f"variant, {', '.join(ENV_COLUMNS)}, status, time_ms, times_ms, reason, "
                f'"check", extra) VALUES ({", ".join("?" * len(row))})', row)
        return cur.lastrowid

    def record_kernel_times(self, *, spec: str, function: str | None, source_hash: str,
                            params: Mapping[str, int], env: Environment, program: str,
                            times: list[KernelTime], measurement: int | None = None) -> None:
        """Store the kernel times of one timed program (``program``: its whole variant,
        canonical JSON; ``measurement``: its row in ``measurements``, if recorded) in
        one transaction, creating the table in a file that has none."""
        if not times:
            return
        params_text = _params_text(params)
        for t in times:
            if not math.isfinite(t.time_ms) or t.time_ms < 0:
                raise ValueError(f"kernel {t.kernel}: time {t.time_ms} is not a time")
            for text in (t.plan, t.variant):
                if not isinstance(json.loads(text), dict):
                    raise ValueError(f"kernel {t.kernel}: {text!r} is not a JSON object")
        created = _now()
        env_values = tuple(getattr(env, c) for c in ENV_COLUMNS)
        rows = [(created, source_hash, function or "", spec, params_text, *env_values,
                 t.plan, int(t.kernel), t.variant, float(t.time_ms), program, measurement)
                for t in times]
        columns = ("created, source_hash, function, spec, params, "
                   f"{', '.join(ENV_COLUMNS)}, plan, kernel, variant, time_ms, program, "
                   "measurement")
        with self._guard():
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                for statement in filter(str.strip, _KERNEL_SCHEMA.split(";")):
                    conn.execute(statement)
                conn.executemany(f"INSERT INTO kernel_times ({columns}) VALUES "
                                 f"({', '.join('?' * len(rows[0]))})", rows)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def kernel_times(self, source_hash: str, function: str | None,
                     params: Mapping[str, int], env: Environment
                     ) -> dict[tuple[str, int, str], list[float]]:
        """Every kernel time under this run's key, oldest first, by (plan, kernel,
        kernel variant); empty for a file without the table."""
        key = (source_hash, function or "", _params_text(params),
               *(getattr(env, c) for c in ENV_COLUMNS))
        with self._guard():
            if "kernel_times" not in self._tables():
                return {}
            rows = self._conn.execute(
                f"SELECT plan, kernel, variant, time_ms FROM kernel_times {_key_where()} "
                "ORDER BY id", key).fetchall()
        found: dict[tuple[str, int, str], list[float]] = {}
        for r in rows:
            found.setdefault((r["plan"], int(r["kernel"]), r["variant"]), []).append(
                float(r["time_ms"]))
        return found

    def kernel_count(self) -> int:
        """Rows of the kernel-times table (0 without one)."""
        with self._guard():
            if "kernel_times" not in self._tables():
                return 0
            return self._conn.execute("SELECT COUNT(*) FROM kernel_times").fetchone()[0]

    # -- reading -------------------------------------------------------------------------

    def lookup(self, source_hash: str, function: str | None, params: Mapping[str, int],
               env: Environment) -> dict[str, Measurement]:
        """The latest measurement of each variant under this exact key, by variant key
        (``Measurement.key``).  Failures are returned too: whether to measure a
        timed-out or crashed candidate again is the search's decision."""
        key = (source_hash, function or "", _params_text(params),
               *(getattr(env, c) for c in ENV_COLUMNS))
        return {r.measurement.key: r.measurement
                for r in self._records(_latest_where(), key)}

    def runs(self, *, spec: str | None = None, function: str | None = None,
             params: Mapping[str, int] | None = None, gpu: str | None = None,
             number: int | None = None) -> list[Run]:
        """The tuning runs, oldest first, optionally filtered: ``spec`` by path (a
        trailing part suffices: ``mv.c`` finds ``kernels/mv.c``), ``function`` exactly,
        ``params`` by the given values (others may be anything), ``gpu`` by a
        case-insensitive part of the GPU name, ``number`` as printed by ``db list``."""
        with self._guard():
            rows = self._conn.execute(
                f"SELECT id, created, spec, variant, status, time_ms, "
                f"{', '.join(RUN_COLUMNS)} FROM measurements ORDER BY id").fetchall()
        groups: dict[tuple, list[sqlite3.Row]] = {}
        for r in rows:
            groups.setdefault(tuple(r[c] for c in RUN_COLUMNS), []).append(r)
        runs = [self._run(n, rs) for n, rs in enumerate(groups.values(), start=1)]
        return [r for r in runs if _run_matches(r, spec, function, params, gpu, number)]

    def _run(self, number: int, rows: list[sqlite3.Row]) -> Run:
        latest: dict[str, sqlite3.Row] = {}
        for r in rows:  # in id order: the last one wins
            latest[r["variant"]] = r
        ok = [r for r in latest.values() if r["status"] == "ok"]
        best = min(ok, key=lambda r: (r["time_ms"], r["id"])) if ok else None
        first = rows[0]
        return Run(number=number, source_hash=first["source_hash"],
                   function=first["function"], spec=rows[-1]["spec"],
                   params=self._decode(first["params"], first["id"]),
                   env=Environment(**{c: first[c] for c in ENV_COLUMNS}),
                   measurements=len(rows), variants=len(latest), ok=len(ok),
                   failed=len(latest) - len(ok),
                   best_ms=best["time_ms"] if best else None,
                   best_variant=best["variant"] if best else None,
                   first=first["created"], last=rows[-1]["created"])

    def records(self, run: Run | None = None, *, latest: bool = False) -> list[Record]:
        """The rows of ``run`` (of every run if None) in id order; with ``latest`` only
        the most recent measurement of each variant."""
        if run is None:
            where, args = ("WHERE id IN (SELECT MAX(id) FROM measurements GROUP BY "
                           f"{', '.join(RUN_COLUMNS)}, variant)" if latest else ""), ()
        else:
            where, args = (_latest_where() if latest else _key_where()), run.key
        return self._records(where, args)

    def rows(self, *, latest: bool = False, **filters) -> list[Record]:
        """The rows of the runs :meth:`runs` selects with ``filters``, in id order."""
        if not any(v is not None for v in filters.values()):
            return self.records(latest=latest)
        found = [r for run in self.runs(**filters) for r in self.records(run, latest=latest)]
        return sorted(found, key=lambda r: r.id)

    def export(self, fmt: str, out: IO[str], *, latest: bool = False, **filters) -> int:
        """Write the rows :meth:`rows` selects to ``out`` as ``"csv"`` or ``"json"``;
        returns how many."""
        records = self.rows(latest=latest, **filters)
        write_export(records, fmt, out)
        return len(records)

    def count(self) -> int:
        with self._guard():
            return self._conn.execute("SELECT COUNT(*) FROM measurements").fetchone()[0]

    def _records(self, where: str, args: tuple) -> list[Record]:
        with self._guard():
            rows = self._conn.execute(
                f"SELECT * FROM measurements {where} ORDER BY id", args).fetchall()
        return [self._record(r) for r in rows]

    def _record(self, r: sqlite3.Row) -> Record:
        try:
            m = Measurement(key=r["variant"], status=r["status"], time_ms=r["time_ms"],
                            times_ms=tuple(self._decode(r["times_ms"], r["id"])),
                            reason=r["reason"], check=r["check"],
                            extra=self._decode(r["extra"], r["id"]))
        except ValueError as err:
            raise self._damaged(r["id"], err) from None
        return Record(id=r["id"], created=r["created"], spec=r["spec"],
                      function=r["function"], source_hash=r["source_hash"],
                      params=self._decode(r["params"], r["id"]),
                      env=Environment(**{c: r[c] for c in ENV_COLUMNS}), measurement=m)

    def _decode(self, text: str, row_id: int):
        try:
            return json.loads(text)
        except (TypeError, ValueError) as err:
            raise self._damaged(row_id, err) from None

    # -- errors --------------------------------------------------------------------------

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """Serialise use of the connection and turn SQLite's complaints about the file
        into a PolygpuError (misuse of the API stays a bug)."""
        if self._conn is None:
            raise ValueError(f"{self.path}: the tuning database is closed")
        with self._lock:
            try:
                yield
            except (sqlite3.ProgrammingError, sqlite3.IntegrityError):
                raise
            except sqlite3.Error as err:
                raise self._error(err) from None

    def _error(self, err: sqlite3.Error) -> PolygpuError:
        text = str(err)
        if "locked" in text or "busy" in text:
            return PolygpuError(f"{self.path}: the tuning database is locked by another "
                                f"process ({text}); wait for it, or choose another file "
                                "with --db or POLYGPU_TUNING_DB")
        return PolygpuError(f"{self.path}: cannot use the tuning database ({text}); move "
                            "the file away (a new one is created) or choose another with "
                            "--db or POLYGPU_TUNING_DB")

    def _damaged(self, row_id: int, err: Exception) -> PolygpuError:
        return PolygpuError(f"{self.path}: row {row_id} of the tuning database is damaged "
                            f"({err}); move the file away (a new one is created)")


def write_export(records: list[Record], fmt: str, out: IO[str]) -> None:
    """Write ``records`` as CSV (:data:`EXPORT_COLUMNS`, JSON-valued columns as canonical
    JSON text, no time as an empty cell) or as a JSON list of :meth:`Record.to_json`."""
    if fmt == "json":
        json.dump([r.to_json() for r in records], out, indent=2)
        out.write("\n")
    elif fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(EXPORT_COLUMNS)
        for r in records:
            data = r.to_json()
            writer.writerow(
                "" if data[c] is None else
                canonical(data[c]) if isinstance(data[c], dict) else
                json.dumps(data[c]) if isinstance(data[c], list) else data[c]
                for c in EXPORT_COLUMNS)
    else:
        raise PolygpuError(f"export format {fmt!r}: expected csv or json")


def _key_where() -> str:
    return "WHERE " + " AND ".join(f"{c} = ?" for c in RUN_COLUMNS)


def _latest_where() -> str:
    return (f"WHERE id IN (SELECT MAX(id) FROM measurements {_key_where()} "
            "GROUP BY variant)")


def _run_matches(run: Run, spec, function, params, gpu, number) -> bool:
    return ((number is None or run.number == number)
            and (function is None or run.function == function)
            and (gpu is None or gpu.lower() in run.env.gpu_name.lower())
            and (params is None or all(run.params.get(k) == v for k, v in params.items()))
            and (spec is None or _spec_matches(run.spec, spec)))


def _spec_matches(stored: str, wanted: str) -> bool:
    """Whether ``wanted`` names the kernel ``stored``: equal paths, or a trailing part of
    it, with or without a ``:FUNCTION`` suffix."""
    def norm(s: str) -> str:
        return os.path.normpath(s).replace(os.sep, "/")

    wanted = norm(wanted)
    names = {norm(stored), norm(stored.rsplit(":", 1)[0])}
    return any(n == wanted or n.endswith("/" + wanted) for n in names)


def _params_text(params: Mapping[str, int]) -> str:
    for name, value in params.items():
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"parameter {name}={value!r} is not an integer")
    return canonical(dict(params))


def _json_text(data: Mapping) -> str:
    # extra is free-form: store what it can say rather than lose the measurement
    return json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")
