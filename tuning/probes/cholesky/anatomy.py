"""Probe: where a per-element Cholesky + solve spends its time at n = 64 (issue 21).

Times, at the same sizes and on the same device, the full kernel
(``kernels/batched_cholesky.c``), its factorization alone (``factor.c``) and its two
substitutions alone (``solve.c``), each under the plans the default ranks; the full
kernel's plans again with ``__noinline__`` device functions forced inline (the
calls' share).  Unmodified programs are checked against the loop nest at nb = 37 first;
the forced-inline sources are timing-only.

    python tuning/probes/cholesky/anatomy.py --n 64 --nb 23076 --out FILE.json
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tuning"))

from allpairs import checked, time_program  # noqa: E402

from polygpu.pipeline import compile_variant, prepare  # noqa: E402
from polygpu.runtime.device import get_device  # noqa: E402
from polygpu.search import plan_model  # noqa: E402

SPECS = {"full": ROOT / "kernels" / "batched_cholesky.c",
         "factor": HERE / "factor.c", "solve": HERE / "solve.c"}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=64)
    p.add_argument("--nb", type=int, default=23076)
    p.add_argument("--plans", type=int, default=4, help="ranked plans timed per input")
    p.add_argument("--parts", nargs="*", default=list(SPECS))
    p.add_argument("--backend", default="gpu")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    device = get_device(args.backend)
    sizes = {"nb": args.nb, "n": args.n}
    rows = []
    for part in args.parts:
        spec = str(SPECS[part])
        prepared = prepare(spec, params=sizes)
        choice = plan_model.choose(prepared, sizes)
        seen = []
        for r in choice.ranking:
            if r.seconds == float("inf") or r.variant in seen:
                continue
            seen.append(r.variant)
            if len(seen) > args.plans:
                break
            row = {"part": part, "variant": r.variant.to_json(),
                   "predicted_ms": r.seconds * 1e3, "detail": r.detail}
            try:
                if part == "full":
                    row["check"] = checked(spec, "batched_cholesky", (), r.variant, device,
                                           {"nb": 37, "n": args.n})
                program = compile_variant(prepared, r.variant, sizes).program
                row["ms"] = time_program(device, program, sizes, 10)
                if "__noinline__" in program.source:
                    inlined = replace(program, source=program.source.replace(
                        "__noinline__", "__forceinline__"))
                    row["inlined_ms"] = time_program(device, inlined, sizes, 10)
            except Exception as e:  # noqa: BLE001 -- a probe records what failed
                row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            print(json.dumps({k: v for k, v in row.items() if k != "variant"}),
                  flush=True)
            rows.append(row)
    args.out.write_text(json.dumps({"gpu": getattr(device, "name", args.backend),
                                    "sizes": sizes, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
