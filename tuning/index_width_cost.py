"""What 64-bit-safe code generation costs at ordinary sizes (issue 17).

Usage: ``PYTHONPATH=CHECKOUT python tuning/index_width_cost.py`` -- run once with the
checkout before the change and once after, on the same GPU, and compare.  Per kernel: the
default variant and a register-tiled one (as ``optimize`` compiles them without tuning:
parametric, not specialized) and the same variant specialized for the sizes (what ``tune``
times), each timed with CUDA events (median of 20 after 3 warm-ups).  Prints one JSON line
per program: its median time, its grid and whether its offsets are 64-bit.
"""

from __future__ import annotations

import json
import sys

import numpy as np

from polygpu.frontend import load
from polygpu.pipeline import compile_region
from polygpu.runtime import gpu, inputs
from polygpu.schedule.variant import Variant

CASES = [
    ("kernels/mm.c", {"n": 4096}, {}),
    ("kernels/mm.c", {"n": 4096}, {"tile": [64, 64], "threads": [8, 32], "jam": True,
                                   "chunk": 4, "prefetch": True}),
    ("kernels/mv.c", {"n": 8192}, {}),
    ("kernels/tmv.c", {"n": 8192}, {}),
    ("kernels/jacobi2d.c", {"tsteps": 20, "n": 4096}, {}),
]


def main() -> int:
    for spec, params, fields in CASES:
        for specialize in (False, True):
            variant = Variant.from_json({**fields, "specialize": specialize})
            compiled = compile_region(spec, None, variant, (), (), params)
            source = load(spec)
            ints = inputs.integer_parameters(source, params)
            shapes = inputs.array_shapes(source, ints)
            values = inputs.random_values(source, ints, shapes, np.random.default_rng(1))
            timing = gpu.time_program(compiled.program, values, repeats=20, warmup=3)
            print(json.dumps({
                "kernel": spec, "params": params, "variant": variant.to_json(),
                "ms": round(timing.median_ms, 4),
                "grid": [list(launch.grid) for launch in compiled.program.launches],
                "index64": "long long" in compiled.program.source.split("__global__", 1)[-1],
            }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
