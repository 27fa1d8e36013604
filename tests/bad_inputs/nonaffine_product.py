# expect: non-affine expression
# function: k
from __future__ import annotations

from polygpu import affine, f32


@affine
def k(n: int, x: f32[n, n], y: f32[n]):
    for i in range(n):
        for j in range(n):
            y[i * j % n] += x[i][j]  # <- error
