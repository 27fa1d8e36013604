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
    p.add_argument("--top", type=int, default=45)
    p.add_argument("-o", "--output")
    args = p.parse_args(argv)

    from polygpu.api import optimize
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
    kernel = optimize(args.file, params=params, function=args.function, tune=True,
                      strategy=args.strategy, budget=args.budget, database=False,
                      backend=args.backend)
    prof.disable()
    wall = time.perf_counter() - start
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("cumulative").print_stats(args.top)
    stats.sort_stats("tottime").print_stats(25)
    text = (f"{args.file} {params} budget {args.budget}: tune {wall:.1f} s, best "
            f"{kernel.variant.to_json()} {kernel.measurement.time_ms:.3f} ms\n" + out.getvalue())
    print(text)
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
