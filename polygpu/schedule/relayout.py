"""Transformations of a relaid region (transform/layout.py): the body's own plans between
the transposing copies.

A relaid region is the batch's statements on element-outermost copies of their arrays,
with copy statements in front and behind.  Scheduling it whole lets the scheduler fuse a
copy with the body's first statement (a product's ``c = 0`` landed in the copies'
kernel, and its sum then read and wrote ``c`` in global memory once more), and its
candidates differ from those of the element-outermost nest that the batch plans
(``search/space.element_variants``) were made for.  So the body is scheduled alone --
it *is* that nest -- and each of its launched candidates gets one kernel per copy in
before and one per copy out after: a copy's space is its loops in order, the source
array's innermost index on ``threadIdx.x`` (the read or write of the caller's array
coalesced), the other reference staged through shared memory by the memory stage (its
innermost index is the copy's second innermost loop).  Each composed transformation is
proven against the whole relaid region's dependences, like every candidate.
"""

from __future__ import annotations

from dataclasses import replace

from polygpu.model.analysis import Analysis
from polygpu.schedule.adjacency import transformation
from polygpu.schedule.algorithm1 import kernel
from polygpu.schedule.ranking import proven
from polygpu.schedule.transformation import Transformation
from polygpu.schedule.variant import Variant

# the copies' plan: 32 x 32 points of the two innermost loops a block, 8 x 32 threads
# (a transpose's classic tile: a warp reads one 128-byte line of the caller's array, the
# staged buffer is written out in lines of the copy's), staged, no register tile
COPY_TILE = (32, 32)
COPY_THREADS = (8, 32)


def between_copies(whole: Analysis, body: Transformation, before: tuple[str, ...],
                   after: tuple[str, ...]) -> Transformation | None:
    """``body`` (a transformation of the relaid region's own statements, launched once)
    with a kernel per copy statement of ``before`` first and of ``after`` last, proven
    against ``whole`` (the relaid region with its copies); None where ``body`` has host
    loops (its kernels run once per step: a copy cannot sit between them) or the prover
    refuses."""
    if body.host is not None:
        return None
    scop = whole.scop
    copies = []
    for name in before + after:
        s = scop.statement(name)
        copies.append(kernel([s], [tuple(range(len(s.iterators)))]))
    kernels = tuple(copies[:len(before)]) + body.kernels + tuple(copies[len(before):])
    tr = transformation(whole, kernels, f"{body.origin}, between transposes")
    return tr if proven(whole, tr) else None


def copy_kernel_variant(variant: Variant) -> Variant:
    """A copy kernel's fields in ``variant``: the transpose tile, staged."""
    return replace(variant, tile=COPY_TILE, threads=COPY_THREADS, jam=False, time_tile=32,
                   unroll=1, blocked=False, chunk=1, prefetch=False, double_buffer=False,
                   shared=True, padding=-1, registers=True, kernels=())


def relaid_variant(variant: Variant, before: int, body: int, after: int) -> Variant:
    """``variant`` of the body's kernels (per-kernel overrides numbered as the body's)
    for the composed program: the overrides moved ``before`` kernels on, each copy
    kernel with :func:`copy_kernel_variant`."""
    base = replace(variant, kernels=tuple((k + before, o) for k, o in variant.kernels))
    copy = copy_kernel_variant(variant)
    for k in (*range(before), *range(before + body, before + body + after)):
        base = base.with_kernel(k, copy)
    return base
