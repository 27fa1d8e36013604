"""``polygpu compile``: files written whole, JSON description, clean errors, nvcc-clean."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests import inprocess

ROOT = Path(__file__).resolve().parent.parent
NVCC = shutil.which("nvcc")


polygpu = inprocess.polygpu  # main() in this process, as python -m polygpu would run it


@pytest.mark.parametrize("spec", ["kernels/mv.c", "kernels/tmv.py:tmv", "kernels/mvt.c",
                                  "kernels/mm.c"])
def test_compile_writes_cuda_and_json(tmp_path, spec):
    result = polygpu("compile", spec, "-p", "n=4096", "-o", str(tmp_path), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    name = data["function"]
    assert json.loads((tmp_path / f"{name}.json").read_text()) == data
    source = (tmp_path / f"{name}.cu").read_text()
    assert data["parameters"] == {"n": 4096}
    assert data["kernels"] and all(k["name"] in source for k in data["kernels"])
    assert {p["placement"] for p in data["placement"]} <= {
        "global", "global-coalesced", "shared", "register", "constant"}
    for b in data["memory"]["buffers"]:
        assert f"{b['name']}[" in source and b["bytes"] > 0
    assert data["schedule"]["origin"] in ("adjacency", "isl", "original", "sequential")
    if NVCC:
        out = subprocess.run([NVCC, "-arch=sm_90", "-Werror", "all-warnings", "-c",
                              str(tmp_path / f"{name}.cu"), "-o", str(tmp_path / "k.o")],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr


def test_tmv_reads_a_coalesced_and_mv_does_not(tmp_path):
    def placement(spec, access, *options):
        data = json.loads(polygpu("compile", spec, "-o", str(tmp_path), "--json",
                                  *options).stdout)
        (p,) = [p for p in data["placement"] if p["access"] == access]
        return p["placement"], data["memory"]

    assert placement("kernels/tmv.c", "a[j][i]")[0] == "global-coalesced"
    # mv's a[i][j] is not coalesced: staged through shared memory, a 128 x 32 tile read
    # column-wise by the warp, so Algorithm 2 pads it by one
    where, memory = placement("kernels/mv.c", "a[i][j]")
    (a,) = [b for b in memory["buffers"] if b["array"] == "a"]
    assert where == "shared" and a["extents"] == [128, 32] and a["padding"] == 1
    assert a["padding_solver"]["degrees"]["S1.0 a[i][j]"] == 1
    where, memory = placement("kernels/mv.c", "a[i][j]", "--variant", '{"shared": false}')
    assert where == "global" and {b["space"] for b in memory["buffers"]} == {"register"}


@pytest.mark.parametrize("args, message", [
    (["-p", "n"], "expected NAME=VALUE"),
    (["-p", "m=3"], "has no parameter m (its scalar parameters: int n)"),
    (["-p", "n=1.5"], "needs an integer"),
    (["-p", "n=-5"], "violate the region's assumptions"),
    (["-p", "n=1000000000000"], "does not fit its C type"),
    (["--variant", "{bad"], "not valid JSON"),
    (["--tile", "64", "--threads", "128"], "threads <= tile"),
    (["--candidate", "99"], "does not exist"),
])
def test_bad_options_are_clean_errors_and_write_nothing(tmp_path, args, message):
    out = tmp_path / "out"
    result = polygpu("compile", "kernels/mv.c", "-o", str(out), *args)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
    assert not out.exists() or not any(out.iterdir())


def test_bad_input_writes_nothing(tmp_path):
    result = polygpu("compile", "tests/bad_inputs/while_loop.c", "-o", str(tmp_path / "o"))
    assert result.returncode == 2 and result.stderr.startswith("tests/bad_inputs/while_loop.c:")
    assert not (tmp_path / "o").exists()


def test_a_region_that_never_runs_is_a_clean_error(tmp_path):
    # found by the fuzz test: a guard no iteration satisfies (j < 1 with j >= i + 1 >= 1)
    src = tmp_path / "never.c"
    src.write_text("void f(int n, float B[n][n])\n{\n#pragma scop\n"
                   "  for (int i = 0; i < n; i++)\n    for (int j = i + 1; j < n; j++)\n"
                   "      if (j < 1)\n        B[i][j] = 0;\n#pragma endscop\n}\n")
    result = polygpu("compile", str(src), "-o", str(tmp_path / "o"))
    assert result.returncode == 2 and result.stderr.startswith(f"{src}:")
    assert "ever runs" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "o").exists()


def test_check_passes_on_the_cpu_and_reports_a_missing_parameter_with_its_line():
    ok = polygpu("check", "kernels/mvt.c", "-p", "n=37", "--seed", "3")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.startswith("ok: mvt (1 kernel, cpu backend, n=37, seed 3)")
    missing = polygpu("check", "kernels/mvt.c")
    assert missing.returncode == 2
    assert missing.stderr.startswith("kernels/mvt.c:2: missing parameter n of mvt")
