"""A thread's register copies spread over its lanes (``Variant.lanes`` with
``full_unroll``): a solve leaf's column held in the registers of a warp.

Why: a recursive trsm's leaf runs its rows in turn.  On one thread a column, with the
column in registers (``full_unroll``), a 512-column leaf is 16 warps for 132 SMs and
every step waits alone; on a warp's lanes with the column in shared memory (the lanes
plan), each row costs shared loads and stores and two ``__syncwarp`` -- ~560 cycles a
row on the H100 (tuning/results/NVIDIA-H100-80GB-HBM3/triangular.md).  Spread over the
lanes, lane ``l`` holds the column's elements ``l, l + L, ...`` in registers: a row's
division is its owner's, the divided value reaches the other lanes by one
``__shfl_sync``, and each lane updates its own rows below it -- the lanes' parallelism
with no shared memory in the chain.

How each statement runs (codegen/cuda.py's :class:`Emitter` in this mode; the memory
stage spreads only the copies a kernel writes, along their longest dimension,
``Buffer.lanes``):

* outside the loop the lanes share, every lane runs the same instances; the statement
  is executed by the lane that owns its target element (lane 0 where the target is
  not spread), after every lane has fetched the spread elements it reads from their
  owners (``__shfl_sync``: all lanes take part, so it stands before the guard); the
  target's own element is read in place by its owner;
* in the loop the lanes share (schedule/lane_loops.py: proven free of dependences),
  iteration ``i`` runs on the lane that owns element ``i``: an unrolled loop over the
  slots, ``i = base + L * slot + lane``, guarded by the loop's bounds.  Its statements
  must write their own element (the target's subscript along the lane dimension is the
  loop's iterator) and read no other lane's except elements that no iteration writes,
  fetched once before the loop (as :mod:`polygpu.codegen.invariant_reads` hoists them,
  proven with isl); anything else is refused with a clear error.

Every value and every operation is the loop nest's, in its order per element: results
are bitwise those of the lanes' plan.  All loops are unrolled (``full_unroll``), so slot
indices are constants and the copies stay in registers.
"""

from __future__ import annotations

from polygpu.codegen.expressions import Printer
from polygpu.frontend import ir

SLOT = "pg_slot"  # the slot loop's iterator in the loop the lanes share
FIRST = "pg_first"  # that loop's first iteration
FETCHED = "pg_lane_value"  # another lane's element a statement reads, fetched


def spread(printer: Printer, ref: ir.ArrayRef | ir.ScalarRef) -> bool:
    """Whether ``printer`` prints ``ref`` into a copy spread over the lanes."""
    view = printer.view(ref)
    return view is not None and view.lanes > 1


def subscripts(printer: Printer, ref: ir.ArrayRef) -> list[str]:
    return [printer.int_expr(e) for e in ref.index]


def shuffle(printer: Printer, ref: ir.ArrayRef, mask: str) -> str:
    """C: element ``ref`` of a spread copy, fetched from the lane that owns it (every
    lane of the group must run it)."""
    view = printer.view(ref)
    subs = subscripts(printer, ref)
    return (f"__shfl_sync({mask}, {view.subscript(subs)}, {view.owner(subs)}, "
            f"{view.lanes})")


def owner(printer: Printer, ref: ir.ArrayRef) -> str:
    """C: the lane that owns element ``ref`` of a spread copy."""
    return printer.view(ref).owner(subscripts(printer, ref))
