"""Plans for a recursion variant's pieces (seed 002, KBLAS; issue 22).

Why: a ``Variant.recursion`` splits an in-place triangular update into leaves (diagonal
blocks, their rows in turn) and products (off-diagonal blocks: general matrix products
that read only rows nobody writes meanwhile; transform/recursion.py).  The products
hold almost all the work, and their sizes differ by powers of two -- at m = 2048 and a
stop size of 128 from 128 x n to 1024 x n rows -- so one program-wide tile fits none of
them well: a 128 x 128 register tile leaves a 128-row product 16 blocks for 132 SMs, a
32 x 32 tile gives the 1024-row one four times the loads per FMA.  Each product gets its
own plan (a per-kernel variant), the model's cheapest among the mm plans that fit it:
the plan of every product is priced by :func:`polygpu.search.cost.launch_seconds` on a
sketch of the program with that plan wherever it fits, and the kernels are chosen
independently (each is its own launch, their costs add).

The mm plans are the measured ones: in float the 128 x 128 tile of 8 x 8 points in runs
of 4, time tiles of 16, prefetched (mm's tuned plan at 2048-8192 on the H200,
``tuning/results/NVIDIA-H200/figure5_mm.md``), then 64 x 64 and 32 x 32 ones; in double a
64 x 64 tile whose time loop runs on the tensor cores (``Variant.mma``, whole tiles only;
the batched products' plan, ``space.element_variants``), its FMA twin and the 32 x 32
tile.  Leaves, whose rows are parallel once they read a workspace
(``recursion.snapshot_leaves``; the scheduler fuses each with the product after it), are
planned like products; the workspace copies and other kernels (PolyBench trmm's scaling
pass) take a wide row.  A leaf of one mapped dimension (a solve's: no workspace can be
proven, its rows run in turn, a thread a column) runs each column on a warp's lanes
(``Variant.lanes``), right-looking: once a row is divided, the lanes update the rows
below it -- a thread a column gave the GPU 16 warps for a 512-column leaf, 85-90 % of a
recursive trsm's time.  Up to :data:`REGISTER_ROWS` rows the column is spread over the
lanes' registers (:data:`REGISTER_LEAF`, codegen/lane_registers.py: no shared memory in
the chain), beyond in shared memory (:data:`SOLVE_LEAF`; unrolled whole, a longer leaf
would copy its statements past ``thread_ast.MAX_UNROLLED``).  These plans are measured
ones, not priced by the model (which does not see lanes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from polygpu.errors import PolygpuError
from polygpu.pipeline import Prepared
from polygpu.schedule.variant import Variant
from polygpu.search.cost import launch_seconds
from polygpu.search.occupancy import SM_90, Limits
from polygpu.search.space import kernel_shapes, kernel_time_extent

# the stop sizes the search and the tuning script try (the 64..512)
STOPS = (64, 128, 256, 512)
LEAF = Variant(tile=(32,), threads=(32,))  # a warp a strip of 32 columns
OTHER = Variant(tile=(4, 128), threads=(4, 128))  # a kernel that is no piece
# a solve's leaf: each column on a warp's lanes (right-looking where proven: the rows
# below a divided row updated by the lanes in turn), 8 columns a block, the leaf's strip
# and rows staged in shared memory, the next time tile's rows prefetched and
# double-buffered (measured: tuning/results/NVIDIA-H200/triangular.md, 2026-12-02)
SOLVE_LEAF = Variant(tile=(8,), threads=(8,), lanes=32, registers=False, prefetch=True,
                     double_buffer=True)
# ... up to REGISTER_ROWS rows: the column spread over the warp's lanes in registers
# (lane l holds rows l, l + 32, ...; the divided row shuffled to the others), the leaf
# unrolled whole.  Measured on one H100 at 512 right-hand sides: a 64-row leaf 12.6 us
# against SOLVE_LEAF's 17.8, a 128-row one 27.9 against 41.2; the solve at 4096 1.02x /
# 1.08x cuBLAS at stops 64 / 128 (0.84x before)
# (tuning/results/NVIDIA-H100-80GB-HBM3/triangular.md, 2026-12-08)
REGISTER_LEAF = Variant(tile=(8,), threads=(8,), lanes=32, full_unroll=True, time_tile=0)
REGISTER_ROWS = 128
FLOAT_PRODUCTS = (
    Variant(tile=(128, 128), threads=(16, 16), jam=True, time_tile=16, unroll=4, chunk=4,
            prefetch=True),
    Variant(tile=(64, 64), threads=(16, 16), jam=True, time_tile=16, unroll=4, chunk=4,
            prefetch=True),
    Variant(tile=(32, 32), threads=(8, 32), jam=True))
DOUBLE_PRODUCTS = (
    Variant(tile=(64, 64), threads=(32, 4), jam=True, time_tile=16, unroll=4, chunk=2,
            prefetch=True, double_buffer=True, mma=True),
    Variant(tile=(64, 64), threads=(16, 16), jam=True, time_tile=16, unroll=4, chunk=2,
            prefetch=True, double_buffer=True),
    Variant(tile=(32, 32), threads=(8, 32), jam=True))


@dataclass(frozen=True)
class RecursionPlan:
    """A recursion variant with its pieces' plans, the model's seconds for it, and per
    product kernel the plan it took (index into the product plans)."""

    variant: Variant
    seconds: float
    products: tuple[tuple[int, int], ...]  # (kernel, plan index)

    def to_json(self) -> dict:
        return {"variant": self.variant.to_json(),
                "predicted_ms": round(self.seconds * 1e3, 4),
                "products": {str(k): p for k, p in self.products}}


def piece_kinds(region: Prepared) -> dict[str, str]:
    """Statement -> "leaf" or "product" for the pieces of a recursive region."""
    if region.splitting is None:
        return {}
    return {p.name: p.where.split(":")[0] for s in region.splitting.split for p in s.pieces}


def _fits(plan: Variant, extents: Sequence[int], steps: int) -> bool:
    """Whether ``plan``'s tile fits a product of ``extents`` (rows, columns) in
    ``steps`` steps: no tile larger than the block, and the tensor-core plan only on whole
    tiles (codegen/mma.py refuses partial ones)."""
    if any(t > e for t, e in zip(plan.tile, extents[-len(plan.tile):], strict=True)):
        return False
    if plan.mma:
        return all(e % t == 0 for t, e in zip(plan.tile, extents[-2:], strict=True)) and \
            steps % plan.time_tile == 0
    return True


def solve_leaf(stop: int) -> Variant:
    """The plan of a solve's leaf of at most ``stop`` rows (module doc)."""
    return REGISTER_LEAF if stop <= REGISTER_ROWS else SOLVE_LEAF


def recursion_plan(prepared: Prepared, params: Mapping[str, int], stop: int,
                   limits: Limits = SM_90, leaf: Variant | None = None) -> RecursionPlan:
    """The recursion variant of ``prepared`` at ``params`` with leaves of at most
    ``stop`` rows, each product with the model's cheapest fitting mm plan (module doc),
    each leaf whose rows run in turn with ``leaf`` (default: :func:`solve_leaf`);
    PolygpuError where the region cannot be split so."""
    from polygpu.search.plan_model import launch_costs, sketch

    leaf = solve_leaf(stop) if leaf is None else leaf

    region = prepared.recursive(stop)
    kinds = piece_kinds(region)
    kernels = region.candidates[0].kernels
    shapes = kernel_shapes(region, params, 0)
    double = any(a.dtype == "float64" for a in region.analysis.scop.arrays)
    plans = DOUBLE_PRODUCTS if double else FLOAT_PRODUCTS
    base = Variant(tile=LEAF.tile, threads=LEAF.threads, specialize=True, recursion=stop)
    products, fitting = [], {}
    for k, (ks, shape) in enumerate(zip(kernels, shapes, strict=True)):
        kind = kinds.get(ks.statements[0])
        if kind in ("product", "leaf") and shape.n_mapped == 2 and shape.has_time_loop:
            steps = kernel_time_extent(ks, params)
            fitting[k] = [p for p, plan in enumerate(plans)
                          if _fits(plan, shape.extents, steps)] or [len(plans) - 1]
            products.append(k)
        elif kind == "leaf" and shape.n_mapped == 1 and shape.has_time_loop:
            base = base.with_kernel(k, leaf)
        elif kind != "leaf" and shape.n_mapped >= 2:
            base = base.with_kernel(k, OTHER)
    if not products:
        raise PolygpuError(f"recursion {stop}: the split region has no product to plan")
    # every product priced with every plan that fits it (one sketch per plan)
    seconds: dict[tuple[int, int], float] = {}
    others = 0.0
    for p in range(len(plans)):
        variant = base
        for k in products:
            fit = p if p in fitting[k] else fitting[k][-1]  # (priced with its own)
            variant = variant.with_kernel(k, plans[fit])
        costs = launch_costs(sketch(prepared, variant), params, limits)
        by_kernel: dict[int, float] = {}
        for x in costs:
            k = int(x.kernel.rsplit("_kernel", 1)[1])
            by_kernel[k] = by_kernel.get(k, 0.0) + launch_seconds(x, limits)
        for k in products:
            if p in fitting[k]:
                seconds[k, p] = by_kernel[k]
        if p == 0:
            others = sum(s for k, s in by_kernel.items() if k not in fitting)
    chosen = []
    variant = base
    total = others
    for k in products:
        # ties keep the earlier (larger) plan
        p = min(fitting[k], key=lambda q: (seconds[k, q], q))
        chosen.append((k, p))
        variant = variant.with_kernel(k, plans[p])
        total += seconds[k, p]
    return RecursionPlan(variant, total, tuple(chosen))


def recursion_plans(prepared: Prepared, params: Mapping[str, int],
                    stops: Sequence[int] = STOPS, limits: Limits = SM_90
                    ) -> list[RecursionPlan]:
    """:func:`recursion_plan` for every stop size of ``stops`` the region can be split
    at (those at least as large as its rows are left out), cheapest first."""
    found = []
    for stop in stops:
        try:
            found.append(recursion_plan(prepared, params, stop, limits))
        except PolygpuError:
            continue
    return sorted(found, key=lambda r: r.seconds)
