# expect: subscript of 'x' reads array 'idx'
# function: k
from __future__ import annotations

from polygpu import affine, f32, i32


@affine
def k(n: int, idx: i32[n], x: f32[n]):
    for i in range(n):
        x[idx[i]] = 1.0  # <- error
