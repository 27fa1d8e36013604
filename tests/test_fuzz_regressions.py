"""Nests the fuzz test (tests/test_fuzz_nests.py) found wrong, kept as regressions: each
is compiled with the variant that failed and checked on the CPU emulator against the
original C, like the fuzz test does."""

from __future__ import annotations

import time

import pytest

from polygpu.pipeline import compile_variant, prepare
from polygpu.runtime.check import check_program
from polygpu.schedule.tiling import Variant

HEADER = """\
#define min(a, b) ((a) < (b) ? (a) : (b))
#define max(a, b) ((a) > (b) ? (a) : (b))
void nest(int n, double A[2 * n + 3][2 * n + 3], double B[2 * n + 3][2 * n + 3],
          double x[2 * n + 3], double y[2 * n + 3])
{
#pragma scop
"""

CASES = {
    # every loop carries a dependence, so the wavefront search tried 5^4 coefficient
    # vectors, each composing every dependence with two schedules: minutes, then a
    # timeout; now the dependences' loop deltas are computed once
    "wavefront_search_4d": ("""
  for (int i = 2; i < n - 2; i += 2)
    for (int j = 2; j < n - 1; j += 3)
      for (int k = max(i - 2, 0); k < min(i + 2, n); k += 1)
        for (int l = n - 2; l > 1; l--) {
          if (k == 1)
            B[1][k + l - 2] = 0.5 * (y[2 * i - 2] + A[2 * l + 2][k]) + 1.0;
          else
            x[j - 2] = 1.0;
          y[j + i + 2] += 0.5 * (x[i + j + 2] + x[2 * k]) + 1.0;
          x[1] += 0.5 * (x[j + k - 2] + B[0][n - k]) + 1.0;
        }
""", {"tile": (4, 8), "threads": (4, 8), "specialize": True}, 0, 13),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_fuzz_regression(name, tmp_path):
    body, variant, candidate, n = CASES[name]
    path = tmp_path / f"{name}.c"
    path.write_text(HEADER + body + "#pragma endscop\n}\n")
    start = time.monotonic()
    prepared = prepare(str(path), "nest")
    assert time.monotonic() - start < 60, "scheduling took over a minute"
    chosen = Variant(candidate=candidate % len(prepared.candidates), **variant)
    compiled = compile_variant(prepared, chosen, {"n": n})
    result = check_program(compiled.program, compiled.analysis.scop, str(path), {"n": n},
                           seed=n)
    assert result.ok, (result.message, compiled.program.source)
