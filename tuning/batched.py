"""Batches of small elements (seed 000, Ha/King/Fu/Kirby 2013; issue 21): polygpu's default
plan for a batch of nb small elements, one after another (AoS), against torch in the
same run, and against the fixed block the default used before blocks were fitted to
small elements (``space.fitted_threads``): 32 x 32 threads over the two innermost loops
(gemm and gemv; dot maps one loop).

Operations (``--op``): ``gemm`` (``kernels/batched_mm.c``, n x n products; torch.bmm),
``gemv`` (``kernels/batched_gemv.c``, n x n matrix times n-vector; torch.bmm with a
column) and ``dot`` (``kernels/batched_dot.c``, n-vectors; ``(x * y).sum(-1)``).

For each n: the polygpu programs are checked against the original loop nest on the
device at nb = 37 first (the issue's odd sizes), then timed at full size with CUDA
events (one warm-up, median of ``--repeats``, stopping after 1 s); torch on the same
shapes (no TF32), batched and as a loop of single calls (1000 timed, scaled).
``roofline`` is the compulsory traffic (each array read or written once) over the copy
rate measured in the same run (3000 GB/s without torch).

``cholesky`` (``kernels/batched_cholesky.c``: in-place factor and solve of S + 2n I)
against ``torch.linalg.cholesky`` + ``torch.cholesky_solve``; ``cholesky_soa`` the same
with the elements interleaved (``kernels/batched_cholesky_soa.c``, structure of arrays:
torch timed on its own AoS layout, no transposition counted); ``cholesky_upper`` in the
upper triangle (``kernels/batched_cholesky_upper.c``, torch with ``upper=True``).
``--mappings`` also checks and times every plan the default ranked (thread per element,
one block per element with the element's steps inside, its element resident in shared
memory or not, ...): the model's pick against the best.

``--plot JSON`` draws, per operation and dtype of a recorded run, the best plan of
each execution model (a thread or a group of a block per element, a warp per element, a
block per element) over n with the default's pick and torch, the crossover from thread-
to device-steps mappings marked (also written after a ``--mappings`` run).

``--check-full`` also checks the default (and ``--also``'s variants) at the timed sizes;
``--check-only`` does only that for the default (nb = 37 and the timed sizes, nothing
timed: the issue's verification "on the GPU at full size").

``--also FILE`` checks and times further variants beside the default (a JSON list of
``{"variant": {...}}`` with optional ``"op"``, ``"n"`` and ``"dtype"`` saying where each
applies; ``tuning/probes/`` holds the ones of recorded runs).

``gemm_soa``, ``gemv_soa``, ``dot_soa`` (``kernels/batched_*_soa.c``): the same
operations on interleaved elements (entry (i, j) of every element one row), torch timed
on its own AoS layout (no transposition counted, ``torch_ms``) and on the interleaved
layout (``torch_soa_ms``: permuted views into torch.bmm, the result copied back
interleaved).  polygpu's plans there may run on an element-outermost copy, transposed
in and out (``relayout`` variants, transform/layout.py); ``--layouts`` also times the
model's best plan of the layout the default did not take.

    python tuning/batched.py --op gemm --op gemv --op dot --out tuning/results/<gpu>
    python tuning/batched.py --op cholesky --n 8 16 32 64 --mappings
    python tuning/batched.py --op gemm --n 8 16 \
        --also tuning/probes/batched_blas_final2_2026-11-29.json
    python tuning/batched.py --op gemm_soa --n 16 32 64 128 --layouts --megabytes 1536
    python tuning/batched.py --op gemm --op gemv --op dot --megabytes 1536 --check-only
    python tuning/batched.py --backend cpu --small                  # dry run
    python tuning/batched.py --plot tuning/results/<gpu>/batched_cholesky_groups.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tuning"))

from allpairs import cell, checked, time_program  # noqa: E402
from polybench import _median_ms, _torch  # noqa: E402

from polygpu.pipeline import compile_variant, prepare  # noqa: E402
from polygpu.runtime.device import get_device  # noqa: E402
from polygpu.schedule.variant import Variant  # noqa: E402
from polygpu.search import plan_model  # noqa: E402
from polygpu.search.measurement import canonical  # noqa: E402

KERNELS = {"gemm": ("batched_mm.c", "batched_mm"), "gemv": ("batched_gemv.c", "batched_gemv"),
           "dot": ("batched_dot.c", "batched_dot"),
           "cholesky": ("batched_cholesky.c", "batched_cholesky"),
           "cholesky_soa": ("batched_cholesky_soa.c", "batched_cholesky_soa"),
           "cholesky_upper": ("batched_cholesky_upper.c", "batched_cholesky_upper"),
           "gemm_soa": ("batched_mm_soa.c", "batched_mm_soa"),
           "gemv_soa": ("batched_gemv_soa.c", "batched_gemv_soa"),
           "dot_soa": ("batched_dot_soa.c", "batched_dot_soa")}
BANDWIDTH = 3000e9  # bytes/s: the H100's copy rate (about 2975 GB/s measured)
COPY_BYTES = 768e6  # the copy that measures a GPU's rate: 384 MB read, 384 MB written


def copy_rate() -> float | None:
    """This GPU's copy rate in bytes/s (torch, device to device, 384 MB each way), the
    roofline's bandwidth where it is measured; None without torch."""
    torch = _torch()
    if torch is None:
        return None
    src = torch.rand(int(COPY_BYTES / 8), device="cuda")
    dst = torch.empty_like(src)
    return COPY_BYTES / (_median_ms(torch, lambda: dst.copy_(src), **TORCH_TIMING) * 1e-3)
SQUARE = Variant(tile=(32, 32), threads=(8, 32))  # the default's block before fitting
DOUBLE = ("DATA_TYPE=double", "SQRT_FUN=sqrt")  # sqrtf would round to float
TORCH_TIMING = {"repeats": 20, "warmup": 1, "budget_ms": 1000.0}


def words(op: str, n: int, nb: int) -> int:
    """Compulsory words moved: every input read and the output written once."""
    return nb * {"gemm": 3 * n * n, "gemv": n * n + 2 * n, "dot": 2 * n + 1,
                 "cholesky": 2 * (n * n + n),  # a and b read and written
                 }[layout(op)[0]]


def layout(op: str) -> tuple[str, str]:
    """(operation, layout) of ``op``: ``gemm_soa`` is gemm on interleaved elements
    (``cholesky_upper``: the upper triangle's factorization, elements as given)."""
    base, _, rest = op.partition("_")
    return base, "SoA" if rest == "soa" else "AoS"


def _torch_calls(torch, op: str, n: int, count: int, dtype: str):
    """``count`` elements of ``op``'s inputs on the device (cholesky: S + 2n I, lower
    triangle of S in [0.5, 1.5)) and two calls on them: the batched routine over all,
    and the single call on element ``e``.  torch's batched routines take AoS only, so an
    SoA op's peer is timed on its own layout (a transposition to it would add 2 copies)."""
    t = getattr(torch, dtype)
    base = layout(op)[0]
    if base == "cholesky":
        s = torch.rand(count, n, n, dtype=t, device="cuda") + 0.5
        s = torch.tril(s) + torch.tril(s, -1).transpose(1, 2) \
            + 2 * n * torch.eye(n, dtype=t, device="cuda")
        b = torch.rand(count, n, 1, dtype=t, device="cuda")
        up = op.endswith("_upper")  # U^T U: torch's upper=True, like for like
        return (lambda: torch.cholesky_solve(b, torch.linalg.cholesky(s, upper=up), upper=up),
                lambda e: torch.cholesky_solve(b[e], torch.linalg.cholesky(s[e], upper=up),
                                               upper=up))
    if base == "dot":
        x = torch.rand(count, n, dtype=t, device="cuda")
        y = torch.rand(count, n, dtype=t, device="cuda")
        return lambda: (x * y).sum(-1), lambda e: (x[e] * y[e]).sum()
    a = torch.rand(count, n, n, dtype=t, device="cuda")
    b = torch.rand(count, n, n if base == "gemm" else 1, dtype=t, device="cuda")
    return lambda: torch.bmm(a, b), lambda e: torch.matmul(a[e], b[e])


def _torch_soa_call(torch, op: str, n: int, count: int, dtype: str):
    """torch on an SoA op's own interleaved layout: the batched routine on permuted views
    (torch.bmm copies them into its AoS layout first) and the result written back
    interleaved -- the same problem polygpu's SoA programs solve; dot sums over the
    element's dimension directly."""
    t = getattr(torch, dtype)
    base = layout(op)[0]
    if base == "dot":
        x = torch.rand(n, count, dtype=t, device="cuda")
        y = torch.rand(n, count, dtype=t, device="cuda")
        return lambda: (x * y).sum(0)
    a = torch.rand(n, n, count, dtype=t, device="cuda")
    if base == "gemm":
        b = torch.rand(n, n, count, dtype=t, device="cuda")
        c = torch.empty(n, n, count, dtype=t, device="cuda")
        return lambda: c.copy_(torch.bmm(a.permute(2, 0, 1), b.permute(2, 0, 1))
                               .permute(1, 2, 0))
    x = torch.rand(n, count, dtype=t, device="cuda")
    y = torch.empty(n, count, dtype=t, device="cuda")
    return lambda: y.copy_(torch.bmm(a.permute(2, 0, 1), x.t().unsqueeze(2)).squeeze(2).t())


def time_torch_soa(op: str, n: int, nb: int, dtype: str) -> float | None:
    """torch's time on an SoA op's interleaved layout (:func:`_torch_soa_call`)."""
    torch = _torch()
    if torch is None or layout(op)[1] != "SoA" or layout(op)[0] == "cholesky":
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    return _median_ms(torch, _torch_soa_call(torch, op, n, nb, dtype), **TORCH_TIMING)


def time_torch(op: str, n: int, nb: int, dtype: str) -> float | None:
    torch = _torch()
    if torch is None:
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    batched, _ = _torch_calls(torch, op, n, nb, dtype)
    return _median_ms(torch, batched, **TORCH_TIMING)


LOOP_CALLS = 1000  # single calls timed for the loop peer, scaled to the batch


def time_torch_loop(op: str, n: int, nb: int, dtype: str) -> float | None:
    """The loop of single calls (issue 21's other peer): ``LOOP_CALLS`` calls of torch on
    one element each (``a[e] @ b[e]``, ``(x[e] * y[e]).sum()``, ``cholesky_solve(b[e],
    cholesky(s[e]))``) timed together and scaled to ``nb`` elements -- an estimate from
    the first calls, not a run over the whole batch (minutes at millions of elements)."""
    torch = _torch()
    if torch is None:
        return None
    calls = min(nb, LOOP_CALLS)
    _, single = _torch_calls(torch, op, n, calls, dtype)

    def run():
        for e in range(calls):
            single(e)
    return _median_ms(torch, run, repeats=3, warmup=1) * nb / calls


def run_size(op: str, n: int, nb: int, dtype: str, args, device) -> dict:
    name, function = KERNELS[op]
    spec = str(ROOT / "kernels" / name)
    defines = DOUBLE if dtype == "float64" else ()
    sizes = {"nb": nb, "n": n}
    check = {"nb": 37, "n": n}
    prepared = prepare(spec, defines=defines, params=sizes)
    row = {"op": op, "n": n, "nb": nb, "dtype": dtype}
    choice = plan_model.choose(prepared, sizes)
    plans = [("default", choice.variant)]
    if args.check_only:  # the default checked at nb = 37 and the timed sizes, untimed
        entry = {"variant": choice.variant.to_json()}
        entry["check"] = checked(spec, function, defines, choice.variant, device, check)
        if entry["check"]["ok"]:
            entry["check_full"] = checked(spec, function, defines, choice.variant, device,
                                          sizes)
        row["default"] = entry
        row["compulsory_bytes"] = words(op, n, nb) * (8 if dtype == "float64" else 4)
        print(json.dumps({"op": op, "n": n, "nb": nb, "dtype": dtype,
                          "check": entry["check"]["message"],
                          "check_full": entry.get("check_full", {}).get("message")}),
              file=sys.stderr, flush=True)
        return row
    if layout(op)[0] in ("gemm", "gemv") and not args.no_square:
        plans.append(("square", SQUARE))  # (a 1-d mapping had no square block to compare)
    if args.layouts and layout(op)[1] == "SoA":
        # the model's best plan on the interleaved layout and its best on the relaid
        # copy (transposes counted), whichever the default is not
        for r in choice.ranking:
            if r.seconds == float("inf"):
                continue
            key = "relaid" if r.variant.relayout else "interleaved"
            if key not in {k for k, _ in plans} and r.variant != choice.variant:
                plans.append((key, r.variant))
    for k, extra in enumerate(args.also_variants):  # --also: variants to compare
        if extra.get("op", op) == op and n in extra.get("n", [n]) and \
                extra.get("dtype", dtype) == dtype:
            plans.append((f"also{k}", Variant.from_json(extra["variant"])))
    if args.mappings:  # every plan the default ranked: the model's pick against them all
        row["ranking"] = [{"variant": r.variant.to_json(), "predicted_ms": r.seconds * 1e3,
                           "detail": r.detail} for r in choice.ranking]
        seen = {canonical(choice.variant.to_json())}
        taken: dict[int, int] = {choice.variant.candidate: 1}
        for k, r in enumerate(choice.ranking):
            if r.seconds != float("inf") and canonical(r.variant.to_json()) not in seen:
                c = r.variant.candidate
                if args.per_candidate is not None and taken.get(c, 0) >= args.per_candidate:
                    continue
                taken[c] = taken.get(c, 0) + 1
                seen.add(canonical(r.variant.to_json()))
                plans.append((f"plan{k}", r.variant))
    for key, variant in plans:
        entry = {"variant": variant.to_json()}
        entry["check"] = checked(spec, function, defines, variant, device, check)
        if args.check_full and (key == "default" or key.startswith("also")) and \
                entry["check"]["ok"]:
            # the default (and --also's variants) again at the very sizes timed (the
            # issue's "at full size")
            entry["check_full"] = checked(spec, function, defines, variant, device, sizes)
            print(entry["check_full"]["message"], file=sys.stderr, flush=True)
        if entry["check"]["ok"]:
            program = compile_variant(prepared, variant, sizes).program
            entry["ms"] = time_program(device, program, sizes, args.repeats)
        row[key] = entry
    row["compulsory_bytes"] = words(op, n, nb) * (8 if dtype == "float64" else 4)
    if args.backend == "gpu" and not args.small:
        row["torch_ms"] = time_torch(op, n, nb, dtype)
        row["torch_soa_ms"] = time_torch_soa(op, n, nb, dtype)
        row["torch_loop_ms"] = time_torch_loop(op, n, nb, dtype)
    print(json.dumps({k: row[k] for k in row if k not in ("ranking",) + tuple(
                     key for key, _ in plans)} | {key: row[key].get("ms") for key, _ in plans}),
          file=sys.stderr, flush=True)
    return row


def markdown(data: dict) -> str:
    lines = [f"# Batched small elements on the {data['gpu']} ({data['date']})", "",
             "`tuning/batched.py`: nb elements one after another; polygpu's default plan "
             "and the fixed 32 x 32 block (2-d mappings) against torch in the same run "
             "(gemm, gemv: torch.bmm; dot: (x * y).sum(-1); cholesky: torch.linalg.cholesky "
             "then torch.cholesky_solve). Each program was checked "
             "against the loop nest on the device at nb = 37 first. Roofline: the "
             f"compulsory traffic at {data.get('copy_gbs') or BANDWIDTH / 1e9:.0f} GB/s ("
             + ("this GPU's copy rate, measured in the same run" if data.get("copy_gbs")
                else "the H100's copy rate") + ").", "",
             "| op | dtype | n | nb | default block | relaid | default ms | roofline | "
             "32 x 32 ms | torch ms | x torch | torch on SoA ms | x torch on SoA | "
             "x 32 x 32 | loop of single calls ms (est.) | x loop | best timed ms | "
             "pick / best |",
             "|---|---|--:|--:|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]

    for r in data["rows"]:
        if "ms" not in r["default"] and "check_full" in r["default"]:
            continue  # --check-only: listed below
        ms = r["default"].get("ms")
        square = r.get("square", {}).get("ms")
        peer = r.get("torch_ms")
        roof = r["compulsory_bytes"] / (data.get("copy_gbs") or BANDWIDTH / 1e9) * 1e-6
        block = " x ".join(str(t) for t in r["default"]["variant"]["threads"])
        loop = r.get("torch_loop_ms")
        best = min((v["ms"] for v in r.values() if isinstance(v, dict) and v.get("ms")),
                   default=None)
        soa = r.get("torch_soa_ms")
        relaid = "yes" if r["default"]["variant"].get("relayout") else "no"
        lines.append(
            f"| {r['op']} | {r['dtype']} | {r['n']} | {r['nb']} | {block} | {relaid} | "
            f"{cell(ms)} | {cell(roof / ms * 100 if ms else None, 1)}% | {cell(square)} | "
            f"{cell(peer)} | {cell(peer / ms if peer and ms else None, 2)} | {cell(soa)} | "
            f"{cell(soa / ms if soa and ms else None, 2)} | "
            f"{cell(square / ms if square and ms else None, 2)} | {cell(loop)} | "
            f"{cell(loop / ms if loop and ms else None, 1)} | {cell(best)} | "
            f"{cell(ms / best if ms and best else None, 2)} |")
    for r in data["rows"]:
        if "ranking" in r:
            lines += _mappings(r)
    for r in data["rows"]:
        for key in [k for k in r if isinstance(r[k], dict) and "check" in r[k]]:
            if not r[key]["check"]["ok"]:
                lines += ["", f"- {r['op']} {key} n = {r['n']} {r['dtype']}: "
                              f"{r[key]['check']['message']}"]
    full = [f"- {r['op']} {r['dtype']} n = {r['n']}, nb = {r['nb']}, {key}: "
            f"{r[key]['check_full']['message']}"
            for r in data["rows"] for key in r
            if isinstance(r[key], dict) and "check_full" in r[key]]
    if full:
        lines += ["", "Plans checked at the timed sizes (the default, --also's):", ""] + full
    return "\n".join(lines) + "\n"


def _mappings(r: dict) -> list[str]:
    """The plans the default ranked at one (op, n), measured: the model's pick (the
    default) against the best of them."""
    timed = {k: v for k, v in r.items() if isinstance(v, dict) and v.get("ms")}
    if not timed:
        return []
    best = min(v["ms"] for v in timed.values())
    pick = r["default"].get("ms")
    lines = ["", f"{r['op']} {r['dtype']} n = {r['n']}, nb = {r['nb']}: the default's "
             f"pick {cell(pick)} ms, best plan {cell(best)} ms "
             f"(pick / best {cell(pick / best if pick else None, 2)})",
             "", "| plan | candidate | block | on the device | resident | predicted ms | ms | "
             "x best |",
             "|---|--:|---|---|---|--:|--:|--:|"]
    predicted = {canonical(x["variant"]): x["predicted_ms"] for x in r["ranking"]}
    for key, v in sorted(timed.items(), key=lambda kv: kv[1]["ms"]):
        var = v["variant"]
        lines.append(f"| {key} | {var['candidate']} | "
                     f"{' x '.join(str(t) for t in var['threads'])} | "
                     f"{'yes' if var.get('device_steps') else 'no'} | "
                     f"{'yes' if var.get('resident') else 'no'} | "
                     f"{cell(predicted.get(canonical(var)))} | {cell(v['ms'])} | "
                     f"{cell(v['ms'] / best, 2)} |")
    return lines


MAPPINGS = (("thread", "a thread per element (a factorization: or a group), launched once"),
            ("group", "a group of 2-32 threads per element, launched once"),
            ("blocks", "more than a warp per element, launched once"),
            ("warp", "a warp per element, several per block (device steps)"),
            ("block", "a block per element (device steps)"))
# mapped dimensions of one element besides the batch's (the BLAS operations' plans)
ELEMENT_DIMS = {"gemm": 2, "gemv": 1, "dot": 0}


def mapping_of(variant: dict, op: str = "cholesky") -> str:
    """The execution model of a plan: with device steps ``warp`` (several elements per
    block) or ``block`` (one per block); launched once, for a BLAS operation by the
    threads one element gets -- ``thread`` (1), ``group`` (a warp at most) or
    ``blocks`` (more, or the batch not mapped: a tile over one element) -- and for a
    factorization ``thread`` (a thread or a group of a block's threads per element)."""
    if variant.get("device_steps"):
        return "warp" if variant.get("elements_per_block", 1) > 1 else "block"
    base, where = layout(op)
    if base not in ELEMENT_DIMS:
        return "thread"
    threads = variant["threads"]
    if len(threads) <= ELEMENT_DIMS[base]:
        return "blocks"
    per = math.prod(threads[:-1] if where == "SoA" else threads[1:])
    return "thread" if per == 1 else "group" if per <= 32 else "blocks"


def best_by_mapping(row: dict) -> dict[str, float]:
    """The fastest timed plan of each execution model at one (op, n)."""
    best: dict[str, float] = {}
    for v in row.values():
        if isinstance(v, dict) and v.get("ms") and "variant" in v:
            kind = mapping_of(v["variant"], row.get("op", "cholesky"))
            best[kind] = min(best.get(kind, v["ms"]), v["ms"])
    return best


def crossover(rows: list[dict], before: tuple[str, ...] = ("thread",),
              after: tuple[str, ...] = ("warp", "block")) -> int | None:
    """The first n (rows in order of n) from which the best plan of the ``after``
    mappings is faster than the best of the ``before`` ones, and stays so; None if
    there is no such n among the rows that timed both."""
    found = None
    for r in sorted(rows, key=lambda r: r["n"]):
        best = best_by_mapping(r)
        late = min((best[k] for k in after if k in best), default=None)
        early = min((best[k] for k in before if k in best), default=None)
        if late is None or early is None:
            continue
        if late < early:
            found = r["n"] if found is None else found
        else:
            found = None
    return found


def plot(data: dict, out: Path) -> list[Path]:
    """One figure per (op, dtype): the best plan of each execution model over n, the
    default's pick, torch, and the crossover from thread- to device-steps mappings
    marked (issue 21); returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    written = []
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in data["rows"]:
        groups.setdefault((r["op"], r["dtype"]), []).append(r)
    for (op, dtype), rows in groups.items():
        rows = sorted(rows, key=lambda r: r["n"])
        ns = [r["n"] for r in rows]
        fig, ax = plt.subplots(figsize=(6.4, 4.0))
        for k, (kind, label) in enumerate(MAPPINGS):
            points = [(r["n"], best_by_mapping(r).get(kind)) for r in rows]
            points = [(n, ms) for n, ms in points if ms]
            if points:
                ax.plot(*zip(*points, strict=True), marker="o", color=f"C{k}",
                        label=label)
        picks = [(r["n"], r["default"].get("ms")) for r in rows if r["default"].get("ms")]
        if picks:
            ax.plot(*zip(*picks, strict=True), linestyle="none", marker="x", color="k",
                    markersize=9, label="the default's pick (model)")
        peer = [(r["n"], r["torch_ms"]) for r in rows if r.get("torch_ms")]
        if peer:
            ax.plot(*zip(*peer, strict=True), linestyle="--", color="0.4", label="torch")
        marks = ((crossover(rows), "device steps faster than a thread from n = {}"),
                 (crossover(rows, ("warp",), ("block",)),
                  "a block faster than a warp from n = {}"),
                 (crossover(rows, ("thread",), ("group", "blocks")),
                  "threads per element faster than one from n = {}"),
                 (crossover(rows, ("thread", "group"), ("blocks",)),
                  "more than a warp per element faster from n = {}"))
        for k, (at, text) in enumerate(marks):
            if at is not None:
                ax.axvline(at, color=f"C{3 + k}", alpha=0.5)
                ax.text(at, 0.02 + 0.06 * k, f" {text.format(at)} ",
                        transform=ax.get_xaxis_transform(), fontsize=7, va="bottom",
                        ha="left" if at < ns[-1] else "right", color=f"C{3 + k}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(ns)
        ax.set_xticklabels([str(n) for n in ns])
        ax.set_xlabel("n (element size)")
        ax.set_ylabel("ms (lower is better)")
        ax.set_title(f"batched {op}, {dtype}, {data['gpu']} ({data['date']})", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
        fig.tight_layout()
        path = out / f"batched_{op}_{dtype}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=("gpu", "cpu"), default="gpu")
    p.add_argument("--small", action="store_true", help="small sizes (a dry run)")
    p.add_argument("--op", action="append", choices=tuple(KERNELS))
    p.add_argument("--n", type=int, nargs="+", default=[2, 4, 8, 16, 32])
    p.add_argument("--dtype", action="append", choices=("float32", "float64"))
    p.add_argument("--megabytes", type=float, default=768.0,
                   help="the arrays' size at each n (default 768 MB)")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--mappings", action="store_true",
                   help="also check and time every plan the default ranked")
    p.add_argument("--check-full", action="store_true",
                   help="also check the default plan and --also's variants at the timed sizes "
                   "(after nb = 37)")
    p.add_argument("--per-candidate", type=int, metavar="K",
                   help="with --mappings: only each scheduler candidate's K best-ranked "
                   "plans")
    p.add_argument("--check-only", action="store_true",
                   help="only check the default plan, at nb = 37 and at the timed sizes "
                   "(no timing, no torch)")
    p.add_argument("--layouts", action="store_true",
                   help="SoA ops: also time the model's best plan of the layout the "
                   "default did not take (interleaved, or relaid with transposes)")
    p.add_argument("--no-square", action="store_true",
                   help="do not check and time the fixed 32 x 32 block beside the default "
                   "(2-60x slower from n = 16, 30-125 ms a run on interleaved elements: "
                   "device time for a known answer)")
    p.add_argument("--also", metavar="JSON",
                   help="a file of further variants to check and time beside the default: "
                   'a list of {"variant": {...}} with optional "op", "n" (a list) and '
                   '"dtype" keys saying where each applies')
    p.add_argument("--out")
    p.add_argument("--plot", metavar="JSON",
                   help="only draw the figures of a recorded run (into --out, else beside "
                   "the JSON)")
    args = p.parse_args(argv)
    if args.plot:
        source = Path(args.plot)
        for path in plot(json.loads(source.read_text()), Path(args.out or source.parent)):
            print(path)
        return 0
    args.also_variants = json.loads(Path(args.also).read_text()) if args.also else []
    device = get_device(args.backend)
    rows = []
    for op in args.op or ["gemm"]:
        for dtype in args.dtype or ["float32"]:
            width = 8 if dtype == "float64" else 4
            for n in args.n:
                nb = 53 if args.small else int(args.megabytes * 1e6 / (words(op, n, 1) * width))
                rows.append(run_size(op, n, nb, dtype, args, device))
    data = run_record(device, args.backend, rows,
                      args.backend == "gpu" and not args.small and not args.check_only)
    out = write_run(data, markdown(data), args.out, "batched")
    if out is not None and any("ranking" in r for r in rows):  # mappings to compare over n
        plot(data, out)
    return 0


def run_record(device, backend: str, rows: list, measure_copy: bool) -> dict:
    """A tuning run's record: the GPU, the date, the rows, and (``measure_copy``) the
    copy rate measured now, the roofline's bandwidth."""
    data = {"gpu": getattr(device, "name", backend),
            "date": datetime.date.today().isoformat(), "rows": rows}
    if measure_copy:
        rate = copy_rate()
        data["copy_gbs"] = rate / 1e9 if rate else None
    return data


def write_run(data: dict, text: str, out: str | None, name: str) -> Path | None:
    """Print a run's Markdown and, with ``out``, write it and the record's JSON there as
    ``name``.md / .json; the folder written, or None."""
    print(text)
    if not out:
        return None
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(data, indent=1) + "\n")
    (folder / f"{name}.md").write_text(text)
    return folder


if __name__ == "__main__":
    raise SystemExit(main())
