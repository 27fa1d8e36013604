"""The runtimes: the CUDA emulator, the sequential reference and check_program.

Hand-written KernelPrograms stand in for generated ones.  GPU tests run only where PyCUDA
and a CUDA device are available (never in CI).
"""

from __future__ import annotations

import time
from pathlib import Path

import islpy as isl
import numpy as np
import pytest

from polygpu.codegen.program import Argument, KernelProgram, Launch
from polygpu.errors import PolygpuError
from polygpu.frontend import ir, load
from polygpu.model.build import build_scop
from polygpu.pipeline import compile_region
from polygpu.runtime import cpu, gpu, grid, inputs, reference
from polygpu.runtime.check import check_program
from polygpu.runtime.compiler import CompileError
from polygpu.runtime.footprint import at_parameters, footprints, mask
from polygpu.schedule.variant import Variant

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "kernels"


pytestmark = pytest.mark.usefixtures("private_cache")  # tests/conftest.py


def scalar(name, dtype="int32"):
    return Argument(name, "scalar", dtype, ())


def array(name, *shape, dtype="float32"):
    return Argument(name, "array", dtype, tuple(shape))


def program(function, source, arguments, launches, parameters=("n",)):
    return KernelProgram(function, source, tuple(arguments), tuple(parameters), tuple(launches))


# --------------------------------------------------------------------------
# Hand-written programs for the shipped kernels
# --------------------------------------------------------------------------

MV_ARGS = (scalar("n"), array("a", "n", "n"), array("x", "n"), array("y", "n"))

MV_SOURCE = r"""
__global__ void __launch_bounds__(32) mv_kernel(int n, float *__restrict__ a,
                                                float *__restrict__ x, float *__restrict__ y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;   /* one thread per row */
    if (i < n) {
        float s = 0.0f;
        for (int j = 0; j < n; j++)
            s += a[i * n + j] * y[j];
        x[i] = s;
    }
}
"""


def mv_program(source=MV_SOURCE):
    return program("mv", source, MV_ARGS, [Launch("mv_kernel", ("(n + 31) / 32", "1", "1"),
                                                  (32, 1, 1))])


TMV_SOURCE = r"""
__global__ void tmv_kernel(int n, float *__restrict__ a, float *__restrict__ x,
                           float *__restrict__ y)
{
    /* a cyclic loop: few threads, each takes every blockDim.x-th column */
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float s = 0.0f;
        for (int j = 0; j < n; j++)
            s += a[j * n + i] * y[j];
        x[i] = s;
    }
}
"""


def tmv_program():
    return program("tmv", TMV_SOURCE, MV_ARGS, [Launch("tmv_kernel", ("1", "1", "1"), (8, 1, 1))])


MM_SOURCE = r"""
#define T 16
__global__ void __launch_bounds__(256) mm_kernel(int n, float *__restrict__ a,
                                                 float *__restrict__ b, float *__restrict__ c)
{
    __shared__ float as[T][T];
    __shared__ float bs[T][T + 1];
    int tx = threadIdx.x, ty = threadIdx.y;
    int i = blockIdx.y * T + ty, j = blockIdx.x * T + tx;
    float acc = 0.0f;
    for (int kk = 0; kk < n; kk += T) {
        as[ty][tx] = (i < n && kk + tx < n) ? a[i * n + kk + tx] : 0.0f;
        bs[ty][tx] = (j < n && kk + ty < n) ? b[(kk + ty) * n + j] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < T; k++)
            acc += as[ty][k] * bs[k][tx];
        __syncthreads();
    }
    if (i < n && j < n)
        c[i * n + j] += acc;
}
"""

MM_ARGS = (scalar("n"), array("a", "n", "n"), array("b", "n", "n"), array("c", "n", "n"))


def mm_program(source=MM_SOURCE):
    return program("mm", source, MM_ARGS,
                   [Launch("mm_kernel", ("(n + 15) / 16", "(n + 15) / 16", "1"), (16, 16, 1))])


def spec_of(name, language):
    return str(KERNELS / f"{name}.c") if language == "c" else f"{KERNELS / name}.py:{name}"


def scop_of(spec):
    return build_scop(load(spec))


# --------------------------------------------------------------------------
# The emulator
# --------------------------------------------------------------------------


def test_emulator_2d_grid_partial_blocks_and_3d_indices():
    """Every (block, thread) pair of a 3-D launch runs exactly once, with CUDA's indices;
    the last blocks along x and y are partial."""
    src = r"""
    __global__ void ids(int n, int m, int *__restrict__ out) {
        int i = blockIdx.y * blockDim.y + threadIdx.y;
        int j = blockIdx.x * blockDim.x + threadIdx.x;
        int k = blockIdx.z * blockDim.z + threadIdx.z;
        if (i < n && j < m)
            out[(k * n + i) * m + j] += 1 + (int)(threadIdx.x + 8 * threadIdx.y + 64 * threadIdx.z)
                + 1000 * (int)(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z))
                + 0 * (int)(blockDim.x * blockDim.y * blockDim.z);
    }
    """
    n, m = 13, 37
    arguments = [scalar("n"), scalar("m"), array("out", "4", "n", "m", dtype="int32")]
    launch = Launch("ids", ("(m + 7) / 8", "(n + 1) / 2", "2"), (8, 2, 2))
    prog = program("ids", src, arguments, [launch], ("n", "m"))
    out = np.zeros((4, n, m), dtype=np.int32)
    cpu.run_program(prog, {"n": n, "m": m, "out": out})
    k, i, j = np.indices((4, n, m))
    gx, gy = (m + 7) // 8, (n + 1) // 2
    thread = j % 8 + 8 * (i % 2) + 64 * (k % 2)
    block = j // 8 + gx * (i // 2 + gy * (k // 2))
    expected = 1 + thread + 1000 * block
    np.testing.assert_array_equal(out, expected)


def test_emulator_shared_memory_transpose_with_syncthreads():
    src = r"""
    #define TILE 16
    __global__ void transpose(int n, int m, float *__restrict__ a, float *__restrict__ b) {
        __shared__ float tile[TILE][TILE + 1];
        int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
        if (y < n && x < m)
            tile[threadIdx.y][threadIdx.x] = a[y * m + x];
        __syncthreads();
        /* written by another thread of the block: wrong without the barrier */
        x = blockIdx.y * TILE + threadIdx.x;
        y = blockIdx.x * TILE + threadIdx.y;
        if (y < m && x < n)
            b[y * n + x] = tile[threadIdx.x][threadIdx.y];
    }
    """
    n, m = 37, 61
    prog = program("transpose", src,
                   [scalar("n"), scalar("m"), array("a", "n", "m"), array("b", "m", "n")],
                   [Launch("transpose", ("(m + 15) / 16", "(n + 15) / 16", "1"), (16, 16, 1))],
                   ("n", "m"))
    a = np.random.default_rng(1).random((n, m), dtype=np.float32)
    b = np.zeros((m, n), dtype=np.float32)
    cpu.run_program(prog, {"n": n, "m": m, "a": a, "b": b})
    np.testing.assert_array_equal(b, a.T)


def test_emulator_cyclic_loops_over_threads_and_blocks():
    src = r"""
    __global__ void scale(int n, float alpha, float *__restrict__ x) {
        for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
            x[i] = alpha * x[i] + 1.0f;
    }
    """
    n = 1000
    prog = program("scale", src, [scalar("n"), scalar("alpha", "float32"), array("x", "n")],
                   [Launch("scale", ("3", "1", "1"), (64, 1, 1))])
    x = np.arange(n, dtype=np.float32)
    cpu.run_program(prog, {"n": n, "alpha": 2.0, "x": x})
    np.testing.assert_array_equal(x, 2 * np.arange(n, dtype=np.float32) + 1)


REVERSE_SOURCE = r"""
__global__ void reverse(int n, float *__restrict__ x) {
    __shared__ float s[256];
    int i = threadIdx.x;
    if (i >= n) return;
    s[i] = x[i];
    __syncthreads();
    x[i] = s[n - 1 - i];
}
"""


def run_reverse(run):
    n = 200
    prog = program("reverse", REVERSE_SOURCE, [scalar("n"), array("x", "n")],
                   [Launch("reverse", ("1", "1", "1"), (256, 1, 1))])
    x = np.arange(n, dtype=np.float32)
    run(prog, {"n": n, "x": x})
    np.testing.assert_array_equal(x, np.arange(n, dtype=np.float32)[::-1])


def test_emulator_early_return_before_syncthreads_does_not_deadlock():
    """Threads past the end leave; the others' barrier no longer waits for them (as exited
    warps stop counting at a hardware barrier)."""
    run_reverse(cpu.run_program)


VOCABULARY_SOURCE = r"""
__constant__ float weights[3] = {0.25f, 0.5f, 0.25f};
__device__ __forceinline__ float clamp01(float v) { return fminf(fmaxf(v, 0.0f), 1.0f); }
__device__ __forceinline__ float half(float v) { return __fdividef(v, 2.0f); }
__device__ __forceinline__ double half(double v) { return v / 2; }  /* an overload */
__global__ void smooth(int n, double beta, float *__restrict__ x, float *__restrict__ y) {
    extern __shared__ float buf[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    buf[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    if (i < n) {
        int lo = max(i - 1, 0), hi = min(i + 1, n - 1);
        float v = weights[0] * x[lo] + weights[1] * buf[threadIdx.x] + weights[2] * x[hi];
        y[i] = clamp01(half(v)) + rsqrtf(4.0f) + sqrtf(fabsf(-4.0f)) + (float)half(beta);
    }
}
__global__ void add_one(int n, double beta, float *__restrict__ x, float *__restrict__ y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll 2
    for (int k = 0; k < 2; k++)
        if (i < n) y[i] += 0.5f;
}
"""


def vocabulary_program():
    return program("smooth", VOCABULARY_SOURCE,
                   [scalar("n"), scalar("beta", "float64"), array("x", "n"), array("y", "n")],
                   [Launch("smooth", ("(n + 15) / 16", "1", "1"), (16, 1, 1), 16 * 4),
                    Launch("add_one", ("max(1, (n + 63) / 64)", "1", "1"), (64, 1, 1))])


def run_vocabulary(run):
    n = 50
    x = np.random.default_rng(2).random(n, dtype=np.float32)
    y = np.zeros(n, dtype=np.float32)
    run(vocabulary_program(), {"n": n, "beta": 0.25, "x": x, "y": y})
    lo, hi = np.maximum(np.arange(n) - 1, 0), np.minimum(np.arange(n) + 1, n - 1)
    v = 0.25 * x[lo] + 0.5 * x + 0.25 * x[hi]
    expected = np.clip(v / 2, 0, 1) + 0.5 + 2 + 0.125 + 1
    np.testing.assert_allclose(y, expected, rtol=1e-6)


def test_emulator_cuda_vocabulary():
    """__constant__, overloaded __device__ helpers, dynamic shared memory, int min/max, float
    intrinsics, double scalars and several launches in order."""
    run_vocabulary(cpu.run_program)


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
def test_launches_cuda_refuses_are_refused(backend):
    if backend == "gpu" and not gpu.gpu_available():
        pytest.skip("needs PyCUDA and a CUDA GPU")
    run = cpu.run_program if backend == "cpu" else gpu.run_program
    prog = program("mv", MV_SOURCE, MV_ARGS, [Launch("mv_kernel", ("n - n", "1", "1"), (32, 1, 1))])
    values = {"n": 4, "a": np.ones((4, 4), np.float32), "x": np.ones(4, np.float32),
              "y": np.ones(4, np.float32)}
    with pytest.raises(grid.LaunchError, match="mv_kernel: grid expressions evaluate to 0"):
        run(prog, values)
    prog = program("mv", MV_SOURCE, MV_ARGS, [Launch("mv_kernel", ("1", "1", "1"), (64, 32, 1))])
    with pytest.raises(grid.LaunchError, match="invalid block"):
        run(prog, values)


def test_emulator_checks_arguments_before_running():
    values = {"n": 4, "a": np.ones((4, 4), np.float64), "x": np.ones(4, np.float32),
              "y": np.ones(4, np.float32)}
    with pytest.raises(TypeError, match="a is float64, the kernel takes float32"):
        cpu.run_program(mv_program(), values)
    values["a"] = np.ones((3, 4), np.float32)
    with pytest.raises(ValueError, match="a has 12 elements"):
        cpu.run_program(mv_program(), values)


def test_compile_errors_name_the_kernel_line():
    src = MV_SOURCE.replace("s += a[i * n + j] * y[j];", "s += a[i * n + j] * z[j];")
    with pytest.raises(CompileError) as e:
        cpu.run_program(mv_program(src), {})
    message = str(e.value)
    assert "mv.cu:9" in message and "'z' was not declared" in message
    assert len(message.splitlines()) <= 14


def test_programs_include_the_emulation_header_precompiled_once():
    # the header is parsed once per cache (its .gch beside it), and a damaged .gch --
    # fatal to g++ -- costs a compile from the header's text, never a failure
    def mv(scale):
        src = MV_SOURCE.replace("x[i] = s;", f"x[i] = {scale}.0f * s;")
        return cpu.compile_program(mv_program(src))

    header = cpu.emulation_header()
    pch = header.with_name(header.name + ".gch")
    assert header.read_text() == cpu.HEADER.read_text() and pch.stat().st_size > 10**6
    built = mv(2)
    assert built.library.with_suffix(".cpp").read_text().startswith(f'#include "{header}"\n')
    assert cpu.emulation_header() == header and header.parent.name.startswith("emulation-")
    good = pch.read_bytes()
    try:
        pch.write_bytes(good[:4096])
        damaged = mv(3)
    finally:
        pch.write_bytes(good)
    assert damaged.library.with_suffix(".cpp").read_text().startswith(
        cpu.HEADER.read_text())
    rng = np.random.default_rng(3)
    a = rng.standard_normal((37, 37), dtype=np.float32)
    y = rng.standard_normal(37, dtype=np.float32)
    for lib, scale in ((built, 2), (damaged, 3)):
        x = np.full(37, np.nan, dtype=np.float32)
        lib.run({"n": 37, "a": a, "x": x, "y": y})
        np.testing.assert_allclose(x, scale * (a @ y), rtol=1e-4, atol=1e-4)


def test_emulator_is_fast_enough():
    """A tiled mm (256 threads a block, two barriers a tile) at n = 64, after compiling."""
    prog = cpu.compile_program(mm_program())
    n = 64
    rng = np.random.default_rng(3)
    a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
    c = np.zeros((n, n), np.float32)
    start = time.perf_counter()
    prog.run({"n": n, "a": a, "b": b, "c": c})
    elapsed = time.perf_counter() - start
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5)
    assert elapsed < 2.0  # about 0.1 s here; generous for loaded CI machines


# --------------------------------------------------------------------------
# Grid expressions
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [("(n + 31) / 32", 2), ("max(1, n / 64)", 1), ("2 * (n - 1) + -3", 69),
     ("min(n, 8, 9)", 8), ("+n", 37)],
)
def test_grid_expressions_evaluate(text, value):
    assert grid.evaluate(text, {"n": 37}) == value


@pytest.mark.parametrize(
    "text",
    ["__import__('os').system('true')", "n.bit_length()", "n % 2", "n // 2", "1.5", "True",
     "abs(n)", "n if n else 1", "n < 2", "lambda: 1", "[n][0]", "max(n)", "max(*[n, 1])",
     "max(n, key=1)", "16u", "(int)n", "n ** 2", "n << 1", "'n'", ""],
)
def test_grid_expressions_outside_the_whitelist_are_refused(text):
    with pytest.raises(grid.GridExpressionError):
        grid.evaluate(text, {"n": 37})


def test_grid_division_needs_nonnegative_operands_and_known_names():
    with pytest.raises(grid.GridExpressionError, match="division"):
        grid.evaluate("(n - 40) / 2", {"n": 37})
    with pytest.raises(grid.GridExpressionError, match="unknown parameter 'm'"):
        grid.evaluate("m + 1", {"n": 37})
    bad = program("mv", MV_SOURCE, MV_ARGS, [Launch("mv_kernel", ("n % 2", "1", "1"), (32, 1, 1))])
    with pytest.raises(grid.GridExpressionError):
        cpu.host_source(bad)


def _blocks_step_by_step(p: KernelProgram, values) -> list[int]:
    """launch_blocks' definition, one step at a time with the scalar evaluation."""
    params = p.parameter_values(values)
    blocks = [0] * len(p.launches)
    for k, host in p.steps(values):
        bound = p.grid_values(params, host)
        blocks[k] = max(blocks[k], int(np.prod([grid.evaluate(e, bound)
                                                for e in p.launches[k].grid], dtype=object)))
    return blocks


def _stepped(grids: list[tuple[str, str, str]], steps: str) -> KernelProgram:
    launches = [Launch(f"k{i}", g, (32, 1, 1)) for i, g in enumerate(grids)]
    return KernelProgram("f", "", MV_ARGS, ("n",), tuple(launches), host_iterators=("h",),
                         host_steps=steps)


def test_launch_blocks_vectorized_over_steps_is_the_step_by_step_maximum():
    """Grids over host iterators are evaluated for all steps at once: the same grids
    (the launch plan's) and maxima as step by step (Floyd-Warshall's and LU's index-set
    pieces, whose grids follow the pivot), and the same errors where a step's division
    leaves its domain or a value would pass int64 (then evaluated exactly, step by step)."""
    for name, sizes in (("floyd_warshall", {"n": 301}), ("lu", {"n": 203})):
        p = compile_region(str(KERNELS / "polybench" / f"{name}.c"), params=sizes,
                           variant=Variant(tile=(8, 32), threads=(4, 32), jam=True)).program
        assert p.host_iterators
        assert grid.launch_blocks(p, sizes) == _blocks_step_by_step(p, sizes)
        steps = p.steps(sizes)
        assert grid.step_grids(p, sizes, steps) == [
            tuple(grid.evaluate(e, p.grid_values(sizes, h)) for e in p.launches[k].grid)
            for k, h in steps]
    steps = "[n] -> { k0[h] : 0 <= h < n; k1[h] : 0 <= h < n; k2[h] : 0 <= h < n }"
    p = _stepped([("max(1, (n - h + 31) / 32)", "min(h + 1, 7)", "1"),
                  ("(h * h + 3) / 2", "1", "2"),
                  ("3", "1", "1")], steps)
    assert grid.launch_blocks(p, {"n": 100}) == _blocks_step_by_step(p, {"n": 100}) \
        == [3 * 7, (99 * 99 + 3) // 2 * 2, 3]  # 3 x 7 at h = 6
    # beyond int64 in an intermediate value: exact Python integers decide
    huge = _stepped([("(h * 4611686018427387904 * 4) / 8", "1", "1")],
                    "[n] -> { k0[h] : 0 <= h < n }")
    assert grid.launch_blocks(huge, {"n": 3}) == [2 * 4611686018427387904 * 4 // 8]
    bad = _stepped([("(h - 5) / 2", "1", "1")], "[n] -> { k0[h] : 0 <= h < n }")
    with pytest.raises(grid.GridExpressionError, match="division"):
        grid.launch_blocks(bad, {"n": 9})


# --------------------------------------------------------------------------
# Footprints and inputs
# --------------------------------------------------------------------------


def test_poisoned_set_of_mv_is_all_of_x():
    feet = footprints(scop_of(spec_of("mv", "c")))
    assert feet["x"].poisoned.is_equal(isl.Set("[n] -> { x[i] : 0 <= i < n }"))
    assert feet["a"].poisoned.is_empty() and feet["y"].poisoned.is_empty()
    assert mask(feet["x"].poisoned, {"n": 37}, (37,)).all()


def test_poisoned_set_of_mm_is_empty():
    feet = footprints(scop_of(spec_of("mm", "py")))
    for f in feet.values():
        assert f.poisoned.is_empty()
    assert feet["c"].written.is_equal(feet["c"].live_in)


@pytest.mark.parametrize("name, params", [("lu", {"n": 9}), ("trisolv", {"n": 8}),
                                          ("jacobi1d_steps", {"tsteps": 3, "n": 11})])
def test_footprints_at_parameters_are_the_parametric_ones_there(name, params):
    # the checker asks at its sizes: isl's parametric dataflow on a strided fuzzed nest
    # took over a minute, the same at fixed sizes a second
    scop = scop_of(str(ROOT / "kernels" / f"{name}.c"))
    everywhere, here = footprints(scop), footprints(scop, params)
    for a in everywhere:
        for which in ("written", "live_in", "poisoned"):
            want = at_parameters(getattr(everywhere[a], which), params)
            assert at_parameters(getattr(here[a], which), params).is_equal(want), (a, which)


@pytest.mark.parametrize("name", ["lu", "jacobi1d_steps", "seidel2d", "correlation"])
def test_live_in_by_order_agrees_with_isl_dataflow(name):
    # the fallback for where isl's compute_flow fails (found by the fuzz test on a
    # strided, min/max-bounded nest) must give the same live-in elements
    from polygpu.runtime.footprint import _live_in_by_order

    scop = scop_of(str(ROOT / "kernels" / f"{name}.c"))
    reads, writes = scop.access_map("read"), scop.access_map("write")
    flow = (isl.UnionAccessInfo.from_sink(reads).set_must_source(writes)
            .set_schedule_map(scop.schedule).compute_flow())
    assert _live_in_by_order(scop, writes).is_equal(flow.get_must_no_source().range())


def test_mask_of_a_triangle():
    s = isl.Set("[n] -> { a[i, j] : 0 <= j <= i < n }")
    np.testing.assert_array_equal(mask(s, {"n": 5}, (5, 5)), np.tril(np.ones((5, 5), bool)))


def test_a_large_triangle_is_filled_by_rows_not_points(monkeypatch):
    """syrk's written triangle at n = 2600 (3.4 million points) without enumerating one:
    enumerating took 11 s of every full-size check."""
    monkeypatch.setattr(isl.Set, "foreach_point", lambda *a: pytest.fail("enumerated"))
    s = isl.Set("[n] -> { C[i, j] : 0 <= j <= i < n }")
    got = mask(s, {"n": 2600}, (2600, 2600))
    assert got.sum() == 2600 * 2601 // 2 and got[2599, 2599] and not got[0, 1]
    np.testing.assert_array_equal(got, np.tril(np.ones((2600, 2600), bool)))


def test_integer_expressions_use_the_source_division():
    e = ir.IntBinOp("truncdiv", ir.IntConst(-7), ir.IntConst(2))
    assert inputs.eval_int(e, {}) == -3
    assert inputs.eval_int(ir.IntBinOp("floordiv", ir.IntConst(-7), ir.IntConst(2)), {}) == -4
    assert inputs.eval_int(ir.IntBinOp("rem", ir.IntConst(-7), ir.IntConst(2)), {}) == -1


def test_missing_parameter_is_reported_with_the_option_to_give_it():
    spec = spec_of("mv", "c")
    with pytest.raises(PolygpuError, match="missing parameter n of .*; give it with -p n=VALUE"):
        check_program(mv_program(), scop_of(spec), spec, {})


# --------------------------------------------------------------------------
# check_program: correct programs pass
# --------------------------------------------------------------------------


@pytest.mark.parametrize("language", ["c", "py"])
@pytest.mark.parametrize("n", [37, 61])
@pytest.mark.parametrize(("name", "make"), [("mv", mv_program), ("tmv", tmv_program),
                                            ("mm", mm_program)])
def test_correct_programs_pass(name, make, language, n):
    spec = spec_of(name, language)
    result = check_program(make(), scop_of(spec), spec, {"n": n}, seed=n)
    assert result.ok, result.message
    assert result.reference_precision == "float64"
    assert 0 < max(result.max_relative_error.values()) < 1e-5
    assert result.threshold == 1e-3


# --------------------------------------------------------------------------
# check_program: wrong programs fail
# --------------------------------------------------------------------------


def check_mv(source, language="c"):
    spec = spec_of("mv", language)
    return check_program(mv_program(source), scop_of(spec), spec, {"n": 37}, seed=1)


def test_off_by_one_bound_leaves_a_poisoned_element():
    result = check_mv(MV_SOURCE.replace("if (i < n)", "if (i < n - 1)"))
    assert not result.ok
    assert result.max_relative_error["x"] == float("inf")
    assert "first x[36]: got nan" in result.message and "poisoned on entry" in result.message


def test_wrong_operation_is_caught():
    result = check_mv(MV_SOURCE.replace("a[i * n + j] * y[j]", "a[i * n + j] + y[j]"), "py")
    assert not result.ok and "x: 37 of 37 written element(s) wrong" in result.message


def test_inner_off_by_one_is_caught():
    result = check_mv(MV_SOURCE.replace("j < n; j++", "j < n - 1; j++"))
    assert not result.ok and result.max_relative_error["x"] > 1e-3


def test_write_outside_the_written_set_is_caught():
    result = check_mv(MV_SOURCE.replace("x[i] = s;", "x[i] = s; y[i] = s;"))
    assert not result.ok
    assert "y: 37 element(s) outside the written set changed" in result.message


def test_write_outside_the_array_is_caught():
    result = check_mv(MV_SOURCE.replace("x[i] = s;", "x[i] = s; x[i + 1] = s;"))
    assert not result.ok and "x: 1 write(s) outside the array" in result.message


def test_overwriting_instead_of_accumulating_is_caught():
    spec = spec_of("mm", "c")
    wrong = mm_program(MM_SOURCE.replace("c[i * n + j] += acc", "c[i * n + j] = acc"))
    result = check_program(wrong, scop_of(spec), spec, {"n": 37}, seed=2)
    assert not result.ok and "c:" in result.message


def test_a_program_with_other_arguments_is_refused():
    spec = spec_of("mv", "c")
    prog = program("mv", MV_SOURCE, (MV_ARGS[0], MV_ARGS[1], MV_ARGS[3], MV_ARGS[2]),
                   mv_program().launches)
    with pytest.raises(ValueError, match="takes"):
        check_program(prog, scop_of(spec), spec, {"n": 5})


# --------------------------------------------------------------------------
# The reference
# --------------------------------------------------------------------------

CLIP_C = """
#include <math.h>
void clip(int n, float alpha, float a[n], float b[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    for (int j = max(0, i - 2); j < min(n, i + 3); j++)
      b[i] += sqrtf(a[j]) * alpha + rsqrtf(a[j]);
#pragma endscop
}
"""

CLIP_SOURCE = r"""
__global__ void clip_kernel(int n, float alpha, float *__restrict__ a, float *__restrict__ b) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        for (int j = max(0, i - 2); j < min(n, i + 3); j++)
            b[i] += sqrtf(a[j]) * alpha + rsqrtf(a[j]);
}
"""


def clip_program():
    return program("clip", CLIP_SOURCE,
                   [scalar("n"), scalar("alpha", "float32"), array("a", "n"), array("b", "n")],
                   [Launch("clip_kernel", ("(n + 63) / 64", "1", "1"), (64, 1, 1))])


def test_c_reference_has_min_max_and_cuda_math(tmp_path):
    path = tmp_path / "clip.c"
    path.write_text(CLIP_C)
    result = check_program(clip_program(), scop_of(str(path)), str(path), {"n": 41}, seed=4)
    assert result.ok and result.reference_precision == "float64", result.message


def test_c_reference_computes_in_double():
    prog = load(spec_of("mv", "c"))
    n = 3
    a = np.full((n, n), 1 / 3)
    x, y = np.zeros(n), np.ones(n)
    run = reference.run_reference(prog, {"n": n, "a": a, "x": x, "y": y})
    assert run.precision == "float64"
    assert x[0] == 1 / 3 + 1 / 3 + 1 / 3  # float32 would give 1.0000000298


FLOAT_MATH_ON_DOUBLES_C = """
#include <math.h>
void roots(int n, double a[n], double b[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    b[i] = sqrtf(a[i]) + a[i];
#pragma endscop
}
"""


def test_float_functions_on_double_data_keep_float_rounding(tmp_path):
    """A region without float data that calls ``sqrtf`` rounds to float, as C (and the
    generated kernel) does: the double reference must not turn it into ``sqrt``."""
    path = tmp_path / "roots.c"
    path.write_text(FLOAT_MATH_ON_DOUBLES_C)
    a = np.array([2.0, 3.0, 0.1, 7.5])
    b = np.zeros(4)
    run = reference.run_reference(load(str(path)), {"n": 4, "a": a, "b": b})
    assert run.precision == "float64"
    expected = np.sqrt(a.astype(np.float32)).astype(np.float64) + a
    assert np.array_equal(b, expected) and not np.allclose(b, np.sqrt(a) + a, rtol=1e-10)
    # and the compiled region passes its check (it failed before: error ~1e-8 > 1e-10)
    c = compile_region(str(path))
    result = check_program(c.program, c.source_scop, str(path), {"n": 37}, seed=3)
    assert result.ok, result.message


def test_c_reference_falls_back_to_float32_and_says_so(tmp_path):
    path = tmp_path / "clip.c"
    path.write_text('_Static_assert(sizeof(float) == 4, "float is 4 bytes");\n' + CLIP_C)
    result = check_program(clip_program(), scop_of(str(path)), str(path), {"n": 41}, seed=5)
    assert result.ok and result.reference_precision == "float32", result.message
    assert "does not compile with float read as double" in result.message


def test_python_reference_is_the_plain_function():
    fn = reference.python_function(load(spec_of("mm", "py")))
    assert fn.__name__ == "mm" and not hasattr(fn, "__wrapped__")


# --------------------------------------------------------------------------
# The GPU (skipped without PyCUDA and a device)
# --------------------------------------------------------------------------

needs_gpu = pytest.mark.skipif(not gpu.gpu_available(), reason="needs PyCUDA and a CUDA GPU")


def test_gpu_module_reports_missing_pycuda_clearly():
    if gpu.gpu_available():
        pytest.skip("a GPU is available")
    with pytest.raises(gpu.GpuUnavailableError, match="PyCUDA|CUDA device"):
        gpu.run_program(mv_program(), {})


@needs_gpu
@pytest.mark.parametrize(("name", "make"), [("mv", mv_program), ("tmv", tmv_program),
                                            ("mm", mm_program)])
def test_gpu_runs_correct_programs(name, make):
    spec = spec_of(name, "c")
    result = check_program(make(), scop_of(spec), spec, {"n": 61}, backend="gpu", seed=6)
    assert result.ok, result.message


@needs_gpu
def test_gpu_cuda_vocabulary():
    run_vocabulary(gpu.run_program)


@needs_gpu
def test_gpu_early_return_before_syncthreads():
    run_reverse(gpu.run_program)


@needs_gpu
def test_gpu_rejects_a_wrong_program_and_times_a_right_one():
    spec = spec_of("mv", "c")
    bad = mv_program(MV_SOURCE.replace("if (i < n)", "if (i < n - 1)"))
    assert not check_program(bad, scop_of(spec), spec, {"n": 37}, backend="gpu").ok
    n = 1024
    values = {"n": n, "a": np.ones((n, n), np.float32), "x": np.zeros(n, np.float32),
              "y": np.ones(n, np.float32)}
    timing = gpu.time_program(mv_program(), values, repeats=5)
    assert len(timing.times_ms) == 5 and 0 < timing.median_ms < 100
    np.testing.assert_array_equal(values["x"], np.full(n, n, np.float32))


@pytest.mark.parametrize("text", [
    "[n] -> { A[i, j, k] : 1 <= i, j, k <= n - 2 }",  # a stencil's interior: one box
    "[n] -> { A[i, j, k] : 1 <= i <= n - 2 and 0 <= j <= i and k = 3 }",  # not a box
    "[n] -> { A[i, j, k] : 0 <= i, j, k < n and (i <= 1 or j >= n - 2) }",  # two boxes
    "[n] -> { A[i, j, k] : 0 <= i, j, k < n and exists e: i = 2e }",  # strided
    "[n] -> { A[i, j, k] : 1 <= i < n and 0 <= j < n and 0 <= k < 2n }",  # beyond the extent
    # rows of polyhedra: equalities with and without a coefficient on the last index,
    # bounds of any sign, one row only
    "[n] -> { A[i, j, k] : i + j + k = n and i, j, k >= 0 }",
    "[n] -> { A[i, j, k] : 2k = i + 1 and 0 <= j <= i < n }",
    "[n] -> { A[i, j, k] : 3i - 2k >= -5 and i + 2k <= 2n and i - 2 <= j < n and k >= 1 }",
    "[n] -> { A[i, j, k] : 5k <= 3j + 4 and 7k >= 2j - 3 and i = 2 and j < n }",
    "[n] -> { A[i, j, k] : 0 <= i, j < n and k = j - i }",
])
def test_mask_fills_boxes_and_enumerates_the_rest(text):
    """The box and row fast paths mark exactly the points isl enumerates."""
    s = isl.Set(text)
    n, shape = 7, (7, 7, 7)
    expected = np.zeros(shape, bool)
    point = at_parameters(s, {"n": n})

    def add(p):
        c = tuple(p.get_coordinate_val(isl.dim_type.set, k).to_python() for k in range(3))
        if all(0 <= x < e for x, e in zip(c, shape, strict=True)):
            expected[c] = True

    point.foreach_point(add)
    np.testing.assert_array_equal(mask(s, {"n": n}, shape), expected)
    assert expected.any() and not expected.all()


def test_compile_workers_follow_the_cpu_affinity(monkeypatch):
    """A tune pinned to some cores starts one compiler per core it may use, not per core
    the machine has; without affinity support, the machine's count."""
    from polygpu.runtime import compiler

    monkeypatch.setattr(compiler.os, "sched_getaffinity", lambda pid: {4, 5, 6}, raising=False)
    monkeypatch.setattr(compiler.os, "cpu_count", lambda: 64)
    assert compiler.usable_cpus() == 3
    monkeypatch.delattr(compiler.os, "sched_getaffinity", raising=False)
    assert compiler.usable_cpus() == 64
