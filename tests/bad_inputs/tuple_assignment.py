# expect: tuple assignment is not supported
# function: k
from __future__ import annotations

from polygpu import affine, f32


@affine
def k(n: int, x: f32[n], y: f32[n]):
    for i in range(n):
        x[i], y[i] = y[i], x[i]  # <- error
