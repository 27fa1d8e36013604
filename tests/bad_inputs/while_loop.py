# expect: 'while' loop
# function: k
from __future__ import annotations

from polygpu import affine, f32


@affine
def k(n: int, x: f32[n]):
    i = 0
    while i < n:  # <- error
        x[i] = 0.0
