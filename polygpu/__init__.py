"""polygpu: a polyhedral loop-nest optimizer for CUDA.

The package is a pipeline; each sub-package is one stage and data flows one way:

``frontend`` (C ``#pragma scop`` and Python ``@affine``) -> loop-tree IR
-> ``model`` (isl domains, accesses, dependences, reuse) -> ``schedule`` (coalescing
transformations, tiling, legality) -> ``memory`` (shared/register/constant placement,
padding, traffic) -> ``codegen`` (CUDA) -> ``runtime`` (CPU emulator, GPU, reference
check) -> ``search`` (the empirical search, tuning database); ``api.optimize`` and the
``cli`` sit on top.
"""

__version__ = "0.1.0"

from polygpu.errors import PolygpuError, UnsupportedError  # noqa: E402
from polygpu.frontend.python_frontend import affine  # noqa: E402
from polygpu.frontend.types import f32, f64, i32, i64, local  # noqa: E402

__all__ = [
    "Kernel", "PolygpuError", "UnsupportedError", "affine", "f32", "f64", "i32", "i64", "local",
    "optimize", "__version__",
]


def __getattr__(name: str):
    """``optimize`` and ``Kernel`` load the whole pipeline (isl, code generation): only
    when used, so ``from polygpu import affine`` in a kernel module stays cheap."""
    if name in ("Kernel", "optimize"):
        from polygpu import api

        return getattr(api, name)
    raise AttributeError(f"module 'polygpu' has no attribute {name!r}")
