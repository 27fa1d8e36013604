# expect: scalar temporary 't' in subscript of 'x'
# function: k
from __future__ import annotations

from polygpu import affine, f32


@affine
def k(n: int, x: f32[n]):
    t = 0
    for i in range(n):
        x[t] = 1.0  # <- error
