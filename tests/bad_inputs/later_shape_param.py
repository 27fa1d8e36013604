# expect: shape of 'a' uses 'm', which is not an earlier int parameter
# function: k
from __future__ import annotations

from polygpu import affine, f32


@affine
def k(n: int, a: f32[n, m], m: int):  # <- error
    for i in range(n):
        for j in range(m):
            a[i][j] = 0.0
