"""Run ``polygpu check --backend gpu`` on the paper's kernels and record the results.

Usage (on a machine with a GPU and PyCUDA):
``python tuning/gpu_check.py [SIZES...] [--kernel SPEC]... [--variant NAME]...``.
Each check is the real command line, run as a subprocess; its command, verdict and
worst error go to ``tuning/results/<gpu>/check_gpu.md`` (and ``.json``), with the GPU
name, driver and date.  Correctness only: timings belong to the tuning experiments.

``python tuning/gpu_check.py --catalog [--kernel FILE]...`` checks every kernel of
``kernels/catalog.json`` at its ``gpu`` sizes instead (``check_gpu_kernels.md``/``.json``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ["kernels/mv.c", "kernels/tmv.c", "kernels/mvt.c", "kernels/mm.c",
           "kernels/tmv.py:tmv", "kernels/jacobi1d.c", "kernels/conv1d.c"]
VARIANTS = {
    "default": [],
    "register-tiled": ["--tile", "8,64", "--threads", "4,32", "--variant", '{"jam": true}'],
    "no-shared": ["--variant", '{"shared": false, "registers": false}'],
    "shared-unpadded": ["--variant", '{"padding": 0}'],
    "blocked": ["--tile", "4,512", "--threads", "4,128", "--variant", '{"blocked": true}'],
}


def gpu_identity() -> tuple[str, str]:
    out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                          "--format=csv,noheader"], capture_output=True, text=True).stdout
    name, driver = (x.strip() for x in out.splitlines()[0].split(","))
    return name, driver


def main(sizes: list[int], kernels: list[str], variants: list[str]) -> int:
    name, driver = gpu_identity()
    out = ROOT / "tuning" / "results" / re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-")
    out.mkdir(parents=True, exist_ok=True)
    previous = out / "check_gpu.json"
    rows = json.loads(previous.read_text())["checks"] if previous.exists() else []
    failures = 0
    for spec in kernels:
        for n in sizes:
            for label in variants:
                extra = VARIANTS[label]
                rows = [r for r in rows if (r["kernel"], r["n"], r["variant"]) !=
                        (spec, n, label)]
                cmd = ["polygpu", "check", spec, "-p", f"n={n}", "--backend", "gpu",
                       "--seed", "1", *extra]
                result = subprocess.run([sys.executable, "-m", "polygpu", *cmd[1:]],
                                        cwd=ROOT, capture_output=True, text=True)
                text = (result.stdout + result.stderr).strip()
                worst = re.search(r"worst: (.*?)\)", text)
                rows.append({"command": " ".join(c if " " not in c and '"' not in c
                                                 else f"'{c}'" for c in cmd),
                             "kernel": spec, "n": n, "variant": label,
                             "exit": result.returncode,
                             "verdict": text.splitlines()[0] if text else "",
                             "worst": worst.group(1) if worst else ""})
                failures += result.returncode != 0
                print(rows[-1]["exit"], rows[-1]["command"], rows[-1]["worst"], flush=True)
                _write(out, name, driver, rows)  # after every check: a timeout loses nothing
    return 1 if failures else 0


def _write(out: Path, name: str, driver: str, rows: list[dict]) -> None:
    date = datetime.date.today().isoformat()
    (out / "check_gpu.json").write_text(json.dumps(
        {"gpu": name, "driver": driver, "date": date, "checks": rows}, indent=2) + "\n")
    lines = [f"# `polygpu check --backend gpu` on {name}", "",
             f"Date {date}, driver {driver}. Inputs uniform in [0.5, 1.5), seed 1; the "
             "reference is the original C (or Python) function in float64 (C: its "
             "dependence-free outer loops on OpenMP threads, bit-identical to the "
             "sequential run); float32 tolerance |got - ref| <= 1e-5 + 1e-3 |ref| "
             "(docs/runtime.md).", "",
             "| kernel | n | variant | exit | worst element | command |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['kernel']} | {r['n']} | {r['variant']} | {r['exit']} | "
                     f"{r['worst']} | `{r['command']}` |")
    passed = sum(1 for r in rows if r["exit"] == 0)
    lines += ["", f"{passed} of {len(rows)} checks passed."]
    (out / "check_gpu.md").write_text("\n".join(lines) + "\n")


def main_catalog(keys: list[str] | None, variants: list[str]) -> int:
    """Every catalog kernel at its GPU sizes (``--catalog``)."""
    name, driver = gpu_identity()
    out = ROOT / "tuning" / "results" / re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-")
    out.mkdir(parents=True, exist_ok=True)
    catalog = json.loads((ROOT / "kernels" / "catalog.json").read_text())
    store = out / "check_gpu_kernels.json"
    rows = json.loads(store.read_text())["checks"] if store.exists() else []
    failures = 0
    for key in keys or list(catalog):
        entry = catalog[key]
        spec = f"kernels/{key}" + (f":{entry['function']}" if key.endswith(".py") else "")
        sizes = [x for p, v in entry["gpu"].items() for x in ("-p", f"{p}={v}")]
        for label in variants:
            cmd = ["polygpu", "check", spec, *sizes, "--backend", "gpu", "--seed", "1",
                   *VARIANTS[label]]
            result = subprocess.run([sys.executable, "-m", "polygpu", *cmd[1:]], cwd=ROOT,
                                    capture_output=True, text=True)
            text = (result.stdout + result.stderr).strip()
            worst = re.search(r"worst: (.*?)\)", text)
            rows = [r for r in rows if (r["kernel"], r["variant"]) != (key, label)]
            rows.append({"kernel": key, "params": entry["gpu"], "variant": label,
                         "exit": result.returncode,
                         "verdict": text.splitlines()[-1] if text else "",
                         "worst": worst.group(1) if worst else "",
                         "command": " ".join(c if " " not in c and '"' not in c
                                             else f"'{c}'" for c in cmd)})
            failures += result.returncode != 0
            print(rows[-1]["exit"], rows[-1]["command"], rows[-1]["worst"], flush=True)
            date = datetime.date.today().isoformat()
            store.write_text(json.dumps({"gpu": name, "driver": driver, "date": date,
                                         "checks": rows}, indent=1) + "\n")
            lines = [f"# `polygpu check --backend gpu` on every kernel, {name}", "",
                     f"Date {date}, driver {driver}; sizes from `kernels/catalog.json` "
                     "(`gpu`; Python kernels smaller: their reference is the interpreted "
                     "function). Seed 1, float32 tolerance 1e-5 + 1e-3 |ref|.", "",
                     "| kernel | sizes | variant | exit | worst element |",
                     "|---|---|---|---|---|"]
            lines += [f"| {r['kernel']} | {' '.join(f'{p}={v}' for p, v in r['params'].items())}"
                      f" | {r['variant']} | {r['exit']} | {r['worst'] or r['verdict']} |"
                      for r in sorted(rows, key=lambda r: (r["kernel"], r["variant"]))]
            passed = sum(1 for r in rows if r["exit"] == 0)
            lines += ["", f"{passed} of {len(rows)} checks passed."]
            (out / "check_gpu_kernels.md").write_text("\n".join(lines) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--catalog", action="store_true",
                        help="every kernel of kernels/catalog.json at its gpu sizes")
    parser.add_argument("sizes", nargs="*", type=int, default=[1000, 4096])
    parser.add_argument("--kernel", action="append", help="only these (default: all)")
    parser.add_argument("--variant", action="append", choices=sorted(VARIANTS),
                        help="only these variants (default: all)")
    args = parser.parse_args()
    if args.catalog:
        sys.exit(main_catalog(args.kernel, args.variant or ["default"]))
    sys.exit(main(args.sizes, args.kernel or KERNELS, args.variant or list(VARIANTS)))
