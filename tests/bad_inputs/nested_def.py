# expect: nested function definition
# function: k
from __future__ import annotations

from polygpu import affine, f32


@affine
def k(n: int, x: f32[n]):
    def helper(v):  # <- error
        return 2 * v

    for i in range(n):
        x[i] = 0.0
