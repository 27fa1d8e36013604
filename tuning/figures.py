"""The paper's Figures 5 and 6 on today's GPU: tune mv, tmv, mvt and mm, compare with cuBLAS.

For each kernel and size the model-pruned search (``polygpu tune``'s machinery) picks the
best variant; cuBLAS (SGEMV/SGEMM, TF32 off) is timed in the same run.  Writes to
``OUT/`` (default ``tuning/results/<gpu>/``):

* ``figure5.csv`` / ``figure5.png``: best polygpu GFLOP/s vs cuBLAS per kernel and size,
  with the ratio and the fraction of the roofline;
* ``figure6_<kernel>_<n>/``: the search report (all candidates' performance, traffic vs
  time, pruning) for each run;
* ``figures.md``: a short summary.

``--exhaustive KERNEL:N`` also runs the exhaustive strategy on the same (possibly
reduced, ``--space``) space and records where ``model`` lands: the gap to the
exhaustive best and the fraction of candidates it timed.

Usage (on the GPU machine)::

    python tuning/figures.py --kernels mv,tmv,mvt --sizes 4096,8192,16384 --budget 8
    python tuning/figures.py --kernels mm --sizes 2048,4096,8192 --budget 8
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import math
from pathlib import Path

from polygpu.search.database import TuningDatabase
from polygpu.search.occupancy import device_limits
from polygpu.search.report import write_report
from polygpu.search.runner import ProcessRunner
from polygpu.search.space import SpaceOptions
from polygpu.search.summary import summarize, variant_text
from polygpu.search.tuner import TuneOptions, tune

ROOT = Path(__file__).resolve().parent.parent

# the exhaustive comparison's space: the paper's candidate, two block sizes, two x
# extents, register tiles up to 8 x 8 (in runs of 4 points), one time tile (64 points
# for mm)
REDUCED = SpaceOptions(candidates=1, thread_totals=(256, 128), x_threads=(16, 32),
                       factors=(1, 2, 4, 8), time_tiles=(16,), unrolls=(1,),
                       chunks=(4,), shared=(True,), blocked=(False,))


def run_one(kernel: str, n: int, runner, limits, db, budget, strategy="model",
            space: SpaceOptions | None = None, out: Path | None = None) -> dict:
    spec = str(ROOT / "kernels" / f"{kernel}.c")
    # every measured variant is plotted (figure 6): each timed in full, no race
    options = TuneOptions(strategy=strategy, budget=budget, space=space or SpaceOptions(),
                          race=None)
    result = tune(spec, {"n": n}, runner, options=options, database=db, limits=limits,
                  progress=lambda p: None)
    summary = summarize(result)
    if out is not None:
        write_report(result, out, workload=summary.workload, roofline=summary.roofline,
                     peer_ms=summary.peer_ms, peer_name=summary.peer_name)
    best = summary.rows[0] if summary.rows and summary.rows[0].time_ms else None
    counts = result.counts()
    return {
        "kernel": kernel, "n": n, "strategy": strategy,
        "best_variant": variant_text(best.candidate.variant) if best else "",
        "best_key": best.candidate.key if best else "",
        "ms": best.time_ms if best else math.nan,
        "gflops": best.gflops if best else math.nan,
        "gbs": best.gbs if best else math.nan,
        "roofline_fraction": best.fraction if best else math.nan,
        "cublas_ms": summary.peer_ms,
        "cublas_gflops": summary.workload.flops / summary.peer_ms / 1e6
        if summary.peer_ms else math.nan,
        "vs_cublas": best.vs_peer if best and best.vs_peer else math.nan,
        "space": len(result.candidates),
        "timed": counts.get("timed", 0) + counts.get("failed", 0) + counts.get("reused", 0),
        "failed": counts.get("failed", 0),
        "pruned": sum(v for k, v in counts.items() if k.startswith("pruned")),
        "gpu": result.environment.gpu_name,
        "all_times": {c.candidate.key: c.time_ms for c in summary.rows},
    }


def plot(rows, path: Path, gpu: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['kernel']}\n{r['n']}" for r in rows]
    x = range(len(rows))
    fig, ax = plt.subplots(figsize=(max(6, len(rows) * 0.9), 4))
    ax.bar([i - 0.2 for i in x], [r["gflops"] for r in rows], 0.4, label="polygpu (tuned)")
    ax.bar([i + 0.2 for i in x], [r["cublas_gflops"] for r in rows], 0.4, label="cuBLAS")
    ax.set_xticks(list(x), labels)
    ax.set_ylabel("GFLOP/s")
    ax.set_yscale("log")
    ax.set_title(f"Figure 5 on {gpu}: best tuned variant vs cuBLAS (float32)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", default="mv,tmv,mvt")
    ap.add_argument("--sizes", default="4096,8192,16384")
    ap.add_argument("--budget", type=int, default=8)
    ap.add_argument("--exhaustive", metavar="KERNEL:N",
                    help="also compare model with exhaustive search on the reduced space")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--db", type=Path)
    args = ap.parse_args()
    runner = ProcessRunner("gpu", timeout_s=120)
    env = runner.environment()
    limits = device_limits()
    out = args.out or ROOT / "tuning" / "results" / env.gpu_name.replace(" ", "-")
    out.mkdir(parents=True, exist_ok=True)
    date = datetime.date.today().isoformat()
    rows = []
    with TuningDatabase(args.db or out / "tuning.sqlite") as db:
        for kernel in args.kernels.split(","):
            for n in map(int, filter(None, args.sizes.split(","))):
                row = run_one(kernel, n, runner, limits, db, args.budget,
                              out=out / f"figure6_{kernel}_{n}")
                print(json.dumps({k: v for k, v in row.items() if k != "all_times"}),
                      flush=True)
                rows.append(row)
        comparison = None
        if args.exhaustive:
            kernel, n = args.exhaustive.split(":")
            full = run_one(kernel, int(n), runner, limits, db, None, "exhaustive", REDUCED,
                           out / f"exhaustive_{kernel}_{n}")
            model = run_one(kernel, int(n), runner, limits, db, None, "model", REDUCED,
                            out / f"model_{kernel}_{n}")
            rank = sorted(full["all_times"].values(), key=lambda t: t or math.inf)
            position = 1 + sum(1 for t in rank if t and t < model["ms"])
            comparison = {
                "kernel": kernel, "n": int(n), "space": full["space"],
                "exhaustive_timed": full["timed"], "exhaustive_best_ms": full["ms"],
                "exhaustive_best": full["best_variant"], "model_timed": model["timed"],
                "model_best_ms": model["ms"], "model_best": model["best_variant"],
                "gap": model["ms"] / full["ms"] - 1, "model_rank_in_exhaustive": position,
                "fraction_timed": model["timed"] / max(full["timed"], 1),
            }
            (out / f"exhaustive_vs_model_{kernel}_{n}.json").write_text(
                json.dumps(comparison, indent=2))
            print(json.dumps(comparison), flush=True)
    if not rows:
        return  # only the exhaustive comparison was asked for
    stem = "figure5" if args.kernels != "mm" else "figure5_mm"
    with open(out / f"{stem}.csv", "w", newline="") as f:
        fields = [k for k in rows[0] if k != "all_times"]
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow({k: r[k] for k in fields})
    plot(rows, out / f"{stem}.png", env.gpu_name)
    lines = [f"# {stem} on {env.gpu_name} ({date})", "",
             f"Model-pruned search, budget {args.budget} timed candidates per run; cuBLAS "
             "timed in the same run (PyTorch, TF32 off); CUDA events, median of 20 runs "
             "after 3 warm-ups; every candidate passed the poisoned-output check first.",
             f"Toolkit {env.cuda_version}, driver {env.driver_version}, polygpu "
             f"{env.polygpu_version}.", "",
             "| kernel | n | best variant | ms | GFLOP/s | GB/s | roofline | cuBLAS GFLOP/s "
             "| × cuBLAS | timed/space |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['kernel']} | {r['n']} | `{r['best_variant']}` | {r['ms']:.4g} | "
                     f"{r['gflops']:.1f} | {r['gbs']:.1f} | {r['roofline_fraction']:.1%} | "
                     f"{r['cublas_gflops']:.1f} | {r['vs_cublas']:.3f} | "
                     f"{r['timed']}/{r['space']} |")
    if comparison:
        lines += ["", "## Model vs exhaustive", "", "```json",
                  json.dumps(comparison, indent=2), "```"]
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
