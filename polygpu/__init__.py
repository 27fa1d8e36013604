"""polygpu: a polyhedral loop-nest optimizer for CUDA.

The package is a pipeline; each sub-package is one stage and data flows one way:

``frontend`` (C ``#pragma scop`` and Python ``@affine``) -> loop-tree IR
-> ``model`` (isl domains, accesses, dependences, reuse) -> later stages.
"""

__version__ = "0.1.0"

from polygpu.errors import PolygpuError, UnsupportedError  # noqa: E402
from polygpu.frontend.python_frontend import affine  # noqa: E402
from polygpu.frontend.types import f32, f64, i32, i64  # noqa: E402

__all__ = ["PolygpuError", "UnsupportedError", "affine", "f32", "f64", "i32", "i64", "__version__"]
