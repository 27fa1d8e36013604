# expect: float64 parameter 'alpha' in loop bound
# function: k
from __future__ import annotations

from polygpu import affine, f32


@affine
def k(n: int, alpha: float, x: f32[n]):
    for i in range(alpha):  # <- error
        x[i] = 0.0
