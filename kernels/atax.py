"""atax: y = A^T (A x) with A m x n; the two products read A in opposite orders."""

from __future__ import annotations

from polygpu import affine, f32


@affine
def atax(m: int, n: int, a: f32[m, n], x: f32[n], y: f32[n], tmp: f32[m]):
    for i in range(m):
        tmp[i] = 0.0
        for j in range(n):
            tmp[i] += a[i][j] * x[j]
    for j in range(n):
        y[j] = 0.0
        for i in range(m):
            y[j] += a[i][j] * tmp[i]
