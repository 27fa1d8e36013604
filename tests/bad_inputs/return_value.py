# expect: 'return' with a value
# function: k
from __future__ import annotations

from polygpu import affine, f32


@affine
def k(n: int, x: f32[n]):
    s = 0.0
    for i in range(n):
        s += x[i]
    return s  # <- error
