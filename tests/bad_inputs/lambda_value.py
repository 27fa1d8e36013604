# expect: lambda in an expression is not supported
# function: k
from __future__ import annotations

from polygpu import affine, f32


@affine
def k(n: int, x: f32[n]):
    for i in range(n):
        x[i] = lambda: 1.0  # <- error
