"""A thread's point loop printed loads-first (codegen/loads_first.py): the tiler's proof
that the loop carries no dependence (and its refusal where it does), the grouped
printing of the batched Cholesky's resident updates, exact, and loops left as written
(global stores, bounds that are not an upper bound on the iterator)."""

from __future__ import annotations

import re

import islpy as isl
import pytest

from polygpu.codegen import loads_first
from polygpu.frontend import ir
from polygpu.model.dependences import Dependence, Dependences
from polygpu.pipeline import compile_variant, prepare
from polygpu.runtime.check import check_program
from polygpu.schedule import tiling
from polygpu.schedule.variant import Variant

CHOLESKY = "kernels/batched_cholesky.c"


def _points_kernel(deps: Dependences) -> tiling.TiledKernel:
    """One statement ``S[i]``, 0 <= i < 64, on one thread of one block whose 64 points
    are ``i`` (``[b, t, point]``)."""
    schedule = isl.UnionMap("{ S[i] -> [0, 0, i] : 0 <= i < 64 }")
    return tiling.TiledKernel(
        index=0, statements=("S",), schedule=schedule, n_mapped=1, n_local=1,
        tile=(64,), threads=(1,), extent=(isl.PwAff("{ [] -> [(63)] }"),),
        local_names=("rx",), point_dims=(0,))


def _deps(relation: str) -> Dependences:
    return Dependences((Dependence("flow", "a", "S", "S", isl.Map(relation)),),
                       isl.Space.params_alloc(isl.DEFAULT_CONTEXT, 0))


def test_a_point_loop_is_free_only_where_no_dependence_joins_its_iterations():
    """``a[i + 1] = a[i] + 1`` on one thread's points: each point reads the one before
    (legal in a thread's own order, but not free); ``a[i] = a[i] * 2``: none does."""
    chained = _deps("{ S[i] -> S[i + 1] : 0 <= i < 63 }")
    assert tiling._free_points(_points_kernel(chained), chained).free_point_dims == ()
    none = Dependences((), isl.Space.params_alloc(isl.DEFAULT_CONTEXT, 0))
    assert tiling._free_points(_points_kernel(none), none).free_point_dims == (0,)
    # a register tile (unrolled completely) is printed its own way: never grouped
    unrolled = tiling._free_points(
        tiling.TiledKernel(**{**_points_kernel(none).__dict__, "unroll_dims": (0,)}), none)
    assert unrolled.free_point_dims == ()


def _loop(source: str) -> isl.AstNode:
    """The outer loop of the AST isl builds for the schedule ``source``."""
    build = isl.AstBuild.alloc(isl.DEFAULT_CONTEXT)
    return build.node_from_schedule_map(isl.UnionMap(source))


def test_only_an_upper_bound_on_the_iterator_with_a_positive_step_groups():
    up = _loop("[n] -> { S[i] -> [i] : 0 <= i < n }")
    it = up.for_get_iterator().get_id().get_name()
    assert loads_first.step(up, it) == 1
    strided = _loop("[n] -> { S[i] -> [i] : 0 <= i < n and i mod 3 = 0 }")
    assert loads_first.step(strided, strided.for_get_iterator().get_id().get_name()) == 3
    assert loads_first.step(up, "other") is None  # a bound on another name


def test_the_shifted_iterator_and_the_compound_value():
    assert loads_first.shifted("rx <= rxx + 8 * rx", "rx", 2) == \
        "(rx + 2) <= rxx + 8 * (rx + 2)"
    assert loads_first.shifted("rx <= 3", "rx", 0) == "rx <= 3"

    class Printer:  # the two calls new_value makes, on a tiny body
        def ref(self, r):
            return f"{r.array}[{r.index[0]}]"

        def value(self, v):
            return str(v)

    loc = None  # (not read here)
    body = ir.Assign(ir.ArrayRef("a", (ir.IntVar("j"),), loc), "-=", ir.ScalarRef("x", loc),
                     loc)
    assert loads_first.new_value(body, Printer()) == "a[j] - (x)"
    plain = ir.Assign(body.target, "=", body.value, loc)
    assert loads_first.new_value(plain, Printer()) == "x"


def _cholesky(dtype: str, n: int):
    params = {"nb": 37, "n": n}
    defines = ("DATA_TYPE=double", "SQRT_FUN=sqrt") if dtype == "double" else ()
    prepared = prepare(CHOLESKY, defines=defines, params=params)
    batch = next(k for k, tr in enumerate(prepared.candidates)
                 if tr.host is not None and tr.host.kind == "batch")
    return prepared, params, defines, batch


@pytest.mark.parametrize("dtype, n, unroll, grouped", [
    ("float", 17, 1, 2), ("double", 17, 2, 2), ("double", 5, 1, 0)])
def test_the_choleskys_resident_updates_are_grouped_loads_first_and_exact(
        dtype, n, unroll, grouped):
    """The resident batched Cholesky (a block of 4 x 8 threads): the column's division
    and the trailing update run over a thread's points, which the tiler proves free; each
    is printed in groups (4, or the variant's unroll), every new value of a group
    computed before its first store, the rest after; checked against the loop nest.
    (At n = 5 a thread has one point: no loop to group.)"""
    prepared, params, defines, batch = _cholesky(dtype, n)
    variant = Variant(candidate=batch, tile=(32, 32), threads=(4, 8), shared=False,
                      device_steps=True, resident=True, specialize=True, unroll=unroll)
    compiled = compile_variant(prepared, variant, params)
    group = unroll if unroll > 1 else loads_first.GROUP
    steps = compiled.program.source.split("_steps(")[-1]
    loops = re.findall(r"for \(; (\(rx \+ (\d+)\) <= [^;]+); rx \+= (\d+)\)\s*\{([^}]*)\}",
                       steps)
    assert len(loops) == grouped  # the division and the update
    for _, last, inc, body in loops:
        assert (int(last), int(inc)) == (group - 1, group)
        statements = [s.strip() for s in body.split(";") if s.strip()]
        values = [s for s in statements if s.startswith(f"const {dtype} pg_nx")]
        assert len(values) == group and statements[:group] == values
        assert [s.rsplit("= ", 1)[1] for s in statements[group:]] == \
            [f"pg_nx{u}" for u in range(group)]
    # the rest as one group: its first iteration under the loop's condition, the
    # others' loads and stores each under their own
    tails = re.findall(r"\n\s*if \((rx <= [^\n]+)\)\s*\{\s*const \w+ pg_nx0 = [^\n]+\n"
                       r"((?:\s*const \w+ pg_nx\d+ = [^\n]+\n)*)", steps)
    assert len(tails) == grouped
    for cond, later in tails:
        bound = cond.split("<= ", 1)[1]
        lines = [s.strip() for s in later.strip().splitlines()]
        assert [re.match(r"const \w+ (pg_nx\d+) = \(\(rx \+ (\d+)\) <= (.+)\) \? ", s)
                .groups() for s in lines] == [(f"pg_nx{u}", str(u), bound)
                                              for u in range(1, group - 1)]
        for u in range(1, group - 1):
            assert re.search(rf"if \(\(rx \+ {u}\) <= {re.escape(bound)}\)\s*[^\n]+ = "
                             rf"pg_nx{u};", steps)
    # the trailing update's new value: the element minus the product, as `-=` meant
    assert bool(re.search(rf"const {dtype} pg_nx0 = pg_res_a\[[^\n]*\] - \(\(pg_inv0 \*",
                          steps)) == bool(grouped)
    result = check_program(compiled.program, compiled.source_scop, CHOLESKY, params,
                           seed=5, defines=defines)
    assert result.ok, result.message


def test_a_loop_storing_to_global_memory_is_left_as_written(tmp_path):
    """nvcc reorders loads above stores through ``__restrict__`` pointers itself."""
    path = tmp_path / "k.c"
    path.write_text("void k(int n, float a[n], float b[n])\n{\n#pragma scop\n"
                    "  for (int i = 1; i < n - 1; i++)\n"
                    "    b[i] = a[i - 1] + a[i] + a[i + 1];\n#pragma endscop\n}\n")
    prepared = prepare(str(path), params={"n": 300})
    compiled = compile_variant(prepared, Variant(tile=(64,), threads=(16,), shared=False),
                               {"n": 300})
    assert loads_first.PREFIX not in compiled.program.source
    (kernel,) = compiled.kernels
    assert kernel.free_point_dims  # free, but a global store: printed as before
