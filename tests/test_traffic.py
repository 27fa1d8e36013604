"""The traffic model counts each block's footprint exactly (partial tiles included)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from polygpu.memory.traffic import kernel_traffic
from polygpu.pipeline import compile_region
from polygpu.schedule.variant import Variant

ROOT = Path(__file__).resolve().parent.parent


def _blocks(n, tile):
    return [range(b, min(b + tile, n)) for b in range(0, n, tile)]


@pytest.mark.parametrize("n", [37, 64])
def test_mm_footprints_match_brute_force(n):
    c = compile_region("kernels/mm.c", variant=Variant(tile=(8, 16), threads=(4, 16)))
    (kernel,) = c.kernels
    got = {t.array: (t.loads, t.stores) for t in
           kernel_traffic(c.analysis.scop, kernel, "k", {"n": n})}
    rows, cols = _blocks(n, 8), _blocks(n, 16)
    a = sum(len(r) * n for r in rows for _ in cols)  # a[i][k]: the block's rows, all k
    b = sum(n * len(q) for _ in rows for q in cols)  # b[k][j]: all k, the block's columns
    assert got == {"a": (a, 0), "b": (b, 0), "c": (n * n, n * n)}
    # staged per k tile of 32: the tiles of one block are disjoint, the same totals
    staged = {t.array: (t.loads, t.stores) for t in
              kernel_traffic(c.analysis.scop, kernel, "k", {"n": n}, c.memory)}
    assert staged == got and {b.array for b in c.memory.buffers if b.space == "shared"} \
        == {"a", "b"}


def test_staging_per_tile_counts_halo_once_per_tile():
    # a 3-point stencil staged per block of 32: each block loads its 32 + 2 halo
    c = compile_region("kernels/jacobi1d.c", variant=Variant(tile=(32,), threads=(32,)))
    (kernel,) = c.kernels
    (a,) = [b for b in c.memory.buffers if b.array == "a"]
    assert a.space == "shared" and a.box.extents == (34,)
    got = {t.array: t.loads for t in
           kernel_traffic(c.analysis.scop, kernel, "k", {"n": 130}, c.memory)}
    assert got["a"] == 4 * 34  # 128 interior points: 4 blocks


def test_tmv_reads_y_once_per_block():
    c = compile_region("kernels/tmv.c", variant=Variant(tile=(128,), threads=(64,)))
    got = {t.array: t for t in kernel_traffic(c.analysis.scop, c.kernels[0], "k", {"n": 300})}
    assert got["y"].loads == 3 * 300  # three blocks of rows, each needs all of y
    assert got["a"].loads == 300 * 300 and got["x"].stores == 300


def test_analyze_traffic_cli():
    run = subprocess.run([sys.executable, "-m", "polygpu", "analyze", "kernels/mv.c",
                          "-p", "n=256", "--traffic", "--tile", "64", "--json"],
                         cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    traffic = {t["array"]: t for t in json.loads(run.stdout)["traffic"]}
    assert traffic["y"]["loads"] == 4 * 256 and traffic["a"]["bytes"] == 256 * 256 * 4
    missing = subprocess.run([sys.executable, "-m", "polygpu", "analyze", "kernels/mv.c",
                              "--traffic"], cwd=ROOT, capture_output=True, text=True)
    assert missing.returncode == 2
    assert missing.stderr.startswith("kernels/mv.c:2: --traffic needs a value for n")
