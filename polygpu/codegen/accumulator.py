"""A reduction's running value in a register across the loop that accumulates it.

``for (j ...) b[i] -= a[j][i] * b[j];`` -- the loop runs on one thread with ``b[i]``
the same element throughout.  Printed as written, every iteration loads ``b[i]``,
updates it and stores it back, and the compiler cannot keep it in a register: ``b[j]``
might be the same element as far as it knows (shared and resident buffers carry no
``__restrict__``), so the next iteration's loads wait for this one's store.  On a
per-element Cholesky's substitutions (n = 64, one thread each, H200) that chain cost
more than the whole factorization.

So a loop whose body is one reduction statement (:func:`polygpu.model.parallelism.
reduction_op`) whose target does not move with the loop, and whose other reads of the
target array are proven never to touch the instance's own target
(:func:`~polygpu.model.parallelism.accumulates`), is printed as

    it = init; if (cond) { T acc = target; for (; cond; it += inc) acc op= ...;
                           target = acc; }

The same operations in the same order: the result is bitwise the one the loop gives.
The guard keeps an empty loop from touching the target at all.  Only this thread
touches the target while the loop runs: another thread's access between two of its
updates would be a dependence across threads inside a phase, which the prover refuses.
"""

from __future__ import annotations

import dataclasses
import re

from polygpu.frontend import ir
from polygpu.model.parallelism import accumulates, reduction_op, same_reference
from polygpu.model.scop import Statement

NAME = "pg_acc"
UNROLL = 4  # the loop's unroll factor at least: its loads overlap


def accumulated(stmt: Statement, target_text: str, iterator: str) -> bool:
    """Whether ``stmt``, run by a loop over ``iterator`` with its target printed as
    ``target_text``, may keep its target in a register across that loop."""
    if not isinstance(stmt.body.target, ir.ArrayRef) or reduction_op(stmt) is None:
        return False
    if re.search(rf"\b{re.escape(iterator)}\b", target_text):
        return False
    return accumulates(stmt)


def with_accumulator(body: ir.Assign) -> ir.Assign:
    """``body`` with its target, and the read of it, replaced by :data:`NAME`."""
    acc = ir.ScalarRef(NAME, body.target.loc)
    return dataclasses.replace(body, target=acc, value=ir.map_refs(
        body.value, lambda r: acc if same_reference(r, body.target) else r))
