"""Parallel sum reductions with atomic combining: which reductions qualify, the relaxed
dependences, the scheduler's atomic candidates and the code they give -- checked against
the sequential reference on the CPU emulator, and compiled by nvcc."""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from polygpu.frontend.python_frontend import parse_python_function
from polygpu.model.analysis import analyze
from polygpu.model.build import build_scop
from polygpu.pipeline import compile_variant, prepare
from polygpu.runtime.check import check_program
from polygpu.schedule.legality import prove_legal
from polygpu.schedule.tiling import execution_schedule
from polygpu.schedule.variant import Variant
from tests.generated import kernel_text

KERNELS = Path(__file__).resolve().parent.parent / "kernels"
_counter = itertools.count()


def _write(tmp_path, body: str, signature: str) -> str:
    path = tmp_path / f"r{next(_counter)}.py"
    path.write_text("from __future__ import annotations\n\n"
                    "from polygpu import affine, f32, f64, i32\n\n\n@affine\n"
                    f"def k({signature}):\n" + textwrap.indent(textwrap.dedent(body), "    "))
    return f"{path}:k"


def _atomic_candidates(spec: str):
    prepared = prepare(spec)
    return prepared, [c for c, tr in enumerate(prepared.candidates) if tr.atomic]


def _check(prepared, variant: Variant, params: dict[str, int], seed: int = 7):
    compiled = compile_variant(prepared, variant)
    result = check_program(compiled.program, compiled.source_scop, prepared.spec, params,
                           seed=seed)
    assert result.ok, result.message
    return compiled


# ---------------------------------------------------------------- which reductions


def test_only_sum_reductions_into_atomic_types_are_combinable(tmp_path):
    spec = _write(tmp_path, """
        for i in range(n):
            for j in range(n):
                s[i] += a[i][j]
                p[i] *= a[i][j]
                m[i] = max(m[i], a[i][j])
                d[i] = d[i] - a[i][j]
                w[i] = a[i][j] + w[i]
        """, "n: int, a: f32[n, n], s: f32[n], p: f32[n], m: f32[n], d: f64[n], w: f32[n]")
    an = analyze(build_scop(parse_python_function(*spec.split(":"))))
    assert {r.array for r in an.combinable.values()} == {"s", "d", "w"}


def test_relaxed_dependences_keep_other_statements_ordered_against_every_update():
    """Dropping the chain between updates must not drop ``x[i] = 0`` before update j."""
    an = analyze(build_scop(parse_python_function(str(KERNELS / "mv.py"), "mv")))
    relaxed = an.dependences_with(["S1"])
    assert not [d for d in relaxed.items if d.source == d.sink == "S1" and d.array == "x"]
    init = [d for d in relaxed.items if (d.source, d.sink, d.array) == ("S0", "S1", "x")]
    pairs = init[0].relation
    for d in init[1:]:
        pairs = pairs.union(d.relation)
    import islpy as isl
    every = isl.Map("[n] -> { S0[i] -> S1[i, j] : 0 <= i < n and 0 <= j < n }")
    assert every.is_subset(pairs)  # the exact dependence links S0 to j = 0 only


# ---------------------------------------------------------------- code on the emulator


@pytest.mark.parametrize("name", ["mv", "tmv", "mvt"])
@pytest.mark.parametrize("variant", [
    dict(tile=(4, 64), threads=(4, 32)),  # one point per thread: an atomic per update
    dict(tile=(16, 64), threads=(1, 64), unroll=4),  # partial sums over a loop
    dict(tile=(8, 64), threads=(1, 32), jam=True),  # register tile of partial sums
    dict(tile=(8, 64), threads=(2, 32), jam=True, shared=False),
    dict(tile=(4, 64), threads=(2, 16), blocked=True),
    dict(tile=(16, 32), threads=(1, 32), registers=False),  # atomics in global memory
])
def test_atomic_candidates_match_the_reference(name, variant):
    prepared, atomic = _atomic_candidates(str(KERNELS / f"{name}.c"))
    assert atomic, f"{name} has a sum reduction: expected an atomic candidate"
    for c in atomic[:2]:
        compiled = _check(prepared, Variant(candidate=c, **variant), {"n": 77})
        assert re.search(r"pg_atomic_add(_warp)?\(&", compiled.program.source)
        # the tiled schedule is proven against the relaxed dependences only
        an, tr = compiled.analysis, compiled.transformation
        prove_legal(an.dependences_with(tr.atomic), execution_schedule(compiled.kernels))


def test_partial_sums_live_in_registers_and_start_at_zero():
    prepared, (c, *_) = _atomic_candidates(str(KERNELS / "tmv.c"))
    compiled = compile_variant(prepared, Variant(candidate=c, tile=(64, 32),
                                                 threads=(1, 32)))
    (x,) = [b for b in compiled.memory.buffers if b.array == "x"]
    assert x.space == "register" and x.atomic and x.box.size == 1
    src = compiled.program.source
    assert "x_reg[pg_u0] = 0;" in src and "pg_atomic_add(&x[" in src
    assert "x[" not in src.split("x_reg[pg_u0] = 0;")[1].split("pg_atomic_add")[0]


def test_warps_sum_first_only_where_their_lanes_share_the_element():
    """mv spreads j over threadIdx.x: a warp's lanes add to one x[i] (summed in the
    warp, then one atomic); tmv spreads j over y: each lane has its own x[i]."""
    for name, expected in (("mv", "pg_atomic_add_warp(&x["), ("tmv", "pg_atomic_add(&x[")):
        prepared, (c, *_) = _atomic_candidates(str(KERNELS / f"{name}.c"))
        for variant in (Variant(candidate=c, tile=(16, 64), threads=(1, 64)),
                        Variant(candidate=c, tile=(16, 64), threads=(1, 64),
                                registers=False)):
            src = compile_variant(prepared, variant).program.source
            assert expected in kernel_text(src)
    # a warp spanning two rows (16 threads along x) must not sum across them
    prepared, (c, *_) = _atomic_candidates(str(KERNELS / "mv.c"))
    src = compile_variant(prepared, Variant(candidate=c, tile=(4, 32),
                                            threads=(2, 16))).program.source
    assert "pg_atomic_add(&x[" in kernel_text(src)
    assert "pg_atomic_add_warp(&" not in kernel_text(src)


def test_a_read_of_the_sum_waits_for_every_update(tmp_path):
    """``y[i] = 2 x[i]`` after the reduction: with the updates spread over threads it
    must be in a later kernel than all of them."""
    spec = _write(tmp_path, """
        for i in range(n):
            x[i] = 0.0
            for j in range(n):
                x[i] += a[i][j] * v[j]
            y[i] = 2.0 * x[i]
        """, "n: int, a: f32[n, n], v: f32[n], x: f32[n], y: f32[n]")
    prepared, atomic = _atomic_candidates(spec)
    assert atomic
    for c in atomic:
        tr = prepared.candidates[c]
        assert tr.kernel_of("S0") < tr.kernel_of("S1") < tr.kernel_of("S2")
        _check(prepared, Variant(candidate=c, tile=(2, 32), threads=(2, 8)), {"n": 45})
        _check(prepared, Variant(candidate=c, tile=(4, 32), threads=(1, 32), jam=True),
               {"n": 45}, seed=3)


def test_an_update_between_sums_forbids_spreading_the_outer_loop(tmp_path):
    """``x[i] *= 0.5`` between the time steps of a sum over t: the steps may not run on
    different threads even with atomics (the relaxed dependences keep the scaling
    between every two updates)."""
    spec = _write(tmp_path, """
        for t in range(m):
            for i in range(n):
                x[i] += a[t][i]
            for i in range(n):
                x[i] = x[i] * 0.5
        """, "m: int, n: int, a: f32[m, n], x: f32[n]")
    prepared = prepare(spec)
    for tr in prepared.candidates:
        assert "S0" not in tr.atomic
    _check(prepared, Variant(tile=(32,), threads=(32,)), {"m": 5, "n": 40})


def test_integer_and_double_sums(tmp_path):
    spec = _write(tmp_path, """
        for i in range(n):
            for j in range(n):
                c[j] += b[i][j] * 3
                d[i] -= e[j][i]
        """, "n: int, b: i32[n, n], c: i32[n], e: f64[n, n], d: f64[n]")
    prepared, atomic = _atomic_candidates(spec)
    assert atomic
    for c in atomic:
        _check(prepared, Variant(candidate=c, tile=(8, 32), threads=(2, 16)), {"n": 37})


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("name", ["mv", "mvt"])
def test_atomic_kernels_compile_without_warnings(tmp_path, name):
    prepared, (c, *_) = _atomic_candidates(str(KERNELS / f"{name}.c"))
    for k, variant in enumerate([Variant(candidate=c, tile=(8, 128), threads=(1, 128),
                                         jam=True),
                                 Variant(candidate=c, tile=(4, 64), threads=(4, 32),
                                         registers=False)]):
        program = compile_variant(prepared, variant).program
        src = tmp_path / f"{name}{k}.cu"
        src.write_text(program.source)
        result = subprocess.run(["nvcc", "-arch=sm_90", "-std=c++17", "-Werror",
                                 "all-warnings", "-c", str(src), "-o",
                                 str(tmp_path / f"{name}{k}.o")],
                                capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
