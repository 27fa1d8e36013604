"""mv: matrix-vector multiply x = A y (Baskaran et al. 2008, Figure 3)."""

from __future__ import annotations

from polygpu import affine, f32


@affine
def mv(n: int, a: f32[n, n], x: f32[n], y: f32[n]):
    for i in range(n):
        x[i] = 0.0
        for j in range(n):
            x[i] += a[i][j] * y[j]
