"""Choosing what to fuse in launched programs (issue 23): 3mm and the BLAS-2 sequence
gemver -- every candidate's best plan and every split of its fused nests
(``Variant.splits``, ``search/covers.py rank_splits``), the model's pick among them,
against torch eager and ``torch.compile`` of the same computation in the same run.

Plans of each program, each checked against the original nest on the device at odd
sizes first, then timed (CUDA events, one warm-up, median of ``--repeats`` within 1 s):

* ``default``: what ``compile -p`` picks (``plan_model.choose``: splits of its top plan
  ranked beside the other plans);
* ``cK`` / ``cK_split...``: the model's best plan of scheduler candidate K (within
  ``--within`` times the default's predicted time) and that plan with each set of split
  points; the *most fused* plan is the one with the fewest launches, the *unfused* one
  every nest its own kernel (all split points of the candidate with the most kernels).

The table gives launches, predicted and measured ms, the ratio to torch eager, and the
fraction of the roofline: 3mm against the FP32 rate of cuBLAS SGEMM (51 TFLOP/s on the
H100, ``--flop-rate``), gemver against its compulsory traffic (A read and written, the
vectors once) at the copy rate measured in the same run; the predicted-vs-measured rank
of the split plans.

    python tuning/fusion_programs.py --out tuning/results/<gpu>
    python tuning/fusion_programs.py --backend cpu --small       # a dry run
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tuning"))

from allpairs import cell, checked, time_program  # noqa: E402
from batched import TORCH_TIMING, run_record, write_run  # noqa: E402
from polybench import _median_ms, _torch  # noqa: E402

from polygpu.pipeline import compile_variant, prepare  # noqa: E402
from polygpu.runtime.device import get_device  # noqa: E402
from polygpu.schedule.splits import split_points  # noqa: E402
from polygpu.search import covers, plan_model  # noqa: E402


def _mm3_torch(torch, s):
    g = torch.Generator(device="cuda").manual_seed(7)
    x = {k: torch.rand(*shape, device="cuda", generator=g) for k, shape in (
        ("a", (s["ni"], s["nk"])), ("b", (s["nk"], s["nj"])), ("c", (s["nj"], s["nm"])),
        ("d", (s["nm"], s["nl"])))}

    def mm3(a, b, c, d):
        return (a @ b) @ (c @ d)

    return x, mm3


def _gemver_torch(torch, s):
    n = s["n"]
    g = torch.Generator(device="cuda").manual_seed(7)
    x = {k: torch.rand(*shape, device="cuda", generator=g) for k, shape in (
        ("a", (n, n)), ("u1", (n,)), ("v1", (n,)), ("u2", (n,)), ("v2", (n,)),
        ("w", (n,)), ("x", (n,)), ("y", (n,)), ("z", (n,)))}

    def gemver(a, u1, v1, u2, v2, w, x, y, z, alpha=1.5, beta=1.2):
        a = a + torch.outer(u1, v1) + torch.outer(u2, v2)
        x = x + beta * (a.t() @ y) + z
        return a, x, w + alpha * (a @ x)

    return x, gemver


PROGRAMS = {
    "mm3": {"spec": "kernels/mm3.c", "function": "mm3",
            "sizes": {"ni": 4096, "nj": 4096, "nk": 4096, "nl": 4096, "nm": 4096},
            "small": {"ni": 45, "nj": 51, "nk": 39, "nl": 55, "nm": 43},
            "check": {"ni": 37, "nj": 41, "nk": 29, "nl": 43, "nm": 31},
            "flops": lambda s: 2 * (s["ni"] * s["nj"] * s["nk"] + s["nj"] * s["nl"] * s["nm"]
                                    + s["ni"] * s["nl"] * s["nj"]),
            "torch": _mm3_torch},
    "gemver": {"spec": "kernels/gemver.c", "function": "gemver",
               "sizes": {"n": 8192}, "small": {"n": 53}, "check": {"n": 37},
               # A read and written, u1 v1 u2 v2 y z read, x w read and written
               "bytes": lambda s: 4 * (2 * s["n"] ** 2 + 10 * s["n"]),
               "torch": _gemver_torch},
}


def plans(prepared, sizes: dict, within: float) -> list[tuple[str, object, float]]:
    """(name, variant, predicted seconds): the default, then per candidate its best
    plan and that plan with each set of split points."""
    choice = plan_model.choose(prepared, sizes)
    ranked = [e for e in choice.ranking if e.seconds != float("inf")]
    out = [("default", choice.variant, ranked[0].seconds)]
    best = ranked[0].seconds
    for c in range(len(prepared.candidates)):
        top = next((e for e in ranked if e.variant.candidate == c
                    and not e.variant.splits), None)
        if top is None or top.seconds > best * within:
            continue
        for e in covers.rank_splits(prepared, top.variant, sizes, top=64, whole=top):
            tag = "_split" + "_".join(map(str, e.variant.splits)) if e.variant.splits else ""
            out.append((f"c{c}{tag}", e.variant, e.seconds))
    seen, unique = set(), []
    for name, variant, seconds in out:
        if variant not in seen:
            seen.add(variant)
            unique.append((name, variant, seconds))
    return unique


def time_torch(program: dict, sizes: dict) -> dict:
    torch = _torch()
    if torch is None:
        return {}
    torch.backends.cuda.matmul.allow_tf32 = False
    x, fn = program["torch"](torch, sizes)
    out = {"torch": torch.__version__,
           "eager_ms": _median_ms(torch, lambda: fn(**x), **TORCH_TIMING)}
    try:
        compiled = torch.compile(fn)
        compiled(**x)
        out["compile_ms"] = _median_ms(torch, lambda: compiled(**x), **TORCH_TIMING)
    except Exception as e:  # noqa: BLE001 -- a missing compiler is a note, not a failure
        out["compile_error"] = f"{type(e).__name__}: {str(e)[:200]}"
    return out


def run_program(name: str, args, device) -> dict:
    program = PROGRAMS[name]
    sizes = program["small"] if args.small else program["sizes"]
    spec = str(ROOT / program["spec"])
    prepared = prepare(spec, program["function"], params=sizes)
    row: dict = {"program": name, "sizes": sizes, "plans": {}}
    for plan, variant, seconds in plans(prepared, sizes, args.within):
        tr = prepared.transformation(variant)
        entry = {"variant": variant.to_json(), "predicted_ms": seconds * 1e3,
                 "kernels": [list(k.statements) for k in tr.kernels],
                 "split_points": list(split_points(prepared.analysis,
                                                   prepared.candidates[variant.candidate]))}
        entry["check"] = checked(spec, program["function"], (), variant, device,
                                 program["check"])
        if entry["check"]["ok"]:
            compiled = compile_variant(prepared, variant, sizes).program
            entry["launches"] = len(compiled.launches)
            entry["ms"] = time_program(device, compiled, sizes, args.repeats)
        row["plans"][plan] = entry
        print(json.dumps({"program": name, "plan": plan, "ms": entry.get("ms"),
                          "predicted_ms": entry["predicted_ms"],
                          "check": entry["check"]["message"]}), file=sys.stderr, flush=True)
    if args.backend == "gpu" and not args.small:
        row.update(time_torch(program, sizes))
    return row


def markdown(data: dict, flop_rate: float) -> str:
    rate = data.get("copy_gbs") or 3000
    lines = [f"# Fusion choices in launched programs on the {data['gpu']} ({data['date']})",
             "", "`tuning/fusion_programs.py`: every plan checked against the loop nest on "
             "the device at odd sizes first; CUDA events, median.", ""]
    for row in data["rows"]:
        program = PROGRAMS[row["program"]]
        sizes = row["sizes"]
        if "flops" in program:
            roof_ms = program["flops"](sizes) / (flop_rate * 1e12) * 1e3
            roof = f"FP32 at {flop_rate:g} TFLOP/s"
        else:
            roof_ms = program["bytes"](sizes) / (rate * 1e9) * 1e3
            roof = f"compulsory traffic at {rate:.0f} GB/s"
        eager = row.get("eager_ms")
        timed = {k: e for k, e in row["plans"].items() if e.get("ms")}
        fastest = min(timed, key=lambda k: timed[k]["ms"], default=None)
        lines += [f"## {row['program']} at " + ", ".join(f"{k} = {v}" for k, v in
                                                         sizes.items()), "",
                  f"torch eager {cell(eager)} ms, torch.compile {cell(row.get('compile_ms'))}"
                  f" ms; roofline ({roof}) {roof_ms:.3f} ms; fastest plan: {fastest}.", "",
                  "| plan | kernels | launches | predicted ms | ms | roofline | x torch eager "
                  "| check |", "|---|---|--:|--:|--:|--:|--:|---|"]
        for name, e in row["plans"].items():
            ms = e.get("ms")
            kernels = " / ".join(",".join(k) for k in e["kernels"])
            lines.append(f"| {name} | {kernels} | {e.get('launches', '')} | "
                         f"{cell(e['predicted_ms'])} | {cell(ms)} | "
                         f"{cell(roof_ms / ms * 100 if ms else None, 1)}{'%' if ms else ''} | "
                         f"{cell(eager / ms if ms and eager else None, 2)} | "
                         f"{e['check']['message'][:50]} |")
        by_predicted = sorted(timed, key=lambda k: timed[k]["predicted_ms"])
        by_measured = sorted(timed, key=lambda k: timed[k]["ms"])
        if fastest is not None:
            lines += ["", f"Measured best {fastest}: predicted rank "
                      f"{by_predicted.index(fastest)} of {len(timed)}; the default "
                      f"measured rank {by_measured.index('default')}." if "default" in timed
                      else "", ""]
        lines += ["Variants: " + "; ".join(f"{k} `{json.dumps(e['variant'])}`"
                                           for k, e in row["plans"].items()), ""]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=("gpu", "cpu"), default="gpu")
    p.add_argument("--small", action="store_true", help="small odd sizes (a dry run)")
    p.add_argument("--programs", nargs="+", choices=sorted(PROGRAMS), default=sorted(PROGRAMS))
    p.add_argument("--within", type=float, default=4.0,
                   help="a candidate's plans are timed when its best is predicted within "
                   "this factor of the default (default 4)")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--flop-rate", type=float, default=51.0, help="TFLOP/s of the roofline")
    p.add_argument("--out")
    args = p.parse_args(argv)
    device = get_device(args.backend)
    rows = [run_program(name, args, device) for name in args.programs]
    data = run_record(device, args.backend, rows, args.backend == "gpu" and not args.small)
    write_run(data, markdown(data, args.flop_rate), args.out, "fusion_programs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
