"""Print the statements of the loop-tree IR as CUDA C expressions.

A statement instance is emitted where isl's AST calls it, with each original iterator
replaced by the C expression isl gives for it.  Arrays are flat row-major pointers,
so ``a[i][j]`` becomes ``a[(i) * (m) + (j)]`` with the declared extents; scalar
temporaries become file-scope ``__device__`` variables (they may live across kernels,
and the legality proof guarantees no two threads race on them).  Float literals take
the element type of the statement's target so float32 code stays in float32, and the
integer operations keep the source language's meaning (C truncation vs Python floor).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from polygpu.frontend import ir
from polygpu.memory.footprints import triangle_pair

INT_HELPERS = """\
__device__ __forceinline__ int pg_floordiv(int a, int b)
{ int q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; }
__device__ __forceinline__ int pg_mod(int a, int b)
{ int r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
__device__ __forceinline__ float pg_floordiv(float a, float b) { return floorf(a / b); }
__device__ __forceinline__ double pg_floordiv(double a, double b) { return floor(a / b); }
__device__ __forceinline__ float pg_mod(float a, float b) { return a - b * floorf(a / b); }
__device__ __forceinline__ double pg_mod(double a, double b) { return a - b * floor(a / b); }
#define floord(n, d) (((n) < 0) ? -((-(n) + (d) - 1) / (d)) : (n) / (d))
// pow(x, n) for a constant integer n (Printer.value): multiplications by squaring, no
// logarithm and exponential (the cube of an L3 pair-distance kernel is its whole cost)
template <int N, typename T> __device__ __forceinline__ T pg_powi(T x)
{
  if constexpr (N == 0) return T(1);
  else if constexpr (N < 0) return T(1) / pg_powi<-N>(x);
  else if constexpr (N == 1) return x;
  else { T h = pg_powi<N / 2>(x); if constexpr (N % 2 == 1) return h * h * x; else return h * h; }
}
// atomic sums of partial results (polygpu.model.atomic).  pg_atomic_add_warp is for
// updates whose address does not change along threadIdx.x: when the whole warp adds to
// one address (checked: MATCH.ALL), it adds once, after a butterfly sum.
template <typename T> __device__ __forceinline__ void pg_atomic_add(T *p, T v)
{ atomicAdd(p, v); }
template <typename T> __device__ __forceinline__ void pg_atomic_add_warp(T *p, T v)
{
#ifdef __CUDA_ARCH__
  const unsigned active = __activemask();
  int same = 0;
  __match_all_sync(active, reinterpret_cast<unsigned long long>(p), &same);
  if (active == 0xffffffffu && same) {
    for (int d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(active, v, d);
    unsigned lane;
    asm("mov.u32 %0, %%laneid;" : "=r"(lane));
    if (lane == 0) atomicAdd(p, v);
    return;
  }
#endif
  atomicAdd(p, v);
}
"""


# Programs with fast math (Variant.fast_math): the float functions with a CUDA intrinsic
# are that intrinsic from here on (the CPU emulator maps the intrinsics back to them)
FAST_MATH = {"expf": "__expf", "logf": "__logf", "sinf": "__sinf", "cosf": "__cosf",
             "powf": "__powf"}
FAST_MATH_PRELUDE = "// fast math (--fast-math): CUDA's intrinsics\n" + "\n".join(
    f"#define {name} {intrinsic}" for name, intrinsic in FAST_MATH.items()) + "\n"


# Helpers of programs with 64-bit index arithmetic (codegen/index_width.py): CUDA's
# min/max have no overload for an int and a long long together (ambiguous), and
# pg_floordiv/pg_mod get long long operands.
INDEX64_HELPERS = """\
__device__ __forceinline__ long long pg_min(long long a, long long b) { return a < b ? a : b; }
__device__ __forceinline__ long long pg_max(long long a, long long b) { return a < b ? b : a; }
__device__ __forceinline__ long long pg_floordiv(long long a, long long b)
{ long long q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; }
__device__ __forceinline__ long long pg_mod(long long a, long long b)
{ long long r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
"""

INDEX64 = "long long"

_MIN_MAX = re.compile(r"\b(min|max)\(")


def index_text(text: str, index64: bool) -> str:
    """An integer index expression (isl's C text, or the printer's) for a program
    whose index arithmetic is ``long long`` when ``index64``: ``min``/``max`` become
    ``pg_min``/``pg_max``, which take any mix of int and long long."""
    return _MIN_MAX.sub(r"pg_\1(", text) if index64 else text


# pow(x, n) with a constant integer |n| up to this is multiplied out (pg_powi)
POWI_LIMIT = 64


def integer_exponent(e: ir.Call) -> int | None:
    """The exponent of ``pow``/``powf`` when it is a constant integer (``3``, ``3.0``,
    ``-2``: after the preprocessor, ``-D P=3`` is one) of at most :data:`POWI_LIMIT`,
    else None.  Why: ``powf`` is a logarithm, a multiplication and an exponential (and
    their special cases), ``x * x * x`` two multiplications -- the difference is the
    whole cost of an all-pairs L3 distance kernel -- and the two agree within a few
    roundings, with the same zeros, infinities and signs (tests/test_allpairs.py)."""
    if e.func not in ("pow", "powf") or len(e.args) != 2:
        return None
    arg, sign = e.args[1], 1
    if isinstance(arg, ir.UnaryOp) and arg.op in ("-", "+"):
        arg, sign = arg.arg, (-1 if arg.op == "-" else 1)
    if not isinstance(arg, ir.Const):
        return None
    value = float(arg.value)
    if not value.is_integer() or abs(value) > POWI_LIMIT:
        return None
    return sign * int(value)


def temporary_name(name: str) -> str:
    return f"pg_tmp_{name}"


def constant_name(name: str) -> str:
    """The ``__constant__`` copy of array ``name``."""
    return f"{name}_const"


def packed_subscript(r: str, c: str, fold: int, upper: bool = False, side: int = 0
                     ) -> str:
    """``[row][column]`` of box element ``(r, c)`` (C expressions, ``c <= r``; ``c >=
    r`` for an ``upper`` triangle, stored as its transpose's lower one) in a packed
    triangle folded at row ``fold`` (:attr:`Buffer.packed`).  ``side`` 1 / -1: the
    (stored) row is known to be at least / below the fold (codegen/fold_pieces.py), and
    the subscript is that side's affine one instead of a select of both."""
    if upper:
        r, c = c, r
    if side > 0:
        return f"[({r}) - {fold}][{c}]"
    if side < 0:
        return f"[{fold - 1} - ({r})][{2 * fold} - ({c})]"
    upper = f"({r}) >= {fold}"
    return (f"[{upper} ? ({r}) - {fold} : {fold - 1} - ({r})]"
            f"[{upper} ? ({c}) : {2 * fold} - ({c})]")


@dataclass(frozen=True)
class BufferView:
    """How references to an array print when the memory stage gave it a buffer:
    ``name[(e_0 - base_0) / stride_0][...]``, or for a chunked dimension (runs of ``w``
    elements ``stride`` apart) ``[(e - base) / stride * w + (e - base) % stride]``;
    ``base`` holds C expressions."""

    name: str
    base: tuple[str, ...]
    stride: tuple[int, ...]
    extents: tuple[int, ...]
    chunk: tuple[int, ...] = ()
    order: tuple[int, ...] = ()  # storage order of the dimensions (empty: as written)
    packed: int = 0  # a packed lower triangle (Buffer.packed, Buffer.triangle's dims)
    packed_upper: bool = False  # ... an upper one (Buffer.packed_upper)
    packed_side: int = 0  # the reference's side of the fold, where known (fold_pieces)
    # a register copy spread over ``lanes`` lanes (Buffer.lanes): element e along
    # ``lane_dim`` is slot e / lanes of lane e % lanes; ``slot``: (the C text of a loop
    # iterator, the name of its slot) inside the loop the lanes share, where a lane's
    # own element's slot is a constant of the unrolled slot loop (lane_registers.py)
    lanes: int = 1
    lane_dim: int = 0
    slot: tuple[str, str] = ()

    def owner(self, subs: list[str]) -> str:
        """C: the lane whose slot holds element ``subs`` of a spread copy."""
        d = self.lane_dim
        return f"((({subs[d]}) - ({self.base[d]})) % {self.lanes})"

    def subscript(self, subs: list[str]) -> str:
        if self.packed:  # (stride 1, no chunks, storage as written: residence.py)
            i, j = triangle_pair(self.extents)  # (the dimensions after j: extent 1)

            def plain(lo: int, hi: int, name: str) -> str:
                return BufferView(name, self.base[lo:hi], self.stride[lo:hi],
                                  self.extents[lo:hi]).subscript(subs[lo:hi]) \
                    if hi > lo else name

            r, c = (sub if base == "0" else f"({sub}) - ({base})"
                    for sub, base in zip(subs[i:j + 1], self.base[i:j + 1], strict=True))
            return plain(j + 1, len(subs), plain(0, i, self.name) + packed_subscript(
                r, c, self.packed, self.packed_upper, self.packed_side))
        parts = []
        chunks = self.chunk or (1,) * len(self.extents)
        for d, (sub, base, stride, extent, w) in enumerate(zip(
                subs, self.base, self.stride, self.extents, chunks, strict=True)):
            if self.lanes > 1 and d == self.lane_dim:  # (stride 1, no chunks)
                parts.append(f"[{self.slot[1]}]" if self.slot and sub == self.slot[0]
                             else f"[(({sub}) - ({base})) / {self.lanes}]")
            elif extent == 1:
                parts.append("[0]")  # a constant index keeps register tiles in registers
            elif w > 1:
                offset = f"(({sub}) - ({base}))"
                parts.append(f"[{offset} / {stride} * {w} + {offset} % {stride}]")
            elif stride == 1:
                parts.append(f"[({sub}) - ({base})]")
            else:
                parts.append(f"[(({sub}) - ({base})) / {stride}]")
        if self.order:
            parts = [parts[d] for d in self.order]
        return self.name + "".join(parts)


@dataclass(frozen=True)
class Printer:
    """Prints IR expressions; ``subst`` maps iterator names to C expressions."""

    shapes: dict[str, tuple[ir.IntExpr, ...]]  # array -> extents
    temporaries: frozenset[str]
    subst: dict[str, str]
    float_type: str = "float32"  # element type of the statement's target
    buffers: dict[str, BufferView] = field(default_factory=dict)
    constants: frozenset[str] = frozenset()
    index64: bool = False  # long long index arithmetic (codegen/index_width.py)
    # buffers of single references: (array, subscripts as written) -> view, before
    # ``buffers`` (an array read at places far apart has a buffer per reference group)
    ref_buffers: dict[tuple[str, tuple], BufferView] = field(default_factory=dict)

    # ---- integer expressions ------------------------------------------------

    def int_expr(self, e: ir.IntExpr) -> str:
        if isinstance(e, ir.IntConst):
            return str(e.value) if e.value >= 0 else f"({e.value})"
        if isinstance(e, ir.IntVar):
            return self.subst.get(e.name, e.name)
        if isinstance(e, ir.IntNeg):
            return f"(-{self.int_expr(e.arg)})"
        if isinstance(e, ir.IntMinMax):
            text = self.int_expr(e.args[0])
            for a in e.args[1:]:
                text = f"{e.op}({text}, {self.int_expr(a)})"
            return index_text(text, self.index64)
        if isinstance(e, ir.IntSelect):
            return (f"(({self.cond(e.cond)}) ? {self.int_expr(e.then)} : "
                    f"{self.int_expr(e.else_)})")
        if isinstance(e, ir.IntBinOp):
            a, b = self.int_expr(e.lhs), self.int_expr(e.rhs)
            if e.op in ("+", "-", "*"):
                return f"({a} {e.op} {b})"
            if e.op == "truncdiv":
                return f"({a} / {b})"
            if e.op == "rem":
                return f"({a} % {b})"
            if self.index64:  # one overload matches: long long
                return f"pg_{e.op}(({INDEX64})({a}), ({INDEX64})({b}))"
            return f"pg_{e.op}({a}, {b})"  # floordiv, mod
        raise TypeError(f"unknown integer expression {e!r}")

    def cond(self, c: ir.Cond) -> str:
        if isinstance(c, ir.BoolConst):
            return "1" if c.value else "0"
        if isinstance(c, ir.Compare):
            return f"{self.int_expr(c.lhs)} {c.op} {self.int_expr(c.rhs)}"
        if isinstance(c, ir.BoolOp):
            sym = " && " if c.op == "and" else " || "
            return "(" + sym.join(f"({self.cond(a)})" for a in c.args) + ")"
        if isinstance(c, ir.Not):
            return f"!({self.cond(c.arg)})"
        raise TypeError(f"unknown condition {c!r}")

    # ---- values ------------------------------------------------------------

    def view(self, r: ir.ArrayRef | ir.ScalarRef) -> BufferView | None:
        """The buffer ``r`` prints through: its reference group's, else its array's
        (None: global or constant memory, or a scalar)."""
        if not isinstance(r, ir.ArrayRef):
            return None
        return self.ref_buffers.get((r.array, tuple(r.index))) or self.buffers.get(r.array)

    def ref(self, r: ir.ArrayRef | ir.ScalarRef) -> str:
        if isinstance(r, ir.ScalarRef):
            return temporary_name(r.name) if r.name in self.temporaries else r.name
        view = self.view(r)
        if view is not None:
            return view.subscript([self.int_expr(e) for e in r.index])
        name = constant_name(r.array) if r.array in self.constants else r.array
        return f"{name}[{self.flat_index(r.array, [self.int_expr(e) for e in r.index])}]"

    def flat_index(self, array: str, subs: list[str]) -> str:
        """Row-major offset of element ``subs`` (C expressions) of ``array``."""
        shape = self.shapes[array]
        # 64-bit programs: the offset is computed in long long from its first term on
        index = f"({INDEX64})({subs[0]})" if self.index64 else subs[0]
        for sub, extent in zip(subs[1:], shape[1:], strict=True):
            index = f"({index}) * {self.int_expr(extent)} + {sub}"
        return index

    def value(self, e: ir.Expr) -> str:
        if isinstance(e, ir.Const):
            if e.dtype == "int":
                return str(e.value) if e.value >= 0 else f"({e.value})"
            text = repr(float(e.value))
            if "e" not in text and "." not in text and "inf" not in text:
                text += ".0"
            return text + ("f" if self.float_type == "float32" else "")
        if isinstance(e, ir.ArrayRef | ir.ScalarRef):
            return self.ref(e)
        if isinstance(e, ir.IntValue):
            return self.int_expr(e.expr)
        if isinstance(e, ir.BinOp):
            a, b = self.value(e.lhs), self.value(e.rhs)
            if e.op in ("floordiv", "mod"):
                return f"pg_{e.op}({a}, {b})"
            return f"({a} {e.op} {b})"
        if isinstance(e, ir.UnaryOp):
            return f"({e.op}{self.value(e.arg)})"
        if isinstance(e, ir.Call):
            n = integer_exponent(e)
            if n is not None:  # C's pow is the double one, powf the float one
                ctype = "float" if e.func == "powf" else "double"
                return f"pg_powi<{n}>(({ctype})({self.value(e.args[0])}))"
            return f"{e.func}({', '.join(self.value(a) for a in e.args)})"
        if isinstance(e, ir.ValueCompare):
            return f"({self.value(e.lhs)} {e.op} {self.value(e.rhs)})"
        if isinstance(e, ir.ValueLogical):
            if e.op == "not":
                return f"(!{self.value(e.args[0])})"
            sym = " && " if e.op == "and" else " || "
            return "(" + sym.join(self.value(a) for a in e.args) + ")"
        if isinstance(e, ir.Select):
            return (f"({self.value(e.cond)} ? {self.value(e.then)} : "
                    f"{self.value(e.else_)})")
        raise TypeError(f"unknown expression {e!r}")

    def assign(self, s: ir.Assign) -> str:
        return f"{self.ref(s.target)} {s.op} {self.value(s.value)};"

    def atomic_add(self, s: ir.Assign, operand: ir.Expr, ctype: str, function: str) -> str:
        """The sum update ``s`` as an atomic addition of ``operand`` to its target in
        global memory with ``function`` (:mod:`polygpu.model.atomic`)."""
        return f"{function}(&{self.ref(s.target)}, ({ctype})({self.value(operand)}));"
