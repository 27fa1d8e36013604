"""Issue 17 (2) and (3): 64-bit index arithmetic exactly where 32-bit can overflow, and
grids of any size (block dimensions beyond CUDA's 65535 folded onto grid x)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from polygpu.codegen.program import IndexWidthError
from polygpu.pipeline import compile_region
from polygpu.runtime import cpu, grid
from polygpu.runtime.check import check_program
from polygpu.runtime.device import launch_plan
from polygpu.schedule.variant import Variant
from tests.generated import kernel_text

KERNELS = Path(__file__).resolve().parent.parent / "kernels"

THIN = """\
void thin(int m, int n, int k, float a[m][n])
{
#pragma scop
  for (int i = 0; i < m; i++)
    for (int j = 0; j < k; j++)
      a[i][j] = a[i][j] + 1.0f;
#pragma endscop
}
"""

BATCH = """\
void batch(int nb, float a[nb][4][4], float c[nb][4][4])
{
#pragma scop
  for (int e = 0; e < nb; e++)
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 4; j++)
        c[e][i][j] = 2.0f * a[e][i][j] + (float)(i - j);
#pragma endscop
}
"""

THIN_VARIANT = {"tile": [1, 4], "threads": [1, 4], "time_tile": 0}
BATCH_VARIANT = {"tile": [1, 4, 4], "threads": [1, 4, 4], "time_tile": 0}
# 3 rows of 1.1e9 floats: offsets of row 2 pass 2^31 (13 GB of address space, of
# which only the touched pages are ever mapped)
BIG = {"m": 3, "n": 1_100_000_000, "k": 4}


def _compile(tmp_path, text, name, variant, params=None, specialize=None):
    src = tmp_path / f"{name}.c"
    src.write_text(text)
    if specialize is None:
        specialize = params is not None
    v = Variant.from_json({**variant, "specialize": specialize})
    return compile_region(str(src), variant=v, params=params)


def _nvcc(tmp_path, source: str) -> None:
    if shutil.which("nvcc") is None:
        pytest.skip("no nvcc")
    cu = tmp_path / "k.cu"
    cu.write_text(source)
    subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-o",
                    str(tmp_path / "k.cubin"), str(cu)], check=True, capture_output=True)


def test_small_specialized_kernel_keeps_32_bit_offsets(tmp_path):
    c = _compile(tmp_path, THIN, "thin", THIN_VARIANT, {"m": 3, "n": 1000, "k": 4})
    assert not c.program.index64 and c.program.index_bounds == ()
    kernel = kernel_text(c.program.source)
    assert "long long" not in kernel and "pg_block" not in kernel
    assert "a[(by) * n + tx]" in kernel  # int arithmetic


def test_large_specialized_kernel_gets_64_bit_offsets(tmp_path):
    c = _compile(tmp_path, THIN, "thin", THIN_VARIANT, BIG)
    src = c.program.source
    assert c.program.index64
    # the offset is computed in 64 bits from its first term on; block ids are 64-bit
    assert "a[((long long)(by)) * n + tx]" in src
    assert "const long long by = blockIdx.y;" in src
    _nvcc(tmp_path, src)


def test_unspecialized_kernel_is_32_bit_and_refused_beyond_its_bounds(tmp_path):
    c = _compile(tmp_path, THIN, "thin", THIN_VARIANT)
    p = c.program
    assert not p.index64 and p.index_bounds
    assert "a[(by) * n + (4 * bx + tx)]" in p.source and "long long)(by)" not in p.source
    p.check_parameters({"m": 3, "n": 1000, "k": 4})
    with pytest.raises(IndexWidthError, match="element count of a.*64-bit indices"):
        p.check_parameters(BIG)
    # n * n of mm passes 2^31 from n = 46341
    mm = compile_region(str(KERNELS / "mm.c")).program
    mm.check_parameters({"n": 46340})
    with pytest.raises(IndexWidthError, match="64-bit"):
        mm.check_parameters({"n": 46341})
    # and the runtimes refuse before anything runs
    with pytest.raises(IndexWidthError):
        grid.launch_blocks(mm, {"n": 46341})


@pytest.mark.slow
def test_emulator_offsets_past_2_31_are_right(tmp_path):
    c = _compile(tmp_path, THIN, "thin", THIN_VARIANT, BIG)
    a = np.zeros((BIG["m"], BIG["n"]), dtype=np.float32)  # lazily mapped pages
    a[:, :8] = np.arange(8, dtype=np.float32)
    a[2, BIG["n"] - 1] = 7.0
    cpu.compile_program(c.program).run({**BIG, "a": a.reshape(-1)})
    expect = np.arange(8, dtype=np.float32)
    expect[:4] += 1
    for i in range(3):
        assert np.array_equal(a[i, :8], expect), (i, a[i, :8])
    assert a[2, BIG["n"] - 1] == 7.0


def test_batched_grid_beyond_65535_blocks_is_folded(tmp_path):
    # compiled without sizes: unfolded (folding costs registers), and refused at launch
    # beyond CUDA's limits with a sentence saying how to fold
    plain = _compile(tmp_path, BATCH, "batch", BATCH_VARIANT)
    assert "pg_block" not in plain.program.source
    with pytest.raises(grid.GridLimitError, match="compile the program for these sizes"):
        launch_plan(plain.program, {"nb": 200_000})
    # compiled for 200000 elements (not specialized): folded, valid at any size
    nb = 200_000
    c = _compile(tmp_path, BATCH, "batch", BATCH_VARIANT, {"nb": nb}, specialize=False)
    assert not c.program.specialized
    (launch,) = c.program.launches
    dims = tuple(grid.evaluate(e, {"nb": nb}) for e in launch.grid)
    assert dims == (nb, 1, 1)  # one block per element of the batch, all on x
    grid.check_launch(launch.kernel, dims, launch.block)
    # beyond 2^31 - 1 blocks, rows of 2^31 - 1 along y
    huge = tuple(grid.evaluate(e, {"nb": 5 * 2**31}) for e in launch.grid)
    assert huge == (2**31 - 1, 6, 1)
    assert "pg_block" in c.program.source
    _nvcc(tmp_path, c.program.source)
    result = check_program(c.program, c.source_scop, str(tmp_path / "batch.c"),
                           {"nb": nb}, backend="cpu", seed=1)
    assert result.ok, result.message


def test_batched_specialized_folds_without_a_block_loop(tmp_path):
    c = _compile(tmp_path, BATCH, "batch", BATCH_VARIANT, {"nb": 200_000})
    (launch,) = c.program.launches
    assert grid.evaluate(launch.grid[0], {"nb": 200_000}) == 200_000
    assert "const long long pg_block = blockIdx.x;" in c.program.source
    _nvcc(tmp_path, c.program.source)
    # a small batch keeps the batch on grid z, untouched
    small = _compile(tmp_path, BATCH, "batch", BATCH_VARIANT, {"nb": 1000})
    assert small.program.launches[0].grid[2] != "1"
    assert "pg_block" not in small.program.source


def test_cpu_emulator_evaluates_grids_in_64_bits(tmp_path):
    c = _compile(tmp_path, BATCH, "batch", BATCH_VARIANT)
    text = cpu.host_source(c.program)
    assert "((long long)nb)" in text


def test_sizes_given_without_specializing_choose_the_index_width():
    # tmv at n = 46400: a has 2.15e9 elements, past 2^31 - 1; compiled for those sizes
    # (compile -p, optimize(params=...)) the parametric program gets 64-bit indices and
    # no launch bounds, at n = 4096 it stays 32-bit with its bounds checked at launch
    from polygpu.pipeline import compile_variant, prepare
    from polygpu.schedule.variant import Variant

    prepared = prepare(str(Path(__file__).resolve().parent.parent / "kernels" / "tmv.c"))
    small = compile_variant(prepared, Variant(), {"n": 4096}).program
    large = compile_variant(prepared, Variant(), {"n": 46400}).program
    assert not small.index64 and small.index_bounds and not small.specialized
    assert large.index64 and large.index_bounds == () and not large.specialized
    assert "long long" in large.source and "long long" not in kernel_text(small.source)
    large.check_parameters({"n": 46400})  # no refusal
    with pytest.raises(IndexWidthError):
        small.check_parameters({"n": 46400})
