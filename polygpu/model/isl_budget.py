"""A bound on isl's work for optional analyses.

Some isl operations (parametric ``dim_min``/``dim_max`` on sets with many existential
divisions, from strided, skewed or unroll-and-jammed tiles) can take minutes.  Where
the answer only enables an optimisation -- a box to stage a footprint in shared memory
or registers -- polygpu asks isl under an operation budget and, if isl runs out, does
without the optimisation.  Correctness never depends on a budgeted answer: legality
proofs and dependences are never budgeted.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import islpy as isl

# isl operations (its own count, roughly half a million a second): every kernel of
# kernels/catalog.json compiles to the same CUDA with a quarter of this
OPTIONAL_ANALYSIS_OPERATIONS = 1_000_000


class OutOfBudget(Exception):
    """isl ran out of the operations it was given."""


@contextmanager
def isl_operation_budget(ctx: isl.Context, operations: int = OPTIONAL_ANALYSIS_OPERATIONS
                         ) -> Iterator[None]:
    """Run the block with isl limited to ``operations``; raises OutOfBudget when isl
    exceeds them (the context is usable again afterwards)."""
    previous = ctx.get_max_operations()
    ctx.reset_operations()
    ctx.set_max_operations(operations)
    try:
        yield
    except isl.Error as e:
        if "maximal number of operations exceeded" in str(e):
            raise OutOfBudget(str(e)) from None
        raise
    finally:
        ctx.set_max_operations(previous)
        ctx.reset_operations()
