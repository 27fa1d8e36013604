"""The tuning report (``polygpu tune ... --report DIR``): what the search did, and why.

:func:`write_report` turns a :class:`~polygpu.search.tuner.TuneResult` into

* ``report.md`` and ``report.html`` -- the same document twice: Markdown to read in a
  terminal or a pull request, HTML to open in a browser (self-contained: inline style, no
  scripts; only the PNGs are separate files, referenced by relative path, so the
  directory can be moved or archived as a whole);
* ``performance.png`` -- every measured candidate in the order the search timed it (the
  paper's Figure 6), the running best, the failures and the peer library;
* ``traffic_vs_time.png`` -- modelled global traffic against measured time, with their
  Spearman rank correlation: whether the traffic model, which orders and prunes the
  ``model`` strategy's candidates, predicts the ranking the GPU produces;
* ``pruning.png`` -- how many candidates stopped at each stage of the search.

Plots need matplotlib (Agg, through its object API, so the caller's pyplot state and
backend are left alone).  Without it the text reports are still written and say so: a
report must never lose a finished tuning run.
"""

from __future__ import annotations

import dataclasses
import datetime
import html
import math
import os
import random
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from polygpu.schedule.variant import Variant
from polygpu.search.explore import HOPELESS
from polygpu.search.metrics import Roofline, Workload
from polygpu.search.tuner import Candidate, TuneResult

__all__ = ["STAGES", "measurement_order", "spearman", "variant_summary", "write_report"]

TOP = 20  # rows of the ranking table
MAX_LISTED = 50  # rows of a failure table (the rest is counted)
REASON_CHARS = 200

# Every stage a candidate can end in, in the order the search reaches them, with what it
# means: the pruning table, the bar chart and the "how to read" text all use these.
STAGES: dict[str, str] = {
    "timed": "measured by the runner, passed the reference check",
    "reused": "measurement taken from the tuning database (not measured again)",
    "failed": "measured but failed: wrong result, crash, timeout or compile error in "
              "the runner",
    "pruned-traffic": "modelled global traffic more than p % above the fewest",
    "pruned-spills": "registers spilled to local memory (ptxas report)",
    "pruned-threads": "threads per block outside {T, T/2, T/4} (T: what the registers "
                      "allow)",
    "pruned-occupancy": "concurrency below the minimum fraction of the best",
    "pruned-measured": f"its program's measured variants predict over {HOPELESS:g}x the "
                       "best time, or its check's own run took that long (status slow: "
                       "the check was given up, the candidate neither verified nor timed)",
    "duplicate": "generates the same code as another candidate (measured once)",
    "invalid": "polygpu or nvcc could not compile it",
    "budget": "not reached: the budget of timed candidates was spent (costed and not "
              "timed, or never costed: the search looks only as far as the budget can "
              "use)",
    "kernel-reused": "per-kernel search: its kernel's time taken from the database's "
                     "kernel times (not measured again)",
}
_STAGE_COLOURS = {
    "timed": "#2b7bba", "reused": "#7fb2dd", "failed": "#d62728",
    "pruned-traffic": "#ff9f40", "pruned-spills": "#e377c2", "pruned-threads": "#f2c14e",
    "pruned-occupancy": "#c9a227", "pruned-measured": "#b07aa1",
    "duplicate": "#9e9e9e", "invalid": "#8c564b", "budget": "#bcbcbc",
    "kernel-reused": "#9ecae1",
}
_DEFAULT_VARIANT = Variant()


# ------------------------------------------------------------------------- numbers


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation of ``x`` and ``y`` (ties get their average rank): the
    Pearson correlation of the ranks.  NaN with fewer than 3 pairs or a constant side,
    where no ordering can be compared."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if a.shape != b.shape:
        raise ValueError("spearman: x and y differ in length")
    if a.size < 3:
        return math.nan
    ra, rb = _ranks(a), _ranks(b)
    if np.ptp(ra) == 0 or np.ptp(rb) == 0:
        return math.nan
    return float(np.corrcoef(ra, rb)[0, 1])


def _ranks(a: np.ndarray) -> np.ndarray:
    """1-based ranks, tied values sharing the mean of the ranks they span."""
    _, inverse, counts = np.unique(a, return_inverse=True, return_counts=True)
    last = np.cumsum(counts)  # 1-based rank of each distinct value's last occurrence
    return (last - (counts - 1) / 2.0)[inverse]


def measurement_order(result: TuneResult) -> list[Candidate]:
    """The measured candidates in the order :func:`~polygpu.search.tuner.tune` timed them
    (:attr:`~polygpu.search.tuner.TuneResult.order`).

    A result without that record (built by hand) is ordered as ``tune`` ordered its
    survivors before the search walked the space lazily: the candidates that survived
    pruning (timed, reused or cut by the budget) in space order, then ``model`` sorts
    them by :func:`~polygpu.search.tuner.model_order` (with sm_90's limits: the result
    does not keep the device's), ``random`` shuffles them with the options' seed,
    ``exhaustive`` keeps space order."""
    from polygpu.search.tuner import model_order

    if result.order:
        by_key = {c.key: c for c in result.candidates}
        seen = dict.fromkeys(k for k in result.order if k in by_key)
        return [by_key[k] for k in seen if by_key[k].measurement is not None]
    kept = [c for c in result.candidates if c.stage in ("timed", "reused", "budget")]
    if result.strategy == "model":
        kept.sort(key=model_order)
    elif result.strategy == "random":
        random.Random(result.options.seed).shuffle(kept)
    return [c for c in kept if c.measurement is not None]


@dataclass(frozen=True)
class _Row:
    """One measured candidate's numbers as the report shows them (None: not known)."""

    candidate: Candidate
    time_ms: float | None
    gflops: float | None
    gbs: float | None
    fraction: float | None  # of the roofline
    vs_peer: float | None  # peer time / this time: > 1 is faster than the peer
    bound: str = ""  # which roof limits the workload: memory or compute


def _row(c: Candidate, workload: Workload | None, roofline: Roofline | None,
         peer_ms: float | None) -> _Row:
    m = c.measurement
    t = m.time_ms if m is not None and m.status == "ok" and m.time_ms else None
    if t is None or not t > 0:
        return _Row(c, None, None, None, None, None)
    gflops = gbs = fraction = None
    bound = ""
    if workload is not None:
        seconds = t * 1e-3
        gflops, gbs = workload.flops / seconds / 1e9, workload.bytes / seconds / 1e9
        if roofline is not None:
            perf = roofline.of(t, workload)
            fraction, bound = perf.fraction, perf.bound
    vs_peer = peer_ms / t if peer_ms else None
    return _Row(c, t, gflops, gbs, fraction, vs_peer, bound)


def _perf(row: _Row) -> float | None:
    """The performance axis: GFLOP/s when the workload is known, else 1 / time."""
    if row.gflops is not None:
        return row.gflops
    return 1.0 / row.time_ms if row.time_ms else None


def variant_summary(variant: Variant) -> str:
    """The fields of ``variant`` that differ from ``Variant()``'s, e.g. ``tile=64
    threads=32 jam=True``: short enough for a table, and exactly what sets it apart."""
    parts = []
    for f in dataclasses.fields(Variant):
        value = getattr(variant, f.name)
        if value != getattr(_DEFAULT_VARIANT, f.name):
            text = "x".join(map(str, value)) if isinstance(value, tuple) else str(value)
            parts.append(f"{f.name}={text}")
    return " ".join(parts) or "defaults"


def _num(x: float | None, digits: int = 4) -> str:
    """``digits`` significant digits, never in scientific notation; a dash for None."""
    if x is None or not math.isfinite(x):
        return "—"
    return np.format_float_positional(x, precision=digits, unique=False, fractional=False,
                                      trim="-")


def _fixed(x: float | None, spec: str, suffix: str = "") -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x:{spec}}{suffix}"


def _first_line(text: str) -> str:
    line = next((s.strip() for s in text.splitlines() if s.strip()), "")
    return line if len(line) <= REASON_CHARS else line[:REASON_CHARS - 1] + "…"


# -------------------------------------------------------------------- the document
#
# The report is built once as a list of blocks and rendered twice, so the Markdown and
# the HTML cannot drift apart.  Inline text is a str (plain), a Code or a Strong, or a
# tuple of those.


@dataclass(frozen=True)
class Code:
    text: str


@dataclass(frozen=True)
class Strong:
    text: str


Inline = str | Code | Strong | tuple


@dataclass(frozen=True)
class _Heading:
    level: int
    text: str


@dataclass(frozen=True)
class _Para:
    content: Inline


@dataclass(frozen=True)
class _List:
    items: tuple[Inline, ...]


@dataclass(frozen=True)
class _Table:
    header: tuple[str, ...]
    rows: tuple[tuple[Inline, ...], ...]
    numeric: tuple[bool, ...]  # right-aligned columns


@dataclass(frozen=True)
class _Image:
    src: str
    alt: str


_MD_SPECIAL = str.maketrans({c: "\\" + c for c in "\\`*_[]<>|"})


def _md(x: Inline, in_table: bool = False) -> str:
    if isinstance(x, tuple):
        return "".join(_md(p, in_table) for p in x)
    if isinstance(x, Code):
        return _md_code(x.text, in_table)
    if isinstance(x, Strong):
        return f"**{_md(x.text, in_table)}**"
    text = x.translate(_MD_SPECIAL).replace("\n", " ")
    return "\\" + text if text.startswith("#") else text  # not a heading


def _md_code(text: str, in_table: bool) -> str:
    """A code span that survives any content: a fence longer than the longest run of
    backticks inside, padded when the text starts or ends with one; GFM tables need
    ``\\|`` even inside code."""
    text = text.replace("\n", " ")
    run = longest = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    if in_table:
        text = text.replace("|", "\\|")
    return f"{fence}{pad}{text}{pad}{fence}"


def _html(x: Inline) -> str:
    if isinstance(x, tuple):
        return "".join(_html(p) for p in x)
    if isinstance(x, Code):
        return f"<code>{html.escape(x.text)}</code>"
    if isinstance(x, Strong):
        return f"<strong>{html.escape(x.text)}</strong>"
    return html.escape(x)


def _render_md(title: str, blocks: list) -> str:
    out = [f"# {_md(title)}", ""]
    for b in blocks:
        if isinstance(b, _Heading):
            out += ["#" * b.level + " " + _md(b.text), ""]
        elif isinstance(b, _Para):
            out += [_md(b.content), ""]
        elif isinstance(b, _List):
            out += [f"- {_md(item)}" for item in b.items] + [""]
        elif isinstance(b, _Table):
            out.append("| " + " | ".join(_md(h, True) for h in b.header) + " |")
            out.append("|" + "|".join("---:" if n else "---" for n in b.numeric) + "|")
            out += ["| " + " | ".join(_md(cell, True) for cell in row) + " |"
                    for row in b.rows]
            out.append("")
        elif isinstance(b, _Image):
            out += [f"![{_md(b.alt)}]({b.src})", ""]
    return "\n".join(out).rstrip() + "\n"


_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; max-width: 72rem;
       margin: 2rem auto; padding: 0 1rem; color: #222; line-height: 1.45; }
h1 { font-size: 1.6rem; } h2 { margin-top: 2rem; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.2rem 0.5rem; vertical-align: top; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
code { background: #f5f5f5; padding: 0 0.2rem; border-radius: 3px; font-size: 0.85em; }
img { max-width: 100%; border: 1px solid #eee; margin: 0.5rem 0; }
"""


def _render_html(title: str, blocks: list) -> str:
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           f"<title>{html.escape(title)}</title>", f"<style>{_CSS}</style>", "</head>",
           "<body>", f"<h1>{html.escape(title)}</h1>"]
    for b in blocks:
        if isinstance(b, _Heading):
            out.append(f"<h{b.level}>{_html(b.text)}</h{b.level}>")
        elif isinstance(b, _Para):
            out.append(f"<p>{_html(b.content)}</p>")
        elif isinstance(b, _List):
            out += ["<ul>", *(f"<li>{_html(item)}</li>" for item in b.items), "</ul>"]
        elif isinstance(b, _Table):
            out += ["<table>", "<thead><tr>"
                    + "".join(f"<th>{_html(h)}</th>" for h in b.header) + "</tr></thead>",
                    "<tbody>"]
            for row in b.rows:
                cells = "".join(f'<td class="num">{_html(c)}</td>' if n else
                                f"<td>{_html(c)}</td>"
                                for c, n in zip(row, b.numeric, strict=True))
                out.append(f"<tr>{cells}</tr>")
            out += ["</tbody>", "</table>"]
        elif isinstance(b, _Image):
            out.append(f'<p><img src="{html.escape(b.src)}" alt="{html.escape(b.alt)}"></p>')
    out += ["</body>", "</html>"]
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------- sections


def _field(label: str, *parts: Inline) -> tuple:
    """``**Label:** parts`` (the space outside the emphasis, where Markdown wants it)."""
    return (Strong(f"{label}:"), " ", *parts)


def _stage_counts(result: TuneResult) -> dict[str, int]:
    """result.counts() in :data:`STAGES` order, every stage present (zeros included), any
    stage this module does not know appended."""
    counts = result.counts()
    ordered = {s: counts.get(s, 0) for s in STAGES}
    ordered.update({s: n for s, n in counts.items() if s not in STAGES})
    return ordered


def _header(result: TuneResult, peer_ms, peer_name, roofline, workload) -> list:
    env, o = result.environment, result.options
    params = ", ".join(f"{k}={v}" for k, v in result.params.items()) or "none"
    space = ", ".join(f"{f.name}={getattr(o.space, f.name)}"
                      for f in dataclasses.fields(o.space))
    items: list[Inline] = [
        _field("Function", Code(result.function)),
        _field("Source", Code(result.spec), f" (sha256 {result.source_hash[:12]})"),
        _field("Parameters", Code(params)),
        _field("GPU", f"{env.gpu_name}"
         + (f" (compute capability {env.compute_capability})" if env.compute_capability
            else "")),
        _field("Environment", f"CUDA {env.cuda_version or '?'}, driver "
         f"{env.driver_version or 'none'}, polygpu {env.polygpu_version}"),
        _field("Strategy", Code(result.strategy)),
        _field("Options", "budget "
         + (f"{o.budget} timed candidates" if o.budget is not None else "none (all kept)")
         + f"; traffic slack p = {o.traffic_slack:g} %; min concurrency "
         f"{100 * o.min_concurrency:g} % of the best; seed {o.seed}"
         + (f"; defines {' '.join(o.defines)}" if o.defines else "")),
        _field("Space", Code(space)),
    ]
    if workload is not None:
        items.append(_field("Workload", f"{workload.flops:,} flop, {workload.bytes:,} "
                      f"compulsory bytes ({workload.intensity:.3g} flop/byte)"))
    if roofline is not None:
        items.append(_field("Roofline", f"{roofline.name}: "
                      f"{roofline.peak_bandwidth_gbs:g} GB/s, {roofline.peak_gflops:g} "
                      "GFLOP/s"))
    if peer_ms:
        items.append(_field("Peer", f"{peer_name} {_num(peer_ms)} ms"))
    now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    items.append(_field("Written", now.isoformat().replace("+00:00", " UTC")))
    return [_List(tuple(items))]


def _best(result: TuneResult, rows: Mapping[str, _Row], peer_name: str) -> list:
    blocks: list = [_Heading(2, "Best variant")]
    best = result.best
    if best is None:
        blocks.append(_Para("No candidate passed the reference check and was timed, so "
                            "there is no best variant (see the failures below)."))
        return blocks
    r, m = rows[best.key], best.measurement
    spread = (f" (median of {len(m.times_ms)} runs, {_num(min(m.times_ms))} to "
              f"{_num(max(m.times_ms))} ms)" if len(m.times_ms) > 1 else "")
    items: list[Inline] = [
        _field("Variant", Code(variant_summary(best.variant))),
        _field("Key", Code(best.key)),
        _field("Time", f"{_num(r.time_ms)} ms{spread}"
         + (" — reused from the tuning database" if best.stage == "reused" else "")),
    ]
    if timed_on(best):
        items.append(_field("Timed on", timed_on(best)))
    if r.gflops is not None:
        items.append(_field("Performance", f"{_fixed(r.gflops, '.1f')} GFLOP/s, "
                       f"{_fixed(r.gbs, '.1f')} GB/s of compulsory traffic"))
    if r.fraction is not None:
        items.append(_field("Roofline", f"{_num(_pct(r.fraction), 3)} % of the roofline "
                            f"({r.bound}-bound workload)"))
    if r.vs_peer is not None:
        items.append(_field(f"Versus {peer_name}", f"{r.vs_peer:.2f}× its speed ("
                      + ("faster" if r.vs_peer > 1 else "slower") + ")"))
    items.append(_field("Model", f"{_num(_mb(best.traffic_bytes))} MB modelled traffic, "
                  f"{best.registers if best.registers is not None else '—'} registers, "
                  f"occupancy {_fixed(_pct(best.occupancy), '.0f', ' %')}, concurrency "
                  f"{_num(_pct(best.concurrency), 3)} %, {best.threads} threads per block, "
                  f"{best.blocks} blocks"))
    blocks.append(_List(tuple(items)))
    return blocks


def timed_on(c) -> str:
    """The worker (and its GPU) that measured ``c`` where several did (a Dask
    cluster's: ``Measurement.extra``), else ""."""
    extra = c.measurement.extra if c.measurement is not None else {}
    worker, gpu = extra.get("worker"), extra.get("gpu")
    if not worker:
        return ""
    return f"{worker} (GPU {gpu})" if gpu and str(gpu) not in str(worker) else str(worker)


def _mb(b: int | None) -> float | None:
    return None if b is None else b / 1e6


def _pct(x: float | None) -> float | None:
    return None if x is None else 100.0 * x


def _ranking(result: TuneResult, rows: Mapping[str, _Row], workload, roofline, peer_ms,
             peer_name) -> list:
    ok = [c for c in result.ranking if rows[c.key].time_ms is not None]
    if not ok:
        return [_Heading(2, "Timed candidates"), _Para("No candidate has a time.")]
    blocks: list = [_Heading(2, f"Top {min(TOP, len(ok))} of {len(ok)} timed candidates")]
    header = ["#", "variant", "time ms"]
    if workload is not None:
        header += ["GFLOP/s", "GB/s"]
    if workload is not None and roofline is not None:
        header.append("% roofline")
    if peer_ms:
        header.append(f"× {peer_name}")
    header += ["regs", "occupancy", "concurrency", "traffic MB"]
    on = any(timed_on(c) for c in ok[:TOP])  # several GPUs (search/distributed.py)
    if on:
        header.append("timed on")
    table = []
    for rank, c in enumerate(ok[:TOP], 1):
        r = rows[c.key]
        name = Code(variant_summary(c.variant))
        cells: list[Inline] = [str(rank), (name, " (db)") if c.stage == "reused" else name,
                               _num(r.time_ms)]
        if workload is not None:
            cells += [_fixed(r.gflops, ".1f"), _fixed(r.gbs, ".1f")]
        if workload is not None and roofline is not None:
            cells.append(_num(_pct(r.fraction), 3))
        if peer_ms:
            cells.append(_fixed(r.vs_peer, ".2f"))
        cells += [str(c.registers) if c.registers is not None else "—",
                  _fixed(_pct(c.occupancy), ".0f", " %"), _num(_pct(c.concurrency), 3) + " %"
                  if c.concurrency is not None else "—", _num(_mb(c.traffic_bytes))]
        if on:
            cells.append(timed_on(c) or "—")
        table.append(tuple(cells))
    numeric = tuple(h not in ("variant",) for h in header)
    blocks.append(_Table(tuple(header), tuple(table), numeric))
    notes = []
    if any(c.stage == "reused" for c in ok[:TOP]):
        notes.append("(db): measured in an earlier run, taken from the tuning database.")
    if peer_ms:
        notes.append(f"× {peer_name}: the {peer_name} time divided by the candidate's, "
                     "so above 1 is faster than it.")
    if workload is None:
        notes.append("No workload was given: GFLOP/s, GB/s and the roofline are not shown.")
    if notes:
        blocks.append(_Para(" ".join(notes)))
    return blocks


def _pruning(result: TuneResult, counts: Mapping[str, int]) -> list:
    total = len(result.candidates)
    timed = sum(1 for c in result.candidates if c.stage == "timed")
    rows = tuple((Code(stage), str(n), f"{n / total:.1%}" if total else "—",
                  STAGES.get(stage, ""))
                 for stage, n in counts.items())
    rows += ((Strong("total"), str(total), "100.0%", "the whole search space"),)
    return [
        _Heading(2, "Pruning statistics"),
        _Table(("stage", "candidates", "share", "meaning"), rows, (False, True, True, False)),
        _Para(f"{timed} of {total} candidates ({timed / total:.1%} of the space) were "
              "sent to the runner (timed or failed there); "
              f"{counts.get('reused', 0)} measurements were reused from the database."
              if total else "The search space was empty."),
    ]


def _failures(result: TuneResult) -> list:
    blocks: list = [_Heading(2, "Failures")]
    failed = [c for c in result.candidates
              if c.measurement is not None and c.measurement.failed]
    invalid = [c for c in result.candidates if c.stage == "invalid"]
    if not failed and not invalid:
        return blocks + [_Para("None: every measured candidate passed the reference check "
                               "and every variant compiled.")]
    if failed:
        blocks.append(_Para(f"{len(failed)} measured candidates failed; a failure scores an "
                            "infinite time, so it can never be chosen."))
        rows = tuple((Code(variant_summary(c.variant)), Code(c.measurement.status),
                      Code(_first_line(c.measurement.reason or c.measurement.check)
                           or "(no reason given)"))
                     for c in failed[:MAX_LISTED])
        blocks.append(_Table(("variant", "status", "reason"), rows, (False, False, False)))
        if len(failed) > MAX_LISTED:
            blocks.append(_Para(f"… and {len(failed) - MAX_LISTED} more."))
    if invalid:
        blocks.append(_Para(f"{len(invalid)} variants did not compile (stage invalid):"))
        rows = tuple((Code(variant_summary(c.variant)),
                      Code(_first_line(c.reason) or "(no reason given)"))
                     for c in invalid[:MAX_LISTED])
        blocks.append(_Table(("variant", "reason"), rows, (False, False)))
        if len(invalid) > MAX_LISTED:
            blocks.append(_Para(f"… and {len(invalid) - MAX_LISTED} more."))
    return blocks


def _correlation_text(result: TuneResult, rows: Mapping[str, _Row]) -> tuple[float, int, str]:
    pairs = [(c.traffic_bytes, rows[c.key].time_ms) for c in result.measured
             if c.traffic_bytes is not None and rows[c.key].time_ms is not None]
    rho = spearman([p[0] for p in pairs], [p[1] for p in pairs]) if pairs else math.nan
    if math.isnan(rho):
        text = (f"The Spearman rank correlation of modelled traffic and time is not defined "
                f"for these {len(pairs)} timed candidates (fewer than 3, or one side "
                "constant).")
    else:
        text = (f"Spearman rank correlation of modelled traffic and time: ρ = {rho:.2f} over "
                f"{len(pairs)} timed candidates (1: more traffic is always slower; 0: the "
                "model says nothing about the order).")
    return rho, len(pairs), text


def _how_to_read(plotted: bool) -> list:
    text = [
        "The search compiles every variant of the space, prunes with the model (strategy "
        "model only), times the survivors through the runner after a reference check, and "
        "keeps the fastest.  Each candidate ends in one stage: ",
        "timed and reused candidates have a time; failed ones were measured but were wrong, "
        "crashed, timed out or did not compile for the GPU; pruned-traffic ones had more "
        "modelled global loads and stores than p % above the fewest; pruned-spills ones "
        "spilled registers to local memory (ptxas says so); pruned-threads ones "
        "had a block size outside {T, T/2, T/4}, T being the most threads their registers "
        "allow; pruned-occupancy ones filled less than the minimum fraction of the best "
        "candidate's warp slots; pruned-measured ones belong to a program whose measured "
        f"variants, scaling the model's prediction, put them over {HOPELESS:g}x the best "
        "time; "
        "duplicates generate the same code as another candidate; "
        "invalid ones did not compile; budget ones were never reached.",
    ]
    blocks: list = [_Heading(2, "How to read this report"), _Para(tuple(text))]
    if plotted:
        blocks.append(_List((
            (Code("performance.png"), ": every measured candidate in the order the search "
             "timed it (model: least modelled traffic first), GFLOP/s (1 / time without a "
             "workload); the line is the best so far, the star the winner, crosses at the "
             "bottom the failures, the dashed line the peer library.  A model that orders "
             "well puts the best candidates early."),
            (Code("traffic_vs_time.png"), ": modelled traffic against measured time; a "
             "strong positive rank correlation means pruning on traffic is safe."),
            (Code("pruning.png"), ": how many candidates ended in each stage."),
        )))
    blocks.append(_Para(("See ", Code("docs/search.md"), " for the search, the model and "
                         "the options.")))
    return blocks


# -------------------------------------------------------------------------- plots


def _plot_performance(new_figure, path: Path, result: TuneResult, rows: Mapping[str, _Row],
                      workload, peer_ms, peer_name) -> None:
    order = measurement_order(result)
    fig = new_figure(figsize=(8, 4.5), dpi=110)
    ax = fig.add_subplot()
    ylabel = "GFLOP/s" if workload is not None else "1 / time (1/ms)"
    xs_ok, ys_ok, xs_db, ys_db, xs_bad = [], [], [], [], []
    best_x = best_y = None
    running, best_so_far = [], None
    for x, c in enumerate(order, 1):
        y = _perf(rows[c.key])
        if y is None:
            xs_bad.append(x)
        else:
            (xs_db if c.stage == "reused" else xs_ok).append(x)
            (ys_db if c.stage == "reused" else ys_ok).append(y)
            if result.best is not None and c.key == result.best.key:
                best_x, best_y = x, y
            best_so_far = y if best_so_far is None else max(best_so_far, y)
        running.append(best_so_far)
    if xs_ok:
        ax.scatter(xs_ok, ys_ok, s=16, color="#2b7bba", label="timed", zorder=3)
    if xs_db:
        ax.scatter(xs_db, ys_db, s=16, facecolors="none", edgecolors="#2b7bba",
                   label="reused (database)", zorder=3)
    xr = [x for x, y in zip(range(1, len(order) + 1), running, strict=True) if y is not None]
    if xr:
        ax.step(xr, [y for y in running if y is not None], where="post", color="#555",
                linewidth=1, label="best so far", zorder=2)
    peer_y = None
    if peer_ms:
        peer_y = workload.flops / (peer_ms * 1e-3) / 1e9 if workload is not None \
            else 1.0 / peer_ms
        ax.axhline(peer_y, color="#2ca02c", linestyle="--", linewidth=1.2,
                   label=f"{peer_name} ({peer_y:.4g})")
    ys = ys_ok + ys_db + ([peer_y] if peer_y else [])
    top = max(ys) * 1.1 if ys else 1.0
    ax.set_ylim(-0.05 * top, top)  # room below zero for the failures' crosses
    ax.axhline(0, color="#999", linewidth=0.6)
    if xs_bad:
        ax.scatter(xs_bad, [-0.025 * top] * len(xs_bad), marker="x", color="#d62728",
                   s=30, label="failed", zorder=4)
    if best_x is not None:
        ax.scatter([best_x], [best_y], marker="*", s=180, color="#ffbf00",
                   edgecolors="black", linewidths=0.6, label="best", zorder=5)
    if not order:
        ax.text(0.5, 0.5, "no candidate was measured", ha="center", va="center",
                transform=ax.transAxes)
    ax.set_xlim(0, len(order) + 1)
    ax.set_xlabel(f"candidate, in the order timed ({result.strategy} strategy)")
    ax.set_ylabel(ylabel)
    ax.set_title(f"{result.function}: {len(order)} measured candidates")
    ax.grid(True, alpha=0.3)
    if order:
        ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    _save(fig, path)


def _plot_traffic(new_figure, path: Path, result: TuneResult, rows: Mapping[str, _Row],
                  rho: float, n: int) -> None:
    fig = new_figure(figsize=(6.5, 4.5), dpi=110)
    ax = fig.add_subplot()
    pts = [(c.traffic_bytes / 1e6, rows[c.key].time_ms, c) for c in result.measured
           if c.traffic_bytes is not None and rows[c.key].time_ms is not None]
    if pts:
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=18, color="#2b7bba",
                   alpha=0.8, label="timed")
        best = result.best
        for x, y, c in pts:
            if best is not None and c.key == best.key:
                ax.scatter([x], [y], marker="*", s=180, color="#ffbf00", edgecolors="black",
                           linewidths=0.6, label="best", zorder=5)
        ax.legend(fontsize=8, loc="best")
    else:
        ax.text(0.5, 0.5, "no timed candidate", ha="center", va="center",
                transform=ax.transAxes)
    note = "ρ undefined" if math.isnan(rho) else f"Spearman ρ = {rho:.2f}"
    ax.set_title(f"modelled traffic vs time ({note}, n = {n})")
    ax.set_xlabel("modelled global traffic (MB)")
    ax.set_ylabel("measured time (ms)")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    _save(fig, path)


def _plot_pruning(new_figure, path: Path, counts: Mapping[str, int]) -> None:
    fig = new_figure(figsize=(7.5, 4), dpi=110)
    ax = fig.add_subplot()
    stages = list(counts)
    values = [counts[s] for s in stages]
    bars = ax.bar(range(len(stages)), values,
                  color=[_STAGE_COLOURS.get(s, "#777") for s in stages])
    for bar, v in zip(bars, values, strict=True):
        ax.annotate(str(v), (bar.get_x() + bar.get_width() / 2, v), ha="center",
                    va="bottom", fontsize=8, xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(range(len(stages)), stages, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("candidates")
    ax.set_ylim(0, max(values + [1]) * 1.15)
    ax.set_title(f"where the {sum(values)} candidates stopped")
    fig.tight_layout()
    _save(fig, path)


def _agg_figures():
    """A factory of figures drawn by the Agg canvas.  Figures are made directly, not
    through pyplot, so the caller's backend and open figures are left alone (and nothing
    needs a display); ImportError without matplotlib."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    def new_figure(**kwargs):
        fig = Figure(**kwargs)
        FigureCanvasAgg(fig)
        return fig

    return new_figure


def _save(fig, path: Path) -> None:
    tmp = _temporary(path)
    try:
        fig.savefig(tmp, format="png")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


# ------------------------------------------------------------------------ writing


def _temporary(path: Path) -> Path:
    """A sibling of ``path`` to write first and rename over it (same file system, so the
    rename is atomic; created with the umask's permissions, unlike mkstemp's 0600)."""
    return path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")


def _write_text(path: Path, text: str) -> None:
    """Write through a temporary file and a rename, so a reader never sees half a report."""
    tmp = _temporary(path)
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_report(result: TuneResult, directory: str | os.PathLike, *,
                 workload: Workload | None = None, roofline: Roofline | None = None,
                 peer_ms: float | None = None, peer_name: str = "",
                 title: str | None = None) -> list[Path]:
    """Write the report of ``result`` into ``directory`` (created if needed): report.md,
    report.html and, with matplotlib, performance.png, traffic_vs_time.png and
    pruning.png.  Returns the paths written.

    ``workload`` (the region's flops and compulsory bytes at the tuned parameters) turns
    times into GFLOP/s and GB/s; with ``roofline`` too, into a fraction of the roofline.
    ``peer_ms`` is a reference library's time for the same problem (cuBLAS), named
    ``peer_name``: the report shows each candidate's speed relative to it."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    peer_name = peer_name or "peer"
    title = title or f"polygpu tuning report: {result.function}"
    rows = {c.key: _row(c, workload, roofline, peer_ms) for c in result.measured}
    counts = _stage_counts(result)
    rho, n_pairs, correlation = _correlation_text(result, rows)

    written: list[Path] = []
    plot_note = ""
    try:
        new_figure = _agg_figures()
    except ImportError:
        new_figure = None
        plot_note = ("The plots were not drawn: matplotlib is not installed "
                     "(pip install matplotlib).")
    plots: list[tuple[str, str]] = []
    if new_figure is not None:
        jobs = [
            ("performance.png", "performance of every measured candidate",
             lambda p: _plot_performance(new_figure, p, result, rows, workload, peer_ms,
                                         peer_name)),
            ("traffic_vs_time.png", "modelled traffic against measured time",
             lambda p: _plot_traffic(new_figure, p, result, rows, rho, n_pairs)),
            ("pruning.png", "candidates per stage", lambda p: _plot_pruning(new_figure, p, counts)),
        ]
        failed = []
        for name, alt, draw in jobs:
            try:
                draw(out / name)
            except Exception as e:  # a plot must not cost the text report
                failed.append(f"{name} ({type(e).__name__}: {e})")
                continue
            plots.append((name, alt))
            written.append(out / name)
        if failed:
            plot_note = "Some plots could not be drawn: " + "; ".join(failed) + "."

    blocks: list = _header(result, peer_ms, peer_name, roofline, workload)
    if plot_note:
        blocks.append(_Para(Strong(plot_note)))
    blocks += _best(result, rows, peer_name)
    plotted = dict(plots)
    if "performance.png" in plotted:
        blocks += [_Heading(2, "Performance of the candidates"),
                   _Image("performance.png", plotted["performance.png"])]
    blocks += _ranking(result, rows, workload, roofline, peer_ms, peer_name)
    blocks += [_Heading(2, "Traffic model against time"), _Para(correlation)]
    if "traffic_vs_time.png" in plotted:
        blocks.append(_Image("traffic_vs_time.png", plotted["traffic_vs_time.png"]))
    blocks += _pruning(result, counts)
    if "pruning.png" in plotted:
        blocks.append(_Image("pruning.png", plotted["pruning.png"]))
    blocks += _failures(result)
    blocks += _how_to_read(bool(plots))

    md, page = out / "report.md", out / "report.html"
    _write_text(md, _render_md(title, blocks))
    _write_text(page, _render_html(title, blocks))
    return [md, page, *written]
