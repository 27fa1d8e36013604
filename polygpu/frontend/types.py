"""Element-type annotations for ``@affine`` Python kernels.

A kernel declares its arguments with these objects::

    from __future__ import annotations

    from polygpu import affine, f32

    @affine
    def mv(n: int, a: f32[n, n], x: f32[n], y: f32[n]):
        ...

``f32[n, n]`` names an array of ``float32`` with extents ``n x n``, where ``n`` is an
earlier ``int`` argument.  The frontend reads annotations from the source's syntax tree
and never evaluates them, so kernel modules should start with ``from __future__ import
annotations``: without it Python evaluates ``f32[n, n]`` when the ``def`` runs, and ``n``
(an argument, not a global) is undefined there.  Shapes may also be written as strings
(``f32["n", "n"]``), which evaluate fine either way.

At runtime the objects still behave sensibly (``f32[4, 4]`` is an :class:`ArrayType`),
so annotations can be inspected when their names happen to be defined.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ElementType:
    """A scalar element type; ``dtype`` is a key of :data:`polygpu.frontend.ir.DTYPES`."""

    name: str  # the spelling users write: 'f32', ...
    dtype: str  # canonical name: 'float32', ...

    def __getitem__(self, shape: Any) -> ArrayType:
        extents = shape if isinstance(shape, tuple) else (shape,)
        return ArrayType(self, tuple(extents))

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True)
class ArrayType:
    """An array annotation: element type plus extents (ints, names as strings, or
    whatever the annotation evaluated to at runtime)."""

    element: ElementType
    shape: tuple[Any, ...]

    @property
    def dtype(self) -> str:
        return self.element.dtype

    def __repr__(self) -> str:
        return f"{self.element.name}[{', '.join(map(str, self.shape))}]"


f32 = ElementType("f32", "float32")
f64 = ElementType("f64", "float64")
i32 = ElementType("i32", "int32")
i64 = ElementType("i64", "int64")

#: Annotation spellings the frontend understands, by the name written in the source.
ELEMENT_TYPES = {t.name: t for t in (f32, f64, i32, i64)}


def local(array: ArrayType) -> Any:
    """A local array of an ``@affine`` function (``t = local(f32[m])``, at the top of
    its body): region-local scratch the region writes before it reads (the frontend
    proves it), never returned.  Run as Python -- the reference -- it is a NumPy array
    of that type and shape, filled with NaN (or -1 for integers) so that nothing can
    depend on its initial contents."""
    import numpy as np

    if not isinstance(array, ArrayType):
        raise TypeError(f"local() takes an array type such as f32[n], not {array!r}")
    dtype = np.dtype(array.dtype)
    fill = np.nan if dtype.kind == "f" else -1
    return np.full(tuple(int(e) for e in array.shape), fill, dtype=dtype)
