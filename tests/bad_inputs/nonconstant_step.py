# expect: non-constant step 's'
# function: k
from __future__ import annotations

from polygpu import affine, f32


@affine
def k(n: int, s: int, x: f32[n]):
    for i in range(0, n,
                   s):  # <- error
        x[i] = 0.0
