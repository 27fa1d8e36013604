"""The padding solver (Algorithm 2) on hand-computed cases, and its optimality."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from polygpu.memory.padding import (
    CostModel,
    LaneReference,
    SharedReference,
    choose_padding,
    conflict_degree,
    element_stride,
    lane_degree,
)

COLUMN = SharedReference("buf[tx][k]", (1, 0))  # a warp reads down a column
ROW = SharedReference("buf[k][tx]", (0, 1))  # a warp reads along a row


def test_column_read_of_a_32x32_float_tile_needs_padding_1():
    d = choose_padding((32, 32), (COLUMN,), 4)
    assert d.padding == 1 and d.degrees == {"buf[tx][k]": 1}
    assert d.costs[0] == 1 + 32  # unpadded: all 32 threads in one bank


def test_row_read_needs_no_padding():
    d = choose_padding((32, 32), (ROW,), 4)
    assert d.padding == 0 and d.degrees == {"buf[k][tx]": 1}


def test_row_and_column_reads_together():
    d = choose_padding((32, 32), (ROW, COLUMN), 4)
    assert d.padding == 1 and d.degrees == {"buf[k][tx]": 1, "buf[tx][k]": 1}


def test_broadcast_costs_one_request():
    assert conflict_degree(0, 4) == 1 and conflict_degree(0, 8) == 1
    d = choose_padding((32, 32), (SharedReference("buf[k][0]", (0, 0)),), 4)
    assert d.padding == 0 and d.costs == (2.0,) * 32


@pytest.mark.parametrize("stride, degree", [(1, 2), (2, 4), (16, 32), (17, 2), (32, 32),
                                            (33, 2), (3, 2), (8, 16)])
def test_eight_byte_degrees(stride, degree):
    # two phases of 16 threads; threads clash when stride * (t - t') = 0 mod 16
    assert conflict_degree(stride, 8) == degree


def test_double_column_read_of_a_16x16_tile():
    # stride 16 + p doubles: p = 1 gives 17, odd: conflict-free (2 phases)
    d = choose_padding((16, 16), (COLUMN,), 8)
    assert d.padding == 1 and d.degrees == {"buf[tx][k]": 2}


def test_stride_with_three_dimensions_and_weights():
    assert element_stride((4, 8, 32), 1, (0, 1, 0)) == 33
    assert element_stride((4, 8, 32), 0, (1, 0, 0)) == 256
    heavy = SharedReference("a", (1, 0), weight=10)
    light = SharedReference("b", (0, 2), weight=1)
    d = choose_padding((32, 32), (heavy, light), 4, CostModel(t_start=5, t_request=2))
    assert d.padding == 1  # the column read dominates
    with pytest.raises(ValueError):
        conflict_degree(1, 2)


@given(
    extents=st.tuples(st.integers(1, 64), st.integers(1, 64)),
    refs=st.lists(st.tuples(st.integers(-3, 3), st.integers(-3, 3), st.integers(1, 5)),
                  min_size=1, max_size=4),
    size=st.sampled_from([4, 8]),
    t_start=st.floats(0, 100), t_request=st.floats(0.01, 100),
)
def test_chosen_padding_is_never_worse_than_any_other(extents, refs, size, t_start, t_request):
    references = tuple(SharedReference(f"r{k}", (a, b), w) for k, (a, b, w) in enumerate(refs))
    model = CostModel(t_start, t_request)
    d = choose_padding(extents, references, size, model)

    def total(p):
        return sum(r.weight * model.cost(conflict_degree(element_stride(extents, p, r.steps),
                                                          size)) for r in references)

    assert all(total(d.padding) <= total(p) for p in range(32))
    assert d.cost == total(d.padding)


def test_cost_model_reads_the_recorded_h100_calibration():
    from pathlib import Path

    path = (Path(__file__).resolve().parent.parent / "tuning" / "results" /
            "NVIDIA-H100-80GB-HBM3" / "bank_calibration.json")
    for size in (4, 8):
        model = CostModel.calibrated(path, size)
        # one request costs about 2 ns per warp access and the fixed part is small
        assert 1.5 < model.t_request < 2.5 and 0 <= model.t_start < model.t_request
    d = choose_padding((32, 32), (COLUMN,), 4, CostModel.calibrated(path, 4))
    assert d.padding == 1


def test_shipped_calibration_is_the_recorded_h100_fit():
    """The solver's default costs are the fit tuning/bank_conflicts.py recorded."""
    from pathlib import Path

    recorded = Path(__file__).resolve().parent.parent / "tuning" / "results" / \
        "NVIDIA-H100-80GB-HBM3" / "bank_calibration.json"
    for size in (4, 8):
        assert CostModel.default(size) == CostModel.calibrated(recorded, size)
        assert CostModel.default(size).t_request > 1.0  # ns: not the unit fallback


@given(st.integers(1, 70), st.sampled_from([4, 8]), st.integers(0, 31))
def test_lanes_that_step_evenly_count_as_the_stride_formula(stride, size, padding):
    """Counting bank by bank agrees with the gcd formula wherever both apply."""
    lanes = tuple((0, lane * stride) for lane in range(32))
    assert lane_degree((1, 40), padding, lanes, size) == conflict_degree(stride, size)


# a tensor-core operand (codegen/mma.py): lane 4 g + q reads row k0 + q, column g
MMA_COLUMN = tuple((q, g) for g, q in (divmod(lane, 4) for lane in range(32)))


@pytest.mark.parametrize(("padding", "degree"), [(0, 8), (2, 4), (4, 2), (8, 4), (12, 2)])
def test_an_operand_read_by_groups_of_four_lanes(padding, degree):
    """Doubles in rows of 64 (+ padding): per half-warp, 4 rows x 4 columns.  Unpadded,
    the 4 rows of a column share a bank pair (4 requests a phase); rows 68 apart (68 =
    4 mod 16) spread the 16 lanes over all 32 banks."""
    assert lane_degree((16, 64), padding, MMA_COLUMN, 8) == degree


def test_the_solver_pads_for_lane_references():
    decision = choose_padding((16, 64), (LaneReference("b", MMA_COLUMN),), 8, multiple=2)
    assert decision.padding == 4 and decision.degrees == {"b": 2}
