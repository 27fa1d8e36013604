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
    files = {p.name for p in KERNELS.iterdir() if p.suffix in (".c", ".py")}
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
    result = check_program(compiled.program, compiled.analysis.scop, spec, entry["small"],
                           seed=11)
    assert result.ok, result.message
