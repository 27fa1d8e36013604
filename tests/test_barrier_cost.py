"""The barriers a staged kernel passes (memory/barriers.py) and what the cost model charges
for them (search/cost.py ``barrier_seconds``): counted exactly at fixed sizes, halved by
double-buffered copies, charged only where a block is alone on its multiprocessor; and
the space offers each staged time tile with two buffers too."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from polygpu.memory.barriers import block_barriers
from polygpu.pipeline import compile_variant, prepare
from polygpu.schedule.variant import Variant
from polygpu.search import plan_model
from polygpu.search.candidate import Candidate, LaunchCost
from polygpu.search.cost import BARRIER_CYCLES, barrier_seconds, predicted_cost
from polygpu.search.occupancy import SM_90
from polygpu.search.pool import Pool
from polygpu.search.resources import FixedResources
from polygpu.search.space import SpaceOptions, space

ROOT = Path(__file__).resolve().parent.parent
L2DIST = str(ROOT / "kernels" / "allpairs" / "l2dist.c")
MM = str(ROOT / "kernels" / "mm.c")
STAGED = {"tile": [32, 32], "threads": [8, 16], "jam": True, "time_tile": 32, "chunk": 4,
          "prefetch": True, "specialize": True}


def _barriers(path, params, variant):
    c = plan_model.sketch(prepare(path, params=params), Variant.from_json(variant))
    return [block_barriers(c.kernel_scop, k, params, c.memory) for k in c.kernels]


@pytest.mark.parametrize("double", [False, True])
def test_l2dist_barriers_per_tile_counted_exactly(double):
    """64 x 48 points under 32 x 32 tiles: 2 x 2 blocks; each runs D's initialisation,
    ceil(100 / 32) = 4 slices of d and the square root as tiles of its own: 6 tiles a
    block, 2 barriers each (1 double-buffered)."""
    params = {"n1": 64, "n2": 48, "d": 100}
    assert _barriers(L2DIST, params, {**STAGED, "double_buffer": double}) == \
        [4 * 6 * (1 if double else 2)]


def test_mm_barriers_and_none_without_shared_memory():
    """mm at n = 100, 32 x 32 tiles and k in tiles of 16: 4 x 4 blocks x 7 tiles, two
    barriers each; unstaged, none."""
    params = {"n": 100}
    variant = {**STAGED, "time_tile": 16, "specialize": False}
    assert _barriers(MM, params, variant) == [16 * 7 * 2]
    assert _barriers(MM, params, {**variant, "double_buffer": True}) == [16 * 7]
    assert _barriers(MM, params, {**variant, "shared": False}) == [0]


def test_barrier_seconds_only_for_a_block_alone_on_its_sm():
    sms, clock = SM_90.multiprocessors, SM_90.clock_hz
    alone = LaunchCost("k", 1, 0, 0, 0, blocks=2 * sms, barriers=2 * sms * 1000,
                       resident_blocks=1)
    # 2000 barriers a multiprocessor, each idling it
    assert barrier_seconds(alone) == pytest.approx(2000 * BARRIER_CYCLES / clock)
    # half the SMs busy: each of them passes twice as many
    half = LaunchCost("k", 1, 0, 0, 0, blocks=sms // 2, barriers=sms * 1000,
                      resident_blocks=1)
    assert barrier_seconds(half) == pytest.approx(2000 * BARRIER_CYCLES / clock)
    for resident in (2, None):  # another block issues meanwhile, or unknown
        other = LaunchCost("k", 1, 0, 0, 0, blocks=2 * sms, barriers=2 * sms * 1000,
                           resident_blocks=resident)
        assert barrier_seconds(other) == 0.0


def test_model_prices_double_buffers_below_one_buffer_only_when_alone():
    """l2dist's tuned shape (16 x 32 threads, 8 x 4 points: one block per SM by the
    registers guessed) costs less double-buffered; with 16 x 16 threads two blocks
    share an SM and both cost the same."""
    params = {"n1": 2000, "n2": 2000, "d": 5419}
    prepared = prepare(L2DIST, params=params)

    def cost(variant):
        costs = plan_model.launch_costs(plan_model.sketch(prepared, variant), params)
        return predicted_cost(Candidate("k", variant, "kept", launches=costs)), costs

    wide = Variant.from_json({**STAGED, "tile": [128, 128], "threads": [16, 32],
                              "unroll": 4})
    one, costs = cost(wide)
    two, doubled = cost(Variant.from_json({**wide.to_json(), "double_buffer": True}))
    assert costs[0].resident_blocks == 1 and doubled[0].barriers * 2 == costs[0].barriers
    assert two < one
    # the difference is the barriers halved: 256 blocks x 172 tiles on 132 SMs
    assert one - two == pytest.approx(256 * 172 * BARRIER_CYCLES / SM_90.clock_hz / 132)
    small = Variant.from_json({**wide.to_json(), "tile": [128, 64], "threads": [16, 16]})
    a, costs = cost(small)
    b, _ = cost(Variant.from_json({**small.to_json(), "double_buffer": True}))
    assert costs[0].resident_blocks == 2 and a == b


def test_built_candidates_carry_ptxas_blocks_per_sm():
    """The pool replaces the guessed residency by the one ptxas' registers give: 512
    threads of 128 registers fill an SM's 64K registers alone, of 32 registers four
    blocks fit (2048 threads)."""
    params = {"n1": 64, "n2": 48, "d": 100}
    prepared = prepare(L2DIST, params=params)
    variant = Variant.from_json({**STAGED, "threads": [16, 32]})
    program = compile_variant(prepared, variant, params).program
    costs = plan_model.launch_costs(plan_model.sketch(prepared, variant), params,
                                    guess_concurrency=False)
    assert costs[0].resident_blocks is None
    for registers, blocks in ((128, 1), (32, 4)):
        c = Candidate("k", variant, "kept", launches=costs, threads=512)
        pool = Pool({"k": c}, {"k": program}, params, SM_90, "sm_90",
                    FixedResources(registers))
        pool.build([c])
        assert [x.resident_blocks for x in pool.candidates["k"].launches] == [blocks]


def test_space_offers_staged_time_tiles_with_two_buffers():
    """Every staged, time-tiled point of mm's space has its double-buffered twin, and no
    unstaged point has one (there is nothing to double)."""
    prepared = prepare(MM, params={"n": 1024})
    points = space(prepared, {"n": 1024}, SpaceOptions(candidates=1))
    staged = {v for v in points if v.shared and v.time_tile}
    assert staged and all(v.double_buffer or
                          Variant.from_json({**v.to_json(), "double_buffer": True}) in staged
                          for v in staged)
    assert math.isclose(sum(v.double_buffer for v in staged), len(staged) / 2)
    assert not any(v.double_buffer for v in points if not v.shared)
    single = space(prepared, {"n": 1024}, SpaceOptions(candidates=1, double_buffers=(False,)))
    assert not any(v.double_buffer for v in single)


def test_priced_alike_one_buffer_is_ordered_before_two():
    """Two blocks a multiprocessor: the twins cost the same, and the one with one buffer
    (half the shared memory) comes first -- by the key alone the twin would ("do" <
    "ja")."""
    from polygpu.search.cost import model_order

    launch = LaunchCost("k", 1, 10**9, 10**9, 0, blocks=1000, concurrency=0.5,
                        barriers=10**6, resident_blocks=2)
    one = Variant(tile=(128, 128), threads=(16, 16), jam=True)
    two = Variant(tile=(128, 128), threads=(16, 16), jam=True, double_buffer=True)
    a = Candidate(Pool.key_of(one), one, "kept", launches=(launch,))
    b = Candidate(Pool.key_of(two), two, "kept", launches=(launch,))
    assert predicted_cost(a) == predicted_cost(b) and b.key < a.key
    assert sorted([b, a], key=model_order) == [a, b]
