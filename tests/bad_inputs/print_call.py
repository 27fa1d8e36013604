# expect: call to 'print': only pure math functions are allowed
# function: k
from __future__ import annotations

from polygpu import affine, f32


@affine
def k(n: int, x: f32[n]):
    for i in range(n):
        x[i] = 2.0 * x[i]
        print(x[i])  # <- error
