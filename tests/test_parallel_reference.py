"""The C reference may run provably parallel outer loops on OpenMP threads: the results
must be bit-identical to the sequential run (and the pragma placed where it belongs)."""

from __future__ import annotations

import numpy as np
import pytest

from polygpu.frontend import load
from polygpu.model.build import build_scop
from polygpu.runtime import reference
from polygpu.runtime.check import parallel_loops

FUNCTION_SCOPE_ITERATORS = """\
void k(int n, double a[n][n], double x[n], double y[n])
{
  int i, j;
#pragma scop
  for (i = 0; i < n; i++) {
    x[i] = 0;
    for (j = 0; j < n; j++)
      x[i] = x[i] + a[i][j] * y[j];
  }
  for (i = 1; i < n; i++)
    y[i] = y[i - 1] + x[i];
#pragma endscop
}
"""


def _values(program, n, seed):
    rng = np.random.default_rng(seed)
    values = {"n": n}
    for a in program.arrays:
        shape = tuple(n for _ in a.shape)
        values[a.name] = rng.uniform(0.5, 1.5, shape)
    return values


@pytest.mark.parametrize("spec", ["kernels/mm.c", "kernels/mvt.c", "function_scope"])
def test_parallel_reference_is_bit_identical(tmp_path, spec):
    if spec == "function_scope":
        path = tmp_path / "k.c"
        path.write_text(FUNCTION_SCOPE_ITERATORS)
        spec = str(path)
    program = load(spec)
    loops = parallel_loops(build_scop(program), program)
    assert loops, "the outer loops of these kernels are parallel"
    sequential, parallel = _values(program, 61, 1), _values(program, 61, 1)
    reference.run_reference(program, sequential)
    reference.run_reference(program, parallel, parallel=loops)
    for a in program.arrays:
        assert np.array_equal(sequential[a.name], parallel[a.name]), a.name


def test_only_dependence_free_outer_loops_are_parallel(tmp_path):
    path = tmp_path / "k.c"
    path.write_text(FUNCTION_SCOPE_ITERATORS)
    program = load(str(path))
    (loop,) = parallel_loops(build_scop(program), program)
    # the first nest (line 5) is parallel and needs j private; the scan on line 10 is not
    assert loop == reference.ParallelLoop(5, ("j",))
    text = reference.with_openmp(str(path), [loop])
    assert "#pragma omp parallel for private(j)\n#line 5" in text
