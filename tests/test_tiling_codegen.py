"""Tiling, thread mapping, the legality proof and CUDA emission on hand-built schedules."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import islpy as isl
import pytest

from polygpu.codegen.cuda import generate
from polygpu.codegen.launch_grid import block_count, grid_expression
from polygpu.errors import PolygpuError
from polygpu.frontend import load
from polygpu.model.analysis import analyze
from polygpu.model.build import build_scop
from polygpu.schedule.legality import LegalityError, prove_legal, transformation_schedule
from polygpu.schedule.tiling import tile
from polygpu.schedule.transformation import KernelSchedule, Transformation
from polygpu.schedule.variant import Variant

KERNELS = Path(__file__).resolve().parent.parent / "kernels"


def _mv():
    return analyze(build_scop(load(str(KERNELS / "mv.c"))))


def _mv_transformation(space_s1: str, time_s0: str, time_s1: str) -> Transformation:
    kernel = KernelSchedule(
        ("S0", "S1"),
        isl.UnionMap(f"[n] -> {{ S0[i] -> [i]; S1[i, j] -> [{space_s1}] }}"),
        isl.UnionMap(f"[n] -> {{ S0[i] -> [{time_s0}]; S1[i, j] -> [{time_s1}] }}"),
        1, 5)
    return Transformation((kernel,), (), (), "test")


ROW_PER_THREAD = ("i", "0, 0, 0, 0, 0", "0, 0, 1, j, 0")


def test_prover_accepts_row_per_thread_and_rejects_bad_schedules():
    an = _mv()
    prove_legal(an.dependences, transformation_schedule(_mv_transformation(*ROW_PER_THREAD)))
    # threads along j: the reduction into x[i] would cross threads
    with pytest.raises(LegalityError, match="S1 -> S1 on x"):
        prove_legal(an.dependences, transformation_schedule(
            _mv_transformation("j", "0, 0, 0, 0, 0", "0, i, 1, 0, 0")))
    # initialisation after the accumulation
    with pytest.raises(LegalityError, match="S0 -> S1"):
        prove_legal(an.dependences, transformation_schedule(
            _mv_transformation("i", "1, 0, 0, 0, 0", "0, 0, 1, j, 0")))


def test_tiled_schedule_maps_points_cyclically():
    an = _mv()
    (k,) = tile(an.scop, an.dependences, _mv_transformation(*ROW_PER_THREAD),
                Variant(tile=(64,), threads=(32,), time_tile=0))
    assert (k.n_mapped, k.tile, k.threads) == (1, (64,), (32,))
    # local order: three statement-order levels (the tile levels), the point, the rest
    assert k.n_tile_levels == 3 and k.local_names == ("c0", "c1", "c2", "rx", "c3", "c4")
    s0 = isl.Map.from_union_map(k.schedule.intersect_domain(
        isl.UnionSet("[n] -> { S0[i] }")))
    # row 100 is in block 1 (rows 64..127), thread 100 - 64 - 32 = 4, its point 1
    point = s0.intersect_domain(isl.Set("[n] -> { S0[100] : n = 200 }")).range()
    assert point.is_equal(isl.Set("[n] -> { [1, 4, 0, 0, 0, 1, 0, 0] : n = 200 }"))


def test_blocked_distribution_gives_each_thread_a_contiguous_run():
    an = _mv()
    (k,) = tile(an.scop, an.dependences, _mv_transformation(*ROW_PER_THREAD),
                Variant(tile=(64,), threads=(32,), time_tile=0, blocked=True))
    s0 = isl.Map.from_union_map(k.schedule.intersect_domain(
        isl.UnionSet("[n] -> { S0[i] }")))
    # row 100: block 1, offset 36 in the tile, two rows per thread: thread 18, point 0
    point = s0.intersect_domain(isl.Set("[n] -> { S0[100] : n = 200 }")).range()
    assert point.is_equal(isl.Set("[n] -> { [1, 18, 0, 0, 0, 0, 0, 0] : n = 200 }"))


def test_variant_validation_and_json_round_trip():
    v = Variant(candidate=1, tile=(8, 64), threads=(2, 32), jam=True, time_tile=16, unroll=2)
    assert Variant.from_json(v.to_json()) == v
    assert Variant.from_json('{"tile": [128], "threads": [64]}').threads == (64,)
    for bad in ('{"tile": [32], "threads": [64]}', '{"tiles": [1]}', "not json",
                '{"tile": [2048], "threads": [2048]}'):
        with pytest.raises(PolygpuError):
            Variant.from_json(bad)


def test_grid_expression_covers_the_extent():
    extent = isl.PwAff("[n, m] -> { [(n - 1)] : n >= m; [(m + 2)] : n < m }")
    text = grid_expression(extent, 32)
    assert text == "max(max(max(n + 31, 0) / 32, max(m + 34, 0) / 32), 1)"
    # strided domains give floor/mod terms: bounded by a div-free affine expression
    strided = isl.PwAff("[n] -> { [(-1 + n - (1 + n) mod 2)] }")  # = 2 floor((n + 1)/2) - 2
    assert grid_expression(strided, 16) == "max(max(n + 15, 0) / 16, 1)"
    thirds = isl.PwAff("[n] -> { [(floor((n - 1) / 3))] }")
    assert grid_expression(thirds, 8) == "max(max(n + 23, 0) / 24, 1)"


def test_block_count_is_the_grid_expression_evaluated():
    from polygpu.runtime.grid import evaluate
    pieces = [isl.PwAff("[n, m] -> { [(n - 1)] : n >= m; [(m + 2)] : n < m }"),
              isl.PwAff("[n, m] -> { [(-1 + n - (1 + n) mod 2)] }"),
              isl.PwAff("[n, m] -> { [(floor((n - 1) / 3))] }")]
    for extent in pieces:
        for size in (1, 8, 32):
            for n, m in ((1, 1), (5, 77), (100, 3), (4096, 4096)):
                values = {"n": n, "m": m}
                assert block_count(extent, size, values) == \
                    evaluate(grid_expression(extent, size), values)


def test_may_exceed_on_rational_extents():
    # a host step of an isl schedule scaled by 2: isl writes the extent's pieces as
    # rational affine expressions on a lattice, which its max_val refuses
    from polygpu.codegen.launch_grid import may_exceed

    extent = isl.PwAff("[n, h0] -> { [(h0)/2] : (h0) mod 2 = 0 and 0 <= h0 <= n; "
                       "[(-1 + h0)/2] : (h0) mod 2 = 1 and 0 <= h0 <= n }")
    at = isl.Set("[n, h0] -> { : n = 100 }")
    # at most 50 + 1 blocks of 1, 50 // 4 + 1 = 13 of 4
    assert not may_exceed(extent, 1, at, 51, None) and may_exceed(extent, 1, at, 50, None)
    assert not may_exceed(extent, 4, at, 13, None) and may_exceed(extent, 4, at, 12, None)
    for h0 in (0, 7, 100):
        assert block_count(extent, 4, {"n": 100, "h0": h0}) == h0 // 2 // 4 + 1
    assert may_exceed(extent, 4, isl.Set("[n, h0] -> { : }"), 65535, None)  # unbounded


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("variant", [Variant(tile=(64,), threads=(32,)),
                                     Variant(tile=(128,), threads=(32,), jam=True, unroll=4),
                                     Variant(tile=(32,), threads=(32,), time_tile=16)])
def test_emitted_cuda_compiles_without_warnings(tmp_path, variant):
    an = _mv()
    kernels = tile(an.scop, an.dependences, _mv_transformation(*ROW_PER_THREAD), variant)
    program = generate(an.scop, kernels)
    assert "__global__ void __launch_bounds__(32) mv_kernel0(" in program.source
    assert "const float *__restrict__ a" in program.source
    src = tmp_path / "mv.cu"
    src.write_text(program.source)
    result = subprocess.run(["nvcc", "-arch=sm_90", "-Werror", "all-warnings", "-c",
                             str(src), "-o", str(tmp_path / "mv.o")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_folded_grid_launches_more_than_65535_blocks_on_x():
    """Issue 17 (3): a y block count that passes 65535 at the sizes compiled for is
    folded onto grid x."""
    from polygpu.pipeline import compile_region
    from polygpu.runtime import grid as rgrid
    c = compile_region(str(KERNELS / "mm.c"), variant=Variant(tile=(16, 16), threads=(16, 16)),
                       params={"n": 16 * 70000})  # parametric, compiled for these sizes
    (launch,) = c.program.launches
    dims = tuple(rgrid.evaluate(e, {"n": 16 * 70000}) for e in launch.grid)
    assert dims == (2**31 - 1, -(-70000**2 // (2**31 - 1)), 1)  # 4.9e9 blocks
    rgrid.check_launch(launch.kernel, dims, launch.block)
    # specialized at the usual sizes: the 2-D launch is unchanged
    s = compile_region(str(KERNELS / "mm.c"), variant=Variant(tile=(16, 16), threads=(16, 16),
                                                              specialize=True),
                       params={"n": 4096})
    assert "pg_block" not in s.program.source and s.program.launches[0].grid[1] != "1"


def test_ast_where_isl_fails_on_its_default_strategy_is_generated_atomic():
    # the guard of a copy-in in one step of a host wavefront over a descending stride-2
    # loop (found by the fuzzer, like tests/test_fuzz_regressions.py's
    # wavefront_descending_stride cases): isl 0.27 fails on it ("total dimensionality
    # changed unexpectedly"), however represented
    from polygpu.codegen.thread_ast import node_from_schedule_map

    domain = isl.Set("[n, h0] -> { : h0 >= -1 - n and ((2h0 <= -16 + n and "
                     "2*floor((n)/2) >= 5 + n + h0) or ((n + h0) mod 2 = 0 and "
                     "h0 >= -5 and -n <= h0 <= -4)) }")
    schedule = isl.UnionMap.from_map(isl.Map.from_domain_and_range(
        isl.Set("[n, h0] -> { P[] }").intersect_params(domain), isl.Set("{ [0] }")))
    build = isl.AstBuild.from_context(isl.Set("[n, h0] -> { : }"))
    ast = node_from_schedule_map(build, schedule)
    # one guarded call, run exactly where the domain holds (the guard's % only divides
    # values it knows are >= 0, or tests for 0: Python's % gives the same there)
    assert ast.get_type() == isl.ast_node_type.if_
    guard = ast.if_get_cond().to_C_str().replace("&&", "and").replace("||", "or")
    for n in range(0, 40):
        for h0 in range(-45, 5):
            inside = not domain.intersect_params(isl.Set(
                f"[n, h0] -> {{ : n = {n} and h0 = {h0} }}")).is_empty()
            assert eval(guard, {}, {"n": n, "h0": h0}) == inside, (n, h0, guard)


def test_a_threads_point_loops_bounded_by_thread_ids_stay_rolled():
    """The batched Cholesky's trailing update (a triangle: a thread's row and column
    points bounded by its thread ids) keeps its innermost point loop rolled (``#pragma
    unroll 1``: nvcc's unrolling by 4 put a remainder prologue before loops of a few
    iterations), exact on the emulator; point loops of constant trip (whole tiles of a
    specialized product) are left to nvcc."""
    from polygpu.pipeline import compile_region
    from polygpu.runtime.check import check_program

    sizes = {"nb": 37, "n": 17}
    # the batched default at n = 64: a warp an element, 4 a block, resident; the update
    # on 4 x 8 threads over 64 x 64 tiles
    variant = Variant.from_json({
        "candidate": 2, "tile": [64, 64], "threads": [4, 8], "shared": False,
        "specialize": True, "device_steps": True, "resident": True,
        "elements_per_block": 4, "kernels": {"1": {"threads": [32], "tile": [64]}}})
    compiled = compile_region("kernels/batched_cholesky.c", params=sizes, variant=variant)
    update = next(k for k in compiled.kernels if len(k.point_dims) == 2)
    names = [update.local_names[d] for d in update.point_dims]
    assert names == ["ry", "rx"]
    source = compiled.program.source
    assert "#pragma unroll 1\n" in source
    rolled = source.split("#pragma unroll 1\n")[1:]
    # (its row factor loaded before it: codegen/invariant_reads.py)
    assert any(part.lstrip().startswith(("for (int rx = ", "for (; rx <= ")) for part in rolled)
    result = check_program(compiled.program, compiled.source_scop,
                           "kernels/batched_cholesky.c", sizes, seed=3)
    assert result.ok, result.message
    whole = compile_region("kernels/mm.c", params={"n": 64}, variant=Variant(
        tile=(32, 32), threads=(8, 8), specialize=True))
    assert "for (int rx = 0; rx <= 3; rx += 1)" in whole.program.source
    assert "#pragma unroll 1" not in whole.program.source


def test_min_blocks_bounds_the_launched_kernels_and_the_device_steps_function():
    """``min_blocks`` is ``__launch_bounds__``'s second argument: per launched kernel,
    and for device steps (one function running every kernel) the most any asks."""
    from polygpu.pipeline import compile_region

    steps = Variant.from_json({
        "candidate": 2, "tile": [64, 64], "threads": [4, 8], "shared": False,
        "specialize": True, "device_steps": True, "resident": True,
        "elements_per_block": 4, "kernels": {"1": {"threads": [32], "tile": [64],
                                                   "min_blocks": 3}}})
    source = compile_region("kernels/batched_cholesky.c", params={"nb": 37, "n": 17},
                            variant=steps).program.source
    assert re.findall(r"__launch_bounds__\([^)]*\)", source) == ["__launch_bounds__(128, 3)"]
    launched = Variant(tile=(32, 32), threads=(8, 8), min_blocks=5)
    source = compile_region("kernels/mm.c", params={"n": 64}, variant=launched
                            ).program.source
    assert "__launch_bounds__(64, 5)" in source
    assert "__launch_bounds__(64) " not in source
