"""BLAS peers: recognise a region that *is* a cuBLAS call, and time that call.

``polygpu tune`` reports each variant's time next to what a vendor library takes for the
same work, when there is one.  Whether there is one is decided on the polyhedral model,
never on names: polygpu is judged on loop nests it has not seen, so a matrix-vector
product with other array names, written in Python, in double precision, with its loops
interchanged or with a constant factor must be recognised, and anything else must not.

A statement is a BLAS **update** when

* it is ``c[..] += f1 * f2 * ...`` (or ``-=``, or ``c[..] = c[..] + ...``) where exactly two
  factors are array references and the others are constants or float scalar parameters
  (together the ``alpha``), all arrays of one float dtype and ``c`` not among the factors;
* its domain is a box ``0 <= i_k < e_k`` with extents affine in the parameters;
* every subscript of every reference is one iterator of the statement (isl decides it on
  the access relations: ``a[i][j]``, ``a[i, j]`` and ``a[i + 0][j]`` are the same), and
  the iterators play the roles of the routine:

  - **gemv** (2 iterators): ``y[p] += A[p][q] * x[q]`` -> ``y = alpha A x + beta y``;
    ``A[q][p]`` -> ``A^T`` (the transposed, column-walking product);
  - **gemm** (3 iterators): ``C[p][q] += A[p][r] * B[r][q]`` -> ``C = alpha A B + beta C``,
    with ``A[r][p]`` / ``B[q][r]`` the transposed operand layouts.

  The loop order does not matter (the roles come from the subscripts).

A statement ``c[..] = 0`` writing exactly the elements of an update's ``c`` before every
instance of the update that touches them is that call's **init** (``beta = 0``); without
one ``beta = 1``.  The region matches when *every* statement is an update or an init, and
calls that share an array run one after the other (all instances of one before any of the
next), so the calls back to back compute what the region computes.  Anything else -- a
stencil, ``y[i] += A[i][j] * x[i]``, ``A[i][j] * A[j][i]``, an extra statement, a
triangular loop -- gives ``()``.

Timing (:func:`time_peer`) runs in a child process of the tuner (spawned: no CUDA context
is inherited): all calls of the region back to back are one run, like the region's
kernels; CUDA events, warm-up, median of repeats; PyTorch when importable (TF32 off), else
CuPy, else no timing with the reason.  Operands are the region's arrays at their declared
extents (a call on a sub-box works on views, as the region does), filled with values in
[0.5, 1.5).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace

import islpy as isl

from polygpu.errors import PolygpuError
from polygpu.frontend import ir
from polygpu.model.atomic import sum_update
from polygpu.model.isl_util import union_of
from polygpu.model.scop import Access, Scop, Statement
from polygpu.params import parse_params

BLAS_DTYPES = {"float32": "s", "float64": "d"}


# --------------------------------------------------------------------------
# Sizes
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Size:
    """An extent affine in the integer parameters: ``constant + sum(coeff * param)``.
    Plain data (no isl object), so calls pickle to the timing child."""

    constant: int
    terms: tuple[tuple[str, int], ...] = ()

    def __call__(self, params: Mapping[str, int]) -> int:
        missing = [p for p, _ in self.terms if p not in params]
        if missing:
            raise PolygpuError(f"missing parameter {missing[0]}; give it with "
                               f"-p {missing[0]}=VALUE")
        return self.constant + sum(c * int(params[p]) for p, c in self.terms)

    def __str__(self) -> str:
        text = ""
        for p, c in self.terms:
            mag = abs(c)
            term = p if mag == 1 else f"{mag}*{p}"
            text += (" - " if c < 0 else " + ") + term if text else ("-" if c < 0 else "") + term
        if not text:
            return str(self.constant)
        if self.constant:
            text += f" {'-' if self.constant < 0 else '+'} {abs(self.constant)}"
        return text


def size_of(pa: isl.PwAff) -> Size | None:
    """``pa`` as a :class:`Size` when it is one integral affine piece over the
    parameters, else None."""
    pieces = pa.get_pieces()
    if len(pieces) != 1:
        return None
    aff = pieces[0][1]
    if aff.dim(isl.dim_type.div) or not aff.get_denominator_val().is_one():
        return None
    if any(not aff.get_coefficient_val(isl.dim_type.in_, k).is_zero()
           for k in range(aff.dim(isl.dim_type.in_))):
        return None
    terms = []
    for k in range(aff.dim(isl.dim_type.param)):
        c = aff.get_coefficient_val(isl.dim_type.param, k).to_python()
        if c:
            terms.append((aff.get_dim_name(isl.dim_type.param, k), int(c)))
    return Size(int(aff.get_constant_val().to_python()), tuple(terms))


# --------------------------------------------------------------------------
# Calls
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class BlasCall:
    """One BLAS call of a region, in row-major terms.

    * gemv: ``c[:m] = alpha * op(a)[:m, :n] @ b[:n] + beta * c[:m]``;
    * gemm: ``c[:m, :n] = alpha * op(a)[:m, :k] @ op(b)[:k, :n] + beta * c[:m, :n]``;

    where ``op(X)`` is ``X`` or, with ``trans_*``, ``X^T`` (the array is stored the other
    way round).  ``alpha = alpha_const * prod(alpha_scalars)`` (float scalar parameters
    of the function).  ``shapes`` are the declared extents of ``a``, ``b``, ``c`` (the
    call may cover a sub-box), ``statements`` the region's statements it replaces.
    """

    routine: str  # 'gemv' | 'gemm'
    dtype: str  # 'float32' | 'float64'
    m: Size
    n: Size
    k: Size | None  # gemm's inner extent; None for gemv
    a: str
    b: str
    c: str
    trans_a: bool = False
    trans_b: bool = False
    alpha_const: float = 1.0
    alpha_scalars: tuple[str, ...] = ()
    beta: float = 1.0
    shapes: tuple[tuple[Size, ...], ...] = ()
    statements: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The cuBLAS routine: sgemv, dgemv, sgemm, dgemm."""
        return BLAS_DTYPES[self.dtype] + self.routine

    def sizes(self, params: Mapping[str, int]) -> tuple[int, ...]:
        """``(m, n)`` for gemv, ``(m, n, k)`` for gemm, at ``params``."""
        dims = (self.m, self.n) if self.k is None else (self.m, self.n, self.k)
        return tuple(d(params) for d in dims)

    def operand_shapes(self, params: Mapping[str, int]) -> dict[str, tuple[int, ...]]:
        """The arrays' extents at ``params``."""
        return {name: tuple(s(params) for s in shape)
                for name, shape in zip((self.a, self.b, self.c), self.shapes, strict=True)}

    def flops(self, params: Mapping[str, int]) -> int:
        """The BLAS count, ``2 m n (k)``: the same convention as metrics.flops."""
        total = 2
        for s in self.sizes(params):
            total *= s
        return total

    def describe(self, params: Mapping[str, int] | None = None) -> str:
        """E.g. ``sgemv y := A^T x + y (m=n, n=n)``."""
        sizes = (self.m, self.n) if self.k is None else (self.m, self.n, self.k)
        labels = ("m", "n", "k")
        values = self.sizes(params) if params is not None else tuple(map(str, sizes))
        alpha = self.alpha_scalars if self.alpha_const == 1 else (
            f"{self.alpha_const:g}", *self.alpha_scalars)
        scale = " ".join(alpha) + " " if alpha else ""
        op_a = self.a + ("^T" if self.trans_a else "")
        op_b = self.b + ("^T" if self.trans_b else "")
        rest = "" if self.beta == 0 else f" + {self.c}"
        dims = ", ".join(f"{lab}={v}" for lab, v in zip(labels, values, strict=False))
        return f"{self.name} {self.c} := {scale}{op_a} {op_b}{rest} ({dims})"


# --------------------------------------------------------------------------
# Matching
# --------------------------------------------------------------------------


def iterator_dims(access: Access, stmt: Statement) -> tuple[int, ...] | None:
    """For each dimension of the accessed array, the index of the statement iterator
    that is its subscript -- when every subscript is exactly one iterator (decided by isl
    on the relation, for all parameter values), else None."""
    rel = access.relation
    n_in = rel.dim(isl.dim_type.in_)
    result = []
    for out in range(rel.dim(isl.dim_type.out)):
        found = [k for k in range(n_in) if rel.is_subset(
            isl.Map.universe(rel.get_space()).equate(isl.dim_type.in_, k, isl.dim_type.out,
                                                     out))]
        if len(found) != 1:
            return None
        result.append(found[0])
    return tuple(result)


def box_extents(domain: isl.Set, context: isl.Set) -> tuple[Size, ...] | None:
    """The extents ``e_k`` when ``domain`` is the box ``0 <= i_k < e_k`` (for every
    parameter value of ``context``) with ``e_k`` affine in the parameters, else None."""
    extents = []
    for k in range(domain.dim(isl.dim_type.set)):
        low, high = size_of(domain.dim_min(k)), size_of(domain.dim_max(k))
        if low is None or high is None or low != Size(0):
            return None
        extents.append(Size(high.constant + 1, high.terms))
    params = [domain.get_dim_name(isl.dim_type.param, k)
              for k in range(domain.dim(isl.dim_type.param))]
    names = [f"i{k}" for k in range(len(extents))]
    conds = " and ".join(f"0 <= {it} < {e}" for it, e in zip(names, extents, strict=True))
    box = isl.Set(f"[{', '.join(params)}] -> {{ {domain.get_tuple_name()}"
                  f"[{', '.join(names)}] : {conds or 'true'} }}")
    box = box.align_params(domain.get_space()).intersect_params(context)
    return tuple(extents) if box.is_equal(domain) else None


def _read_access(stmt: Statement, ref: ir.ArrayRef) -> Access | None:
    for acc in stmt.reads:
        if acc.array == ref.array and acc.subscripts == ref.index:
            return acc
    return None


def _factors(e: ir.Expr, scop: Scop, out: dict) -> bool:
    """Split a product into array references, a constant and float scalar parameters
    (into ``out``); False when ``e`` is not such a product."""
    if isinstance(e, ir.BinOp) and e.op == "*":
        return _factors(e.lhs, scop, out) and _factors(e.rhs, scop, out)
    if isinstance(e, ir.UnaryOp):
        if e.op == "-":
            out["const"] = -out["const"]
        return _factors(e.arg, scop, out)
    if isinstance(e, ir.Const):
        out["const"] *= float(e.value)
        return True
    if isinstance(e, ir.ScalarRef):
        decl = next((s for s in scop.scalars if s.name == e.name), None)
        if decl is None or decl.kind != "param" or not decl.dtype.startswith("float"):
            return False  # a temporary or an integer: not a BLAS scale factor
        out["scalars"].append(e.name)
        return True
    if isinstance(e, ir.ArrayRef):
        out["refs"].append(e)
        return True
    return False


def match_update(scop: Scop, stmt: Statement) -> BlasCall | None:
    """The BLAS call (with ``beta = 1``) that the update statement ``stmt`` is, or None."""
    found = sum_update(stmt.body)
    if found is None:
        return None
    term, sign = found
    parts: dict = {"refs": [], "scalars": [], "const": sign}
    if not _factors(term, scop, parts) or len(parts["refs"]) != 2:
        return None
    target = stmt.body.target
    write = stmt.writes[0]
    refs = parts["refs"]
    if any(r.array == target.array for r in refs):
        return None
    dtype = scop.array(target.array).dtype
    if dtype not in BLAS_DTYPES or any(scop.array(r.array).dtype != dtype for r in refs):
        return None
    accesses = [_read_access(stmt, r) for r in refs]
    if any(a is None for a in accesses):
        return None
    # a call works on views of the arrays: every element it touches must exist
    if any(not acc.relation.range().is_subset(scop.array(acc.array).extent)
           for acc in (*accesses, write)):
        return None
    t_dims = iterator_dims(write, stmt)
    f_dims = [iterator_dims(a, stmt) for a in accesses]
    if t_dims is None or any(d is None for d in f_dims) or len(set(t_dims)) != len(t_dims):
        return None
    extents = box_extents(stmt.domain, scop.context)
    if extents is None:
        return None
    depth = len(stmt.iterators)
    factors = list(zip(refs, f_dims, strict=True))
    common = {"dtype": dtype, "c": target.array, "alpha_const": parts["const"],
              "alpha_scalars": tuple(parts["scalars"])}
    if depth == 2 and len(t_dims) == 1:
        (p,) = t_dims
        q = 1 - p
        mats = [(r, d) for r, d in factors if len(d) == 2 and set(d) == {p, q}]
        vecs = [(r, d) for r, d in factors if d == (q,)]
        if len(mats) != 1 or len(vecs) != 1:
            return None
        (mat, md), (vec, _) = mats[0], vecs[0]
        call = BlasCall(routine="gemv", m=extents[p], n=extents[q], k=None, a=mat.array,
                        b=vec.array, trans_a=md == (q, p), **common)
    elif depth == 3 and len(t_dims) == 2:
        p, q = t_dims
        (r,) = {0, 1, 2} - {p, q}
        lhs = [(x, d) for x, d in factors if len(d) == 2 and set(d) == {p, r}]
        rhs = [(x, d) for x, d in factors if len(d) == 2 and set(d) == {q, r}]
        if len(lhs) != 1 or len(rhs) != 1:
            return None
        (ma, da), (mb, db) = lhs[0], rhs[0]
        call = BlasCall(routine="gemm", m=extents[p], n=extents[q], k=extents[r],
                        a=ma.array, b=mb.array, trans_a=da == (r, p), trans_b=db == (q, r),
                        **common)
    else:
        return None
    shapes = tuple(_array_shape(scop, name) for name in (call.a, call.b, call.c))
    if any(s is None for s in shapes):
        return None
    return replace(call, shapes=shapes, statements=(stmt.name,))


def _array_shape(scop: Scop, name: str) -> tuple[Size, ...] | None:
    sizes = tuple(size_of(e) for e in scop.array(name).shape)
    return None if any(s is None for s in sizes) else sizes


def _is_zero_init(stmt: Statement) -> bool:
    body = stmt.body
    if body.op != "=" or not isinstance(body.target, ir.ArrayRef):
        return False
    v = body.value
    while isinstance(v, ir.UnaryOp):
        v = v.arg
    return isinstance(v, ir.Const) and float(v.value) == 0.0


def _umap(m: isl.Map) -> isl.UnionMap:
    return isl.UnionMap.from_map(m)


def _precedes(first: Sequence[Statement], second: Sequence[Statement],
              pairs: isl.UnionMap | None = None) -> bool:
    """Whether every instance of ``first`` runs before every instance of ``second`` (or,
    with ``pairs`` ``{ f -> s }``, before the ones it is paired with)."""
    s1 = union_of(s.schedule for s in first)
    s2 = union_of(s.schedule for s in second)
    before = s1.lex_lt_union_map(s2)  # { f -> s : t(f) < t(s) }
    if pairs is None:
        pairs = isl.UnionMap.from_domain_and_range(s1.domain(), s2.domain())
    return pairs.is_subset(before)


def match_blas(scop: Scop) -> tuple[BlasCall, ...]:
    """The cuBLAS calls that together compute the region, in program order, or ``()``."""
    updates: dict[str, BlasCall] = {}
    for stmt in scop.statements:
        call = match_update(scop, stmt)
        if call is not None:
            updates[stmt.name] = call
    if not updates:
        return ()
    order = [s.name for s in scop.statements]
    inits: dict[str, Statement] = {}  # update name -> its init statement
    for stmt in scop.statements:
        if stmt.name in updates:
            continue
        owner = _init_owner(scop, stmt, updates, inits)
        if owner is None:
            return ()  # a statement that is neither part of a call
        inits[owner] = stmt
    groups = []
    for name, call in updates.items():
        stmts = [scop.statement(name)]
        if name in inits:
            stmts.insert(0, inits[name])
            call = replace(call, beta=0.0, statements=(inits[name].name, name))
        groups.append((min(order.index(s.name) for s in stmts), stmts, call))
    groups.sort(key=lambda g: g[0])
    for i, (_, first, c1) in enumerate(groups):
        for _, second, c2 in groups[i + 1:]:
            if _conflict(c1, c2) and not _precedes(first, second):
                return ()
    return tuple(g[2] for g in groups)


def _init_owner(scop: Scop, stmt: Statement, updates: dict[str, BlasCall],
                taken: dict[str, Statement]) -> str | None:
    """The first update (in program order) that ``stmt`` initialises: it writes zero to
    exactly the update's output elements, each once, before every update instance that
    reads it."""
    if not _is_zero_init(stmt):
        return None
    (write,) = stmt.writes
    if not write.relation.is_injective():
        return None
    for name, call in updates.items():
        if name in taken or call.c != write.array:
            continue
        upd = scop.statement(name)
        target = upd.writes[0].relation
        if not write.relation.range().is_equal(target.range()):
            continue
        same_element = _umap(write.relation).apply_range(_umap(target).reverse())
        if _precedes([stmt], [upd], same_element):
            return name
    return None


def _conflict(c1: BlasCall, c2: BlasCall) -> bool:
    """Whether two calls touch a common array that one of them writes."""
    return c1.c in (c2.a, c2.b, c2.c) or c2.c in (c1.a, c1.b, c1.c)


# --------------------------------------------------------------------------
# Executing calls (any array library with numpy's slicing and .T)
# --------------------------------------------------------------------------


def _alpha(call: BlasCall, values: Mapping[str, object]) -> float:
    alpha = call.alpha_const
    for s in call.alpha_scalars:
        alpha *= float(values[s])
    return alpha


def operands(call: BlasCall, arrays: Mapping[str, object], params: Mapping[str, int]):
    """``(op(a), b-or-op(b), c)`` as views of the full arrays: what the call computes on."""
    sizes = call.sizes(params)
    a, b, c = arrays[call.a], arrays[call.b], arrays[call.c]
    if call.routine == "gemv":
        m, n = sizes
        mat = a[:n, :m].T if call.trans_a else a[:m, :n]
        return mat, b[:n], c[:m]
    m, n, k = sizes
    op_a = a[:k, :m].T if call.trans_a else a[:m, :k]
    op_b = b[:n, :k].T if call.trans_b else b[:k, :n]
    return op_a, op_b, c[:m, :n]


def apply_numpy(calls: Sequence[BlasCall], params: Mapping[str, int],
                values: Mapping[str, object]) -> None:
    """Run ``calls`` with numpy on ``values`` (name -> array or scalar), updating the
    output arrays in place: the semantics the matcher promises, checkable on the CPU
    against the region's own reference."""
    for call in calls:
        op_a, op_b, out = operands(call, values, params)
        result = _alpha(call, values) * (op_a @ op_b)
        out[...] = result if call.beta == 0 else result + call.beta * out


# --------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class PeerTiming:
    """The vendor library's time for a region's calls (one run = all calls).

    ``median_ms`` is None when nothing could be timed, and ``reason`` says why."""

    median_ms: float | None
    times_ms: tuple[float, ...]
    library: str  # e.g. 'torch 2.5.1 (CUDA 12.4)', 'cupy 13.3.0'; '' when none
    blas: str  # e.g. 'cuBLAS 12.4.5'; '' when unknown
    device: str
    calls: tuple[str, ...]  # describe() of each call
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.median_ms is not None

    def to_json(self) -> dict:
        return asdict(self)


def time_peer(calls: Sequence[BlasCall], params: Mapping[str, int],
              dtype: str | None = None, repeats: int = 50, warmup: int = 5,
              library: str | None = None) -> PeerTiming | None:
    """Time ``calls`` back to back on the GPU with cuBLAS (CUDA events, ``warmup`` runs,
    median of ``repeats``).  ``dtype`` overrides the calls' own; ``library`` forces
    'torch' or 'cupy'.  None when there is nothing to time (no calls); a PeerTiming
    without a time, with the reason, when no library or GPU can run them.  A plain
    function of picklable arguments: the tuner runs it in a spawned child."""
    if not calls:
        return None
    if dtype is not None:
        calls = [replace(c, dtype=dtype) for c in calls]
    descriptions = tuple(c.describe(params) for c in calls)
    reasons = []
    for name, runner in (("torch", _time_torch), ("cupy", _time_cupy)):
        if library not in (None, name):
            continue
        try:
            module = __import__(name)
        except ImportError as e:
            reasons.append(f"{name} is not importable ({e})")
            continue
        try:
            return runner(module, calls, params, repeats, warmup, descriptions)
        except _Unavailable as e:
            reasons.append(f"{name}: {e}")
    return PeerTiming(None, (), "", "", "", descriptions, "; ".join(reasons)
                      or f"unknown library {library!r}")


class _Unavailable(Exception):
    """The library is there but cannot time (no GPU, no CUDA build)."""


def _arrays_at(calls: Sequence[BlasCall], params: Mapping[str, int]) -> dict:
    shapes: dict[str, tuple[int, ...]] = {}
    for call in calls:
        shapes.update(call.operand_shapes(params))
    return shapes


def _median_of(run, record, repeats: int, warmup: int) -> tuple[float, ...]:
    """``record()`` returns (start, stop, elapsed): library-specific events."""
    for _ in range(warmup):
        run()
    times = []
    for _ in range(repeats):
        start, stop, elapsed = record()
        start.record()
        run()
        stop.record()
        stop.synchronize()
        times.append(float(elapsed(start, stop)))
    return tuple(times)


def _time_torch(torch, calls, params, repeats, warmup, descriptions) -> PeerTiming:
    if not torch.cuda.is_available():
        raise _Unavailable("no CUDA device (torch.cuda.is_available() is False)")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    types = {"float32": torch.float32, "float64": torch.float64}
    gen = torch.Generator(device="cuda").manual_seed(0)
    arrays = {name: torch.rand(shape, dtype=types[_dtype_of(calls, name)], device="cuda",
                               generator=gen) + 0.5
              for name, shape in _arrays_at(calls, params).items()}
    scalars = {s: 1.0 for c in calls for s in c.alpha_scalars}
    steps = []
    for call in calls:
        op_a, op_b, out = operands(call, arrays, params)
        alpha = _alpha(call, scalars)
        method = out.addmv_ if call.routine == "gemv" else out.addmm_
        steps.append((method, op_a, op_b, call.beta, alpha))

    def run():
        for method, op_a, op_b, beta, alpha in steps:
            method(op_a, op_b, beta=beta, alpha=alpha)

    def record():
        return (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True),
                lambda a, b: a.elapsed_time(b))

    times = _median_of(run, record, repeats, warmup)
    cuda = f" (CUDA {torch.version.cuda})" if torch.version.cuda else ""
    return PeerTiming(statistics.median(times), times, f"torch {torch.__version__}{cuda}",
                      _cublas_version(), torch.cuda.get_device_name(), descriptions)


def _time_cupy(cupy, calls, params, repeats, warmup, descriptions) -> PeerTiming:
    """cupy.cublas.gemv/gemm (CuPy >= 9) pass C- or F-contiguous operands to cuBLAS as
    they are; a strict sub-box of an array is copied first (counted in the time)."""
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            raise _Unavailable("no CUDA device")
    except cupy.cuda.runtime.CUDARuntimeError as e:
        raise _Unavailable(f"no CUDA device ({e})") from None
    rng = cupy.random.default_rng(0)
    arrays = {name: (rng.random(shape, dtype=_dtype_of(calls, name)) + 0.5)
              for name, shape in _arrays_at(calls, params).items()}
    scalars = {s: 1.0 for c in calls for s in c.alpha_scalars}
    blas = getattr(cupy, "cublas", None)
    steps = []
    for call in calls:
        op_a, op_b, out = operands(call, arrays, params)
        steps.append((call.routine, op_a, op_b, out, _alpha(call, scalars), call.beta))

    def run():
        for routine, op_a, op_b, out, alpha, beta in steps:
            if blas is not None and routine == "gemv" and hasattr(blas, "gemv"):
                blas.gemv("N", alpha, op_a, op_b, beta, out)
            elif blas is not None and routine == "gemm" and hasattr(blas, "gemm"):
                blas.gemm("N", "N", op_a, op_b, out=out, alpha=alpha, beta=beta)
            elif beta == 0 and alpha == 1:
                cupy.matmul(op_a, op_b, out=out)
            else:
                out[...] = alpha * cupy.matmul(op_a, op_b) + beta * out

    def record():
        return cupy.cuda.Event(), cupy.cuda.Event(), cupy.cuda.get_elapsed_time

    times = _median_of(run, record, repeats, warmup)
    device = cupy.cuda.runtime.getDeviceProperties(0)["name"]
    if isinstance(device, bytes):
        device = device.decode()
    return PeerTiming(statistics.median(times), times, f"cupy {cupy.__version__}",
                      _cublas_version(), device, descriptions)


def _dtype_of(calls: Sequence[BlasCall], array: str) -> str:
    return next(c.dtype for c in calls if array in (c.a, c.b, c.c))


def _cublas_version() -> str:
    """The version of the libcublas this process loaded (read from the library itself,
    ``cublasGetProperty``), or '' when it cannot be found."""
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({line.split()[-1] for line in f if "libcublas.so" in line})
        lib = ctypes.CDLL(paths[0])
        parts = []
        for prop in range(3):  # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
            value = ctypes.c_int()
            if lib.cublasGetProperty(prop, ctypes.byref(value)) != 0:
                return ""
            parts.append(str(value.value))
        return "cuBLAS " + ".".join(parts)
    except (OSError, IndexError, AttributeError):
        return ""


# --------------------------------------------------------------------------
# Command line: python -m polygpu.search.peers SPEC [FUNCTION] -p n=4096
# --------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    from polygpu.frontend import load
    from polygpu.model.build import build_scop

    parser = argparse.ArgumentParser(
        prog="python -m polygpu.search.peers",
        description="Match a region to cuBLAS calls and time them (JSON on stdout).")
    parser.add_argument("spec", help="FILE.c[:FUNCTION] or MODULE.py:FUNCTION")
    parser.add_argument("function", nargs="?")
    parser.add_argument("-p", "--param", dest="params", action="append", default=[],
                        metavar="NAME=VALUE")
    parser.add_argument("-D", dest="defines", action="append", default=[])
    parser.add_argument("-I", dest="include_dirs", action="append", default=[])
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--no-time", action="store_true", help="only match")
    args = parser.parse_args(argv)
    try:
        scop = build_scop(load(args.spec, args.function, args.defines, args.include_dirs))
        params = parse_params(args.params)  # the CLI's -p NAME=VALUE rules
        calls = match_blas(scop)
        out: dict = {"calls": [c.describe(params if params else None) for c in calls]}
        if calls and not args.no_time:
            timing = time_peer(calls, params, repeats=args.repeats, warmup=args.warmup)
            out["timing"] = timing.to_json() if timing else None
    except PolygpuError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
