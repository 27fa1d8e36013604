"""Where a tune's time goes: ``polygpu.optimize(tune=True)`` under cProfile, with the
wall time of each stage (the parent process's view: compile and measurement children
show as the time the parent waits for them).

    python tuning/tune_profile.py kernels/polybench/jacobi_2d.c -p tsteps=1000 -p n=2800 \\
        --budget 10 [--top 40] [-o prof.txt]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("file")
    p.add_argument("-p", "--param", dest="params", action="append", default=[])
    p.add_argument("--function")
    p.add_argument("--budget", type=int, default=10)
    p.add_argument("--strategy", default="model")
    p.add_argument("--backend", default="gpu")
    p.add_argument("--time-limit", type=float, default=None, metavar="S",
                   help="the search's time limit (TuneOptions.time_limit_s)")
    p.add_argument("--top", type=int, default=45)
    p.add_argument("-o", "--output")
    args = p.parse_args(argv)

    from polygpu.params import parse_params
    from polygpu.pipeline import prepare
    from polygpu.search import plan_model

    params = parse_params(args.params)
    t0 = time.perf_counter()
    prepared = prepare(args.file, args.function, params=params)
    t1 = time.perf_counter()
    plan_model.choose(prepared, params)
    t2 = time.perf_counter()
    print(f"prepare {t1 - t0:.2f} s, plan_model.choose {t2 - t1:.2f} s", flush=True)
    prof = cProfile.Profile()
    start = time.perf_counter()
    prof.enable()
    logged: list = []
    result = _tune(args, params, logged)
    prof.disable()
    wall = time.perf_counter() - start
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("cumulative").print_stats(args.top)
    stats.sort_stats("tottime").print_stats(25)
    best = result.ranking[0] if result.ranking else None
    text = (f"{args.file} {params} budget {args.budget}: tune {wall:.1f} s, best "
            f"{best.key if best else None} "
            f"{best.measurement.time_ms if best else float('nan'):.3f} ms\n"
            + timeline(logged[0].spans, wall) + per_candidate(result) + out.getvalue())
    print(text)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    return 0


def _tune(args, params, logged: list):
    """``polygpu.optimize(tune=True)``'s search (the same runner and options), keeping the
    whole :class:`TuneResult` for the per-candidate table (the logging runner appended to
    ``logged``)."""
    from polygpu.search import tuner
    from polygpu.search.runner import ProcessRunner

    options = tuner.TuneOptions(strategy=args.strategy, budget=args.budget,
                                time_limit_s=args.time_limit)
    with ProcessRunner(args.backend) as runner:
        logged.append(_Logged(runner))
        return tuner.tune(args.file, params, logged[0], function=args.function,
                          options=options)


class _Logged:
    """The runner, printing each measurement as it ends (seconds since the tune started),
    so a tune stopped by a time limit still shows where its time went."""

    def __init__(self, runner):
        self.runner, self.t0 = runner, time.perf_counter()
        self.spans: list[tuple[float, float]] = []  # each measurement's start and end, s

    def warm(self, *args):
        self.runner.warm(*args)

    def environment(self):
        return self.runner.environment()

    def measure(self, job):
        t0 = time.perf_counter()
        m = self.runner.measure(job)
        self.spans.append((t0 - self.t0, time.perf_counter() - self.t0))
        print(f"[{time.perf_counter() - self.t0:6.1f} s] measured in "
              f"{time.perf_counter() - t0:5.1f} s: {m.status} "
              f"{m.time_ms if m.time_ms is not None else m.extra.get('check_run_ms')} ms, "
              f"{len(m.times_ms)} runs, stages {m.extra.get('stages_s')} "
              f"cut off {m.extra.get('cut_off_ms')} {job.key}", flush=True)
        return m


def timeline(spans, wall: float) -> str:
    """Where the runner (the GPU) waited for the search: before the first measurement,
    between measurements, after the last, against the time it measured."""
    if not spans:
        return f"no measurement in {wall:.1f} s\n\n"
    busy = sum(end - start for start, end in spans)
    gaps = [b[0] - a[1] for a, b in zip(spans, spans[1:], strict=False)]
    return (f"runner busy {busy:.1f} s of {wall:.1f} s: {spans[0][0]:.1f} s before the first "
            f"measurement, {sum(gaps):.1f} s between measurements "
            f"({', '.join(f'{g:.1f}' for g in gaps)}), {wall - spans[-1][1]:.1f} s after "
            "the last\n\n")


def per_candidate(result) -> str:
    """Each measured candidate in the order measured: status, median, runs, the race's
    cutoff when it stopped one, and the measuring child's stages."""
    by_key = {c.key: c for c in result.candidates}
    lines = ["order | status | ms | runs | cut off at ms | child stages s | variant"]
    for i, key in enumerate(result.order):
        m = by_key[key].measurement
        if m is None:
            continue
        ms = f"{m.time_ms:.3f}" if m.time_ms is not None else m.reason.splitlines()[0][:60] \
            if m.reason else ""
        lines.append(f"{i} | {m.status} | {ms} | {len(m.times_ms)} | "
                     f"{m.extra.get('cut_off_ms', '')} | {m.extra.get('stages_s', '')} | {key}")
    return "\n".join(lines) + "\n\n"


if __name__ == "__main__":
    sys.exit(main())
