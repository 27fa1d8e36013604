"""lu: in-place LU factorisation (kij, no pivoting) of A + 2n I; the 2n diagonal shift
keeps random check inputs in [0.5, 1.5) diagonally dominant (see lu.c)."""

from __future__ import annotations

from polygpu import affine, f32


@affine
def lu(n: int, a: f32[n, n]):
    for i in range(n):
        a[i][i] += 2.0 * n
    for k in range(n):
        for i in range(k + 1, n):
            a[i][k] = a[i][k] / a[k][k]
        for i in range(k + 1, n):
            for j in range(k + 1, n):
                a[i][j] -= a[i][k] * a[k][j]
