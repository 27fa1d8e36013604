"""A thread's re-reads and re-writes of its own elements (memory/self_reuse.py): what the
traffic model's per-block count misses where every thread cycles over a footprint the
caches cannot hold for all of them -- a thread per element of the interleaved batched Cholesky."""

from __future__ import annotations

from polygpu.memory.self_reuse import self_reuse, spilled_rereads
from polygpu.pipeline import prepare
from polygpu.schedule.variant import Variant
from polygpu.search import plan_model

SOA = "kernels/batched_cholesky_soa.c"
DOUBLE = ("DATA_TYPE=double", "SQRT_FUN=sqrt")
# a launched thread per element, 128 a block (the model's pick before this term)
THREAD = dict(candidate=0, tile=(128,), threads=(128,), shared=True, specialize=True)


def _reuse(spec, params, variant, defines=()):
    prepared = prepare(spec, defines=defines, params=params)
    c = plan_model.sketch(prepared, variant)
    (kernel, _, values, _), = c.modelled_launches(params)
    return c, kernel, values, {r.array: r for r in self_reuse(c.kernel_scop, kernel,
                                                               values, c.memory)}


def test_a_thread_per_interleaved_element_re_reads_its_triangle():
    """Each thread touches its element's lower triangle, n (n + 1) / 2 words of ``a``,
    and its n words of ``b``; the factorization's trailing updates read the triangle
    about n / 3 times over (each ``a[i][k]`` once per row, kept across the row's loop)."""
    n, nb = 16, 2048
    _, _, _, found = _reuse(SOA, {"nb": nb, "n": n}, Variant(**THREAD), DOUBLE)
    a, b = found["a"], found["b"]
    assert (a.threads, b.threads) == (nb, nb)
    assert a.footprint == nb * n * (n + 1) // 2 and b.footprint == nb * n
    assert a.thread_bytes == 8 * n * (n + 1) / 2
    assert n / 3 < a.reads / a.footprint < n
    assert not a.scattered  # consecutive threads read consecutive elements' entries
    # every entry of the triangle written once a step it is updated in: the diagonal
    # and column n (n + 1) / 2, the trailing updates sum m (m + 1) / 2 over m < n
    assert a.written == a.footprint == a.accessed
    assert a.writes == nb * (n * (n + 1) // 2 + (n - 1) * n * (n + 1) // 6)


def test_re_reads_cost_dram_only_beyond_the_cache():
    n, nb = 16, 2048
    c, kernel, values, found = _reuse(SOA, {"nb": nb, "n": n}, Variant(**THREAD), DOUBLE)
    a = found["a"]
    live = nb * a.thread_bytes  # every thread's triangle at once: 2.2 MB
    assert a.block_bytes == 128 * a.thread_bytes  # no thread shares its element's data
    assert a.live_bytes(nb, 128) == live == a.touched_bytes
    assert a.spilled_bytes(nb, 128, cache_bytes=int(live) + 1) == 0
    assert a.spilled_bytes(nb // 4, 128, cache_bytes=int(live / 2)) == 0  # a quarter
    # re-reads, and re-writes: each a write-back of a line evicted dirty
    assert a.spilled_bytes(nb, 128, cache_bytes=int(live / 2)) == \
        (a.reads - a.footprint + a.writes - a.written) * 8
    assert spilled_rereads(c.kernel_scop, kernel, values, c.memory, frozenset(), nb,
                           1 << 20) == a.again_bytes > 0
    # each array against the whole cache: b's 256 KB fit a megabyte
    assert found["b"].spilled_bytes(nb, 128, 1 << 20) == 0 < found["b"].again_bytes
    # a resident copy is read from shared memory: nothing of it spills
    assert spilled_rereads(c.kernel_scop, kernel, values, c.memory,
                           frozenset({"a", "b"}), nb, 1 << 20) == 0


def test_mm_register_tiles_load_each_element_once():
    """A register tile's jammed reads load an element once for all the thread's points
    (and the reduction's target stays in a register across its loop)."""
    variant = Variant(tile=(64, 64), threads=(16, 16), jam=True, shared=False)
    _, _, _, found = _reuse("kernels/mm.c", {"n": 256}, variant)
    assert set(found) == {"a", "b"}  # (c: a register buffer)
    for r in found.values():
        assert r.reads <= r.footprint, r


def test_mm_threads_share_what_they_re_read():
    """Without the jam, a thread of four points along j reads its row of ``a`` once per
    point (4x its footprint), but the 32 threads of its block row read the same row at
    once: what a block keeps in flight is its rows and columns, counted once, and no
    more than the arrays hold -- nothing spills at n = 256 (768 KB in all)."""
    n = 256
    variant = Variant(tile=(32, 32), threads=(32, 8), shared=False)
    c, kernel, values, found = _reuse("kernels/mm.c", {"n": n}, variant)
    a = found["a"]
    assert a.reads == 4 * a.footprint
    assert a.block_bytes == 32 * n * 4 and a.touched_bytes == n * n * 4
    running = 132 * 2048
    assert a.live_bytes(running, 256) == a.touched_bytes
    assert spilled_rereads(c.kernel_scop, kernel, values, c.memory, frozenset(), running,
                           50 << 20) == 0


def test_the_model_no_longer_picks_a_thread_per_interleaved_element_at_n_64():
    """At n = 64 in double (1.5 GB) a thread per element keeps 384 MB of triangles in
    flight: the model prices its re-reads from DRAM, and picks a block per element."""
    params = {"nb": 23076, "n": 64}
    prepared = prepare(SOA, defines=DOUBLE, params=params)
    thread = plan_model.estimate(prepared, Variant(**THREAD, time_tile=16), params)
    assert "launches" in thread.detail
    traffic_mb = float(thread.detail.split(", ")[1].split(" MB")[0].replace(",", ""))
    assert traffic_mb > 10_000  # the re-reads (the per-block count alone: 792 MB)
    choice = plan_model.choose(prepared, params)
    assert choice.variant.device_steps and choice.variant.resident


def test_the_interleaved_picks_are_exact_at_odd_sizes():
    """The model's picks for the interleaved Cholesky in double at 1.5 GB (n = 16: four
    warps a block, an element each; n = 64: four elements a block, 8 x 8 threads each,
    packed -- the block copies them together, whole sectors; both resident), checked
    against the loop nest at nb = 37, n = 17 on the emulator."""
    from polygpu.pipeline import compile_variant
    from polygpu.runtime.check import check_program

    picks = []
    for n, nb in ((16, 352941), (64, 23076)):
        sizes = {"nb": nb, "n": n}
        picks.append(plan_model.choose(prepare(SOA, defines=DOUBLE, params=sizes),
                                       sizes).variant)
    assert [(v.device_steps, v.resident, v.elements_per_block) for v in picks] == [
        (True, True, 4), (True, True, 4)]
    assert picks[1].threads == (8, 8) and picks[1].packed
    params = {"nb": 37, "n": 17}
    prepared = prepare(SOA, defines=DOUBLE, params=params)
    for variant in picks:
        compiled = compile_variant(prepared, variant, params)
        result = check_program(compiled.program, compiled.source_scop, SOA, params,
                               seed=17, defines=DOUBLE)
        assert result.ok, (variant, result.message)


def test_interleaved_copies_pay_a_sector_per_run_of_their_elements_words():
    """A block of one interleaved element copies a word a sector (32 bytes for 8: three
    times the array's bytes more, each way); four elements a block copy whole sectors
    (no more); elements one after another (AoS) never pay it."""
    from dataclasses import replace

    from polygpu.search.space import element_blocks, group_variants

    params = {"nb": 23076, "n": 64}
    words = {"a": 23076 * 64 * 64 * 8, "b": 23076 * 64 * 8}  # read and written
    for spec, apart in ((SOA, True), ("kernels/batched_cholesky.c", False)):
        prepared = prepare(spec, defines=DOUBLE, params=params)
        c = next(k for k, tr in enumerate(prepared.candidates)
                 if tr.host is not None and tr.host.kind == "batch")
        dims = [k.n_space for k in prepared.candidates[c].kernels]
        (group, *_) = group_variants(c, (64, 64), 2, kernel_dims=dims)
        block = next(v for v in element_blocks(group, (64, 64), dims)
                     if v.threads == (8, 8))
        extra = {}
        for e in (1, 2, 4):
            variant = replace(block, elements_per_block=e, packed=True)
            sketch = plan_model.sketch(prepared, variant)
            planned = plan_model.plan_variant(prepared, variant, params)
            (residence,) = plan_model.launch_residences(planned, variant.cuts, params)
            extra[e] = plan_model.copy_sector_bytes(sketch, params, residence, e, 64)
        total = 2 * sum(words.values())
        assert extra == ({1: 3 * total, 2: total, 4: 0} if apart else {1: 0, 2: 0, 4: 0})


def test_write_backs_move_the_float_pick_at_n_16_to_resident_warps():
    """In float at n = 16 (1.5 GB) a launched thread per element stores once for every
    two loads of its triangle, each store a write-back: priced with them (and the
    spilled bytes' measured rate), it falls behind four resident warps a block, an
    element each -- on the H100 3.45 ms against 2.96 -- and the thread per element no
    longer wins the element plans' tie against a device-steps best."""
    from polygpu.memory.self_reuse import SPILLED_RATE_SHARE

    params = {"nb": 705882, "n": 16}
    prepared = prepare(SOA, params=params)
    choice = plan_model.choose(prepared, params)
    assert choice.variant.device_steps and choice.variant.resident
    assert choice.variant.elements_per_block == 4
    thread = plan_model.estimate(prepared, Variant(**THREAD, time_tile=16), params)
    assert thread.seconds > choice.ranking[0].seconds * 1.2
    c, _, _, reuse = _reuse(SOA, params, Variant(**THREAD, time_tile=16))
    (cost,) = plan_model.launch_costs(c, params)
    a = reuse["a"]
    assert a.again_bytes == (a.reads - a.footprint + a.writes - a.written) * 4
    assert a.writes > a.reads / 3  # a store for every two loads
    # (+ the compulsory bytes; b's 13 MB of vectors stay in L2)
    assert a.again_bytes / SPILLED_RATE_SHARE < cost.traffic_bytes < \
        (a.again_bytes + reuse["b"].again_bytes) / SPILLED_RATE_SHARE


def test_accesses_beyond_l1_go_to_l2_and_order_the_schedules_at_n_8():
    """At n = 8 in double a thread per interleaved element keeps 352 bytes of its
    element live, 2048 threads an SM 704 kB: L1 (256 kB) cannot keep them, so every load
    and store goes to L2.  The schedule that keeps the forward solve's sums in a
    register (candidate 1) has 547 of them an element against 610 where the solve is
    fused into the factorization (candidate 0); on the H100 they ran 1.335 against
    1.494 ms, and the model now picks candidate 1 (it tied them before, at the DRAM
    traffic, and kept candidate 0)."""
    from polygpu.memory.self_reuse import through_l2

    params = {"nb": 1333333, "n": 8}
    prepared = prepare(SOA, defines=DOUBLE, params=params)
    accesses, seconds = {}, {}
    for cand in (0, 1):
        variant = Variant(**(THREAD | {"candidate": cand}), time_tile=8)
        c, _, _, reuse = _reuse(SOA, params, variant, DOUBLE)
        for r in reuse.values():
            assert r.block_share == 1.0 and not r.scattered  # nothing shared
            assert r.l2_bytes(True) == (r.reads + r.writes) * 8
            assert r.l2_bytes(False) == (r.footprint + r.writes) * 8
        accesses[cand] = sum(r.reads + r.writes for r in reuse.values()) / params["nb"]
        assert sum(r.thread_bytes for r in reuse.values()) == 352
        values = tuple(reuse.values())
        assert through_l2(values, 2048, 256 << 10) == sum(r.l2_bytes(True) for r in values)
        assert through_l2(values, 512, 256 << 10) == sum(r.l2_bytes(False) for r in values)
        (cost,) = plan_model.launch_costs(c, params)
        assert cost.l2_bytes == through_l2(values, 2048, 256 << 10) > 5 * 10**9
        seconds[cand] = plan_model.estimate(prepared, variant, params).seconds
    assert (accesses[0], accesses[1]) == (610, 547)
    assert seconds[0] / seconds[1] > 1.1
    choice = plan_model.choose(prepared, params)
    assert (choice.variant.candidate, choice.variant.device_steps) == (1, False)


def test_threads_that_share_elements_load_them_once_a_block():
    """A group's threads of a 4 x 4 product each read a row of ``a`` that three more
    threads read too: a block's distinct elements are a quarter of its (thread,
    element) pairs, and its first loads reach L2 once a block."""
    params = {"nb": 4096, "n": 4}
    variant = Variant(tile=(16, 4, 4), threads=(16, 4, 4), shared=False)
    _, _, _, found = _reuse("kernels/batched_mm.c", params, variant)
    a = found["a"]
    assert a.block_share == 0.25
    assert a.l2_bytes(False) == round(a.footprint * 4 * 0.25)
