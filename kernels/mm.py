"""mm: matrix multiply C += A B (Baskaran et al. 2008)."""

from __future__ import annotations

from polygpu import affine, f32


@affine
def mm(n: int, a: f32[n, n], b: f32[n, n], c: f32[n, n]):
    for i in range(n):
        for j in range(n):
            for k in range(n):
                c[i][j] += a[i][k] * b[k][j]
