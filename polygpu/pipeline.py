"""The whole pipeline for one region, stage after stage: what ``compile`` and ``check`` run.

frontend -> model (+ analysis) -> scheduler candidates -> tiling/mapping (proven legal)
-> memory placement (shared/register/constant buffers, padding) -> CUDA.  Every
intermediate result is kept in :class:`Compiled` so the CLI can explain each decision
(``--json``) and the runtimes can check the output against the model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache

import islpy as isl

from polygpu.codegen.cuda import (
    device_steps_possible,
    generate,
    group_barrier,
    group_threads,
)
from polygpu.codegen.program import KernelProgram
from polygpu.errors import PolygpuError
from polygpu.frontend import load
from polygpu.memory.placement import MAX_SHARED_BYTES, MemoryPlan, Placement, plan_memory
from polygpu.memory.residence import Residence, plan_residence
from polygpu.model.analysis import Analysis, analyze
from polygpu.model.bounds import require_in_bounds
from polygpu.model.build import build_scop
from polygpu.model.isl_util import maps_of, sets_of, union_of
from polygpu.model.scop import Scop, fix_parameters
from polygpu.schedule.candidates import candidates
from polygpu.schedule.legality import (
    ExecutionSchedule,
    insert_constants,
    prove_legal,
    transformation_schedule,
    violations,
)
from polygpu.schedule.ranking import space_dims
from polygpu.schedule.relayout import between_copies, relaid_variant
from polygpu.schedule.splits import split_kernels
from polygpu.schedule.tiling import TiledKernel, tile
from polygpu.schedule.transformation import Transformation
from polygpu.schedule.variant import MAX_THREADS, Variant
from polygpu.transform.expand import Expansion, expand_temporaries
from polygpu.transform.expand import Refusal as ExpandRefusal
from polygpu.transform.layout import Relayout, relayout_batch
from polygpu.transform.recursion import (
    at_sizes,
    distribute,
    recursive_split_group,
    roles,
    snapshot_leaves,
)
from polygpu.transform.snapshot import Snapshot, snapshot_inputs
from polygpu.transform.split import Refusal, Splitting, split_statements

# scheduler candidates of a split region: its pieces multiply the statements, and
# every proposal costs a proof against all their dependences (prepare stays fast)
SPLIT_CANDIDATES = 4


@dataclass(frozen=True)
class Compiled:
    spec: str
    analysis: Analysis
    candidates: tuple[Transformation, ...]
    transformation: Transformation
    variant: Variant
    kernels: tuple[TiledKernel, ...]
    program: KernelProgram
    memory: MemoryPlan
    # the model of the original function, before transform/ (what check_program and
    # the reference need), and what the expansion of temporaries did
    source_scop: Scop | None = None  # None: the analysed one (nothing was transformed)
    expansion: Expansion | None = None
    splitting: Splitting | None = None  # statements split (transform/split.py), or None
    snapshot: Snapshot | None = None  # entry reads redirected (transform/snapshot.py)
    # a resident variant's buffers for the block's life (memory/residence.py), one
    # Residence per launch (Variant.cuts); empty when not resident
    residences: tuple[Residence, ...] = ()
    # a relayout variant's relaid arrays and their transposes (transform/layout.py)
    relayout: Relayout | None = None
    # the variant the kernels were built with where it differs from ``variant`` (a
    # relayout's: the copy kernels' plans added, schedule/relayout.py), else None
    built_variant: Variant | None = None

    def __post_init__(self):
        if self.source_scop is None:
            object.__setattr__(self, "source_scop", self.analysis.scop)

    @property
    def built(self) -> Variant:
        """The variant each kernel was tiled and placed with (``for_kernel``)."""
        return self.built_variant or self.variant

    @property
    def placement(self) -> tuple[Placement, ...]:
        return self.memory.placements

    @property
    def kernel_scop(self):
        """The region the kernels were generated from: the host step's with host
        loops (whose parameters include the host iterators), else the whole one."""
        return (self.transformation.step or self.analysis).scop

    def modelled_launches(self, params: Mapping[str, int]
                          ) -> list[tuple[TiledKernel, str, dict[str, int], int]]:
        """What a cost model counts: per launch its kernel, name, the parameter values
        to count at and how many times it runs.  Without host loops: once, at
        ``params``.  With them: at the launch's middle step, times its number of steps
        (time steps are alike; pivot steps shrink, and for a linear shrink the middle
        step is their mean) -- counting every step exactly would take isl minutes."""
        result = []
        steps, elements = self.modelled_steps(params)
        for k, (kernel, launch) in enumerate(zip(self.kernels, self.program.launches,
                                                 strict=True)):
            values = {p: int(params[p]) for p in self.analysis.scop.parameters}
            if not self.program.host_iterators:
                result.append((kernel, launch.kernel, values, 1))
                continue
            mine = [h for j, h in steps if j == k]
            if not mine:
                continue
            middle = mine[len(mine) // 2]
            values.update(zip(self.program.host_iterators, middle, strict=True))
            result.append((kernel, launch.kernel, values, len(mine) * elements))
        return result

    def modelled_steps(self, params: Mapping[str, int]
                       ) -> tuple[tuple[tuple[int, tuple[int, ...]], ...], int]:
        """The host steps a model counts (``KernelProgram.steps``), and how many times:
        with a ``batch`` host schedule one element's steps, times the elements."""
        host = self.transformation.host
        if host is None or not host.grid_dims or not self.program.host_iterators:
            return self.program.steps(params), 1
        return one_element_steps(self.program, params)

    def batch_elements(self, params: Mapping[str, int]) -> int:
        """The elements of a ``batch`` host schedule at ``params`` (1 without)."""
        return self.modelled_steps(params)[1]


def one_element_steps(program: KernelProgram, params: Mapping[str, int]
                      ) -> tuple[tuple[tuple[int, tuple[int, ...]], ...], int]:
    """A host-launched batch program's launches for its first element (as
    ``KernelProgram.steps``), and how many elements there are (the range of the first
    host iterator): enumerating every element's steps would take minutes."""
    values = {p: int(params[p]) for p in program.parameters}
    return _one_element_steps(program, tuple(sorted(values.items())))


@lru_cache(maxsize=64)
def _one_element_steps(program: KernelProgram, params: tuple[tuple[str, int], ...]):
    values = dict(params)
    steps = isl.UnionSet(program.host_steps)
    steps = steps.intersect_params(
        fix_parameters(isl.Set.universe(steps.get_space().params()), values))
    sets = [s for s in sets_of(steps) if not s.is_empty()]
    if not sets:
        return (), 0
    lower = min(int(s.dim_min_val(0).to_python()) for s in sets)
    upper = max(int(s.dim_max_val(0).to_python()) for s in sets)
    first = isl.UnionSet.empty(steps.get_space())
    for s in sets:
        first = first.union(isl.UnionSet.from_set(s.fix_val(isl.dim_type.set, 0,
                                                             isl.Val(lower))))
    one = replace(program, host_steps=str(first))
    return one.steps(values), upper - lower + 1


def compile_region(
    spec: str,
    function: str | None = None,
    variant: Variant | None = None,
    defines: Sequence[str] = (),
    include_dirs: Sequence[str] = (),
    params: Mapping[str, int] | None = None,
) -> Compiled:
    """Run the pipeline on ``spec`` (``file.c[:function]`` or ``module.py:function``);
    ``params`` are needed only by a variant that specializes."""
    return compile_variant(prepare(spec, function, defines, include_dirs, params), variant,
                           params)


@dataclass(frozen=True)
class Prepared:
    """The variant-independent stages (model, analysis, scheduler candidates): what a
    search computes once and then tiles many ways."""

    spec: str
    analysis: Analysis
    candidates: tuple[Transformation, ...]
    source_scop: Scop | None = None  # the original model (see Compiled)
    expansion: Expansion | None = None
    splitting: Splitting | None = None
    snapshot: Snapshot | None = None
    relayout: Relayout | None = None  # set on the relaid twin (see ``relaid``)
    params: Mapping[str, int] | None = None  # the sizes prepare() was given
    recursion: int = 0  # the leaf rows of a recursive twin (see ``recursive``)

    def __post_init__(self):
        if self.source_scop is None:
            object.__setattr__(self, "source_scop", self.analysis.scop)

    @cached_property
    def relaid(self) -> Prepared | None:
        """The region with its interleaved arrays relaid (transform/layout.py), its
        candidates the body's launched ones between the transposes
        (schedule/relayout.py), or None where nothing is interleaved: what a
        ``relayout`` variant compiles.  Built on first use (the model and the search
        ask; a region without an interleaved array answers at once)."""
        return self._relaid[0]

    @cached_property
    def relaid_body(self) -> Prepared | None:
        """The relaid region's own statements (the element-outermost nest), with the
        candidates of :attr:`relaid` in the same order: what a relayout variant's
        fields are chosen for (``search/space.py``)."""
        return self._relaid[1]

    @cached_property
    def _relaid(self) -> tuple[Prepared | None, Prepared | None]:
        if self.relayout is not None:
            return None, None
        try:
            relayout = relayout_batch(self.analysis)
            if not relayout.relaid:
                return None, None
            copies = {c for r in relayout.relaid for c in (r.copy_in, r.copy_out) if c}
            scop = relayout.scop
            # the copies' loops come last (transform/layout.py): the ids stay indices
            body_scop = replace(scop, statements=tuple(s for s in scop.statements
                                                       if s.name not in copies),
                                loops=tuple(lp for lp in scop.loops
                                            if not set(lp.statements) <= copies))
            body_an = analyze(body_scop)
            whole = analyze(scop)
            before = tuple(r.copy_in for r in relayout.relaid if r.copy_in)
            after = tuple(r.copy_out for r in relayout.relaid if r.copy_out)
            body, composed = [], []
            for tr in candidates(body_an):
                tr_whole = between_copies(whole, tr, before, after)
                if tr_whole is not None:
                    body.append(tr)
                    composed.append(tr_whole)
        except isl.Error:  # optional, like the scheduler's own proposals
            return None, None
        if not composed:
            return None, None
        return (replace(self, analysis=whole, candidates=tuple(composed), relayout=relayout),
                replace(self, analysis=body_an, candidates=tuple(body), relayout=relayout))

    def transformation(self, variant: Variant) -> Transformation:
        """``variant``'s candidate of this region with its ``splits`` (proven; refused
        as bad input where a split is not inside a kernel or breaks a dependence):
        the kernels everything after the scheduler tiles.  Cached per split."""
        if variant.candidate >= len(self.candidates):
            raise PolygpuError(f"variant: candidate {variant.candidate} does not exist "
                               f"(the scheduler found {len(self.candidates)}: "
                               f"0..{len(self.candidates) - 1})")
        key = (variant.candidate, variant.splits)
        if key not in self._split:
            try:
                self._split[key] = split_kernels(self.analysis,
                                                 self.candidates[variant.candidate],
                                                 variant.splits)
            except PolygpuError as e:
                self._split[key] = e
        found = self._split[key]
        if isinstance(found, PolygpuError):
            raise found
        return found

    @cached_property
    def _split(self) -> dict:
        return {}

    def recursive(self, stop: int) -> Prepared:
        """The region with its in-place triangular updates split recursively down to
        ``stop`` rows a leaf (transform/recursion.py, proven) at the sizes prepare()
        was given, analysed and scheduled: what a ``recursion`` variant compiles.
        PolygpuError where there are no sizes or no such update."""
        if stop not in self._recursive:
            self._recursive[stop] = _recursive_region(self, stop)
        return self._recursive[stop]

    @cached_property
    def _recursive(self) -> dict[int, Prepared]:
        return {}

    def of(self, variant: Variant) -> tuple[Prepared, Variant]:
        """The prepared region ``variant`` compiles and the variant its kernels are
        built with: for a ``relayout`` variant the relaid region and the variant with
        the copy kernels' plans (refused where the region has none), for a
        ``recursion`` variant the recursively split region, else this one."""
        if variant.recursion and not self.recursion:
            return self.recursive(variant.recursion).of(variant)
        if not variant.relayout or self.relayout is not None:
            return self, variant
        if self.relaid is None:
            raise PolygpuError("variant: relayout moves a batch's element index outermost, "
                               "but no array of this region has the batch loop's iterator "
                               "alone as its last subscript (or no plan of its body runs "
                               "between the transposes)", self.analysis.scop.loc)
        if variant.candidate >= len(self.relaid.candidates):
            return self.relaid, variant  # refused where the candidate is looked up
        body = self.relaid_body.candidates[variant.candidate]
        whole = self.relaid.candidates[variant.candidate]
        before = sum(1 for r in self.relaid.relayout.relaid if r.copy_in)
        return self.relaid, relaid_variant(variant, before, len(body.kernels),
                                           len(whole.kernels) - before - len(body.kernels))


def prepare(spec: str, function: str | None = None, defines: Sequence[str] = (),
            include_dirs: Sequence[str] = (),
            params: Mapping[str, int] | None = None) -> Prepared:
    """Model, analysis and candidates of one region.  Refuses (``PolygpuError`` at the
    access's line) an access that leaves its array at ``params``, or without them one
    that does for every size at which it runs (:mod:`polygpu.model.bounds`)."""
    scop = build_scop(load(spec, function, defines, include_dirs))
    if all(s.domain.is_empty() for s in scop.statements):
        # no kernel to launch and no step to take: an error, not an empty .cu file
        raise PolygpuError(f"{scop.function}: no statement of the region ever runs (its "
                           "iteration domains are empty for every parameter value), so "
                           "there is nothing to generate", scop.loc)
    require_in_bounds(scop, params)
    # temporaries expanded (transform/expand.py, proven): the analysis and everything
    # after see the transformed region, the reference check the original
    expansion = expand_temporaries(scop)
    an = analyze(expansion.scop)
    found = candidates(an)
    # reads of entry values redirected to a snapshot (transform/snapshot.py, proven),
    # kept only if the scheduler then maps more of the original statements' loops
    snapshot, an, found = _snapshot(expansion.scop, an, found)
    splitting = None
    if not any(space_dims(tr) for tr in found):
        # only a one-thread plan: statements cut where a read meets their own write
        # (transform/split.py, proven), kept only if the scheduler then does better
        splitting, an, found = _split(an.scop, an, found)
    return Prepared(spec, an, found, scop, expansion, splitting, snapshot,
                    params=dict(params) if params else None)


def _recursive_region(prepared: Prepared, stop: int) -> Prepared:
    """:meth:`Prepared.recursive`: every statement that is an in-place triangular update
    (:func:`~polygpu.transform.recursion.roles`) split into the recursion's blocks, the
    statements after it in its loops first moved to nests of their own (both proven);
    the original region at the sizes, not the expanded or snapshot one."""
    if not prepared.params:
        raise PolygpuError("variant: recursion cuts the rows at constant positions: give "
                           "the sizes (-p NAME=VALUE)", prepared.source_scop.loc)
    try:
        return _recursive_split_region(prepared, stop)
    except isl.Error as e:  # optional, like every transformation: refused, with why
        raise PolygpuError(f"variant: recursion: isl could not split or prove the region "
                           f"({e})", prepared.source_scop.loc) from None


def _recursive_split_region(prepared: Prepared, stop: int) -> Prepared:
    scop = at_sizes(prepared.source_scop, prepared.params)
    records, why, notes = [], [], []
    original = prepared.source_scop.statements
    for k, s in enumerate(original):
        present = {t.name for t in scop.statements}  # (an earlier update's are pieces)
        if s.name not in present:
            continue  # split already, as a companion of an earlier update
        try:
            roles(scop, s.name)
        except PolygpuError as e:
            why.append(str(e.args[0]) if e.args else str(e))
            continue
        # the statements before it in its loops to a nest before them (a solve's alpha),
        # those after it to one after (trmm's alpha), in textual order; what cannot move
        # (a solve's division, read by later rows) is split with it, into its leaves
        here = scop.statement(s.name)
        for t in original[:k]:
            if t.name in present and set(scop.statement(t.name).loops) & set(here.loops):
                try:
                    scop = distribute(scop, t.name, before=True)
                except PolygpuError:
                    break  # (a later one cannot pass it)
                notes.append(Refusal(t.name, f"distributed: runs before {s.name}'s loops"))
                here = scop.statement(s.name)
        for t in original[k + 1:]:
            if t.name in present and set(scop.statement(t.name).loops) & set(here.loops):
                try:
                    scop = distribute(scop, t.name)
                except PolygpuError:
                    continue
                notes.append(Refusal(t.name, f"distributed: runs after {s.name}'s loops"))
                here = scop.statement(s.name)
        scop, split = recursive_split_group(scop, s.name, stop)
        records += split
        try:  # the leaves' rows in parallel, their old values from a workspace (proven)
            scop = snapshot_leaves(scop, split[0])
            notes.append(Refusal(s.name, "leaves: their rows in parallel, the old values "
                                         "from a workspace"))
        except (PolygpuError, isl.Error) as e:  # not proven: rows in turn (a solve's)
            reason = str(e.args[0] if e.args else e).splitlines()[0][:200]
            notes.append(Refusal(s.name, f"leaves: their rows in turn (no workspace: "
                                         f"{reason})"))
    if not records:
        raise PolygpuError("variant: recursion needs an in-place triangular update; "
                           + "; ".join(why), prepared.source_scop.loc)
    an = analyze(scop)
    # (no host loops, no isl scheduler on the whole region: the pieces are the
    # recursion's steps, launched in turn; candidates() says why)
    return replace(prepared, analysis=an,
                   candidates=candidates(an, host_loops=False, isl_scheduler=False),
                   expansion=None,
                   splitting=Splitting(scop, tuple(records), (), notes=tuple(notes)),
                   snapshot=None,
                   recursion=stop)


def _parallel_dims(found: tuple[Transformation, ...], names: frozenset[str]) -> int:
    """The most space dimensions a candidate gives the statements ``names`` (summed)."""
    return max((sum(k.n_space for k in tr.kernels for s in k.statements if s in names)
                for tr in found), default=0)


def _snapshot(scop: Scop, an: Analysis, found: tuple[Transformation, ...]
              ) -> tuple[Snapshot | None, Analysis, tuple[Transformation, ...]]:
    """The region with its entry reads on a snapshot where that gives the original
    statements more parallel dimensions, else ``an`` and ``found`` as they are."""
    try:
        snapshot = snapshot_inputs(scop)
        if not snapshot.taken:
            return (snapshot if snapshot.refused else None), an, found
        names = frozenset(s.name for s in scop.statements)
        new_an = analyze(snapshot.scop)
        new_found = candidates(new_an)
    except isl.Error as e:  # optional, like the scheduler's own proposals
        return Snapshot(scop, (), (ExpandRefusal("*", f"isl failed ({e})"),)), an, found
    if _parallel_dims(new_found, names) > _parallel_dims(found, names):
        return snapshot, new_an, new_found
    why = "the scheduler found no more parallel loops with it"
    return Snapshot(scop, (), tuple(ExpandRefusal(t.array, why) for t in snapshot.taken)
                    + snapshot.refused), an, found


def _split(scop: Scop, an: Analysis, found: tuple[Transformation, ...]
           ) -> tuple[Splitting | None, Analysis, tuple[Transformation, ...]]:
    """The split region with its analysis and candidates where the scheduler finds a
    parallel plan for it, else ``an`` and ``found`` as they are (with why not)."""
    try:
        splitting = split_statements(scop, an.dependences)
        if not splitting.split:
            return splitting, an, found
        split_an = analyze(splitting.scop, splitting.dependences)
        split_found = candidates(split_an, limit=SPLIT_CANDIDATES)
    except isl.Error as e:  # optional, like the scheduler's own proposals
        return Splitting(scop, (), (Refusal("*", f"isl failed ({e})"),)), an, found
    if any(space_dims(tr) for tr in split_found):
        return splitting, split_an, split_found
    why = "the scheduler found no parallel plan for the pieces either"
    return Splitting(scop, (), tuple(Refusal(s.statement, why) for s in splitting.split)
                     + splitting.refused), an, found


@dataclass(frozen=True)
class Planned:
    """A variant tiled and placed, before its launches are proven and its code
    generated: what :func:`compile_variant` and the cost model's cover search
    (:mod:`polygpu.search.covers`: one tiling, many cuts) share."""

    prepared: Prepared  # the region the kernels come from (a relayout's: the relaid one)
    requested: Variant
    variant: Variant  # as built (a batch's: on the device)
    transformation: Transformation
    step: Analysis  # the host step's region, or the whole one
    kernels: tuple[TiledKernel, ...]
    memory: MemoryPlan


def plan_variant(prepared: Prepared, variant: Variant | None = None,
                 params: Mapping[str, int] | None = None) -> Planned:
    """``variant`` of ``prepared`` tiled and placed (:class:`Planned`); its accesses
    proven inside their arrays at ``params`` first."""
    requested = variant or Variant()
    prepared, variant = prepared.of(requested)
    an = prepared.analysis
    if params:
        require_in_bounds(an.scop, params)
    tr = prepared.transformation(variant)
    variant = batch_on_device(tr, variant)
    requested = batch_on_device(tr, requested)
    step = tr.step or an  # with host loops, the kernels are those of one host step
    kernels = tile(step.scop, step.dependences_with(tr.atomic), tr, variant)
    memory = plan_memory(step, tr, kernels, variant)
    return Planned(prepared, requested, variant, tr, step, kernels, memory)


def compile_variant(prepared: Prepared, variant: Variant | None = None,
                    params: Mapping[str, int] | None = None) -> Compiled:
    """Tile, place and generate one variant of a prepared region.

    Scheduling, tiling and placement stay parametric (and proven for every parameter
    value); a specializing variant fixes ``params`` only for the code generator.
    With ``params``, every access is first proven inside its array at those sizes
    (:func:`~polygpu.model.bounds.require_in_bounds`: once per region and sizes, cached,
    however many variants are compiled)."""
    p = plan_variant(prepared, variant, params)
    launch = _launch_plan(p.prepared.analysis, p.step, p.transformation, p.variant,
                          p.kernels, p.memory, params)
    program = _generate(p.transformation, p.variant, p.kernels, p.memory, params, launch)
    prepared, variant = p.prepared, p.variant
    return Compiled(prepared.spec, prepared.analysis, prepared.candidates, p.transformation,
                    p.requested, p.kernels, program, p.memory, prepared.source_scop,
                    prepared.expansion, prepared.splitting, prepared.snapshot,
                    launch.residences, prepared.relayout,
                    variant if variant != p.requested else None)


def launch_residences(planned: Planned, cuts: tuple[int, ...],
                      params: Mapping[str, int] | None) -> tuple[Residence, ...]:
    """A planned device-steps variant cut at ``cuts``: proven (refused as
    :func:`compile_variant` refuses it) and its launches' resident buffers planned,
    without generating code -- what the cost model prices."""
    p = planned
    return _launch_plan(p.prepared.analysis, p.step, p.transformation,
                        replace(p.variant, cuts=cuts), p.kernels, p.memory,
                        params).residences


@dataclass(frozen=True)
class _LaunchPlan:
    scop: Scop  # the step region, specialized where the variant is
    comment: str
    launches: tuple[tuple[int, ...], ...] | None  # kernels per launch (cuts), or None
    residences: tuple[Residence, ...]


def _launch_plan(region: Analysis, an: Analysis, tr: Transformation, variant: Variant,
                 kernels: tuple[TiledKernel, ...], memory: MemoryPlan,
                 params: Mapping[str, int] | None) -> _LaunchPlan:
    """Everything of a variant's program but its code: the device steps proven against
    ``region``'s dependences (with the variant's cuts), the launches, their residences,
    the groups checked; ``an`` is the step region the kernels come from."""
    if variant.device_steps:
        _prove_device_steps(region, tr, kernels, memory, variant)
    comment = describe(tr, variant)
    scop = an.scop
    if variant.specialize:
        missing = [p for p in scop.parameters if p not in (params or {})]
        if missing:
            raise PolygpuError(f"variant: specialize needs a value for every parameter "
                               f"(-p): missing {', '.join(missing)}", scop.loc)
        scop = scop.specialized(params)
        comment += "\nspecialized for " + ", ".join(
            f"{k}={v}" for k, v in scop.fixed_parameters.items())
    grid_dims = tr.host.grid_dims if tr.host is not None else 0
    launches = variant.launches(len(kernels)) if variant.cuts else None
    if launches is not None:
        if not variant.device_steps:
            raise PolygpuError("variant: cuts split a device-steps program into launches; "
                               "this plan launches its kernels from the host already",
                               scop.loc)
        comment += "\nlaunches (fusion cover): " + " | ".join(
            "kernels " + ", ".join(map(str, ks)) for ks in launches)
    residences = resident_plan(scop, kernels, memory, variant, grid_dims, launches)
    for n, residence in enumerate(residences):
        comment += ("\nresident in shared memory for the block's life"
                    + (f" (launch {n})" if len(residences) > 1 else "") + ": "
                    + ", ".join(f"{b.array} ({b.bytes} bytes)" for b in residence.buffers))
    elements = variant.elements_per_block
    if elements > 1:
        try:
            group = group_threads(kernels, memory, grid_dims, require=True)
            if not variant.device_steps:
                raise ValueError("elements per block need device steps")
            if group * elements > MAX_THREADS:
                raise ValueError(f"{elements} groups of {group} threads exceed a block's "
                                 f"{MAX_THREADS} threads")
            group_barrier(group, elements)  # (groups of warps: enough named barriers)
        except ValueError as e:
            raise PolygpuError(f"variant: elements_per_block {elements}: {e}",
                               scop.loc) from None
        comment += f"\n{elements} elements per block, a group of threads each"
    return _LaunchPlan(scop, comment, launches, residences)


def batch_on_device(tr: Transformation, variant: Variant) -> Variant:
    """``variant`` with ``device_steps`` set where ``tr`` has a ``batch`` host schedule:
    its first host dimension is a batch of elements, one per block, which the host
    could only run as millions of launches."""
    if tr.host is not None and tr.host.grid_dims and not variant.device_steps:
        return replace(variant, device_steps=True)
    return variant


def program_at(compiled: Compiled, params: Mapping[str, int]) -> KernelProgram:
    """The compiled variant's code for other ``params`` (a specializing variant's
    reference-check twin): the tiling and memory plan are parametric, only the code
    generator runs again."""
    require_in_bounds(compiled.analysis.scop, params)
    tr = compiled.transformation
    step = tr.step or compiled.analysis
    launch = _launch_plan(compiled.analysis, step, tr, compiled.variant, compiled.kernels,
                          compiled.memory, params)
    return _generate(tr, compiled.variant, compiled.kernels, compiled.memory, params, launch)


def _generate(tr: Transformation, variant: Variant,
              kernels: tuple[TiledKernel, ...], memory: MemoryPlan,
              params: Mapping[str, int] | None, launch: _LaunchPlan) -> KernelProgram:
    # sizes given without specializing still choose the index width (64-bit where 32-bit
    # offsets would overflow at them)
    return generate(launch.scop, kernels, launch.comment, memory, sizes=params,
                    device_steps=variant.device_steps, fast_math=variant.fast_math,
                    grid_dims=tr.host.grid_dims if tr.host is not None else 0,
                    residences=launch.residences, elements=variant.elements_per_block,
                    launch_kernels=launch.launches)


def resident_plan(scop: Scop, kernels: tuple[TiledKernel, ...], memory: MemoryPlan,
                  variant: Variant, grid_dims: int,
                  launches: tuple[tuple[int, ...], ...] | None = None
                  ) -> tuple[Residence, ...]:
    """The resident buffers of a ``resident`` variant, one Residence per launch (none
    for another variant), or why it cannot have any: it needs device steps, and some
    array must fit with a constant box (a specialized program's sizes, or sizes the
    region bounds).  Each launch of a cut program keeps its own kernels' data; a
    temporary two launches touch passes between them through global memory."""
    if not variant.resident:
        return ()
    if not variant.device_steps:
        raise PolygpuError("variant: resident keeps a device-steps block's data in shared "
                           "memory; it needs device_steps (host loops run on the device)",
                           scop.loc)
    staged = {b.array for b in memory.buffers if b.space == "shared"}
    launches = launches or (tuple(range(len(kernels))),)
    touched = [{a.array for k in ks for s in kernels[k].statements
                for a in scop.statement(s).accesses} for ks in launches]
    found = []
    for n, ks in enumerate(launches):
        own = tuple(kernels[k] for k in ks)
        static = sum(memory.shared_bytes(k.index) for k in own)
        # each element of a block has its own buffers: the block's shared memory is theirs
        budget = (MAX_SHARED_BYTES - static) // variant.elements_per_block
        others = frozenset().union(*(t for m, t in enumerate(touched) if m != n))
        residence = _launch_residence(scop, own, grid_dims, budget, frozenset(staged),
                                      others, variant.packed)
        if not residence.buffers:
            why = "; ".join(f"{a}: {reason}" for a, reason in residence.left) or \
                "no arrays"
            where = f" in launch {n}" if len(launches) > 1 else ""
            raise PolygpuError(f"variant: resident, but no array can stay in shared memory"
                               f"{where} ({why})", scop.loc)
        found.append(residence)
    if variant.packed and not any(b.packed for r in found for b in r.buffers):
        raise PolygpuError("variant: packed, but no resident array's footprint is a lower "
                           "or upper triangle of its box (column at most or at least row, "
                           "proven with isl)", scop.loc)
    return tuple(found)


_RESIDENCES: dict[tuple, tuple] = {}  # (scop statements, kernels, residence) by ids


def _launch_residence(scop: Scop, kernels: tuple[TiledKernel, ...], grid_dims: int,
                      budget: int, staged: frozenset[str], others: frozenset[str],
                      packed: bool = False) -> Residence:
    """:func:`~polygpu.memory.residence.plan_residence`, once per launch: a cover search
    prices a launch of the same kernels in many covers, and what the rest of a cover
    contributes (``others``: the arrays its other launches touch) depends only on which
    kernels are outside this launch, not on how they are cut."""
    key = (id(scop.statements), str(scop.context), tuple(map(id, kernels)), grid_dims,
           budget, staged, others, packed)
    seen = _RESIDENCES.get(key)
    if seen is not None and seen[0] is scop.statements and all(
            a is b for a, b in zip(seen[1], kernels, strict=True)):
        return seen[2]
    residence = plan_residence(scop, kernels, grid_dims, budget, staged, others, packed)
    if len(_RESIDENCES) > 256:
        _RESIDENCES.clear()
    _RESIDENCES[key] = (scop.statements, kernels, residence)
    return residence


_UNCUT_PROVEN: dict[tuple[int, int], tuple] = {}  # (the objects themselves kept: ids live)


def _prove_device_steps(an: Analysis, tr: Transformation, kernels: tuple[TiledKernel, ...],
                        memory: MemoryPlan, variant: Variant) -> None:
    """Refuse a device-steps variant the kernels cannot take, and prove the plan again
    with the host loops and kernel boundaries as ``barrier`` dimensions of one block
    (:mod:`polygpu.schedule.legality`): what the generated kernel relies on.  A
    batch's element dimension is a ``block`` dimension: nothing may cross elements.
    With ``cuts``, each statement's launch comes first, a ``global`` dimension: every
    launch's steps, for all elements, run before the next launch's (a cut through a
    step loop -- a factorization's pivot column from its update -- is refused)."""
    if tr.host is None:
        raise PolygpuError("variant: device_steps runs host loops on the device, but this "
                           "transformation has none (every kernel is launched once)",
                           an.scop.loc)
    if not device_steps_possible(tr.step.scop, kernels, memory):
        raise PolygpuError("variant: device_steps is impossible for these kernels: a "
                           "kernel with fewer threads than the block stages data in "
                           "shared memory or needs dynamic shared memory; set "
                           "\"shared\": false or equal thread counts", an.scop.loc)
    grid = tr.host.grid_dims
    deps = an.dependences_with(tr.atomic)
    # the plan without its cuts, proven once per transformation and kernels (a cover
    # search proves tens of cuts of one plan)
    key = (id(tr), id(kernels))
    seen = _UNCUT_PROVEN.get(key)
    if seen is None or seen[0] is not tr or seen[1] is not kernels:
        es = transformation_schedule(tr)
        kinds = ("block",) * grid + tuple("barrier" if k == "global" else k
                                          for k in es.kinds[grid:])
        prove_legal(deps, ExecutionSchedule(es.schedule, kinds))
        if len(_UNCUT_PROVEN) > 64:
            _UNCUT_PROVEN.clear()
        seen = _UNCUT_PROVEN[key] = (tr, kernels, es.schedule, kinds)
    schedule, kinds = seen[2], seen[3]
    # each statement's launch first (the plan above is proven: what breaks now is the
    # cut's doing, the variant's -- bad input, not a bug).  Cuts are proven one at a
    # time: with the plan proven uncut, a dependence breaks exactly when some cut lies
    # between its sink's kernel and its source's (a later launch's statement before an
    # earlier one's), so a set of cuts is legal exactly when each cut alone is -- and
    # a cover search's tens of covers reuse the proofs of its few cuts
    for c in variant.cuts:
        broken = _cut_violations(deps, schedule, kinds, tr, kernels, c)
        if broken:
            what, pairs = broken[0]
            raise PolygpuError(f"variant: cuts {list(variant.cuts)} would run a statement "
                               f"before one it depends on (the cut before kernel {c} "
                               f"breaks {len(broken)} dependence(s) between launches; "
                               f"e.g. the {what}: {pairs})", an.scop.loc)


_CUTS_PROVEN: dict[tuple[int, int, int], tuple] = {}  # (tr, kernels, violations) by ids


def _cut_violations(deps, schedule: isl.UnionMap, kinds: tuple[str, ...],
                    tr: Transformation, kernels: tuple[TiledKernel, ...], cut: int) -> list:
    """The dependences broken by launching ``kernels`` before kernel ``cut`` apart from
    the rest (``schedule``, ``kinds``: the proven one-launch plan); cached per plan."""
    key = (id(tr), id(kernels), cut)
    seen = _CUTS_PROVEN.get(key)
    if seen is not None and seen[0] is tr and seen[1] is kernels:
        return seen[2]
    launch = {s: int(k >= cut) for k, kernel in enumerate(kernels)
              for s in kernel.statements}
    staged = union_of([insert_constants(m, 0, [launch[m.get_tuple_name(isl.dim_type.in_)]])
                       for m in maps_of(schedule)], schedule.get_space())
    broken = violations(deps, ExecutionSchedule(staged, ("global",) + kinds))
    if len(_CUTS_PROVEN) > 256:
        _CUTS_PROVEN.clear()
    _CUTS_PROVEN[key] = (tr, kernels, broken)
    return broken


def describe(tr: Transformation, variant: Variant) -> str:
    """The transformation in words, for the header of the generated file."""
    lines = [f"transformation ({tr.origin}), variant {variant.to_json()}"]
    if tr.host is not None:
        lines.append(f"host loops ({', '.join(tr.host.names)}): {tr.host.schedule}")
    for k, kernel in enumerate(tr.kernels):
        lines.append(f"kernel {k}: space {kernel.space}")
        lines.append(f"          time  {kernel.time}")
    return "\n".join(lines)
