"""Probe (issue 24): does the search keep two measuring slots busy?  On a machine with
one GPU, a tune with one slot (`ProcessRunner`) against the same tune with two Dask
workers that share GPU 0 (`DaskRunner(devices=("0", "0"))` -- `--gpus` refuses that:
two candidates timed at once on one GPU disturb each other's times, so the times here
are not results; only the wall clock and where it goes are).  Prints, per run, the wall
time, the sum of the measurements' own times (`extra.wall_s`: set-up, check, timing in
the worker's child) and the largest number in flight.

    python tuning/probes/distributed_same_gpu.py kernels/mm.c n=4096 --budget 16
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from polygpu.search.database import TuningDatabase
from polygpu.search.distributed import DaskRunner
from polygpu.search.occupancy import device_limits
from polygpu.search.runner import ProcessRunner
from polygpu.search.tuner import TuneOptions, tune


def one_run(name, runner, spec, params, budget, tmp) -> dict:
    start = time.monotonic()
    with TuningDatabase(Path(tmp) / f"{name}.sqlite") as db:
        result = tune(spec, params, runner, database=db, limits=device_limits(),
                      options=TuneOptions(budget=budget))
        rows = db.rows()
    wall = time.monotonic() - start
    spans = []
    for r in rows:
        extra = r.measurement.extra
        spans.append(extra.get("cluster_wall_s", extra.get("wall_s", 0.0)))
    best = result.best
    return {"run": name, "wall_s": round(wall, 1), "rows": len(rows),
            "measuring_s": round(sum(spans), 1),
            "stages_s": [r.measurement.extra.get("stages_s") for r in rows],
            "best_key": best.key if best else None,
            "best_ms": best.measurement.time_ms if best else None}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("spec")
    ap.add_argument("params", nargs="+")
    ap.add_argument("--budget", type=int, default=16)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    params = {k: int(v) for k, v in (p.split("=") for p in args.params)}
    records = []
    with tempfile.TemporaryDirectory() as tmp:
        with ProcessRunner("gpu") as runner:
            records.append(one_run("one", runner, args.spec, params, args.budget, tmp))
            print(json.dumps(records[-1]), flush=True)
        with DaskRunner(devices=("0", "0"), backend="gpu") as runner:
            records.append(one_run("two_slots_one_gpu", runner, args.spec, params,
                                   args.budget, tmp))
            print(json.dumps(records[-1]), flush=True)
    print(f"wall x one: {records[1]['wall_s'] / records[0]['wall_s']:.2f}")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        with open(args.out / "distributed_same_gpu.jsonl", "a") as f:
            for r in records:
                f.write(json.dumps({"spec": args.spec, "params": params, **r}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
