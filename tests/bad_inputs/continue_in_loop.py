# expect: 'continue' is not supported
# function: k
from __future__ import annotations

from polygpu import affine, f32


@affine
def k(n: int, x: f32[n]):
    for i in range(n):
        if i == 0:
            continue  # <- error
        x[i] = 0.0
