# expect: duplicate parameter 'x'
# function: k
from __future__ import annotations

from polygpu import affine, f32


@affine
def k(n: int,
      x: f32[n],
      x: f32[n]):  # <- error
    for i in range(n):
        x[i] = 0.0
