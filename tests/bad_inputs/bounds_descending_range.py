# expect: writes outside array 'a' (extent [n]): at n = 5, i = 5
# function: f
# command: compile -p n=5 -o /tmp/polygpu-bad-input-never-written
from polygpu import f32


def f(n: int, a: f32[n], b: f32[n]):
    for i in range(n, 0, -1):
        a[i] = b[i - 1]  # <- error
