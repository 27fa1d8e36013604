"""row_buffer: each row of a squared into a local row buffer, then smoothed along the row
from it (a three-point mean) into b; the buffer is a local array (``local``):
region-local, privatised per row, never seen by the caller (kernels/row_buffer.c)."""

from __future__ import annotations

from polygpu import affine, f32, local


@affine
def row_buffer(n: int, m: int, a: f32[n, m], b: f32[n, m]):
    t = local(f32[m])
    for i in range(n):
        for j in range(m):
            t[j] = a[i, j] * a[i, j]
        for j in range(1, m - 1):
            b[i, j] = (t[j - 1] + t[j] + t[j + 1]) / 3
