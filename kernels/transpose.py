"""transpose: b = a^T for an n x m matrix (see transpose.c)."""

from __future__ import annotations

from polygpu import affine, f32


@affine
def transpose(n: int, m: int, a: f32[n, m], b: f32[m, n]):
    for i in range(n):
        for j in range(m):
            b[j][i] = a[i][j]
