"""The recursion of seed 002 (KBLAS) as an index-set split (transform/recursion.py): the
paper's partition rule, the blocks of an in-place triangular product in the tree's
in-order, proven to keep every value's flow; wrong orders and a scaling that cannot
leave its loops refused by the same proof."""

from __future__ import annotations

from dataclasses import replace

import pytest

from polygpu.errors import PolygpuError
from polygpu.pipeline import prepare
from polygpu.transform import recursion
from polygpu.transform.split import split_into, verify_split

TRMM = "kernels/polybench/trmm.c"  # B[i][j] += A[k][i] * B[k][j], k > i; B[i][j] *= alpha
TRISOLV = "kernels/polybench/trisolv.c"


def _trmm(m: int, n: int = 23):
    sizes = {"m": m, "n": n}
    scop = recursion.at_sizes(prepare(TRMM, params=sizes).source_scop, sizes)
    return scop, recursion.distribute(scop, "S1")


def test_the_split_point_is_the_largest_power_of_two_strictly_below():
    assert [recursion.split_point(n) for n in (2, 3, 5, 8, 9, 32, 37, 100, 4096)] == \
        [1, 2, 4, 4, 8, 16, 32, 64, 2048]
    with pytest.raises(ValueError):
        recursion.split_point(1)


def test_the_partition_tiles_the_square_in_order():
    blocks = recursion.partition(0, 37, 8)
    assert [(b.kind, b.rows, b.steps) for b in blocks[:4]] == [
        ("leaf", (0, 8), (0, 8)), ("product", (0, 8), (8, 16)),
        ("product", (8, 16), (0, 8)), ("leaf", (8, 16), (8, 16))]
    assert [(b.rows, b.steps) for b in blocks if b.kind == "leaf"] == [
        ((0, 8), (0, 8)), ((8, 16), (8, 16)), ((16, 24), (16, 24)), ((24, 32), (24, 32)),
        ((32, 37), (32, 37))]
    covered = [(r, k) for b in blocks for r in range(*b.rows) for k in range(*b.steps)]
    assert sorted(covered) == [(r, k) for r in range(37) for k in range(37)]


def test_trmm_scaling_leaves_its_loops_and_the_product_splits_in_order():
    """PolyBench's trmm (left, lower, transposed, unit): alpha's pass moves after the
    sums (each row is read, as the old value, only by rows above it, before it is
    scaled), then the sum splits into the recursion's blocks: each node's left half,
    its product (rows [lo, mid) over steps [mid, hi): old rows only), its right half."""
    scop, distributed = _trmm(37)
    assert distributed.statement("S1").schedule.range().dim_min_val(0).to_python() == 1
    with pytest.raises(PolygpuError, match="also hold S1"):
        recursion.recursive_split(scop, "S0", 8)
    split, record = recursion.recursive_split(distributed, "S0", 8)
    assert [p.where for p in record.pieces] == [
        "leaf: i in [0, 8), k in [0, 8)", "product: i in [0, 8), k in [8, 16)",
        "leaf: i in [8, 16), k in [8, 16)", "product: i in [0, 16), k in [16, 32)",
        "leaf: i in [16, 24), k in [16, 24)", "product: i in [16, 24), k in [24, 32)",
        "leaf: i in [24, 32), k in [24, 32)", "product: i in [0, 32), k in [32, 37)",
        "leaf: i in [32, 37), k in [32, 37)"]
    assert verify_split(distributed, split, record) is None


@pytest.mark.parametrize(("m", "stop", "pieces"), [(100, 4, 49), (100, 16, 13), (64, 8, 15)])
def test_several_levels_at_odd_and_even_sizes_are_proven(m, stop, pieces):
    _, distributed = _trmm(m)
    _, record = recursion.recursive_split(distributed, "S0", stop)
    assert len(record.pieces) == pieces
    assert record.pieces[0].where.startswith("leaf: i in [0, ")


@pytest.mark.parametrize("swap", [(0, 1), (1, 2)])
def test_a_wrong_order_fails_the_proof(swap):
    """(0, 1): the first product before the leaf it follows (row i's sum would add the
    steps of [8, 16) before those of [0, 8)); (1, 2): after the right half, which has
    overwritten rows 8..15 the product reads as old values (the paper's two wrong
    orders)."""
    _, distributed = _trmm(37)
    split, record = recursion.recursive_split(distributed, "S0", 8)
    pieces = [(p.where, p.domain.set_tuple_name("S0")) for p in record.pieces]
    order = list(range(len(pieces)))
    a, b = swap
    order[a], order[b] = order[b], order[a]
    wrong, wrong_record = split_into(distributed, "S0", pieces, 0, order)
    problem = verify_split(distributed, wrong, wrong_record)
    assert problem is not None and "flow" in problem


def test_a_division_that_later_rows_read_cannot_leave_its_loop():
    """trisolv: ``x[i] = x[i] / L[i][i]`` is read by every later row's sum; run after
    the whole loop, those rows would read undivided values."""
    sizes = {"n": 17}
    scop = recursion.at_sizes(prepare(TRISOLV, params=sizes).source_scop, sizes)
    last = scop.statements[-1].name
    with pytest.raises(PolygpuError, match="cannot run after its loops"):
        recursion.distribute(scop, last)


def test_a_block_no_larger_than_the_stop_size_is_not_split():
    _, distributed = _trmm(8)
    with pytest.raises(PolygpuError, match="no more than the stop size"):
        recursion.recursive_split(distributed, "S0", 8)


def test_a_product_without_an_in_place_triangle_has_no_rows_to_recurse_on():
    sizes = {"n": 16}
    scop = recursion.at_sizes(prepare("kernels/mm.c", params=sizes).source_scop, sizes)
    with pytest.raises(PolygpuError, match="in-place triangular update"):
        recursion.roles(scop, scop.statements[-1].name)


# --------------------------------------------------------------------------------------
# Through the pipeline: Variant.recursion
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("m", "stop", "launches"), [(37, 8, 10), (100, 16, 14)])
def test_a_recursive_trmm_compiles_to_its_blocks_and_is_exact(m, stop, launches):
    """The variant compiles the split region: each leaf's rows copied to the workspace
    first (a kernel of its own), then the leaf and the product after it, parallel over
    their rows and columns (the scheduler fuses the two: each element's sum goes on in
    its own thread), the scaling pass with the last leaf; checked against the original
    nest on the emulator at odd sizes, several levels deep."""
    from polygpu.pipeline import compile_region
    from polygpu.runtime.check import check_program
    from polygpu.schedule.variant import Variant

    sizes = {"m": m, "n": 23}
    variant = Variant(tile=(32, 32), threads=(8, 32), specialize=True, recursion=stop)
    compiled = compile_region(TRMM, variant=variant, params=sizes)
    assert len(compiled.program.launches) == launches
    (record,) = compiled.splitting.split
    assert record.cuts == (f"i recursively, stop {stop}",)
    kinds = {p.name: p.where.split(":")[0] for p in record.pieces}
    assert {k.n_mapped for k in compiled.kernels} == {2}
    copies = [k for k in compiled.kernels if not set(k.statements) & set(kinds)]
    leaves = [k for k in compiled.kernels if any(kinds.get(s) == "leaf" for s in k.statements)]
    assert len(copies) == len(leaves) == sum(1 for v in kinds.values() if v == "leaf")
    for copy in copies:  # right before its leaf
        assert compiled.kernels[copy.index + 1] in leaves
    workspace = next(a for a in compiled.kernel_scop.arrays if a.name.startswith("pg_w_"))
    assert workspace.kind == "scratch" and int(str(workspace.shape_exprs[0])) < stop
    result = check_program(compiled.program, compiled.source_scop, TRMM, sizes, seed=3)
    assert result.ok, result.message


def test_the_leaves_workspace_is_proven_and_a_late_copy_refused():
    """Each leaf reads its rows' old values from a copy taken just before it; the proof
    follows every moved read to its copy and the copy's read to the value the original
    read saw.  A copy taken after its leaf (the rows already overwritten) fails it."""
    from polygpu.transform.split import fixed_value, with_constant

    _, distributed = _trmm(37)
    split, record = recursion.recursive_split(distributed, "S0", 8)
    new = recursion.snapshot_leaves(split, record)
    leaves = [p.name for p in record.pieces if p.where.startswith("leaf")]
    copies = [s.name for s in new.statements if s.name not in
              {t.name for t in split.statements}]
    assert len(copies) == len(leaves) == 5
    pairs = []
    for leaf in leaves:
        at = fixed_value(new.statement(leaf).schedule, 0)
        copy = next(c for c in copies if fixed_value(new.statement(c).schedule, 0) == at - 1)
        pairs.append((leaf, copy))
    assert recursion.verify_leaf_snapshots(split, new, "B", "pg_w_B", pairs) is None
    # the second leaf's copy moved after the leaf (and before what follows it)
    leaf, copy = pairs[1]
    at = fixed_value(new.statement(leaf).schedule, 0)
    late = tuple(replace(s, schedule=with_constant(s.schedule, 0, at)) if s.name == copy
                 else replace(s, schedule=with_constant(s.schedule, 0, at - 1))
                 if s.name == leaf else s for s in new.statements)
    problem = recursion.verify_leaf_snapshots(split, replace(new, statements=late), "B",
                                              "pg_w_B", pairs)
    assert problem is not None and leaf in problem


def test_recursion_needs_the_sizes_and_a_triangular_update():
    from polygpu.pipeline import compile_region
    from polygpu.schedule.variant import Variant

    variant = Variant(recursion=8)
    with pytest.raises(PolygpuError, match="give the sizes"):
        compile_region(TRMM, variant=variant)
    with pytest.raises(PolygpuError, match="needs an in-place triangular update"):
        compile_region("kernels/mm.c", variant=variant, params={"n": 16})
    assert "recursion" not in Variant().to_json()
    assert Variant.from_json(variant.to_json()) == variant
    with pytest.raises(PolygpuError, match="recursion -1"):
        Variant(recursion=-1)


def test_the_products_take_register_tiled_plans_of_their_own():
    """Per-kernel variants: the leaves and products as 32 x 32 register tiles, the
    workspace copies a row of 32 threads -- exact at m = 100, n = 70."""
    from polygpu.pipeline import compile_region, prepare
    from polygpu.runtime.check import check_program
    from polygpu.schedule.variant import Variant

    sizes = {"m": 100, "n": 70}
    variant = Variant(tile=(32,), threads=(32,), specialize=True, recursion=16)
    region, _ = prepare(TRMM, params=sizes).of(variant)
    mm = Variant(tile=(32, 32), threads=(8, 16), jam=True, time_tile=16, specialize=True)
    (record,) = region.splitting.split
    pieces = {p.name for p in record.pieces}
    products = [k for k, ks in enumerate(region.candidates[0].kernels)
                if set(ks.statements) & pieces]
    assert len(products) == 7  # a leaf and the product after it each
    for k in products:
        variant = variant.with_kernel(k, mm)
    compiled = compile_region(TRMM, variant=variant, params=sizes)
    assert [k.index for k in compiled.kernels if k.unroll_dims] == products
    result = check_program(compiled.program, compiled.source_scop, TRMM, sizes, seed=3)
    assert result.ok, result.message


def test_a_products_old_rows_are_staged_apart_from_its_target():
    """A product updates rows [lo, mid) of B from rows [mid, hi) that it never writes
    (memory/placement.apart_reads): its register tile holds the target, the old rows are
    staged like a read-only operand, tile by tile and prefetched -- one buffer for both
    would span every row between them and the whole reduction (exact at m = 512)."""
    from polygpu.memory.placement import apart_reads
    from polygpu.pipeline import compile_variant, prepare
    from polygpu.runtime.check import check_program
    from polygpu.schedule.variant import Variant

    sizes = {"m": 512, "n": 64}
    prepared = prepare(TRMM, params=sizes)
    variant = Variant(tile=(32,), threads=(32,), specialize=True, recursion=128)
    region, _ = prepared.of(variant)
    (record,) = region.splitting.split
    top = next(p.name for p in record.pieces
               if p.where == "product: i in [0, 256), k in [256, 512)")
    k = next(k for k, ks in enumerate(region.candidates[0].kernels) if top in ks.statements)
    mm = Variant(tile=(32, 32), threads=(8, 16), jam=True, time_tile=16, prefetch=True,
                 specialize=True)
    compiled = compile_variant(prepared, variant.with_kernel(k, mm), sizes)
    kernel = compiled.kernels[k]
    step_read = next(a for a in compiled.kernel_scop.statement(top).accesses
                     if a.kind == "read" and a.array == "B" and a.text == "B[k][j]")
    assert (top, step_read.ref) in apart_reads(compiled.kernel_scop, kernel, "B")
    mine = {b.name: b for b in compiled.memory.buffers_of(k) if b.array == "B"}
    assert mine["B_reg"].space == "register" and (top, step_read.ref) not in mine["B_reg"].refs
    staged = mine["B_sh1"]
    assert staged.apart and staged.reads is not None and staged.writes is None
    assert staged.level == kernel.n_tile_levels and staged.box.extents == (16, 32)
    assert staged.prefetch
    result = check_program(compiled.program, compiled.source_scop, TRMM, sizes, seed=5)
    assert result.ok, result.message


def test_the_model_plans_each_piece_for_its_size():
    """search/recursion_plans: one plan per stop size below the rows (512 is not), each
    product (and leaf) with an mm plan no wider than its block, cheapest first."""
    from polygpu.pipeline import prepare
    from polygpu.search.recursion_plans import FLOAT_PRODUCTS, recursion_plans
    from polygpu.search.space import kernel_shapes

    sizes = {"m": 300, "n": 96}
    prepared = prepare("kernels/trmm.c", params=sizes)
    plans = recursion_plans(prepared, sizes, (64, 128, 512))
    assert sorted(p.variant.recursion for p in plans) == [64, 128]
    assert [p.seconds for p in plans] == sorted(p.seconds for p in plans)
    for plan in plans:
        region = prepared.recursive(plan.variant.recursion)
        shapes = kernel_shapes(region, sizes, 0)
        for k, p in plan.products:
            tile = FLOAT_PRODUCTS[p].tile
            assert all(t <= e for t, e in zip(tile, shapes[k].extents, strict=True))
            assert plan.variant.for_kernel(k).tile == tile


# --------------------------------------------------------------------------------------
# Solves: the division split with the update, into the leaves
# --------------------------------------------------------------------------------------

TRSM = {"float32": "kernels/trsm.c", "float64": "kernels/trsm.c"}
DEFINES = {"float32": (), "float64": ("DATA_TYPE=double",)}


def _trsm(m: int, n: int = 23):
    """kernels/trsm.c at m x n with alpha's pass moved before the rows (S0), the update
    S1 and the division S2 left in their nest."""
    sizes = {"m": m, "n": n}
    scop = recursion.at_sizes(prepare(TRSM["float32"], params=sizes).source_scop, sizes)
    return recursion.distribute(scop, "S0", before=True)


def test_a_solves_scaling_moves_before_its_rows_and_its_division_cannot_move_after():
    """alpha's pass reads each element before anything else does: it may run first, as
    a nest of its own; the division is read by every later row: it stays."""
    sizes = {"m": 19, "n": 5}
    scop = recursion.at_sizes(prepare(TRSM["float32"], params=sizes).source_scop, sizes)
    moved = recursion.distribute(scop, "S0", before=True)
    assert [recursion.fixed_value(moved.statement(s).schedule, 0)
            for s in ("S0", "S1", "S2")] == [0, 1, 1]
    assert moved.loops[0].statements == ("S0",) and moved.loops[2].statements == ("S1", "S2")
    with pytest.raises(PolygpuError, match="cannot run after its loops"):
        recursion.distribute(scop, "S2")
    with pytest.raises(PolygpuError, match="cannot run before its loops"):
        recursion.distribute(moved, "S2", before=True)


def test_a_solves_division_goes_into_the_leaf_of_its_row():
    """The update splits as trmm's does, mirrored (rows [mid, hi) over steps [lo, mid):
    the rows below read the finished ones above); each division instance joins the
    leaf of its row, where its row's own steps end and before any later row reads it."""
    scop = _trsm(37)
    split, records = recursion.recursive_split_group(scop, "S1", 8)
    update, division = records
    assert (update.statement, division.statement) == ("S1", "S2")
    assert [p.where for p in update.pieces] == [
        "leaf: i in [0, 8), k in [0, 8)", "product: i in [8, 16), k in [0, 8)",
        "leaf: i in [8, 16), k in [8, 16)", "product: i in [16, 32), k in [0, 16)",
        "leaf: i in [16, 24), k in [16, 24)", "product: i in [24, 32), k in [16, 24)",
        "leaf: i in [24, 32), k in [24, 32)", "product: i in [32, 37), k in [0, 32)",
        "leaf: i in [32, 37), k in [32, 37)"]
    assert [p.where for p in division.pieces] == [
        p.where for p in update.pieces if p.where.startswith("leaf")]
    for leaf in division.pieces:  # one nest with the update's leaf of the same rows
        twin = next(p for p in update.pieces if p.where == leaf.where)
        assert split.statement(leaf.name).loops[0] == split.statement(twin.name).loops[0]
    assert recursion.verify_group_split(scop, split, records) is None


@pytest.mark.parametrize("wrong", ["product first", "division after its leaf"])
def test_a_wrong_solve_order_fails_the_proof(wrong):
    """product first: rows [8, 16) would subtract rows [0, 8) before those are solved;
    division after its leaf (a piece of its own): the leaf's later rows would read its
    earlier rows undivided."""
    scop = _trsm(37)
    _, records = recursion.recursive_split_group(scop, "S1", 8)
    update, division = records
    pieces = []
    for p in update.pieces:
        parts = {"S1": p.domain.set_tuple_name("S1")}
        twin = next((d for d in division.pieces if d.where == p.where), None)
        if twin is not None:
            parts["S2"] = twin.domain.set_tuple_name("S2")
        pieces.append((p.where, parts))
    order = list(range(len(pieces)))
    if wrong == "product first":
        order[0], order[1] = 1, 0
    else:
        where, parts = pieces[0]
        pieces[0] = (where, {"S1": parts["S1"]})
        pieces.append((where + " (division)", {"S2": parts["S2"]}))
        order = [0, len(pieces) - 1] + order[1:]
    wrong_scop, wrong_records = recursion.split_group_into(scop, ["S1", "S2"], pieces, order)
    problem = recursion.verify_group_split(scop, wrong_scop, wrong_records)
    assert problem is not None and "flow" in problem


@pytest.mark.parametrize(("dtype", "m", "stop"), [("float32", 37, 8), ("float64", 100, 16),
                                                  ("float32", 100, 32)])
def test_a_recursive_trsm_is_exact(dtype, m, stop):
    """The variant on kernels/trsm.c: alpha's pass first, then per leaf one kernel (its
    rows in turn, a thread a column, the division inside) and one per product (rows and
    columns parallel), several levels deep at odd sizes; checked against the original
    nest on the emulator."""
    from polygpu.pipeline import compile_region
    from polygpu.runtime.check import check_program
    from polygpu.schedule.variant import Variant

    sizes = {"m": m, "n": 23}
    variant = Variant(tile=(32, 32), threads=(8, 32), specialize=True, recursion=stop)
    compiled = compile_region(TRSM[dtype], variant=variant, params=sizes,
                              defines=DEFINES[dtype])
    update, division = compiled.splitting.split
    leaves = sum(1 for p in update.pieces if p.where.startswith("leaf"))
    products = len(update.pieces) - leaves
    assert len(division.pieces) == leaves
    assert len(compiled.program.launches) == 1 + leaves + products
    mapped = sorted(k.n_mapped for k in compiled.kernels)
    assert mapped == [1] * leaves + [2] * (1 + products)
    result = check_program(compiled.program, compiled.source_scop, TRSM[dtype], sizes, seed=3,
                           defines=DEFINES[dtype])
    assert result.ok, result.message


def test_the_model_plans_a_solves_products():
    from polygpu.search.recursion_plans import recursion_plan

    sizes = {"m": 300, "n": 64}
    plan = recursion_plan(prepare(TRSM["float32"], params=sizes), sizes, 64)
    assert plan.variant.recursion == 64 and len(plan.products) == 4
    assert plan.seconds > 0


# --------------------------------------------------------------------------------------
# The other cases as users write them: sums re-associated where their order must change
# --------------------------------------------------------------------------------------

# name: (a's extent, the region): left/right, lower/upper, transposed or not, unit or not;
# TRSM divides by the diagonal shifted by its extent (well-conditioned on random inputs)
CASES = {
    "trmm_lln": ("m", """\
  for (int i = m - 1; i >= 0; i--)
    for (int j = 0; j < n; j++) {
      b[i][j] = a[i][i] * b[i][j];
      for (int k = 0; k < i; k++)
        b[i][j] += a[i][k] * b[k][j];
    }"""),
    "trmm_lun": ("m", """\
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++)
      for (int k = i + 1; k < m; k++)
        b[i][j] += a[i][k] * b[k][j];"""),
    "trmm_lut": ("m", """\
  for (int i = m - 1; i >= 0; i--)
    for (int j = 0; j < n; j++) {
      b[i][j] = a[i][i] * b[i][j];
      for (int k = 0; k < i; k++)
        b[i][j] += a[k][i] * b[k][j];
    }"""),
    "trmm_rln": ("n", """\
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++)
      for (int k = j + 1; k < n; k++)
        b[i][j] += b[i][k] * a[k][j];"""),
    "trmm_rut": ("n", """\
  for (int j = n - 1; j >= 0; j--)
    for (int i = 0; i < m; i++)
      for (int k = 0; k < j; k++)
        b[i][j] += b[i][k] * a[j][k];"""),
    "trsm_llt": ("m", """\
  for (int i = m - 1; i >= 0; i--)
    for (int j = 0; j < n; j++) {
      for (int k = i + 1; k < m; k++)
        b[i][j] -= a[k][i] * b[k][j];
      b[i][j] = b[i][j] / (a[i][i] + m);
    }"""),
    "trsm_lun": ("m", """\
  for (int i = m - 1; i >= 0; i--)
    for (int j = 0; j < n; j++) {
      for (int k = i + 1; k < m; k++)
        b[i][j] -= a[i][k] * b[k][j];
      b[i][j] = b[i][j] / (a[i][i] + m);
    }"""),
    "trsm_lut": ("m", """\
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      for (int k = 0; k < i; k++)
        b[i][j] = b[i][j] - a[k][i] * b[k][j];
      b[i][j] = b[i][j] / (a[i][i] + m);
    }"""),
    "trsm_run": ("n", """\
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      for (int k = 0; k < j; k++)
        b[i][j] -= b[i][k] * a[k][j];
      b[i][j] = b[i][j] / (a[j][j] + n);
    }"""),
    "trsm_rln": ("n", """\
  for (int j = n - 1; j >= 0; j--)
    for (int i = 0; i < m; i++) {
      for (int k = j + 1; k < n; k++)
        b[i][j] -= b[i][k] * a[k][j];
      b[i][j] = b[i][j] / (a[j][j] + n);
    }"""),
}


def _case(tmp_path, name: str) -> str:
    extent, body = CASES[name]
    path = tmp_path / f"{name}.c"
    path.write_text(f"void {name}(int m, int n, float a[{extent}][{extent}], float b[m][n])\n"
                    f"{{\n#pragma scop\n{body}\n#pragma endscop\n}}\n")
    return str(path)


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_triangular_case_recurses_and_is_exact(tmp_path, name):
    """Each case splits into leaves and products (its rows -- or columns, on the right
    -- cut by the paper's rule) and is exact on the emulator at odd sizes.  Where a
    row's sum must take its terms in another order than written (an upper solve whose
    sum runs k upward while the recursion finishes the rows below first), the split says
    so: the sums are re-associated, proven up to that order."""
    from polygpu.pipeline import compile_region
    from polygpu.runtime.check import check_program
    from polygpu.schedule.variant import Variant

    spec = _case(tmp_path, name)
    sizes = {"m": 37, "n": 29}
    variant = Variant(tile=(32, 32), threads=(8, 32), specialize=True, recursion=8)
    compiled = compile_region(spec, variant=variant, params=sizes)
    update = next(r for r in compiled.splitting.split
                  if any(p.where.startswith("product") for p in r.pieces))
    kinds = [p.where.split(":")[0] for p in update.pieces]
    assert kinds.count("product") >= 3 and kinds.count("leaf") >= 4
    reassociated = "sums re-associated" in update.cuts
    assert reassociated == (name in REASSOCIATED)
    result = check_program(compiled.program, compiled.source_scop, spec, sizes, seed=7)
    assert result.ok, result.message


# the cases whose sums run against the recursion's order
REASSOCIATED = {"trmm_lln", "trmm_lut", "trmm_rut", "trsm_llt", "trsm_lun", "trsm_rln"}


def test_a_reassociated_order_that_breaks_a_sum_fails_the_proof(tmp_path):
    """Backward substitution: a leaf's division moved before the product that still
    adds to its rows -- the division would run between two updates of an element."""
    spec = _case(tmp_path, "trsm_lun")
    sizes = {"m": 37, "n": 5}
    scop = recursion.at_sizes(prepare(spec, params=sizes).source_scop, sizes)
    split, records = recursion.recursive_split_group(scop, "S0", 8)
    update, division = records
    assert "sums re-associated" in update.cuts
    chain = recursion.sum_chain(scop, "S0")
    deps = recursion.compute_dependences(scop)
    assert recursion.verify_reassociated_split(scop, split, records, chain, deps) is None
    pieces = []
    for p in update.pieces:
        parts = {"S0": p.domain.set_tuple_name("S0")}
        twin = next((d for d in division.pieces if d.where == p.where), None)
        if twin is not None:
            parts["S1"] = twin.domain.set_tuple_name("S1")
        pieces.append((p.where, parts))
    # the top leaf (rows [0, 8): divided last) first
    top = next(k for k, (w, _) in enumerate(pieces) if w.startswith("leaf: i in [0, 8)"))
    order = [top] + [k for k in range(len(pieces)) if k != top]
    wrong, wrong_records = recursion.split_group_into(scop, ["S0", "S1"], pieces, order)
    problem = recursion.verify_reassociated_split(scop, wrong, wrong_records, chain, deps)
    assert problem is not None


def test_only_a_sum_is_reassociated(tmp_path):
    """``b[i][j] = a[i][k] * b[i][j] + b[k][j]`` is no sum of its terms: its order stays,
    and a recursion that would need another is refused with the proof's reason."""
    path = tmp_path / "horner.c"
    path.write_text("void horner(int m, int n, float a[m][m], float b[m][n])\n{\n"
                    "#pragma scop\n  for (int i = m - 1; i >= 0; i--)\n"
                    "    for (int j = 0; j < n; j++)\n      for (int k = i + 1; k < m; k++)\n"
                    "        b[i][j] = a[i][k] * b[i][j] + b[k][j];\n#pragma endscop\n}\n")
    sizes = {"m": 37, "n": 5}
    scop = recursion.at_sizes(prepare(str(path), params=sizes).source_scop, sizes)
    assert recursion.sum_chain(scop, "S0") is None
    with pytest.raises(PolygpuError, match="failed the proof"):
        recursion.recursive_split_group(scop, "S0", 8)


def test_the_split_says_what_moved_and_how_the_leaves_run():
    """``compile --json``'s split: alpha's pass distributed before the solve's rows, and
    the leaves' rows in turn, with why (a workspace of old values would hand the solve
    unfinished rows); trmm's scaling after its rows, and its leaves' workspace."""
    from polygpu.pipeline import compile_region
    from polygpu.schedule.variant import Variant

    variant = Variant(tile=(32, 32), threads=(8, 32), specialize=True, recursion=8)
    solve = compile_region(TRSM["float32"], variant=variant, params={"m": 37, "n": 23})
    notes = [(n["statement"], n["note"]) for n in solve.splitting.to_json() if "note" in n]
    assert notes[0] == ("S0", "distributed: runs before S1's loops")
    assert notes[1][0] == "S1" and notes[1][1].startswith("leaves: their rows in turn")
    assert "failed the proof" in notes[1][1]
    product = compile_region(TRMM, variant=variant, params={"m": 37, "n": 23})
    notes = [(n["statement"], n["note"]) for n in product.splitting.to_json() if "note" in n]
    assert notes == [("S1", "distributed: runs after S0's loops"),
                     ("S0", "leaves: their rows in parallel, the old values from a "
                            "workspace")]


def test_two_updates_in_one_region_both_recurse(tmp_path):
    """Two in-place products one after the other: the second's scaling cannot move
    before its rows (row i reads rows k > i unscaled) and joins its leaves; the first
    update's statements are pieces by then (an internal error once: KeyError)."""
    from polygpu.pipeline import compile_region
    from polygpu.runtime.check import check_program
    from polygpu.schedule.variant import Variant

    path = tmp_path / "two.c"
    path.write_text("""\
void two(int m, int n, float a[m][m], float b[m][n], float c[m][n])
{
#pragma scop
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++)
      for (int k = i + 1; k < m; k++)
        b[i][j] += a[k][i] * b[k][j];
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      c[i][j] = 2.0f * c[i][j];
      for (int k = i + 1; k < m; k++)
        c[i][j] += a[k][i] * c[k][j];
    }
#pragma endscop
}
""")
    sizes = {"m": 37, "n": 5}
    variant = Variant(tile=(32, 32), threads=(8, 32), specialize=True, recursion=8)
    compiled = compile_region(str(path), variant=variant, params=sizes)
    split = {r.statement: r for r in compiled.splitting.split}
    assert set(split) == {"S0", "S1", "S2"}  # S1, the scaling, in S2's leaves
    assert all(p.where.startswith("leaf") for p in split["S1"].pieces)
    result = check_program(compiled.program, compiled.source_scop, str(path), sizes, seed=5)
    assert result.ok, result.message


def test_the_split_region_is_scheduled_without_isl_on_the_whole_region(monkeypatch):
    """A solve's split region, where Algorithm 1 finds nothing, keeps the recursion's
    own order as its candidate and never asks isl's scheduler for the whole region (at
    4096 rows and stop 64, 192 statements, isl searched for over 10 minutes); an
    ordinary region where Algorithm 1 finds nothing still gets isl's proposal."""
    from polygpu.schedule import candidates as candidates_module

    asked = []
    real = candidates_module.isl_transformation

    def spy(an):
        asked.append(len(an.scop.statements))
        return real(an)

    monkeypatch.setattr(candidates_module, "isl_transformation", spy)
    sizes = {"m": 37, "n": 23}
    region = prepare(TRSM["float32"], params=sizes).recursive(8)
    assert len(region.analysis.scop.statements) > 10
    assert [tr.origin for tr in region.candidates] == ["original"]
    assert len(region.analysis.scop.statements) not in asked
    asked.clear()
    candidates_module.candidates(region.analysis, host_loops=False)
    assert asked == [len(region.analysis.scop.statements)]


def test_the_split_regions_dependences_are_those_of_every_write_as_a_source(monkeypatch):
    """Dataflow is asked only of the pieces that touch a read's elements (a piece's
    block meets a few others'); the dependences are those of the whole region's writes
    as sources, relation for relation, and the filter does drop pieces."""
    from polygpu.model import dependences

    sizes = {"m": 37, "n": 23}
    scop = prepare(TRSM["float32"], params=sizes).recursive(8).analysis.scop
    dropped = []
    real = dependences._touching

    def counting(sources, sinks):
        kept = real(sources, sinks)
        dropped.append(len(dependences.maps_of(sources)) - len(dependences.maps_of(kept)))
        return kept

    monkeypatch.setattr(dependences, "_touching", counting)
    filtered = dependences.compute_dependences(scop)
    assert max(dropped) > 0
    monkeypatch.setattr(dependences, "_touching", lambda sources, sinks: sources)
    every = dependences.compute_dependences(scop)

    def key(d):
        return d.kind, d.array, d.source, d.sink

    assert sorted(map(key, filtered.items)) == sorted(map(key, every.items))
    relations = {key(d): d.relation for d in every.items}
    assert all(d.relation.is_equal(relations[key(d)]) for d in filtered.items)
