"""The polyhedral model of one affine region (a *SCoP*, static control part).

Every later stage reads these objects and none mutates them: they are frozen
dataclasses holding isl sets and maps (which islpy treats as values -- every
isl operation returns a new object).  Names follow isl: a statement ``S0`` has
the domain ``[n] -> { S0[i, j] : ... }``, an array ``a`` is the tuple ``a[..]``
of access ranges, parameters are the integer scalars of the function.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cached_property

import islpy as isl

from polygpu.errors import PolygpuError, SourceLoc
from polygpu.frontend import ir
from polygpu.model.isl_util import union_of, union_of_sets


def fix_parameters(s, values: Mapping[str, int]):
    """``s`` (an isl set or map) with each parameter named in ``values`` fixed to its
    value; names ``s`` does not have are ignored.  Values pass through text, so sizes
    past 64 bits are exact."""
    for name, value in values.items():
        k = s.find_dim_by_name(isl.dim_type.param, name)
        if k >= 0:
            s = s.fix_val(isl.dim_type.param, k, isl.Val(str(int(value)), s.get_ctx()))
    return s


@dataclass(frozen=True)
class Array:
    """An array of the region (a function argument, or a scalar temporary as a 0-d array).

    ``extent`` is the set of valid indices ``[n] -> { a[i, j] : 0 <= i < n ... }``;
    the layout is row-major, ``shape`` the extents outermost first.
    """

    name: str
    dtype: str  # key of ir.DTYPES
    shape: tuple[isl.PwAff, ...]
    shape_text: tuple[str, ...]  # the extents as the source wrote them
    shape_exprs: tuple[ir.IntExpr, ...]  # the extents as IR, for code generation
    extent: isl.Set
    # 'argument' | 'temporary' (a scalar local) | 'local' (an array declared in the
    # function: region-local, runtime-allocated) | 'scratch' (transform/expand.py's
    # copies, runtime-allocated)
    kind: str
    loc: SourceLoc
    # an argument the caller marked as not live-out (ir.Program.not_live_out): its
    # values after the region need not be stored
    live_out: bool = True

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def element_size(self) -> int:
        return ir.DTYPES[self.dtype][1]


@dataclass(frozen=True)
class Access:
    """One array reference of a statement.

    ``relation`` maps the statement's instances to the elements they touch,
    restricted to the statement's domain (``{ S0[i, j] -> a[i, j] : ... }``).
    ``ref`` numbers the statement's references in evaluation order (reads of the
    right-hand side, then the implicit read of ``x op= ...``, then the write).
    """

    statement: str
    ref: int
    array: str
    kind: str  # 'read' | 'write'
    relation: isl.Map
    subscripts: tuple[ir.IntExpr, ...]
    loc: SourceLoc

    @property
    def text(self) -> str:
        """The reference as written, e.g. ``a[i][j]``."""
        return self.array + "".join(f"[{s}]" for s in self.subscripts)


@dataclass(frozen=True)
class Statement:
    """One statement: its instances (``domain``), when they run in the original
    program (``schedule``, 2d+1 form) and what they compute (``body``)."""

    name: str
    iterators: tuple[str, ...]
    domain: isl.Set
    schedule: isl.Map
    body: ir.Assign
    accesses: tuple[Access, ...]
    loops: tuple[int, ...]  # ids of the enclosing loops, outermost first (see Scop.loops)
    loc: SourceLoc

    @property
    def reads(self) -> tuple[Access, ...]:
        return tuple(a for a in self.accesses if a.kind == "read")

    @property
    def writes(self) -> tuple[Access, ...]:
        return tuple(a for a in self.accesses if a.kind == "write")


@dataclass(frozen=True)
class Loop:
    """A loop of the source, for reports: its iterator, depth and the statements
    it encloses.  ``id`` is its index in Scop.loops (textual order)."""

    id: int
    iterator: str
    depth: int
    statements: tuple[str, ...]
    loc: SourceLoc
    # a negative step: its schedule dimension is minus the iterator, which a statement
    # pinned to one value (``if (i == 0)``) no longer shows, so the direction is kept here
    descending: bool = False


@dataclass(frozen=True)
class Scop:
    """The whole model of one function's affine region."""

    function: str
    file: str
    language: str  # 'c' | 'python'
    parameters: tuple[str, ...]  # isl parameters: the integer scalar arguments
    scalars: tuple[ir.ScalarDecl, ...]  # all scalar arguments (integer and float), in order
    signature: tuple[str, ...]
    context: isl.Set  # constraints on the parameters (every array extent >= 1)
    arrays: tuple[Array, ...]
    statements: tuple[Statement, ...]
    loops: tuple[Loop, ...]
    loc: SourceLoc
    # extra isl parameters of one host step (schedule/host.py): the host loops'
    # iterators, fixed while the step's kernels run and passed to them as arguments
    host: tuple[str, ...] = ()

    def specialized(self, values: Mapping[str, int]) -> Scop:
        """This region for exactly these parameter values (a context that fixes them):
        code generated from it may drop every guard those values decide."""
        context = self.context
        for name in self.parameters:
            if name not in values:
                raise PolygpuError(f"specializing {self.function}: no value for parameter "
                                   f"{name}", self.loc)
            k = context.find_dim_by_name(isl.dim_type.param, name)
            context = context.fix_val(isl.dim_type.param, k, isl.Val(int(values[name])))
        if context.is_empty():
            raise PolygpuError(f"specializing {self.function}: parameters "
                               f"{dict(values)} violate {self.context}", self.loc)
        return replace(self, context=context)

    @property
    def fixed_parameters(self) -> dict[str, int]:
        """The parameters the context fixes to one value (all of them once specialized)."""
        fixed = {}
        for name in self.parameters:
            k = self.context.find_dim_by_name(isl.dim_type.param, name)
            val = self.context.plain_get_val_if_fixed(isl.dim_type.param, k)
            if not val.is_nan():
                fixed[name] = int(val.to_python())
        return fixed

    def statement(self, name: str) -> Statement:
        for s in self.statements:
            if s.name == name:
                return s
        raise KeyError(name)

    def array(self, name: str) -> Array:
        for a in self.arrays:
            if a.name == name:
                return a
        raise KeyError(name)

    @property
    def accesses(self) -> tuple[Access, ...]:
        return tuple(a for s in self.statements for a in s.accesses)

    @property
    def program_arrays(self) -> tuple[Array, ...]:
        """The arrays in global memory, which every kernel takes as pointers: the
        function's array arguments, and the local and scratch arrays the runtime
        allocates (not scalar temporaries)."""
        return tuple(a for a in self.arrays if a.kind in ("argument", "local", "scratch"))

    @cached_property
    def domain(self) -> isl.UnionSet:
        return union_of_sets([s.domain for s in self.statements], self.context.get_space())

    @cached_property
    def schedule(self) -> isl.UnionMap:
        return union_of([s.schedule for s in self.statements], self.context.get_space())

    def access_map(self, kind: str, array: str | None = None) -> isl.UnionMap:
        """Union of the ``kind`` ('read'/'write') relations, optionally of one array."""
        maps = [
            a.relation
            for a in self.accesses
            if a.kind == kind and (array is None or a.array == array)
        ]
        return union_of(maps, self.context.get_space())

    def written_arrays(self) -> frozenset[str]:
        return frozenset(a.array for a in self.accesses if a.kind == "write")

