"""The ``model`` strategy's pruning rules (paper §6), each a plain function of a
candidate and what it is compared with.

A rule returns the candidate it prunes (a new one, with its stage and the reason) or
None to keep it, so a strategy composes them and a test calls one on a literal
:class:`~polygpu.search.candidate.Candidate`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from polygpu.search.candidate import Candidate
from polygpu.search.occupancy import SM_90, Limits, occupancy

REGISTERS_PER_BLOCK = 65536


def register_limited_threads(registers: int, limits: Limits = SM_90) -> int:
    """T: the most threads per block (a warp multiple, <= 1024) that ``registers`` per
    thread allow, registers being allocated per warp in units of 256."""
    per_warp = -(-max(registers, 1) * limits.warp_size // limits.register_unit) \
        * limits.register_unit
    warps = min(REGISTERS_PER_BLOCK // per_warp, 1024 // limits.warp_size)
    return warps * limits.warp_size


def concurrency(threads: int, registers: int, shared: int, blocks: int, sms: int,
                limits: Limits = SM_90) -> tuple[float, float]:
    """(occupancy per SM, fraction of the GPU's warp slots a grid of ``blocks`` fills).

    The second counts only the blocks that can be resident at once, and a grid of fewer
    blocks than SMs leaves SMs idle: 8 blocks of 1024 threads fill 8 SMs, not 4 % of
    every SM."""
    occ = occupancy(threads, registers, shared, limits)
    if occ.blocks_per_sm == 0:
        return 0.0, 0.0
    warps = -(-threads // limits.warp_size)
    resident = min(blocks, occ.blocks_per_sm * sms) * warps
    return occ.fraction, resident / (sms * limits.max_threads_per_sm // limits.warp_size)


def main_grid(c: Candidate) -> int:
    """Blocks of the launch that moves the most data (the one that sets the time)."""
    if not c.launches:
        return c.blocks
    return max(c.launches, key=lambda x: x.traffic_bytes).blocks


def traffic_floor(pool: Iterable[Candidate], limits: Limits = SM_90) -> int | None:
    """The fewest modelled bytes among ``pool`` whose main launch gives every SM a block
    (of all of ``pool`` when none does): a grid of fewer blocks than SMs leaves the rest
    idle, so its small traffic (a few huge tiles, one loop on a thread) is no floor for
    the variants that fill the GPU.  None for an empty pool."""
    pool = list(pool)
    filling = [c for c in pool if main_grid(c) >= limits.multiprocessors]
    return min((c.traffic_bytes for c in filling or pool), default=None)


def prune_traffic(c: Candidate, least: int, slack: float) -> Candidate | None:
    """``c`` pruned when its traffic exceeds ``least`` by more than ``slack`` percent
    (the paper's p)."""
    if c.traffic_bytes <= least * (1 + slack / 100):
        return None
    return replace(c, stage="pruned-traffic", reason=(
        f"{c.traffic_bytes:,} bytes modelled, more than {slack:g}% above the fewest of a "
        f"variant without spills ({least:,})"))


def prune_spills(c: Candidate) -> Candidate | None:
    """``c`` pruned when ptxas spills its registers: a register tile that does not fit
    the registers the block size leaves (ptxas caps them by ``__launch_bounds__``) spills
    to local memory -- traffic the model does not count, and it costs far more than the
    tile saves."""
    if not c.spill_bytes:
        return None
    return replace(c, stage="pruned-spills", reason=(
        f"ptxas spills {c.spill_bytes} bytes of registers to local memory "
        f"({c.registers} registers per thread, {c.threads} threads per block)"))


def prune_threads(c: Candidate, widest: int, limits: Limits = SM_90) -> Candidate | None:
    """``c`` pruned when its block is outside {T, T/2, T/4}, T the most threads its
    registers allow (at most ``widest``, the space's own largest block)."""
    t = min(register_limited_threads(c.registers or 1, limits), widest)
    if t // 4 <= c.threads <= t:
        return None
    return replace(c, stage="pruned-threads", reason=(
        f"{c.threads} threads per block, outside {{T, T/2, T/4}} for "
        f"T = {t} ({c.registers} registers per thread)"))


def prune_concurrency(c: Candidate, best: float, fraction: float) -> Candidate | None:
    """``c`` pruned when its concurrency is below ``fraction`` of the ``best``."""
    if c.concurrency >= fraction * best:
        return None
    return replace(c, stage="pruned-occupancy", reason=(
        f"concurrency {c.concurrency:.1%} (occupancy {c.occupancy:.0%}), below "
        f"{fraction:.0%} of the best ({best:.1%})"))
