"""``polygpu compile``: schedule, tile, place and emit; write FUNCTION.cu and .json."""

from __future__ import annotations

import argparse
import json

from polygpu.cli.arguments import (
    add_input_arguments,
    add_variant_arguments,
    given_params,
    variant_from_args,
)


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "compile",
        help="generate CUDA for a loop nest",
        description="Schedule FILE's region for coalescing (Algorithm 1, isl fallback), tile "
        "and map it to blocks and threads, prove the result legal with isl, place data in "
        "shared memory (padded by Algorithm 2), registers and constant memory, and write "
        "OUTDIR/FUNCTION.cu and OUTDIR/FUNCTION.json (variant, launch plan, schedule, "
        "per-reference placement, buffers).",
    )
    add_input_arguments(p)
    add_variant_arguments(p)
    p.add_argument("-o", "--output", metavar="OUTDIR", required=True,
                   help="directory for FUNCTION.cu and FUNCTION.json")
    p.add_argument("--json", action="store_true",
                   help="also print the JSON description on stdout")
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    from polygpu.output import compile_json, require_writable_dir, write_outputs
    from polygpu.pipeline import compile_region
    from polygpu.runtime import inputs

    require_writable_dir(args.output, "output directory (-o)")
    variant = variant_from_args(args)
    program, params, _ = given_params(args)  # float scalars do not change the code
    compiled = compile_region(args.file, args.function, variant, args.defines,
                              args.include_dirs, params)
    inputs.require_context(program, compiled.analysis.scop.context, params)
    description = compile_json(compiled, params)
    paths = write_outputs(args.output, compiled, description)
    if args.json:
        print(json.dumps(description, indent=2))
    else:
        print("wrote " + " and ".join(str(p) for p in paths))
    return 0
