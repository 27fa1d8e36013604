"""End to end on random affine nests: schedule, tile, prove legal, emit CUDA, run the emitted
text on the CPU emulator and compare with the original C compiled by the host compiler.

Each nest (imperfect, triangular, strided, descending, guarded, several statements,
in-place updates; from tests/random_nests.py) is compiled with several variants -- block
and thread shapes, register tiles by unroll-and-jam, a strip-mined time loop -- at odd
sizes, so partial tiles are exercised.  ``compile_region`` proves every tiled schedule
legal with isl before emitting code; the check then runs it.  Marked ``slow`` (a few
minutes): ``pytest -m 'not slow'`` skips it during development, CI runs it.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, assume, example, given, settings

from polygpu.errors import PolygpuError
from polygpu.pipeline import compile_region
from polygpu.runtime.check import check_program
from polygpu.schedule.variant import Variant
from tests.random_nests import Loop, Stmt, nests, render_c

VARIANTS = (
    (Variant(), (37, 61)),
    (Variant(tile=(2, 4, 16), threads=(1, 2, 8), jam=True), (37,)),
    (Variant(tile=(3, 32), threads=(3, 32), time_tile=4, unroll=2), (61,)),
)
_counter = itertools.count()


@pytest.mark.slow
@settings(max_examples=105, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(tree=nests())
# regression: a footprint on a lattice (rows + columns even) was given a stride per
# dimension that isl measured relative to the other dimension: half the rows lost
@example(tree=[
    Loop("i", "0", "n", 2, [Stmt(("x", ("i + 0",)), "+=", [("A", ("n - 1 - i", "i + 0")),
                                                           ("A", ("i + 0", "n - 1 - i"))])]),
    Loop("i", "0", "n", 1, [Loop("j", "0", "n", 2, [
        Stmt(("A", ("n - 1 - i", "i + j")), "+=", [])])])])
def test_random_nest_runs_correctly(tree, tmp_path):
    path = tmp_path / f"nest_{next(_counter)}.c"
    path.write_text(render_c(tree))
    for variant, sizes in VARIANTS:
        try:
            compiled = compile_region(str(path), "nest", variant)
        except PolygpuError as err:  # a nest whose guards are never true: not a kernel
            assume("ever runs" not in str(err))
            raise
        for n in sizes:
            result = check_program(compiled.program, compiled.source_scop, str(path),
                                   {"n": n}, seed=n)
            assert result.ok, (render_c(tree), variant, n, result.message,
                               compiled.program.source)
