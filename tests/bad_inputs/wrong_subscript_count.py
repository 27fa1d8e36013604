# expect: array 'a' has 2 dimensions but 1 subscript
# function: k
from __future__ import annotations

from polygpu import affine, f32


@affine
def k(n: int, a: f32[n, n], x: f32[n]):
    for i in range(n):
        x[i] = a[i]  # <- error
