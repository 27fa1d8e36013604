"""``polygpu compile``: schedule, tile, place and emit; write FUNCTION.cu and .json."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

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
        "per-reference placement, buffers).  With -p for every size and no variant "
        "option, the plan is the cost model's top plan at those sizes (scheduler "
        "candidate, block shape, host loops launched or run on the device; the ranking "
        "is in the JSON's plan_choice); --variant '{}' gives the fixed default.",
    )
    add_input_arguments(p)
    add_variant_arguments(p)
    p.add_argument("-o", "--output", metavar="OUTDIR", required=True,
                   help="directory for FUNCTION.cu and FUNCTION.json")
    p.add_argument("--json", action="store_true",
                   help="also print the JSON description on stdout")
    p.set_defaults(run=run)
    return p


def model_chooses(args: argparse.Namespace, parameters, params) -> bool:
    """Whether the plan is the cost model's choice: no variant option given, and ``-p``
    gives every size (the model ranks plans at known sizes only)."""
    given = (args.variant, args.tile, args.threads, args.candidate)
    return all(g is None for g in given) and all(p in params for p in parameters)


def run(args: argparse.Namespace) -> int:
    from polygpu.output import compile_json, require_writable_dir, write_outputs
    from polygpu.pipeline import compile_variant, prepare
    from polygpu.runtime import inputs
    from polygpu.search import plan_model

    require_writable_dir(args.output, "output directory (-o)")
    variant = variant_from_args(args)
    program, params, _ = given_params(args)  # float scalars do not change the code
    prepared = prepare(args.file, args.function, args.defines, args.include_dirs, params)
    scop = prepared.analysis.scop
    inputs.require_context(program, scop.context, params)
    choice = None
    if model_chooses(args, scop.parameters, params):
        choice = plan_model.choose(prepared, params)
        variant = replace(choice.variant, fast_math=variant.fast_math)
    compiled = compile_variant(prepared, variant, params)
    description = compile_json(compiled, params)
    if choice is not None:  # every plan the model ranked, and why the first won
        description["plan_choice"] = choice.to_json()
    paths = write_outputs(args.output, compiled, description)
    if args.json:
        print(json.dumps(description, indent=2))
    else:
        print("wrote " + " and ".join(str(p) for p in paths))
    return 0
