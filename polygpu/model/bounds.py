"""Do the accesses stay inside the declared arrays?

An access outside its array's extent is undefined behaviour in the user's C and an
``IndexError`` (or a silent wrap-around for negative indices) in Python, and a later
stage would copy it into shared memory or a GPU buffer.  The check is exact (isl) under
the model's context; it is a *warning*, not an error, because the input language cannot
yet state relations between parameters (``m <= n``) that would make the access safe.
"""

from __future__ import annotations

from dataclasses import dataclass

from polygpu.errors import SourceLoc
from polygpu.model.scop import Scop


@dataclass(frozen=True)
class BoundsWarning:
    statement: str
    ref: int
    array: str
    text: str  # the reference as written
    example: str  # an isl point: parameter values and an instance that is outside
    loc: SourceLoc

    def __str__(self) -> str:
        return (f"{self.loc}: warning: {self.text} may access outside array "
                f"'{self.array}' (for example at {self.example})")


def check_bounds(scop: Scop) -> tuple[BoundsWarning, ...]:
    result = []
    for acc in scop.accesses:
        array = scop.array(acc.array)
        if array.rank == 0:
            continue
        outside = acc.relation.subtract_range(array.extent.intersect_params(scop.context))
        if outside.is_empty():
            continue
        example = outside.domain().sample_point()
        result.append(BoundsWarning(acc.statement, acc.ref, acc.array, acc.text,
                                    str(example), acc.loc))
    return tuple(result)
