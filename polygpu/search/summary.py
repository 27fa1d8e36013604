"""A tuning result read against the machine: roofline, cuBLAS, and one row per candidate.

The work (flops and compulsory bytes, counted with isl by :mod:`polygpu.search.metrics`)
turns each median time into GFLOP/s, achieved bandwidth and a fraction of the roofline.
When the region is a BLAS call (:func:`polygpu.search.peers.match_blas` recognises it from
the polyhedral model, not from names), the same calls are timed with cuBLAS in a child
process right after the search -- the same GPU, the same session -- and every candidate
gets its ratio ``peer time / candidate time`` (above 1: faster than cuBLAS).
"""

from __future__ import annotations

import multiprocessing
from dataclasses import dataclass, fields, replace

from polygpu.schedule.variant import Variant
from polygpu.search.metrics import Roofline, Workload, workload
from polygpu.search.tuner import Candidate, TuneResult, _prepared


@dataclass(frozen=True)
class Row:
    candidate: Candidate
    status: str
    time_ms: float | None
    gflops: float | None
    gbs: float | None
    fraction: float | None
    vs_peer: float | None  # peer time / this time


@dataclass(frozen=True)
class Summary:
    workload: Workload
    roofline: Roofline
    rows: tuple[Row, ...]  # measured candidates, best first
    peer_ms: float | None = None
    peer_name: str = ""
    peer_note: str = ""  # why there is no peer time
    peer: dict | None = None

    def best_json(self) -> dict:
        """What ``FUNCTION.json`` records about the search under ``"tuning"``."""
        best = self.rows[0] if self.rows else None
        return {
            "time_ms": best.time_ms if best else None,
            "gflops": best.gflops if best else None,
            "gbs": best.gbs if best else None,
            "roofline_fraction": best.fraction if best else None,
            "flops": self.workload.flops,
            "compulsory_bytes": self.workload.bytes,
            "roofline": {"bandwidth_gbs": self.roofline.peak_bandwidth_gbs,
                         "gflops": self.roofline.peak_gflops, "name": self.roofline.name},
            "peer": self.peer,
            "vs_peer": best.vs_peer if best else None,
            "measurement": best.candidate.measurement.extra if best and
            best.candidate.measurement else None,
        }


def variant_text(v: Variant) -> str:
    """The fields of ``v`` that differ from the defaults, compactly (tile and threads
    always), then each kernel's own fields where a per-kernel variant sets them:
    ``tile=32,64 threads=8,32 jam=True; kernel 1: tile=32,32 threads=8,32``."""
    # the defaults of every field (to_json leaves out double_buffer and fast_math when
    # they are off, so it cannot be the reference)
    plain = Variant()
    default = {f.name: getattr(plain, f.name) for f in fields(Variant)}
    parts = []
    for k, value in replace(v, kernels=()).to_json().items():
        if k in ("tile", "threads") or _shown(value) != _shown(default[k]):
            parts.append(f"{k}={_shown(value)}")
    text = " ".join(parts)
    order = list(default)
    for index, overrides in v.kernels:
        text += f"; kernel {index}: " + " ".join(
            f"{k}={_shown(value)}"
            for k, value in sorted(overrides, key=lambda kv: order.index(kv[0])))
    return text


def _shown(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def _peer_in_child(calls, params, dtype):
    from polygpu.search.peers import time_peer

    return time_peer(calls, params, dtype=dtype)


def peer_timing(result: TuneResult, timeout_s: float = 300.0):
    """(PeerTiming or None, note): cuBLAS on the region's BLAS calls, in a spawned child
    (the search's parent process holds no CUDA context)."""
    from polygpu.search.peers import match_blas

    opts = result.options
    scop = _prepared(result.spec, result.function_option, tuple(opts.defines),
                     tuple(opts.include_dirs)).analysis.scop
    calls = match_blas(scop)
    if not calls:
        return None, "no BLAS pattern in this region: no cuBLAS comparison"
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        job = pool.apply_async(_peer_in_child, (calls, dict(result.params), None))
        try:
            return job.get(timeout_s), ""
        except multiprocessing.TimeoutError:
            return None, f"cuBLAS timing took more than {timeout_s:g} s"
        except Exception as e:  # no GPU, no torch/cupy: a note, not a failure
            return None, f"cuBLAS timing failed: {type(e).__name__}: {e}"


H100 = Roofline()


def summarize(result: TuneResult, roofline: Roofline = H100, peer: bool = True) -> Summary:
    opts = result.options
    scop = _prepared(result.spec, result.function_option, tuple(opts.defines),
                     tuple(opts.include_dirs)).analysis.scop
    work = workload(scop, result.params)
    timing, note = peer_timing(result) if peer else (None, "")
    peer_ms = timing.median_ms if timing is not None and timing.ok else None
    if timing is not None and not timing.ok:
        note = f"no cuBLAS time: {timing.reason}"
    rows = []
    for c in result.ranking:
        m = c.measurement
        if m.status == "ok":
            perf = roofline.of(m.time_ms, work)
            rows.append(Row(c, m.status, m.time_ms, perf.gflops, perf.gbs, perf.fraction,
                            peer_ms / m.time_ms if peer_ms else None))
        else:
            rows.append(Row(c, m.status, None, None, None, None, None))
    name = ""
    if timing is not None and timing.ok:
        name = f"cuBLAS ({timing.blas or timing.library}: {'; '.join(timing.calls)})"
    return Summary(work, roofline, tuple(rows), peer_ms, name, note,
                   timing.to_json() if timing is not None else None)

