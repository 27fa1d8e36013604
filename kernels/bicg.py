"""bicg: s = A^T r and q = A p with A n x m, the two products of a BiCG iteration."""

from __future__ import annotations

from polygpu import affine, f32


@affine
def bicg(n: int, m: int, a: f32[n, m], s: f32[m], q: f32[n], p: f32[m], r: f32[n]):
    for j in range(m):
        s[j] = 0.0
        for i in range(n):
            s[j] += r[i] * a[i][j]
    for i in range(n):
        q[i] = 0.0
        for j in range(m):
            q[i] += a[i][j] * p[j]
