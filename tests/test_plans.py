"""A program is a plan: kernels with their own variants, launch counts in the JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polygpu.errors import PolygpuError
from polygpu.output import compile_json
from polygpu.pipeline import compile_region
from polygpu.runtime.check import check_program
from polygpu.schedule.variant import Variant

KERNELS = Path(__file__).resolve().parent.parent / "kernels"


def test_variant_json_round_trip_with_per_kernel_fields():
    v = Variant.from_json('{"tile": [8, 64], "threads": [4, 32], '
                          '"kernels": {"1": {"tile": [32], "threads": [32], "jam": true}}}')
    assert v.for_kernel(1) == Variant(tile=(32,), threads=(32,), jam=True)
    assert v.for_kernel(0) == Variant(tile=(8, 64), threads=(4, 32))
    assert Variant.from_json(v.to_json()) == v
    assert "kernels" not in Variant().to_json()  # uniform variants keep their old keys
    assert v.with_kernel(1, v.for_kernel(0)) == Variant(tile=(8, 64), threads=(4, 32))


@pytest.mark.parametrize("bad", [
    '{"kernels": {"0": {"candidate": 1}}}',
    '{"kernels": {"0": {"tile": [4], "threads": [8]}}}',
    '{"kernels": {"x": {}}}',
    '{"kernels": [1]}',
])
def test_bad_per_kernel_fields_are_refused(bad):
    with pytest.raises(PolygpuError, match="variant"):
        Variant.from_json(bad)


def test_each_kernel_is_tiled_with_its_own_variant():
    spec = str(KERNELS / "polybench" / "atax.c")
    variant = Variant(tile=(4, 128), threads=(4, 128),
                      kernels=((1, (("tile", (64,)), ("threads", (32,)))),))
    compiled = compile_region(spec, "atax", variant)
    assert len(compiled.kernels) == 2
    assert compiled.kernels[0].threads == (128,)
    assert compiled.kernels[1].threads == (32,)
    assert compiled.program.launches[1].block == (32, 1, 1)
    result = check_program(compiled.program, compiled.source_scop, spec,
                           {"m": 17, "n": 23}, seed=3)
    assert result.ok, result.message
    data = compile_json(compiled, {"m": 1900, "n": 2100})
    assert data["launch_count"] == 2
    assert list(data["kernels"][1]["variant"]["threads"]) == [32]


def test_launch_count_of_a_host_plan_and_of_its_device_steps():
    spec = str(KERNELS / "lu.c")
    host = compile_region(spec, "lu")
    device = compile_region(spec, "lu", Variant(device_steps=True))
    sizes = {"n": 100}
    assert compile_json(host, sizes)["launch_count"] == len(host.program.steps(sizes)) > 100
    data = compile_json(device, sizes)
    assert data["launch_count"] == 1 and data["device_steps"]
    assert all(k["runs_in"] == "lu_steps" for k in data["kernels"])
    assert compile_json(host, {})["launch_count"] is None
    json.dumps(data)
