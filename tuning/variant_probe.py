"""Time hand-picked variants of one region on the GPU, next to cuBLAS in the same run.

A probe, not the search: it answers "how fast can this code shape go" before a space is
widened to include it.  Every variant's output is compared first -- with the vendor
library's result (through the BLAS matcher, numpy on the host) when the region matches a
BLAS call, else with the first variant's -- so a fast but wrong variant is reported as
wrong, never as fast.

    python tuning/variant_probe.py kernels/mm.c -p n=4096 \\
        --variant '{"tile": [64, 64], "threads": [8, 16], "jam": true}' \\
        --variant '{"tile": [64, 64], "threads": [8, 16], "jam": true, "specialize": true}' \\
        -o tuning/results/GPU/probe_mm_4096.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys

import numpy as np


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("file")
    p.add_argument("-p", "--param", dest="params", action="append", default=[])
    p.add_argument("--variant", action="append", default=[], help="variant JSON (repeat)")
    p.add_argument("--variants", help="a JSON file with a list of variants")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--flops", help="FLOPs of one run as a Python expression of the params")
    p.add_argument("-o", "--output", help="write the results here as JSON")
    args = p.parse_args(argv)

    from polygpu.frontend import load
    from polygpu.params import parse_params
    from polygpu.pipeline import compile_variant, prepare
    from polygpu.runtime import gpu, inputs
    from polygpu.schedule.variant import Variant
    from polygpu.search import peers

    params = parse_params(args.params)
    variants = [Variant.from_json(v) for v in args.variant]
    if args.variants:
        with open(args.variants, encoding="utf-8") as f:
            variants += [Variant.from_json(v) for v in json.load(f)]
    source = load(args.file)  # the reference inputs
    # the pipeline's own preparation: temporaries expanded, index sets split, snapshots
    # taken, as compile and tune do (a model built here without them left l2dist's scalar
    # temporary serialising every loop: its first variant ran for minutes)
    prepared = prepare(args.file, params=params)
    scop = prepared.source_scop or prepared.analysis.scop  # the caller's arrays
    ints = inputs.integer_parameters(source, params)
    shapes = inputs.array_shapes(source, ints)
    fresh = inputs.random_values(source, ints, shapes, np.random.default_rng(7))
    calls = peers.match_blas(scop)
    # arrays only: a written scalar (l2dist's temporary ``t``) is not an output to compare
    written = [a for a in sorted(scop.written_arrays()) if isinstance(fresh.get(a), np.ndarray)]
    expected = None
    if calls:
        expected = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in fresh.items()}
        peers.apply_numpy(calls, ints, expected)
    peer = peers.time_peer(calls, ints) if calls else None
    flops = eval(args.flops, {}, dict(ints)) if args.flops else None  # noqa: S307
    rows = []
    for v in variants:
        row = {"variant": v.to_json()}
        try:
            program = compile_variant(prepared, v, params).program
            values = {k: (x.copy() if isinstance(x, np.ndarray) else x)
                      for k, x in fresh.items()}
            gpu.run_program(program, values)
            if expected is None:
                # a copy: the timing below runs the program again on ``values``, which
                # moves an in-place (iterative) region's state on
                expected = {k: (x.copy() if isinstance(x, np.ndarray) else x)
                            for k, x in values.items()}
                row["check"] = "reference (first variant)"
            else:
                err = max(float(np.max(np.abs(values[a] - expected[a])
                                       / (np.abs(expected[a]) + 1e-3))) for a in written)
                row["check_max_rel_error"] = err
                if not err < 1e-3:
                    row["status"] = "wrong"
                    rows.append(row)
                    print(f"WRONG {v.to_json()} max rel error {err:.3g}", flush=True)
                    continue
            timing = gpu.time_program(program, values, repeats=args.repeats, warmup=3)
            row["status"] = "ok"
            row["ms"] = timing.median_ms
            if flops:
                row["gflops"] = flops / timing.median_ms / 1e6
            if peer is not None and peer.ok:
                row["x_peer"] = peer.median_ms / timing.median_ms
        except Exception as e:  # a failing variant is reported, the probe goes on
            row["status"] = "failed"
            row["reason"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        rows.append(row)
        print(json.dumps(row), flush=True)
    out = {"file": args.file, "params": params, "date": datetime.date.today().isoformat(),
           "device": peer.device if peer else "",
           "peer": peer.to_json() if peer else None, "rows": rows}
    if peer is not None and peer.ok and flops:
        out["peer_gflops"] = flops / peer.median_ms / 1e6
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)
    print(json.dumps({k: v for k, v in out.items() if k != "rows"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
