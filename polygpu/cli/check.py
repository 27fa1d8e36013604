"""``polygpu check``: run the generated code and the original on the same inputs."""

from __future__ import annotations

import argparse

from polygpu.cli.arguments import (
    add_input_arguments,
    add_variant_arguments,
    given_params,
    seed_value,
    variant_from_args,
)

MISMATCH = 1  # the generated code computed something else
# not a pass, and not a proven mismatch: some elements differ from the reference by no
# more than rounding could move them, but by more than the conditioning bound admits
# (runtime/check.py); smaller sizes or another seed can decide
INCONCLUSIVE = 4


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "check",
        help="run the generated code and compare it with the original loop nest",
        description="Compile FILE's region like 'compile', run the result (the emitted CUDA "
        "text, emulated on the host with --backend cpu, or on the GPU through PyCUDA) and "
        "the original function (C compiled with the host compiler, or the Python function) "
        "on the same fresh random inputs, with the outputs poisoned first; exit 0 only "
        "if every array matches, 1 on a mismatch, 4 when the check is inconclusive "
        "(inputs too ill-conditioned to tell a wrong result from rounding; see "
        "docs/runtime.md for the tolerances).",
    )
    add_input_arguments(p)
    add_variant_arguments(p)
    p.add_argument("--backend", choices=("cpu", "gpu"), default="cpu",
                   help="cpu: emulate the CUDA text on the host (small sizes, no GPU "
                   "needed); gpu: run it through PyCUDA (default: cpu)")
    p.add_argument("--seed", type=seed_value, help="seed of the random inputs "
                   "(0 to 2**32-1)")
    p.set_defaults(run=run)
    return p


def run(args: argparse.Namespace) -> int:
    from polygpu.pipeline import compile_region
    from polygpu.runtime import compiler, inputs
    from polygpu.runtime.check import check_program

    compiler.cache_dir()  # writable, before any work
    variant = variant_from_args(args)
    program, params, scalars = given_params(args, need_all=True)
    compiled = compile_region(args.file, args.function, variant, args.defines,
                              args.include_dirs, params)
    inputs.require_context(program, compiled.analysis.scop.context, params)
    result = check_program(compiled.program, compiled.source_scop, args.file, params,
                           backend=args.backend, seed=args.seed, defines=args.defines,
                           include_dirs=args.include_dirs, scalars=scalars)
    kernels = len(compiled.program.launches)
    verdict = "ok" if result.ok else "INCONCLUSIVE" if result.inconclusive else "MISMATCH"
    print(f"{verdict}: {compiled.program.function} "
          f"({kernels} kernel{'s' if kernels > 1 else ''}, {args.backend} backend, "
          f"{', '.join(f'{k}={v}' for k, v in params.items())}, seed {result.seed})")
    print(result.message)
    return 0 if result.ok else INCONCLUSIVE if result.inconclusive else MISMATCH
