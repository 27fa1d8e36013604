"""gemm: general matrix multiply C = alpha A B + beta C, A ni x nk, B nk x nj."""

from __future__ import annotations

from polygpu import affine, f32


@affine
def gemm(ni: int, nj: int, nk: int, alpha: f32, beta: f32,
         c: f32[ni, nj], a: f32[ni, nk], b: f32[nk, nj]):
    for i in range(ni):
        for j in range(nj):
            c[i][j] *= beta
            for k in range(nk):
                c[i][j] += alpha * a[i][k] * b[k][j]
