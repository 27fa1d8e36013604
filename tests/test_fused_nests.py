"""Nests fused over their elements (issue 23, seed 003): a chain of per-element functions,
one loop nest each over the instances and joined by local arrays, runs as one kernel --
a block (or a group of threads) per element, every nest's instances of that element in
turn with a barrier between nests of different granularities -- and its intermediates
are contracted into shared memory: never loaded, never stored."""

from __future__ import annotations

import islpy as isl
import pytest

from polygpu.pipeline import compile_variant, prepare
from polygpu.runtime.check import check_program
from polygpu.schedule.candidates import candidates
from polygpu.schedule.host import batch_loops
from polygpu.schedule.variant import Variant
from polygpu.search import plan_model

CHAIN = "kernels/map_chain.c"
TEMPORARIES = ("M1", "v1", "s1", "M2", "M3")


def _fused(prepared) -> int:
    found = [k for k, tr in enumerate(prepared.candidates)
             if tr.host is not None and tr.host.kind == "fused batch"]
    assert len(found) == 1, [tr.origin for tr in prepared.candidates]
    return found[0]


def _variant(prepared, **fields) -> Variant:
    base = dict(candidate=_fused(prepared), tile=(8, 8), threads=(4, 8), shared=False,
                device_steps=True, resident=True, specialize=True, elements_per_block=4)
    return Variant(**(base | fields))


def test_the_element_loops_of_six_nests_are_aligned_one_step_per_nest():
    """``[e, position]``: the element is the grid, each nest a step of its own."""
    prepared = prepare(CHAIN, params={"ni": 37})
    host = batch_loops(prepared.analysis)
    assert host is not None and host.kind == "fused batch" and host.grid_dims == 1
    steps = {}
    for s in prepared.analysis.scop.statements:
        m = host.of(s.name)
        assert m.dim(isl.dim_type.out) == 2
        position = m.plain_get_val_if_fixed(isl.dim_type.out, 1)
        steps.setdefault(int(position.to_python()), []).append(s.name)
        # the element is the statement's own first iterator
        element = m.project_out(isl.dim_type.out, 1, 1)
        assert element.is_equal(isl.Map(
            f"[ni] -> {{ {s.name}[{', '.join(s.iterators)}] -> [{s.iterators[0]}] }}"
        ).intersect_domain(s.domain).align_params(element.get_space())), s.name
    assert len(steps) == 6  # one step per nest, in the nests' order
    assert [sorted(v) for _, v in sorted(steps.items())][-1] == ["S10"]


def test_nests_whose_dependences_cross_elements_are_no_batch(tmp_path):
    """The second nest reads its neighbour's value: no block may own one element."""
    src = tmp_path / "shift.c"
    src.write_text("""
void shift(int n, float x[n], float y[n], float z[n]) {
#pragma scop
  for (int e = 0; e < n; e++) y[e] = 2 * x[e];
  for (int e = 0; e < n - 1; e++) z[e] = y[e + 1] + y[e];
#pragma endscop
}
""")
    prepared = prepare(str(src))
    assert batch_loops(prepared.analysis) is None
    assert not any(tr.host is not None for tr in prepared.candidates)


def test_the_fused_candidate_comes_after_the_others_which_keep_their_numbers():
    """Ranked last and beyond the limit: the other candidates (and recorded variants
    naming them) are those of a scheduler without it."""
    prepared = prepare(CHAIN, params={"ni": 37})
    an = prepared.analysis
    k = _fused(prepared)
    assert k == len(prepared.candidates) - 1
    others = candidates(an, limit=k)
    assert [tr.origin for tr in prepared.candidates[:k]] == [tr.origin for tr in others[:k]]


@pytest.mark.parametrize("fields", [{}, {"elements_per_block": 1, "tile": (5, 5),
                                          "threads": (5, 5)},
                                     {"resident": False}])
def test_fused_plans_are_exact_at_an_odd_count(fields):
    params = {"ni": 37}
    prepared = prepare(CHAIN, params=params)
    compiled = compile_variant(prepared, _variant(prepared, **fields), params)
    assert len(compiled.program.launches) == 1
    result = check_program(compiled.program, prepared.source_scop, CHAIN, params,
                           backend="cpu", seed=5)
    assert result.ok, result.message


def test_intermediates_are_contracted_into_shared_memory():
    """Resident temporaries have no copy in or out: the kernel never touches their
    global arrays; the inputs are loaded and F stored as before."""
    params = {"ni": 37}
    prepared = prepare(CHAIN, params=params)
    compiled = compile_variant(prepared, _variant(prepared), params)
    buffers = {b.array: b for b in compiled.residences[0].buffers}
    assert set(TEMPORARIES) <= set(buffers)
    for name in TEMPORARIES:
        assert buffers[name].reads is None and buffers[name].writes is None, name
    assert buffers["A"].reads is not None and buffers["A"].writes is None
    assert buffers["F"].writes is not None
    body = compiled.program.source.split("map_chain_steps(", 1)[1]
    for name in TEMPORARIES:
        assert f" {name}[" not in body and f"={name}[" not in body.replace(" ", ""), name
        assert f"pg_res_{name}[" in body
    # the same plan in global memory reads and writes them
    plain = compile_variant(prepared, _variant(prepared, resident=False), params)
    assert " M1[" in plain.program.source.split("map_chain_steps(", 1)[1]


def test_the_model_prices_the_fused_plan_at_a_launch_bound_count():
    """At the paper's 31744 instances the fused plan is among the plans the default
    chooses from, and it wins: one launch and no intermediate traffic."""
    params = {"ni": 31744}
    prepared = prepare(CHAIN, params=params)
    choice = plan_model.choose(prepared, params)
    fused = [r for r in choice.ranking if r.variant.candidate == _fused(prepared)
             and r.seconds != float("inf")]
    assert fused
    assert choice.variant.candidate == _fused(prepared)


def test_tiny_elements_get_groups_as_wide_as_their_rows_and_the_default_is_exact():
    """At 2^22 instances the default runs the fused nests on 8-thread groups (rows of at
    most 5 points, 32 elements a block: several a warp); checked at an odd count."""
    sizes = {"ni": 1 << 22}
    prepared = prepare(CHAIN, params=sizes)
    chosen = plan_model.choose(prepared, sizes).variant
    assert chosen.candidate == _fused(prepared) and chosen.resident
    assert chosen.threads == (1, 8) and chosen.elements_per_block == 32
    params = {"ni": 37}
    small = prepare(CHAIN, params=params)
    compiled = compile_variant(small, chosen, params)
    (launch,) = compiled.program.launches
    assert launch.block == (256, 1, 1)
    assert compiled.program.source.count("__syncthreads") == 2  # block copies around
    result = check_program(compiled.program, small.source_scop, CHAIN, params,
                           backend="cpu", seed=9)
    assert result.ok, result.message


def test_nests_fused_over_large_elements_are_left_to_the_search():
    """mvt's two nests fuse over the rows (a fused batch candidate exists), but rows of
    256 points are no small elements: the default does not price that plan."""
    sizes = {"n": 256}
    prepared = prepare("kernels/mvt.c", params=sizes)
    k = _fused(prepared)
    choice = plan_model.choose(prepared, sizes)
    assert all(r.variant.candidate != k for r in choice.ranking)
    assert choice.variant.candidate != k
