# expect: math.fmin
# function: k
from __future__ import annotations

import math

from polygpu import affine, f32


@affine
def k(n: int, x: f32[n], y: f32[n]):
    for i in range(n):
        x[i] = math.fmin(x[i], y[i])  # <- error
