"""The default plan at known sizes (polygpu.search.plan_model): the model's arithmetic
on literal launches, and its choices replayed against plans measured on the H100."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polygpu.pipeline import compile_variant, prepare
from polygpu.schedule.variant import Variant
from polygpu.search import plan_model
from polygpu.search.candidate import LaunchCost
from polygpu.search.occupancy import SM_90
from tests import inprocess

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "tuning" / "results" / "NVIDIA-H100-80GB-HBM3" / "plans_polybench.json"


def test_device_steps_rounds_follow_the_width_of_each_kernel():
    # 4000 steps of 2000 instances: over 1024 threads 2 rounds a step; a kernel that is
    # one thread wide (a loop on one thread) takes all 2000 rounds whatever the block
    wide = LaunchCost("k", 4000, 0, 8_000_000, 0, 16)
    seconds, detail = plan_model.device_steps_seconds([wide], [4096], 1024)
    assert seconds == pytest.approx(4000 * 2 * plan_model.ROUND_SECONDS)
    assert "8,000 rounds" in detail
    narrow = plan_model.device_steps_seconds([wide], [1], 1024)[0]
    assert narrow == pytest.approx(4000 * 2000 * plan_model.ROUND_SECONDS)
    # a big step is bounded by one SM's bandwidth, not by its rounds
    heavy = LaunchCost("k", 1, 10**10, 1000, 0, 10**4)
    bandwidth = SM_90.dram_bytes_per_s / SM_90.multiprocessors \
        * plan_model.SINGLE_SM_BANDWIDTH_SHARE
    assert plan_model.device_steps_seconds([heavy], [10**6], 1024)[0] == \
        pytest.approx(10**10 / bandwidth)


def test_register_tile_over_a_shared_accumulator_is_no_default():
    prepared = prepare("kernels/polybench/symm.c")
    jam = Variant(candidate=1, tile=(64, 64), threads=(16, 16), jam=True, chunk=4,
                  prefetch=True)
    estimate = plan_model.estimate(prepared, jam, {"m": 200, "n": 260})
    assert estimate.seconds == float("inf") and "shared memory" in estimate.error
    plain = plan_model.estimate(prepared, Variant(candidate=1, tile=(32, 32),
                                                  threads=(8, 32)), {"m": 200, "n": 260})
    assert plain.seconds < float("inf") and plain.launches == 1


def _measured(kernel: str) -> dict[str, float]:
    data = json.loads(RECORDED.read_text())
    (result,) = [r for r in data["results"] if r["kernel"] == kernel]
    return {json.dumps(Variant.from_json(r["variant"]).to_json(), sort_keys=True): r["ms"]
            for r in result["rows"] if "ms" in r}, result["sizes"]


@pytest.mark.parametrize("kernel, slack", [("atax", 1.2), ("bicg", 1.3), ("symm", 1.05),
                                           ("trisolv", 1.05), ("doitgen", 1.25),
                                           ("cholesky", 1.15), ("lu", 1.2)])
def test_choice_is_close_to_the_best_measured_plan(kernel, slack):
    """Replay: the model chooses again at the recorded sizes; the plan it picks must
    have been measured, within ``slack`` of the fastest plan measured in that run."""
    times, sizes = _measured(kernel)
    choice = plan_model.choose(prepare(f"kernels/polybench/{kernel}.c"), sizes)
    key = json.dumps(choice.variant.to_json(), sort_keys=True)
    assert key in times, f"{kernel}: the model's plan {key} was not measured"
    assert times[key] <= slack * min(times.values()), (kernel, times[key], min(times.values()))


def test_trisolv_default_runs_its_steps_on_the_device(tmp_path):
    result = inprocess.polygpu("compile", "kernels/polybench/trisolv.c", "-p", "n=4000",
                               "-o", str(tmp_path), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["device_steps"] and data["launch_count"] == 1
    ranking = data["plan_choice"]["ranking"]
    assert ranking[0]["variant"] == data["variant"] == data["plan_choice"]["chosen"]
    assert [r["predicted_ms"] for r in ranking if r["predicted_ms"] is not None] == sorted(
        r["predicted_ms"] for r in ranking if r["predicted_ms"] is not None)
    # host steps, 8000 launches, predicted slower: ranked after
    host = [r for r in ranking if r["launches"] == 8000]
    assert host and host[0]["predicted_ms"] > 5 * ranking[0]["predicted_ms"]
    # an explicit variant (even the empty one) is the user's: no model choice
    fixed = json.loads(inprocess.polygpu(
        "compile", "kernels/polybench/trisolv.c", "-p", "n=4000", "-o", str(tmp_path),
        "--json", "--variant", "{}").stdout)
    assert "plan_choice" not in fixed
    assert Variant.from_json(fixed["variant"]) == Variant()
    assert fixed["launch_count"] == 8000


def test_model_plan_verifies_at_small_sizes():
    """The chosen plan of a small size is a program like any other: checked against
    the original on the emulator (trisolv: device steps; atax: distribution)."""
    from polygpu.runtime.check import check_program

    for spec, sizes in (("kernels/polybench/trisolv.c", {"n": 45}),
                        ("kernels/polybench/atax.c", {"m": 37, "n": 29})):
        prepared = prepare(spec)
        choice = plan_model.choose(prepared, sizes)
        compiled = compile_variant(prepared, choice.variant, sizes)
        result = check_program(compiled.program, compiled.source_scop, spec, sizes,
                               backend="cpu", seed=3)
        assert result.ok, result.message


def test_analyze_shows_the_ranked_plans_and_the_expansion():
    result = inprocess.polygpu("analyze", "kernels/polybench/symm.c", "-p", "m=40",
                               "-p", "n=52", "--plan", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    (temp2,) = [e for e in data["expansion"] if e["array"] == "temp2"]
    assert temp2["copy"] == "pg_x_temp2" and temp2["loops"] == ["i", "j"]
    ranking = data["plan_choice"]["ranking"]
    assert data["plan_choice"]["chosen"] == ranking[0]["variant"]
    refused = [r for r in ranking if "error" in r]
    assert refused and all(r["predicted_ms"] is None for r in refused)
    missing = inprocess.polygpu("analyze", "kernels/polybench/symm.c", "-p", "m=40",
                                "--plan")
    assert missing.returncode == 2 and "--plan needs a value for n" in missing.stderr


def test_stencil_halos_are_left_to_the_cache_by_default():
    """Kernels whose staged references share elements only with neighbouring instances
    (stencil halos) read them from global memory in the default plan; a buffer for
    reuse across threads keeps its shared memory (fdtd-2d's kernel 0 broadcasts
    ``_fict_[t]``; atax's ``x`` is read by every row)."""
    sizes = {"tsteps": 20, "n": 300}
    jacobi = prepare("kernels/polybench/jacobi_2d.c", params=sizes)
    chosen = plan_model.choose(jacobi, sizes).variant
    assert not chosen.shared and not chosen.kernels
    compiled = compile_variant(jacobi, chosen, sizes)
    assert not [b for b in compiled.memory.buffers if b.space == "shared"]
    assert "__shared__" not in compiled.program.source
    # the same plan with shared memory on stages both halos (what the search may try)
    staged = compile_variant(jacobi, Variant(tile=chosen.tile, threads=chosen.threads), sizes)
    assert {b.array for b in staged.memory.buffers if b.space == "shared"} == {"A", "B"}

    sizes = {"tmax": 20, "nx": 300, "ny": 400}
    fdtd = prepare("kernels/polybench/fdtd_2d.c", params=sizes)
    chosen = plan_model.choose(fdtd, sizes).variant
    assert chosen.shared and [k for k in range(3) if not chosen.for_kernel(k).shared] == [1, 2]
    buffers = compile_variant(fdtd, chosen, sizes).memory.buffers
    assert [(b.kernel, b.array) for b in buffers if b.space == "shared"] == [(0, "_fict_")]

    sizes = {"m": 190, "n": 210}
    atax = prepare("kernels/polybench/atax.c", params=sizes)
    assert plan_model.choose(atax, sizes).variant.shared
