"""A thread's point loop printed loads-first: several iterations' operands loaded and
their new values computed before any of them is stored.

``for (j ...) a[i][j] -= r * a[j][k];`` -- the trailing update of a resident Cholesky,
a thread's columns of one row.  Each iteration loads, multiplies and stores one element
of shared memory.  The compiler may not load the next iteration's operands before this
iteration's store: as far as it knows the store could be to the same element (shared
and resident buffers carry no ``__restrict__``).  So every iteration runs one whole
load -> FMA -> store chain, and unrolling changes nothing: on the batched double
Cholesky at n = 64 (H100, Nsight Compute) half of the kernel's stall samples sat in that
chain.

Where the loop is over a thread's own points (``TiledKernel.point_dims``) and the
tiler has proven that it carries no dependence between the statements of the kernel
(``TiledKernel.free_point_dims``: no two instances that agree on everything outside
the loop and differ in it depend on each other, ``schedule/lane_loops.lane_parallel``),
and its body is one statement storing to a shared (or resident) buffer, it is printed
in groups of ``U`` iterations

    it = init;
    for (; cond(it + (U-1) inc); it += U inc) {
      const T v0 = <new value at it>; ... const T v{U-1} = <new value at it + (U-1) inc>;
      <target at it> = v0; ... <target at it + (U-1) inc> = v{U-1};
    }
    if (cond(it)) {                   // the rest, fewer than U, as one group
      const T v0 = <new value at it>;
      const T v1 = cond(it + inc) ? <new value at it + inc> : 0; ...
      <target at it> = v0; if (cond(it + inc)) <target at it + inc> = v1; ...
    }

Reordering reads and writes of iterations that do not depend on each other changes
nothing they compute, and each element still sees the same operations in the same
order.  ``target op= value`` becomes ``v = target op (value)``, C's own meaning of a
compound assignment (the same conversion to the target's type).  Only a loop whose
condition is an upper bound on its iterator (``it <= E`` or ``it < E``, ``E`` free of
``it``, a positive constant step: isl's form) is grouped: there an iteration running
implies that all the ones before it do.
"""

from __future__ import annotations

import re

import islpy as isl

from polygpu.frontend import ir
from polygpu.model.scop import Statement

GROUP = 4  # iterations a group, where the variant's unroll says nothing larger
PREFIX = "pg_nx"  # the registers of a group's new values

_UPPER = (isl.ast_expr_op_type.le, isl.ast_expr_op_type.lt)


def step(loop: isl.AstNode, iterator: str) -> int | None:
    """The positive constant step of ``loop`` where its condition is an upper bound on
    ``iterator`` alone (``iterator <= E`` or ``<``, ``E`` not naming it); else None."""
    cond = loop.for_get_cond()
    if cond.get_type() != isl.ast_expr_type.op or cond.get_op_type() not in _UPPER:
        return None
    lhs, rhs = cond.get_op_arg(0), cond.get_op_arg(1)
    if lhs.get_type() != isl.ast_expr_type.id or lhs.get_id().get_name() != iterator or \
            re.search(rf"\b{re.escape(iterator)}\b", rhs.to_C_str()):
        return None
    inc = loop.for_get_inc()
    if inc.get_type() != isl.ast_expr_type.int:
        return None
    value = inc.get_val().to_python()
    return value if value > 0 else None


def shifted(text: str, iterator: str, offset: int) -> str:
    """C ``text`` with ``iterator`` read ``offset`` further on (``iterator + offset``)."""
    if not offset:
        return text
    return re.sub(rf"\b{re.escape(iterator)}\b", f"({iterator} + {offset})", text)


def new_value(body: ir.Assign, printer) -> str:
    """The value ``body`` stores, as a C expression (``target op (value)`` for a
    compound assignment)."""
    value = printer.value(body.value)
    if body.op == "=":
        return value
    return f"{printer.ref(body.target)} {body.op[0]} ({value})"


def groupable(stmt: Statement, shared) -> bool:
    """Whether ``stmt`` stores to an array element through a shared (or resident)
    buffer (``shared(ref)``) with an assignment this module prints."""
    body = stmt.body
    return isinstance(body.target, ir.ArrayRef) and body.op in ir.ASSIGN_OPS and \
        shared(body.target)
