"""Build the polyhedral model (:class:`~polygpu.model.scop.Scop`) from the loop-tree IR.

This is the one place where affinity is decided: integer expressions become
isl piecewise-affine expressions, and anything isl cannot represent exactly
(a product of two variables, division by a variable) is reported with the
line it came from.  Both frontends share it, so C and Python inputs with the
same loops give the same model.

Domains are exact: a loop ``for (i = e; cond; i += s)`` contributes
``i >= e and cond and (i - e) mod s = 0`` (mirrored for negative steps); an
``if`` contributes its condition or, in the ``else`` branch, the complement.
The original schedule is the classic 2d+1 form ``[p0, i0, p1, i1, ..., pd]``
(textual positions interleaved with iterators, negated for descending loops),
padded with zeros to a common length.
"""

from __future__ import annotations

from dataclasses import dataclass

import islpy as isl

from polygpu.errors import PolygpuError, SourceLoc, UnsupportedError
from polygpu.frontend import ir
from polygpu.model.isl_util import unsourced_reads
from polygpu.model.scop import Access, Array, Loop, Scop, Statement

_INT_DTYPES = ("int32", "int64")
# isl's parser and printer treat these as keywords; such names never reach isl text.
_ISL_KEYWORDS = frozenset(
    {"and", "or", "not", "min", "max", "floor", "ceil", "mod", "exists", "true", "false",
     "implies", "infty", "NaN", "rat", "cst"}
)


class _Builder:
    """Translates integer expressions and conditions to isl over a fixed set space."""

    def __init__(self, params: tuple[str, ...], iterators: tuple[str, ...]):
        self.params = params
        self.iterators = iterators
        self.space = isl.Space.create_from_names(
            isl.DEFAULT_CONTEXT, set=list(iterators), params=list(params)
        )
        self.ls = isl.LocalSpace.from_space(self.space)

    def const(self, value: int) -> isl.PwAff:
        return isl.PwAff.from_aff(isl.Aff.zero_on_domain(self.ls).set_constant_val(value))

    def var(self, name: str, loc: SourceLoc) -> isl.PwAff:
        if name in self.iterators:
            aff = isl.Aff.var_on_domain(self.ls, isl.dim_type.set, self.iterators.index(name))
        elif name in self.params:
            aff = isl.Aff.var_on_domain(self.ls, isl.dim_type.param, self.params.index(name))
        else:
            raise UnsupportedError(
                f"'{name}' is not a loop iterator or integer parameter here", loc
            )
        return isl.PwAff.from_aff(aff)

    def universe(self) -> isl.Set:
        return isl.Set.universe(self.space)

    def int_expr(self, e: ir.IntExpr, loc: SourceLoc) -> isl.PwAff:
        if isinstance(e, ir.IntConst):
            return self.const(e.value)
        if isinstance(e, ir.IntVar):
            return self.var(e.name, loc)
        if isinstance(e, ir.IntNeg):
            return self.int_expr(e.arg, loc).neg()
        if isinstance(e, ir.IntMinMax):
            parts = [self.int_expr(a, loc) for a in e.args]
            result = parts[0]
            for p in parts[1:]:
                result = result.min(p) if e.op == "min" else result.max(p)
            return result
        if isinstance(e, ir.IntSelect):
            cond = self.cond(e.cond, loc)
            then, else_ = self.int_expr(e.then, loc), self.int_expr(e.else_, loc)
            return then.intersect_domain(cond).union_add(else_.subtract_domain(cond))
        if isinstance(e, ir.IntBinOp):
            lhs, rhs = self.int_expr(e.lhs, loc), self.int_expr(e.rhs, loc)
            if e.op == "+":
                return lhs.add(rhs)
            if e.op == "-":
                return lhs.sub(rhs)
            if e.op == "*":
                if not (lhs.is_cst() or rhs.is_cst()):
                    raise UnsupportedError(
                        f"non-affine expression {e}: a product of two variables "
                        "cannot be represented in the polyhedral model",
                        loc,
                    )
                return lhs.mul(rhs)
            divisor = _constant_value(rhs)
            if divisor is None:
                raise UnsupportedError(
                    f"non-affine expression {e}: division or modulo by a non-constant", loc
                )
            if divisor == 0:
                raise UnsupportedError(f"division by zero in {e}", loc)
            if e.op == "floordiv":
                return lhs.div(rhs).floor()
            if e.op == "mod":
                return lhs.mod_val(isl.Val(abs(divisor))) if divisor > 0 else lhs.sub(
                    lhs.div(rhs).floor().mul(rhs)
                )
            if e.op == "truncdiv":
                return lhs.tdiv_q(rhs)
            if e.op == "rem":
                return lhs.tdiv_r(rhs)
        raise UnsupportedError(f"unsupported integer expression {e}", loc)

    def cond(self, c: ir.Cond, loc: SourceLoc) -> isl.Set:
        if isinstance(c, ir.BoolConst):
            return self.universe() if c.value else isl.Set.empty(self.space)
        if isinstance(c, ir.Compare):
            lhs, rhs = self.int_expr(c.lhs, loc), self.int_expr(c.rhs, loc)
            method = {
                "<": lhs.lt_set, "<=": lhs.le_set, ">": lhs.gt_set,
                ">=": lhs.ge_set, "==": lhs.eq_set, "!=": lhs.ne_set,
            }[c.op]
            return method(rhs)
        if isinstance(c, ir.BoolOp):
            sets = [self.cond(a, loc) for a in c.args]
            result = sets[0]
            for s in sets[1:]:
                result = result.intersect(s) if c.op == "and" else result.union(s)
            return result
        if isinstance(c, ir.Not):
            return self.universe().subtract(self.cond(c.arg, loc))
        raise UnsupportedError(f"unsupported condition {c}", loc)


def _constant_value(pa: isl.PwAff) -> int | None:
    """The integer value of a constant PwAff, else None."""
    if not pa.is_cst():
        return None
    pieces = pa.get_pieces()
    if len(pieces) != 1:
        return None
    val = pieces[0][1].get_constant_val()
    return val.to_python() if val.is_int() else None


# --------------------------------------------------------------------------
# Walking the loop tree
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Enclosing:
    """What surrounds a statement: loops (with their IR) and guards, outermost first."""

    # each item: ('loop', ir.For, loop_id) or ('if', ir.Cond, take_then, loc)
    items: tuple[tuple, ...] = ()
    positions: tuple[int, ...] = ()  # textual position at each loop level (#loops + 1 at a leaf)

    @property
    def loops(self) -> tuple[ir.For, ...]:
        return tuple(it[1] for it in self.items if it[0] == "loop")


class _ScopBuilder:
    def __init__(self, program: ir.Program):
        self.program = program
        self.params = tuple(
            p.name for p in program.params if p.dtype in _INT_DTYPES
        )
        self.scalar_names = {p.name for p in program.params}
        self.temporaries = {t.name: t for t in program.temporaries}
        self.array_decls = {a.name: a for a in (*program.arrays, *program.local_arrays)}
        self.statements: list[Statement] = []
        self.loop_records: list[dict] = []

    # ---- declarations -------------------------------------------------

    def check_names(self) -> None:
        seen: dict[str, SourceLoc] = {}
        decls = [*self.program.params, *self.program.arrays, *self.program.temporaries,
                 *self.program.local_arrays]
        for d in decls:
            if d.name in seen:
                raise UnsupportedError(f"'{d.name}' is declared twice", d.loc)
            if d.name in _ISL_KEYWORDS:
                raise UnsupportedError(
                    f"the name '{d.name}' is reserved by isl; rename it", d.loc
                )
            seen[d.name] = d.loc

    def build_arrays(self) -> tuple[tuple[Array, ...], isl.Set]:
        """Arrays with their extents, and the context: every extent is at least 1."""
        b = _Builder(self.params, ())
        context = b.universe()
        arrays = []
        declared = [(d, "argument") for d in self.program.arrays] + \
            [(d, "local") for d in self.program.local_arrays]
        for decl, kind in declared:
            extents = tuple(b.int_expr(e, decl.loc) for e in decl.shape)
            for e in extents:
                context = context.intersect(e.ge_set(b.const(1)))
            arrays.append(self._array(decl.name, decl.dtype, extents, decl.shape, kind,
                                      decl.loc))
        for t in self.program.temporaries:
            arrays.append(self._array(t.name, t.dtype, (), (), "temporary", t.loc))
        return tuple(arrays), context.params().coalesce()

    def _array(self, name, dtype, extents, shape, kind, loc) -> Array:
        names = tuple(f"d{k}" for k in range(len(shape)))
        b = _Builder(self.params, names)
        extent = b.universe()
        for k, e in enumerate(shape):
            d, size = b.var(names[k], loc), b.int_expr(e, loc)
            extent = extent.intersect(d.ge_set(b.const(0))).intersect(d.lt_set(size))
        return Array(
            name=name,
            dtype=dtype,
            shape=extents,
            shape_text=tuple(str(s) for s in shape),
            shape_exprs=tuple(shape),
            extent=extent.set_tuple_name(name),
            kind=kind,
            loc=loc,
            live_out=name not in self.program.not_live_out,
        )

    # ---- loop tree ----------------------------------------------------

    def walk(self, nodes: tuple[ir.Node, ...], enc: _Enclosing, counter: list[int]) -> None:
        """Visit ``nodes``; ``counter`` numbers the statements and loops of one loop level,
        so the two branches of an ``if`` share their level's textual positions."""
        for node in nodes:
            if isinstance(node, ir.If):
                for branch, taken in ((node.then, True), (node.else_, False)):
                    guarded = _Enclosing(enc.items + (("if", node.cond, taken, node.loc),),
                                         enc.positions)
                    self.walk(branch, guarded, counter)
                continue
            here = _Enclosing(enc.items, enc.positions + (counter[0],))
            counter[0] += 1
            if isinstance(node, ir.Assign):
                self.statement(node, here)
            elif isinstance(node, ir.For):
                self.check_iterator(node, enc)
                loop_id = len(self.loop_records)
                self.loop_records.append(
                    {"iterator": node.iterator, "depth": len(enc.loops), "loc": node.loc,
                     "statements": [], "descending": node.step < 0}
                )
                inner = _Enclosing(enc.items + (("loop", node, loop_id),), here.positions)
                self.walk(node.body, inner, [0])
            else:  # pragma: no cover - frontends only produce the three node kinds
                raise PolygpuError(f"unknown loop-tree node {node!r}")

    def check_iterator(self, loop: ir.For, enc: _Enclosing) -> None:
        name = loop.iterator
        if name in self.scalar_names or name in self.array_decls or name in self.temporaries:
            raise UnsupportedError(
                f"loop iterator '{name}' shadows a parameter or array of the function", loop.loc
            )
        if name in (outer.iterator for outer in enc.loops):
            raise UnsupportedError(
                f"loop iterator '{name}' is already the iterator of an enclosing loop", loop.loc
            )
        if name in _ISL_KEYWORDS:
            raise UnsupportedError(f"the iterator name '{name}' is reserved by isl; rename it",
                                   loop.loc)
        if loop.step == 0:
            raise UnsupportedError("loop step is zero: the loop would never end", loop.loc)

    def statement(self, node: ir.Assign, enc: _Enclosing) -> None:
        name = f"S{len(self.statements)}"
        loops = enc.loops
        iterators = tuple(lp.iterator for lp in loops)
        b = _Builder(self.params, iterators)
        domain = b.universe()
        depth = 0
        for item in enc.items:
            if item[0] == "loop":
                loop = item[1]
                domain = domain.intersect(self.loop_set(b, loop, depth))
                self.loop_records[item[2]]["statements"].append(name)
                depth += 1
            else:
                # a guard only sees the iterators of the loops around it: it is built in
                # the full space, where inner iterators are unconstrained, which is the same
                cond = b.cond(item[1], item[3])
                domain = domain.intersect(cond if item[2] else b.universe().subtract(cond))
        domain = domain.set_tuple_name(name).coalesce()
        if not domain.is_bounded():
            raise UnsupportedError(
                "the loops around this statement do not bound their iterators "
                "(a loop condition must limit its iterator in the direction of its step)",
                node.loc,
            )
        schedule = self.schedule(b, name, loops, enc.positions, domain)
        accesses = self.accesses(b, name, node, domain)
        self.statements.append(
            Statement(
                name=name,
                iterators=iterators,
                domain=domain,
                schedule=schedule,
                body=node,
                accesses=accesses,
                loops=tuple(it[2] for it in enc.items if it[0] == "loop"),
                loc=node.loc,
            )
        )

    def loop_set(self, b: _Builder, loop: ir.For, depth: int) -> isl.Set:
        it = b.var(loop.iterator, loop.loc)
        if b.iterators.index(loop.iterator) != depth:  # pragma: no cover - checked earlier
            raise PolygpuError("iterator numbering mismatch")
        init = b.int_expr(loop.init, loop.loc)
        s = b.cond(loop.cond, loop.loc)
        s = s.intersect(it.ge_set(init) if loop.step > 0 else it.le_set(init))
        if abs(loop.step) > 1:
            s = s.intersect(it.sub(init).mod_val(isl.Val(abs(loop.step))).eq_set(b.const(0)))
        return s

    def schedule(self, b, name, loops, positions, domain) -> isl.Map:
        affs = []
        for k, pos in enumerate(positions):
            affs.append(b.const(pos))
            if k < len(loops):
                it = b.var(loops[k].iterator, loops[k].loc)
                affs.append(it if loops[k].step > 0 else it.neg())
        return map_from_pw_affs(affs, domain, None)

    # ---- accesses -------------------------------------------------------

    def accesses(self, b: _Builder, stmt: str, node: ir.Assign, domain: isl.Set):
        refs: list[tuple[str, ir.Expr]] = [("read", r) for r in ir.reads(node.value)]
        target = node.target
        if node.op != "=":
            refs.append(("read", target))
        refs.append(("write", target))
        result = []
        for ref_id, (kind, ref) in enumerate(refs):
            if isinstance(ref, ir.ScalarRef):
                if ref.name in self.temporaries:
                    result.append(self.access(b, stmt, ref_id, kind, ref.name, (), ref.loc,
                                              domain))
                elif kind == "write":
                    raise UnsupportedError(
                        f"assignment to '{ref.name}': only arrays and scalar temporaries "
                        "may be written", ref.loc
                    )
                elif ref.name not in self.scalar_names:
                    raise UnsupportedError(f"unknown variable '{ref.name}'", ref.loc)
                continue
            decl = self.array_decls.get(ref.array)
            if decl is None:
                raise UnsupportedError(f"unknown array '{ref.array}'", ref.loc)
            if len(ref.index) != len(decl.shape):
                raise UnsupportedError(
                    f"{ref}: '{ref.array}' has {len(decl.shape)} dimension(s) but "
                    f"{len(ref.index)} subscript(s) are given", ref.loc
                )
            result.append(self.access(b, stmt, ref_id, kind, ref.array, ref.index, ref.loc,
                                      domain))
        return tuple(result)

    def access(self, b, stmt, ref_id, kind, array, index, loc, domain) -> Access:
        subs = []
        for e in index:
            try:
                subs.append(b.int_expr(e, loc))
            except UnsupportedError as err:
                raise UnsupportedError(
                    f"subscript of '{array}': {err.message}", err.loc
                ) from None
        relation = map_from_pw_affs(subs, domain, array)
        return Access(
            statement=stmt,
            ref=ref_id,
            array=array,
            kind=kind,
            relation=relation,
            subscripts=tuple(index),
            loc=loc,
        )

    def build(self) -> Scop:
        self.check_names()
        arrays, context = self.build_arrays()
        self.walk(self.program.body, _Enclosing(), [0])
        if not self.statements:
            raise UnsupportedError("the affine region contains no statement", self.program.loc)
        stmts = self.pad_schedules(context)
        loops = tuple(
            Loop(id=k, iterator=r["iterator"], depth=r["depth"],
                 statements=tuple(r["statements"]), loc=r["loc"],
                 descending=r["descending"])
            for k, r in enumerate(self.loop_records)
        )
        used = {a.array for s in stmts for a in s.accesses}
        return Scop(
            function=self.program.name,
            file=self.program.file,
            language=self.program.language,
            parameters=self.params,
            scalars=self.program.params,
            signature=self.program.signature,
            context=context,
            arrays=tuple(a for a in arrays if a.kind == "argument" or a.name in used),
            statements=stmts,
            loops=loops,
            loc=self.program.loc,
        )

    def pad_schedules(self, context: isl.Set) -> tuple[Statement, ...]:
        """Give every schedule the same number of output dimensions (trailing zeros)
        and intersect domains with the context."""
        width = max(s.schedule.dim(isl.dim_type.out) for s in self.statements)
        out = []
        for s in self.statements:
            extra = width - s.schedule.dim(isl.dim_type.out)
            sched = s.schedule.add_dims(isl.dim_type.out, extra)
            n = s.schedule.dim(isl.dim_type.out)
            for k in range(extra):
                sched = sched.fix_val(isl.dim_type.out, n + k, isl.Val(0))
            domain = s.domain.intersect_params(context)
            out.append(
                Statement(
                    name=s.name, iterators=s.iterators, domain=domain,
                    schedule=sched.intersect_domain(domain), body=s.body,
                    accesses=tuple(
                        Access(a.statement, a.ref, a.array, a.kind,
                               a.relation.intersect_domain(domain), a.subscripts, a.loc)
                        for a in s.accesses
                    ),
                    loops=s.loops, loc=s.loc,
                )
            )
        return tuple(out)


def map_from_pw_affs(affs: list[isl.PwAff], domain: isl.Set, out_name: str | None) -> isl.Map:
    """``{ S[i..] -> out[affs] }`` restricted to ``domain`` (works for zero outputs too)."""
    if affs:
        pma = isl.PwMultiAff.from_pw_aff(affs[0])
        for a in affs[1:]:
            pma = pma.flat_range_product(isl.PwMultiAff.from_pw_aff(a))
        m = isl.Map.from_pw_multi_aff(pma)
    else:
        m = isl.Map.from_domain(isl.Set.universe(domain.get_space()))
    m = m.set_tuple_name(isl.dim_type.in_, domain.get_tuple_name())
    if out_name is not None:
        m = m.set_tuple_name(isl.dim_type.out, out_name)
    return m.intersect_domain(domain).coalesce()


def build_scop(program: ir.Program) -> Scop:
    """Turn a frontend's :class:`~polygpu.frontend.ir.Program` into a :class:`Scop`."""
    scop = _ScopBuilder(program).build()
    require_local_arrays_written(scop)
    return scop


def require_local_arrays_written(scop: Scop) -> None:
    """Bad input (UnsupportedError at the read) where the region reads an element of a
    local array before writing it: a local array holds no value on entry -- C leaves
    it undefined, and its copy on the device is fresh memory.  Exact (isl), per read
    reference: the instances whose element no earlier instance writes."""
    local = {a.name for a in scop.arrays if a.kind == "local"}
    if not local:
        return
    writes = isl.UnionMap.empty(scop.context.get_space())
    for a in scop.accesses:
        if a.kind == "write" and a.array in local:
            writes = writes.union(isl.UnionMap.from_map(a.relation))
    schedule = scop.schedule
    earlier = schedule.lex_gt_union_map(schedule)  # instance -> the instances before it
    for a in scop.accesses:
        if a.kind != "read" or a.array not in local:
            continue
        unsourced = unsourced_reads(isl.UnionMap.from_map(a.relation), writes,
                                    earlier).range()
        if not unsourced.is_empty():
            where = isl.Set.from_union_set(unsourced).intersect_params(scop.context)
            if where.is_empty():
                continue
            raise UnsupportedError(
                f"'{a.array}' is read before the region writes it ({where.sample_point()}"
                f" for one): a local array holds no value on entry -- write its elements "
                "first, or pass it as a parameter", a.loc)
