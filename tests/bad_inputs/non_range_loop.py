# expect: only 'for ... in range(...)' is supported
# function: k
from __future__ import annotations

from polygpu import affine, f32


@affine
def k(n: int, x: f32[n]):
    for v in x:  # <- error
        x[0] += v
