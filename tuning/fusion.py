"""Choosing what to fuse (seed 003, Fousek/Filipovic/Madzin; issue 23): seed 003's chain
``F = ||A B c|| (D E + D)`` over ``ni`` instances (``kernels/map_chain.c``: one loop nest
per elementary function, the intermediates ``M1 v1 s1 M2 M3`` local arrays) -- polygpu's
plans against torch in the same run.

Plans, each checked against the original nest on the device at ni = 37 first (and with
``--check-full`` at the timed size), then timed (CUDA events, one warm-up, median of
``--repeats`` within 1 s):

* ``default``: what ``compile -p`` picks (``search/plan_model.py``);
* ``unfused``: the model's best plan among the scheduler candidates that launch one
  kernel per group of nests, their intermediates through DRAM (every candidate but the
  ``fused batch``), and ``unfusedK`` its next ``--unfused`` ones (the table's "x
  unfused" is against the fastest measured);
* ``fused``: the model's best plan of the ``fused batch`` candidate -- every nest's
  instances of one element in one block (or a group of a block's threads), a barrier
  between the nests, the intermediates contracted into shared memory
  (``schedule/host.py``, ``memory/residence.py``); ``fused_global``: the same plan with
  its data left in global memory (no contraction); ``fused_eN``: the same plan with N
  elements a block (``--elements``);
* ``coverK``: the cover search's (``search/covers.py``) ``--covers`` best covers of the
  fused plan -- its kernels split into consecutive launches (``Variant.cuts``), rank K
  as the model predicts; the table of predicted against measured ranks (the paper's
  Figures 4-5), and with ``--out`` its plot ``fusion_covers.png``;
* ``--also FILE``'s variants (``tuning/probes/`` holds those of recorded runs);
* with ``--mappings``, every plan the model ranked.

torch: eager (``torch.bmm`` for the products, as seed 003's digest measured) and
``torch.compile`` of the same function.  Instances per second and the fraction of the
compulsory roofline: 71 input and 25 output floats an instance (384 bytes) over the
copy rate measured in the same run.  At the paper's 31744 instances (12 MB: in L2, a
run of a few microseconds) a run's time is mostly launch latency, for polygpu's plans
and torch alike; 2^22 instances (1.6 GB) measure the bandwidth regime.

    python tuning/fusion.py --out tuning/results/<gpu>
    python tuning/fusion.py --ni 4194304 --mappings --check-full
    python tuning/fusion.py --ni 31744 4194304 --covers 8 --unfused 0 --elements
    python tuning/fusion.py --backend cpu --small           # dry run on the emulator
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tuning"))

from allpairs import cell, checked, time_program  # noqa: E402
from batched import TORCH_TIMING, run_record, write_run  # noqa: E402
from polybench import _median_ms, _torch  # noqa: E402

from polygpu.codegen import cuda, staging  # noqa: E402
from polygpu.pipeline import compile_variant, prepare  # noqa: E402
from polygpu.runtime.device import get_device  # noqa: E402
from polygpu.schedule.variant import Variant  # noqa: E402
from polygpu.search import covers, plan_model  # noqa: E402
from polygpu.search.measurement import canonical  # noqa: E402

SPEC = str(ROOT / "kernels" / "map_chain.c")
FUNCTION = "map_chain"
BYTES_PER_INSTANCE = (9 + 9 + 3 + 25 + 25 + 25) * 4  # compulsory: 71 floats in, 25 out
CHECK = {"ni": 37}


def fused(prepared, variant) -> bool:
    """Whether ``variant`` runs the ``fused batch`` candidate."""
    host = prepared.candidates[variant.candidate].host
    return host is not None and host.kind == "fused batch"


def plans(prepared, sizes: dict, args) -> list[tuple[str, object, float | None]]:
    """(name, variant, predicted seconds) of the plans to check and time."""
    choice = plan_model.choose(prepared, sizes)
    ranked = [r for r in choice.ranking if r.seconds != float("inf")]
    out = [("default", choice.variant, next((r.seconds for r in ranked
                                             if r.variant == choice.variant), None))]
    unfused = next((r for r in ranked if not fused(prepared, r.variant)), None)
    best_fused = next((r for r in ranked if fused(prepared, r.variant)), None)
    if unfused is not None:
        out.append(("unfused", unfused.variant, unfused.seconds))
    # the model's next unfused plans: "polygpu's best unfused plan" is the best measured
    others = [r for r in ranked if not fused(prepared, r.variant)][1:1 + args.unfused]
    out += [(f"unfused{k + 1}", r.variant, r.seconds) for k, r in enumerate(others)]
    if best_fused is not None:
        out.append(("fused", best_fused.variant, best_fused.seconds))
        if best_fused.variant.resident:  # the same plan, its intermediates in DRAM
            out.append(("fused_global", replace(best_fused.variant, resident=False), None))
        for e in args.elements:
            if e != best_fused.variant.elements_per_block:
                out.append((f"fused_e{e}", replace(best_fused.variant, elements_per_block=e),
                            None))
        if args.covers and covers.fused(prepared, best_fused.variant):
            for k, r in enumerate(covers.rank_covers(prepared, best_fused.variant, sizes,
                                                     top=args.covers)):
                out.append((f"cover{k}", r.variant, r.seconds))
    for k, extra in enumerate(args.also_variants):
        out.append((extra.get("name", f"also{k}"), Variant.from_json(extra["variant"]), None))
    if args.mappings:
        for k, r in enumerate(ranked):
            out.append((f"plan{k}", r.variant, r.seconds))
    seen, unique = set(), []
    for name, variant, seconds in out:
        key = canonical(variant.to_json())
        if key not in seen or name.startswith("cover"):  # (a cover keeps its rank)
            seen.add(key)
            unique.append((name, variant, seconds))
    return unique


def chain_torch(torch, ni: int):
    """The chain's inputs (AoS, as the kernel's) and the eager function."""
    g = torch.Generator(device="cuda").manual_seed(7)
    shapes = {"A": (ni, 3, 3), "B": (ni, 3, 3), "c": (ni, 3), "D": (ni, 5, 5),
              "E": (ni, 5, 5)}
    x = {k: torch.rand(*s, device="cuda", generator=g) for k, s in shapes.items()}

    def chain(A, B, c, D, E):
        v1 = torch.bmm(torch.bmm(A, B), c.unsqueeze(-1)).squeeze(-1)
        s1 = torch.sqrt((v1 * v1).sum(-1))
        return (torch.bmm(D, E) + D) * s1[:, None, None]

    return x, chain


def time_torch(ni: int) -> dict:
    torch = _torch()
    if torch is None:
        return {}
    torch.backends.cuda.matmul.allow_tf32 = False
    x, chain = chain_torch(torch, ni)
    out = {"torch": torch.__version__,
           "eager_ms": _median_ms(torch, lambda: chain(**x), **TORCH_TIMING)}
    try:
        compiled = torch.compile(chain)
        compiled(**x)
        out["compile_ms"] = _median_ms(torch, lambda: compiled(**x), **TORCH_TIMING)
    except Exception as e:  # noqa: BLE001 -- a missing compiler is a note, not a failure
        out["compile_error"] = f"{type(e).__name__}: {str(e)[:200]}"
    return out


def run_size(ni: int, args, device) -> dict:
    sizes = {"ni": ni}
    prepared = prepare(SPEC, FUNCTION, params=sizes)
    row: dict = {"ni": ni, "plans": {}}
    for name, variant, seconds in plans(prepared, sizes, args):
        entry = {"variant": variant.to_json(), "fused": fused(prepared, variant),
                 "predicted_ms": seconds * 1e3 if seconds is not None else None}
        entry["check"] = checked(SPEC, FUNCTION, (), variant, device, CHECK)
        if entry["check"]["ok"] and args.check_full and name in ("default", "unfused",
                                                                  "fused"):
            entry["check_full"] = checked(SPEC, FUNCTION, (), variant, device, sizes)
        if entry["check"]["ok"] and entry.get("check_full", {"ok": True})["ok"]:
            program = compile_variant(prepared, variant, sizes).program
            entry["launches"] = len(program.launches)
            entry["ms"] = time_program(device, program, sizes, args.repeats)
        row["plans"][name] = entry
        print(json.dumps({"ni": ni, "plan": name, "ms": entry.get("ms"),
                          "predicted_ms": entry["predicted_ms"],
                          "check": entry["check"]["message"]}), file=sys.stderr, flush=True)
    if args.backend == "gpu" and not args.small and not args.no_torch:
        row.update(time_torch(ni))
    return row


def markdown(data: dict) -> str:
    rate = data.get("copy_gbs")
    lines = [f"# Seed 003's chain on the {data['gpu']} ({data['date']})", "",
             "`tuning/fusion.py`: `kernels/map_chain.c`, float; every plan checked against the "
             "loop nest on the device at ni = 37 first; CUDA events, median. Roofline: 384 "
             f"compulsory bytes an instance at the copy rate of the same run "
             f"({cell(rate, 0) if rate else '3000 assumed'} GB/s).", ""]
    for row in data["rows"]:
        ni = row["ni"]
        roof_ms = ni * BYTES_PER_INSTANCE / ((rate or 3000) * 1e9) * 1e3
        eager = row.get("eager_ms")
        error = f" ({row['compile_error']})" if "compile_error" in row else ""
        lines += [f"## ni = {ni}", "",
                  f"torch eager {cell(eager)} ms, torch.compile "
                  f"{cell(row.get('compile_ms'))} ms{error}; roofline {roof_ms:.3f} ms.", "",
                  "| plan | fused | launches | predicted ms | ms | G instances/s | roofline "
                  "| x unfused | x torch eager | check |",
                  "|---|---|--:|--:|--:|--:|--:|--:|--:|---|"]
        # polygpu's best unfused plan: the fastest measured plan that is not fused
        unfused = min((e["ms"] for e in row["plans"].values()
                       if not e["fused"] and e.get("ms")), default=None)
        for name, e in row["plans"].items():
            ms = e.get("ms")
            lines.append(
                f"| {name} | {'yes' if e['fused'] else 'no'} | {e.get('launches', '')} | "
                f"{cell(e['predicted_ms'])} | {cell(ms)} | "
                f"{cell(ni / (ms * 1e-3) / 1e9 if ms else None, 2)} | "
                f"{cell(roof_ms / ms * 100 if ms else None, 1)}{'%' if ms else ''} | "
                f"{cell(unfused / ms if ms and unfused else None, 2)} | "
                f"{cell(eager / ms if ms and eager else None, 1)} | "
                f"{e['check']['message'][:60]} |")
        lines += ["", "Variants: " + "; ".join(
            f"{name} `{json.dumps(e['variant'])}`" for name, e in row["plans"].items()
            if name in ("default", "unfused", "fused")), ""]
        lines += cover_ranks(row)
    return "\n".join(lines) + "\n"


def measured_covers(row: dict) -> list[tuple[int, int, tuple, float, float]]:
    """The timed covers of a row: (predicted rank, measured rank, cuts, predicted ms,
    measured ms), by predicted rank."""
    timed = [(int(name[len("cover"):]), tuple(e["variant"].get("cuts", ())),
              e["predicted_ms"], e["ms"]) for name, e in row["plans"].items()
             if name.startswith("cover") and e.get("ms")]
    by_time = sorted(timed, key=lambda t: t[3])
    out = []
    for t in sorted(timed):
        rank, cuts, predicted, ms = t
        out.append((rank, by_time.index(t), cuts, predicted, ms))
    return out


def cover_ranks(row: dict) -> list[str]:
    """Markdown: the covers' predicted against measured ranks (seed 003, Figures 4-5),
    and where the measured best stood in the prediction."""
    covers_row = measured_covers(row)
    if not covers_row:
        return []
    best = min(covers_row, key=lambda c: c[4])
    lines = [f"Covers (`--covers`): the measured best was predicted rank {best[0]} of "
             f"{len(covers_row)}.", "",
             "| predicted rank | measured rank | cuts | predicted ms | ms |",
             "|--:|--:|---|--:|--:|"]
    lines += [f"| {p} | {m} | {list(cuts) or 'one launch'} | {cell(pm)} | {cell(ms)} |"
              for p, m, cuts, pm, ms in covers_row]
    return lines + [""]


def plot_covers(data: dict, path: Path) -> None:
    """Predicted against measured rank of the covers, one panel per instance count."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in data["rows"] if measured_covers(r)]
    if not rows:
        return
    fig, axes = plt.subplots(1, len(rows), figsize=(4.5 * len(rows), 4), squeeze=False)
    for ax, row in zip(axes[0], rows, strict=True):
        ranks = measured_covers(row)
        ax.scatter([p for p, *_ in ranks], [m for _, m, *_ in ranks])
        top = max(len(ranks) - 1, 1)
        ax.plot([0, top], [0, top], linestyle=":", color="grey")
        ax.set_xlabel("predicted rank")
        ax.set_ylabel("measured rank")
        ax.set_title(f"ni = {row['ni']}")
    fig.suptitle(f"Seed 003's chain: covers on the {data['gpu']} ({data['date']})")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=("gpu", "cpu"), default="gpu")
    p.add_argument("--small", action="store_true", help="ni = 53 only (a dry run)")
    p.add_argument("--ni", type=int, nargs="+", default=[31744, 1 << 22])
    p.add_argument("--elements", type=int, nargs="*", default=[1, 2, 8, 16],
                   help="also time the fused plan with these elements a block")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--unfused", type=int, default=4, metavar="K",
                   help="also time the model's next K unfused plans (default 4)")
    p.add_argument("--mappings", action="store_true",
                   help="also check and time every plan the model ranked")
    p.add_argument("--check-full", action="store_true",
                   help="also check the default, unfused and fused plans at the timed size")
    p.add_argument("--covers", type=int, default=0, metavar="K",
                   help="also time the cover search's K best covers of the fused plan")
    p.add_argument("--also", metavar="JSON",
                   help='further variants to check and time: a list of {"variant": {...}} '
                   'with an optional "name"')
    p.add_argument("--block-copies-below", type=int, metavar="THREADS",
                   help="probe: groups narrower than this copy their resident buffers "
                   "with the whole block (codegen/cuda.py BLOCK_COPIES_BELOW; 0: never)")
    p.add_argument("--batched-copy-bytes", type=int, metavar="BYTES",
                   help="probe: a thread's copy-in loads held in registers before their "
                   "stores (codegen/staging.py BATCHED_COPY_BYTES; 0: one loop a buffer)")
    p.add_argument("--word-copies", action="store_true",
                   help="probe: full blocks copy their elements' ranges word by word, not "
                   "in 16-byte vectors (codegen/staging.py BLOCK_RANGES)")
    p.add_argument("--no-torch", action="store_true",
                   help="time polygpu's plans only (a probe of the code generator)")
    p.add_argument("--out")
    args = p.parse_args(argv)
    args.also_variants = json.loads(Path(args.also).read_text()) if args.also else []
    if args.block_copies_below is not None:  # a probe of the code generator's rule
        cuda.BLOCK_COPIES_BELOW = args.block_copies_below
    if args.batched_copy_bytes is not None:
        staging.BATCHED_COPY_BYTES = args.batched_copy_bytes
    if args.word_copies:
        staging.BLOCK_RANGES = False
    device = get_device(args.backend)
    rows = [run_size(ni, args, device) for ni in ([53] if args.small else args.ni)]
    data = run_record(device, args.backend, rows, args.backend == "gpu" and not args.small)
    out = write_run(data, markdown(data), args.out, "fusion")
    if out is not None:
        plot_covers(data, out / "fusion_covers.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
