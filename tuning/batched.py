"""Batches of small elements (seed 000, Ha/King/Fu/Kirby 2013; issue 21): polygpu's default
plan for ``kernels/batched_mm.c`` (nb products of n x n, AoS: element after element)
against ``torch.bmm`` in the same run, and against the fixed 32 x 32 block the default
used before blocks were fitted to small elements (``space.fitted_threads``).

For each n: both polygpu programs are checked against the original loop nest on the
device at ne = 37 first (the issue's odd sizes), then timed at full size with CUDA
events (one warm-up, median of ``--repeats``, stopping after 1 s); torch.bmm on the
same shapes (no TF32).  ``roofline`` is the compulsory traffic (a and b read, c
written once: 3 n^2 nb words) over 3000 GB/s.

This first version measures batched gemm only (fp32; fp64 with ``--dtype float64``):
batched dot, gemv, Cholesky with a solve, the SoA layout and the plots of issue 21 are
not built yet.

    python tuning/batched.py --out tuning/results/<gpu>     # GPU machine
    python tuning/batched.py --backend cpu --small          # dry run
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tuning"))

from allpairs import checked, time_program  # noqa: E402
from polybench import _median_ms, _torch  # noqa: E402

from polygpu.pipeline import compile_variant, prepare  # noqa: E402
from polygpu.runtime.device import get_device  # noqa: E402
from polygpu.schedule.variant import Variant  # noqa: E402
from polygpu.search import plan_model  # noqa: E402

SPEC = str(ROOT / "kernels" / "batched_mm.c")
BANDWIDTH = 3000e9  # bytes/s: the H100's copy rate (about 2975 GB/s measured)
SQUARE = Variant(tile=(32, 32), threads=(8, 32))  # the default's block before fitting
DOUBLE = ("DATA_TYPE=double",)
TORCH_TIMING = {"repeats": 20, "warmup": 1, "budget_ms": 1000.0}


def run_size(n: int, nb: int, dtype: str, args, device) -> dict:
    defines = DOUBLE if dtype == "float64" else ()
    sizes = {"nb": nb, "n": n}
    check = {"nb": 37, "n": n}
    prepared = prepare(SPEC, defines=defines, params=sizes)
    row = {"n": n, "nb": nb, "dtype": dtype}
    for name, variant in (("default", plan_model.choose(prepared, sizes).variant),
                          ("square", SQUARE)):
        entry = {"variant": variant.to_json()}
        entry["check"] = checked(SPEC, "batched_mm", defines, variant, device, check)
        if entry["check"]["ok"]:
            program = compile_variant(prepared, variant, sizes).program
            entry["ms"] = time_program(device, program, sizes, args.repeats)
        row[name] = entry
    width = 8 if dtype == "float64" else 4
    row["compulsory_bytes"] = 3 * n * n * nb * width
    torch = _torch() if args.backend == "gpu" else None
    if torch is not None:
        t = getattr(torch, dtype)
        a = torch.rand(nb, n, n, dtype=t, device="cuda")
        b = torch.rand(nb, n, n, dtype=t, device="cuda")
        torch.backends.cuda.matmul.allow_tf32 = False
        row["torch_bmm_ms"] = _median_ms(torch, lambda: torch.bmm(a, b), **TORCH_TIMING)
        row["torch"] = torch.__version__
    print(json.dumps({k: row[k] for k in row if k not in ("default", "square")}
                     | {"default_ms": row["default"].get("ms"),
                        "square_ms": row["square"].get("ms")}), file=sys.stderr, flush=True)
    return row


def markdown(data: dict) -> str:
    lines = [f"# Batched small products on the {data['gpu']} ({data['date']})", "",
             "`tuning/batched.py`: `kernels/batched_mm.c` (nb products of n x n, elements "
             "one after another), polygpu's default plan and the fixed 32 x 32 block "
             "against torch.bmm in the same run. Each program was checked against the "
             "loop nest on the device at nb = 37 first. Roofline: the compulsory "
             "traffic (3 n^2 nb words) at 3000 GB/s.", "",
             "| dtype | n | nb | default block | default ms | roofline | 32 x 32 ms | "
             "torch.bmm ms | x bmm | x 32 x 32 |",
             "|---|--:|--:|---|--:|--:|--:|--:|--:|--:|"]

    def f(x, digits=3):
        return f"{x:.{digits}f}" if x is not None else ""

    for r in data["rows"]:
        ms, square, bmm = r["default"].get("ms"), r["square"].get("ms"), r.get("torch_bmm_ms")
        roof = r["compulsory_bytes"] / BANDWIDTH * 1e3
        block = " x ".join(str(t) for t in r["default"]["variant"]["threads"])
        lines.append(
            f"| {r['dtype']} | {r['n']} | {r['nb']} | {block} | {f(ms)} | "
            f"{f(roof / ms * 100 if ms else None, 1)}% | {f(square)} | {f(bmm)} | "
            f"{f(bmm / ms if bmm and ms else None, 2)} | "
            f"{f(square / ms if square and ms else None, 2)} |")
    for r in data["rows"]:
        for key in ("default", "square"):
            if not r[key]["check"]["ok"]:
                lines += ["", f"- {key} n = {r['n']} {r['dtype']}: {r[key]['check']['message']}"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=("gpu", "cpu"), default="gpu")
    p.add_argument("--small", action="store_true", help="small sizes (a dry run)")
    p.add_argument("--n", type=int, nargs="+", default=[2, 4, 8, 16, 32])
    p.add_argument("--dtype", action="append", choices=("float32", "float64"))
    p.add_argument("--megabytes", type=float, default=768.0,
                   help="the three arrays' size at each n (default 768 MB)")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--out")
    args = p.parse_args(argv)
    device = get_device(args.backend)
    rows = []
    for dtype in args.dtype or ["float32"]:
        width = 8 if dtype == "float64" else 4
        for n in args.n:
            nb = 53 if args.small else int(args.megabytes * 1e6 / (3 * n * n * width))
            rows.append(run_size(n, nb, dtype, args, device))
    data = {"gpu": getattr(device, "name", args.backend),
            "date": datetime.date.today().isoformat(), "rows": rows}
    text = markdown(data)
    print(text)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "batched.json").write_text(json.dumps(data, indent=1) + "\n")
        (out / "batched.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
