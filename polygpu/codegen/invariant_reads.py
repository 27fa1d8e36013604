"""Reads of shared memory that do not move with a loop, loaded once before it.

``for (j ...) a[i][j] -= a[i][k] * a[j][k];`` -- the trailing update of a resident
Cholesky, one row per thread.  ``a[i][k]`` is the same element in every iteration, but
the compiler reloads it each time: the store to ``a[i][j]`` might be the same element as
far as it knows (shared and resident buffers carry no ``__restrict__``).  On the batched
Cholesky (n = 64) that is one shared load in four of the update's.

So where a loop's body is one statement that stores to a shared (or resident) buffer,
a read of that statement is loaded into a register before the loop when

* its printed address does not name the loop's iterator (nothing else changes inside:
  the body holds no loop), and
* isl proves that no instance of the statement writes the element it reads there
  (``write ∩ read`` of the two access relations empty).  The instances of one run of
  the loop all read the same element, so none of them writes it; no other statement
  runs in the loop; and another thread writing it while the loop runs would be a
  dependence across threads inside a phase, which the prover refuses.

The loop is printed as

    it = init; if (cond) { const T r = read; for (; cond; it += inc) body; }

The guard makes the early load one the loop's first iteration performs anyway: an empty
loop loads nothing (its subscripts may name no element at all).  The values and the
order of the operations are the original's: results are bitwise the same.  Reads of
registers (register buffers) and of global memory, and loops whose statement stores to
registers or to global memory (``__restrict__``), are left as written: there the
compiler knows the store misses the read and hoists it itself.
"""

from __future__ import annotations

import dataclasses
import re

from polygpu.frontend import ir
from polygpu.memory.placement import REGISTER_SUFFIX
from polygpu.model.parallelism import same_reference
from polygpu.model.scop import Statement

PREFIX = "pg_inv"


def hoistable(stmt: Statement, printer, iterator: str, where=None) -> list[ir.ArrayRef]:
    """The reads of ``stmt`` (printed by ``printer``: its buffers, its iterators as the
    loop's texts) that a loop over ``iterator`` running only ``stmt`` may load once
    before it, each distinct element once, in the order they are read.  ``where(printer,
    ref)``: the buffers this is for (default: shared and resident ones; a copy spread
    over lanes takes its own, codegen/lane_registers.py)."""
    _shared_or = where or _shared
    writes = stmt.writes
    if not isinstance(stmt.body.target, ir.ArrayRef) or \
            not _shared_or(printer, stmt.body.target):
        return []  # (nvcc knows registers and __restrict__ pointers miss shared memory)
    found: list[ir.ArrayRef] = []
    for ref in ir.reads(stmt.body.value):
        if not isinstance(ref, ir.ArrayRef):
            continue
        if any(same_reference(ref, f) for f in found):
            continue
        if not _shared_or(printer, ref):
            continue
        if re.search(rf"\b{re.escape(iterator)}\b", printer.ref(ref)):
            continue
        reads = [a for a in stmt.reads
                 if a.array == ref.array and a.subscripts == tuple(ref.index)]
        if not reads or any(not a.relation.intersect(w.relation).is_empty()
                            for a in reads for w in writes if w.array == ref.array):
            continue
        found.append(ref)
    return found


def _shared(printer, ref: ir.ArrayRef) -> bool:
    """Whether ``printer`` prints ``ref`` through a shared (or resident) buffer."""
    view = printer.view(ref)
    return view is not None and not view.name.endswith(REGISTER_SUFFIX)


def with_registers(body: ir.Assign, names: list[tuple[ir.ArrayRef, str]]) -> ir.Assign:
    """``body`` with each of ``names``' references read from its register instead."""
    def register(r):
        return next((ir.ScalarRef(name, ref.loc) for ref, name in names
                     if same_reference(r, ref)), r)
    return dataclasses.replace(body, value=ir.map_refs(body.value, register))
