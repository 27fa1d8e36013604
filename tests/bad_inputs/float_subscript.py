# expect: float literal 0.5 in subscript of 'x'
# function: k
from __future__ import annotations

from polygpu import affine, f32


@affine
def k(n: int, x: f32[n]):
    for i in range(n):
        x[i + 0.5] = 0.0  # <- error
