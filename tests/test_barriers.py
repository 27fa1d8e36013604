"""Barriers inside a block: the prover's ``block``/``barrier`` dimensions, and the
device-steps plans built on them (host loops run by one thread block).

The prover rule: a dependence is satisfied by the same thread earlier, by a barrier
between phases of the same block, or by a kernel boundary.  Literal isl dependences and
schedules below, in islpy's style; then whole kernels on the CPU emulator.
"""

from __future__ import annotations

from pathlib import Path

import islpy as isl
import pytest

from polygpu.errors import PolygpuError
from polygpu.model.dependences import Dependence, Dependences
from polygpu.pipeline import compile_region
from polygpu.runtime.check import check_program
from polygpu.schedule.legality import ExecutionSchedule, violations
from polygpu.schedule.variant import Variant

KERNELS = Path(__file__).resolve().parent.parent / "kernels"


def _deps(*relations: str) -> Dependences:
    items = tuple(Dependence("flow", "x", isl.Map(r).get_tuple_name(isl.dim_type.in_),
                             isl.Map(r).get_tuple_name(isl.dim_type.out), isl.Map(r))
                  for r in relations)
    return Dependences(items, items[0].relation.get_space().params())


# trisolv's recurrence: x[i] is finished by S2[i] and read by every S1[i', i] for i' > i
TRISOLV = (
    "[n] -> { S2[i] -> S1[i2, j = i] : 0 <= i < i2 < n }",
    "[n] -> { S1[i, j] -> S2[i2 = i] : 0 <= j < i < n }",
)


def test_a_barrier_orders_threads_of_one_block():
    # one block (constant 0), row i and phase p as barriers, j on the threads
    es = ExecutionSchedule(isl.UnionMap(
        "[n] -> { S1[i, j] -> [0, i, 0, j, 0] : 0 <= j < i < n; "
        "S2[i] -> [0, i, 1, 0, 0] : 0 <= i < n }"),
        ("block", "barrier", "barrier", "parallel", "local"))
    assert violations(_deps(*TRISOLV), es) == []


def test_without_the_barrier_the_same_plan_is_refused():
    # the phase dimension made thread-local: S1's threads and S2's thread are not ordered
    es = ExecutionSchedule(isl.UnionMap(
        "[n] -> { S1[i, j] -> [0, i, j, 0] : 0 <= j < i < n; "
        "S2[i] -> [0, i, 0, 1] : 0 <= i < n }"),
        ("block", "barrier", "parallel", "local"))
    bad = violations(_deps(*TRISOLV), es)
    assert [name for name, _ in bad] == ["flow dependence S1 -> S2 on x"]


def test_a_barrier_does_not_order_different_blocks():
    # the rows spread over blocks: the dependence from S2[i] to S1[i2, i] crosses blocks,
    # and a barrier cannot order it; only a kernel boundary (global) could
    es = ExecutionSchedule(isl.UnionMap(
        "[n] -> { S1[i, j] -> [i, 0, j, 0] : 0 <= j < i < n; "
        "S2[i] -> [i, 1, 0, 0] : 0 <= i < n }"),
        ("block", "barrier", "parallel", "local"))
    bad = {name for name, _ in violations(_deps(*TRISOLV), es)}
    assert "flow dependence S2 -> S1 on x" in bad
    # the same order with the row as a global dimension (one launch per row) is legal
    es_global = ExecutionSchedule(es.schedule, ("global", "barrier", "parallel", "local"))
    assert violations(_deps(*TRISOLV), es_global) == []


def test_block_local_recurrences_in_many_blocks():
    # batched: element e on blocks, its own recurrence over i with barriers: legal, and a
    # dependence between elements is refused
    es = ExecutionSchedule(isl.UnionMap(
        "[n, m] -> { S[e, i, j] -> [e, i, j, 0] : 0 <= e < m and 0 <= i, j < n }"),
        ("block", "barrier", "parallel", "local"))
    within = _deps("[n, m] -> { S[e, i, j] -> S[e, i + 1, j2] : 0 <= e < m and "
                   "0 <= i < n - 1 and 0 <= j, j2 < n }")
    assert violations(within, es) == []
    across = _deps("[n, m] -> { S[e, i, j] -> S[e + 1, i + 1, j] : 0 <= e < m - 1 and "
                   "0 <= i < n - 1 and 0 <= j < n }")
    assert len(violations(across, es)) == 1


def test_kinds_must_come_in_order():
    with pytest.raises(ValueError):
        ExecutionSchedule(isl.UnionMap("{ S[i] -> [i, 0] }"), ("barrier", "block"))
    with pytest.raises(ValueError):
        ExecutionSchedule(isl.UnionMap("{ S[i] -> [i, 0] }"), ("parallel", "barrier"))


# --- device steps: host loops run by one block, end to end on the emulator


@pytest.mark.parametrize("name, sizes", [
    ("lu.c", {"n": 37}),
    ("polybench/trisolv.c", {"n": 45}),
    ("polybench/cholesky.c", {"n": 29}),
    ("jacobi1d_steps.c", {"tsteps": 5, "n": 301}),
])
def test_device_steps_run_the_host_loops_in_one_launch(name, sizes):
    spec = str(KERNELS / name)
    function = Path(name).stem
    compiled = compile_region(spec, function, Variant(device_steps=True))
    program = compiled.program
    assert compiled.transformation.host is not None
    assert not program.host_iterators and len(program.launches) == 1
    assert program.launches[0].grid == ("1", "1", "1")
    assert program.source.count("__syncthreads()") >= len(compiled.kernels)
    assert len(program.steps(sizes)) == 1
    result = check_program(program, compiled.source_scop, spec, sizes, seed=5)
    assert result.ok, result.message


def test_device_steps_need_host_loops():
    with pytest.raises(PolygpuError, match="device_steps"):
        compile_region(str(KERNELS / "mv.c"), "mv", Variant(device_steps=True))
