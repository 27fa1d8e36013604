"""Probe: would full reduction slices apart from the last partial one pay?

A specialized all-pairs kernel still bounds its slice loop by ``min(d - 1, S o + S - 1)``
(d = 5419 is no multiple of the slice S), so nvcc unrolls it by the variant's factor
with remainder code.  This probe rewrites the generated text -- each such loop becomes
``if (S o + S - 1 <= d - 1) <loop to S o + S - 1> else <the loop as it was>`` -- and
times the original and the split kernels (full slices unrolled by the variant's factor,
or completely) on the same inputs in the same run, every output compared with the
original's first.  A text rewrite for a measurement only: what the code generator
would do if it pays.

    python tuning/probe_slice_split.py -o tuning/results/<gpu>/probe_slice_split.json
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LOOP = re.compile(r"(#pragma unroll (\d+)\n\s*)?for \(int (\w+) = (\d+) \* (\w+); \3 <= "
                  r"min\((\d+), \4 \* \5 \+ (\d+)\); \3 \+= 1\)\n")


def _block_end(text: str, start: int) -> int:
    """Index after the brace-balanced block starting at ``text[start] == '{'``."""
    depth = 0
    for k in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[k], 0)
        if depth == 0:
            return k + 1
    raise ValueError("unbalanced braces")


def split_slices(source: str, full_unroll: str) -> tuple[str, int]:
    """``source`` with every slice loop split into full and partial slices."""
    out, pos, count = [], 0, 0
    for m in LOOP.finditer(source):
        if m.start() < pos:
            continue
        body_start = source.index("{", m.end())
        body_end = _block_end(source, body_start)
        body = source[body_start:body_end]
        it, s, o, last, width = m.group(3), m.group(4), m.group(5), m.group(6), m.group(7)
        pragma = m.group(1) or ""
        full = (f"#pragma unroll {full_unroll}\n" if full_unroll else "#pragma unroll\n") + \
            f"for (int {it} = {s} * {o}; {it} <= {s} * {o} + {width}; {it} += 1)\n{body}"
        partial = f"{pragma}for (int {it} = {s} * {o}; {it} <= min({last}, {s} * {o} + " \
                  f"{width}); {it} += 1)\n{body}"
        out.append(source[pos:m.start()])
        out.append(f"if ({s} * {o} + {width} <= {last}) {{\n{full}\n}} else {{\n{partial}\n}}\n")
        pos = body_end
        count += 1
    out.append(source[pos:])
    return "".join(out), count


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--file", default="kernels/allpairs/l2dist.c")
    p.add_argument("--sizes", default="n1=2000,n2=2000,d=5419")
    p.add_argument("--slices", type=int, nargs="+", default=[16, 32],
                   help="slice widths of the tuned shape (128 x 128 tile, 16 x 32 threads)")
    p.add_argument("--variants", help="a JSON list of variants instead of the tuned shape")
    p.add_argument("--unrolls", nargs="+", default=["4", "all"],
                   help="how the split full slices are unrolled: a factor, or all")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("-o", "--output")
    args = p.parse_args(argv)

    from polygpu.frontend import load
    from polygpu.pipeline import compile_variant, prepare
    from polygpu.runtime import gpu, inputs
    from polygpu.schedule.variant import Variant

    params = {k: int(v) for k, v in (kv.split("=") for kv in args.sizes.split(","))}
    prepared = prepare(args.file, params=params)
    source = load(args.file)
    ints = inputs.integer_parameters(source, params)
    fresh = inputs.random_values(source, ints, inputs.array_shapes(source, ints),
                                 np.random.default_rng(7))
    written = sorted(prepared.analysis.scop.written_arrays() & set(fresh))
    programs = {}
    if args.variants:
        variants = [Variant.from_json(v) for v in json.loads(Path(args.variants).read_text())]
    else:
        variants = [Variant(tile=(128, 128), threads=(16, 32), jam=True, time_tile=s,
                            unroll=4, chunk=4, prefetch=True, specialize=True)
                    for s in args.slices]
    for v in variants:
        base = compile_variant(prepared, v, params).program
        shape = f"tile {v.tile} threads {v.threads} slices of {v.time_tile} unroll {v.unroll}"
        programs[shape] = base
        for unroll in args.unrolls:
            text, n = split_slices(base.source, "" if unroll == "all" else unroll)
            programs[f"{shape}, split, unroll {unroll} ({n} loops)"] = dataclasses.replace(
                base, source=text)
    rows, expected = {}, {}
    for name, prog in programs.items():
        values = {k: (x.copy() if isinstance(x, np.ndarray) else x) for k, x in fresh.items()}
        gpu.run_program(prog, values)
        if not expected:
            expected = {a: values[a].copy() for a in written}
            err = 0.0
        else:
            err = max(float(np.max(np.abs(values[a] - expected[a]) /
                                   (np.abs(expected[a]) + 1e-3))) for a in written)
        rows[name] = {"max_rel_error_vs_first": err, "ms": []}
        print(f"{name}: error {err:.3g}", flush=True)
    for _ in range(args.rounds):  # interleaved rounds: drift hits every kernel alike
        for name, prog in programs.items():
            if rows[name]["max_rel_error_vs_first"] > 1e-4:
                continue
            values = {k: (x.copy() if isinstance(x, np.ndarray) else x) for k, x in fresh.items()}
            rows[name]["ms"].append(gpu.time_program(prog, values, repeats=20, warmup=3).median_ms)
    for name, r in rows.items():
        r["median_ms"] = float(np.median(r["ms"])) if r["ms"] else None
        print(f"{name}: {r['median_ms']} ms  (rounds {[round(t, 4) for t in r['ms']]})")
    out = {"file": args.file, "params": params, "date": datetime.date.today().isoformat(),
           "device": gpu.device().name, "rows": rows}
    if args.output:
        Path(args.output).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
