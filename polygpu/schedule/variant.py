"""The tunable parameters of a program: one :class:`Variant`, optionally with per-kernel
overrides.

A program's kernels differ (atax's row reduction and its column update, a factorization's
pivot column and its trailing update), so one tile shape for all is rarely right.  A
``Variant`` holds the program-wide settings and, in ``kernels``, the fields that a given
kernel overrides; :meth:`Variant.for_kernel` merges them, and every stage that tiles,
places or generates one kernel reads that kernel's merged variant.  ``candidate`` and
``specialize`` (and ``device_steps``, ``resident``, ``packed``, ``elements_per_block``,
``fast_math``, ``relayout``, ``recursion``, ``splits``, ``cuts``) concern the whole program and
cannot be overridden per kernel.

JSON form (``compile --variant``, the tuning database): the fields, plus
``"kernels": {"1": {"tile": [32, 32], "threads": [8, 32]}}`` when a kernel differs.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass, fields, replace

from polygpu.errors import PolygpuError

MAX_MAPPED = 3  # CUDA grids and blocks have three dimensions
MAX_THREADS = 1024
PROGRAM_WIDE = ("candidate", "specialize", "device_steps", "resident", "packed", "fast_math",
                "elements_per_block", "relayout", "recursion", "splits", "cuts", "kernels")


@dataclass(frozen=True)

class Variant:
    """The tunable parameters of one kernel program.

    ``tile`` and ``threads`` list the innermost space dimension *last* and are
    right-aligned to each kernel's mapped dimensions (a kernel with one space dimension
    uses the last entry).  ``threads`` entries must not exceed the ``tile`` entries;
    ``tile[d] / threads[d]`` points per thread and dimension form its register tile.
    """

    candidate: int = 0
    tile: tuple[int, ...] = (4, 128)
    threads: tuple[int, ...] = (4, 128)
    jam: bool = False
    time_tile: int = 32
    unroll: int = 1
    blocked: bool = False  # thread distribution: cyclic (default) or blocked
    chunk: int = 1  # cyclic runs of this many consecutive points per thread (see above)
    # software pipelining of shared copy-ins: load the next tile's elements into
    # registers while the current tile is computed (codegen/staging.py)
    prefetch: bool = False
    # two shared buffers per staged array, used in turn by consecutive tiles: the next
    # tile's copy-in writes the other buffer, so one barrier per tile instead of two
    # (memory/placement.py decides where it is legal; codegen/staging.py)
    double_buffer: bool = False
    shared: bool = True  # memory stage: stage footprints through shared memory
    padding: int = -1  # shared buffers' padding: -1 = Algorithm 2's choice, else forced
    registers: bool = True  # memory stage: keep per-thread footprints in registers
    # bake the parameter values into the code (they then must be given to compile, and
    # the kernels run only at those values): constant bounds, no guards for whole tiles
    specialize: bool = False
    # host loops run on the device, in one thread block with a barrier after every
    # kernel of a step (codegen/cuda.py): one launch instead of one per kernel and step
    device_steps: bool = False
    # device steps: the block keeps what it touches in shared memory for its whole life,
    # copied in before the first step and out after the last (memory/residence.py)
    resident: bool = False
    # resident: an array whose block footprint is a lower triangle (a factorization's
    # element) stored packed, in half the shared memory (memory/residence.py): more
    # elements resident an SM, a few integer operations more a reference
    packed: bool = False
    # a batch's device steps: elements per block, each run by a group of threads (the
    # kernels' threads rounded up to a power of two, at most a warp) with __syncwarp
    elements_per_block: int = 1
    # float math through CUDA's fast intrinsics (expf, logf, sinf, cosf, powf as __expf,
    # ...: a few instructions instead of a software routine, within a few ulp for
    # moderate arguments); opted into explicitly (``--fast-math``), never by the search
    # alone, and checked like any program
    fast_math: bool = False
    # a batch stored interleaved (the element index last) run on a copy with the element
    # outermost, transposed in before and out after (transform/layout.py): ``candidate``
    # then counts the relaid region's scheduler candidates, and its kernels include the
    # transposes
    relayout: bool = False
    # a register tile's time loop in double as warp mma.sync.m8n8k4 steps on the tensor
    # cores (sm_80 on; codegen/mma.py): 4 threads along x with runs of 2 points, a
    # multiple of 8 along y
    mma: bool = False
    # the instruction's k under ``mma``: 4 (m16n8k4, m8n8k4), 8 or 16 (m16n8k8 /
    # m16n8k16 on sm_90: fewer, larger tensor-core steps; a time loop whose trip is no
    # multiple of it takes steps of 4)
    mma_k: int = 4
    # __launch_bounds__'s second argument: ptxas holds the kernel's registers to what
    # this many blocks an SM leave (0: its own choice) -- occupancy bought with possible
    # spills, which ptxas's report (search/occupancy.py) shows
    min_blocks: int = 0
    # each point of the kernel's threads run by this many lanes of a warp (a power of two,
    # at most 32): a substitution turned right-looking, its rows at each step shared by
    # the lanes (schedule/lane_loops.py, where proven), else the thread's sums split over
    # the lanes and combined by shuffles; everything else done by the first lane
    # (codegen/cuda.py).  For kernels with few threads and long serial chains (a solve's
    # leaf: a thread a column, its rows in turn); 1: off.  Launched kernels only
    lanes: int = 1
    # every loop of a thread's work inside the deepest tile level unrolled completely
    # (by nvcc: ``#pragma unroll``), so a footprint a thread re-touches along them -- a
    # solve leaf's column -- is held in registers with constant indices; with one lane a
    # substitution is also turned right-looking where proven (schedule/lane_loops.py):
    # a row's division then waits on one FMA of the row before, not on its whole sum.
    # With ``lanes`` > 1 the thread's written register copies are spread over its lanes
    # (lane l holds elements l, l + lanes, ... of their longest dimension), each lane
    # runs the statements that write its own elements, and an element of another lane
    # comes by ``__shfl_sync`` (codegen/lane_registers.py): a solve leaf's column in
    # the lanes' registers, no shared memory in its chain.
    # Only for constant, small trip counts (``specialize``; codegen refuses more than
    # :data:`polygpu.codegen.thread_ast.MAX_UNROLLED` points a thread).  Launched kernels
    full_unroll: bool = False
    # an in-place triangular update's rows split recursively down to this many a leaf
    # (seed 002; transform/recursion.py: products and leaves, proven), at the sizes
    # given; 0: not split.  ``candidate`` then counts the split region's candidates
    recursion: int = 0
    # the candidate's kernels split before these statement positions (counted over the
    # kernels' statements in order): nests the scheduler fused run as consecutive
    # kernels, each tiled on its own (schedule/splits.py, proven).  Empty: as scheduled.
    # Kernel numbers (``cuts``, ``kernels``) count the kernels after the splits
    splits: tuple[int, ...] = ()
    # a device-steps program as several launches (seed 003's fusion cover): a new launch
    # begins at each of these kernels, each launch running its kernels' steps in one
    # block (an element's, in a batch) with its own resident buffers; what crosses a cut
    # goes through global memory (codegen/cuda.py, proven with the cuts as global
    # barriers).  Empty: one launch
    cuts: tuple[int, ...] = ()
    # per-kernel overrides: (kernel index, ((field, value), ...)), sorted by index
    kernels: tuple[tuple[int, tuple[tuple[str, object], ...]], ...] = ()

    def __post_init__(self):
        if len(self.tile) != len(self.threads) or not 1 <= len(self.tile) <= MAX_MAPPED:
            raise PolygpuError(f"variant: tile {self.tile} and threads {self.threads} must "
                               f"have the same length, 1 to {MAX_MAPPED}")
        for t, n in zip(self.tile, self.threads, strict=True):
            if not (1 <= n <= t):
                raise PolygpuError(f"variant: need 1 <= threads <= tile, got {n} and {t}")
        total = math.prod(self.threads)
        if total > MAX_THREADS:
            raise PolygpuError(f"variant: {total} threads per block exceed {MAX_THREADS}")
        if not 1 <= self.elements_per_block <= 1024:
            raise PolygpuError("variant: elements_per_block is 1 to 1024")
        if self.time_tile < 0 or self.unroll < 1 or self.candidate < 0 or self.chunk < 1:
            raise PolygpuError("variant: time_tile >= 0, unroll >= 1, candidate >= 0, "
                               "chunk >= 1")
        if self.blocked and self.chunk > 1:
            raise PolygpuError("variant: blocked already deals each thread one contiguous "
                               "run; chunk must be 1 with it")
        if self.mma_k not in (4, 8, 16) or (self.mma_k != 4 and not self.mma):
            raise PolygpuError(f"variant: mma_k {self.mma_k} is 4, 8 or 16, and other "
                               "than 4 only with mma")
        if not 0 <= self.min_blocks <= 32:
            raise PolygpuError(f"variant: min_blocks {self.min_blocks} is 0 (ptxas's "
                               "choice) to 32 blocks an SM")
        if self.lanes not in (1, 2, 4, 8, 16, 32):
            raise PolygpuError(f"variant: lanes {self.lanes} is a power of two, 1 to 32")
        if total * self.lanes > MAX_THREADS:
            raise PolygpuError(f"variant: {total} threads of {self.lanes} lanes each exceed "
                               f"{MAX_THREADS} per block")
        if self.full_unroll and self.device_steps:
            raise PolygpuError("variant: full_unroll holds a launched kernel's thread's "
                               "work in registers: no device_steps")
        if self.recursion < 0:
            raise PolygpuError(f"variant: recursion {self.recursion} is 0 (off) or the rows "
                               "of a leaf")
        if list(self.cuts) != sorted(set(self.cuts)) or any(k < 1 for k in self.cuts):
            raise PolygpuError(f"variant: cuts {list(self.cuts)} are kernel numbers, "
                               "increasing, each at least 1 (kernel 0 starts the first "
                               "launch)")
        if list(self.splits) != sorted(set(self.splits)) or any(p < 1 for p in self.splits):
            raise PolygpuError(f"variant: splits {list(self.splits)} are statement "
                               "positions, increasing, each at least 1")
        if self.packed and not self.resident:
            raise PolygpuError("variant: packed stores resident triangles packed; it needs "
                               "resident")
        if not -1 <= self.padding < 32:
            raise PolygpuError(f"variant: padding {self.padding} is not -1 (solver) or "
                               "0..31")

        for index, overrides in self.kernels:
            bad = [name for name, _ in overrides
                   if name in PROGRAM_WIDE or name not in self.__dataclass_fields__]
            if bad or index < 0:
                raise PolygpuError(f"variant: kernel {index} cannot override {bad or index}: "
                                   "a kernel entry sets per-kernel fields only (not "
                                   f"{', '.join(PROGRAM_WIDE)})")
            self.for_kernel(index)  # validates the merged values

    def launches(self, n_kernels: int) -> tuple[tuple[int, ...], ...]:
        """The kernels of each launch of a device-steps program of ``n_kernels``
        kernels, as ``cuts`` splits them (one launch of all without cuts)."""
        if self.cuts and self.cuts[-1] >= n_kernels:
            raise PolygpuError(f"variant: cuts {list(self.cuts)}: the program has "
                               f"{n_kernels} kernels (0..{n_kernels - 1}), a cut is at 1 "
                               f"to {n_kernels - 1}")
        bounds = (0, *self.cuts, n_kernels)
        return tuple(tuple(range(a, b)) for a, b in itertools.pairwise(bounds))

    def for_kernel(self, index: int) -> Variant:
        """The variant kernel ``index`` is tiled and placed with: the program-wide fields
        with this kernel's overrides."""
        for k, overrides in self.kernels:
            if k == index:
                return replace(self, kernels=(), **dict(overrides))
        return replace(self, kernels=()) if self.kernels else self

    def with_kernel(self, index: int, kernel: Variant) -> Variant:
        """This variant with kernel ``index`` set to ``kernel``'s per-kernel fields (only
        those that differ from the program-wide ones are stored)."""
        base = replace(self, kernels=())
        # sorted by name, as from_json sorts them: a variant equals its JSON round trip
        overrides = tuple(sorted((f.name, getattr(kernel, f.name)) for f in fields(Variant)
                                 if f.name not in PROGRAM_WIDE
                                 and getattr(kernel, f.name) != getattr(base, f.name)))
        others = tuple((k, o) for k, o in self.kernels if k != index)
        entries = others + (((index, overrides),) if overrides else ())
        return replace(self, kernels=tuple(sorted(entries)))

    def to_json(self) -> dict:
        # the fields are ints, bools and tuples of ints: a shallow dict is what asdict()
        # gives, without its deep copies (a search keys tens of thousands of variants)
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "kernels"}
        if not self.double_buffer:  # absent when off, so older records keep their keys
            del data["double_buffer"]
        if not self.fast_math:
            del data["fast_math"]
        if not self.relayout:
            del data["relayout"]
        if not self.mma:
            del data["mma"]
        if self.mma_k == 4:
            del data["mma_k"]
        if not self.min_blocks:
            del data["min_blocks"]
        if not self.recursion:
            del data["recursion"]
        if self.lanes == 1:
            del data["lanes"]
        if not self.full_unroll:
            del data["full_unroll"]
        if not self.resident:
            del data["resident"]
        if not self.packed:
            del data["packed"]
        if self.elements_per_block == 1:
            del data["elements_per_block"]
        if not self.splits:
            del data["splits"]
        if not self.cuts:
            del data["cuts"]
        if self.kernels:  # absent when uniform, so older records keep their keys
            data["kernels"] = {str(k): {name: list(v) if isinstance(v, tuple) else v
                                        for name, v in o} for k, o in self.kernels}
        return data

    @staticmethod
    def from_json(data: dict | str) -> Variant:
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except json.JSONDecodeError as err:
                raise PolygpuError(f"variant: not valid JSON: {err}") from None
        known = set(Variant.__dataclass_fields__)
        unknown = set(data) - known
        if unknown:
            raise PolygpuError(f"variant: unknown field(s) {sorted(unknown)}; known: "
                               f"{sorted(known)}")
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()
                  if k != "kernels"}
        per_kernel = data.get("kernels") or {}
        if not isinstance(per_kernel, dict):
            raise PolygpuError("variant: 'kernels' must map kernel numbers to fields")
        entries = []
        for key, overrides in per_kernel.items():
            if not str(key).isdigit() or not isinstance(overrides, dict):
                raise PolygpuError(f"variant: kernels entry {key!r}: need a kernel number "
                                   "mapped to an object of fields")
            entries.append((int(key), tuple(sorted(
                (name, tuple(v) if isinstance(v, list) else v)
                for name, v in overrides.items()))))
        return Variant(**values, kernels=tuple(sorted(entries)))


