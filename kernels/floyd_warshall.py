"""floyd_warshall: all-pairs shortest paths, out of place per step (see floyd_warshall.c)."""

from __future__ import annotations

from polygpu import affine, f32


@affine
def floyd_warshall(n: int, path: f32[n, n], next: f32[n, n]):
    for k in range(n):
        for i in range(n):
            for j in range(n):
                next[i][j] = min(path[i][j], path[i][k] + path[k][j])
        for i in range(n):
            for j in range(n):
                path[i][j] = next[i][j]
