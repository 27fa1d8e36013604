"""Fuzzing the whole pipeline: at least 500 distinct random affine nests, each compiled
(scheduled, tiled and proven legal with isl by ``compile_variant``), emitted as CUDA, run
on the CPU emulator and compared with the original C.

The nests come from ``fuzz_nests`` (tests/random_nests.py): up to 4 statements and 4
loop dimensions, offset, triangular, windowed, min/max, strided and descending bounds,
shifted and scaled subscripts, in-place updates, reductions and time-step loops whose
dependences are carried by the outer loop.  Each nest gets *one* variant of ``VARIANTS``,
one scheduler candidate and one small odd size, all drawn by hypothesis (so a failure
reproduces; it is not shrunk).

Cost.  A nest costs about 1 s, mostly g++ compiling the emulated program (the emulation
header alone is ~0.7 s of it); so examples are batches of ``BATCH`` nests run by a pool
of ``WORKERS`` processes: 500 distinct nests take about 20 minutes on 2 cores.
Derandomized, so CI is reproducible; marked ``slow`` like the other end-to-end runs.
"""

from __future__ import annotations

import faulthandler
import hashlib
import multiprocessing
import os
import traceback
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.random_nests import NMIN, fuzz_nests, render_c

VARIANTS = (
    {},
    {"tile": (4, 8), "threads": (2, 4)},  # register tiles of 2 x 2, several blocks
    {"tile": (2, 4, 4), "threads": (1, 2, 4), "jam": True},  # unroll-and-jam, 3-D blocks
    {"tile": (3, 8), "threads": (3, 4), "time_tile": 2, "unroll": 2},  # strip-mined time
    {"tile": (4, 8), "threads": (4, 2), "blocked": True},
    {"tile": (8, 8), "threads": (2, 4), "chunk": 2, "prefetch": True},
    {"tile": (4, 4), "threads": (4, 4), "shared": False, "registers": False},
    {"tile": (4, 8), "threads": (4, 8), "specialize": True},
)
SIZES = (7, 9, 11, 13)  # odd, so tiles are partial; all >= NMIN
assert min(SIZES) >= NMIN

BATCH = 4  # nests per hypothesis example, run in parallel
WORKERS = max(1, min(2, len(os.sched_getaffinity(0))))
# hypothesis draws small nests again and again: a nest already run is skipped, and the
# examples stop doing work once MIN_DISTINCT nests ran (asserted below)
EXAMPLES = 400
MIN_DISTINCT = 500
CASE_TIMEOUT = 120  # seconds; a nest normally takes 1 to 3


def run_case(folder: str, source: str, variant: dict, candidate: int, n: int) -> str | None:
    """Compile ``source`` with ``variant`` and its scheduler candidate ``candidate``
    (modulo how many there are), check it at ``n`` on the CPU emulator: None if right,
    else a description.  Runs in a worker process, which a hang of over CASE_TIMEOUT
    seconds ends (printing its Python stack)."""
    from polygpu.errors import PolygpuError
    from polygpu.pipeline import compile_variant, prepare
    from polygpu.runtime.check import check_program
    from polygpu.schedule.variant import Variant

    path = Path(folder) / f"nest_{hashlib.sha256(source.encode()).hexdigest()[:16]}.c"
    if not path.exists():
        path.write_text(source)
    program = None
    faulthandler.dump_traceback_later(CASE_TIMEOUT, exit=True)
    try:
        try:
            prepared = prepare(str(path), "nest")
        except PolygpuError as e:
            if "no statement of the region ever runs" in e.message:
                return None  # guards no iteration satisfies: nothing to generate
            raise
        chosen = Variant(candidate=candidate % len(prepared.candidates), **variant)
        compiled = compile_variant(prepared, chosen, {"n": n})
        program = compiled.program.source
        result = check_program(compiled.program, compiled.source_scop, str(path),
                               {"n": n}, seed=n)
        if result.ok:
            return None
        what = result.message
    except Exception:  # noqa: BLE001 -- any failure of the pipeline is a finding
        what = traceback.format_exc(limit=-6)
    finally:
        faulthandler.cancel_dump_traceback_later()
    return (f"{_case_text(source, variant, candidate, n)}:\n{what}"
            + (f"\n-- CUDA --\n{program}" if program else ""))


def _case_text(source: str, variant: dict, candidate: int, n: int) -> str:
    scop = source.split("#pragma scop\n")[-1].split("#pragma endscop")[0]
    return f"variant {variant} candidate {candidate}, n={n}, nest:\n{scop}"


class Workers:
    """A process pool that survives a worker killed by its timeout (or a crash)."""

    def __init__(self, folder: str):
        self.folder = folder
        self.executor = self._start()

    @staticmethod
    def _start() -> ProcessPoolExecutor:
        return ProcessPoolExecutor(WORKERS, mp_context=multiprocessing.get_context("spawn"))

    def run(self, cases: list[tuple[str, int, int, int]]) -> list[str | None]:
        """run_case on each (source, variant index, candidate, n), in parallel."""
        jobs = [self.executor.submit(run_case, self.folder, src, VARIANTS[v], c, n)
                for src, v, c, n in cases]
        results, broken = [], False
        for (src, v, c, n), job in zip(cases, jobs, strict=True):
            try:
                results.append(job.result())
            except BrokenProcessPool:
                broken = True
                results.append(f"a worker died (over {CASE_TIMEOUT} s, or a crash; its stack "
                               f"is on stderr) on this nest or another of its batch: "
                               f"{_case_text(src, VARIANTS[v], c, n)}")
        if broken:
            self.executor.shutdown(wait=False, cancel_futures=True)
            self.executor = self._start()
        return results


cases = st.tuples(fuzz_nests(), st.integers(0, len(VARIANTS) - 1), st.integers(0, 3),
                  st.sampled_from(SIZES))


@pytest.fixture(scope="module")
def workers(tmp_path_factory):
    pool = Workers(str(tmp_path_factory.mktemp("fuzz")))
    yield pool
    pool.executor.shutdown(cancel_futures=True)


@pytest.mark.slow
def test_fuzz_nests_run_correctly(workers):
    seen: set[str] = set()  # distinct nests run

    # no shrinking: a failure is reported as drawn (nest, variant, candidate and size in
    # full), and shrinking a hang costs CASE_TIMEOUT per attempt
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck),
              phases=[Phase.explicit, Phase.generate])
    @given(batch=st.lists(cases, min_size=BATCH, max_size=BATCH,
                          unique_by=lambda case: render_c(case[0])))
    def check(batch):
        if len(seen) >= MIN_DISTINCT:
            return  # enough
        todo = [(render_c(tree), v, c, n) for tree, v, c, n in batch]
        todo = [case for case in todo if case[0] not in seen]  # new nests only
        seen.update(src for src, *_ in todo)
        failures = [f for f in workers.run(todo) if f is not None]
        assert not failures, "\n\n".join(failures)

    check()
    assert len(seen) >= MIN_DISTINCT, f"only {len(seen)} distinct nests"
