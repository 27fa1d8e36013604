"""The loop-tree IR: what every frontend produces and the model builder consumes.

Both frontends (C and Python) translate the user's loop nest into these frozen
dataclasses, so the polyhedral model is built by one piece of code whatever the
input language.  The IR keeps the *structure* of the source (loops, guards,
statements, in textual order) and its *line numbers*; it does not decide
affinity -- the model builder does, when it turns integer expressions into isl
objects, and reports what is not affine with the location kept here.

Two expression families:

* ``IntExpr`` -- integer expressions over loop iterators and integer
  parameters: loop bounds, guards, subscripts.  These must become affine
  (isl ``PwAff``); ``min``/``max``/``?:`` and division by constants are allowed.
* ``Expr`` -- value expressions in statement bodies (float or int arithmetic,
  array reads, calls to pure math functions).  Anything computable is allowed
  here; only the array references in them matter to the model.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from polygpu.errors import SourceLoc

# --------------------------------------------------------------------------
# Integer (affine-candidate) expressions
# --------------------------------------------------------------------------


class IntExpr:
    """Base of integer expressions (bounds, guards, subscripts)."""

    __slots__ = ()


@dataclass(frozen=True)
class IntConst(IntExpr):
    value: int

    def __str__(self) -> str:
        return str(self.value)


@dataclass(frozen=True)
class IntVar(IntExpr):
    """A loop iterator or an integer parameter, by name."""

    name: str

    def __str__(self) -> str:
        return self.name


# Integer binary operators:
#   '+', '-', '*'            ordinary arithmetic
#   'floordiv', 'mod'        Python ``//`` and ``%`` (floor semantics)
#   'truncdiv', 'rem'        C ``/`` and ``%`` on ints (truncation toward zero)
INT_BINOPS = ("+", "-", "*", "floordiv", "mod", "truncdiv", "rem")
_INT_OP_TEXT = {"floordiv": "//", "mod": "%", "truncdiv": "/", "rem": "%"}


@dataclass(frozen=True)
class IntBinOp(IntExpr):
    op: str
    lhs: IntExpr
    rhs: IntExpr

    def __str__(self) -> str:
        return f"({self.lhs} {_INT_OP_TEXT.get(self.op, self.op)} {self.rhs})"


@dataclass(frozen=True)
class IntNeg(IntExpr):
    arg: IntExpr

    def __str__(self) -> str:
        return f"-{self.arg}"


@dataclass(frozen=True)
class IntMinMax(IntExpr):
    """``min(a, b, ...)`` or ``max(a, b, ...)``."""

    op: str  # 'min' | 'max'
    args: tuple[IntExpr, ...]

    def __str__(self) -> str:
        return f"{self.op}({', '.join(map(str, self.args))})"


@dataclass(frozen=True)
class IntSelect(IntExpr):
    """``cond ? then : else_`` with an affine condition."""

    cond: Cond
    then: IntExpr
    else_: IntExpr

    def __str__(self) -> str:
        return f"({self.cond} ? {self.then} : {self.else_})"


def reads(e: Expr):
    """Array and scalar references read by a value expression, in evaluation order."""
    if isinstance(e, ArrayRef | ScalarRef):
        yield e
    elif isinstance(e, BinOp | ValueCompare):
        yield from reads(e.lhs)
        yield from reads(e.rhs)
    elif isinstance(e, UnaryOp):
        yield from reads(e.arg)
    elif isinstance(e, Call | ValueLogical):
        for a in e.args:
            yield from reads(a)
    elif isinstance(e, Select):
        yield from reads(e.cond)
        yield from reads(e.then)
        yield from reads(e.else_)


def map_refs(e: Expr, f) -> Expr:
    """``e`` with every array or scalar reference ``r`` replaced by ``f(r)``."""
    if isinstance(e, ArrayRef | ScalarRef):
        return f(e)
    if isinstance(e, BinOp | ValueCompare):
        return replace(e, lhs=map_refs(e.lhs, f), rhs=map_refs(e.rhs, f))
    if isinstance(e, UnaryOp):
        return replace(e, arg=map_refs(e.arg, f))
    if isinstance(e, Call | ValueLogical):
        return replace(e, args=tuple(map_refs(a, f) for a in e.args))
    if isinstance(e, Select):
        return Select(map_refs(e.cond, f), map_refs(e.then, f), map_refs(e.else_, f))
    return e


# --------------------------------------------------------------------------
# Affine conditions (loop conditions and ``if`` guards)
# --------------------------------------------------------------------------


class Cond:
    """Base of conditions over integer expressions."""

    __slots__ = ()


CMP_OPS = ("<", "<=", ">", ">=", "==", "!=")


@dataclass(frozen=True)
class Compare(Cond):
    op: str  # one of CMP_OPS
    lhs: IntExpr
    rhs: IntExpr

    def __str__(self) -> str:
        return f"{self.lhs} {self.op} {self.rhs}"


@dataclass(frozen=True)
class BoolOp(Cond):
    op: str  # 'and' | 'or'
    args: tuple[Cond, ...]

    def __str__(self) -> str:
        return "(" + f" {self.op} ".join(map(str, self.args)) + ")"


@dataclass(frozen=True)
class Not(Cond):
    arg: Cond

    def __str__(self) -> str:
        return f"not ({self.arg})"


@dataclass(frozen=True)
class BoolConst(Cond):
    value: bool

    def __str__(self) -> str:
        return "true" if self.value else "false"


# --------------------------------------------------------------------------
# Value expressions (statement bodies)
# --------------------------------------------------------------------------


class Expr:
    """Base of value expressions."""

    __slots__ = ()


@dataclass(frozen=True)
class Const(Expr):
    """A numeric literal; ``dtype`` is 'int' or the float type the source gave it."""

    value: int | float
    dtype: str = "int"  # 'int' | 'float32' | 'float64'

    def __str__(self) -> str:
        return repr(self.value)


@dataclass(frozen=True)
class ArrayRef(Expr):
    """``array[index...]``; a read in an expression, a write as an assignment target."""

    array: str
    index: tuple[IntExpr, ...]
    loc: SourceLoc

    def __str__(self) -> str:
        return self.array + "".join(f"[{i}]" for i in self.index)


@dataclass(frozen=True)
class ScalarRef(Expr):
    """A scalar: a float/int parameter of the function or a scalar temporary."""

    name: str
    loc: SourceLoc

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class IntValue(Expr):
    """An integer expression over iterators/parameters used as a value (``A[i] = i + n``)."""

    expr: IntExpr

    def __str__(self) -> str:
        return str(self.expr)


# '/' and '%' have C meaning (true division on floats, truncation on ints; '%' the
# remainder with the dividend's sign); 'floordiv' and 'mod' are Python's ``//`` and ``%``.
VALUE_BINOPS = ("+", "-", "*", "/", "%", "floordiv", "mod")
_VALUE_OP_TEXT = {"floordiv": "//", "mod": "%"}


@dataclass(frozen=True)
class BinOp(Expr):
    op: str  # one of VALUE_BINOPS
    lhs: Expr
    rhs: Expr

    def __str__(self) -> str:
        return f"({self.lhs} {_VALUE_OP_TEXT.get(self.op, self.op)} {self.rhs})"


@dataclass(frozen=True)
class UnaryOp(Expr):
    op: str  # '-' | '+'
    arg: Expr

    def __str__(self) -> str:
        return f"{self.op}{self.arg}"


# Pure math functions accepted in bodies, by canonical (C math library) name.
PURE_FUNCTIONS = frozenset(
    {
        "sqrt", "sqrtf", "exp", "expf", "log", "logf", "fabs", "fabsf", "abs", "pow", "powf",
        "fmin", "fminf", "fmax", "fmaxf", "sin", "sinf", "cos", "cosf", "tan", "tanf",
        "tanh", "tanhf", "floor", "floorf", "ceil", "ceilf", "exp2", "exp2f", "log2", "log2f",
        "log10", "log10f", "rsqrt", "rsqrtf", "min", "max", "fma", "fmaf", "erf", "erff",
        "fmod", "fmodf", "round", "roundf", "trunc", "truncf", "asin", "asinf", "acos",
        "acosf", "atan", "atanf", "atan2", "atan2f", "sinh", "sinhf", "cosh", "coshf",
        "cbrt", "cbrtf", "hypot", "hypotf", "expm1", "expm1f", "log1p", "log1pf",
    }
)


@dataclass(frozen=True)
class Call(Expr):
    """A call to a pure math function (canonical C name, see PURE_FUNCTIONS)."""

    func: str
    args: tuple[Expr, ...]

    def __str__(self) -> str:
        return f"{self.func}({', '.join(map(str, self.args))})"


@dataclass(frozen=True)
class ValueCompare(Expr):
    """A comparison of values inside a body (e.g. in ``x > 0 ? x : 0``); yields 0/1."""

    op: str  # one of CMP_OPS
    lhs: Expr
    rhs: Expr

    def __str__(self) -> str:
        return f"({self.lhs} {self.op} {self.rhs})"


@dataclass(frozen=True)
class ValueLogical(Expr):
    op: str  # 'and' | 'or' | 'not'
    args: tuple[Expr, ...]

    def __str__(self) -> str:
        if self.op == "not":
            return f"!{self.args[0]}"
        sym = " && " if self.op == "and" else " || "
        return "(" + sym.join(map(str, self.args)) + ")"


@dataclass(frozen=True)
class Select(Expr):
    """``cond ? then : else_`` on values (data-dependent selection is fine in a body)."""

    cond: Expr
    then: Expr
    else_: Expr

    def __str__(self) -> str:
        return f"({self.cond} ? {self.then} : {self.else_})"


# --------------------------------------------------------------------------
# Loop tree
# --------------------------------------------------------------------------

ASSIGN_OPS = ("=", "+=", "-=", "*=", "/=")


@dataclass(frozen=True)
class Assign:
    """One statement: ``target op value``.  Reads of ``target`` implied by ``op=`` are
    made explicit by the model builder."""

    target: ArrayRef | ScalarRef
    op: str  # one of ASSIGN_OPS
    value: Expr
    loc: SourceLoc

    def __str__(self) -> str:
        return f"{self.target} {self.op} {self.value}"


@dataclass(frozen=True)
class For:
    """``for (iterator = init; cond; iterator += step)``.

    ``cond`` is an affine condition in which the iterator appears (``i < n``,
    ``i <= min(n, m)``, ``i >= 0`` for a negative step); ``step`` is a non-zero
    integer constant.  Python ``range(lb, ub, s)`` becomes init=lb,
    cond ``i < ub`` (or ``i > ub`` for s < 0), step=s.
    """

    iterator: str
    init: IntExpr
    cond: Cond
    step: int
    body: tuple[Node, ...]
    loc: SourceLoc
    # C: the iterator is declared in the loop header (``for (int i = ...``), so it is
    # private to the loop; Python iterators are always local to the function
    declares_iterator: bool = False


@dataclass(frozen=True)
class If:
    cond: Cond
    then: tuple[Node, ...]
    else_: tuple[Node, ...]
    loc: SourceLoc


Node = Assign | For | If


# --------------------------------------------------------------------------
# Declarations and the whole program
# --------------------------------------------------------------------------

# Element types, by canonical name -> C spelling and size in bytes.
DTYPES = {
    "float32": ("float", 4),
    "float64": ("double", 8),
    "int32": ("int", 4),
    "int64": ("long long", 8),
}


@dataclass(frozen=True)
class ArrayDecl:
    """An array argument: element type and row-major extents (integer expressions
    over earlier integer parameters or constants)."""

    name: str
    dtype: str  # key of DTYPES
    shape: tuple[IntExpr, ...]
    loc: SourceLoc


@dataclass(frozen=True)
class ScalarDecl:
    """A scalar: an ``int`` size parameter (``is_param``), a float/int value
    parameter, or a scalar temporary declared in the function."""

    name: str
    dtype: str  # key of DTYPES
    loc: SourceLoc
    kind: str  # 'param' (function argument) | 'temporary' (local variable written in the scop)


@dataclass(frozen=True)
class Program:
    """One function's affine region, as the frontend read it.

    ``params`` are the function's scalar arguments in order (integer ones
    become isl parameters), ``arrays`` its array arguments in order,
    ``temporaries`` scalar locals assigned inside the region, ``local_arrays``
    arrays declared in the function before it, ``body`` the
    region's loop tree; ``signature`` all argument names in declaration order
    (scalars and arrays interleaved as written), so the original function can
    be called as the sequential reference.
    """

    name: str
    file: str
    loc: SourceLoc
    signature: tuple[str, ...]
    params: tuple[ScalarDecl, ...]
    arrays: tuple[ArrayDecl, ...]
    temporaries: tuple[ScalarDecl, ...]
    body: tuple[Node, ...]
    language: str  # 'c' | 'python'
    # arrays declared in the function before the region (``float t[n];``): region-local,
    # holding no value on entry and none the caller sees (runtime-allocated scratch)
    local_arrays: tuple[ArrayDecl, ...] = ()
    # array arguments the caller marked as not live-out (``#pragma polygpu
    # not_live_out(...)``, ``@affine(not_live_out=...)``): their values on entry may be
    # read, their values after the region nobody reads -- not compared by the check, and
    # a fused plan need not store them (memory/residence.py)
    not_live_out: tuple[str, ...] = ()
