"""``polygpu db list|show|export``: look into the tuning database.

:func:`add_parser` adds the ``db`` subcommand to the main parser.  Inspecting never
creates a database: without one, ``list`` says so, ``show`` is an error and ``export``
writes no rows.
"""

from __future__ import annotations

import argparse
import csv
import json
import sqlite3
import sys
from pathlib import Path

from polygpu.errors import PolygpuError
from polygpu.params import parse_params
from polygpu.search.database import (
    BUSY_TIMEOUT_S,
    ENV_COLUMNS,
    RUN_COLUMNS,
    Run,
    TuningDatabase,
    default_path,
    write_export,
)
from polygpu.search.measurement import canonical

REASON_WIDTH = 120  # compiler output can run to pages: the table shows its first line
# `db export --kernel-times`: the columns of the kernel_times table, in order (also the
# JSON export's keys); those holding JSON are decoded (JSON) or canonical text (CSV)
KERNEL_EXPORT_COLUMNS = ("id", "created", "spec", "function", "source_hash", "params",
                         *ENV_COLUMNS, "plan", "kernel", "variant", "time_ms", "program",
                         "measurement")
KERNEL_JSON_COLUMNS = ("params", "plan", "variant", "program")


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``db`` with its actions to ``subparsers`` (the main parser's subparsers)."""
    db = subparsers.add_parser(
        "db",
        help="inspect the tuning database",
        description="Inspect the tuning database, where 'polygpu tune' stores every "
        "measurement (one row each, keyed by kernel source, function, parameters, "
        "variant, GPU, CUDA, driver and polygpu version) and from which it reuses them. "
        "A tuning run is everything under one key but the variant.",
    )
    _add_db_argument(db, None)
    actions = db.add_subparsers(dest="db_command", required=True, metavar="ACTION")

    list_ = actions.add_parser("list", help="one line per tuning run",
                               description="List the tuning runs, numbered for 'db show', "
                               "with how many variants were measured, how many passed "
                               "and failed, and the best time and variant.")
    _add_common(list_)
    _add_filters(list_)
    list_.set_defaults(run=_run_list)

    show = actions.add_parser("show", help="the measurements of one tuning run",
                              description="Show the measurements of one tuning run, "
                              "fastest first and failures last with their reason.  "
                              "Choose the run by its number from 'db list' or by filters "
                              "that match only it.")
    _add_common(show)
    show.add_argument("number", nargs="?", type=int, metavar="RUN",
                      help="the run's number as printed by 'db list'")
    _add_filters(show)
    show.add_argument("--all", action="store_true",
                      help="also show measurements superseded by a later one of the same "
                      "variant")
    show.set_defaults(run=_run_show)

    export = actions.add_parser("export", help="write the measurements as CSV or JSON",
                                description="Write every measurement (or those of the "
                                "runs chosen by number or filters) as CSV or as a JSON "
                                "list of objects, one per row; with --kernel-times the "
                                "kernel times instead (table kernel_times: one row per "
                                "kernel of a program timed with its launches broken "
                                "down, as the per-kernel strategy does).")
    _add_common(export)
    export.add_argument("number", nargs="?", type=int, metavar="RUN",
                        help="only this run (its number from 'db list')")
    _add_filters(export)
    export.add_argument("--format", choices=("csv", "json"), default="csv",
                        help="output format (default: csv)")
    export.add_argument("-o", "--output", metavar="FILE",
                        help="write to FILE instead of standard output")
    export.add_argument("--latest", action="store_true",
                        help="only the latest measurement of each variant")
    export.add_argument("--kernel-times", action="store_true",
                        help="export the kernel times (plan, kernel, the kernel's "
                        "variant, milliseconds, the whole program's variant and its "
                        "measurement's id) instead of the measurements")
    export.set_defaults(run=_run_export)
    return db


def _add_db_argument(p: argparse.ArgumentParser, default) -> None:
    p.add_argument("--db", metavar="PATH", default=default,
                   help="the database file (default: $POLYGPU_TUNING_DB, else "
                   "$XDG_CACHE_HOME/polygpu/tuning.sqlite, else "
                   "~/.cache/polygpu/tuning.sqlite)")


def _add_common(p: argparse.ArgumentParser) -> None:
    # SUPPRESS: accepted before and after the action without one overwriting the other
    _add_db_argument(p, argparse.SUPPRESS)
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                   help="show the full traceback of errors")


def _add_filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("--spec", metavar="FILE",
                   help="only runs of this kernel file (a trailing part of the path "
                   "suffices)")
    p.add_argument("--function", "-f", metavar="NAME", help="only runs of this function")
    p.add_argument("-p", "--param", dest="params", action="append", default=[],
                   metavar="NAME=VALUE", help="only runs at this parameter value "
                   "(repeatable)")
    p.add_argument("--gpu", metavar="TEXT",
                   help="only runs on a GPU whose name contains TEXT, e.g. H100")


def _path(args: argparse.Namespace) -> Path:
    return Path(args.db).expanduser() if getattr(args, "db", None) else default_path()


def _filters(args: argparse.Namespace) -> dict:
    params = parse_params(args.params, integers=True)
    return {"spec": args.spec, "function": args.function, "params": params or None,
            "gpu": args.gpu, "number": getattr(args, "number", None)}


def _run_list(args: argparse.Namespace) -> int:
    path = _path(args)
    filters = _filters(args)
    if not path.exists():
        print(f"no tuning database at {path} yet ('polygpu tune' creates it)")
        return 0
    with TuningDatabase(path) as db:
        runs = db.runs(**filters)
    if not runs:
        matching = " matching the filters" if any(filters.values()) else ""
        print(f"no tuning runs{matching} in {path}")
        return 0
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"Tuning runs in {path}", title_justify="left")
    for col, justify in (("#", "right"), ("kernel", "left"), ("params", "left"),
                         ("GPU", "left"), ("cuda/driver/polygpu", "left"),
                         ("measured", "right"), ("ok", "right"), ("failed", "right"),
                         ("best ms", "right"), ("best variant", "left")):
        table.add_column(col, justify=justify)
    for run in runs:
        table.add_row(str(run.number), Text(_kernel(run)), Text(_params(run.params)),
                      Text(_gpu(run)), Text(_versions(run)), str(run.variants),
                      str(run.ok), str(run.failed), _ms(run.best_ms),
                      Text(_variant(run.best_variant) if run.best_variant else "-"))
    Console().print(table)
    return 0


def _run_show(args: argparse.Namespace) -> int:
    path = _path(args)
    filters = _filters(args)
    if not path.exists():
        raise PolygpuError(f"{path}: no tuning database here yet ('polygpu tune' "
                           "creates it)")
    with TuningDatabase(path) as db:
        run = _one_run(db, filters)
        records = db.records(run, latest=not args.all)
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    def order(r):
        m = r.measurement
        return (m.status != "ok", m.time_ms if m.time_ms is not None else 0.0, m.status,
                r.id)

    console = Console()
    console.print(Text(f"run {run.number}: {_kernel(run)}  {_params(run.params)}  "
                       f"{_gpu(run)}  CUDA {run.env.cuda_version or '-'}  driver "
                       f"{run.env.driver_version or '-'}  polygpu "
                       f"{run.env.polygpu_version}  source sha256 {run.source_hash[:12]}  "
                       f"{run.first} .. {run.last}"))
    table = Table()
    for col, justify in (("rank", "right"), ("variant", "left"), ("status", "left"),
                         ("ms", "right"), ("min..max ms", "right"), ("reason", "left")):
        table.add_column(col, justify=justify)
    for rank, r in enumerate(sorted(records, key=order), start=1):
        m = r.measurement
        spread = (f"{_ms(min(m.times_ms))}..{_ms(max(m.times_ms))}"
                  if m.times_ms else "-")
        reason = (m.reason.strip().splitlines() or [""])[0][:REASON_WIDTH]
        table.add_row(str(rank) if m.status == "ok" else "-", Text(_variant(m.key)),
                      m.status, _ms(m.time_ms), spread if m.status == "ok" else "-",
                      Text(reason))
    console.print(table)
    return 0


def _run_export(args: argparse.Namespace) -> int:
    path = _path(args)
    filters = _filters(args)
    if args.kernel_times:
        if args.latest:
            raise PolygpuError("db export --kernel-times: --latest does not apply (every "
                               "kernel time is a sample; the search takes their median)")
        noun = "kernel time"
        rows = _kernel_rows(path, filters) if path.exists() else []

        def write(out):
            _write_kernel_rows(rows, args.format, out)
    else:
        noun = "measurement"
        if path.exists():
            with TuningDatabase(path) as db:
                rows = db.rows(latest=args.latest, **filters)
        else:
            rows = []

        def write(out):
            write_export(rows, args.format, out)
    if args.output:
        # whole or not at all: a temporary file next to it, renamed into place
        import os
        import tempfile

        target = Path(args.output)
        if target.is_dir():
            raise PolygpuError(f"{args.output}: is a directory; give a file name")
        tmp = None
        try:
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
            mask = os.umask(0o022)
            os.umask(mask)
            os.fchmod(fd, 0o666 & ~mask)
            with os.fdopen(fd, "w", newline="", encoding="utf-8") as out:
                write(out)
            os.replace(tmp, target)
        except OSError as err:
            raise PolygpuError(f"{args.output}: cannot write: {err.strerror or err}"
                               ) from None
        finally:
            if tmp is not None and os.path.exists(tmp):
                os.unlink(tmp)
        print(f"wrote {len(rows)} {noun}{'s' * (len(rows) != 1)} to {args.output}")
    else:
        write(sys.stdout)
    return 0


def _kernel_rows(path: Path, filters: dict) -> list[dict]:
    """The rows of the kernel_times table (none in a file without it), oldest first, as
    objects with :data:`KERNEL_EXPORT_COLUMNS` (JSON columns decoded); with filters,
    those under the key of a run :meth:`TuningDatabase.runs` selects."""
    with TuningDatabase(path) as db:  # checks the file; the runs for the filters
        keys = ({run.key for run in db.runs(**filters)}
                if any(v is not None for v in filters.values()) else None)
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True,
                               timeout=BUSY_TIMEOUT_S)
        try:
            conn.row_factory = sqlite3.Row
            if not conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND "
                                "name = 'kernel_times'").fetchone():
                return []  # written before the table existed, or never per kernel
            found = conn.execute("SELECT * FROM kernel_times ORDER BY id").fetchall()
        finally:
            conn.close()
    except sqlite3.Error as err:
        raise PolygpuError(f"{path}: cannot read the kernel times of the tuning database "
                           f"({err}); move the file away (a new one is created)") from None
    rows = []
    for r in found:
        if keys is not None and tuple(r[c] for c in RUN_COLUMNS) not in keys:
            continue
        row = {}
        for c in KERNEL_EXPORT_COLUMNS:
            row[c] = r[c]
            if c in KERNEL_JSON_COLUMNS:
                try:
                    row[c] = json.loads(r[c])
                except (TypeError, ValueError) as err:
                    raise PolygpuError(f"{path}: row {r['id']} of the kernel times is "
                                       f"damaged ({err}); move the file away (a new one "
                                       "is created)") from None
        rows.append(row)
    return rows


def _write_kernel_rows(rows: list[dict], fmt: str, out) -> None:
    """Kernel times as CSV (JSON columns as canonical JSON text, no measurement as an
    empty cell) or as a JSON list of objects; like the measurements' export."""
    if fmt == "json":
        json.dump(rows, out, indent=2)
        out.write("\n")
        return
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(KERNEL_EXPORT_COLUMNS)
    for row in rows:
        writer.writerow("" if row[c] is None else canonical(row[c])
                        if c in KERNEL_JSON_COLUMNS else row[c]
                        for c in KERNEL_EXPORT_COLUMNS)


def _one_run(db: TuningDatabase, filters: dict) -> Run:
    if not any(filters.values()):
        raise PolygpuError("db show: which run? give its number from 'polygpu db list' "
                           "or filters (--spec, --function, -p, --gpu)")
    runs = db.runs(**filters)
    if not runs:
        raise PolygpuError(f"{db.path}: no tuning run matches; see 'polygpu db list'")
    if len(runs) > 1:
        numbers = ", ".join(str(r.number) for r in runs)
        raise PolygpuError(f"{db.path}: {len(runs)} tuning runs match (numbers "
                           f"{numbers}); narrow the filters or give the number")
    return runs[0]


def _kernel(run: Run) -> str:
    # a spec may already name its function (MODULE.py:FUNCTION)
    if not run.function or run.spec.endswith(":" + run.function):
        return run.spec
    return f"{run.spec}:{run.function}"


def _params(params: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items()) or "-"


def _gpu(run: Run) -> str:
    cc = run.env.compute_capability
    return f"{run.env.gpu_name} (sm_{cc.replace('.', '')})" if cc else run.env.gpu_name


def _versions(run: Run) -> str:
    env = run.env
    return f"{env.cuda_version or '-'}/{env.driver_version or '-'}/{env.polygpu_version}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _variant(key: str) -> str:
    """A variant as its fields that differ from the default variant, e.g. ``tile=8,256
    threads=8,64 jam=true``: the full JSON of ten fields drowns what was tuned."""
    from polygpu.schedule.variant import Variant

    try:
        data = json.loads(key)
        defaults = Variant().to_json()
    except ValueError:
        return key
    if not isinstance(data, dict):
        return key
    parts = []
    # in the Variant's field order (the key's order is alphabetical)
    order = {name: i for i, name in enumerate(defaults)}
    for name, value in sorted(data.items(), key=lambda kv: order.get(kv[0], len(order))):
        default = defaults.get(name)
        if isinstance(default, tuple):
            default = list(default)
        if name in defaults and value == default:
            continue
        text = (",".join(map(str, value)) if isinstance(value, list) else
                json.dumps(value) if isinstance(value, bool | None) else str(value))
        parts.append(f"{name}={text}")
    return " ".join(parts) or "default"
