"""tmv: transposed matrix-vector multiply x = A^T y (Baskaran et al. 2008)."""

from __future__ import annotations

from polygpu import affine, f32


@affine
def tmv(n: int, a: f32[n, n], x: f32[n], y: f32[n]):
    for i in range(n):
        x[i] = 0.0
        for j in range(n):
            x[i] += a[j][i] * y[j]
