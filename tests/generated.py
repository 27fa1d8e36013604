"""Reading generated CUDA in tests."""

from __future__ import annotations

import re


def kernel_text(source: str) -> str:
    """The generated kernels of ``source``, with the device functions of split halves
    (whole and partial tiles: codegen/full_tiles.py) that come before them, without the
    helper preludes."""
    halves = r"__device__ __(?:noinline|forceinline)__ void \w+_(?:whole|partial)\("
    return re.split(rf"(?={halves}|__global__ void)", source, maxsplit=1)[1]
