# expect: do not wrap around
# function: f
# command: check -p n=9
from polygpu import f32


def f(n: int, x: f32[n], y: f32[n]):
    for i in range(n):
        y[i] = x[i] + x[-1]  # <- error
