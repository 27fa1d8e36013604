# expect: call to 'random.random'
# function: k
from __future__ import annotations

import random

from polygpu import affine, f32


@affine
def k(n: int, x: f32[n]):
    for i in range(n):
        x[i] = random.random()  # <- error
