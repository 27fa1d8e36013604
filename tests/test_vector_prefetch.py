"""Runs of points per thread (``chunk``), transposed shared buffers, prefetched copies
and the operand-load model: what took mm on the H100 from 0.59x to 0.80x cuBLAS."""

from __future__ import annotations

import math
import re
import shutil
import subprocess

import pytest

from polygpu.cli import main
from polygpu.memory.footprints import _chunks
from polygpu.memory.operand_loads import operand_loads
from polygpu.pipeline import compile_variant, prepare
from polygpu.schedule.variant import Variant
from polygpu.search.space import SpaceOptions, space

MM = "kernels/mm.c"
FAST = dict(tile=[128, 128], threads=[16, 16], jam=True, time_tile=8, chunk=4,
            prefetch=True, unroll=8, specialize=True)


@pytest.fixture(scope="module")
def mm():
    return prepare(MM, None, (), ())


def _buffers(compiled):
    return {b.array: b for b in compiled.memory.buffers}


def test_chunk_detection():
    assert _chunks([0, 1, 2, 3, 64, 65, 66, 67]) == (4, 64)
    assert _chunks([0, 1, 64, 65, 128, 129]) == (2, 64)
    assert _chunks(list(range(8))) is None  # one contiguous run: a plain box
    assert _chunks([0, 16, 32]) is None  # a stride, found by isl
    assert _chunks([0, 1, 2, 3, 64, 66]) == (4, 64)  # inside the runs: a box covers it
    assert _chunks([0, 1, 2, 3, 5]) is None  # no period that is a multiple of the run


def test_chunked_register_tile_and_transposed_buffer(mm):
    c = compile_variant(mm, Variant.from_json(FAST), {"n": 4096})
    buffers = _buffers(c)
    reg = buffers["c"]
    # thread (tx, ty) owns rows 4 ty + 64 v + u and columns 4 tx + 64 v + u (u < 4)
    assert reg.space == "register" and reg.box.extents == (8, 8)
    assert reg.box.chunk == (4, 4) and reg.box.stride == (64, 64)
    a, b = buffers["a"], buffers["b"]
    # a[i][k]'s runs move along i: stored transposed, k outermost; b[k][j] as it is
    assert a.order == (1, 0) and a.row_extents[0] == 8 and b.order == ()
    # rows stay 16-byte aligned for the vector loads: padding a multiple of 4 floats
    assert a.padding % 4 == 0 and b.padding % 4 == 0
    text = c.program.source
    assert f"a_sh[8][{128 + a.padding}]" in text
    assert "4 * ty" in text and "4 * tx" in text


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_runs_load_as_vectors(mm, tmp_path):
    """nvcc turns a thread's runs of 4 floats in shared memory into ld.shared.v4."""
    c = compile_variant(mm, Variant.from_json(FAST), {"n": 4096})
    src = tmp_path / "mm.cu"
    src.write_text(c.program.source)
    subprocess.run(["nvcc", "-arch=sm_90", "-ptx", str(src), "-o", str(tmp_path / "mm.ptx")],
                   check=True, capture_output=True)
    ptx = (tmp_path / "mm.ptx").read_text()
    assert ptx.count("ld.shared.v4.f32") >= 4 * 8  # 2 for a, 2 for b, per unrolled k
    cyclic = compile_variant(mm, Variant.from_json({**FAST, "chunk": 1}), {"n": 4096})
    src.write_text(cyclic.program.source)
    subprocess.run(["nvcc", "-arch=sm_90", "-ptx", str(src), "-o", str(tmp_path / "c.ptx")],
                   check=True, capture_output=True)
    # single points 16 apart: b's operands are scalar loads (a's rows, along the
    # unrolled k loop, still load as vectors)
    assert (tmp_path / "c.ptx").read_text().count("ld.shared.v4.f32") <= \
        ptx.count("ld.shared.v4.f32") // 2


def test_prefetch_code_shape(mm):
    c = compile_variant(mm, Variant.from_json(FAST), {"n": 4096})
    text = c.program.source
    # per buffer: 1024 elements / 256 threads = 4 prefetch registers
    assert "float pg_pf_a_sh[4];" in text and "float pg_pf_b_sh[4];" in text
    # the next tile's loads happen after the first barrier, only where there is one
    assert re.search(r"__syncthreads\(\);\s*if \(o_c\d+ <= 510\)", text)
    # the first tile of the k loop loads its own elements
    assert re.search(r"if \(o_c\d+ == 0\)", text)
    # the tile loop itself is not unrolled (copies and barriers); the k loop is
    loop = text.index("for (int c11")
    assert "#pragma unroll 8" not in text[loop - 40:loop]
    assert text.count("#pragma unroll 8") == 1
    plain = compile_variant(mm, Variant.from_json({**FAST, "prefetch": False}),
                            {"n": 4096})
    assert "pg_pf_" not in plain.program.source
    # the memory stage made the decision the code follows (and the search reads)
    assert {b.array for b in c.memory.buffers if b.prefetch} == {"a", "b"}
    assert c.memory.prefetches(0) and not plain.memory.prefetches(0)
    assert not any(b.prefetch for b in plain.memory.buffers)


@pytest.mark.parametrize("n", [37, 77, 130])
@pytest.mark.parametrize("specialize", [False, True])
def test_mm_chunk_prefetch_exact_on_cpu(n, specialize, capsys):
    variant = dict(tile=[32, 64], threads=[8, 8], jam=True, time_tile=8, chunk=4,
                   prefetch=True, unroll=8, specialize=specialize)
    import json
    assert main(["check", MM, "-p", f"n={n}", "--variant", json.dumps(variant),
                 "--backend", "cpu"]) == 0, capsys.readouterr()


@pytest.mark.parametrize("path,variant", [
    ("kernels/mvt.c", dict(tile=[4, 64], threads=[2, 16], jam=True, chunk=2,
                           prefetch=True, time_tile=8)),
    ("kernels/jacobi1d.c", dict(tile=[64], threads=[16], jam=True, chunk=2,
                                prefetch=True, time_tile=16)),
    ("kernels/conv1d.c", dict(tile=[64], threads=[32], prefetch=True, time_tile=16)),
    ("kernels/mv.py:mv", dict(tile=[64], threads=[16], jam=True, chunk=4,
                              prefetch=True, time_tile=8, specialize=True)),
])
def test_other_kernels_exact_on_cpu(path, variant, capsys):
    import json
    assert main(["check", path, "-p", "n=77", "--variant", json.dumps(variant),
                 "--backend", "cpu"]) == 0, capsys.readouterr()


def test_variant_rejects_blocked_chunks():
    from polygpu.errors import PolygpuError
    with pytest.raises(PolygpuError, match="chunk"):
        Variant(tile=(64,), threads=(16,), blocked=True, chunk=4)
    with pytest.raises(PolygpuError, match="chunk"):
        Variant(tile=(64,), threads=(16,), chunk=0)


def test_operand_loads_model(mm):
    def per_instance(v):
        c = compile_variant(mm, Variant.from_json(v), {"n": 256})
        o = operand_loads(c.analysis.scop, c.kernels[0], {"n": 256}, c.memory)
        assert o.instances == 256 ** 3
        return o.loads / o.instances

    # 8 x 8 points: 8 + 8 operands per 64 FMAs, in float4 runs 2 + 2
    assert per_instance(FAST) == pytest.approx(4 / 64)
    assert per_instance({**FAST, "chunk": 1}) == pytest.approx(16 / 64)
    # 4 x 4 points: 4 + 4 operands per 16
    assert per_instance({**FAST, "tile": [64, 64], "chunk": 1}) == pytest.approx(8 / 16)
    # no register tile: a, b and c (2 points per thread: c not in registers) each time
    assert per_instance(dict(tile=[32, 64], threads=[32, 32], time_tile=32)) == 3


def test_space_has_runs_prefetch_and_unrolled_time_loops(mm):
    points = space(mm, {"n": 4096}, SpaceOptions(candidates=1))
    jam = [v for v in points if v.jam and _points_per_thread(v) <= 64]
    assert {v.chunk for v in jam} == {4} and all(v.unroll == 4 for v in jam)
    assert all(v.chunk == 1 for v in points if not v.jam)
    assert all(v.prefetch == (v.shared and v.time_tile > 0) for v in points)
    assert not any(v.blocked and v.chunk > 1 for v in points)


def test_one_dimensional_register_tiles_keep_blocked_points():
    points = space(prepare("kernels/mv.c", None, (), ()), {"n": 4096},
                   SpaceOptions(candidates=1))
    blocked = [v for v in points if v.blocked]
    assert blocked and all(v.jam and v.chunk == 1 for v in blocked)
    assert any(v.jam and v.chunk == 4 and not v.blocked for v in points)


def _points_per_thread(v):
    return math.prod(t // h for t, h in zip(v.tile, v.threads, strict=True))


def test_wide_register_tiles_for_four_byte_elements_only(mm):
    """8 x 16 points a thread (cuBLAS SGEMM's shape) beyond the 64-point limit, for float
    regions without reductions; never in double (128 doubles spill), where the limit
    stands."""
    points = space(mm, {"n": 4096}, SpaceOptions(candidates=1))
    wide = [v for v in points if _points_per_thread(v) > 64]
    assert wide and all(
        tuple(t // h for t, h in zip(v.tile, v.threads, strict=True)) == (8, 16)
        for v in wide)
    assert any(v.tile == (128, 256) and v.threads == (16, 16) for v in wide)
    # staged in time tiles of 8, unrolled whole (the probes' best; 16 and 32 lost)
    assert all(v.jam and v.chunk == 4 and v.shared and v.prefetch for v in wide)
    assert {(v.time_tile, v.unroll) for v in wide} == {(8, 8)}
    gemm = prepare("kernels/polybench/gemm.c", None, (), ())  # double
    assert max(map(_points_per_thread, space(gemm, {"ni": 2000, "nj": 2300, "nk": 2600},
                                              SpaceOptions(candidates=1)))) <= 64
    assert not any(_points_per_thread(v) > 64 for v in space(
        mm, {"n": 4096}, SpaceOptions(candidates=1, wide_factors=())))


def test_a_wide_register_tile_is_exact_on_cpu(capsys):
    import json
    variant = dict(tile=[16, 64], threads=[2, 4], jam=True, time_tile=8, chunk=4,
                   prefetch=True, unroll=8)
    assert main(["check", MM, "-p", "n=77", "--variant", json.dumps(variant),
                 "--backend", "cpu"]) == 0, capsys.readouterr()


VECTOR = dict(tile=[16, 64], threads=[2, 4], jam=True, time_tile=8, chunk=4, prefetch=True,
              unroll=8, specialize=True)


def test_prefetched_copies_load_16_bytes_where_proven_aligned(mm):
    """A whole, dense, aligned tile row is loaded as float4 (behind a check of the
    array's address); partial tiles (guards), rows not a multiple of 4 and unknown rows
    (not specialized) keep word loads."""
    source = compile_variant(mm, Variant.from_json(VECTOR), {"n": 128}).program.source
    assert "const float4 pg_v = *reinterpret_cast<const float4 *>(&a[" in source
    assert "(reinterpret_cast<size_t>(a) % 16 == 0)" in source
    wide = {**FAST, "tile": [128, 256], "time_tile": 8, "unroll": 8}  # b staged too
    source = compile_variant(mm, Variant.from_json(wide), {"n": 256}).program.source
    assert source.count("const float4 pg_v") == 4  # a and b, first tile and next
    for n, fields in ((77, {}), (132, {"tile": [4, 4], "threads": [1, 1]}),
                      (128, {"specialize": False})):
        other = compile_variant(mm, Variant.from_json({**VECTOR, **fields}), {"n": n})
        assert "float4 pg_v" not in other.program.source, (n, fields)


def test_vector_loads_are_exact_aligned_or_not():
    """The CPU emulator runs the 16-byte path on NumPy's aligned arrays and the word path
    on arrays one element off alignment (a caller's view); both compute mm."""
    import numpy as np

    from polygpu.runtime.device import CpuEmulator

    n = 128
    program = compile_variant(prepare(MM, None, (), ()), Variant.from_json(VECTOR),
                              {"n": n}).program
    rng = np.random.default_rng(3)
    a, b, c = (rng.random((n, n), dtype=np.float32) + 0.5 for _ in range(3))
    expected = c.astype(np.float64) + a.astype(np.float64) @ b.astype(np.float64)
    for offset in (0, 1):
        views = {}
        for name, x in (("a", a), ("b", b), ("c", c)):
            buf = np.empty(x.size + 4, dtype=np.float32)
            start = (-buf.ctypes.data // 4) % 4 + offset  # 16-byte aligned, or 4 past it
            views[name] = buf[start:start + x.size].reshape(x.shape)
            views[name][...] = x
        assert (views["a"].ctypes.data % 16 == 0) == (offset == 0)
        CpuEmulator().run(program, {"n": n, **views})
        np.testing.assert_allclose(views["c"], expected, rtol=1e-5)


def test_double_tiles_load_double2(capsys):
    import json
    variant = dict(tile=[16, 64], threads=[4, 8], jam=True, time_tile=8, chunk=2,
                   prefetch=True, unroll=8, specialize=True)
    gemm = prepare("kernels/polybench/gemm.c", None, (), ())
    params = {"ni": 64, "nj": 128, "nk": 64}
    source = compile_variant(gemm, Variant.from_json(variant), params).program.source
    assert "const double2 pg_v = *reinterpret_cast<const double2 *>(&B[" in source
    assert main(["check", "kernels/polybench/gemm.c", *(f"-p{k}={v}" for k, v in
                                                          params.items()),
                 "--variant", json.dumps(variant), "--backend", "cpu"]) == 0, \
        capsys.readouterr()


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_vector_copies_are_16_byte_global_loads_in_ptx(mm, tmp_path):
    """nvcc emits the proven vectors as 16-byte global loads: a's and b's tile rows of
    mm's 8 x 16 variant (first tile and next), and doubles in pairs."""
    def ptx_of(source, name):
        src = tmp_path / f"{name}.cu"
        src.write_text(source)
        out = tmp_path / f"{name}.ptx"
        subprocess.run(["nvcc", "-arch=sm_90", "-ptx", str(src), "-o", str(out)],
                       check=True, capture_output=True)
        return out.read_text()

    wide = {**FAST, "tile": [128, 256], "time_tile": 8, "unroll": 8}
    ptx = ptx_of(compile_variant(mm, Variant.from_json(wide), {"n": 256}).program.source,
                 "mm")
    assert len(re.findall(r"ld\.global(\.nc)?\.v4\.f32", ptx)) >= 4
    variant = dict(tile=[16, 64], threads=[4, 8], jam=True, time_tile=8, chunk=2,
                   prefetch=True, unroll=8, specialize=True)
    gemm = prepare("kernels/polybench/gemm.c", None, (), ())
    source = compile_variant(gemm, Variant.from_json(variant),
                             {"ni": 64, "nj": 128, "nk": 64}).program.source
    assert re.search(r"ld\.global(\.nc)?\.v2\.f64", ptx_of(source, "gemm"))


@pytest.mark.parametrize("n", [4096, 4100, 4098])
def test_the_check_program_vectorizes_as_the_timed_one(mm, n):
    """The check runs the variant specialized at smaller sizes that keep every size
    modulo the tiles: its copies load 16 bytes exactly where the timed program's do
    (n = 4100: partial tiles, both word loads; 4098: rows of odd length)."""
    from polygpu.search.tuner import check_parameters

    variant = Variant.from_json({**FAST, "time_tile": 8, "unroll": 8})
    small = check_parameters({"n": n}, variant)
    assert small["n"] < n
    timed, checked = (compile_variant(mm, variant, p).program.source.count("float4 pg_v")
                      for p in ({"n": n}, small))
    assert timed == checked and (timed > 0) == (n == 4096)
