"""What a measured time means: floating-point operations, compulsory traffic, roofline.

The tuner prints, for each timed variant, GFLOP/s, achieved bandwidth and the fraction of
the roofline.  All three divide a count by the time, so the counts must be exact and
independent of the variant: they are taken from the polyhedral model of the *original*
region at the parameters of the run, with isl (barvinok) counting points.

* :func:`flops` -- per statement, the float arithmetic operations of one instance times
  its number of instances.  Convention: every ``+ - * /`` on a floating-point value counts
  1, a compound update (``x += e``, ``-=``, ``*=``, ``/=``) 1 more, a call to a math
  function 1 (``fma`` 2); so a multiply-add ``c += a * b`` counts 2 and mm is ``2 n^3``.
  Integer arithmetic (subscripts, integer arrays), comparisons, selections and negation
  count nothing; of the two branches of a value ``?:`` the costlier is counted.
* :func:`compulsory_bytes` -- the traffic no schedule can avoid: every element the region
  reads *before writing it* is loaded once (its value comes from outside), every element
  it writes is stored once.  Reads of values the region produced itself (``x[i] += ...``
  after ``x[i] = 0``) are not compulsory, so mv moves ``4 (n^2 + 2n)`` bytes, not
  ``4 (n^2 + 3n)``.  A local array (declared in the function: the caller never sees
  it) is read only after the region writes it and never needs to leave the chip: none
  of its traffic is compulsory.
* :class:`Roofline` -- the time the machine needs at best for those counts,
  ``max(bytes / bandwidth, flops / peak)``, and a time's fraction of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import islpy as isl

from polygpu.errors import PolygpuError
from polygpu.frontend import ir
from polygpu.model.isl_util import count_points, sets_of, union_of
from polygpu.model.scop import Scop

_FLOAT_OPS = ("+", "-", "*", "/")
_TYPE_PRESERVING_CALLS = frozenset({"abs", "min", "max"})  # int in, int out


# --------------------------------------------------------------------------
# Counting points at fixed parameters
# --------------------------------------------------------------------------


def parameter_set(scop: Scop, params: Mapping[str, int]) -> isl.Set:
    """The single point ``params`` of the region's parameter space (every parameter must
    be given; the point must satisfy the region's context, e.g. every extent >= 1)."""
    missing = [p for p in scop.parameters if p not in params]
    if missing:
        raise PolygpuError(f"missing parameter {', '.join(missing)} of {scop.function}; "
                           f"give it with -p {missing[0]}=VALUE")
    point = scop.context
    for k, name in enumerate(scop.parameters):
        point = point.fix_val(isl.dim_type.param, k, isl.Val(int(params[name])))
    if point.is_empty():
        raise PolygpuError(
            f"{scop.function}: parameters "
            f"{', '.join(f'{p}={params[p]}' for p in scop.parameters)} "
            "make an array extent smaller than 1")
    return point


def count(s: isl.Set | isl.UnionSet, point: isl.Set) -> int:
    """Number of integer points of ``s`` at the parameter point ``point`` (exact; with
    barvinok, not by scanning: heat-3d's counts at n = 200 took 31 s scanned)."""
    sets = [s] if isinstance(s, isl.Set) else sets_of(s)
    total = 0
    for piece in sets:
        fixed = piece.intersect_params(point.align_params(piece.get_space()))
        total += count_points(fixed)
    return total


# --------------------------------------------------------------------------
# Floating-point operations
# --------------------------------------------------------------------------


def _is_float(e: ir.Expr, scop: Scop) -> bool:
    """Whether value expression ``e`` has a floating-point type (C's usual conversions:
    an operation is on floats when either operand is)."""
    if isinstance(e, ir.Const):
        return e.dtype != "int"
    if isinstance(e, ir.ArrayRef):
        return scop.array(e.array).dtype.startswith("float")
    if isinstance(e, ir.ScalarRef):
        return _scalar_dtype(e.name, scop).startswith("float")
    if isinstance(e, ir.BinOp):
        return _is_float(e.lhs, scop) or _is_float(e.rhs, scop)
    if isinstance(e, ir.UnaryOp):
        return _is_float(e.arg, scop)
    if isinstance(e, ir.Call):
        if e.func in _TYPE_PRESERVING_CALLS:
            return any(_is_float(a, scop) for a in e.args)
        return True
    if isinstance(e, ir.Select):
        return _is_float(e.then, scop) or _is_float(e.else_, scop)
    return False  # IntValue, ValueCompare, ValueLogical


def _scalar_dtype(name: str, scop: Scop) -> str:
    for a in scop.arrays:  # scalar temporaries are 0-d arrays of the model
        if a.name == name:
            return a.dtype
    for s in scop.scalars:
        if s.name == name:
            return s.dtype
    raise KeyError(name)


def expression_flops(e: ir.Expr, scop: Scop) -> int:
    """Float operations of one evaluation of ``e`` (see the module's convention)."""
    if isinstance(e, ir.BinOp):
        own = 1 if e.op in _FLOAT_OPS and _is_float(e, scop) else 0
        return own + expression_flops(e.lhs, scop) + expression_flops(e.rhs, scop)
    if isinstance(e, ir.UnaryOp):
        return expression_flops(e.arg, scop)
    if isinstance(e, ir.Call):
        own = (2 if e.func in ("fma", "fmaf") else 1) if _is_float(e, scop) else 0
        return own + sum(expression_flops(a, scop) for a in e.args)
    if isinstance(e, ir.ValueCompare):
        return expression_flops(e.lhs, scop) + expression_flops(e.rhs, scop)
    if isinstance(e, ir.ValueLogical):
        return sum(expression_flops(a, scop) for a in e.args)
    if isinstance(e, ir.Select):
        return expression_flops(e.cond, scop) + max(
            expression_flops(e.then, scop), expression_flops(e.else_, scop))
    return 0  # references, constants, integer values


def statement_flops(body: ir.Assign, scop: Scop) -> int:
    """Float operations of one instance of a statement."""
    update = 1 if body.op != "=" and _is_float(body.target, scop) else 0
    return update + expression_flops(body.value, scop)


def flops(scop: Scop, params: Mapping[str, int]) -> int:
    """Floating-point operations of the whole region at ``params``: per statement, its
    operations per instance times its instances (counted exactly with isl)."""
    point = parameter_set(scop, params)
    total = 0
    for stmt in scop.statements:
        per_instance = statement_flops(stmt.body, scop)
        if per_instance:
            total += per_instance * count(stmt.domain, point)
    return total


# --------------------------------------------------------------------------
# Compulsory traffic
# --------------------------------------------------------------------------


def exposed_reads(reads: isl.UnionMap, writes: isl.UnionMap,
                  schedule: isl.UnionMap) -> isl.UnionMap:
    """The read pairs ``{ instance -> element }`` that no earlier write of the element
    precedes: the values the region takes from outside (isl's dataflow analysis; its
    reads with no source)."""
    try:
        info = isl.UnionAccessInfo.from_sink(reads).set_must_source(writes)
        return info.set_schedule_map(schedule).compute_flow().get_must_no_source()
    except isl.Error:  # compute_flow fails on some strided, disjunctive domains
        return exposed_reads_by_order(reads, writes, schedule)


def exposed_reads_by_order(reads: isl.UnionMap, writes: isl.UnionMap,
                           schedule: isl.UnionMap) -> isl.UnionMap:
    """:func:`exposed_reads` from first principles: a read pair is covered when a write
    of its element runs strictly earlier (an instance's own write comes after its reads,
    and equal schedules mean the same instance)."""
    pairs = reads.wrap()  # { [r -> e] }
    writer_time = reads.range_map().apply_range(writes.reverse()).apply_range(schedule)
    reader_time = reads.domain_map().apply_range(schedule)
    later = reader_time.lex_gt_union_map(writer_time)  # { p -> q : t_r(p) > t_w(q) }
    covered = later.intersect(pairs.identity()).domain()
    return pairs.subtract(covered).unwrap()


def array_footprints(scop: Scop, params: Mapping[str, int]) -> dict[str, tuple[int, int]]:
    """Per array, ``(elements loaded, elements stored)`` of the compulsory traffic."""
    point = parameter_set(scop, params)
    space = scop.context.get_space()

    def fixed(maps):
        return union_of([m.intersect_params(point) for m in maps], space)

    reads = fixed([a.relation for a in scop.accesses if a.kind == "read"])
    writes = fixed([a.relation for a in scop.accesses if a.kind == "write"])
    schedule = fixed([s.schedule for s in scop.statements])
    loaded = _by_array(exposed_reads(reads, writes, schedule).range())
    stored = _by_array(writes.range())
    result = {}
    for array in scop.arrays:
        loads = count(loaded[array.name], point) if array.name in loaded else 0
        stores = count(stored[array.name], point) if array.name in stored else 0
        if loads or stores:
            result[array.name] = (loads, stores)
    return result


def _by_array(uset: isl.UnionSet) -> dict[str, isl.Set]:
    out: dict[str, isl.Set] = {}
    for s in sets_of(uset.coalesce()):
        name = s.get_tuple_name()
        out[name] = out[name].union(s) if name in out else s
    return out


def compulsory_bytes(scop: Scop, params: Mapping[str, int]) -> int:
    """Minimum global-memory traffic of the region at ``params``, in bytes: the
    roofline's byte count (see the module docstring)."""
    return sum((loads + stores) * scop.array(name).element_size
               for name, (loads, stores) in array_footprints(scop, params).items()
               if scop.array(name).kind != "local")


# --------------------------------------------------------------------------
# Roofline
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """The variant-independent counts of one region at one set of parameters."""

    flops: int
    bytes: int

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, flop per byte."""
        return self.flops / self.bytes if self.bytes else float("inf")


def workload(scop: Scop, params: Mapping[str, int]) -> Workload:
    return Workload(flops(scop, params), compulsory_bytes(scop, params))


@dataclass(frozen=True)
class Performance:
    """One time read against the roofline."""

    time_ms: float
    gflops: float  # flops / time
    gbs: float  # compulsory bytes / time (the achieved *useful* bandwidth)
    roofline_ms: float  # the least time the roofline allows
    fraction: float  # roofline_ms / time_ms: 1.0 is at the roofline
    bound: str  # 'memory' | 'compute': which roof is lower for this workload


@dataclass(frozen=True)
class Roofline:
    """A machine as two roofs.  The defaults are the H100's: 3 TB/s of HBM bandwidth and
    51 TFLOP/s of FP32 (PCIe card without tensor cores; use a float64 peak for DGEMV/DGEMM
    workloads).  ``name`` labels reports."""

    peak_bandwidth_gbs: float = 3000.0
    peak_gflops: float = 51000.0
    name: str = "H100"

    def min_time_ms(self, flops: int, nbytes: int) -> float:
        """``max(bytes / bandwidth, flops / peak)`` in milliseconds."""
        return max(nbytes / (self.peak_bandwidth_gbs * 1e9),
                   flops / (self.peak_gflops * 1e9)) * 1e3

    def bound(self, flops: int, nbytes: int) -> str:
        memory = nbytes / self.peak_bandwidth_gbs
        return "memory" if memory >= flops / self.peak_gflops else "compute"

    def evaluate(self, time_ms: float, flops: int, nbytes: int) -> Performance:
        """GFLOP/s, achieved GB/s and the fraction of the roofline of a time."""
        if not time_ms > 0:
            raise ValueError(f"a time must be positive, not {time_ms}")
        seconds = time_ms * 1e-3
        best = self.min_time_ms(flops, nbytes)
        return Performance(
            time_ms=time_ms,
            gflops=flops / seconds / 1e9,
            gbs=nbytes / seconds / 1e9,
            roofline_ms=best,
            fraction=best / time_ms,
            bound=self.bound(flops, nbytes),
        )

    def of(self, time_ms: float, work: Workload) -> Performance:
        return self.evaluate(time_ms, work.flops, work.bytes)
