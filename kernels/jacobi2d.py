"""jacobi2d: tsteps time steps of a 5-point Jacobi stencil, a -> b then b -> a."""

from __future__ import annotations

from polygpu import affine, f32


@affine
def jacobi2d(tsteps: int, n: int, a: f32[n, n], b: f32[n, n]):
    for t in range(tsteps):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                b[i][j] = 0.2 * (a[i][j] + a[i][j - 1] + a[i][j + 1] + a[i - 1][j] + a[i + 1][j])
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                a[i][j] = 0.2 * (b[i][j] + b[i][j - 1] + b[i][j + 1] + b[i - 1][j] + b[i + 1][j])
