"""Every kernel in ``kernels/`` end to end on the CPU emulator, at its catalog's small sizes.

``kernels/catalog.json`` lists each kernel file with its function, small (odd) sizes for
this check and realistic sizes for the GPU (``tuning/speed_report.py``,
``tuning/gpu_check.py``).  Each is compiled with the default variant (scheduler's best
candidate, proven legal) and with a register-tiled one, and the emitted CUDA runs on the
emulator against the original loop nest on fresh random inputs, output poisoned first.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polygpu.pipeline import compile_region
from polygpu.runtime.check import check_program
from polygpu.schedule.variant import Variant

KERNELS = Path(__file__).resolve().parent.parent / "kernels"
CATALOG = json.loads((KERNELS / "catalog.json").read_text())

VARIANTS = {
    "default": Variant(),
    "register-tiled": Variant(tile=(8, 64), threads=(4, 32), jam=True, time_tile=8),
}


def test_catalog_lists_every_kernel_file():
    files = {p.relative_to(KERNELS).as_posix() for p in KERNELS.rglob("*")
             if p.suffix in (".c", ".py")}
    assert files == set(CATALOG)
    for name, entry in CATALOG.items():
        assert set(entry) >= {"function", "small", "gpu"}, name
        assert entry["small"].keys() == entry["gpu"].keys(), name


@pytest.mark.slow
@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("name", sorted(CATALOG))
def test_kernel_passes_the_cpu_check(name, variant):
    entry = CATALOG[name]
    spec = str(KERNELS / name)
    compiled = compile_region(spec, entry["function"], VARIANTS[variant])
    result = check_program(compiled.program, compiled.source_scop, spec, entry["small"],
                           seed=11)
    assert result.ok, result.message


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CATALOG))
def test_launches_grow_like_one_loop(name):
    """No plan launches more than O(trip count of one outer loop) kernels: the launch
    count grows linearly with the sizes -- from 2x to 4x the sizes it grows about twice
    as much as from 1x to 2x (with two host loops it would grow four times as much)."""
    entry = CATALOG[name]
    compiled = compile_region(str(KERNELS / name), entry["function"])
    program = compiled.program
    small = entry["small"]
    n1, n2, n4 = (len(program.steps({k: f * v for k, v in small.items()}))
                  for f in (1, 2, 4))
    assert n4 - n2 <= 2.5 * (n2 - n1) + len(program.launches), (name, n1, n2, n4)
    if not program.host_iterators:
        assert n1 == len(program.launches)
