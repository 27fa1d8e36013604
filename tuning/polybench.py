"""PolyBench at EXTRALARGE: polygpu's default plan (and, with ``--tune``, its tuned plan)
on every kernel of ``kernels/polybench/`` against PPCG's recorded default and the fastest
vendor call, in the same run.

For each kernel (the ``polybench/*.c`` entries of ``kernels/catalog.json``; sizes are its
``gpu`` sizes, PolyBench's EXTRALARGE, double; floyd-warshall int):

1. **default** -- what ``polygpu compile -p`` gives at these sizes (the cost model's top
   plan), first checked against the original loop nest on the device at reduced sizes
   (``--check-scale``), then timed at full size: CUDA events around every launch of a run,
   host steps included (PPCG's table was timed the same way), one warm-up, median of
   ``--repeats`` (fewer when the runs add up to ``--budget-ms``: at least three);
2. **tuned** (``--tune B``) -- ``polygpu tune`` with the model strategy and budget ``B``
   through ``polygpu.optimize``, its best variant timed again like the default;
3. per time: launches per run, GFLOP/s and the fraction of the roofline
   (:mod:`polygpu.search.metrics`: flops and compulsory bytes counted with isl on the
   original region; roofs 3.0 TB/s and the cuBLAS DGEMM rate measured in this run -- the
   double-precision rate the vendor reaches on this GPU), and PPCG's time
   (``../shared/anchors/ppcg_polybench_h100.md``, H100, recorded 2026-11-22, not rerun)
   divided by ours (> 1: polygpu faster);
4. **vendor** -- where one exists, the fastest library call for the same operation through
   torch (cuBLAS / cuSOLVER), CUDA events, median of 20: DGEMM for the products, DGEMV
   pairs for the BLAS-2 kernels, DSYRK/DSYR2K as GEMMs with the triangle computed twice
   (torch has no SYRK), DTRMM/DTRSV as triangular solves or products, LU and Cholesky
   factorizations (cuSOLVER: LU with pivoting, more work than PolyBench's).  A plan that
   would run a loop nest on one thread for minutes is not timed (the table says why).

Results: ``tuning/results/<gpu>/polybench.{md,json,png}``.

    python tuning/polybench.py --repeats 5 [--tune 8] [--kernel gemm ...]  # GPU machine
    python tuning/polybench.py --backend cpu --small --kernel atax           # dry run

Shards: on a machine with several GPUs, run one process per GPU (``CUDA_VISIBLE_DEVICES``,
``taskset`` to give each the cores of one single-GPU machine), each on its own kernels and
``--out``, then ``--merge`` their ``polybench.json`` files into one table (the kernels no
shard ran keep their recorded rows with ``--keep``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tuning"))

from plans_polybench import inputs, serial_work, tune_row  # noqa: E402

from polygpu.pipeline import compile_variant, prepare  # noqa: E402
from polygpu.runtime.check import check_program  # noqa: E402
from polygpu.runtime.device import get_device  # noqa: E402
from polygpu.search import plan_model  # noqa: E402
from polygpu.search.metrics import Roofline, workload  # noqa: E402

# ../shared/anchors/ppcg_polybench_h100.md: PPCG's default, EXTRALARGE, double, H100;
# (ms, None) or (None, limit ms) where PPCG did not finish within the limit
PPCG = {"gemm": (8.81, None), "mm2": (8.03, None), "mm3": (16.1, None),
        "atax": (0.666, None), "bicg": (0.70, None), "mvt": (1.40, None),
        "gemver": (1.69, None), "gesummv": (0.885, None), "syrk": (27.3, None),
        "syr2k": (48.3, None), "symm": (7.27, None), "trmm": (99.1, None),
        "doitgen": (1097.0, None), "covariance": (51.2, None), "correlation": (11.7, None),
        "jacobi_2d": (108.0, None), "heat_3d": (497.0, None), "fdtd_2d": (240.0, None),
        "trisolv": (30.7, None), "lu": (None, 25000.0), "cholesky": (None, 120000.0),
        "floyd_warshall": (None, 25000.0)}
SERIAL_LIMIT = 10**7  # instances one thread may run in a timed launch
PREDICTED_LIMIT_MS = 60_000.0  # plans the model predicts slower than this are not timed


# --------------------------------------------------------------------------------------
# Vendor calls (torch): the fastest library call for each kernel's operation
# --------------------------------------------------------------------------------------


def _vendor(name: str, s: dict, torch):
    """(description, run) for ``name`` at sizes ``s``, or None: ``run()`` enqueues the
    library calls on fresh operands allocated here."""
    d = torch.float64
    dev = "cuda"

    def r(*shape):
        return torch.rand(*shape, dtype=d, device=dev) + 0.5

    if name == "gemm":
        a, b, c = r(s["ni"], s["nk"]), r(s["nk"], s["nj"]), r(s["ni"], s["nj"])
        return "DGEMM (torch.addmm)", lambda: torch.addmm(c, a, b, beta=1.2, alpha=1.5, out=c)
    if name == "mm2":
        a, b, c, dd = r(s["ni"], s["nk"]), r(s["nk"], s["nj"]), r(s["nj"], s["nl"]), \
            r(s["ni"], s["nl"])
        tmp = torch.empty(s["ni"], s["nj"], dtype=d, device=dev)
        return "2 x DGEMM", lambda: (torch.mm(a, b, out=tmp),
                                     torch.addmm(dd, tmp, c, beta=1.2, out=dd))
    if name == "mm3":
        a, b, c, dd = r(s["ni"], s["nk"]), r(s["nk"], s["nj"]), r(s["nj"], s["nm"]), \
            r(s["nm"], s["nl"])
        e = torch.empty(s["ni"], s["nj"], dtype=d, device=dev)
        f = torch.empty(s["nj"], s["nl"], dtype=d, device=dev)
        g = torch.empty(s["ni"], s["nl"], dtype=d, device=dev)
        return "3 x DGEMM", lambda: (torch.mm(a, b, out=e), torch.mm(c, dd, out=f),
                                     torch.mm(e, f, out=g))
    if name == "atax":  # A[m][n]: tmp = A x, y = A^T tmp
        a, x = r(s["m"], s["n"]), r(s["n"])
        tmp = torch.empty(s["m"], dtype=d, device=dev)
        y = torch.empty(s["n"], dtype=d, device=dev)
        return "2 x DGEMV", lambda: (torch.mv(a, x, out=tmp), torch.mv(a.t(), tmp, out=y))
    if name == "bicg":  # A[n][m]: s = A^T r, q = A p
        a, rr, p = r(s["n"], s["m"]), r(s["n"]), r(s["m"])
        out_s = torch.empty(s["m"], dtype=d, device=dev)
        q = torch.empty(s["n"], dtype=d, device=dev)
        return "2 x DGEMV", lambda: (torch.mv(a.t(), rr, out=out_s), torch.mv(a, p, out=q))
    if name == "mvt":
        a, y1, y2 = r(s["n"], s["n"]), r(s["n"]), r(s["n"])
        x1, x2 = r(s["n"]), r(s["n"])
        return "2 x DGEMV", lambda: (torch.addmv(x1, a, y1, out=x1),
                                     torch.addmv(x2, a.t(), y2, out=x2))
    if name == "gesummv":
        a, b, x = r(s["n"], s["n"]), r(s["n"], s["n"]), r(s["n"])
        y = torch.empty(s["n"], dtype=d, device=dev)
        return "2 x DGEMV", lambda: (torch.mv(a, x, out=y), torch.addmv(y, b, x, beta=1.5,
                                                                         alpha=1.2, out=y))
    if name == "gemver":
        n = s["n"]
        a, u1, v1, u2, v2 = r(n, n), r(n), r(n), r(n), r(n)
        w, x, y, z = r(n), r(n), r(n), r(n)
        return "2 x DGER + 2 x DGEMV", lambda: (
            a.addr_(u1, v1).addr_(u2, v2), torch.addmv(x, a.t(), y, beta=1.0, alpha=1.2,
                                                       out=x),
            x.add_(z), torch.addmv(w, a, x, alpha=1.5, out=w))
    if name == "syrk":
        a, c = r(s["n"], s["m"]), r(s["n"], s["n"])
        return "DGEMM A A^T (no SYRK in torch)", lambda: torch.addmm(c, a, a.t(), beta=1.2,
                                                                      alpha=1.5, out=c)
    if name == "syr2k":
        a, b, c = r(s["n"], s["m"]), r(s["n"], s["m"]), r(s["n"], s["n"])
        return "2 x DGEMM (no SYR2K in torch)", lambda: (
            torch.addmm(c, a, b.t(), beta=1.2, alpha=1.5, out=c),
            torch.addmm(c, b, a.t(), alpha=1.5, out=c))
    if name == "symm":
        a, b, c = r(s["m"], s["m"]), r(s["m"], s["n"]), r(s["m"], s["n"])
        return "DGEMM (symmetric A as full)", lambda: torch.addmm(c, a, b, beta=1.2,
                                                                   alpha=1.5, out=c)
    if name == "trmm":
        a, b = torch.tril(r(s["m"], s["m"])), r(s["m"], s["n"])
        out = torch.empty_like(b)
        return "DGEMM with triangular A (no TRMM in torch)", lambda: torch.mm(a.t(), b, out=out)
    if name == "trisolv":
        lo = torch.tril(r(s["n"], s["n"])) + s["n"] * torch.eye(s["n"], dtype=d, device=dev)
        b = r(s["n"], 1)
        return "DTRSV (torch.linalg.solve_triangular)", lambda: torch.linalg.solve_triangular(
            lo, b, upper=False)
    if name == "lu":
        a = r(s["n"], s["n"]) + s["n"] * torch.eye(s["n"], dtype=d, device=dev)
        return "DGETRF with pivoting (torch.linalg.lu_factor)", lambda: torch.linalg.lu_factor(a)
    if name == "cholesky":
        a = r(s["n"], s["n"])
        a = a @ a.t() + s["n"] * torch.eye(s["n"], dtype=d, device=dev)
        return "DPOTRF (torch.linalg.cholesky)", lambda: torch.linalg.cholesky(a)
    if name in ("covariance", "correlation"):
        data = r(s["n"], s["m"])
        return "DGEMM of centred data (torch.cov)", lambda: torch.cov(data.t())
    if name == "doitgen":
        a, c4 = r(s["nr"] * s["nq"], s["np"]), r(s["np"], s["np"])
        out = torch.empty_like(a)
        return "DGEMM (nr*nq x np x np)", lambda: torch.mm(a, c4, out=out)
    return None


def _torch():
    """torch with a CUDA device, or None."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def _median_ms(torch, run, repeats: int, warmup: int = 3,
               budget_ms: float | None = None) -> float:
    """Median milliseconds of ``run()`` between CUDA events, after ``warmup`` runs; with
    ``budget_ms``, the timed runs stop once they add up to it (at least three)."""
    for _ in range(warmup):
        run()
    torch.cuda.synchronize()
    times: list[float] = []
    while len(times) < repeats and (budget_ms is None or len(times) < 3
                                    or sum(times) < budget_ms):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def time_vendor(name: str, sizes: dict, repeats: int = 20) -> dict | None:
    torch = _torch()
    if torch is None:
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    found = _vendor(name, sizes, torch)
    if found is None:
        return None
    what, run = found
    return {"call": what, "ms": _median_ms(torch, run, repeats),
            "library": f"torch {torch.__version__}"}


def dgemm_gflops() -> float | None:
    """cuBLAS DGEMM at 4096^3 in this run: the double-precision compute roof."""
    return gemm_gflops("float64")


def gemm_gflops(dtype: str) -> float | None:
    """cuBLAS GEMM in ``dtype`` (TF32 off) at 4096^3 in this run, GFLOP/s."""
    torch = _torch()
    if torch is None:
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    n = 4096
    a = torch.rand(n, n, dtype=getattr(torch, dtype), device="cuda")
    b, c = torch.rand_like(a), torch.empty_like(a)
    ms = _median_ms(torch, lambda: torch.mm(a, b, out=c), 10)
    return 2 * n**3 / (ms * 1e-3) / 1e9


# --------------------------------------------------------------------------------------
# One kernel
# --------------------------------------------------------------------------------------


def run_kernel(name: str, entry: dict, args, device, roof: Roofline) -> dict:
    spec = str(ROOT / "kernels" / "polybench" / f"{name}.c")
    sizes = dict(entry["small" if args.small else "gpu"])
    small = sizes if args.small else {k: max(3, v // args.check_scale) | 1
                                      for k, v in sizes.items()}
    started = time.time()
    row = {"kernel": name, "sizes": sizes, "function": entry["function"]}
    prepared = prepare(spec, entry["function"], params=sizes)
    work = workload(prepared.source_scop, sizes)  # the original region's counts
    row["flops"], row["bytes"] = work.flops, work.bytes
    choice = plan_model.choose(prepared, sizes)
    predicted = choice.ranking[0].seconds * 1e3
    row["predicted_ms"] = round(predicted, 4)
    compiled = compile_variant(prepared, choice.variant, sizes)
    program = compiled.program
    row["variant"] = choice.variant.to_json()
    row["launches"] = len(program.steps(sizes))
    row["kernels"] = len(compiled.kernels)
    row["compile_s"] = round(time.time() - started, 2)
    serial = serial_work(compiled, sizes)
    if serial >= SERIAL_LIMIT:
        row["skipped"] = f"one thread runs ~{serial:.1e} instances per launch"
    elif predicted > PREDICTED_LIMIT_MS:
        row["skipped"] = f"predicted {predicted / 1e3:.0f} s"
    else:
        check_prepared = prepare(spec, entry["function"], params=small)
        small_compiled = compile_variant(check_prepared, choice.variant, small)
        result = check_program(small_compiled.program, small_compiled.source_scop, spec,
                               small, backend=device, seed=11)
        row["check"] = {"ok": result.ok, "sizes": small, "message":
                        result.message.splitlines()[0][:200]}
        if not result.ok:
            row["error"] = "check failed: " + result.message[:300]
        else:
            values = inputs(program, sizes, np.random.default_rng(7))
            times = device.time(program, [values], args.repeats, 1, args.budget_ms)
            row["ms"] = statistics.median(times)
            row["timed_runs"] = len(times)
            perf = roof.of(row["ms"], work)
            row["gflops"], row["roofline"] = perf.gflops, perf.fraction
            row["bound"] = perf.bound
    if args.tune:
        tuned = tune_row(spec, entry["function"], sizes, args, device, args.backend)
        if "ms" in tuned:
            tuned["gflops"] = roof.of(tuned["ms"], work).gflops
            tuned["roofline"] = roof.of(tuned["ms"], work).fraction
        row["tuned"] = tuned
    if args.backend == "gpu" and not args.small:
        try:
            row["vendor"] = time_vendor(name, sizes)
        except Exception as err:  # noqa: BLE001 -- the kernel's row stands without it
            row["vendor"] = {"error": f"{type(err).__name__}: {err}"[:200]}
    row["seconds"] = round(time.time() - started, 1)
    return row


# --------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------


def vs_ppcg(name: str, ms: float | None) -> str:
    if ms is None:
        return ""
    ppcg, limit = PPCG[name]
    return f"{ppcg / ms:.2f}" if ppcg is not None else f"> {limit / ms:.0f}"


def _speedups(results, key):
    out = []
    for r in results:
        ms = (r.get(key) or {}).get("ms") if key == "tuned" else r.get("ms")
        ppcg, limit = PPCG[r["kernel"]]
        if ms:
            out.append((r["kernel"], (ppcg or limit) / ms, ppcg is None))
    return out


def geomean(values) -> float | None:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def markdown(data: dict) -> str:
    results = data["results"]
    roof = data["roof"]
    lines = [f"# PolyBench (EXTRALARGE, double) on the {data['gpu']}: polygpu vs PPCG and "
             f"the vendor ({data['date']})", "",
             "`tuning/polybench.py`. Times: CUDA events around every launch of a run (host "
             "steps included), device only, median. `vs PPCG` = PPCG's recorded time "
             "(`../shared/anchors/ppcg_polybench_h100.md`, 2026-11-22, not rerun) / ours "
             "(> 1: polygpu faster; `> x` where PPCG did not finish within its limit). "
             f"Roofline: {roof['bandwidth_gbs']:g} GB/s and {roof['gflops']:.0f} GFLOP/s "
             f"({roof['gflops_source']}); flops and compulsory bytes counted by isl on the "
             "original region. Each default plan was checked against the original nest on "
             "the device at reduced sizes before it was timed.", "",
             "| kernel | sizes | default ms | launches | GFLOP/s | roofline | vs PPCG | "
             "tuned ms | vs PPCG | tune s | PPCG ms | vendor call | vendor ms | "
             "vendor / ours |",
             "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|--:|"]
    for r in results:
        name = r["kernel"]
        ms = r.get("ms")
        default = f"{ms:.3f}" if ms else (r.get("skipped") or r.get("error", ""))[:60]
        t = r.get("tuned") or {}
        v = r.get("vendor") or {}
        ppcg, limit = PPCG[name]
        best = min(x for x in (ms, t.get("ms"), math.inf) if x)
        lines.append(" | ".join([
            f"| {name}", " ".join(f"{k}={x}" for k, x in r["sizes"].items()), default,
            str(r.get("launches", "")),
            f"{r['gflops']:.1f}" if "gflops" in r else "",
            f"{r['roofline']:.1%}" if "roofline" in r else "", vs_ppcg(name, ms),
            f"{t['ms']:.3f}" if "ms" in t else t.get("error", "")[:40],
            vs_ppcg(name, t.get("ms")),
            f"{t['tune_seconds']:.0f}" if "tune_seconds" in t else "",
            str(ppcg) if ppcg else f"> {limit:.0f}",
            v.get("call", ""), f"{v['ms']:.3f}" if "ms" in v else "",
            f"{v['ms'] / best:.2f}" if "ms" in v and best < math.inf else ""]) + " |")
    for key, title in (("default", "default"), ("tuned", "tuned")):
        sp = _speedups(results, key)
        if sp:
            g = geomean(x for _, x, _ in sp)
            slower = [k for k, x, _ in sp if x < 1]
            lines += ["", f"Geometric mean of `vs PPCG` over the {len(sp)} {title} times: "
                      f"**{g:.2f}x** (PPCG's limit used where it did not finish). "
                      f"Slower than PPCG: {', '.join(slower) or 'none'}."]
    lines += ["", "Plot: `polybench.png` (speed-up over PPCG per kernel, log scale).", ""]
    return "\n".join(lines)


def plot(data: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = data["results"]
    names = [r["kernel"] for r in results]
    default = {k: x for k, x, _ in _speedups(results, "default")}
    tuned = {k: x for k, x, _ in _speedups(results, "tuned")}
    fig, ax = plt.subplots(figsize=(12, 4.5))
    xs = np.arange(len(names))
    ax.bar(xs - 0.2, [default.get(n, 0) for n in names], 0.4, label="default plan")
    if tuned:
        ax.bar(xs + 0.2, [tuned.get(n, 0) for n in names], 0.4, label="tuned")
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_yscale("log")
    ax.set_xticks(xs, names, rotation=45, ha="right")
    ax.set_ylabel("PPCG time / polygpu time")
    ax.set_title(f"PolyBench EXTRALARGE double, {data['gpu']} ({data['date']})")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write(data: dict, out: Path) -> None:
    (out / "polybench.json").write_text(json.dumps(data, indent=1, default=str))
    (out / "polybench.md").write_text(markdown(data))


def main(argv=None) -> int:
    catalog = json.loads((ROOT / "kernels" / "catalog.json").read_text())
    available = [k.split("/")[1][:-2] for k in catalog if k.startswith("polybench/")]
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernel", action="append", choices=available)
    p.add_argument("--backend", default="gpu")
    p.add_argument("--small", action="store_true", help="catalog small sizes (dry run)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--budget-ms", type=float, default=3000.0,
                   help="stop timing a plan once its runs add up to this (at least 3 runs)")
    p.add_argument("--check-scale", type=int, default=8)
    p.add_argument("--tune", type=int, default=0, metavar="BUDGET")
    p.add_argument("--strategy", default="model")
    p.add_argument("--keep", action="store_true",
                   help="keep the recorded rows of the kernels not run now")
    p.add_argument("--out", default=None)
    p.add_argument("--merge", nargs="+", metavar="SHARD_JSON",
                   help="combine the rows of shards' polybench.json files (no timing)")
    args = p.parse_args(argv)
    if args.merge:
        return merge(args, available)
    device = get_device(args.backend)
    gpu = str(device.name() if callable(device.name) else device.name)
    out = Path(args.out) if args.out else results_dir(gpu)
    out.mkdir(parents=True, exist_ok=True)
    peak = dgemm_gflops() if args.backend == "gpu" else None
    roof = Roofline(3000.0, peak or 51000.0, gpu)
    data = {"gpu": gpu, "date": datetime.date.today().isoformat(),
            "roof": {"bandwidth_gbs": 3000.0, "gflops": roof.peak_gflops,
                     "gflops_source": "cuBLAS DGEMM 4096^3 measured in this run" if peak
                     else "no GPU: the FP32 default, for a dry run only"},
            "results": []}
    recorded = {}
    if args.keep and (out / "polybench.json").exists():
        recorded = {r["kernel"]: r for r in json.loads(
            (out / "polybench.json").read_text())["results"]}
    names = args.kernel or available
    for name in available:
        if name not in names:
            if name in recorded:
                data["results"].append(recorded[name])
            continue
        print(f"{name} ...", file=sys.stderr, flush=True)
        try:
            row = run_kernel(name, catalog[f"polybench/{name}.c"], args, device, roof)
        except Exception as err:  # noqa: BLE001 -- recorded; the other kernels go on
            row = {"kernel": name, "sizes": catalog[f"polybench/{name}.c"]["gpu"],
                   "error": f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"}
        print(f"  {json.dumps({k: row.get(k) for k in ('ms', 'launches', 'skipped', 'error')})}",
              file=sys.stderr, flush=True)
        data["results"].append(row)
        write(data, out)  # after every kernel: a run stopped midway keeps what it measured
    write(data, out)  # the recorded rows after the last kernel run now, too
    plot(data, out / "polybench.png")
    print(markdown(data))
    return 0


def results_dir(gpu: str) -> Path:
    return ROOT / "tuning" / "results" / gpu.replace(" ", "-")


def merge(args, available) -> int:
    """One table from shards run on several GPUs: each kernel's row from the shard that ran
    it (the last shard that has it wins), the recorded row for kernels none ran (``--keep``),
    and the first shard's roofline.  Every shard must come from the same GPU model."""
    shards = [json.loads(Path(f).read_text()) for f in args.merge]
    gpus = {d["gpu"] for d in shards}
    if len(gpus) != 1:
        print(f"shards come from different GPUs ({', '.join(sorted(gpus))}): not merged",
              file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else results_dir(shards[0]["gpu"])
    out.mkdir(parents=True, exist_ok=True)
    rows = {}
    if args.keep and (out / "polybench.json").exists():
        rows = {r["kernel"]: r for r in json.loads(
            (out / "polybench.json").read_text())["results"]}
    for d in shards:
        rows.update({r["kernel"]: r for r in d["results"]})
    data = {**shards[0], "results": [rows[n] for n in available if n in rows]}
    write(data, out)
    plot(data, out / "polybench.png")
    print(markdown(data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
