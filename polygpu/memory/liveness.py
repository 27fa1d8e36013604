"""Which elements of a thread's register buffer must be loaded before the kernel and
stored after it.

A register buffer (:mod:`polygpu.memory.placement`) is the only copy of its elements
while the kernel runs, so the plain rule copies in every element the thread reads and
copies out every element it writes.  Textbook kernels make most of that traffic dead:

* ``D[i][j] = 0; for (k) D[i][j] += ...`` reads ``D[i][j]`` only after writing it, so
  loading it first fetches a value nobody uses;
* a scalar temporary (``t = a - b; s += t * t``), expanded into a runtime scratch array
  (:mod:`polygpu.transform.expand`), is written and read in the same iteration and never
  again: storing its last values costs a DRAM write per element, and keeping them for
  the store holds a register per point of the tile across the whole reduction loop
  (32 of 127 registers of l2dist's 8 x 4 tile).

The copy-in is therefore restricted to the reads whose value flows in from outside the
kernel (:func:`live_in_reads`: no last writer, by isl's exact dataflow, among the
kernel's statement instances), and the copy-out is dropped for an array whose written
values nobody outside the kernel reads (:func:`dead_after`).  Why that is exact: inside
a kernel no dependence crosses threads (the tiled schedule is proven so), so a read's
last writer in the same kernel is an earlier instance of the same thread, whose value
is in the register buffer when the read runs.
"""

from __future__ import annotations

import islpy as isl

from polygpu.memory.footprints import touched
from polygpu.model.analysis import Analysis
from polygpu.schedule.tiling import TiledKernel
from polygpu.schedule.transformation import Transformation


def live_in_reads(an: Analysis, kernel: TiledKernel, array: str,
                  refs: frozenset[tuple[str, int]] | None = None) -> isl.Set | None:
    """The elements of ``array`` one thread of ``kernel`` reads (block and thread
    coordinates as parameters, as :func:`~polygpu.memory.footprints.footprint`) with a
    value written before the kernel (through the references ``(statement, ref)`` of
    ``refs`` only, if given); None if there are none.

    Per read reference: the instances whose last writer (``an``'s flow dependences) is a
    statement of the kernel writing *the element this reference reads* are covered --
    a statement reading an array at two places has one flow relation for both, so the
    writer's element is matched against the reference's."""
    scop = an.scop
    inside = set(kernel.statements)
    flows = [d for d in an.dependences.of_kind("flow")
             if d.array == array and d.source in inside and d.sink in inside]
    writes = {a.statement: a.relation for a in scop.accesses
              if a.array == array and a.kind == "write" and a.statement in inside}
    result = None
    for acc in scop.accesses:
        if acc.array != array or acc.kind != "read" or acc.statement not in inside:
            continue
        if refs is not None and (acc.statement, acc.ref) not in refs:
            continue
        relation = acc.relation
        for d in flows:
            if d.sink != acc.statement:
                continue
            # sink -> the element its last writer wrote, where that is this reference's
            provided = d.relation.reverse().apply_range(writes[d.source]).intersect(relation)
            relation = relation.subtract_domain(provided.domain())
        if relation.is_empty():
            continue
        part = touched(kernel, acc.statement, relation, level=0, threads=True)
        result = part if result is None else result.union(part)
    if result is None or result.is_empty():
        return None
    return result.coalesce()


def dead_after(an: Analysis, tr: Transformation, kernel: TiledKernel, array: str) -> bool:
    """Whether no value ``kernel`` writes into ``array`` is read after the kernel: the
    array is runtime-allocated (local or scratch: the caller never sees it) and every
    read with a last writer in the kernel is itself in the kernel.  Only decided for a
    region without host loops, where ``an`` is the whole region and each kernel runs
    once; a kernel of a host step may feed the next step's launch, which ``an`` (one
    step) cannot see."""
    if tr.step is not None or an.scop.array(array).kind not in ("local", "scratch"):
        return False
    inside = set(kernel.statements)
    return all(d.sink in inside for d in an.dependences.of_kind("flow")
               if d.array == array and d.source in inside)
