"""The tuning report: a real (small) search, measured by a fake runner, written to disk.

The search runs as ``polygpu tune`` runs it (compile, prune, order, budget); only the
registers (a fixed rule instead of ptxas: no nvcc needed) and the measurements are
fabricated, deterministically from the variant, with one wrong and one timed-out
candidate, so the report's numbers can be checked against the result.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import re
from pathlib import Path

import numpy as np
import pytest

from polygpu.pipeline import prepare
from polygpu.schedule.variant import Variant
from polygpu.search.measurement import Environment, Measurement
from polygpu.search.metrics import Roofline, workload
from polygpu.search.report import (
    STAGES,
    measurement_order,
    spearman,
    variant_summary,
    write_report,
)
from polygpu.search.resources import FixedResources
from polygpu.search.space import SpaceOptions
from polygpu.search.tuner import TuneOptions, TuneResult, tune

ROOT = Path(__file__).resolve().parent.parent
MV = str(ROOT / "kernels" / "mv.c")
PARAMS = {"n": 64}
ENV = Environment("Fake GPU <80GB>", "9.0", "13.0", "580.65", "0.0-test")
WRONG = "x[3] = 1.5, expected 2.25 (max abs error 0.75)"
TIMEOUT = "killed after 8 s: the candidate did not finish"
PEER_MS = 0.004
PLOTS = ("performance.png", "traffic_vs_time.png", "pruning.png")
HAS_MPL = importlib.util.find_spec("matplotlib") is not None


class FakeRunner:
    """Times from the variant alone; the 2nd job is wrong, the 4th times out."""

    def __init__(self):
        self.jobs: list[str] = []

    def environment(self) -> Environment:
        return ENV

    def measure(self, job) -> Measurement:
        k = len(self.jobs)
        self.jobs.append(job.key)
        if k == 1:
            return Measurement(job.key, "wrong", reason=WRONG + "\nthe rest of the account")
        if k == 3:
            return Measurement(job.key, "timeout", reason=TIMEOUT)
        v = Variant.from_json(job.key)
        t = (0.004 + 0.0005 * v.unroll + 0.001 * (not v.shared) + 0.0003 * v.jam
             + 0.0002 * v.blocked + 0.00001 * v.time_tile + 0.00002 * v.threads[-1])
        return Measurement(job.key, "ok", time_ms=t, times_ms=(0.98 * t, t, 1.05 * t))


@pytest.fixture(scope="module")
def tuned() -> tuple[TuneResult, FakeRunner]:
    runner = FakeRunner()
    options = TuneOptions(space=SpaceOptions(thread_totals=(64, 32), factors=(1, 2)),
                          strategy="model", traffic_slack=0.0, budget=10)
    result = tune(MV, PARAMS, runner, options=options, oracle=FixedResources())
    assert len(runner.jobs) >= 4, "the test needs at least 4 timed candidates"
    return result, runner


@pytest.fixture(scope="module")
def work():
    return workload(prepare(MV).analysis.scop, PARAMS)


@pytest.fixture(scope="module")
def report(tuned, work, tmp_path_factory):
    result, _ = tuned
    out = tmp_path_factory.mktemp("report")
    paths = write_report(result, out, workload=work, roofline=Roofline(), peer_ms=PEER_MS,
                         peer_name="cuBLAS")
    return out, paths, (out / "report.md").read_text(), (out / "report.html").read_text()


def _stage_rows(md: str) -> dict[str, int]:
    """The pruning table: stage -> count."""
    return {m[1]: int(m[2]) for m in re.finditer(r"^\| `([a-z-]+)` \| (\d+) \|", md, re.M)}


def test_files(report):
    out, paths, _, _ = report
    names = [p.name for p in paths]
    assert names[:2] == ["report.md", "report.html"]
    assert all(p.parent == out and p.is_file() and p.stat().st_size > 0 for p in paths)
    assert not [p for p in out.iterdir() if p.name.startswith(".")], "temporary files left"


def test_plots_are_pngs(report):
    pytest.importorskip("matplotlib")
    out, paths, md, page = report
    assert {p.name for p in paths} == {"report.md", "report.html", *PLOTS}
    for name in PLOTS:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"]({name})" in md and f'src="{name}"' in page


def test_best_variant_and_time(tuned, report, work):
    result, runner = tuned
    _, _, md, _ = report
    best = result.best
    assert best is not None and best.measurement.status == "ok"
    assert f"`{variant_summary(best.variant)}`" in md
    assert best.key in md
    t = best.measurement.time_ms
    assert np.format_float_positional(t, precision=4, unique=False, fractional=False,
                                      trim="-") + " ms" in md
    gflops = work.flops / (t * 1e-3) / 1e9
    assert f"{gflops:.1f} GFLOP/s" in md
    assert f"{PEER_MS / t:.2f}× its speed" in md
    fraction = 100 * Roofline().of(t, work).fraction
    assert np.format_float_positional(fraction, precision=3, unique=False, fractional=False,
                                      trim="-") + " % of the roofline (memory-bound" in md
    # the ranking: the best first, at most 20 rows, only candidates with a time
    ranked = re.findall(r"^\| (\d+) \| `([^`]*)`", md, re.M)
    ok = [c for c in result.ranking if c.measurement.status == "ok"]
    assert [int(r) for r, _ in ranked] == list(range(1, min(20, len(ok)) + 1))
    assert [v for _, v in ranked] == [variant_summary(c.variant) for c in ok[:20]]


def test_failures_listed(tuned, report):
    result, runner = tuned
    _, _, md, page = report
    assert f"`{WRONG}`" in md and f"`{TIMEOUT}`" in md
    assert "the rest of the account" not in md  # the first line only
    assert "`wrong`" in md and "`timeout`" in md
    assert "x[3] = 1.5, expected 2.25" in page
    failed = {c.key for c in result.candidates
              if c.measurement is not None and c.measurement.status != "ok"}
    assert failed == {runner.jobs[1], runner.jobs[3]}


def test_pruning_counts_match(tuned, report):
    result, _ = tuned
    _, _, md, page = report
    counts = result.counts()
    rows = _stage_rows(md)
    assert set(STAGES) <= set(rows)
    assert rows == {s: counts.get(s, 0) for s in rows}
    assert sum(rows.values()) == len(result.candidates)
    assert counts.get("pruned-traffic", 0) > 0 and counts.get("budget", 0) > 0
    assert counts["failed"] == 2
    sent = sum(1 for c in result.candidates if c.stage == "timed")
    total = len(result.candidates)
    assert f"{sent} of {total} candidates ({sent / total:.1%} of the space)" in md
    assert f"{sent} of {total} candidates" in page


def test_header_and_help(tuned, report):
    result, _ = tuned
    _, _, md, page = report
    for text in ("`mv`", "`n=64`", "Fake GPU \\<80GB\\>", "CUDA 13.0", "`model`",
                 "budget 10 timed candidates", "traffic slack p = 0 %", "min concurrency 25 %",
                 "docs/search.md", "How to read this report", "UTC"):
        assert text in md, text
    assert "Fake GPU &lt;80GB&gt;" in page and "<80GB>" not in page
    assert "<script" not in page and "http" not in page.replace(
        "http-equiv", "")  # self-contained: no external CSS or JS


def test_measurement_order_is_the_tuners(tuned):
    result, runner = tuned
    assert [c.key for c in measurement_order(result)] == runner.jobs


def test_without_matplotlib(tuned, tmp_path, monkeypatch):
    result, _ = tuned
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(__import__("sys").modules, name, None)
    paths = write_report(result, tmp_path / "new" / "dir")
    assert [p.name for p in paths] == ["report.md", "report.html"]
    md = paths[0].read_text()
    assert "matplotlib is not installed" in md and ".png" not in md
    assert "GFLOP/s" not in md.split("## Top")[1].split("\n\n")[1]  # no workload: no column
    assert "matplotlib is not installed" in paths[1].read_text()


def test_nothing_timed_and_odd_text(tuned, tmp_path):
    """Every measurement failed, reasons full of Markdown and HTML: no best, no crash."""
    result, _ = tuned
    nasty = "<script>alert(1)</script> | a*b* `tick` [x](y)"
    candidates = tuple(
        dataclasses.replace(c, measurement=Measurement(c.key, "crash", reason=nasty))
        if c.measurement is not None else c for c in result.candidates)
    broken = dataclasses.replace(result, candidates=candidates)
    paths = write_report(broken, tmp_path, peer_ms=PEER_MS, peer_name="cuBLAS")
    md, page = paths[0].read_text(), paths[1].read_text()
    assert "there is no best variant" in md
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    table = [line for line in md.splitlines() if "`crash`" in line]
    assert len(table) == len(result.measured)
    assert all(line.count(" | ") == 2 for line in table)  # the | in the reason is escaped
    if HAS_MPL:
        assert {p.name for p in paths} >= set(PLOTS)


def test_traffic_correlation(tuned, tmp_path):
    """Traffic that grows with the time: the report states rho = 1."""
    result, _ = tuned
    candidates = tuple(
        dataclasses.replace(c, traffic_bytes=int(c.measurement.time_ms * 1e9))
        if c.measurement is not None and c.measurement.status == "ok" else c
        for c in result.candidates)
    paths = write_report(dataclasses.replace(result, candidates=candidates), tmp_path)
    assert "ρ = 1.00 over" in paths[0].read_text()


def test_spearman():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [9, 1, 0, -5]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3, 4], [1, 4, 9, 100]) == pytest.approx(1.0)  # ranks, not values
    ties = np.corrcoef([1, 2.5, 2.5, 4], [1, 3, 2, 4])[0, 1]
    assert spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(ties)
    assert math.isnan(spearman([1, 2], [2, 1]))
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))


def test_variant_summary():
    assert variant_summary(Variant()) == "defaults"
    v = Variant(tile=(64,), threads=(32,), jam=True, shared=False)
    assert variant_summary(v) == "tile=64 threads=32 jam=True shared=False"
    assert variant_summary(Variant(tile=(8, 64), threads=(4, 32))) == "tile=8x64 threads=4x32"


def test_variant_text_with_per_kernel_variants():
    # tuning/figures.py and `polygpu tune`'s table: a per-kernel variant (the per-kernel
    # strategy's result) raised KeyError('kernels')
    from polygpu.cli.tune import _variant_cell
    from polygpu.search.summary import variant_text

    assert variant_text(Variant()) == "tile=4,128 threads=4,128"
    v = Variant.from_json('{"tile": [32, 64], "threads": [4, 32], "jam": true, "kernels": '
                          '{"1": {"threads": [8, 32], "tile": [32, 32]}, "0": {"unroll": 2}}}')
    text = "tile=32,64 threads=4,32 jam=True; kernel 0: unroll=2; kernel 1: tile=32,32 " \
        "threads=8,32"
    assert variant_text(v) == _variant_cell(v) == text


def test_variant_text_with_double_buffers_and_fast_math():
    # `polygpu tune`'s table raised KeyError('double_buffer') once the space offered
    # double-buffered variants: to_json leaves the field out when it is off
    from polygpu.cli.tune import _variant_cell
    from polygpu.search.summary import variant_text

    v = Variant(tile=(128, 128), threads=(16, 32), jam=True, double_buffer=True,
                fast_math=True)
    assert variant_text(v) == _variant_cell(v) == \
        "tile=128,128 threads=16,32 jam=True double_buffer=True fast_math=True"
    per_kernel = Variant(tile=(32, 64), threads=(4, 32)).with_kernel(
        1, Variant(tile=(32, 64), threads=(4, 32), double_buffer=True))
    assert variant_text(per_kernel) == "tile=32,64 threads=4,32; kernel 1: double_buffer=True"
