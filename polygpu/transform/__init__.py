"""Source-level transformations of the model: pure ``Scop -> Scop`` functions.

Each runs between :func:`polygpu.model.build.build_scop` and
:func:`polygpu.model.analysis.analyze`, and each is *proven* before its result is
used: the transformed program has the same dataflow as the original -- every read
instance gets its value from the same write instance, and every array the caller
sees ends with the same values -- checked exactly with isl, and a transformation that
cannot be proven is not applied (never a wrong program, at worst a slower one).

* :mod:`polygpu.transform.expand` -- expansion of temporaries (privatization): a
  scalar temporary or a buffer argument reused by every iteration of a loop nest gets
  one copy per iteration, which removes the false (anti and output) dependences that
  would serialize the nest.
* :mod:`polygpu.transform.layout` -- relayout of interleaved batches: arrays whose last
  subscript is the batch iterator run on element-outermost copies between transposing
  copy statements (a choice of the search: ``Variant.relayout``).
* :mod:`polygpu.transform.split` -- index-set splitting: a statement whose read meets
  its own write on a hyperplane (in-place Floyd-Warshall's pivot row and column) is cut
  there into pieces, ordered so that every read keeps its value, each of which runs its
  inner loops in parallel.
* :mod:`polygpu.transform.recursion` -- the recursion of seed 002 (KBLAS) as an index-set
  split: an in-place triangular update's blocks (leaves and products) in a proven order,
  and the distribution of a statement out of its loops (``Variant.recursion``).
"""
