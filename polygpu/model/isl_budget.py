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


_EXCEEDED = "maximal number of operations exceeded"


class OutOfBudget(Exception):
    """isl ran out of the operations it was given."""


def _spent(ctx: isl.Context) -> bool:
    """Whether the budget is used up.  isl does not always say so in the error that
    stopped it (a parse cut short reports a syntax error), so a trivial operation
    asks again."""
    try:
        isl.Set.universe(isl.Space.set_alloc(ctx, 0, 1)).lexmin()
    except isl.Error as e:
        return _EXCEEDED in str(e)
    return False


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
        if _EXCEEDED in str(e) or _spent(ctx):
            raise OutOfBudget(str(e)) from None
        raise
    finally:
        ctx.set_max_operations(previous)
        ctx.reset_operations()
