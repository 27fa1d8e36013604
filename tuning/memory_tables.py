"""The paper's Tables 2 and 3 on today's GPU, with cuBLAS measured in the same run.

* Table 2 -- mv (x = A y): A read directly from global memory (each thread walks a row:
  not coalesced) vs staged through shared memory without padding vs with the padding
  Algorithm 2 picks (1: the warp reads a column of the 128 x 32 tile);
* Table 3 -- tmv (x = A^T y): the threads' rows dealt *cyclically* (consecutive threads,
  consecutive columns of A: coalesced) vs *blocked* (each thread a run of 4 columns).

Every variant is first checked against the original loops on fresh random inputs with
poisoned outputs (``polygpu check``'s machinery, on the GPU); only a correct kernel is
timed.  Timing: CUDA events around the launches, warm-up, median of repeats.  cuBLAS
SGEMV (through PyTorch) and a device-to-device copy (the bandwidth roofline) are timed
in the same process.

Usage (GPU machine, PyCUDA + PyTorch): ``python tuning/memory_tables.py [--sizes N..]``
-> ``tuning/results/<gpu>/table2_mv.{csv,md,png}``, ``table3_tmv.{csv,md,png}``.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import re
import statistics
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from polygpu.frontend import load  # noqa: E402
from polygpu.pipeline import compile_region  # noqa: E402
from polygpu.runtime import gpu, inputs  # noqa: E402
from polygpu.runtime.check import check_program  # noqa: E402
from polygpu.schedule.variant import Variant  # noqa: E402

NOMINAL_COPY_TBS = 3.0  # H100 copy bandwidth named in the brief
REPEATS, WARMUP = 50, 5

TABLE2 = ("kernels/mv.c", [
    (f"{label}, {rows} rows/block", Variant(tile=(rows,), threads=(rows,), time_tile=32,
                                            **options))
    for rows in (128, 32)
    for label, options in (("global (no shared)", {"shared": False}),
                           ("shared, padding 0", {"padding": 0}),
                           ("shared, solver padding", {}))
])
TABLE3 = ("kernels/tmv.c", [
    (f"{dist}{', jam' if jam else ''}, {tile}/{threads}",
     Variant(tile=(tile,), threads=(threads,), time_tile=32, jam=jam,
             blocked=dist == "blocked"))
    for tile, threads, jam in ((512, 128, False), (512, 128, True), (128, 32, True))
    for dist in ("cyclic", "blocked")
])


def _events_median(fn) -> float:
    import torch
    for _ in range(WARMUP):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(REPEATS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def copy_bandwidth() -> float:
    """Measured device-to-device copy bandwidth in GB/s (1 GiB read + 1 GiB written)."""
    import torch
    src = torch.empty(256 * 1024 * 1024, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    ms = _events_median(lambda: dst.copy_(src))
    return 2 * src.numel() * 4 / (ms * 1e-3) / 1e9


def cublas_sgemv(n: int, transposed: bool) -> float:
    import torch
    a = torch.rand(n, n, device="cuda")
    y = torch.rand(n, device="cuda")
    mat = a.t() if transposed else a
    return _events_median(lambda: torch.mv(mat, y))


def run_variant(spec: str, n: int, variant: Variant, seed: int) -> dict:
    compiled = compile_region(spec, variant=variant)
    scop = compiled.source_scop
    check = check_program(compiled.program, scop, spec, {"n": n}, backend="gpu", seed=seed)
    row = {"check": "ok" if check.ok else "WRONG", "check_message": check.message,
           "padding": ";".join(f"{b.array}:{b.padding}" for b in compiled.memory.buffers
                               if b.space == "shared"),
           "shared_bytes": compiled.memory.shared_bytes(0)}
    if not check.ok:
        return row | {"ms": float("nan")}
    source = load(spec)
    ints = inputs.integer_parameters(source, {"n": n})
    values = inputs.random_values(source, ints, inputs.array_shapes(source, ints),
                                  np.random.default_rng(seed + 1))
    timing = gpu.time_program(compiled.program, values, repeats=REPEATS, warmup=WARMUP)
    return row | {"ms": timing.median_ms}


def table(name: str, spec: str, variants, sizes, transposed: bool, copy_gbs: float,
          out_dir: Path) -> list[dict]:
    rows = []
    for n in sizes:
        blas_ms = cublas_sgemv(n, transposed)
        flops, bytes_ = 2.0 * n * n, 4.0 * (n * n + 2 * n)
        for label, variant in variants:
            r = run_variant(spec, n, variant, seed=n)
            ms = r["ms"]
            rows.append({
                "table": name, "kernel": spec, "n": n, "variant": label,
                "check": r["check"], "padding": r["padding"], "ms": round(ms, 4),
                "gflops": round(flops / (ms * 1e-3) / 1e9, 1),
                "gbs": round(bytes_ / (ms * 1e-3) / 1e9, 1),
                "frac_copy_measured": round(bytes_ / (ms * 1e-3) / 1e9 / copy_gbs, 3),
                "frac_copy_3TBs": round(bytes_ / (ms * 1e-3) / 1e12 / NOMINAL_COPY_TBS, 3),
                "cublas_ms": round(blas_ms, 4),
                "cublas_gflops": round(flops / (blas_ms * 1e-3) / 1e9, 1),
                "time_vs_cublas": round(ms / blas_ms, 2),
            })
            print(rows[-1], flush=True)
    with (out_dir / f"{name}.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 4))
        for label, _ in variants:
            pts = [(r["n"], r["gflops"]) for r in rows if r["variant"] == label]
            ax.plot(*zip(*pts, strict=True), marker="o", label=f"polygpu: {label}")
        pts = sorted({(r["n"], r["cublas_gflops"]) for r in rows})
        ax.plot(*zip(*pts, strict=True), marker="s", linestyle="--", label="cuBLAS SGEMV")
        ax.set_xlabel("N")
        ax.set_ylabel("GFLOP/s")
        ax.set_title(f"{name} ({spec})")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out_dir / f"{name}.png", dpi=120)
    except ImportError:
        print("matplotlib missing: no PNG", file=sys.stderr)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192, 12288, 16384])
    parser.add_argument("--l1-off", action="store_true",
                        help="compile with -Xptxas -dlcm=cg: global loads bypass L1, as on "
                             "the paper's GPU (tables get an _l1off suffix)")
    args = parser.parse_args()
    suffix = ""
    if args.l1_off:
        import os
        os.environ["POLYGPU_NVCC_OPTIONS"] = "-Xptxas -dlcm=cg"
        suffix = "_l1off"
    import torch
    gpu_name = torch.cuda.get_device_name()
    out_dir = ROOT / "tuning" / "results" / re.sub(r"[^A-Za-z0-9]+", "-", gpu_name).strip("-")
    out_dir.mkdir(parents=True, exist_ok=True)
    copy_gbs = copy_bandwidth()
    print(f"{gpu_name}: copy bandwidth {copy_gbs:.0f} GB/s", flush=True)
    t2 = table(f"table2_mv{suffix}", *TABLE2, args.sizes, False, copy_gbs, out_dir)
    t3 = table(f"table3_tmv{suffix}", *TABLE3, args.sizes, True, copy_gbs, out_dir)
    date = datetime.date.today().isoformat()
    for name, rows in ((f"table2_mv{suffix}", t2), (f"table3_tmv{suffix}", t3)):
        keys = ["n", "variant", "check", "padding", "ms", "gflops", "gbs",
                "frac_copy_measured", "frac_copy_3TBs", "cublas_gflops", "time_vs_cublas"]
        lines = [f"# {name} on {gpu_name} ({date})", "",
                 f"Measured copy bandwidth {copy_gbs:.0f} GB/s (nominal "
                 f"{NOMINAL_COPY_TBS} TB/s).  Median of {REPEATS} runs after {WARMUP} "
                 "warm-ups, CUDA events; cuBLAS SGEMV via PyTorch in the same run; every "
                 "variant passed the poisoned-output check before timing."
                 + (" polygpu's kernels compiled with -Xptxas -dlcm=cg (global loads "
                    "bypass L1)." if suffix else ""), "",
                 "| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
        lines += ["| " + " | ".join(str(r[k]) for k in keys) + " |" for r in rows]
        (out_dir / f"{name}.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
