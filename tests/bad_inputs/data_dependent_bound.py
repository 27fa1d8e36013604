# expect: loop bound reads array 'len_'
# function: k
from __future__ import annotations

from polygpu import affine, f32, i32


@affine
def k(n: int, len_: i32[n], x: f32[n, n]):
    for i in range(n):
        for j in range(len_[i]):  # <- error
            x[i][j] = 0.0
