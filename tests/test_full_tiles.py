"""Full/partial tile separation (``codegen/full_tiles.py``): where tiles do not divide
the extents, whole tiles run a body without guards, with the register tile left as
loops nvcc unrolls; the other blocks run the guarded body.  Both halves are checked
against the original nest on the emulator, at sizes with whole and partial blocks."""

from __future__ import annotations

import re
import shutil

import islpy as isl
import pytest

from polygpu.codegen import full_tiles
from polygpu.codegen.full_tiles import whole_blocks
from polygpu.pipeline import compile_region, compile_variant, prepare
from polygpu.runtime.check import check_program
from polygpu.schedule.tiling import tile
from polygpu.schedule.variant import Variant
from polygpu.search.occupancy import occupancy, parse_ptxas, resource_usage

SPLIT = "whole tiles without guards"
MM_8X8 = Variant(tile=(128, 128), threads=(16, 16), jam=True, time_tile=8, unroll=8,
                 chunk=4, prefetch=True, specialize=True)


def _bodies(source: str, kernel: str, condition: str) -> tuple[str, str]:
    """The kernel's whole-tile and partial-tile halves (device functions the kernel calls
    on ``condition``)."""
    assert re.search(rf"  if \({re.escape(condition)}\)\n    {kernel}_whole\(.*\);\n"
                     rf"  else\n    {kernel}_partial\(.*\);\n", source)
    whole = source.split(f"__device__ __noinline__ void {kernel}_whole(", 1)[1]
    full, partial = whole.split(f"__device__ __noinline__ void {kernel}_partial(", 1)
    return full, partial.split("__global__", 1)[0]


def test_whole_tiles_of_a_specialized_mm_have_no_guards():
    """n = 2000 under 128 x 128 tiles: blocks 0..14 along each axis are whole, and run
    without one guard on n (1999), with the 8 x 8 register tile as loops of constant
    bounds and the staged copies as 16-byte loads; block 15 runs the guarded body."""
    compiled = compile_region("kernels/mm.c", variant=MM_8X8, params={"n": 2000})
    source = compiled.program.source
    assert f"// kernel 0: {SPLIT} where bx <= 14 && by <= 14" in source
    full, partial = _bodies(source, "mm_kernel0", "bx <= 14 && by <= 14")
    assert "1999" not in full and "1999" in partial
    assert re.search(r"#pragma unroll\s+for \(int ry = 0; ry <= 7; ry \+= 1\)", full)
    assert "float4" in full and "float4" not in partial
    assert full.count("__syncthreads();") == partial.count("__syncthreads();") > 0


def test_tiles_that_divide_the_extents_give_one_body():
    compiled = compile_region("kernels/mm.c", variant=MM_8X8, params={"n": 2048})
    assert SPLIT not in compiled.program.source


def test_whole_blocks_are_those_whose_tile_ends_inside_the_extent():
    """The literal set for a parametric mm under 64 x 32 tiles (x: columns j, 64 wide)."""
    variant = Variant(tile=(32, 64), threads=(8, 16))
    prepared = prepare("kernels/mm.c")
    candidate = prepared.candidates[0]
    (kernel,) = tile(prepared.analysis.scop, prepared.analysis.dependences, candidate,
                     variant)
    whole = whole_blocks(prepared.analysis.scop, kernel)
    want = isl.Set("[n, bx, by] -> { : bx >= 0 and by >= 0 and 64bx <= n - 64 "
                   "and 32by <= n - 32 }")
    assert whole.is_equal(want.align_params(whole.get_space()))


# sizes with whole and partial blocks along every mapped dimension
CASES = [
    ("kernels/mm.c", {"n": 150}, Variant(tile=(64, 64), threads=(16, 16), jam=True,
                                         time_tile=8, unroll=4, chunk=4, prefetch=True),
     False),
    ("kernels/mm.c", {"n": 150}, Variant(tile=(64, 64), threads=(16, 16), jam=True,
                                         time_tile=8, unroll=4, chunk=4, prefetch=True,
                                         specialize=True), True),
    ("kernels/polybench/gemm.c", {"ni": 70, "nj": 90, "nk": 50},
     Variant(tile=(32, 32), threads=(8, 16), jam=True, time_tile=16, chunk=2,
             specialize=True), True),
    ("kernels/syrk.c", {"n": 75, "m": 41}, Variant(tile=(32, 32), threads=(8, 8), jam=True),
     False),
    ("kernels/lu.c", {"n": 75}, Variant(tile=(16, 32), threads=(8, 16), jam=True), False),
    ("kernels/heat3d.c", {"tsteps": 2, "n": 21},
     Variant(tile=(4, 4, 16), threads=(2, 4, 8), jam=True), False),
]


@pytest.mark.parametrize(("spec", "sizes", "variant", "specialized"), CASES,
                         ids=["mm", "mm-specialized", "gemm-specialized", "syrk-triangle",
                              "lu-host-steps", "heat3d-3d"])
def test_split_programs_pass_the_cpu_check(spec, sizes, variant, specialized):
    prepared = prepare(spec, params=sizes if specialized else None)
    compiled = compile_variant(prepared, variant, sizes if specialized else None)
    assert SPLIT in compiled.program.source
    result = check_program(compiled.program, compiled.source_scop, spec, sizes, seed=11)
    assert result.ok, result.message


def test_device_steps_inline_their_halves():
    """A device step calls its halves once per tile and step: there they are
    ``__forceinline__`` (as calls, the batched Cholesky in double at n = 64 took 4.93 ms
    on the H100, inline 3.99), and the program still matches the nest."""
    spec, sizes = "kernels/batched_cholesky.c", {"nb": 5, "n": 64}
    variant = Variant(candidate=2, tile=(32, 32), threads=(8, 32), time_tile=32,
                      specialize=True, device_steps=True, resident=True)
    compiled = compile_variant(prepare(spec, params=sizes), variant, sizes)
    source = compiled.program.source
    assert SPLIT in source and "__noinline__" not in source
    assert "__device__ __forceinline__ void batched_cholesky_kernel2_whole(" in source
    result = check_program(compiled.program, compiled.source_scop, spec, sizes, seed=11)
    assert result.ok, result.message


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_the_split_costs_no_registers(monkeypatch):
    """Both halves inline in one kernel took 214 registers where either alone took 128
    (all-pairs L1 at 2000, 128 x 128 tiles: 1 block an SM instead of 2, 10 % slower on
    the H100); as ``__noinline__`` functions the kernel needs what its halves need, so
    it keeps the guarded kernel's blocks per SM.  (Not fewer registers than the guarded
    kernel: the guard-free half may use what the launch bounds leave, 128 here, where
    the guarded one -- without a load of its accumulators, memory/liveness.py -- took
    120.)"""
    spec, sizes = "kernels/allpairs/l1dist.c", {"n1": 2000, "n2": 2000, "d": 5419}
    variant = Variant(tile=(128, 128), threads=(16, 16), jam=True, time_tile=8, unroll=8,
                      chunk=4, prefetch=True, specialize=True)
    split = compile_region(spec, variant=variant, params=sizes).program.source
    monkeypatch.setattr(full_tiles, "split", lambda *args, **kwargs: None)
    guarded = compile_region(spec, variant=variant, params=sizes).program.source
    assert SPLIT in split and SPLIT not in guarded
    (a,), (b,) = resource_usage(split).values(), resource_usage(guarded).values()
    assert a.spill_stores == 0 and a.registers <= 128
    threads = 16 * 16
    assert occupancy(threads, a.registers, a.shared_static).blocks_per_sm >= \
        occupancy(threads, b.registers, b.shared_static).blocks_per_sm == 2


def test_spills_of_the_halves_count_as_the_kernels():
    report = """ptxas info    : Compiling entry function 'k_kernel0' for 'sm_90'
ptxas info    : Function properties for k_kernel0
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 128 registers, used 1 barriers, 8448 bytes smem
ptxas info    : Function properties for _Z14k_kernel0_wholeiPf
    16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Function properties for _Z16k_kernel0_partialiPf
    0 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
"""
    r = parse_ptxas(report)["k_kernel0"]
    assert (r.registers, r.stack, r.spill_stores, r.spill_loads) == (128, 16, 12, 16)


# a thread's 8 x 4 points of a 64 x 64 tile, rows dealt in runs of 4 (chunk), cyclically
# (16 x 16 threads) and in one run each (blocked)
DEALINGS = {
    "runs": Variant(tile=(64, 64), threads=(8, 16), jam=True, time_tile=16, unroll=4,
                    chunk=4, prefetch=True, double_buffer=True, specialize=True),
    "cyclic": Variant(tile=(64, 64), threads=(16, 16), jam=True, time_tile=16,
                      specialize=True),
    "blocked": Variant(tile=(64, 64), threads=(8, 16), jam=True, time_tile=16,
                       blocked=True, specialize=True)}


def _register_indices(source: str, name: str) -> list[str]:
    """Every subscript of the register buffer ``name`` in ``source`` that is not a plain
    number."""
    found = []
    for subscripts in re.findall(rf"{name}((?:\[[^\[\]]*\])+)", source):
        found += [sub for sub in re.findall(r"\[([^\[\]]*)\]", subscripts)
                  if not sub.strip().isdigit()]
    return found


@pytest.mark.parametrize("dealing", sorted(DEALINGS))
def test_a_threads_register_indices_are_constants_in_a_single_tile(dealing):
    """An element of exactly one tile (specialized: the block ids are 0): the register
    tile's every index is the same number in every thread, and no guard tests a thread
    id.  Before the tiled schedule gave its mapped coordinates as functions of the
    block, thread and point coordinates (``tiling._points_explicit``), isl scanned the
    runs of 4 as ``ry`` from ``-ty + (ty + 1) / 2`` under guards ``if (ty <= 1)``, and
    the tile went to local memory (7.5 ms instead of 0.56 at n = 64 on the H200)."""
    compiled = compile_region("kernels/batched_mm.c", variant=DEALINGS[dealing],
                              params={"nb": 37, "n": 64})
    source = compiled.program.source
    assert not re.search(r"if \([^)]*\bt[xy]\b", source)
    indices = _register_indices(source, "c_reg")
    assert len(indices) >= 2 * 32
    _assert_constant(indices)


def _assert_constant(indices: list[str]) -> None:
    """Each of ``indices`` (C text) the same number whatever the block and thread, for
    each value of the loop counters it names (a register tile's unrolled loops)."""
    ids = {"tx", "ty", "bx", "by", "bz"}
    for sub in indices:
        counters = sorted(set(re.findall(r"[A-Za-z_]\w*", sub)) - ids)
        for k in range(3):
            loops = {c: k + j for j, c in enumerate(counters)}
            values = {eval(sub.replace("/", "//"), {}, loops | {
                "tx": tx, "ty": ty, "bx": b, "by": b, "bz": 3})
                for tx, ty, b in ((0, 0, 0), (3, 5, 0), (7, 7, 1))}
            assert len(values) == 1, sub


def test_register_indices_of_split_halves_are_constants():
    """n = 100 under 64 x 64 tiles: the whole tiles are block (0, 0) alone; their
    register indices are numbers (the buffers' bases simplified with the half's own
    blocks: ``(4 * ty) - (64 * by + 4 * ty)`` before, a 128-byte stack frame)."""
    compiled = compile_region("kernels/batched_mm.c", variant=DEALINGS["runs"],
                              params={"nb": 37, "n": 100})
    source = compiled.program.source
    full, _ = _bodies(source, "batched_mm_kernel0", "bx == 0 && by == 0")
    indices = _register_indices(full, "c_reg")
    assert len(indices) >= 2 * 2
    _assert_constant(indices)
    # (the partial half's rows may print as ``4 * ty`` inside isl's branches on ``by``:
    # numbers there too, given the branch, which ptxas sees and this text test does not)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_a_single_tiles_register_tile_stays_in_registers():
    """The same element through ptxas: no stack frame (a register tile indexed by a
    thread id lives in local memory; it took 128 bytes before)."""
    compiled = compile_region("kernels/batched_mm.c", variant=DEALINGS["runs"],
                              params={"nb": 37, "n": 64})
    (r,) = resource_usage(compiled.program.source).values()
    assert (r.stack, r.spill_stores) == (0, 0)


@pytest.mark.parametrize("dealing", sorted(DEALINGS))
def test_every_dealing_of_odd_tiles_passes_the_cpu_check(dealing):
    """Partial tiles (n = 17, 37 under 64 x 64) and the rewritten schedule's points:
    exact on the emulator."""
    for n in (17, 37):
        sizes = {"nb": 5, "n": n}
        compiled = compile_region("kernels/batched_mm.c", variant=DEALINGS[dealing],
                                  params=sizes)
        result = check_program(compiled.program, compiled.source_scop,
                               "kernels/batched_mm.c", sizes, seed=5)
        assert result.ok, result.message
