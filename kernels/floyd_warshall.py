"""floyd_warshall: all-pairs shortest paths in place, k outer (see floyd_warshall.c)."""

from __future__ import annotations

from polygpu import affine, f32


@affine
def floyd_warshall(n: int, path: f32[n, n]):
    for k in range(n):
        for i in range(n):
            for j in range(n):
                path[i][j] = min(path[i][j], path[i][k] + path[k][j])
