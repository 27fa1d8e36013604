"""From tiled kernels to CUDA C: isl builds the loop AST, cgen the syntax.

For each kernel the block and thread coordinates of the tiled schedule become
*parameters* of the AST build (named after ``blockIdx``/``threadIdx``), equated with
the schedule dimensions they stand for, so isl generates the loops one thread runs --
including the guards of partial tiles -- over exactly the schedule that was proven
legal.  The AST is walked into cgen nodes; a statement call ``S1(e0, e1)`` is replaced
by the statement's body with its iterators substituted.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace

import cgen
import islpy as isl

from polygpu import __version__
from polygpu.codegen import (
    accumulator,
    full_tiles,
    invariant_reads,
    lane_registers,
    mma,
    staging,
)
from polygpu.codegen.expressions import (
    FAST_MATH_PRELUDE,
    INDEX64,
    INDEX64_HELPERS,
    INT_HELPERS,
    BufferView,
    Printer,
    constant_name,
    index_text,
    temporary_name,
)
from polygpu.codegen.fold_pieces import FoldPieces, fold_pieces
from polygpu.codegen.index_width import INT32_MAX, index_bounds, violated
from polygpu.codegen.launch_grid import (
    AXIS_LIMITS,
    block_count,
    device_expression,
    flat_block,
    grid_expression,
    launch_block,
    may_exceed,
)
from polygpu.codegen.program import Argument, KernelProgram, Launch
from polygpu.codegen.thread_ast import (
    _involves,
    constant_trip,
    kernel_ast,
    node_from_schedule_map,
    register_loops,
    thread_context,
)
from polygpu.errors import PolygpuError
from polygpu.frontend import ir
from polygpu.memory.placement import (
    MAX_SHARED_BYTES,
    REGISTER_SUFFIX,
    STATIC_SHARED_BYTES,
    MemoryPlan,
)
from polygpu.memory.residence import Residence
from polygpu.model import atomic
from polygpu.model.isl_util import union_of_sets
from polygpu.model.parallelism import same_reference
from polygpu.model.scop import Scop, fix_parameters
from polygpu.schedule.legality import insert_constants
from polygpu.schedule.tiling import AXES, TiledKernel


class Emitter:
    """Walks an isl AST into cgen nodes.  A call of a statement becomes its body, with
    references to buffered and constant arrays printed as the memory stage says; calls
    of other names (the copy and tile placeholders of a staged kernel) go to ``user``."""

    def __init__(self, scop: Scop, unroll: int,
                 buffers: dict[str, tuple[BufferView, frozenset[str]]] | None = None,
                 constants: frozenset[str] = frozenset(), user=None,
                 atomic: dict[str, str] | None = None, index64: bool = False,
                 ref_buffers: dict[tuple[str, int], BufferView] | None = None,
                 unrolled: frozenset[str] = frozenset(), lanes: int = 0, mask: str = "",
                 fragments: mma.Fragments | None = None, lane: str = "pg_tid",
                 lane_loops: frozenset[str] = frozenset(),
                 point_loops: frozenset[str] = frozenset(),
                 thread_ids: frozenset[str] = frozenset(),
                 pieces: FoldPieces | None = None):
        self.scop = scop
        # statements split at packed triangles' folds: the AST calls their pieces, each
        # printed as its statement with the references' sides known (fold_pieces.py)
        self.pieces = pieces or FoldPieces()
        # the loops over a thread's own points (TiledKernel.point_dims) and the thread
        # ids' names: an innermost point loop bounded by thread ids and other point
        # loops alone (a triangle inside a tile: a few iterations, a different count
        # on each thread) is kept rolled -- nvcc's unrolling by 4 put a remainder's
        # prologue before each run of it (the batched Cholesky's update at n = 64,
        # H200: 4 % / 7 % faster in float / double rolled)
        self.point_loops = point_loops
        self.thread_ids = thread_ids
        # a whole register tile's time loops as tensor-core steps (codegen/mma.py)
        self.fragments = fragments
        self._thread_guards = 0  # depth of guards on thread ids around the node
        # a one-thread kernel run by ``lanes`` lanes of a warp (``mask``; lane _TID):
        # its sums split over the lanes, everything else done by lane 0
        # (codegen/accumulator.py)
        self.lanes = lanes
        self.mask = mask
        self.lane = lane  # the C name of this thread's lane among them
        # loops whose iterations the lanes share (TiledKernel.lane_dims: proven to carry
        # no dependence); inside one, every lane runs its own iterations' statements
        self.lane_loops = lane_loops
        self._in_lane_loop = 0
        # register copies spread over the lanes (codegen/lane_registers.py): each lane
        # runs the statements of its own elements; ``_slot`` binds the shared loop's
        # iterator to the slot of a lane's own element while it is printed
        self.spread = bool(lanes) and any(
            v.lanes > 1 for v in [*(v for v, _ in (buffers or {}).values()),
                                  *(ref_buffers or {}).values()])
        self._slot: tuple[str, str] = ()
        # loops nvcc unrolls completely (register tiles left as loops: thread_ast)
        self.unrolled = unrolled
        self.index64 = index64
        self.itype = INDEX64 if index64 else "int"
        self.unroll = unroll
        self.shapes = {a.name: a.shape_exprs for a in scop.program_arrays}
        self.temporaries = frozenset(a.name for a in scop.arrays if a.kind == "temporary")
        self.buffers = buffers or {}
        # buffers of single references ((statement, ref) -> view): an array read at
        # places far apart has one buffer per group of references (memory stage)
        self.ref_buffers = ref_buffers or {}
        self.constants = constants
        self.user = user
        # statements whose updates go to global memory atomically -> the add function
        self.atomic = atomic or {}
        self.statements = frozenset(s.name for s in scop.statements) | \
            frozenset(self.pieces.pieces)
        # statement -> its reads held in registers across the loop being printed
        # (codegen/invariant_reads.py)
        self._hoisted: dict[str, list[tuple[ir.ArrayRef, str]]] = {}

    def node(self, n: isl.AstNode) -> list:
        t = n.get_type()
        if t == isl.ast_node_type.block:
            children = n.block_get_children()
            out = []
            for k in range(children.n_ast_node()):
                out += self.node(children.get_at(k))
            return out
        if t == isl.ast_node_type.for_:
            it = n.for_get_iterator().get_id().get_name()
            if self.fragments is not None and not self._thread_guards:
                steps = mma.loop(self, n, it, self.fragments, self.itype)
                if steps is not None:
                    return steps
            if self.lanes and it in self.lane_loops and not self._in_lane_loop:
                return self._spread_loop(n, it) if self.spread else \
                    self._shared_loop(n, it)
            accumulating = self._accumulating(n, it)
            if accumulating is not None:
                return accumulating
            hoisted = self._invariants(n, it)
            body = self.node(n.for_get_body())
            self._hoisted = {}
            if it in self.unrolled:
                pragma = [cgen.Pragma("unroll")]
            elif self.unroll > 1 and not self._contains_for(n.for_get_body()):
                pragma = [cgen.Pragma(f"unroll {self.unroll}")]
            elif self._triangle_of_points(n, it):
                pragma = [cgen.Pragma("unroll 1")]
            else:
                pragma = []
            return self._loop(it, self._c(n.for_get_init()), self._c(n.for_get_cond()),
                              f"{it} += {self._c(n.for_get_inc())}", body, pragma, hoisted)
        if t == isl.ast_node_type.if_:
            cond = self._c(n.if_get_cond())
            # (a warp's instructions need every lane: none under a guard on thread ids)
            guarded = self.fragments is not None and any(
                re.search(rf"\b{name}\b", cond)
                for name in (self.fragments.tx, self.fragments.ty))
            self._thread_guards += guarded
            then = cgen.Block(self.node(n.if_get_then_node()))
            else_ = cgen.Block(self.node(n.if_get_else_node())) if n.if_has_else_node() \
                else None
            self._thread_guards -= guarded
            return [cgen.If(cond, then, else_)]
        if t == isl.ast_node_type.user:
            return [self.statement(n.user_get_expr())]
        if t == isl.ast_node_type.mark:
            return self.node(n.mark_get_node())
        raise TypeError(f"unexpected AST node type {t}")

    def _triangle_of_points(self, n: isl.AstNode, it: str) -> bool:
        """Whether ``n`` is an innermost loop over a thread's points bounded by thread
        ids and its other point loops alone: a triangle inside a tile, not a tile cut
        by the domain's edge (whose bounds name block ids, parameters or host loops,
        and whose whole tiles nvcc's unrolled body serves)."""
        if it not in self.point_loops or constant_trip(n) or \
                self._contains_for(n.for_get_body()):
            return False
        body = n.for_get_body()
        if body.get_type() == isl.ast_node_type.user and \
                body.user_get_expr().get_op_arg(0).get_id().get_name() in self.pieces.pieces:
            return True  # a triangle's piece at a packed fold (bounds name the fold's row)
        bounds = f"{n.for_get_init().to_C_str()} {n.for_get_cond().to_C_str()}"
        names = set(re.findall(r"\b[A-Za-z_]\w*\b", bounds)) - _C_FUNCTIONS - {it}
        inner = self.point_loops | self.thread_ids
        return bool(names) and names <= inner

    def _c(self, e: isl.AstExpr) -> str:
        return index_text(e.to_C_str(), self.index64)

    def _contains_for(self, n: isl.AstNode) -> bool:
        """Whether ``n`` holds a loop -- placeholders of a staged kernel count: the tile
        loops around them are not to be unrolled (copies, barriers, the whole work)."""
        t = n.get_type()
        if t == isl.ast_node_type.for_:  # a loop nvcc unrolls completely is none
            return n.for_get_iterator().get_id().get_name() not in self.unrolled or \
                self._contains_for(n.for_get_body())
        if t == isl.ast_node_type.user:
            call = n.user_get_expr()
            return call.get_op_arg(0).get_id().get_name() not in self.statements
        if t == isl.ast_node_type.mark:
            return self._contains_for(n.mark_get_node())
        if t == isl.ast_node_type.block:
            children = n.block_get_children()
            return any(self._contains_for(children.get_at(k))
                       for k in range(children.n_ast_node()))
        if t == isl.ast_node_type.if_:
            return self._contains_for(n.if_get_then_node()) or (
                n.if_has_else_node() and self._contains_for(n.if_get_else_node()))
        return False

    def _accumulating(self, n: isl.AstNode, it: str) -> list | None:
        """The loop ``n`` over ``it`` with its reduction's running value in a register
        (:mod:`polygpu.codegen.accumulator`), or None where it is not such a loop."""
        body = n.for_get_body()
        if body.get_type() != isl.ast_node_type.user or it in self.unrolled or self.spread:
            return None
        call = body.user_get_expr()
        name = call.get_op_arg(0).get_id().get_name()
        if name not in self.statements or self.pieces.statement(name) in self.atomic:
            return None
        stmt, printer, dtype = self._printer(call)
        target = printer.ref(stmt.body.target)
        if target.split("[")[0].endswith(REGISTER_SUFFIX) or \
                not accumulator.accumulated(stmt, target, it):
            return None  # (a register buffer's element is a register already)
        if self.lanes and not self._in_lane_loop:
            return self._split(n, it, stmt, printer, dtype, target)
        update = printer.assign(accumulator.with_accumulator(stmt.body))[:-1]
        cond = self._c(n.for_get_cond())
        loop = cgen.For("", cond, f"{it} += {self._c(n.for_get_inc())}",
                        cgen.Block([cgen.Statement(update)]))
        # unrolled, the loads of several iterations are in flight at once (the loop
        # stores nothing now, so nothing orders them)
        pragma = [cgen.Pragma(f"unroll {max(self.unroll, accumulator.UNROLL)}")]
        return [cgen.Block([
            cgen.Statement(f"{self.itype} {it} = {self._c(n.for_get_init())}"),
            cgen.If(cond, cgen.Block([
                cgen.Statement(f"{_c_type(dtype)} {accumulator.NAME} = {target}"),
                *pragma, loop,
                cgen.Statement(f"{target} = {accumulator.NAME}")]))])]

    def _shared_loop(self, n: isl.AstNode, it: str) -> list:
        """The loop ``n`` over ``it``, whose iterations carry no dependence, dealt to the
        lanes in turn (lane ``l`` runs iterations ``l``, ``l + lanes``, ...), each lane
        running its iterations' statements itself; a ``__syncwarp`` before (lane 0's
        writes, seen) and after (the lanes' writes, seen by whoever reads them next)."""
        inc = self._c(n.for_get_inc())
        self._in_lane_loop += 1
        hoisted = self._invariants(n, it)
        body = self.node(n.for_get_body())
        self._hoisted = {}
        self._in_lane_loop -= 1
        sync = cgen.Statement(f"__syncwarp({self.mask})")
        # unrolled, a lane's iterations' loads are in flight at once
        pragma = [cgen.Pragma(f"unroll {max(self.unroll, accumulator.UNROLL)}")]
        return [sync, *self._loop(
            it, f"{self._c(n.for_get_init())} + {self.lane} * ({inc})",
            self._c(n.for_get_cond()), f"{it} += {self.lanes} * ({inc})", body, pragma,
            hoisted), sync]

    def _spread_loop(self, n: isl.AstNode, it: str) -> list:
        """The loop ``n`` over ``it``, whose iterations carry no dependence, with each
        iteration on the lane that owns its element of the spread copies
        (:mod:`polygpu.codegen.lane_registers`): an unrolled loop over the slots,
        ``it`` = base + lanes * slot + lane, inside the loop's bounds; the other lanes'
        elements its statement reads, fetched once before it.  A ``__syncwarp`` before
        and after only where the loop also writes memory that lanes share."""
        if self._c(n.for_get_inc()) != "1":
            raise PolygpuError(f"variant: lanes with full_unroll: the loop over {it} the "
                               "lanes share does not step by 1")
        views = self._spread_targets(n.for_get_body())
        bases = {(v.base[v.lane_dim], -(-v.extents[v.lane_dim] // v.lanes))
                 for v in views if v is not None and v.lanes > 1}
        if len(bases) != 1:
            raise PolygpuError(f"variant: lanes with full_unroll: the loop over {it} the "
                               "lanes share must write one spread register copy (its "
                               "statements write "
                               + ("none" if not bases else "several") + ")")
        (base, slots), = bases
        memory = any(v is None or v.lanes == 1 for v in views)
        first = self._c(n.for_get_init())
        hoisted = self._invariants(n, it)
        self._in_lane_loop += 1
        self._slot = (it, lane_registers.SLOT)
        body = self.node(n.for_get_body())
        self._slot = ()
        self._in_lane_loop -= 1
        self._hoisted = {}
        cond = self._c(n.for_get_cond())
        slot = lane_registers.SLOT
        loop = [cgen.Pragma("unroll"), cgen.For(
            f"int {slot} = 0", f"{slot} < {slots}", f"{slot} += 1", cgen.Block([
                cgen.Statement(f"const {self.itype} {it} = ({base}) + {self.lanes} * "
                               f"{slot} + {self.lane}"),
                cgen.If(f"{it} >= {lane_registers.FIRST} && {cond}", cgen.Block(body))]))]
        sync = [cgen.Statement(f"__syncwarp({self.mask})")] if memory else []
        return [*sync, cgen.Block([
            cgen.Statement(f"const {self.itype} {lane_registers.FIRST} = {first}"),
            cgen.Block([
                cgen.Statement(f"const {self.itype} {it} = {lane_registers.FIRST}"),
                cgen.If(cond, cgen.Block([*hoisted, *loop]))])]), *sync]

    def _spread_targets(self, n: isl.AstNode) -> list[BufferView | None]:
        """The views the targets of the statements called in ``n`` print through
        (None: global memory or a scalar)."""
        t = n.get_type()
        if t == isl.ast_node_type.block:
            children = n.block_get_children()
            return [v for k in range(children.n_ast_node())
                    for v in self._spread_targets(children.get_at(k))]
        if t == isl.ast_node_type.for_:
            return self._spread_targets(n.for_get_body())
        if t == isl.ast_node_type.if_:
            return self._spread_targets(n.if_get_then_node()) + (
                self._spread_targets(n.if_get_else_node()) if n.if_has_else_node() else [])
        if t == isl.ast_node_type.mark:
            return self._spread_targets(n.mark_get_node())
        if t != isl.ast_node_type.user:
            return []
        call = n.user_get_expr()
        if call.get_op_arg(0).get_id().get_name() not in self.statements:
            return [None]
        stmt, printer, _ = self._printer(call)
        return [printer.view(stmt.body.target)]

    def _spread_statement(self, stmt, printer: Printer, body: ir.Assign) -> cgen.Generable:
        """Statement ``body`` on spread copies (:mod:`polygpu.codegen.lane_registers`):
        in the loop the lanes share, as it is on the lane of its element; elsewhere
        on the lane that owns its target, the other lanes' elements it reads fetched
        first by every lane."""
        target = body.target
        spread_target = lane_registers.spread(printer, target)
        reads = [r for r in ir.reads(body.value) if lane_registers.spread(printer, r)]
        if self._in_lane_loop:
            own = spread_target and lane_registers.subscripts(printer, target)[
                printer.view(target).lane_dim] == self._slot[0]
            if spread_target and not own or \
                    any(not (own and same_reference(r, target)) for r in reads):
                raise PolygpuError(
                    f"variant: lanes with full_unroll: statement {stmt.name} in the loop "
                    "the lanes share must write its own lane's element and read no other "
                    "lane's but elements no iteration writes")
            return cgen.Statement(printer.assign(body)[:-1])
        fetched = []
        for r in reads:
            if spread_target and same_reference(r, target) or \
                    any(same_reference(r, f) for f, _ in fetched):
                continue
            fetched.append((r, f"{lane_registers.FETCHED}{len(fetched)}"))
        decls = [cgen.Statement(f"const {_c_type(self.scop.array(r.array).dtype)} {name} = "
                                f"{lane_registers.shuffle(printer, r, self.mask)}")
                 for r, name in fetched]
        if fetched:
            body = invariant_reads.with_registers(body, fetched)
        who = lane_registers.owner(printer, target) if spread_target else "0"
        run = cgen.If(f"{self.lane} == {who}", cgen.Statement(printer.assign(body)[:-1]))
        return cgen.Block([*decls, run]) if decls else run

    def _invariants(self, n: isl.AstNode, it: str) -> list[cgen.Statement]:
        """The declarations of the registers that hold the reads of ``n``'s one
        statement that do not move with ``it`` (:mod:`polygpu.codegen.invariant_reads`),
        their references left in :attr:`_hoisted` for the statement's printing."""
        body = n.for_get_body()
        if body.get_type() != isl.ast_node_type.user:
            return []
        call = body.user_get_expr()
        name = call.get_op_arg(0).get_id().get_name()
        if name not in self.statements or self.pieces.statement(name) in self.atomic:
            return []
        stmt, printer, _ = self._printer(call)
        # (spread copies: another lane's element, fetched from its owner)
        refs = invariant_reads.hoistable(stmt, printer, it,
                                         lane_registers.spread if self.spread else None)
        names = [(r, f"{invariant_reads.PREFIX}{k}") for k, r in enumerate(refs)]
        self._hoisted = {name: names}
        return [cgen.Statement(f"const {_c_type(self.scop.array(r.array).dtype)} {reg} = "
                               + (lane_registers.shuffle(printer, r, self.mask)
                                  if self.spread else printer.ref(r)))
                for r, reg in names]

    def _loop(self, it: str, init: str, cond: str, step: str, body: list,
              pragma: list, hoisted: list) -> list:
        """``for (it = init; cond; step) body`` after ``pragma``; with registers
        ``hoisted`` loaded first, under the loop's own condition (an empty loop loads
        nothing)."""
        if not hoisted:
            return [*pragma, cgen.For(f"{self.itype} {it} = {init}", cond, step,
                                      cgen.Block(body))]
        return [cgen.Block([
            cgen.Statement(f"{self.itype} {it} = {init}"),
            cgen.If(cond, cgen.Block([*hoisted, *pragma,
                                      cgen.For("", cond, step, cgen.Block(body))]))])]

    def _split(self, n: isl.AstNode, it: str, stmt, printer: Printer, dtype: str,
               target: str) -> list | None:
        """The sum of the loop ``n`` split over :attr:`lanes` lanes, combined by a
        butterfly of shuffles and added to its target by lane 0; None where the update
        is not a sum (it then runs on lane 0 as written)."""
        found = atomic.sum_update(stmt.body)
        if found is None:
            return None
        term, sign = found
        ctype, acc, inc = _c_type(dtype), accumulator.NAME, self._c(n.for_get_inc())
        cond = self._c(n.for_get_cond())
        loop = cgen.For(f"{it} += {self.lane} * ({inc})", cond,
                        f"{it} += {self.lanes} * ({inc})",
                        cgen.Block([cgen.Statement(f"{acc} += {printer.value(term)}")]))
        combine = cgen.For(f"int pg_o = {self.lanes // 2}", "pg_o > 0", "pg_o >>= 1",
                           cgen.Statement(f"{acc} += __shfl_xor_sync({self.mask}, {acc}, "
                                          f"pg_o, {self.lanes})"))
        add = cgen.If(f"{self.lane} == 0", cgen.Statement(
            f"{target} {'+=' if sign > 0 else '-='} {acc}"))
        # unrolled, a lane's loads of several steps are in flight at once
        pragma = cgen.Pragma(f"unroll {max(self.unroll, accumulator.UNROLL)}")
        return [cgen.Block([
            cgen.Statement(f"{self.itype} {it} = {self._c(n.for_get_init())}"),
            cgen.If(cond, cgen.Block([
                cgen.Statement(f"__syncwarp({self.mask})"),  # lane 0's writes, seen
                cgen.Statement(f"{ctype} {acc} = 0"), pragma, loop,
                cgen.Pragma("unroll"), combine, add]))])]

    def _printer(self, call: isl.AstExpr):
        """``call``'s statement, the printer of its references, its target's type."""
        name = call.get_op_arg(0).get_id().get_name()
        stmt = self.scop.statement(self.pieces.statement(name))
        args = [self._c(call.get_op_arg(k + 1)) for k in range(len(stmt.iterators))]
        return (stmt, *self._printer_of(name, dict(zip(stmt.iterators, args, strict=True))))

    def printer_for(self, name: str, args: dict[str, str]) -> Printer:
        """The printer of statement ``name``'s references with its iterators given as
        C texts (``args``: iterator -> text)."""
        return self._printer_of(name, {it: index_text(a, self.index64)
                                       for it, a in args.items()})[0]

    def _printer_of(self, called: str, args: dict[str, str]):
        """The printer of the references of ``called`` (a statement, or a piece of one:
        its references on a known side of a fold printed as that side's)."""
        name = self.pieces.statement(called)
        stmt = self.scop.statement(name)
        subst = {it: f"({a})" if not a.isidentifier() else a for it, a in args.items()}
        target = stmt.body.target
        dtype = (self.scop.array(target.array).dtype if isinstance(target, ir.ArrayRef)
                 else self.scop.array(target.name).dtype
                 if target.name in self.temporaries else "float64")
        views = {array: view for array, (view, users) in self.buffers.items()
                 if name in users}
        by_reference = {(a.array, a.subscripts): self.ref_buffers[(name, a.ref)]
                        for a in self.scop.accesses
                        if a.statement == name and (name, a.ref) in self.ref_buffers}
        sides = self.pieces.sides(called)
        for a in self.scop.accesses if sides else ():
            side = sides.get(a.ref) if a.statement == name else None
            view = by_reference.get((a.array, a.subscripts), views.get(a.array))
            if side is not None and view is not None and view.packed:
                by_reference[(a.array, a.subscripts)] = replace(view, packed_side=side)
        if self._slot:  # (a lane's own element in the loop the lanes share)
            views = {a: replace(v, slot=self._slot) if v.lanes > 1 else v
                     for a, v in views.items()}
            by_reference = {k: replace(v, slot=self._slot) if v.lanes > 1 else v
                            for k, v in by_reference.items()}
        printer = Printer(self.shapes, self.temporaries, subst,
                          dtype if dtype.startswith("float") else "float64",
                          views, self.constants, self.index64, by_reference)
        return printer, dtype

    def statement(self, call: isl.AstExpr):
        name = call.get_op_arg(0).get_id().get_name()
        if name not in self.statements:
            args = [self._c(call.get_op_arg(k + 1)) for k in range(call.get_op_n_arg() - 1)]
            return cgen.Block(self.user(name, args))
        stmt, printer, dtype = self._printer(call)
        # (the printer's buffers: the views of this statement's arrays)
        if stmt.name in self.atomic and stmt.body.target.array not in printer.buffers:
            text = printer.atomic_add(stmt.body, atomic.operand(stmt.body), _c_type(dtype),
                                      self.atomic[stmt.name])
            return cgen.Statement(text[:-1])
        body = stmt.body
        if name in self._hoisted:
            body = invariant_reads.with_registers(body, self._hoisted[name])
        if self.spread:
            return self._spread_statement(stmt, printer, body)
        if self.lanes and not self._in_lane_loop:
            return cgen.If(f"{self.lane} == 0", cgen.Statement(printer.assign(body)[:-1]))
        return cgen.Statement(printer.assign(body)[:-1])


def _c_type(dtype: str) -> str:
    return ir.DTYPES[dtype][0]


def arguments(scop: Scop) -> tuple[Argument, ...]:
    printer = Printer({}, frozenset(), {})
    result = []
    scalars = {s.name: s for s in scop.scalars}
    arrays = {a.name: a for a in scop.program_arrays}
    for name in scop.signature:
        if name in scalars:
            result.append(Argument(name, "scalar", scalars[name].dtype, ()))
        else:
            a = arrays[name]
            result.append(Argument(name, "array", a.dtype,
                                   tuple(printer.int_expr(e) for e in a.shape_exprs)))
    # local arrays and scratch arrays (transform/expand.py), allocated by the runtime,
    # after the function's own arguments
    result += [Argument(a.name, "scratch", a.dtype,
                        tuple(printer.int_expr(e) for e in a.shape_exprs))
               for a in scop.arrays if a.kind in ("local", "scratch")]
    return tuple(result)


GIVEN = "pg_given_"  # the argument's name where its value is a compile-time constant


def _parameter_list(scop: Scop, args: tuple[Argument, ...], host: bool = True) -> list:
    """The C parameters of a kernel or device function taking ``args``; a parameter the
    program is specialized for is received as ``pg_given_NAME`` (:func:`_fixed_constants`
    names its value)."""
    written = scop.written_arrays()
    fixed = scop.fixed_parameters
    params = []
    for arg in args:
        ctype = _c_type(arg.dtype)
        if arg.kind == "scalar":
            name = GIVEN + arg.name if arg.name in fixed else arg.name
            params.append(cgen.Value(f"const {ctype}", name))
        elif arg.name in written:
            params.append(cgen.Value(f"{ctype} *__restrict__", arg.name))
        else:
            params.append(cgen.Value(f"const {ctype} *__restrict__", arg.name))
    # a host step's kernels also take the host loops' iterators (schedule/host.py)
    if host:
        params += [cgen.Value("const int", name) for name in scop.host]
    return params


def _fixed_constants(scop: Scop, args: tuple[Argument, ...]) -> list:
    """The parameters the program is specialized for as compile-time constants, the
    first lines of each function that receives them: indices, trip counts and
    divisions by them fold (a 2 x 2 product's ``(e * n + i) * n + k`` is ``4 * e + 2 * i
    + k``).  Safe because a specialized program refuses other values at launch
    (:func:`polygpu.runtime.device.launch_plan`)."""
    fixed = scop.fixed_parameters
    # (maybe unused: a kernel that never reads one drew a warning from nvcc per kernel)
    return [cgen.Line(f"[[maybe_unused]] constexpr {_c_type(a.dtype)} {a.name} = "
                      f"{fixed[a.name]};")
            for a in args if a.kind == "scalar" and a.name in fixed]


def launch_steps(scop: Scop, statements: tuple[str, ...], name: str,
                 grid_dims: int = 0) -> isl.Set:
    """The host steps at which a kernel with ``statements`` has work, as the set
    ``name[h..]`` over the region's parameters: the step region's parameter values
    where a domain is non-empty, with the host iterators turned into set dimensions
    (all but the first ``grid_dims``, which stay parameters: a batch's element)."""
    steps = None
    for stmt in statements:
        params = scop.statement(stmt).domain.params()
        steps = params if steps is None else steps.union(params)
    for h in scop.host[grid_dims:]:
        k = steps.find_dim_by_name(isl.dim_type.param, h)
        steps = steps.move_dims(isl.dim_type.set, steps.dim(isl.dim_type.set),
                                isl.dim_type.param, k, 1)
    return steps.coalesce().set_tuple_name(name)


def generate(scop: Scop, kernels: tuple[TiledKernel, ...], comment: str = "",
             plan: MemoryPlan | None = None,
             sizes: Mapping[str, int] | None = None,
             device_steps: bool = False, fast_math: bool = False,
             grid_dims: int = 0, residences: Sequence[Residence] = (),
             elements: int = 1,
             launch_kernels: Sequence[Sequence[int]] | None = None) -> KernelProgram:
    """CUDA text and launch plan for the tiled kernels of one region, with the buffers
    the memory stage planned (none without a plan).

    ``device_steps`` (a host step's kernels only, :func:`device_steps_possible`): instead
    of one launch per kernel and host step, one launch of ONE thread block that runs the
    host loops itself, each step's kernels one after the other -- their blocks as loops
    -- with ``__syncthreads()`` after each.  In a grid of one block that barrier orders
    everything a kernel boundary does, so the host transformation's proof carries over
    (the pipeline proves it again with the steps as ``barrier`` dimensions); it trades
    the whole GPU for launch overhead, which pays for small steps (a triangular solve's
    rows, a recurrence): thousands of launches become one.  With ``grid_dims`` (a
    ``batch`` host schedule, :mod:`polygpu.schedule.host`) the first host iterator is
    not a loop but the block: one block per element of the batch, each running its
    element's steps.  ``launch_kernels`` (device steps only; default one launch of all):
    the kernel indices each launch runs, in order -- a program cut into several
    device-steps launches (``Variant.cuts``, a fusion cover), each with its own block
    and thread count.  ``residences`` (device steps only, one per launch,
    :mod:`polygpu.memory.residence`): the block's shared buffers for life, copied in
    before the first step and out after the last; every reference to their arrays goes
    to them.  ``elements`` (a batch's device steps): elements per block, each run by its
    own group of threads -- the kernels' threads rounded up to a power of two -- whose
    barriers are ``__syncwarp`` over the group's lanes, or a named barrier of the
    group's own where it has several warps (:func:`group_threads`,
    :func:`group_barrier`).

    ``sizes``: parameter values an unspecialized program is meant for (``compile -p``,
    ``optimize(params=...)``): where 32-bit index arithmetic would overflow at them, the
    program is generated with 64-bit indices (for every size) instead of refusing them
    at launch.

    ``fast_math`` (:attr:`~polygpu.schedule.variant.Variant.fast_math`): the kernels'
    float ``expf logf sinf cosf powf`` are CUDA's intrinsics (``FAST_MATH_PRELUDE``)."""
    parts = [
        f"// Generated by polygpu {__version__} from {scop.file}:{scop.loc.line} "
        f"({scop.function}).",
    ]
    parts += [f"// {line}" for line in comment.splitlines()]
    parts.append(INT_HELPERS)
    # index width (codegen/index_width.py): decided now for a specialized program,
    # checked at launch for any other
    fixed = scop.fixed_parameters
    values = fixed if len(fixed) == len(scop.parameters) else None
    bounds = index_bounds(scop, kernels)
    at = values if values is not None else (
        {p: int(sizes[p]) for p in scop.parameters} if sizes and all(
            p in sizes for p in scop.parameters) else None)
    index64 = at is not None and violated(bounds, at) is not None
    fold_context = scop.context if at is None else fix_parameters(scop.context, at)
    itype = INDEX64 if index64 else "int"
    if index64:
        parts.append(INDEX64_HELPERS)
    if fast_math:
        parts.append(FAST_MATH_PRELUDE)
    if any(k.mma for k in kernels):
        parts.append(mma.PRELUDE)
    for a in scop.arrays:
        if a.kind == "temporary":
            parts.append(f"__device__ {_c_type(a.dtype)} {temporary_name(a.name)};")
    constants = frozenset(plan.constants) if plan else frozenset()
    shapes = {a.name: a.shape_exprs for a in scop.program_arrays}
    for name in sorted(constants):
        a = scop.array(name)
        size = math.prod(e.value for e in a.shape_exprs)
        parts.append(f"__constant__ {_c_type(a.dtype)} {constant_name(name)}[{size}];")
    args = arguments(scop)
    steps = []
    segments = [tuple(kernels[k] for k in ks)
                for ks in (launch_kernels or [range(len(kernels))])]
    launch_of = {k.index: n for n, seg in enumerate(segments) for k in seg}
    if device_steps:
        block_threads, barriers = [], []  # per launch
        for seg in segments:
            device_steps_possible(scop, seg, plan, require=True)
            if elements == 1:
                block_threads.append(max(k.n_threads for k in seg))
                barriers.append("__syncthreads()")
                continue
            group = group_threads(seg, plan, grid_dims, require=True)
            block_threads.append(group * elements)
            barriers.append(group_barrier(group, elements))
        if any(b.startswith(GROUP_SYNC) for b in barriers):
            parts.append(GROUP_SYNC_HELPER)
    elif residences or elements > 1 or len(segments) > 1:
        raise ValueError("resident buffers, groups and launches need device steps")
    resident = [list(r.buffers) for r in residences] or [[] for _ in segments]
    if len(resident) != len(segments):
        raise ValueError(f"{len(residences)} residences for {len(segments)} launches")
    resident_views = [{b.array: staging.view(b, index64) for b in r} for r in resident]
    everyone = frozenset(s.name for s in scop.statements)
    launches = []
    bodies = []  # device_steps: each kernel's body, its blocks as loops
    for kernel in kernels:
        own = launch_of[kernel.index]  # its launch (device steps)
        name = f"{scop.function}_kernel{kernel.index}"
        buffers = plan.buffers_of(kernel.index) if plan else []
        shared = [b for b in buffers if b.space == "shared"]
        # resident arrays (in no kernel's shared buffers: residence.py) are read and
        # written in their resident buffers, the kernel's register copies included
        def views_of(k: TiledKernel, buffers=buffers, own=own):
            """How references print into the buffers, in ``k``'s code: a specialized
            kernel's bases simplified by its known grid and threads (and its ``blocks``:
            a split kernel's whole tiles may be the first block alone)."""
            known = thread_context(scop, k, threads=True) if scop.fixed_parameters \
                else None
            views = {a: (v, everyone) for a, v in resident_views[own].items()}
            views |= {b.array: (staging.view(b, index64, known), b.statements)
                      for b in buffers if not b.refs}
            return views, {ref: staging.view(b, index64, known)
                           for b in buffers for ref in b.refs}

        views, ref_views = views_of(kernel)
        dynamic = plan is not None and plan.shared_bytes(kernel.index) > STATIC_SHARED_BYTES
        printer = Printer(shapes, frozenset(), {}, constants=constants, index64=index64,
                          buffers=resident_views[own])
        grid = [grid_expression(e, t) for e, t in zip(kernel.extent, kernel.tile,
                                                      strict=True)]
        # block ids: from blockIdx, or decomposed from a linear one (see _folded)
        step_values = None if values is None or any(
            _involves(e, scop.host) for e in kernel.extent) else values
        # (32-bit index arithmetic bounds SLACK * tile * blocks along x by 2^31 - 1,
        # at launch for a program that is not specialized: x never needs folding then).
        # Folding costs registers (mm's 64x64 register tile: 79 -> 112, 1.6x the time),
        # so it is decided at known sizes only: a specialized program's, or the sizes a
        # parametric one is compiled for; a parametric program launched beyond CUDA's
        # limits is refused at launch (runtime/grid.check_launch says how to fold).
        fold = not device_steps and at is not None and any(
            may_exceed(e, t, fold_context, AXIS_LIMITS[k], step_values)
            for k, (e, t) in enumerate(zip(kernel.extent, kernel.tile, strict=True))
            if k > 0 or index64)
        if fold:
            body = _folded_ids(kernel, grid, itype)
        elif device_steps:
            body = []  # the block ids are loops around the body (_block_loops)
        else:
            body = [cgen.Line(f"[[maybe_unused]] const {itype} {b} = blockIdx.{AXES[k]};")
                    for k, b in enumerate(kernel.block_names)]
        lanes = _kernel_lanes(kernel, buffers, device_steps)
        # (a kernel whose points do not move along some thread id leaves it unused)
        if device_steps:
            body += [cgen.Line(f"[[maybe_unused]] const int {t} = {_thread_id(kernel, k)};")
                     for k, t in enumerate(kernel.thread_names)]
        elif lanes:
            body += [cgen.Line(f"[[maybe_unused]] const int {t} = "
                               f"{_thread_id(kernel, k, f'(threadIdx.x / {lanes})')};")
                     for k, t in enumerate(kernel.thread_names)]
        elif flat_block(kernel.threads):
            body += [cgen.Line(f"[[maybe_unused]] const int {t} = "
                               f"{_thread_id(kernel, k, 'threadIdx.x')};")
                     for k, t in enumerate(kernel.thread_names)]
        else:
            body += [cgen.Line(f"[[maybe_unused]] const int {t} = threadIdx.{AXES[k]};")
                     for k, t in enumerate(kernel.thread_names)]
        if shared:
            tid = kernel.thread_names[0]  # the memory stage stages nothing without threads
            for k in range(1, kernel.n_mapped):
                tid = f"{kernel.thread_names[k]} * {math.prod(kernel.threads[:k])} + {tid}"
            if lanes:  # the copies are dealt over every lane of the block
                tid = "threadIdx.x"
            body.append(cgen.Line(f"const int {staging.TID} = {tid};"))
        if dynamic:
            body.append(cgen.Line(
                f"extern __shared__ __align__(16) unsigned char {staging.DYNAMIC}[];"))
        halves = full_tiles.split(scop, kernel, lambda text: index_text(text, index64))
        # split: the register buffers are the halves' own (declared in their functions)
        body += staging.declarations([b for b in buffers if halves is None
                                      or b.space == "shared"], dynamic)
        threads = kernel.n_threads  # those running the kernel (device steps)
        # tensor-core steps (codegen/mma.py): in whole tiles only, every lane present
        fragments = mma.fragments(scop, kernel, device_steps) if kernel.mma else None
        if halves is None:
            whole = fragments if fragments is not None and \
                full_tiles.every_block_whole(scop, kernel) else None
            work = _work(scop, kernel, buffers, views, ref_views, constants, printer,
                         index64, fragments=whole, lanes=lanes, packed=resident[own])
            if device_steps and kernel.n_threads == 1 and not buffers:
                # a one-thread step (a substitution): its sums over a warp's lanes
                lanes, mask = _lanes(block_threads[own] // elements, elements)
                shared = _work(scop, kernel, buffers, views, ref_views, constants,
                               printer, index64, lanes, mask) if lanes > 1 else []
                if kernel.lane_dims or "__shfl_xor_sync" in str(cgen.Block(shared)):
                    work, threads = shared, lanes
            body += work
        else:
            parts.append(f"// kernel {kernel.index}: whole tiles without guards where "
                         f"{halves.condition}, partial tiles apart")
            calls = []
            for half, k in (("whole", halves.full), ("partial", halves.partial)):
                code, call = _half_function(
                    scop, kernel, f"{name}_{half}", args, buffers + resident[own], itype,
                    _work(scop, k, buffers, *views_of(k), constants, printer, index64,
                          fragments=fragments if half == "whole" else None, lanes=lanes,
                          packed=resident[own]),
                    inline=device_steps)
                parts.append(code)
                calls.append(call)
            body.append(cgen.If(halves.condition, *calls))
        if fold:
            body = _folded_loop(kernel, grid, body, values)
        if device_steps:
            bodies.append(_block_loops(kernel, grid, body, itype,
                                       block_threads[own] // elements, barriers[own],
                                       threads))
            continue
        launch = _launch_bounds(kernel.block_threads, kernel.min_blocks)
        decl = cgen.FunctionDeclaration(
            cgen.Value("__global__ void", f"__launch_bounds__({launch}) {name}"),
            _parameter_list(scop, args))
        schedule_text = "\n".join(f"//   {m}" for m in
                                  str(kernel.schedule).split("; "))
        parts.append(f"// kernel {kernel.index}: tiled schedule "
                     "[blocks, threads, thread-local order]\n" + schedule_text)
        for b in buffers:
            parts.append(f"// kernel {kernel.index}: {b.array} in {b.space} memory as "
                         f"{b.name}{''.join(f'[{e}]' for e in b.row_extents)}"
                         + (f" at tile level {b.level}, padding {b.padding}"
                            if b.space == "shared" else "")
                         + (f", {b.stages} of them used in turn (double-buffered)"
                            if b.stages > 1 else ""))
        parts.append(str(cgen.FunctionBody(decl, cgen.Block(
            _fixed_constants(scop, args) + body))))
        if fold:  # prod(blocks) on x, and on y in rows of 2^31 - 1 when there are more
            total = " * ".join(grid)
            grid = [total] if _total_fits(kernel, values) else \
                [f"min({total}, {INT32_MAX})", f"({total} + {INT32_MAX - 1}) / {INT32_MAX}"]
        launches.append(Launch(
            kernel=name,
            grid=tuple(grid + ["1"] * (3 - len(grid))),
            block=launch_block(kernel.threads, kernel.lanes),
            shared_bytes=staging.dynamic_bytes(shared) if dynamic else 0,
        ))
        if scop.host:
            steps.append(launch_steps(scop, kernel.statements, name))
    host_iterators = scop.host
    if device_steps:
        body_of = {k.index: b for k, b in zip(kernels, bodies, strict=True)}
        for n, seg in enumerate(segments):
            static = sum(plan.shared_bytes(k.index) for k in seg) if plan else 0
            needed = elements * staging.dynamic_bytes(resident[n])
            dynamic = bool(resident[n]) and needed + static > STATIC_SHARED_BYTES
            if needed + static > MAX_SHARED_BYTES:
                raise ValueError(f"resident buffers of {elements} elements exceed the "
                                 f"{MAX_SHARED_BYTES} bytes of shared memory of a block")
            # (one launch keeps the name it always had)
            name = f"{scop.function}_steps" + (str(n) if len(segments) > 1 else "")
            code, grid = _steps_kernel(scop, seg, [body_of[k.index] for k in seg], args,
                                       block_threads[n], itype, grid_dims, resident[n],
                                       dynamic, elements, name)
            parts.append(code)
            launches.append(Launch(kernel=name, grid=(grid, "1", "1"),
                                   block=(block_threads[n], 1, 1),
                                   shared_bytes=needed if dynamic else 0))
        steps, host_iterators = [], ()
    return KernelProgram(
        function=scop.function,
        source="\n\n".join(parts) + "\n",
        arguments=args,
        parameters=scop.parameters,
        launches=tuple(launches),
        constants=tuple(sorted(constants)),
        specialized=tuple(scop.fixed_parameters.items()),
        host_iterators=host_iterators,
        host_steps=str(union_of_sets(steps)) if steps else "",
        index64=index64,
        index_bounds=() if values is not None or index64 else bounds,
        fast_math=fast_math,
    )


def _half_function(scop: Scop, kernel: TiledKernel, name: str, args, buffers, itype: str,
                   work: list, inline: bool = False) -> tuple[str, cgen.Line]:
    """One half of a split kernel (codegen/full_tiles.py) as a ``__noinline__`` device
    function, and the line that calls it: the kernel's arguments, block and thread ids
    and shared buffers in, its register buffers its own.  Why a function: ptxas
    allocates registers for the whole kernel, and with both halves inline it needed
    more than either alone (all-pairs L1, 128 x 128 tiles: 214 registers against 128
    for each half; the same 128 as functions, shared loads kept as ``ld.shared``).

    ``inline`` (device steps) makes it ``__forceinline__``: there a step calls its
    halves once per tile and step, and the call (its arguments, the return, each
    shared pointer's window recomputed from ``SR_CgaCtaId``) cost more than the
    step's work -- the batched Cholesky in double at n = 64 ran ~23 million calls."""
    shared = [b for b in buffers if b.space == "shared"]
    ids = [(itype, b) for b in kernel.block_names] + [("int", t) for t in kernel.thread_names]
    if shared:
        ids.append(("int", staging.TID))
    params = _parameter_list(scop, args) + [cgen.Value(f"const {t}", n) for t, n in ids] \
        + staging.buffer_parameters(shared)
    names = [a.name for a in args] + list(scop.host) + [n for _, n in ids] \
        + [b.name for b in shared]
    registers = staging.declarations([b for b in buffers if b.space == "register"], False)
    code = cgen.FunctionBody(
        cgen.FunctionDeclaration(cgen.Value(
            f"__device__ {'__forceinline__' if inline else '__noinline__'} void", name), params),
        cgen.Block(_fixed_constants(scop, args) + registers + work))
    return str(code), cgen.Line(f"{name}({', '.join(names)});")


def _work(scop: Scop, kernel: TiledKernel, buffers, views, ref_views, constants,
          printer: Printer, index64: bool, lanes: int = 0, mask: str = "",
          fragments: mma.Fragments | None = None, packed: Sequence = ()) -> list:
    """One thread's work in ``kernel`` (for the blocks its ``blocks`` names): register
    copy-ins, the loops (staged or not), register copy-outs.  ``lanes``: a one-thread
    kernel's work shared by that many lanes (in device steps, whose ``mask`` is given),
    or a launched kernel's (``Variant.lanes``: without ``mask``, its lane and mask
    defined here from ``threadIdx.x``); ``fragments``: its register tile's time loops
    on the tensor cores, where every block is whole (:class:`Emitter`); ``packed``: the
    resident packed triangles, at whose folds an unstaged kernel's statements are split
    (:mod:`polygpu.codegen.fold_pieces`)."""
    registers = [b for b in buffers if b.space == "register"]
    body = []
    lane = _TID
    if lanes and not mask:
        lane, mask = _LANE, _MASK
        body += [cgen.Line(f"const int {_LANE} = threadIdx.x % {lanes};"),
                 cgen.Line(f"const unsigned {_MASK} = {_group_mask(lanes)};")]
    for b in registers:
        if b.reads is not None:
            body += staging.copy_loop(b, printer, kernel, scop, "in")

    staged = any(b.space == "shared" for b in buffers)
    pieces = fold_pieces(scop, kernel, packed) if packed and not staged and \
        fragments is None and not lanes else None

    def emitter(user):
        return Emitter(scop, kernel.unroll, views, constants, user,
                       {s: staging.atomic_function(kernel, [s]) for s in kernel.atomic},
                       index64, ref_views, register_loops(kernel), lanes, mask, fragments,
                       lane, frozenset(kernel.local_names[d] for d in kernel.lane_dims),
                       frozenset(kernel.local_names[d] for d in kernel.point_dims),
                       frozenset(kernel.thread_names), pieces)

    if staged:
        body += staging.staged_body(scop, kernel, buffers, emitter, printer)
    else:
        body += emitter(None).node(kernel_ast(scop, kernel, pieces=pieces))
    for b in registers:
        if b.writes is not None:
            body += staging.copy_loop(b, printer, kernel, scop, "out")
    return body


_LANE = staging.LANE  # a launched kernel's lane among those of its thread (Variant.lanes)
_C_FUNCTIONS = frozenset({"min", "max", "floord"})  # in isl's printed loop bounds


def _launch_bounds(threads: int, min_blocks: int) -> str:
    """``__launch_bounds__``'s arguments: the block's threads, and the blocks an SM
    ptxas is to leave room for where the variant asks (``Variant.min_blocks``; 0: no)."""
    return f"{threads}, {min_blocks}" if min_blocks else str(threads)


def _group_mask(width: int) -> str:
    """The ``__syncwarp`` mask of this thread's group of ``width`` consecutive lanes (a
    power of two; a group of whole warps: its warp), as C."""
    return "0xffffffffu" if width >= 32 else \
        f"{hex((1 << width) - 1)}u << (threadIdx.x % 32 / {width} * {width})"


def _kernel_lanes(kernel: TiledKernel, buffers, device_steps: bool) -> int:
    """The lanes of a launched kernel run with ``Variant.lanes`` (0 without); bad input
    (PolygpuError) where the kernel cannot: device steps share their one-thread steps'
    sums by themselves, and register buffers would be every lane's own (a copy written
    by the first lane alone, copied out by all).  Shared buffers are the block's: their
    copies are dealt over all its lanes."""
    if kernel.lanes == 1:
        return 0
    if device_steps:
        raise PolygpuError(f"variant: lanes {kernel.lanes} (kernel {kernel.index}) is for "
                           "launched kernels; device steps split their one-thread steps' "
                           "sums over a warp by themselves")
    if any(b.space == "register" and b.lanes == 1 for b in buffers):
        raise PolygpuError(f"variant: lanes {kernel.lanes} (kernel {kernel.index}) keeps no "
                           "register copies (each lane would have its own): it needs "
                           "\"registers\": false for that kernel, or full_unroll (its "
                           "copies then spread over the lanes)")
    return kernel.lanes


# A kernel whose block count along y or z can exceed CUDA's 65535 (or along x its
# 2^31 - 1) is launched on a grid of prod(blocks) blocks along x -- where that can
# pass 2^31 - 1, in rows of 2^31 - 1 along y -- and each block decomposes its linear
# block number into the block ids (x fastest, as CUDA numbers blocks).  Blocks of the
# last row beyond prod(blocks) return at once, all their threads together (no barrier
# is reached by part of a block).  A loop over block numbers (grid-stride) would do
# too, but costs registers: 79 -> 128 on mm's 64 x 64 register tile.
_BLOCK = "pg_block"


def _folded_ids(kernel: TiledKernel, grid: list[str], itype: str) -> list:
    lines = []
    divisor = ""
    for k, b in enumerate(kernel.block_names):
        value = f"{_BLOCK}{divisor}"
        if k + 1 < len(kernel.block_names):
            value = f"{value} % pg_blocks{k}"
        lines.append(cgen.Line(f"const {itype} {b} = ({itype})({value});"))
        divisor = f"{divisor} / pg_blocks{k}"
    return lines


def _total_fits(kernel: TiledKernel, values) -> bool:
    """Whether a specialized kernel's linear block count fits CUDA's grid x."""
    if values is None:
        return False
    try:
        return math.prod(block_count(e, t, values) for e, t in
                         zip(kernel.extent, kernel.tile, strict=True)) <= INT32_MAX
    except KeyError:  # a host step's grid: counts depend on the host iterators
        return False


def _folded_loop(kernel: TiledKernel, grid: list[str], body: list, values) -> list:
    counts = [cgen.Line(f"const long long pg_blocks{k} = {device_expression(g)};")
              for k, g in enumerate(grid)]
    if _total_fits(kernel, values):
        return counts + [cgen.Line(f"const long long {_BLOCK} = blockIdx.x;")] + body
    total = " * ".join(f"pg_blocks{k}" for k in range(len(grid)))
    return counts + [
        cgen.Line(f"const long long {_BLOCK} = blockIdx.x + (long long)gridDim.x * "
                  "blockIdx.y;"),
        cgen.If(f"{_BLOCK} >= {total}", cgen.Statement("return")),
    ] + body



# --- device steps: the host loops run in one thread block (generate(device_steps=True))

_TID = "pg_tid"


def device_steps_possible(scop: Scop, kernels: tuple[TiledKernel, ...],
                          plan: MemoryPlan | None, require: bool = False) -> bool:
    """Whether the kernels of a host step can run as phases of one block: there are
    host loops; every kernel's threads fit one block; a kernel with fewer threads than
    the block (it is guarded by its thread count) stages nothing in shared memory,
    whose barriers all threads must reach; no dynamic shared memory."""
    why = None
    if not scop.host:
        why = "there are no host loops"
    else:
        most = max(k.n_threads for k in kernels)
        for k in kernels:
            buffers = plan.buffers_of(k.index) if plan else ()
            if any(b.space == "shared" for b in buffers) and k.n_threads != most:
                why = (f"kernel {k.index} stages data in shared memory with "
                       f"{k.n_threads} of the block's {most} threads")
            if plan is not None and plan.shared_bytes(k.index) > STATIC_SHARED_BYTES:
                why = f"kernel {k.index} needs dynamic shared memory"
    if why and require:
        raise ValueError(f"device steps impossible: {why}")
    return why is None


def _thread_id(kernel: TiledKernel, k: int, linear: str = _TID) -> str:
    """Thread coordinate ``k`` (x innermost) from the block's linear thread number."""
    below = math.prod(kernel.threads[:k])
    value = linear if below == 1 else f"{linear} / {below}"
    return value if k + 1 == kernel.n_mapped else f"({value}) % {kernel.threads[k]}"


def group_threads(kernels: tuple[TiledKernel, ...], plan: MemoryPlan | None,
                  grid_dims: int, require: bool = False) -> int | None:
    """The threads of one element's group when a batch's block runs several elements
    (``generate(elements=...)``): the kernels' widest thread count rounded up to a power
    of two (a group of a warp or less synchronizes with ``__syncwarp``, a wider one --
    whole warps -- with a named barrier of its own: :func:`group_barrier`), and no
    kernel may stage in shared memory of its own (one copy per block, not per element).
    None (or ValueError with ``require``) where groups are impossible."""
    why = None
    widest = max(k.n_threads for k in kernels)
    group = 1 << (widest - 1).bit_length()
    if not grid_dims:
        why = "elements per block need a batch"
    elif plan is not None and any(b.space == "shared" for b in plan.buffers):
        why = "a kernel stages data in shared memory of its own"
    if why and require:
        raise ValueError(f"groups of threads per element impossible: {why}")
    return None if why else group


# a group of several warps per element synchronizes with a named barrier of its own
# (PTX bar.sync ID, THREADS: only the group's warps wait); ID 0 is __syncthreads', so a
# block has 15 for its groups
GROUP_SYNC = "pg_group_sync"
GROUP_BARRIERS = 15
GROUP_SYNC_HELPER = f"""\
// the barrier of one element's group of whole warps: named barrier `id` of `threads`
__device__ __forceinline__ void {GROUP_SYNC}(int id, int threads)
{{
#ifdef __CUDA_ARCH__
  asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(threads) : "memory");
#elif defined(POLYGPU_EMULATION)
  polygpu_named_barrier(id, threads);
#endif
}}
"""


def group_barrier(group: int, elements: int) -> str:
    """The barrier of one element's group of ``group`` threads, ``elements`` groups a
    block: ``__syncwarp`` over its lanes (a warp at most), else its own named barrier
    (whole warps; ValueError beyond :data:`GROUP_BARRIERS` groups)."""
    if group <= 32:
        return f"__syncwarp({_MASK})"
    if elements > GROUP_BARRIERS:
        raise ValueError(f"{elements} groups of {group} threads: a block has "
                         f"{GROUP_BARRIERS} barriers for groups of several warps")
    return f"{GROUP_SYNC}(1 + {_GROUP}, {group})"


_MASK = "pg_mask"  # the lanes of this thread's element group (__syncwarp's mask)
_GROUP = staging.GROUP  # which of the block's elements this thread works on
# groups of fewer threads than this copy their resident buffers with the whole block
# (staging.resident_copy): on the H200 8-thread groups over seed 003's 3 x 3 and 5 x 5
# elements ran the chain at 1.29 ms with block copies (2^22 instances,
# tuning/results/NVIDIA-H200/fusion.md); a warp per element copies its own element --
# block copies there cost the batched Cholesky 4 % at n = 64 (4.85 against 4.67 ms)
BLOCK_COPIES_BELOW = 32


def copied_together(resident: Sequence, element: str | None, elements: int,
                    group: int) -> bool:
    """Whether a batch's block copies the ``resident`` buffers of all its ``elements``
    together (groups of ``group`` threads; ``element``: the batch's parameter, None
    outside a batch): groups narrower than :data:`BLOCK_COPIES_BELOW`, and interleaved
    elements (:func:`staging.interleaved`), whose neighbours' words share sectors --
    a group alone would read a word a sector.  (The batch model prices the copies'
    sectors by the same decision: ``plan_model.copy_sector_bytes``.)"""
    return elements > 1 and (group < BLOCK_COPIES_BELOW or element is not None and any(
        staging.interleaved(b, element) for b in resident))


def _lanes(threads: int, elements: int) -> tuple[int, str]:
    """The lanes that share a one-thread step of an element run by ``threads`` threads
    (a power of two; its first warp where wider), and their ``__syncwarp`` mask: the
    element's group's (``elements`` per block; a whole warp's for groups of warps),
    else the block's first lanes."""
    lanes = 1 << (min(32, threads).bit_length() - 1)
    if elements > 1:
        return lanes, _MASK
    return lanes, "0xffffffffu" if lanes == 32 else f"{hex((1 << lanes) - 1)}u"


def _block_loops(kernel: TiledKernel, grid: list[str], body: list, itype: str,
                 block_threads: int, barrier: str = "__syncthreads()",
                 threads: int | None = None) -> list:
    """``body`` run for every block of the kernel's grid in turn, by the threads the
    kernel uses (``threads``, default its own; all when it uses the whole block), then a
    barrier for all."""
    threads = kernel.n_threads if threads is None else threads
    inner = cgen.Block(body)
    for k in reversed(range(len(kernel.block_names))):
        b = kernel.block_names[k]
        inner = cgen.For(f"{itype} {b} = 0", f"{b} < {device_expression(grid[k])}",
                         f"{b}++", inner)
    inner = [inner]
    if threads < block_threads:
        inner = [cgen.If(f"{_TID} < {threads}", cgen.Block(inner))]
    return inner + [cgen.Statement(barrier)]


def _steps_kernel(scop: Scop, kernels: tuple[TiledKernel, ...], bodies: list[list],
                  args: tuple[Argument, ...], block_threads: int, itype: str,
                  grid_dims: int = 0, resident: list | None = None,
                  dynamic: bool = False, elements: int = 1, function: str = ""
                  ) -> tuple[str, str]:
    """One kernel running the host loops, and its grid (a C expression): isl generates
    the loops over every (step, kernel) in the launch order -- steps lexicographically,
    kernels in order -- and each kernel's body runs at its steps, the host iterators
    bound to the loop values.  With ``grid_dims`` (one: a batch) the first host
    iterator is the block's element, ``lower + blockIdx.x``, over the bounding range of
    its values: isl guards the steps of values outside the set (a strided batch).
    ``resident`` buffers (carved from dynamic shared memory if ``dynamic``) are loaded
    by all threads before the steps and stored after them, barriers around.  With
    ``elements`` per block, thread group ``threadIdx.x / group`` runs element
    ``lower + elements * blockIdx.x + group`` with its own resident buffers."""
    schedule = None
    n_host = len(scop.host) - grid_dims
    for kernel in kernels:
        name = f"{scop.function}_kernel{kernel.index}"
        at = launch_steps(scop, kernel.statements, name, grid_dims)
        m = isl.Map.identity(at.get_space().map_from_set()).intersect_domain(at)
        m = insert_constants(m, n_host, [kernel.index]).reset_tuple_id(isl.dim_type.out)
        m = isl.UnionMap.from_map(m)
        schedule = m if schedule is None else schedule.union(m)
    context = schedule.params()
    bind, grid = [], "1"
    if grid_dims:
        element = scop.host[0]
        context, lower, extent = _element_range(context, element)
        grid = grid_expression(extent, elements)
        build = isl.AstBuild.from_context(isl.Set.universe(lower.get_domain_space()))
        first = "blockIdx.x" if elements == 1 else \
            f"{elements} * ({itype})blockIdx.x + {_GROUP}"
        bind = [cgen.Line(f"const {itype} {element} = "
                          f"{build.expr_from_pw_aff(lower).to_C_str()} + {first};")]
    # the steps carry the same parities as the kernels' domains (a descending strided
    # host loop): isl's failures on them are retried like the kernels'
    ast = node_from_schedule_map(isl.AstBuild.from_context(context), schedule)
    index = {f"{scop.function}_kernel{k.index}": body
             for k, body in zip(kernels, bodies, strict=True)}

    def user(name, values):
        bind = [cgen.Line(f"const int {h} = {v};") for h, v in zip(
            scop.host[grid_dims:], values, strict=True)]
        return bind + index[name]

    emitter = Emitter(scop, 1, user=user, index64=itype != "int")
    group = block_threads // elements
    body = _fixed_constants(scop, args)
    if elements == 1:
        body += [cgen.Line(f"const int {_TID} = threadIdx.x;")]
        barrier = "__syncthreads()"
    else:
        body += [cgen.Line(f"const int {_TID} = threadIdx.x % {group};"),
                 cgen.Line(f"const int {_GROUP} = threadIdx.x / {group};"),
                 cgen.Line(f"const unsigned {_MASK} = {_group_mask(group)};")]
        barrier = group_barrier(group, elements)
    body += bind
    if resident:
        body += _resident(scop, resident, group, itype != "int", dynamic,
                          emitter.node(ast), elements, barrier, bind)
    else:
        body += emitter.node(ast)
    # (one function runs every kernel: the most blocks any of them asks room for)
    launch = _launch_bounds(block_threads, max(k.min_blocks for k in kernels))
    decl = cgen.FunctionDeclaration(
        cgen.Value("__global__ void",
                   f"__launch_bounds__({launch}) {function or scop.function + '_steps'}"),
        _parameter_list(scop, args, host=False))
    what = ("one block per element of the batch, each running its element's steps in "
            "order" if grid_dims else "one block, each host step's kernels in order")
    if elements > 1:
        what = (f"{elements} elements of the batch per block, a group of {group} threads "
                "each running its element's steps in order")
    return (f"// the host loops run on the device: {what}, with a barrier after each "
            "kernel\n" + str(cgen.FunctionBody(decl, cgen.Block(body)))), grid


def _resident(scop: Scop, resident: list, threads: int, index64: bool, dynamic: bool,
              steps: list, elements: int = 1, barrier: str = "__syncthreads()",
              bind: Sequence = ()) -> list:
    """``steps`` between the copies of the resident buffers: declarations, copy-ins of
    what is read, a barrier, the steps (each ends with a barrier), copy-outs of what is
    written.  ``threads``: those of one element; with several ``elements`` per block
    each buffer is declared once per element and named, for the group's code, by a
    pointer to its group's copy; groups narrower than :data:`BLOCK_COPIES_BELOW` threads
    copy every group's buffers together, the whole block at once
    (``staging.resident_copy``; ``bind`` declares a group's element), a block barrier
    between the copies and the groups' steps."""
    printer = Printer({a.name: a.shape_exprs for a in scop.program_arrays}, frozenset(),
                      {}, index64=index64)
    known = scop.context
    out = []
    if dynamic:
        out.append(cgen.Line(
            f"extern __shared__ __align__(16) unsigned char {staging.DYNAMIC}[];"))
    if elements == 1:
        out += staging.declarations(resident, dynamic)
    else:
        out += staging.group_declarations(resident, dynamic, elements, _GROUP)
    together = copied_together(resident, scop.host[0] if bind else None, elements,
                               threads)
    pointers = staging.group_pointers(resident, dynamic, elements, _GROUP) \
        if together else [None] * len(resident)
    copied = elements if together else 1
    # copies by the whole block need a block barrier on either side of the steps
    copies = "__syncthreads()" if together else barrier
    out += staging.resident_copies_in(
        [(b, [*bind, pointer]) for b, pointer in zip(resident, pointers, strict=True)
         if b.reads is not None], printer, threads, known, copied, scop,
        scop.host[0] if bind else None, dynamic)
    out.append(cgen.Statement(copies))
    out += steps
    out.append(cgen.Statement(copies))
    out += staging.resident_copies_out(
        [(b, [*bind, pointer]) for b, pointer in zip(resident, pointers, strict=True)
         if b.writes is not None], printer, threads, known, copied, scop,
        scop.host[0] if bind else None, dynamic)
    return out


def _element_range(params: isl.Set, element: str) -> tuple[isl.Set, isl.PwAff, isl.PwAff]:
    """The batch element's values as a range: the AST context, the lower bound and the
    extent ``upper - lower`` over the region's parameters (``params``: where some step
    exists, ``element`` one of them).  The context is the polyhedral hull of ``params``
    (no strides or holes: every launched block's element lies in it), and anything at
    parameter values without elements -- so isl never drops a guard a launch needs."""
    k = params.find_dim_by_name(isl.dim_type.param, element)
    hull = isl.Set.from_basic_set(params.polyhedral_hull())
    values = hull.move_dims(isl.dim_type.set, 0, isl.dim_type.param, k, 1)
    lower, upper = values.dim_min(0).coalesce(), values.dim_max(0).coalesce()
    exists = hull.project_out(isl.dim_type.param, k, 1).align_params(hull.get_space())
    context = hull.union(isl.Set.universe(hull.get_space()).subtract(exists)).coalesce()
    return context, lower, upper.sub(lower).coalesce()
