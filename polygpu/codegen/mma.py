"""Double-precision products on the tensor cores: a register tile's time loop as warp
``mma.sync.m8n8k4.f64`` instructions and their larger sm_90 shapes (``Variant.mma``).

Why: from sm_80 the FP64 tensor cores run twice the FP64 FMA rate (H100/H200: 67
against 34 TFLOP/s), and cuBLAS's batched DGEMM reaches 38 TFLOP/s at n = 128 on an
H200 -- above what any FMA code can (batched.md, 2026-11-30).

Where it fits: a register-tiled kernel (``jam``) whose time loop runs a sum update
``T[i][j] += X * Y`` with ``X`` free of ``j`` and ``Y`` free of ``i``, over 2 or more
mapped dimensions with the threads laid out as the instruction's fragments are: 4
threads along ``x`` with points in runs of 2 (``chunk`` 2: columns ``8 v + 2 tx + e``),
a multiple of 8 along ``y`` (a warp: 8 groups of 4 lanes, one ``ty`` each; the tiling
deals rows cyclically under ``mma``, ``ty + threads u``, so the 8 groups read 8
consecutive rows of the row factor's buffer).  Then lane
``l = 4 (ty mod 8) + tx`` of a warp holds, for each of its fragments ``(u, v)``, exactly
the accumulator pair the instruction gives lane ``l`` -- ``C[l / 4][2 (l mod 4) + e]``,
row ``l / 4`` of the fragment being the row of the group's point ``u`` -- as its own
register points, and supplies ``A[l / 4][l mod 4]`` (its own row, ``k0 + tx``) and
``B[l mod 4][l / 4]`` (``k0 + tx``, column ``8 v + ty mod 8`` of the tile).  Four steps
of the time loop become one instruction per fragment -- per two fragments of one
column where the thread has two rows: ``m16n8k4`` takes rows ``l / 4`` and ``l / 4 + 8``
with ``A`` of each and one ``B`` (``pg_dmma16``; sm_90, where it runs at twice the rate
of two ``m8n8k4``: Nsight Compute showed the FP64 tensor pipe the limit).  With
``Variant.mma_k`` 8 or 16, two or four such steps are one ``m16n8k8`` / ``m16n8k16``
(``A`` of both rows at the lane's steps ``l mod 4 + 4 s``, ``B`` at the same steps, in
turn): fewer instructions for the same products, where the time loop's trip allows.

Exactness: the same products, summed four at a time in the instruction's own order (a
reduction's reassociation, as the lanes' split sums of codegen/cuda.py), checked like
every program.  Only time loops of whole tiles take it -- every point of the thread
present, a trip count that is a multiple of 4 -- others keep their FMA code.  Without
sm_80 (and on the CPU emulator) ``pg_dmma`` computes the same with shuffles.
"""

from __future__ import annotations

import dataclasses
import re

import cgen
import islpy as isl

from polygpu.codegen.thread_ast import constant_value
from polygpu.errors import PolygpuError
from polygpu.frontend import ir
from polygpu.model import atomic
from polygpu.model.scop import Scop
from polygpu.schedule.tiling import TiledKernel

FUNCTION = "pg_dmma"
FUNCTION16 = "pg_dmma16"  # two rows' fragments at once (mma.sync.m16n8k4 on sm_90)
K_STEP = 4  # the smallest instruction's k: four steps of the time loop
# two rows' fragments over k = 8 or 16 steps (mma.sync.m16n8k8 / m16n8k16, Variant.mma_k)
FUNCTIONS16 = {4: FUNCTION16, 8: "pg_dmma16k8", 16: "pg_dmma16k16"}

PRELUDE = r"""// C[l/4][2(l%4)+{0,1}] += sum over q < 4 of A[l/4][q] B[q][l/4'] on lane l of a warp:
// mma.sync.m8n8k4 in double (codegen/mma.py); lane l gives A[l/4][l%4] and B[l%4][l/4]
__device__ __forceinline__ void pg_dmma(double &c0, double &c1, double a, double b)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
               : "+d"(c0), "+d"(c1) : "d"(a), "d"(b));
#else
  const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const int g = (t % 32) / 4, q = (t % 32) % 4;
  for (int s = 0; s < 4; s++) {
    const double as = __shfl_sync(0xffffffffu, a, 4 * g + s);
    const double b0 = __shfl_sync(0xffffffffu, b, 8 * q + s);
    const double b1 = __shfl_sync(0xffffffffu, b, 8 * q + 4 + s);
    c0 = fma(as, b0, c0);
    c1 = fma(as, b1, c1);
  }
#endif
}

// Two of those sharing B (rows l/4 with a0, rows l/4 + 8 with a1): mma.sync.m16n8k4, one
// instruction from sm_90 (Hopper's DMMA runs it at twice the rate of two m8n8k4)
__device__ __forceinline__ void pg_dmma16(double &c0, double &c1, double &c2, double &c3,
                                          double a0, double a1, double b)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
               "{%0, %1, %2, %3};"
               : "+d"(c0), "+d"(c1), "+d"(c2), "+d"(c3) : "d"(a0), "d"(a1), "d"(b));
#else
  pg_dmma(c0, c1, a0, b);
  pg_dmma(c2, c3, a1, b);
#endif
}

// Two or four of those in one (Variant.mma_k 8, 16): mma.sync.m16n8k8 / m16n8k16 on sm_90,
// A of rows l/4, l/4 + 8 at steps l%4 + 4s in turn, B at steps l%4 + 4s (s < 2 or 4):
// fewer, larger steps of the FP64 tensor pipe; the steps of 4 in turn below sm_90
__device__ __forceinline__ void pg_dmma16k8(double &c0, double &c1, double &c2, double &c3,
                                            double a0, double a1, double a2, double a3,
                                            double b0, double b1)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, "
               "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+d"(c0), "+d"(c1), "+d"(c2), "+d"(c3)
               : "d"(a0), "d"(a1), "d"(a2), "d"(a3), "d"(b0), "d"(b1));
#else
  pg_dmma16(c0, c1, c2, c3, a0, a1, b0);
  pg_dmma16(c0, c1, c2, c3, a2, a3, b1);
#endif
}

__device__ __forceinline__ void pg_dmma16k16(double &c0, double &c1, double &c2, double &c3,
                                             double a0, double a1, double a2, double a3,
                                             double a4, double a5, double a6, double a7,
                                             double b0, double b1, double b2, double b3)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, "
               "{%4, %5, %6, %7, %8, %9, %10, %11}, {%12, %13, %14, %15}, {%0, %1, %2, %3};"
               : "+d"(c0), "+d"(c1), "+d"(c2), "+d"(c3)
               : "d"(a0), "d"(a1), "d"(a2), "d"(a3), "d"(a4), "d"(a5), "d"(a6), "d"(a7),
                 "d"(b0), "d"(b1), "d"(b2), "d"(b3));
#else
  pg_dmma16k8(c0, c1, c2, c3, a0, a1, a2, a3, b0, b1);
  pg_dmma16k8(c0, c1, c2, c3, a4, a5, a6, a7, b2, b3);
#endif
}"""


@dataclasses.dataclass(frozen=True)
class Fragments:
    """A kernel's register tile as the instruction's fragments: ``rows`` fragments down
    (a thread's points along y), ``cols`` across (its runs of 2 along x); ``tx``,
    ``ty``: the thread ids' C names; ``k``: the instruction's k (``Variant.mma_k``)."""

    rows: int
    cols: int
    tx: str
    ty: str
    k: int = K_STEP


def fragments(scop: Scop, kernel: TiledKernel, device_steps: bool) -> Fragments:
    """``kernel``'s fragments; PolygpuError (bad input: the variant) where its threads
    are not laid out as the instruction needs, it writes no double array, or it runs
    as device steps."""
    if device_steps:
        raise PolygpuError("variant: mma (double products on the tensor cores) runs in "
                           "launched kernels, not in device steps")
    targets = [scop.statement(s).body.target for s in kernel.statements]
    if not any(scop.array(t.array).dtype == "float64" for t in targets
               if isinstance(t, ir.ArrayRef)):
        raise PolygpuError(f"variant: mma (double products on the tensor cores): kernel "
                           f"{kernel.index} writes no double array")
    tile, threads = kernel.tile, kernel.threads  # x first
    need = []
    if kernel.n_mapped < 2 or not kernel.unroll_dims:
        need.append("a register tile (jam) over two mapped dimensions")
    else:
        if threads[0] != 4 or kernel.chunk != 2 or kernel.blocked:
            need.append("4 threads along x with runs of 2 points (chunk 2, not blocked)")
        if threads[1] % 8 or tile[1] % threads[1]:
            need.append("a multiple of 8 threads along y, dividing the tile")
        elif tile[1] < 2 * threads[1]:  # (the rows' iterator is told by two rows)
            need.append("at least 2 points a thread along y")
        if tile[0] % 8:
            need.append("a tile along x that is a multiple of 8")
    if need:
        raise PolygpuError(f"variant: mma (double products on the tensor cores) needs "
                           f"{'; '.join(need)}; kernel {kernel.index} has tile "
                           f"{tuple(reversed(tile))}, threads {tuple(reversed(threads))}")
    return Fragments(rows=tile[1] // threads[1], cols=tile[0] // 8,
                     tx=kernel.thread_names[0], ty=kernel.thread_names[1],
                     k=kernel.mma_k)


def _nodes(e):
    """``e`` and every IR node inside it (references' subscripts included)."""
    yield e
    if dataclasses.is_dataclass(e):
        for f in dataclasses.fields(e):
            value = getattr(e, f.name)
            for v in value if isinstance(value, tuple) else (value,):
                if isinstance(v, (ir.Expr, ir.IntExpr)):
                    yield from _nodes(v)


def arrays_in(e: ir.Expr) -> set[str]:
    """The arrays an IR expression reads."""
    return {n.array for n in _nodes(e) if isinstance(n, ir.ArrayRef)}


def names_in(e: ir.Expr) -> set[str]:
    """The iterator and parameter names an IR expression reads."""
    return {n.name for n in _nodes(e) if isinstance(n, ir.IntVar)}


def points(node: isl.AstNode, unrolled: frozenset[str], values: dict[str, int]
           ) -> list[tuple[str, list[str]]] | None:
    """The statement calls of a register tile's body in order, each ``(name, argument
    texts)`` with the tile's loop counters replaced by their values; None where the
    body holds anything else (a guard: a partial tile)."""
    t = node.get_type()
    if t == isl.ast_node_type.block:
        out = []
        children = node.block_get_children()
        for k in range(children.n_ast_node()):
            part = points(children.get_at(k), unrolled, values)
            if part is None:
                return None
            out += part
        return out
    if t == isl.ast_node_type.mark:
        return points(node.mark_get_node(), unrolled, values)
    if t == isl.ast_node_type.for_:
        it = node.for_get_iterator().get_id().get_name()
        cond = node.for_get_cond()
        first = constant_value(node.for_get_init())
        if it not in unrolled or first is None or constant_value(node.for_get_inc()) != 1 or \
                cond.get_op_n_arg() != 2 or cond.get_op_arg(0).to_C_str() != it:
            return None
        last = constant_value(cond.get_op_arg(1))
        op = cond.get_op_type()
        if last is None or op not in (isl.ast_expr_op_type.le, isl.ast_expr_op_type.lt):
            return None
        last -= op == isl.ast_expr_op_type.lt
        out = []
        for v in range(first, last + 1):
            part = points(node.for_get_body(), unrolled, values | {it: v})
            if part is None:
                return None
            out += part
        return out
    if t == isl.ast_node_type.user:
        call = node.user_get_expr()
        name = call.get_op_arg(0).get_id().get_name()
        args = []
        for k in range(1, call.get_op_n_arg()):
            text = call.get_op_arg(k).to_C_str()
            for var, value in values.items():
                text = re.sub(rf"\b{re.escape(var)}\b", f"({value})", text)
            args.append(text)
        return [(name, args)]
    return None


def trip(node: isl.AstNode, it: str) -> tuple[str, int] | None:
    """``(first, count)`` of a loop ``for (it = first; it <= first + count - 1; it++)``
    whose count is a multiple of :data:`K_STEP`, else None."""
    cond, init = node.for_get_cond(), node.for_get_init()
    if constant_value(node.for_get_inc()) != 1 or cond.get_op_n_arg() != 2 or \
            cond.get_op_arg(0).to_C_str() != it or \
            cond.get_op_type() != isl.ast_expr_op_type.le:
        return None
    first, last = constant_value(init), constant_value(cond.get_op_arg(1))
    if first is not None and last is not None:
        count = last - first + 1
    else:
        m = re.fullmatch(rf"{re.escape(init.to_C_str())} \+ (\d+)",
                         cond.get_op_arg(1).to_C_str())
        if m is None:
            return None
        count = int(m[1]) + 1
    return (init.to_C_str(), count) if count > 0 and count % K_STEP == 0 else None


def loop(emitter, node: isl.AstNode, it: str, shape: Fragments, itype: str) -> list | None:
    """The time loop ``node`` (over ``it``) as tensor-core steps, or None where it is
    not one over a whole register tile of one product statement (the caller then
    prints it as written)."""
    counted = trip(node, it)
    if counted is None:
        return None
    calls = points(node.for_get_body(), emitter.unrolled, {})
    per_row = 2 * shape.cols
    if not calls or len(calls) != shape.rows * per_row or \
            len({name for name, _ in calls}) != 1:
        return None
    name = calls[0][0]
    if name not in emitter.statements or name in emitter.atomic or emitter.lanes:
        return None
    stmt = emitter.scop.statement(name)
    factors = atomic.product_update(stmt.body)
    first = calls[0][1]
    if factors is None or shape.rows < 2:
        return None
    # which iterator is the row (changes between rows), the column, the time step
    k_pos = [p for p, a in enumerate(first) if a == it]
    i_pos = [p for p, (a, b) in enumerate(zip(first, calls[per_row][1], strict=True))
             if a != b]
    j_pos = [p for p, (a, b) in enumerate(zip(first, calls[1][1], strict=True)) if a != b]
    if len(k_pos) != 1 or len(i_pos) != 1 or len(j_pos) != 1:
        return None
    iters = stmt.iterators
    i, j, k = iters[i_pos[0]], iters[j_pos[0]], iters[k_pos[0]]
    x, y = factors
    if j in names_in(x):
        x, y = y, x
    if j in names_in(x) or i in names_in(y):
        return None
    target = stmt.body.target
    if emitter.scop.array(target.array).dtype != "float64" or \
            target.array in arrays_in(x) | arrays_in(y):
        return None  # (a factor read of the target's array: its 4 steps stay apart)
    start, count = counted
    # the instruction's k: the kernel's (Variant.mma_k), or the largest smaller one
    # the trip is a multiple of; sub-step s of a step covers its time steps
    # 4 s .. 4 s + 3, lane l's at 4 s + l % 4
    k_size = max(k for k in FUNCTIONS16 if k <= shape.k and count % k == 0)
    subs = range(k_size // K_STEP)

    def printed(point: int, subst: dict[str, str]):
        args = dict(zip(iters, calls[point][1], strict=True)) | subst
        return emitter.printer_for(name, args)

    def step(sub: int) -> str:
        return f"({it} + {K_STEP * sub} + {shape.tx})" if sub else f"({it} + {shape.tx})"

    # point u * per_row + 2 v + e of the thread: its row u's, its column 8 v + 2 tx + e
    # of the tile (runs of 2 over 4 threads); fragment (u, v)'s rows are the rows the
    # warp's 8 groups of 4 lanes hold, its columns 8 v .. 8 v + 7
    body = []
    for s_ in subs:
        for u in range(shape.rows):
            body.append(cgen.Statement(f"const double pg_mma_a{u}{_sub(s_)} = "
                                       f"{printed(u * per_row, {k: step(s_)}).value(x)}"))
        for v in range(shape.cols):
            col = f"({calls[2 * v][1][j_pos[0]]}) - 2 * {shape.tx} + {shape.ty} % 8"
            body.append(cgen.Statement(
                f"const double pg_mma_b{v}{_sub(s_)} = "
                f"{printed(2 * v, {j: col, k: step(s_)}).value(y)}"))
    # two rows' fragments sharing a column's B as one m16n8k{4,8,16} step; an odd last
    # row alone, as m8n8k4 steps in turn
    for u in range(0, shape.rows, 2):
        rows = [r for r in (u, u + 1) if r < shape.rows]
        for v in range(shape.cols):
            acc = [printed(r * per_row + 2 * v + e, {}).ref(target)
                   for r in rows for e in (0, 1)]
            if len(rows) == 2:
                a = [f"pg_mma_a{r}{_sub(s_)}" for s_ in subs for r in rows]
                b = [f"pg_mma_b{v}{_sub(s_)}" for s_ in subs]
                body.append(cgen.Statement(
                    f"{FUNCTIONS16[k_size]}({', '.join(acc + a + b)})"))
            else:
                for s_ in subs:
                    body.append(cgen.Statement(
                        f"{FUNCTION}({', '.join(acc)}, pg_mma_a{u}{_sub(s_)}, "
                        f"pg_mma_b{v}{_sub(s_)})"))
    return [cgen.For(f"{itype} {it} = {start}", f"{it} <= {start} + {count - 1}",
                     f"{it} += {k_size}", cgen.Block(body))]


def _sub(s: int) -> str:
    """The name suffix of sub-step ``s``'s operands (none for the first: the names of
    steps of 4 are as before)."""
    return f"_{s}" if s else ""
