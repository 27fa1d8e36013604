# expect: parameter 'float': the name is a C++ keyword
# function: k
from __future__ import annotations

from polygpu import affine, f32


@affine
def k(n: int, float: f32[n], y: f32[n]):  # <- error
    for i in range(n):
        y[i] = float[i]
