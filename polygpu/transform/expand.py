"""Expansion of temporaries (privatization): one copy of a reused buffer per loop iteration.

PolyBench writes ``temp2 = 0; for (k) temp2 += ...; C[i][j] = ... temp2`` (symm) and
reuses ``sum[np]`` for every ``(r, q)`` (doitgen).  Each value lives within one
iteration of the outer loops, but the one memory location carries anti and output
dependences from every iteration to the next, so no schedule may run them in
parallel.  Giving every iteration its own copy -- ``pg_x_temp2[i][j]``,
``pg_x_sum[r][q][p]`` -- removes those dependences without changing a single value.

Which arrays (:func:`expand_temporaries`): every scalar temporary and local array (one
declared in the function: the caller never sees it, so no copy-back), and every written
argument array all of whose accesses lie inside one common loop nest.  Along which
loops: those common loops ``l`` such that

* every read of the array gets its value (exact isl dataflow,
  :func:`polygpu.model.dependences.compute_dependences`) from a write in the *same*
  iteration of ``l``, and every read has a source at all (no value flows in from
  before the region -- it would not be in the new copy);
* some element is written in two iterations of ``l`` (otherwise there is no reuse,
  hence no false dependence, to remove, and a copy would only cost memory).

The copy is a ``scratch`` array (allocated by the runtime, not visible to the caller)
of shape ``extents of those loops + original shape``: the loops' box over the
statements' domains, each bound one affine expression of the parameters; subscripts
``iterator - lower bound`` are prefixed to the original ones.  An argument array stays
visible to the caller, so copy-back statements run last and leave in it what the
original leaves: for each written element, the value of its last writer (its
iterations of the expanded loops one affine function of the element, else refused).

The proof (:func:`verify_expansion`): the dataflow of every read of the copy in the
new program equals that of the corresponding read in the original (the copy-back's
reads: the original's last writers), every such read has a source, and the copy-back
writes exactly the elements the original writes.  An expansion that fails it is
dropped with its reason, never applied.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import islpy as isl

from polygpu.errors import SourceLoc
from polygpu.frontend import ir
from polygpu.model.build import _Builder, map_from_pw_affs
from polygpu.model.dependences import compute_dependences
from polygpu.model.isl_budget import OutOfBudget, isl_operation_budget
from polygpu.model.isl_util import maps_of
from polygpu.model.scop import Access, Array, Loop, Scop, Statement

PREFIX = "pg_x_"  # frontend/names.py reserves pg_: no user name can clash
COPY_ITERATOR = "pg_e"  # iterators of the copy-back statements: pg_e0, pg_e1, ...
# isl operations one expansion (analysis and proof) may take: every expansion of the
# shipped kernels needs under a tenth of this
EXPANSION_OPERATIONS = 20_000_000


@dataclass(frozen=True)
class Expanded:
    """One expansion: ``array`` became ``name`` with one copy per iteration of
    ``loops`` (iterators, outermost first); ``copy_back`` the statements that restore
    the argument's final value (none for a scalar temporary)."""

    array: str
    name: str
    loops: tuple[str, ...]
    copy_back: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class Refusal:
    """A candidate left as it is, and why."""

    array: str
    reason: str


@dataclass(frozen=True)
class Expansion:
    scop: Scop
    expanded: tuple[Expanded, ...]
    refused: tuple[Refusal, ...]

    def to_json(self) -> list[dict]:
        """What ``compile --json`` and ``analyze --plan`` show: every temporary
        considered, expanded (its copy, loops and copy-back) or refused (why)."""
        return [{"array": e.array, "copy": e.name, "loops": list(e.loops),
                 "copy_back": list(e.copy_back), "reason": e.reason} for e in self.expanded
                ] + [{"array": r.array, "refused": r.reason} for r in self.refused]


class _Refused(Exception):
    pass


def expand_temporaries(scop: Scop) -> Expansion:
    """``scop`` with every candidate that can be expanded expanded (module doc), each
    expansion proven by :func:`verify_expansion` before it is kept."""
    expanded: list[Expanded] = []
    refused: list[Refusal] = []
    written = scop.written_arrays()
    for array in scop.arrays:
        if array.kind not in ("temporary", "local") and not (array.kind == "argument"
                                                             and array.name in written):
            continue
        try:
            # bounded: an expansion only enables parallelism, and one whose analysis
            # isl cannot finish within the budget is refused (the region stays as it
            # is), never applied unproven
            with isl_operation_budget(scop.context.get_ctx(), EXPANSION_OPERATIONS):
                new, record = _expand(scop, array)
                problem = verify_expansion(scop, new, record)
            if problem is not None:
                raise _Refused(f"the expanded program failed the proof ({problem})")
        except OutOfBudget:
            refused.append(Refusal(array.name, "proving it took isl more than "
                                   f"{EXPANSION_OPERATIONS:,} operations"))
            continue
        except _Refused as why:
            refused.append(Refusal(array.name, str(why)))
            continue
        scop = new
        expanded.append(record)
    return Expansion(scop, tuple(expanded), tuple(refused))


# --------------------------------------------------------------------------------------
# Choosing the loops
# --------------------------------------------------------------------------------------


def _expand(scop: Scop, array: Array) -> tuple[Scop, Expanded]:
    accesses = [a for a in scop.accesses if a.array == array.name]
    users = [scop.statement(n) for n in dict.fromkeys(a.statement for a in accesses)]
    common = _common_prefix([s.loops for s in users])
    if not common:
        raise _Refused("its accesses do not all lie inside one common loop")
    if not _without_source(scop, array.name).is_empty():
        raise _Refused("a read takes a value from before the region (no write in the "
                       "region precedes it)")
    flow = _flow(scop, array.name)
    writes = scop.access_map("write", array.name)
    same_element = writes.apply_range(writes.reverse())
    names = {s.name for s in users}
    # values of OTHER arrays that flow between the users across iterations of a loop
    # keep that loop sequential whatever this array does: expanding along it would only
    # multiply memory (a stencil's time loop: b[i] = f(a); a[i] = b[i])
    others = [d.relation for d in compute_dependences(scop).items
              if d.kind == "flow" and d.array != array.name
              and d.source in names and d.sink in names]
    depths, why = [], []
    for d, loop_id in enumerate(common):
        it = scop.loops[loop_id].iterator
        if not _same_at(flow, d):
            why.append(f"values flow from one iteration of loop {it} to another")
        elif not all(_same_at(isl.UnionMap.from_map(r), d) for r in others):
            why.append(f"loop {it} stays sequential: other arrays' values flow between "
                       "its iterations")
        elif _same_at(same_element, d):
            why.append(f"no element is written in two iterations of loop {it}")
        else:
            depths.append(d)
    if not depths:
        raise _Refused("; ".join(why))
    iterators = tuple(scop.loops[common[d]].iterator for d in depths)
    lows, extents = [], []
    for d, it in zip(depths, iterators, strict=True):
        lo, extent = _box(scop, users, d, it)
        lows.append(lo)
        extents.append(extent)
    name = PREFIX + array.name
    taken = {a.name for a in scop.arrays}
    k = 2
    while name in taken:
        name, k = f"{PREFIX}{array.name}_{k}", k + 1
    new_array = _make_array(scop, name, array, tuple(extents))
    prefix = tuple(ir.IntVar(it) if _is_zero(lo) else ir.IntBinOp("-", ir.IntVar(it), lo)
                   for it, lo in zip(iterators, lows, strict=True))
    statements = []
    for s in scop.statements:
        if s in users:
            s = _rewrite_statement(scop, s, array.name, name, prefix)
        statements.append(s)
    loops = list(scop.loops)
    copy_back: tuple[str, ...] = ()
    if array.kind == "argument":
        cb = _copy_back(scop, array, name, depths, lows, loops)
        statements.append(cb)
        copy_back = (cb.name,)
    arrays = tuple(a for a in scop.arrays if a.name != array.name or a.kind == "argument")
    new = replace(scop, arrays=arrays + (new_array,), statements=_padded(statements),
                  loops=tuple(loops))
    reason = (f"every read of {array.name} takes its value from the same iteration of "
              f"{', '.join(iterators)}, which all write it")
    return new, Expanded(array.name, name, iterators, copy_back, reason)


def _common_prefix(seqs: list[tuple[int, ...]]) -> tuple[int, ...]:
    out = []
    for items in zip(*seqs, strict=False):
        if any(x != items[0] for x in items):
            break
        out.append(items[0])
    return tuple(out)


def _flow(scop: Scop, array: str) -> isl.UnionMap:
    """Exact flow dependences ``{ writer -> reader }`` of one array."""
    only = replace(scop, arrays=tuple(a for a in scop.arrays if a.name == array))
    return compute_dependences(only).union(("flow",))


def _without_source(scop: Scop, array: str) -> isl.UnionSet:
    """The statement instances with a read of ``array`` that no write of the region
    precedes on the same element (see :func:`sourceless_reads`)."""
    found = isl.UnionSet.empty(scop.context.get_space())
    for _, instances in sourceless_reads(scop, array):
        found = found.union(isl.UnionSet.from_set(instances))
    return found


def sourceless_reads(scop: Scop, array: str) -> list[tuple[Access, isl.Set]]:
    """Per read reference of ``array``, its instances that no write of the region
    precedes on the element they read (empty sets left out).  A read has a last writer
    (a source in the flow) iff it has any earlier writer, so this is the reads outside
    the flow's range -- asked without the flow, whose range (the last writers' case
    split, dozens of pieces with divisions on strided nests) made the subtraction run
    for minutes.  Per reference, not per statement instance: ``a[i][k] / a[k][k]``
    may read one element the region wrote and one it did not."""
    writes = scop.access_map("write", array)
    schedule = scop.schedule
    later = schedule.lex_gt_union_map(schedule)  # instance -> instances before it
    found = []
    for a in scop.accesses:
        if a.array != array or a.kind != "read":
            continue
        read = isl.UnionMap.from_map(a.relation)
        earlier = read.apply_range(writes.reverse()).intersect(later)
        left = read.domain().subtract(earlier.domain())
        if not left.is_empty():
            found.append((a, isl.Set.from_union_set(left)))
    return found


def _flow_into(scop: Scop, array: str, read: Access) -> isl.UnionMap:
    """The flow into one read reference (same statement and ``ref``) of ``array``: the
    other reads do not change where its values come from, so they are left out."""
    statements = tuple(
        replace(s, accesses=tuple(a for a in s.accesses if a.kind == "write" or (
            a.statement, a.ref) == (read.statement, read.ref)))
        for s in scop.statements)
    return _flow(replace(scop, statements=statements), array)


def _same_at(umap: isl.UnionMap, d: int) -> bool:
    """Whether every pair of ``umap`` agrees on iterator ``d`` of both instances."""
    for m in maps_of(umap):
        if not m.is_subset(isl.Map.universe(m.get_space()).equate(
                isl.dim_type.in_, d, isl.dim_type.out, d)):
            return False
    return True


# --------------------------------------------------------------------------------------
# The copy: shape, subscripts, statements
# --------------------------------------------------------------------------------------


def _box(scop: Scop, users: list[Statement], d: int, it: str
         ) -> tuple[ir.IntExpr, ir.IntExpr]:
    """The lower bound and extent of iterator ``d`` over the statements' domains, as
    integer expressions over the parameters (one affine piece each, else refused)."""
    values = None
    for s in users:
        n = s.domain.dim(isl.dim_type.set)
        one = s.domain.project_out(isl.dim_type.set, d + 1, n - d - 1) \
            .project_out(isl.dim_type.set, 0, d).reset_tuple_id()
        values = one if values is None else values.union(one)
    lo, hi = _single(values.dim_min(0)), _single(values.dim_max(0))
    if lo is None or hi is None:
        raise _Refused(f"the bounds of loop {it} are not one affine expression of the "
                       "parameters each")
    extent = _int_expr(hi.sub(lo).add_constant_val(isl.Val(1)), ())
    lo_expr = _int_expr(lo, ())
    if extent is None or lo_expr is None:
        raise _Refused(f"the bounds of loop {it} involve integer division")
    # empty loops give a negative extent at some parameter values: allocate nothing
    b = _Builder(scop.parameters, ())
    if not scop.context.is_subset(b.int_expr(extent, scop.loc).nonneg_set().params()):
        extent = ir.IntMinMax("max", (extent, ir.IntConst(0)))
    return lo_expr, extent


def _single(pw: isl.PwAff) -> isl.Aff | None:
    pieces = pw.coalesce().get_pieces()
    return pieces[0][1] if len(pieces) == 1 else None


def _int_expr(aff: isl.Aff, dims: tuple[str, ...]) -> ir.IntExpr | None:
    """``aff`` (over the parameters and set dimensions named ``dims``) as an integer
    expression, or None if it needs a division."""
    if aff.dim(isl.dim_type.div) or not aff.get_denominator_val().is_one():
        return None
    terms: list[tuple[int, str]] = []
    for k in range(aff.dim(isl.dim_type.param)):
        terms.append((aff.get_coefficient_val(isl.dim_type.param, k).to_python(),
                      aff.get_dim_name(isl.dim_type.param, k)))
    for k in range(aff.dim(isl.dim_type.in_)):
        terms.append((aff.get_coefficient_val(isl.dim_type.in_, k).to_python(), dims[k]))
    expr: ir.IntExpr | None = None
    for c, name in terms:
        if c == 0:
            continue
        term = ir.IntVar(name) if abs(c) == 1 else ir.IntBinOp("*", ir.IntConst(abs(c)),
                                                              ir.IntVar(name))
        if expr is None:
            expr = term if c > 0 else ir.IntNeg(term)
        else:
            expr = ir.IntBinOp("+" if c > 0 else "-", expr, term)
    const = int(aff.get_constant_val().to_python())
    if expr is None:
        return ir.IntConst(const)
    if const:
        expr = ir.IntBinOp("+" if const > 0 else "-", expr, ir.IntConst(abs(const)))
    return expr


def _is_zero(e: ir.IntExpr) -> bool:
    return isinstance(e, ir.IntConst) and e.value == 0


def _make_array(scop: Scop, name: str, array: Array, extents: tuple[ir.IntExpr, ...]
                ) -> Array:
    return scratch_array(scop, name, array, extents + array.shape_exprs)


def scratch_array(scop: Scop, name: str, like: Array, shape_exprs: tuple[ir.IntExpr, ...]
                  ) -> Array:
    """A ``scratch`` array ``name`` (runtime-allocated) of ``like``'s type and the extents
    ``shape_exprs``."""
    array = like
    b = _Builder(scop.parameters, ())
    shape = tuple(b.int_expr(e, array.loc) for e in shape_exprs)
    dims = tuple(f"d{k}" for k in range(len(shape_exprs)))
    bd = _Builder(scop.parameters, dims)
    extent = bd.universe()
    for k, e in enumerate(shape_exprs):
        v = bd.var(dims[k], array.loc)
        extent = extent.intersect(v.ge_set(bd.const(0))).intersect(
            v.lt_set(bd.int_expr(e, array.loc)))
    return Array(name=name, dtype=array.dtype, shape=shape,
                 shape_text=tuple(str(e) for e in shape_exprs), shape_exprs=shape_exprs,
                 extent=extent.set_tuple_name(name), kind="scratch", loc=array.loc)


def _rewrite_statement(scop: Scop, s: Statement, old: str, new: str,
                       prefix: tuple[ir.IntExpr, ...]) -> Statement:
    def ref(r):
        if isinstance(r, ir.ScalarRef) and r.name == old:
            return ir.ArrayRef(new, prefix, r.loc)
        if isinstance(r, ir.ArrayRef) and r.array == old:
            return ir.ArrayRef(new, prefix + r.index, r.loc)
        return r

    body = s.body
    body = ir.Assign(ref(body.target), body.op, ir.map_refs(body.value, ref), body.loc)
    b = _Builder(scop.parameters, s.iterators)
    accesses = []
    for a in s.accesses:
        if a.array == old:
            subs = prefix + a.subscripts
            relation = map_from_pw_affs([b.int_expr(e, a.loc) for e in subs], s.domain, new)
            a = replace(a, array=new, relation=relation, subscripts=subs)
        accesses.append(a)
    return replace(s, body=body, accesses=tuple(accesses))


def _copy_back(scop: Scop, array: Array, new: str, depths: list[int],
               lows: list[ir.IntExpr], loops: list[Loop]) -> Statement:
    """``array[e] = new[last(e) - low, e]`` for every element the region writes, after
    everything else; ``last(e)``: the expanded loops' iterators of its last writer."""
    width = max(s.schedule.dim(isl.dim_type.out) for s in scop.statements)
    last = None
    for a in scop.accesses:
        if a.array != array.name or a.kind != "write":
            continue
        s = scop.statement(a.statement)
        its = [isl.PwAff.var_on_domain(isl.LocalSpace.from_space(s.domain.get_space()),
                                       isl.dim_type.set, d) for d in depths]
        when = s.schedule.flat_range_product(map_from_pw_affs(its, s.domain, None))
        m = a.relation.reverse().apply_range(when)  # element -> [time, iterators]
        last = m if last is None else last.union(m)
    last = last.lexmax().project_out(isl.dim_type.out, 0, width).coalesce()
    written = last.domain()
    pieces: list[isl.MultiAff] = []
    last.as_pw_multi_aff().foreach_piece(lambda _, ma: pieces.append(ma))
    if len(pieces) != 1:
        raise _Refused("the last writer of an element is not one affine function of it")
    rank = array.rank
    iterators = tuple(f"{COPY_ITERATOR}{k}" for k in range(rank))
    ma = pieces[0]
    lasts = [_int_expr(ma.get_aff(k), iterators) for k in range(len(depths))]
    if any(e is None for e in lasts):
        raise _Refused("the last writer of an element involves integer division")
    index = tuple(e if _is_zero(lo) else ir.IntBinOp("-", e, lo)
                  for e, lo in zip(lasts, lows, strict=True))
    name = _fresh_statement(scop)
    domain = written.set_tuple_name(name)
    for k, it in enumerate(iterators):
        domain = domain.set_dim_name(isl.dim_type.set, k, it)
    domain = domain.intersect_params(scop.context).coalesce()
    loc = SourceLoc(array.loc.file, array.loc.line)
    elements = tuple(ir.IntVar(it) for it in iterators)
    body = ir.Assign(ir.ArrayRef(array.name, elements, loc), "=",
                     ir.ArrayRef(new, index + elements, loc), loc)
    b = _Builder(scop.parameters, iterators)
    accesses = (
        Access(name, 0, new, "read",
               map_from_pw_affs([b.int_expr(e, loc) for e in index + elements], domain, new),
               index + elements, loc),
        Access(name, 1, array.name, "write",
               map_from_pw_affs([b.int_expr(e, loc) for e in elements], domain, array.name),
               elements, loc),
    )
    position = 1 + max(_first_position(s) for s in scop.statements)
    affs = [b.const(position)]
    for it in iterators:
        affs += [b.var(it, loc), b.const(0)]
    schedule = map_from_pw_affs(affs, domain, None)
    ids = []
    for k, it in enumerate(iterators):
        ids.append(len(loops))
        loops.append(Loop(len(loops), it, k, (name,), loc))
    return Statement(name, iterators, domain, schedule, body, accesses, tuple(ids), loc)


def _first_position(s: Statement) -> int:
    val = s.schedule.plain_get_val_if_fixed(isl.dim_type.out, 0)
    if val.is_nan():
        val = s.schedule.range().dim_max_val(0)
    return int(val.to_python()) if val.is_int() else 0  # NaN: a statement that never runs


def fresh_array_name(scop: Scop, prefix: str, base: str) -> str:
    """``prefix + base``, or with ``_2``, ``_3``, .. appended until no array of ``scop``
    has the name (a copy's name; frontend/names.py reserves ``pg_`` for them)."""
    taken = {a.name for a in scop.arrays}
    name, k = prefix + base, 2
    while name in taken:
        name, k = f"{prefix}{base}_{k}", k + 1
    return name


def _fresh_statement(scop: Scop) -> str:
    taken = {s.name for s in scop.statements}
    k = len(scop.statements)
    while f"S{k}" in taken:
        k += 1
    return f"S{k}"


def copy_statement(scop: Scop, name: str, elements: isl.Set, read: tuple[str, tuple],
                   write: tuple[str, tuple], loc: SourceLoc, position: int,
                   loops: list[Loop], iterator: str = "pg_c") -> Statement:
    """The statement ``name``: ``write[c[o] for o in write order] = read[c[o] for o in
    read order]`` for every ``c`` of ``elements`` (a set over the copy's iterators
    ``iterator`` 0, 1, ..), at textual ``position`` of a 2d+1 schedule; its loops are
    appended to ``loops``.  A snapshot copies in the same order; a relayout's copies
    (transform/layout.py) move one index."""
    r = elements.dim(isl.dim_type.set)
    iterators = tuple(f"{iterator}{k}" for k in range(r))
    domain = elements.coalesce().set_tuple_name(name)
    for k, it in enumerate(iterators):
        domain = domain.set_dim_name(isl.dim_type.set, k, it)
    domain = domain.intersect_params(scop.context).coalesce()
    index = tuple(ir.IntVar(it) for it in iterators)
    b = _Builder(scop.parameters, iterators)
    affs = [b.int_expr(e, loc) for e in index]
    refs = []
    for array, order in (read, write):
        refs.append((ir.ArrayRef(array, tuple(index[o] for o in order), loc),
                     map_from_pw_affs([affs[o] for o in order], domain, array)))
    (src, src_map), (dst, dst_map) = refs
    accesses = (Access(name, 0, read[0], "read", src_map, src.index, loc),
                Access(name, 1, write[0], "write", dst_map, dst.index, loc))
    sched = [b.const(position)]
    for it in iterators:
        sched += [b.var(it, loc), b.const(0)]
    ids = []
    for k, it in enumerate(iterators):
        ids.append(len(loops))
        loops.append(Loop(len(loops), it, k, (name,), loc))
    return Statement(name, iterators, domain, map_from_pw_affs(sched, domain, None),
                     ir.Assign(dst, "=", src, loc), accesses, tuple(ids), loc)


def moved_on(s: Statement, shift: int) -> Statement:
    """``s`` ``shift`` textual positions later (its schedule's first dimension)."""
    space = s.schedule.get_space()
    ma = isl.MultiAff.identity(isl.Space.map_from_set(space.range()))
    ma = ma.set_aff(0, ma.get_aff(0).add_constant_val(isl.Val(shift)))
    return replace(s, schedule=s.schedule.apply_range(isl.Map.from_multi_aff(ma)))


def _padded(statements: list[Statement]) -> tuple[Statement, ...]:
    """Every 2d+1 schedule with the same number of dimensions (trailing zeros)."""
    width = max(s.schedule.dim(isl.dim_type.out) for s in statements)
    out = []
    for s in statements:
        n = s.schedule.dim(isl.dim_type.out)
        if n < width:
            sched = s.schedule.add_dims(isl.dim_type.out, width - n)
            for k in range(n, width):
                sched = sched.fix_val(isl.dim_type.out, k, isl.Val(0))
            s = replace(s, schedule=sched)
        out.append(s)
    return tuple(out)


# --------------------------------------------------------------------------------------
# The proof
# --------------------------------------------------------------------------------------


def verify_expansion(original: Scop, expanded: Scop, record: Expanded) -> str | None:
    """None if ``expanded`` has the dataflow of ``original`` for ``record.array``: the
    flow into every read of the copy equals the original's flow into the same read
    instance (a copy-back's read: from the original's last writer of its element),
    every such read has a source, and the copy-back writes exactly the elements the
    original writes; else what differs.  Other arrays' accesses are untouched."""
    old, new = record.array, record.name
    # the original as a sink for the copy-back: each copy-back reads the original array
    statements = {s.name: s for s in original.statements}
    for s in expanded.statements:
        if s.name in record.copy_back:
            statements[s.name] = replace(s, accesses=_reading_original(s))
        elif s.name not in statements:
            return f"statement {s.name} is new and not a copy-back"
    ordered = [statements[s.name] for s in expanded.statements]
    before = replace(expanded, arrays=original.arrays, statements=_padded(ordered))
    for read in (a for a in expanded.accesses if a.array == new and a.kind == "read"):
        got = _flow_into(expanded, new, read)
        want = _flow_into(before, old, read)
        where = f"{read.statement} ({read.text})"
        if not got.is_equal(want):
            return f"{where} reads from {got}, the original from {want}"
        if not isl.UnionSet.from_set(read.relation.domain()).subtract(got.range()).is_empty():
            return f"{where} has instances without a source"
    if any(a.array == old and a.kind == "read" for a in expanded.accesses):
        return f"{old} is still read"
    if record.copy_back:
        w_old = original.access_map("write", old).range()
        w_new = expanded.access_map("write", old).range()
        if not w_old.is_equal(w_new):
            return f"the copy-back writes {w_new}, the original {w_old}"
    elif any(a.array == old for a in expanded.accesses):
        return f"{old} is still accessed"
    return None


def _reading_original(s: Statement) -> tuple[Access, ...]:
    """A copy-back's accesses with its read of the copy turned into a read of the
    original element it stands for (the one it writes)."""
    write = next(a for a in s.accesses if a.kind == "write")
    return tuple(replace(a, array=write.array, relation=write.relation,
                         subscripts=write.subscripts) if a.kind == "read" else a
                 for a in s.accesses)
