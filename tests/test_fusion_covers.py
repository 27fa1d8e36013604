"""Fusion covers (seed 003, issue 23): a fused batch's kernels split into launches
(``Variant.cuts``), each launch its own block, threads and resident buffers, what crosses
a cut in global memory; the prover refusing a cut through a step loop; the cover search
(search/covers.py) exact against pricing every cover; every cover it ranks run on the CPU
emulator against the original chain at an odd instance count."""

from __future__ import annotations

import itertools
import math
from functools import cache

import pytest

from polygpu.errors import PolygpuError
from polygpu.pipeline import compile_variant, prepare
from polygpu.runtime.check import check_program
from polygpu.schedule.splits import split_points
from polygpu.schedule.variant import Variant
from polygpu.search import covers, plan_model

CHAIN = "kernels/map_chain.c"
ODD = {"ni": 37}
LARGE = {"ni": 4194304}


@cache
def chain():
    return prepare(CHAIN, "map_chain")


def fused_candidate(prepared) -> int:
    return next(k for k, tr in enumerate(prepared.candidates)
                if tr.host is not None and tr.host.kind == "fused batch")


def grouped(**fields) -> Variant:
    """The chain's fused plan on 8-thread groups, 4 elements a block, resident."""
    return Variant(candidate=fused_candidate(chain()), tile=(8, 8), threads=(1, 8),
                   shared=False, device_steps=True, resident=True, specialize=True,
                   elements_per_block=4, **fields)


def test_cuts_are_validated_and_round_trip():
    for bad in ((0,), (2, 1), (2, 2)):
        with pytest.raises(PolygpuError, match="cuts"):
            Variant(cuts=bad)
    v = Variant(device_steps=True, cuts=(1, 3))
    assert Variant.from_json(v.to_json()) == v
    assert "cuts" not in Variant().to_json()
    assert v.launches(5) == ((0,), (1, 2), (3, 4))
    assert Variant().launches(3) == ((0, 1, 2),)
    with pytest.raises(PolygpuError, match="has 3 kernels"):
        v.launches(3)  # a cut at kernel 3 of 3 kernels
    with pytest.raises(PolygpuError, match="per kernel|cannot override"):
        Variant(kernels=((0, (("cuts", (1,)),)),))


def test_a_cut_program_launches_each_part_with_its_own_block_and_residence():
    c = compile_variant(chain(), grouped(cuts=(3,)), ODD)
    assert [la.kernel for la in c.program.launches] == ["map_chain_steps0",
                                                        "map_chain_steps1"]
    assert c.program.source.count("__global__") == 2
    first, second = ({b.array: b for b in r.buffers} for r in c.residences)
    # kernels 0-2 (M1, v1, s1) and kernel 3 (M2, M3, F): temporaries used by one launch
    # alone are contracted, s1 crosses the cut through global memory
    assert first["M1"].reads is None and first["M1"].writes is None
    assert first["v1"].reads is None and first["v1"].writes is None
    assert first["s1"].writes is not None and "s1" in second
    assert second["s1"].reads is not None and second["s1"].writes is None
    assert second["M2"].reads is None and second["M3"].writes is None
    assert "M1" not in second and "D" not in first
    # every launch's threads are its own kernels' (the one-thread norm alone: one lane
    # per group), not the widest of the program
    c = compile_variant(chain(), replace_fields(grouped(cuts=(2, 3)), elements_per_block=1,
                                                threads=(8, 8)), ODD)
    blocks = [la.block[0] for la in c.program.launches]
    assert blocks[1] < blocks[0] and blocks[1] < blocks[2], blocks


def replace_fields(v: Variant, **fields) -> Variant:
    return Variant.from_json({**v.to_json(), **fields})


def test_the_prover_refuses_a_cut_through_a_step_loop():
    """A per-element Cholesky's pivot column and its update run at every step k: a cut
    between them would run all of one before the other."""
    prepared = prepare("kernels/batched_cholesky.c")
    batch = next(k for k, tr in enumerate(prepared.candidates)
                 if tr.host is not None and tr.host.kind == "batch")
    variant = Variant(candidate=batch, tile=(32,), threads=(32,), shared=False)
    compile_variant(prepared, variant)  # one launch: proven
    for cuts in ((1,), (2,)):
        with pytest.raises(PolygpuError, match="would run a statement before one it "
                                               "depends on"):
            compile_variant(prepared, replace_fields(variant, cuts=list(cuts)))


def test_the_cover_search_is_exact_against_pricing_every_cover():
    variant = replace_fields(grouped(), elements_per_block=32)
    ranked = covers.rank_covers(chain(), variant, LARGE)
    # the kernels as scheduled, and split at every nest boundary (the chain's last
    # kernel runs M2, M3 and F: two points), whose one-launch plan is left out
    finest = split_points(chain().analysis, chain().candidates[variant.candidate])
    assert len(finest) == 2
    every = []
    for splits in ((), finest):
        n = len(chain().candidates[variant.candidate].kernels) + len(splits)
        for k in range(1 if splits else 0, n):
            for cuts in itertools.combinations(range(1, n), k):
                e = plan_model.estimate(chain(), replace_fields(
                    variant, cuts=list(cuts), splits=list(splits)), LARGE)
                assert math.isclose(e.seconds, sum(e.parts)), e
                every.append(e)
    every.sort(key=lambda e: e.seconds)
    n = len(chain().candidates[variant.candidate].kernels)
    assert len(ranked) == min(covers.TOP_COVERS, len(every))
    for got, want in zip(ranked, every, strict=False):
        assert math.isclose(got.seconds, want.seconds, rel_tol=1e-9)
    assert {(e.variant.splits, e.variant.cuts) for e in ranked} <= {
        (e.variant.splits, e.variant.cuts) for e in every}
    # launches after the first cost their overhead: the all-cut cover is no free lunch
    all_cut = next(e for e in every if len(e.variant.cuts) == n - 1
                   and not e.variant.splits)
    assert all_cut.launches == n and all(p > 0 for p in all_cut.parts)


def test_the_model_ranks_covers_beside_the_plans_it_chose_from():
    choice = plan_model.choose(chain(), LARGE)
    cut = [e for e in choice.ranking if e.variant.cuts]
    assert cut, "no cover ranked"
    top = choice.ranking[0]
    uncut = next(e for e in choice.ranking if covers.fused(chain(), e.variant))
    # a cover is chosen only with the margin the model must show for one
    assert not top.variant.cuts or \
        top.seconds < uncut.seconds * (1 - plan_model.COVER_MARGIN)
    assert [e.seconds for e in choice.ranking[1:]] == sorted(
        e.seconds for e in choice.ranking[1:])


@pytest.mark.slow
def test_every_ranked_cover_runs_correctly_at_an_odd_instance_count():
    """Every cover the search keeps (TOP_COVERS), and the chain split into its six
    nests, one launch each (the unfused plan with the batch's own mapping), compiled
    and checked on the CPU emulator against the original chain."""
    ranked = covers.rank_covers(chain(), grouped(), ODD)
    assert len(ranked) == covers.TOP_COVERS
    six = replace_fields(grouped(), splits=[9, 10], cuts=[1, 2, 3, 4, 5])
    failures = []
    for variant in [e.variant for e in ranked] + [six]:
        c = compile_variant(chain(), variant, ODD)
        assert len(c.program.launches) == len(variant.cuts) + 1
        result = check_program(c.program, c.source_scop, CHAIN, ODD, seed=7)
        if not result.ok:
            failures.append(f"splits {variant.splits} cuts {variant.cuts}: {result.message}")
    assert not failures, failures
