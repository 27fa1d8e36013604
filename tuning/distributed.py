"""Tuning on several GPUs (issue 24, `polygpu/search/distributed.py`): the wall time of
`polygpu tune` on one GPU against the same tune on every GPU of the machine, the best
variant each found, and a run in which a worker is killed mid-tune.

Each run is the CLI as a user runs it (`python -m polygpu tune ... --budget N`), a
fresh tuning database of its own, so nothing is reused; its wall clock from start to
exit.  Configurations (`--configs`):

* ``one``: the one-GPU path (`ProcessRunner`, no Dask), GPU 0 (given twice, the second
  run finds the build cache warm: nvcc's cubins kept; the first is the baseline);
* ``dask1``: `--gpus 0` (a Dask cluster of one worker: the cluster's own cost);
* ``all``: `--gpus all`;
* ``kill``: `--gpus all`, one measuring worker killed (SIGKILL) once the database holds
  `--kill-after` rows; then the database is read: every timed candidate one row, none
  twice.

Results: one JSON line per run in `OUT/distributed_runs.jsonl`, the table in
`OUT/distributed.md` (wall time, x one GPU, best variant and its time, rows, workers).

    python tuning/distributed.py --out $OUT kernels/mm.c -p n=4096 --budget 16
    python tuning/distributed.py --out $OUT kernels/polybench/gemm.c \
        -p ni=2000 -p nj=2300 -p nk=2600 --budget 16
    python tuning/distributed.py --backend cpu kernels/mv.c -p n=200 --budget 4 \
        --check-param n=37 --configs one all kill      # dry run on the emulator
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _workers_measuring(cluster_pid: int) -> list[int]:
    """The worker processes under a local cluster's child whose own measuring child is
    alive (a worker busy with a job: `python -m polygpu.search.runner`)."""
    import psutil

    try:
        cluster = psutil.Process(cluster_pid)
    except psutil.NoSuchProcess:
        return []
    busy = []
    for worker in cluster.children(recursive=True):
        try:
            kids = worker.children()
            if any("polygpu.search.runner" in " ".join(k.cmdline()) for k in kids):
                busy.append(worker.pid)
        except psutil.Error:
            continue
    return busy


def _cluster_pid(tune_pid: int) -> int | None:
    import psutil

    try:
        for child in psutil.Process(tune_pid).children(recursive=True):
            if "--local-cluster" in " ".join(child.cmdline()):
                return child.pid
    except psutil.Error:
        return None
    return None


def _rows(db: Path) -> list[tuple]:
    if not db.exists():
        return []
    try:
        with sqlite3.connect(db, timeout=30) as conn:
            return conn.execute("SELECT variant, status, time_ms, extra FROM measurements"
                                ).fetchall()
    except sqlite3.Error:
        return []


def run(args, config: str, work: Path, index: int = 0) -> dict:
    # a configuration given twice (a second run with the build cache warm) gets a
    # database of its own too: sharing one, it would time other candidates
    out, db = work / f"{index}-{config}", work / f"{index}-{config}.sqlite"
    cmd = [sys.executable, "-m", "polygpu", "tune", args.spec, "-o", str(out), "--db", str(db),
           "--budget", str(args.budget), "--backend", args.backend, "-q", "--no-peer"]
    for p in args.params:
        cmd += ["-p", p]
    for p in args.check_params:
        cmd += ["--check-param", p]
    if config == "one":
        pass
    elif config == "dask1":
        cmd += ["--gpus", "0"]
    else:
        cmd += ["--gpus", args.gpus]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT)
    killed: list[int] = []
    if config == "kill":
        def killer():
            while proc.poll() is None and not killed:
                time.sleep(0.2)
                if len(_rows(db)) < args.kill_after:
                    continue
                cluster = _cluster_pid(proc.pid)
                busy = _workers_measuring(cluster) if cluster else []
                if busy:
                    os.kill(busy[0], signal.SIGKILL)
                    killed.append(busy[0])
        thread = threading.Thread(target=killer, daemon=True)
        thread.start()
    stdout, stderr = proc.communicate()
    wall = time.monotonic() - start
    rows = _rows(db)
    best = None
    found = sorted(out.glob("*.json")) if out.exists() else []
    if found:
        best = json.loads(found[0].read_text())
    variants = [r[0] for r in rows]
    workers = sorted({json.loads(r[3] or "{}").get("worker", "") for r in rows} - {""})
    record = {
        "config": config, "spec": args.spec, "params": args.params, "budget": args.budget,
        "backend": args.backend, "rc": proc.returncode, "wall_s": round(wall, 2),
        "rows": len(rows), "distinct_variants": len(set(variants)),
        "statuses": {s: sum(1 for r in rows if r[1] == s) for s in {r[1] for r in rows}},
        "workers": workers, "killed_pid": killed[0] if killed else None,
        "best_variant": (best or {}).get("variant"),
        "best_ms": ((best or {}).get("tuning") or {}).get("time_ms"),
        "stdout_tail": stdout[-3000:], "stderr_tail": stderr[-3000:],
    }
    print(json.dumps({k: v for k, v in record.items() if not k.endswith("_tail")}),
          flush=True)
    if proc.returncode != 0:
        print(stderr[-3000:], file=sys.stderr, flush=True)
    return record


def markdown(records: list[dict], gpu: str) -> str:
    one: dict = {}  # the first one-GPU run of each tune is the baseline
    for r in records:
        if r["config"] == "one" and r["rc"] == 0:
            one.setdefault((r["spec"], tuple(r["params"])), r["wall_s"])
    lines = [f"### {datetime.date.today().isoformat()}, {gpu}", "",
             "| kernel | params | budget | config | wall s | x one GPU | rows (distinct) | "
             "workers | best ms | same best as one GPU | killed |",
             "|---|---|--:|---|--:|--:|--:|---|--:|---|---|"]
    best_one: dict = {}
    for r in records:
        if r["config"] == "one":
            best_one.setdefault((r["spec"], tuple(r["params"])), r["best_variant"])
    for r in records:
        key = (r["spec"], tuple(r["params"]))
        ratio = f"{r['wall_s'] / one[key]:.2f}" if key in one else ""
        same = "" if key not in best_one or r["config"] == "one" else \
            ("yes" if r["best_variant"] == best_one[key] else "no")
        best_ms = f"{r['best_ms']:.4g}" if r["best_ms"] is not None else "-"
        lines.append(f"| {Path(r['spec']).name} | {' '.join(r['params'])} | {r['budget']} | "
                     f"{r['config']} | {r['wall_s']:.1f} | {ratio} | {r['rows']} "
                     f"({r['distinct_variants']}) | {', '.join(r['workers']) or '-'} | "
                     f"{best_ms} | {same} | "
                     f"{'pid ' + str(r['killed_pid']) if r['killed_pid'] else ''} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec")
    ap.add_argument("-p", dest="params", action="append", default=[])
    ap.add_argument("--check-param", dest="check_params", action="append", default=[])
    ap.add_argument("--budget", type=int, default=16)
    ap.add_argument("--backend", default="gpu", choices=("gpu", "cpu"))
    ap.add_argument("--gpus", default="all", help="what 'all' and 'kill' pass to --gpus")
    ap.add_argument("--configs", nargs="+", default=["one", "all", "kill"],
                    choices=("one", "dask1", "all", "kill"))
    ap.add_argument("--kill-after", type=int, default=3,
                    help="kill: a worker is killed once the database holds this many rows")
    ap.add_argument("--out", type=Path, help="directory for the JSON lines and the table")
    args = ap.parse_args(argv)
    records = []
    with tempfile.TemporaryDirectory(prefix="polygpu-distributed-") as tmp:
        for index, config in enumerate(args.configs):
            records.append(run(args, config, Path(tmp), index))
    gpu = "cpu-emulator"
    if args.backend == "gpu":
        try:
            gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                                 capture_output=True, text=True).stdout.strip().replace(
                                     "\n", " + ")
        except OSError:
            gpu = "?"
    table = markdown(records, gpu)
    print(table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        with open(args.out / "distributed_runs.jsonl", "a") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")
        with open(args.out / "distributed.md", "a") as f:
            f.write(table + "\n")
    return 0 if all(r["rc"] == 0 for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
