"""A reduction's running value in a register across its loop, and a one-thread step's
sums split over a warp's lanes (codegen/accumulator.py): where they apply, where they
must not, and that the programs stay exact (the per-element Cholesky's substitutions:
``b[i] -= a[i][j] * b[j]`` reads the array it updates)."""

from __future__ import annotations

import re

import islpy as isl
import pytest

from polygpu.codegen import accumulator
from polygpu.errors import SourceLoc
from polygpu.frontend import ir
from polygpu.pipeline import compile_variant, prepare
from polygpu.runtime.check import check_program
from polygpu.schedule.variant import Variant

CHOLESKY = "kernels/batched_cholesky.c"
DOUBLE = ("DATA_TYPE=double", "SQRT_FUN=sqrt")


def _batch(prepared) -> int:
    return next(k for k, tr in enumerate(prepared.candidates)
                if tr.host is not None and tr.host.kind == "batch")


def _write(tmp_path, body: str) -> str:
    path = tmp_path / "k.c"
    path.write_text("void k(int n, float a[n][n], float b[n])\n{\n#pragma scop\n"
                    + body + "#pragma endscop\n}\n")
    return str(path)


def test_a_substitution_row_accumulates_and_a_row_reading_its_own_target_does_not(
        tmp_path):
    """``b[i] -= a[i][j] * b[j]`` over ``j < i`` never reads ``b[i]`` through ``b[j]``;
    over ``j <= i`` it does (at ``j = i``), and may not keep ``b[i]`` in a register."""
    from polygpu.model.parallelism import accumulates

    for bound, expected in (("j < i", True), ("j <= i", False)):
        spec = _write(tmp_path, f"  for (int i = 0; i < n; i++)\n"
                                f"    for (int j = 0; {bound}; j++)\n"
                                f"      b[i] -= a[i][j] * b[j];\n")
        (stmt,) = prepare(spec, params={"n": 9}).analysis.scop.statements
        assert accumulates(stmt) is expected, bound
        # and only a loop that leaves the target in place keeps it
        assert accumulator.accumulated(stmt, "b[c1]", "c3") is expected
        assert not accumulator.accumulated(stmt, "b[c3]", "c3")


def test_the_running_value_replaces_the_target_and_its_read():
    loc = SourceLoc("k.c", 1)
    i, j = ir.IntVar("i"), ir.IntVar("j")
    target = ir.ArrayRef("b", (i,), loc)
    body = ir.Assign(target, "=", ir.BinOp("-", ir.ArrayRef("b", (i,), loc), ir.BinOp(
        "*", ir.ArrayRef("a", (i, j), loc), ir.ArrayRef("b", (j,), loc))), loc)
    out = accumulator.with_accumulator(body)
    assert str(out.target) == accumulator.NAME
    assert str(out.value.lhs) == accumulator.NAME and str(out.value.rhs.rhs) == "b[j]"


def _before(transformation, statement: str, first: tuple, second: tuple) -> bool:
    """Whether instance ``first`` of ``statement`` (its iterators after the element)
    runs before ``second`` in the kernel time of ``transformation``."""
    from polygpu.model.isl_util import maps_of

    for kernel in transformation.kernels:
        for m in maps_of(kernel.time):
            if m.get_tuple_name(isl.dim_type.in_) != statement:
                continue
            names = ", ".join(m.get_space().get_var_dict(isl.dim_type.param))

            def at(point, m=m, names=names):
                fixed = " and ".join(f"x{k} = {v}" for k, v in enumerate(point))
                text = f"[{names}] -> {{ {statement}[e, " + ", ".join(
                    f"x{k}" for k in range(len(point))) + f"] : e = h0 and {fixed} }}"
                return m.intersect_domain(isl.Set(text).align_params(m.get_space())).range()
            return not at(first).lex_lt_set(at(second)).is_empty()
    raise KeyError(statement)


def test_a_thread_keeps_its_rows_running_value_in_a_register():
    """mv without its register buffer: each thread's ``x[i]`` in ``pg_acc`` across the
    time loop over ``j``, stored once, exact; with the buffer nothing changes (a register
    buffer's element is a register already)."""
    params = {"n": 100}
    prepared = prepare("kernels/mv.c", params=params)
    plain = compile_variant(prepared, Variant(tile=(128,), threads=(128,), registers=False),
                            params)
    text = plain.program.source
    assert "float pg_acc = x[" in text and "pg_acc += " in text
    assert "#pragma unroll 4" in text
    result = check_program(plain.program, plain.source_scop, "kernels/mv.c", params, seed=3)
    assert result.ok, result.message
    held = compile_variant(prepared, Variant(tile=(128,), threads=(128,)), params)
    assert "pg_acc" not in held.program.source and "x_reg" in held.program.source


def test_a_group_without_parallelism_keeps_the_source_order():
    """The per-element substitutions have no parallel loop: distributed, their group
    runs in the original order -- the forward substitution by rows, S3[i = 2, j = 1]
    before S3[i = 3, j = 0] (isl's schedule ran it by columns, each inner iteration
    updating another element: no running value to keep)."""
    params = {"nb": 37, "n": 17}
    prepared = prepare(CHOLESKY, params=params)
    assert _before(prepared.candidates[_batch(prepared)], "S3", (2, 1), (3, 0))


@pytest.mark.parametrize("n,tile,threads,per_block,lanes", [
    (17, (16, 16), (16, 16), 1, 32),  # a block of 256: its first warp
    (17, (4, 8), (4, 8), 1, 32),      # a block of 32: the whole warp
    (5, (4, 4), (4, 4), 1, 16),       # a block of 16: its 16 lanes
    (17, (16, 16), (4, 4), 2, 16),    # groups of 16, two elements a block
    (3, (2, 2), (2, 2), 4, 4),        # groups of 4
])
@pytest.mark.parametrize("dtype", ["float", "double"])
def test_device_steps_split_a_one_thread_steps_sums_over_lanes(n, tile, threads, per_block,
                                                                lanes, dtype):
    params = {"nb": 37, "n": n}
    defines = DOUBLE if dtype == "double" else ()
    prepared = prepare(CHOLESKY, defines=defines, params=params)
    variant = Variant(candidate=_batch(prepared), tile=tile, threads=threads, shared=False,
                      device_steps=True, resident=True, specialize=True,
                      elements_per_block=per_block)
    compiled = compile_variant(prepared, variant, params)
    steps = compiled.program.source.split("_steps(")[-1]
    if threads[0] * threads[1] > lanes:  # the other threads wait at the barrier
        assert f"if (pg_tid < {lanes})" in steps
    # the backward substitution split (printed once per branch of the steps' AST); the
    # forward one right-looking, its rows dealt to the lanes (no butterfly)
    assert steps.count("-= pg_acc;") >= 2 and steps.count("pg_o >>= 1") == \
        steps.count("-= pg_acc;")
    assert "pg_acc += (pg_res_a[0][(c5) - (0)][(c7) - (0)]" not in steps
    # each lane's rows from its first on, with the pivot b[c5] loaded once before
    # (codegen/invariant_reads.py)
    first = re.search(r"int (\w+) = c5 \+ 1 \+ pg_tid \* \(1\);\s*if \(\1 <= [^)]+\)\s*"
                      r"\{\s*const \w+ pg_inv0 = pg_res_b\[0\]\[\(c5\) - \(0\)\];", steps)
    assert first and re.search(rf"for \(; {first[1]} <= [^;]+; {first[1]} \+= {lanes} "
                               rf"\* \(1\)\)", steps)
    assert re.search(r"pg_res_b\[0\]\[\(\w+\) - \(0\)\] -= \(pg_res_a\[[^;]* \* pg_inv0\)",
                     steps)
    mask = "pg_mask" if per_block > 1 else (
        "0xffffffffu" if lanes == 32 else f"{hex((1 << lanes) - 1)}u")
    assert f"__shfl_xor_sync({mask}, pg_acc, pg_o, {lanes})" in steps
    # lane 0 alone writes; the others only read inside the split sums
    assert "if (pg_tid == 0)" in steps
    result = check_program(compiled.program, compiled.source_scop, CHOLESKY, params,
                           seed=7, defines=defines)
    assert result.ok, result.message


def test_device_steps_turn_the_forward_substitution_and_not_the_backward_one():
    """A one-thread step's update turned right-looking (schedule/lane_loops.turned) is
    kept only where proven: the forward substitution's ``b[i] -= a[i][j] * b[j]`` at
    ``[j, c, 0, i]`` runs every row's terms in the order of ``j`` still; the backward
    one's (``j > i``, rows descending) would run them in the other order, and the prover
    refuses it.  The turned rows' loop is the update's alone (the ``0`` before ``i``)
    and proven to carry no dependence: the lanes share it."""
    from polygpu.schedule import lane_loops, tiling
    from polygpu.schedule.legality import violations

    params = {"nb": 37, "n": 17}
    prepared = prepare(CHOLESKY, params=params)
    tr = prepared.candidates[_batch(prepared)]
    deps = prepared.analysis.dependences_with(tr.atomic)
    (steps,) = [k for k in tr.kernels if k.n_space == 0]
    assert sorted(lane_loops.updates(steps)) == ["S3", "S5"]
    variant = Variant(candidate=_batch(prepared), device_steps=True)
    for update, legal in (("S3", True), ("S5", False)):
        turned = lane_loops.turned(steps, update, gap=1)
        es = tiling.execution_schedule(
            (tiling._tile_kernel(prepared.analysis.scop, turned, 0, variant),))
        assert (not violations(deps, es)) is legal, update
    kernels = tiling.tile(prepared.analysis.scop, deps, tr, variant)
    (one,) = [k for k in kernels if k.n_mapped == 0 or k.n_threads == 1][:1]
    assert one.lane_dims
    row = 2 * one.n_mapped + one.lane_dims[0]
    moved = {m.get_tuple_name(isl.dim_type.in_) for m in lane_loops.maps_of(one.schedule)
             if row in lane_loops.loop_dims(m)}
    assert moved == {"S3"}
    # without device steps the kernel is tiled as given
    plain = tiling.tile(prepared.analysis.scop, deps, tr, Variant(candidate=_batch(prepared)))
    assert not any(k.lane_dims for k in plain)
