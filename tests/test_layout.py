"""Relayout of interleaved batches (transform/layout.py, schedule/relayout.py): arrays whose
last subscript is the batch iterator run on scratch twins with that index first, between
transposing copies; the copies carry exactly what the region reads on entry and writes;
the proof refuses tampered regions; the relaid plans are exact on the emulator at odd
sizes, composed of one kernel per copy around the body's plans, and chosen by the model
where the measurements say they win."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace

import islpy as isl
import pytest
from hypothesis import HealthCheck, Phase, assume, example, given, settings

from polygpu.errors import PolygpuError
from polygpu.frontend import ir, load
from polygpu.model.analysis import analyze
from polygpu.model.build import build_scop
from polygpu.pipeline import compile_variant, prepare
from polygpu.runtime.check import check_program
from polygpu.schedule.relayout import COPY_THREADS, COPY_TILE
from polygpu.schedule.variant import Variant
from polygpu.search import plan_model
from polygpu.transform.expand import sourceless_reads
from polygpu.transform.layout import (
    batch_loop,
    interleaved_arrays,
    relaid_region,
    relayout_batch,
    verify_relayout,
)
from tests.random_nests import Guard, Loop, Stmt, nests, render_c

MM_SOA = "kernels/batched_mm_soa.c"
GEMV_SOA = "kernels/batched_gemv_soa.c"
DOT_SOA = "kernels/batched_dot_soa.c"
CHOLESKY_SOA = "kernels/batched_cholesky_soa.c"
CHOLESKY = "kernels/batched_cholesky.c"


def _region(path: str):
    """The original scop of ``path`` and its relaid region, unproven (``relaid_region``)."""
    scop = build_scop(load(path))
    arrays = interleaved_arrays(scop, batch_loop(analyze(scop)))
    new, relaid = relaid_region(scop, arrays)
    return scop, new, relaid


@pytest.fixture(scope="module")
def mm_soa():
    return _region(MM_SOA)


@pytest.fixture(scope="module")
def cholesky_soa():
    return _region(CHOLESKY_SOA)


def _with(scop, name, change):
    """``scop`` with statement ``name`` replaced by ``change(statement)``."""
    assert name in {s.name for s in scop.statements}
    return replace(scop, statements=tuple(change(s) if s.name == name else s
                                          for s in scop.statements))


def _restricted(s, domain):
    """``s`` run only on ``domain``: its domain, schedule and references all restricted
    (a consistent statement, not one whose references disagree with its domain)."""
    return replace(s, domain=domain, schedule=s.schedule.intersect_domain(domain),
                   accesses=tuple(replace(a, relation=a.relation.intersect_domain(domain))
                                  for a in s.accesses))


def _scheduled(s, target: str):
    """``s`` with the schedule ``{ S[its] -> [target] }`` (params nb, n) on its domain."""
    its = ", ".join(s.iterators)
    m = isl.Map(f"[nb, n] -> {{ {s.name}[{its}] -> [{target}] }}")
    return replace(s, schedule=m.intersect_domain(s.domain))


def _first_at(s, position: int):
    """``s`` with its schedule's first (textual position) dimension set to ``position``."""
    n = s.schedule.dim(isl.dim_type.out)
    outs = [f"o{k}" for k in range(n)]
    m = isl.Map(f"{{ [{', '.join(outs)}] -> [{position}, {', '.join(outs[1:])}] }}")
    return replace(s, schedule=s.schedule.apply_range(m))


def _remapped(s, kind: str, mapping: str):
    """``s`` with its ``kind`` references' relations composed with ``mapping``."""
    return replace(s, accesses=tuple(
        replace(a, relation=a.relation.apply_range(isl.Map(mapping))) if a.kind == kind
        else a for a in s.accesses))


# --------------------------------------------------------------------------------------
# The relaid region
# --------------------------------------------------------------------------------------


def test_the_product_relays_its_three_arrays_and_copies_only_what_it_must():
    """a and b are only read: a copy in each, nothing to copy out; c is only written by
    the region before it is read (``c = 0`` first): a copy out, and no copy in, which
    would move n^2 nb words for nothing.  Every body reference is on a twin, its index
    with e first, and the proof accepts the result."""
    scop = build_scop(load(MM_SOA))
    out = relayout_batch(analyze(scop))
    assert out.batch_loop == "e" and out.reason == ""
    assert [(r.array, r.name) for r in out.relaid] == [("a", "pg_l_a"), ("b", "pg_l_b"),
                                                       ("c", "pg_l_c")]
    for r in out.relaid:
        twin = out.scop.array(r.name)
        assert twin.kind == "scratch" and twin.shape_text == ("nb", "n", "n")
        assert out.scop.array(r.array).kind == "argument"
    a, b, c = out.relaid
    assert a.copy_in and b.copy_in and c.copy_in is None
    assert a.copy_out is None and b.copy_out is None and c.copy_out
    copy_a = out.scop.statement(a.copy_in)
    assert str(copy_a.body) == "pg_l_a[pg_c2][pg_c0][pg_c1] = a[pg_c0][pg_c1][pg_c2]"
    assert str(out.scop.statement(c.copy_out).body) == \
        "c[pg_c0][pg_c1][pg_c2] = pg_l_c[pg_c2][pg_c0][pg_c1]"
    # the product's statements, on the twins
    s0, s1 = out.scop.statement("S0"), out.scop.statement("S1")
    assert str(s0.body) == "pg_l_c[e][i][j] = 0"
    assert str(s1.body) == "pg_l_c[e][i][j] += (pg_l_a[e][i][k] * pg_l_b[e][k][j])"
    assert [x.text for x in s1.accesses] == ["pg_l_a[e][i][k]", "pg_l_b[e][k][j]",
                                             "pg_l_c[e][i][j]", "pg_l_c[e][i][j]"]
    assert s1.accesses[0].relation.is_equal(isl.Map(
        "[nb, n] -> { S1[e, i, j, k] -> pg_l_a[e, i, k] : 0 <= e < nb and 0 <= i < n and "
        "0 <= j < n and 0 <= k < n }"))
    # nothing of the body touches the caller's arrays any more
    assert {x.array for s in (s0, s1) for x in s.accesses} == {"pg_l_a", "pg_l_b", "pg_l_c"}
    # copies in first, body after them, copy out last
    order = [s.name for s in sorted(out.scop.statements, key=lambda s: int(
        s.schedule.plain_get_val_if_fixed(isl.dim_type.out, 0).to_python()))]
    assert order[:2] == [a.copy_in, b.copy_in] and order[-1] == c.copy_out
    assert verify_relayout(scop, out.scop, out.relaid) is None


def test_the_cholesky_copy_in_carries_the_whole_lower_triangle(cholesky_soa):
    """Regression: the entry elements were once computed per statement instance, and
    ``a[i][k] = a[i][k] / a[k][k]`` (whose a[k][k] the region writes first) hid the
    entry read a[i][0] of column 0: the copy in missed it.  It must be exactly the lower
    triangle the factorization reads, and the copy out exactly what it writes (the same
    triangle); b is read and written in place: both copies, over all of it."""
    scop, new, relaid = cholesky_soa
    assert scop.parameters == ("nb", "n")
    a, b = relaid
    assert (a.array, b.array) == ("a", "b") and all((r.copy_in, r.copy_out) for r in relaid)
    lower = isl.Set("[nb, n] -> { a[i0, i1, i2] : 0 <= i1 <= i0 < n and 0 <= i2 < nb }")
    for copy in (a.copy_in, a.copy_out):
        assert new.statement(copy).domain.set_tuple_name("a").is_equal(lower), copy
    whole_b = isl.Set("[nb, n] -> { b[i0, i1] : 0 <= i0 < n and 0 <= i1 < nb }")
    for copy in (b.copy_in, b.copy_out):
        assert new.statement(copy).domain.set_tuple_name("b").is_equal(whole_b), copy
    assert verify_relayout(scop, new, relaid) is None
    assert relayout_batch(analyze(scop)).relaid == relaid


@pytest.mark.parametrize("path", [CHOLESKY, CHOLESKY_SOA])
def test_sourceless_reads_are_per_reference(path):
    """``a[i][k] / a[k][k]`` at k = 0: a[i][0] comes from the caller (no write of the
    region precedes it), a[0][0] from the square root just before.  Per statement
    instance the two would be lumped; per reference, only the first is an entry read."""
    scop = build_scop(load(path))
    found = {(a.statement, a.ref): (a, instances) for a, instances in sourceless_reads(scop, "a")}
    s1 = scop.statement("S1")
    assert str(s1.body).replace(" ", "") in ("a[e][i][k]=(a[e][i][k]/a[e][k][k])",
                                             "a[i][k][e]=(a[i][k][e]/a[k][k][e])")
    column, diagonal = s1.accesses[0], s1.accesses[1]
    assert column.text in ("a[e][i][k]", "a[i][k][e]")
    assert diagonal.text in ("a[e][k][k]", "a[k][k][e]")
    _, instances = found[("S1", column.ref)]
    assert instances.is_equal(isl.Set(
        "[nb, n] -> { S1[e, k, i] : k = 0 and 0 <= e < nb and 0 < i < n }"))
    assert ("S1", diagonal.ref) not in found
    # the square root's own read of a[0][0] is an entry read too
    assert found[("S0", 0)][1].is_equal(isl.Set(
        "[nb, n] -> { S0[e, k] : k = 0 and 0 <= e < nb and n > 0 }"))


# --------------------------------------------------------------------------------------
# The proof refuses tampered regions
# --------------------------------------------------------------------------------------


def _dropped(scop, name: str, drop: str):
    """Copy statement ``name``'s domain without element 0 of the batch (``"element 0"``)
    or without its last point (``"last element"``)."""
    domain = scop.statement(name).domain
    if drop == "element 0":
        smaller = domain.intersect(isl.Set(f"{{ {name}[c0, c1, c2] : c2 > 0 }}"))
    else:
        smaller = domain.subtract(domain.lexmax())
    assert not smaller.is_equal(domain)
    return smaller


@pytest.mark.parametrize(("consistent", "reason"), [
    (True, "a read of pg_l_a precedes every write of its element"),
    (False, "the copy in of a misses elements the region reads on entry"),
])
@pytest.mark.parametrize("drop", ["element 0", "last element"])
def test_proof_refuses_a_copy_in_that_misses_elements(mm_soa, consistent, reason, drop):
    """A copy in without element 0 of the batch, or without its last entry: that read
    would see whatever the scratch array held.  Restricted whole (references too), the
    read without a writer is found; only its domain shrunk, the coverage check finds it."""
    scop, new, relaid = mm_soa
    name = relaid[0].copy_in
    smaller = _dropped(new, name, drop)
    tampered = _with(new, name, lambda s: _restricted(s, smaller) if consistent
                     else replace(s, domain=smaller))
    assert verify_relayout(scop, tampered, relaid) == reason


@pytest.mark.parametrize("drop", ["element 0", "last element"])
def test_proof_refuses_a_copy_out_that_misses_elements(mm_soa, drop):
    """The caller's c would keep stale entries where the copy out writes nothing."""
    scop, new, relaid = mm_soa
    name = relaid[2].copy_out
    smaller = _dropped(new, name, drop)
    tampered = _with(new, name, lambda s: _restricted(s, smaller))
    assert verify_relayout(scop, tampered, relaid) == \
        "the copy out of c writes other elements than the region"


def test_proof_refuses_copies_on_the_wrong_side_of_the_body(mm_soa):
    """A copy in run after the body leaves its reads of pg_l_a without a writer; a copy
    out run before it reads pg_l_c before anything wrote it."""
    scop, new, relaid = mm_soa
    late = _with(new, relaid[0].copy_in, lambda s: _first_at(s, 100))
    assert verify_relayout(scop, late, relaid) == \
        "a read of pg_l_a precedes every write of its element"
    early = _with(new, relaid[2].copy_out, lambda s: _first_at(s, -100))
    assert verify_relayout(scop, early, relaid) == \
        "a read of pg_l_c precedes every write of its element"


def test_proof_refuses_copies_inside_the_batch_loop(cholesky_soa):
    """The ordering check itself: b's copy in moved into element e's iteration, after
    its factorization and before its solves (every read of pg_l_b still finds the copy's
    write first), and b's copy out right after element e's solves.  The proof demands
    copies before and after everything: both refused, by the ordering check."""
    scop, new, relaid = cholesky_soa
    b = relaid[1]
    assert b.array == "b" and new.statement(b.copy_in).iterators == ("pg_c0", "pg_c1")
    inside = _with(new, b.copy_in, lambda s: _scheduled(
        s, "2, pg_c1, 0, n, 0, pg_c0, 0, 0, 0"))
    assert verify_relayout(scop, inside, relaid) == \
        "the copy in of b does not run before every other statement"
    after = _with(new, b.copy_out, lambda s: _scheduled(
        s, "2, pg_c1, 3, pg_c0, 0, 0, 0, 0, 0"))
    assert verify_relayout(scop, after, relaid) == \
        "the copy out of b does not run after every other statement"


@pytest.mark.parametrize(("statement", "ref"), [("S0", 0), ("S1", 2), ("S1", 3)])
def test_proof_refuses_a_body_reference_moved_to_another_element(mm_soa, statement, ref):
    """The product writing, or reading back, c[i][j + 1] of the twin instead of c[i][j]."""
    scop, new, relaid = mm_soa

    def shifted(s):
        return replace(s, accesses=tuple(
            replace(a, relation=a.relation.apply_range(isl.Map(
                "{ pg_l_c[x, y, z] -> pg_l_c[x, y, z + 1] }"))) if a.ref == ref else a
            for a in s.accesses))

    assert new.statement(statement).accesses[ref].array == "pg_l_c"
    assert verify_relayout(scop, _with(new, statement, shifted), relaid) == \
        f"{statement}'s c[i][j][e] does not touch the same elements of pg_l_c"


def test_proof_refuses_a_body_statement_run_in_another_order(mm_soa):
    """The sum's k loop reversed: the region's own instances no longer in their order."""
    scop, new, relaid = mm_soa
    reversed_k = _with(new, "S1", lambda s: _scheduled(s, "2, e, 0, i, 0, j, 1, -k, 0"))
    assert verify_relayout(scop, reversed_k, relaid) == \
        "the region's statements run in another order"


def _transposing(s, kind: str, array: str, subscripts: tuple[str, ...], mapping: str):
    """Copy statement ``s`` with its ``kind`` reference of ``array`` (body and relation)
    on ``subscripts``: a consistent statement that copies other elements."""
    index = tuple(ir.IntVar(x) for x in subscripts)

    def ref(r):
        return replace(r, index=index) if isinstance(r, ir.ArrayRef) and r.array == array \
            else r

    body = s.body
    body = replace(body, target=ref(body.target), value=ref(body.value))
    out = _remapped(s, kind, mapping)
    return replace(out, body=body, accesses=tuple(
        replace(a, subscripts=index) if a.array == array else a for a in out.accesses))


def test_proof_refuses_a_copy_in_that_reads_the_wrong_element(mm_soa):
    """The copy in covers the right elements, before everything, but stores a[j][i][e]
    where a[i][j][e] belongs: every read of pg_l_a sees another entry's value."""
    scop, new, relaid = mm_soa
    name = relaid[0].copy_in
    tampered = _with(new, name, lambda s: _transposing(
        s, "read", "a", ("pg_c1", "pg_c0", "pg_c2"), "{ a[x, y, z] -> a[y, x, z] }"))
    assert str(tampered.statement(name).body) == \
        "pg_l_a[pg_c2][pg_c0][pg_c1] = a[pg_c1][pg_c0][pg_c2]"
    assert "moves elements to other places" in verify_relayout(scop, tampered, relaid)


def test_proof_refuses_a_copy_out_that_writes_the_wrong_element(mm_soa):
    """The copy out's domain is the elements the region writes, but it stores entry
    (i, j) of the twin into c[j][i][e]: the caller's c ends transposed."""
    scop, new, relaid = mm_soa
    name = relaid[2].copy_out
    tampered = _with(new, name, lambda s: _transposing(
        s, "write", "c", ("pg_c1", "pg_c0", "pg_c2"), "{ c[x, y, z] -> c[y, x, z] }"))
    assert str(tampered.statement(name).body) == \
        "c[pg_c1][pg_c0][pg_c2] = pg_l_c[pg_c2][pg_c0][pg_c1]"
    assert "moves elements to other places" in verify_relayout(scop, tampered, relaid)


# --------------------------------------------------------------------------------------
# Regions with nothing to relay
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "loop"), [("kernels/batched_mm.c", "e"),
                                            ("kernels/mm.c", "i")])
def test_regions_without_interleaved_arrays_relay_nothing(path, loop):
    """batched_mm stores the batch outermost (e first), mm has no batch at all: the
    region is left as it is, with the reason."""
    scop = build_scop(load(path))
    out = relayout_batch(analyze(scop))
    assert out.relaid == () and out.scop is scop
    assert out.reason == (f"no array has the batch loop's iterator {loop} alone as its "
                          "last subscript")
    assert out.to_json() == {"relaid": [], "reason": out.reason}


def test_a_relayout_variant_is_refused_where_nothing_is_interleaved():
    """``Variant(relayout=True)`` on an array-of-structures batch: an error naming the
    field, not a silent compile of the unrelaid region."""
    prepared = prepare("kernels/batched_mm.c")
    assert prepared.relaid is None and prepared.relaid_body is None
    with pytest.raises(PolygpuError, match="relayout"):
        compile_variant(prepared, Variant(relayout=True))
    assert compile_variant(prepared, Variant()).relayout is None
    # the model prices it as a plan that cannot be built, with the reason
    estimate = plan_model.estimate(prepared, Variant(relayout=True), {"nb": 37, "n": 5})
    assert estimate.seconds == float("inf") and "relayout" in estimate.error


# --------------------------------------------------------------------------------------
# Exact on the emulator
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("kernel", [MM_SOA, GEMV_SOA, DOT_SOA, CHOLESKY_SOA])
@pytest.mark.parametrize("n", [1, 3, 5, 17])
def test_relaid_plans_are_exact_at_odd_sizes(kernel, n):
    """nb = 37 (the issue's check size, no multiple of any tile), each against the loop
    nest on the CPU emulator: the default relaid plan and, for the product, an element
    plan of the kind the model picks for large n (32 x 32 tiles, jammed, specialized:
    params at compile)."""
    params = {"nb": 37, "n": n}
    prepared = prepare(kernel, params=params)
    variants = [Variant(relayout=True)]
    if kernel == MM_SOA:
        variants.append(Variant(relayout=True, tile=(32, 32), threads=(8, 8), jam=True,
                                specialize=True))
    for variant in variants:
        compiled = compile_variant(prepared, variant, params)
        assert compiled.relayout is not None and compiled.relayout.relaid
        copies = sum(bool(c) for r in compiled.relayout.relaid
                     for c in (r.copy_in, r.copy_out))
        assert len(compiled.program.launches) >= copies + 1
        result = check_program(compiled.program, compiled.source_scop, kernel, params,
                               seed=11)
        assert result.ok, (variant, result.message)


# --------------------------------------------------------------------------------------
# The composed candidates
# --------------------------------------------------------------------------------------


def test_every_relaid_candidate_is_the_body_between_one_kernel_per_copy():
    """The body is scheduled alone (the element-outermost nest the batch plans are made
    for) and each copy gets a kernel of its own: a copy fused with ``c = 0`` would make
    the sum read and write c in global memory once more."""
    prepared = prepare(MM_SOA)
    relaid, body = prepared.relaid, prepared.relaid_body
    assert relaid is not None and relaid.relayout is not None
    assert relaid.relayout is body.relayout
    assert len(relaid.candidates) == len(body.candidates) > 1
    records = relaid.relayout.relaid
    before = [(r.copy_in,) for r in records if r.copy_in]
    after = [(r.copy_out,) for r in records if r.copy_out]
    assert before == [("S2",), ("S3",)] and after == [("S4",)]
    for whole, own in zip(relaid.candidates, body.candidates, strict=True):
        statements = [k.statements for k in whole.kernels]
        assert statements[:2] == before and statements[-1:] == after
        assert statements[2:-1] == [k.statements for k in own.kernels]
        assert whole.origin == f"{own.origin}, between transposes"
    assert {s.name for s in body.analysis.scop.statements} == {"S0", "S1"}


def test_a_relayout_variant_gives_the_copy_kernels_the_transpose_plan():
    """``Prepared.of``: the relaid region, and the variant with kernels 0, 1 (the copies
    in) and the last (the copy out) on 32 x 32 tiles of 8 x 32 threads; the body's own
    overrides moved past the copies in."""
    prepared = prepare(MM_SOA)
    assert prepared.of(Variant()) == (prepared, Variant())
    target, variant = prepared.of(Variant(relayout=True))
    assert target is prepared.relaid
    last = len(target.candidates[0].kernels) - 1
    assert last == 3
    assert [k for k, _ in variant.kernels] == [0, 1, last]
    assert (COPY_TILE, COPY_THREADS) == ((32, 32), (8, 32))
    for k in (0, 1, last):
        copy = variant.for_kernel(k)
        assert (copy.tile, copy.threads) == ((32, 32), (8, 32))
        assert copy.shared and not copy.jam
    assert variant.for_kernel(2).tile == Variant().tile
    # candidate 1 splits c = 0 and the sum: the sum (body kernel 1) becomes kernel 3
    split = [k.statements for k in prepared.relaid_body.candidates[1].kernels]
    assert split == [("S0",), ("S1",)]
    own = Variant(relayout=True, candidate=1,
                  kernels=((1, (("threads", (4, 16)), ("tile", (16, 16)))),))
    _, moved = prepared.of(own)
    assert [k for k, _ in moved.kernels] == [0, 1, 3, 4]
    assert (moved.for_kernel(3).tile, moved.for_kernel(3).threads) == ((16, 16), (4, 16))
    assert moved.for_kernel(2).tile == Variant().tile
    assert moved.for_kernel(4).tile == (32, 32)
    # a relaid prepared region compiles relayout variants as they are
    assert target.of(variant) == (target, variant)


# --------------------------------------------------------------------------------------
# The model's choice
# --------------------------------------------------------------------------------------


def _chosen(kernel: str, n: int, nb: int) -> Variant:
    params = {"nb": nb, "n": n}
    return plan_model.choose(prepare(kernel, params=params), params).variant


def test_small_interleaved_products_stay_interleaved():
    """1.5 GB of fp32 16 x 16 products (nb = 500000), H200, 2026-11-29: the interleaved
    plan 0.792 ms against 1.716 relaid -- the transposes cost more than they save where
    a thread per element already reads whole lines."""
    chosen = _chosen(MM_SOA, 16, 500_000)
    assert not chosen.relayout


def test_large_interleaved_products_are_relaid():
    """1.5 GB of fp32 64 x 64 products (nb = 31250), H200, 2026-11-29: relaid 1.599 ms
    against 3.609 interleaved -- a block per element gathers words nb apart unless the
    element is first made contiguous."""
    chosen = _chosen(MM_SOA, 64, 31_250)
    assert chosen.relayout and chosen.tile == (64, 64)


def test_interleaved_gemvs_stay_interleaved():
    """A gemv reads each entry of a once: relaid, a would be moved three times (read and
    written by the copy in, read again by the body) for reads that are coalesced already."""
    chosen = _chosen(GEMV_SOA, 64, int(1536e6 / (4 * (64 * 64 + 128))))
    assert not chosen.relayout


# --------------------------------------------------------------------------------------
# The variant field
# --------------------------------------------------------------------------------------


def test_relayout_in_variant_json():
    """Present only when set (older records keep their keys), round-trips, and is
    program-wide: a kernel cannot override it, in Python or in JSON."""
    on = Variant(relayout=True)
    data = on.to_json()
    assert data["relayout"] is True
    assert Variant.from_json(data) == on
    assert Variant.from_json(json.dumps(data)) == on
    assert "relayout" not in Variant().to_json()
    assert Variant.from_json(Variant().to_json()) == Variant()
    with pytest.raises(PolygpuError, match="relayout"):
        Variant(kernels=((0, (("relayout", True),)),))
    with pytest.raises(PolygpuError, match="relayout"):
        Variant.from_json({"kernels": {"0": {"relayout": True}}})


# --------------------------------------------------------------------------------------
# More of the proof, the search space, the device's memory
# --------------------------------------------------------------------------------------


def test_proof_refuses_a_copy_that_computes_instead_of_copying(mm_soa):
    """A copy in that stores ``2 * a`` (right elements, right places, right order) would
    hand the product other values: only a plain copy is accepted."""
    scop, new, relaid = mm_soa
    name = relaid[0].copy_in

    def doubled(s):
        value = ir.BinOp("*", ir.Const(2.0, "float32"), s.body.value)
        return replace(s, body=replace(s.body, value=value))

    tampered = _with(new, name, doubled)
    assert str(tampered.statement(name).body).startswith("pg_l_a[pg_c2][pg_c0][pg_c1] = (2")
    assert verify_relayout(scop, tampered, relaid) == \
        "the copy in of a is not a plain copy from a to pg_l_a"


def test_the_search_space_offers_relaid_plans_of_an_interleaved_batch():
    """``space.space``: beside the interleaved plans, the relaid nest's element plans
    (the 64 x 64 tile at n = 64) and some of its plain shapes, all with relayout set;
    none for a batch stored element-outermost, nor for a region that is no batch."""
    from polygpu.search.space import space

    params = {"nb": 31_250, "n": 64}
    found = space(prepare(MM_SOA, params=params), params)
    relaid = [v for v in found if v.relayout]
    assert relaid and len(relaid) < len(found)
    assert any(v.tile == (64, 64) and v.jam and v.specialize for v in relaid)
    aos = {"nb": 31_250, "n": 64}
    assert not any(v.relayout for v in space(prepare("kernels/batched_mm.c", params=aos),
                                             aos))
    # tmv's a[j][i] has the outer loop's iterator last, but it is no batch of elements:
    # a relaid twin exists, and neither the model nor the search offers it
    tmv = prepare("kernels/tmv.c")
    assert tmv.relaid is not None
    assert not any(v.relayout for v in space(tmv, {"n": 4096}))
    assert not any(v.relayout for v in plan_model.plan_variants(tmv, {"n": 4096}))


def test_a_relayout_that_would_not_fit_in_the_device_is_not_chosen():
    """60 GB of 64 x 64 products: their twins would make 120 GB, more than the 80 GB of
    the default target (an H100): the model refuses the relaid plans with the reason
    and keeps the interleaved one; with 141 GB (an H200's) it relays."""
    from polygpu.search.occupancy import SM_90

    params = {"nb": int(60e9 / (12 * 64 * 64)), "n": 64}
    prepared = prepare(MM_SOA, params=params)
    choice = plan_model.choose(prepared, params)
    assert not choice.variant.relayout
    refused = [r for r in choice.ranking if r.variant.relayout]
    assert refused and all("more than the device's 80.0 GB" in r.error for r in refused)
    bigger = replace(SM_90, memory_bytes=141 * 10**9)
    assert plan_model.choose(prepared, params, bigger).variant.relayout


# --------------------------------------------------------------------------------------
# Random nests, batched and interleaved
# --------------------------------------------------------------------------------------


_nests = itertools.count()


@pytest.mark.slow
@settings(max_examples=15, deadline=None, derandomize=True,
          phases=(Phase.explicit, Phase.reuse, Phase.generate),  # shrinking took minutes
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(tree=nests())
# regression: A's only write is in a branch that never runs (i >= i is always true): its
# copy out had an empty domain, which tiling failed on (an internal error)
@example(tree=[Loop("i", "0", "n", 1, [Loop("j", "0", "n", 1, [
    Stmt(("B", ("i + 0", "i")), "+=", []),
    Guard(("i", ">=", "i"), [Stmt(("B", ("i + 0", "n - 1 - i")), "+=", [])],
          [Stmt(("A", ("i + 0", "i + 0")), "+=", [])])])])])
def test_random_nests_batched_interleaved_are_relaid_exactly(tree, tmp_path):
    """Any affine nest (triangular, strided, descending, guarded, in place, several
    statements: tests/random_nests.py) run on nb interleaved elements: every argument
    array it touches is relaid, the proof accepts the region, and the relaid program -- copies in
    of what it reads on entry, copies out of what it writes -- matches the original on
    the emulator at odd sizes (elements never touched keep their poison-free values)."""
    path = tmp_path / f"batched_{next(_nests)}.c"
    path.write_text(render_c(tree, batch=True))
    try:
        prepared = prepare(str(path), "nest")
    except PolygpuError as err:  # a nest whose guards are never true: not a kernel
        assume("ever runs" not in str(err))
        raise
    relaid = prepared.relaid
    # not relaid: a temporary expanded first (transform/expand.py) is copied back after
    # the batch loop, which then no longer encloses every statement
    assume(relaid is not None)
    touched = {a.array for a in prepared.analysis.scop.accesses
               if prepared.analysis.scop.array(a.array).kind == "argument"}
    assert {r.array for r in relaid.relayout.relaid} == touched
    assert verify_relayout(prepared.analysis.scop, relaid.relayout.scop,
                           relaid.relayout.relaid) is None
    compiled = compile_variant(prepared, Variant(relayout=True))
    for n, nb in ((7, 3),):
        result = check_program(compiled.program, compiled.source_scop, str(path),
                               {"n": n, "nb": nb}, seed=n)
        assert result.ok, (render_c(tree, batch=True), n, result.message)
