"""The CPU a search spends besides timing, without a GPU.

``polygpu tune`` at PolyBench's EXTRALARGE sizes (the sizes PPCG was timed at,
``../shared/anchors/ppcg_polybench_h100.md``) with a synthetic measuring device
(:class:`polygpu.search.runner.SyntheticRunner`: times from a formula, nothing runs), so
all the CPU counted is the search's own: preparing the region, the model's plans,
costing variants, generating their code and their reference checks' code, ptxas (the
real :class:`~polygpu.search.resources.PtxasOracle` when nvcc is installed, else
``--oracle fixed``), and the bookkeeping.  Each search runs in a fresh process and is
counted with its children (compile workers, nvcc): user + system seconds.

    python tuning/search_cpu.py                       # every kernel, model and per-kernel
    python tuning/search_cpu.py --kernels atax symm --strategies model --budget 8
    python tuning/search_cpu.py --json out.json --oracle fixed

The GPU numbers of the same searches come from ``polygpu tune`` itself (see
docs/search.md, "Tuning at large sizes").
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# PolyBench/C 4.2.1 EXTRALARGE (double), as PPCG was timed: every kernel's ``gpu`` sizes in
# the catalog
_CATALOG = json.loads((ROOT / "kernels" / "catalog.json").read_text())
SIZES = {k.split("/")[1][:-2]: e["gpu"] for k, e in _CATALOG.items()
         if k.startswith("polybench/")}
DEFAULT_KERNELS = ("atax", "bicg", "symm", "lu", "cholesky", "trisolv")


def _cpu() -> float:
    me, children = (resource.getrusage(resource.RUSAGE_SELF),
                    resource.getrusage(resource.RUSAGE_CHILDREN))
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


class _Counting:
    """An oracle that counts the programs it is asked about."""

    def __init__(self, oracle):
        self.oracle, self.programs = oracle, 0

    def compile(self, programs, arch, jobs=None):
        self.programs += len(programs)
        return self.oracle.compile(programs, arch, jobs=jobs)


def one(kernel: str, strategy: str, budget: int, jobs: int | None, oracle: str) -> dict:
    """One search in this process: its CPU (this process and its children), wall time
    and what it did."""
    from polygpu.search.resources import FixedResources, PtxasOracle
    from polygpu.search.runner import SyntheticRunner
    from polygpu.search.tuner import TuneOptions, tune

    spec = str(ROOT / "kernels" / "polybench" / f"{kernel}.c")
    counting = _Counting(PtxasOracle() if oracle == "ptxas" else FixedResources())
    runner = SyntheticRunner()
    cpu, wall = _cpu(), time.perf_counter()
    result = tune(spec, SIZES[kernel], runner, options=TuneOptions(
        strategy=strategy, budget=budget, jobs=jobs), oracle=counting)
    cpu, wall = _cpu() - cpu, time.perf_counter() - wall
    plan = next((c for c in result.candidates if c.origin == "plan"), None)
    return {"kernel": kernel, "strategy": strategy, "budget": budget, "sizes": SIZES[kernel],
            "oracle": oracle, "cpu_s": round(cpu, 1), "wall_s": round(wall, 1),
            "timed": len(runner.calls), "ptxas": counting.programs, **dict(result.work),
            "space": len(result.candidates), "first": runner.calls[:1] == (
                [plan.key] if plan is not None else runner.calls[:1]),
            "best": result.best.key if result.best else None}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernels", nargs="+", default=list(DEFAULT_KERNELS),
                   choices=list(SIZES))
    p.add_argument("--strategies", nargs="+", default=["model", "per-kernel"])
    p.add_argument("--budget", type=int, default=8)
    p.add_argument("--jobs", type=int, default=None, help="compile processes (default: CPUs)")
    p.add_argument("--oracle", choices=("ptxas", "fixed"), default="ptxas")
    p.add_argument("--json", metavar="FILE", help="append the rows to this JSON file")
    p.add_argument("--one", nargs=2, metavar=("KERNEL", "STRATEGY"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(one(*args.one, args.budget, args.jobs, args.oracle)))
        return 0
    rows = []
    print("| kernel | sizes | strategy | budget | CPU s | wall s | timed | costed | "
          "generated | checks | ptxas |")
    print("|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    for kernel in args.kernels:
        for strategy in args.strategies:
            command = [sys.executable, __file__, "--one", kernel, strategy, "--budget",
                       str(args.budget), "--oracle", args.oracle]
            if args.jobs:
                command += ["--jobs", str(args.jobs)]
            out = subprocess.run(command, capture_output=True, text=True,
                                 env={**os.environ, "PYTHONPATH": str(ROOT)})
            if out.returncode != 0:
                print(f"| {kernel} | | {strategy} | failed: {out.stderr.strip()[-300:]} |")
                continue
            row = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append(row)
            sizes = " ".join(f"{k}={v}" for k, v in row["sizes"].items())
            print(f"| {kernel} | {sizes} | {strategy} | {row['budget']} | {row['cpu_s']} | "
                  f"{row['wall_s']} | {row['timed']} | {row['costed']} | "
                  f"{row['generated']} | {row['checks']} | {row['ptxas']} |", flush=True)
    if args.json:
        path = Path(args.json)
        old = json.loads(path.read_text()) if path.exists() else []
        path.write_text(json.dumps(old + rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
