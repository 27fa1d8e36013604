"""Arguments marked as not live-out (issue 23): ``#pragma polygpu not_live_out(T)`` in C,
``@affine(not_live_out=["T"])`` in Python.  The caller reads nothing of them after the
call, so the check does not compare their written elements (their unwritten ones must
still be unchanged) and a fused plan's residence loads them where read but never stores
them; bad markings are errors at their line."""

from __future__ import annotations

import pytest

from polygpu.errors import PolygpuError
from polygpu.frontend import load
from polygpu.pipeline import compile_variant, prepare
from polygpu.runtime.check import check_program
from polygpu.schedule.variant import Variant

REGION = """#pragma scop
  for (int e = 0; e < ni; e++)
    for (int i = 0; i < 3; i++)
      T[e][i] = A[e][i] * A[e][i] + T[e][i];
  for (int e = 0; e < ni; e++) {
    F[e] = 0;
    for (int i = 0; i < 3; i++)
      F[e] += T[e][i];
  }
#pragma endscop
}
"""
HEAD = "void chain(int ni, float A[ni][3], float T[ni][3], float F[ni]) {\n"
ODD = {"ni": 37}


def source(tmp_path, marking: str, name: str = "chain.c") -> str:
    path = tmp_path / name
    path.write_text(HEAD + marking + REGION)
    return str(path)


def fused_resident(prepared) -> Variant:
    c = next(k for k, tr in enumerate(prepared.candidates)
             if tr.host is not None and tr.host.kind == "fused batch")
    return Variant(candidate=c, tile=(4,), threads=(4,), shared=False, resident=True,
                   specialize=True)


def test_a_marked_argument_is_read_in_but_never_stored_and_not_compared(tmp_path):
    marked = source(tmp_path, "#pragma polygpu not_live_out(T)\n")
    prepared = prepare(marked)
    assert load(marked).not_live_out == ("T",)
    assert not prepared.analysis.scop.array("T").live_out
    assert prepared.analysis.scop.array("F").live_out
    c = compile_variant(prepared, fused_resident(prepared), ODD)
    buffers = {b.array: b for b in c.residences[0].buffers}
    assert buffers["T"].reads is not None and buffers["T"].writes is None
    assert buffers["F"].writes is not None
    assert check_program(c.program, c.source_scop, marked, ODD, seed=5).ok
    # the same program judged against the unmarked function: T's new values are due,
    # and the kernel never stored them
    plain = source(tmp_path, "", "plain.c")
    result = check_program(c.program, c.source_scop, plain, ODD, seed=5)
    assert not result.ok and "T" in result.message


def test_an_unmarked_argument_is_still_stored(tmp_path):
    prepared = prepare(source(tmp_path, ""))
    c = compile_variant(prepared, fused_resident(prepared), ODD)
    assert {b.array: b for b in c.residences[0].buffers}["T"].writes is not None


@pytest.mark.parametrize("marking, message", [
    ("#pragma polygpu not_live_out(G)\n", "'G' is not an array argument"),
    ("#pragma polygpu not_live_out(ni)\n", "'ni' is not an array argument"),
    ("#pragma polygpu temporary(T)\n", "the polygpu pragma is"),
])
def test_bad_markings_in_c_are_errors_at_their_line(tmp_path, marking, message):
    with pytest.raises(PolygpuError, match=message) as err:
        load(source(tmp_path, marking))
    assert err.value.loc is not None and err.value.loc.line == 2


def test_a_marking_inside_the_region_is_refused(tmp_path):
    path = tmp_path / "inside.c"
    path.write_text(HEAD + REGION.replace("#pragma scop\n", "#pragma scop\n"
                                          "#pragma polygpu not_live_out(T)\n"))
    with pytest.raises(PolygpuError, match="goes before #pragma scop"):
        load(str(path))


PYTHON = '''
from polygpu import affine, f32


@affine({marking})
def chain(ni: int, A: f32[ni, 3], T: f32[ni, 3], F: f32[ni]):
    for e in range(ni):
        for i in range(3):
            T[e, i] = A[e, i] * A[e, i] + T[e, i]
    for e in range(ni):
        F[e] = 0.0
        for i in range(3):
            F[e] += T[e, i]
'''


def test_the_python_decorator_marks_arguments(tmp_path):
    path = tmp_path / "chain_py.py"
    path.write_text(PYTHON.format(marking='not_live_out=["T"]'))
    assert load(f"{path}:chain").not_live_out == ("T",)
    path.write_text(PYTHON.format(marking='not_live_out=["X"]'))
    with pytest.raises(PolygpuError, match="'X' is not an array argument"):
        load(f"{path}:chain")
    path.write_text(PYTHON.format(marking="not_live_out=NAMES"))
    with pytest.raises(PolygpuError, match="literal list"):
        load(f"{path}:chain")
    # the decorator itself takes the argument and leaves the function callable
    from polygpu import affine

    @affine(not_live_out=["T"])
    def f(x):
        return x + 1

    assert f(1) == 2
