"""mvt: x1 += A y1 and x2 += A^T y2, two nests reading A in opposite orders
(Baskaran et al. 2008)."""

from __future__ import annotations

from polygpu import affine, f32


@affine
def mvt(n: int, a: f32[n, n], x1: f32[n], x2: f32[n], y1: f32[n], y2: f32[n]):
    for i in range(n):
        for j in range(n):
            x1[i] += a[i][j] * y1[j]
    for i in range(n):
        for j in range(n):
            x2[i] += a[j][i] * y2[j]
