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


def test_a_stencil_halo_in_global_memory_is_not_dram_traffic():
    """Read from global memory, jacobi-2d's five neighbours of ``A`` count as the
    elements of one of them (the halo is the neighbouring blocks' own, from L2), exactly
    (no element in two blocks); staged, every tile loads its halo too.  fdtd-2d's
    ``hz[i-1][j]`` (S1) and ``hz[i][j-1]`` (S2) are one group: the statements are
    tiled alike.  Brute force: the interior ``1 <= i, j <= n - 2``."""
    from polygpu.memory.traffic import estimated_traffic
    from polygpu.pipeline import compile_variant, prepare

    n = 300
    sizes = {"tsteps": 4, "n": n}
    prepared = prepare("kernels/polybench/jacobi_2d.c", params=sizes)
    params = dict(sizes, h0=1)

    def loads(shared, tile, threads, count=estimated_traffic):
        c = compile_variant(prepared, Variant(tile=tile, threads=threads, shared=shared),
                            sizes)
        k = c.kernels[0]
        return {t.array: t.loads for t in count(c.kernel_scop, k, "k", params, c.memory)}

    for tile, threads in (((32, 32), (8, 32)), ((4, 128), (4, 128))):
        assert loads(False, tile, threads)["A"] == (n - 2) ** 2
        assert loads(False, tile, threads, kernel_traffic)["A"] == (n - 2) ** 2
    # staged: each tile loads the five neighbours' union (its box but the corners)
    halo = 0
    for rows in _blocks(n - 2, 32):
        for cols in _blocks(n - 2, 32):
            points = {(1 + i + di, 1 + j + dj) for i in rows for j in cols
                      for di, dj in ((0, 0), (0, -1), (0, 1), (1, 0), (-1, 0))}
            halo += len(points)
    assert loads(True, (32, 32), (8, 32), kernel_traffic)["A"] == halo > (n - 2) ** 2

    sizes = {"tmax": 4, "nx": 60, "ny": 70}
    fdtd = prepare("kernels/polybench/fdtd_2d.c", params=sizes)
    c = compile_variant(fdtd, Variant(tile=(4, 128), threads=(4, 128), shared=False), sizes)
    hz = {t.array: t.loads for t in estimated_traffic(c.kernel_scop, c.kernels[1], "k",
                                                       dict(sizes, h0=1), c.memory)}["hz"]
    # the group's first reference, S1's hz[i][j] (1 <= i < nx): the others are its halo
    assert hz == 59 * 70


def test_a_host_loop_is_no_loop_inside_the_kernel():
    """jacobi-2d's kernels run one time step each (``t`` is the host loop's): no loop in
    their time schedules, so no time tiles; gemm's ``k`` is one."""
    from polygpu.pipeline import prepare
    from polygpu.search import space

    sizes = {"tsteps": 10, "n": 100}
    shapes = space.shapes(prepare("kernels/polybench/jacobi_2d.c", params=sizes), sizes, 1)
    assert not shapes[0].has_time_loop
    sizes = {"ni": 50, "nj": 60, "nk": 70}
    shapes = space.shapes(prepare("kernels/polybench/gemm.c", params=sizes), sizes, 1)
    assert shapes[0].has_time_loop


@pytest.mark.parametrize("kernel, sizes", [
    ("heat_3d", {"tsteps": 7, "n": 13}), ("lu", {"n": 37}), ("trmm", {"m": 23, "n": 31}),
    ("gemm", {"ni": 17, "nj": 19, "nk": 23}), ("syrk", {"n": 19, "m": 11})])
def test_symbolic_counts_equal_scanned_ones(kernel, sizes, monkeypatch):
    """The roofline's flops and compulsory bytes counted with barvinok are the points
    isl's scan finds (the scan took 31 s for heat-3d at n = 200; barvinok 0.1 s)."""
    from polygpu.pipeline import prepare
    from polygpu.search import metrics

    scop = prepare(f"kernels/polybench/{kernel}.c", params=sizes).source_scop
    symbolic = metrics.workload(scop, sizes)
    monkeypatch.setattr(metrics, "count_points", lambda s: s.count_val().to_python())
    assert metrics.workload(scop, sizes) == symbolic
    assert symbolic.flops > 0 and symbolic.bytes > 0
