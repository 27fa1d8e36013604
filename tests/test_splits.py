"""Splitting fused kernels (``Variant.splits``, schedule/splits.py; issue 23): nests the
scheduler put in one kernel run as consecutive kernels, each tiled on its own -- proven
against the dependences (a split through one refused as bad input), ranked by the model
(search/covers.py ``rank_splits``) and checked on the CPU emulator at odd sizes."""

from __future__ import annotations

import math
import subprocess
import sys
from functools import cache

import numpy as np
import pytest

import polygpu
from polygpu.errors import PolygpuError
from polygpu.pipeline import compile_variant, prepare
from polygpu.runtime.check import check_program
from polygpu.schedule.splits import split_points, statement_order
from polygpu.schedule.variant import Variant
from polygpu.search import covers, plan_model

MM3 = "kernels/mm3.c"
ODD = {"ni": 37, "nj": 41, "nk": 29, "nl": 43, "nm": 31}
LARGE = {"ni": 4096, "nj": 4096, "nk": 4096, "nl": 4096, "nm": 4096}

# one nest whose two statements feed each other across iterations of the time loop i:
# split, every x would be computed before any y it reads
CARRIED = """void carried(int n, float x[n][n], float y[n][n]) {
#pragma scop
  for (int i = 1; i < n; i++)
    for (int j = 0; j < n; j++) {
      x[i][j] = y[i - 1][j] + 1;
      y[i][j] = x[i][j] * 2;
    }
#pragma endscop
}
"""


@cache
def mm3():
    return prepare(MM3, "mm3")


def test_splits_are_validated_and_round_trip():
    for bad in ((0,), (3, 2), (2, 2)):
        with pytest.raises(PolygpuError, match="splits"):
            Variant(splits=bad)
    v = Variant(splits=(2, 4), cuts=(1,), device_steps=True)
    assert Variant.from_json(v.to_json()) == v
    assert "splits" not in Variant().to_json()
    with pytest.raises(PolygpuError, match="cannot override"):
        Variant(kernels=((0, (("splits", (1,)),)),))


def test_3mm_products_split_into_separately_tiled_kernels():
    """The scheduler fuses 3mm's two independent products (and g's zeroing) into one
    kernel; the nest boundaries inside it are the split points, and each split runs
    correctly, a kernel tiled on its own where the variant says so."""
    tr = mm3().candidates[0]
    assert [k.statements for k in tr.kernels] == [("S0", "S1", "S2", "S3", "S4"), ("S5",)]
    assert split_points(mm3().analysis, tr) == (2, 4)  # e | f | g's zeroing
    assert statement_order(tr) == ("S0", "S1", "S2", "S3", "S4", "S5")
    separate = Variant(tile=(32, 32), threads=(8, 32), jam=True, splits=(2, 4)).with_kernel(
        1, Variant(tile=(16, 64), threads=(8, 16), jam=True))
    for variant in (Variant(splits=(2,)), Variant(splits=(4,)), separate):
        c = compile_variant(mm3(), variant, ODD)
        kernels = [k.statements for k in c.transformation.kernels]
        assert len(kernels) == 2 + len(variant.splits)
        assert len(c.program.launches) == len(kernels)
        result = check_program(c.program, c.source_scop, MM3, ODD, seed=3)
        assert result.ok, (variant, result.message)
    c = compile_variant(mm3(), separate, ODD)
    assert [k.statements for k in c.transformation.kernels] == [
        ("S0", "S1"), ("S2", "S3"), ("S4",), ("S5",)]
    # kernel 1 (f = c d) has its own tile (TiledKernel.tile: x first)
    assert [k.tile for k in c.kernels] == [(32, 32), (64, 16), (32, 32), (32, 32)]


def test_a_split_that_breaks_a_dependence_is_refused_as_bad_input(tmp_path):
    src = tmp_path / "carried.c"
    src.write_text(CARRIED)
    prepared = prepare(str(src), "carried")
    one = next(k for k, tr in enumerate(prepared.candidates)
               if tr.host is None and len(tr.kernels) == 1)
    compile_variant(prepared, Variant(candidate=one))
    with pytest.raises(PolygpuError, match="would run a statement before one it depends "
                                           "on.*S1 -> S0 on y"):
        compile_variant(prepared, Variant(candidate=one, splits=(1,)))
    with pytest.raises(PolygpuError, match="2 is not inside a kernel"):
        compile_variant(prepared, Variant(candidate=one, splits=(2,)))
    # the same through the CLI: FILE:LINE:, exit 2, no traceback, nothing written
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "polygpu", "compile", str(src), "-o",
                          str(out), "--variant", f'{{"candidate": {one}, "splits": [1]}}'],
                         capture_output=True, text=True)
    assert run.returncode == 2, run.stderr
    assert run.stderr.startswith(f"{src}:1: variant: splits [1] would run"), run.stderr
    assert "Traceback" not in run.stderr and not out.exists()


def test_the_model_ranks_the_splits_of_its_top_plan():
    """``choose`` prices 3mm's plan with its products fused and every split of it;
    each estimate is the plan's own (not a guess), and the top plan changes only with
    the cover margin."""
    choice = plan_model.choose(mm3(), LARGE)
    top = choice.ranking[0]
    assert not top.variant.splits
    split = [e for e in choice.ranking if e.variant.splits]
    assert {e.variant.splits for e in split} == {(2,), (4,), (2, 4)}
    for e in split:
        assert e.variant == Variant.from_json({**top.variant.to_json(),
                                               "splits": list(e.variant.splits)})
        again = plan_model.estimate(mm3(), e.variant, LARGE)
        assert math.isclose(again.seconds, e.seconds) and e.launches == top.launches + len(
            e.variant.splits)
    ranked = covers.rank_splits(mm3(), top.variant, LARGE)
    assert [e.seconds for e in ranked] == sorted(e.seconds for e in ranked)
    assert top.variant in [e.variant for e in ranked]


def test_a_split_and_cut_chain_runs_through_the_python_api():
    """The Python API launches a split, cut plan through the same device layer: seed
    003's chain (the Python spelling) as three launches over its six nests, called on
    NumPy arrays and compared with NumPy's own chain."""
    spec = "kernels/map_chain.py:map_chain"
    prepared = prepare(spec)
    fused = next(k for k, tr in enumerate(prepared.candidates)
                 if tr.host is not None and tr.host.kind == "fused batch")
    points = split_points(prepared.analysis, prepared.candidates[fused])
    assert len(points) == 2  # M2 | M3 | F
    variant = Variant(candidate=fused, tile=(8, 8), threads=(1, 8), shared=False,
                      device_steps=True, resident=True, specialize=True,
                      elements_per_block=4, splits=points, cuts=(3, 5))
    ni = 37
    kernel = polygpu.optimize(spec, params={"ni": ni}, variant=variant, backend="cpu")
    assert kernel.variant == variant and len(kernel.launches) == 3
    rng = np.random.default_rng(5)
    A, B, D, E = (rng.random((ni, k, k), dtype=np.float32) for k in (3, 3, 5, 5))
    c = rng.random((ni, 3), dtype=np.float32)
    F = np.full((ni, 5, 5), np.nan, dtype=np.float32)
    kernel(ni, A, B, c, D, E, F)
    v1 = np.einsum("eij,ej->ei", A @ B, c)
    expected = (D @ E + D) * np.sqrt((v1 * v1).sum(axis=1))[:, None, None]
    np.testing.assert_allclose(F, expected, rtol=1e-4)
