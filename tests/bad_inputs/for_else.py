# expect: 'for ... else' is not supported
# function: k
from __future__ import annotations

from polygpu import affine, f32


@affine
def k(n: int, x: f32[n]):
    for i in range(n):  # <- error
        x[i] = 0.0
    else:
        x[0] = 1.0
