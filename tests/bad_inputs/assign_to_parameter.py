# expect: assignment to parameter 'n'
# function: k
from __future__ import annotations

from polygpu import affine, f32


@affine
def k(n: int, x: f32[n]):
    n = 4  # <- error
    for i in range(n):
        x[i] = 0.0
