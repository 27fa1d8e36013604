# expect: slicing 'y[0:n]' is not supported
# function: k
from __future__ import annotations

from polygpu import affine, f32


@affine
def k(n: int, x: f32[n], y: f32[n]):
    y[0:n] = x[0:n]  # <- error
