# expect: parameter 'x' has no type annotation
# function: k
from __future__ import annotations

from polygpu import affine


@affine
def k(n: int,
      x):  # <- error
    for i in range(n):
        x[i] = 0.0
