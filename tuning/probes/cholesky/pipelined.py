"""Probe: would a batched Cholesky's trailing update run faster with its loads issued
ahead of its stores (issue 21, n = 64)?

The update's innermost loop (``a[i][j] -= a[i][k] * a[j][k]`` over a thread's columns
``j``) runs one iteration after another in the SASS: three shared loads, the FMA, the
store, and the next iteration's loads only after that store -- nvcc cannot tell that
they read other elements (one resident buffer), so each iteration waits a load's whole
latency.  This probe rewrites the generated source by hand: each innermost loop whose
body is one ``-=`` statement unrolled by ``U`` with every load of the ``U`` iterations
first (then the ``U`` stores), a remainder loop after.  That is only legal where the
loop's iterations are independent (here: the update writes columns ``j > k`` and reads
column ``k``); the rewritten program is therefore checked against the loop nest on the
device at nb = 37 (the same rewrite of the program generated for that size) before
it is timed beside the original.

    python tuning/probes/cholesky/pipelined.py --n 64 --out FILE.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tuning"))

from allpairs import time_program  # noqa: E402

from polygpu.pipeline import compile_variant, prepare  # noqa: E402
from polygpu.runtime.check import check_program  # noqa: E402
from polygpu.runtime.device import get_device  # noqa: E402
from polygpu.search import plan_model  # noqa: E402

SPEC = ROOT / "kernels" / "batched_cholesky.c"
LOOP = re.compile(r"(?P<ind>[ \t]*)for \(int (?P<it>\w+) = (?P<init>[^;]+); (?P=it) <= "
                  r"(?P<hi>[^;]+); (?P=it) \+= 1\)\n[ \t]*\{\n[ \t]*(?P<stmt>[^\n{};]+ -= "
                  r"[^\n{};]+);\n[ \t]*\}\n")
REF = re.compile(r"\b(pg_res_\w+)((?:\[[^\[\]]*\])+)")


def pipelined(source: str, unroll: int, ctype: str) -> tuple[str, int]:
    """``source`` with every innermost one-statement ``-=`` loop unrolled by ``unroll``,
    the loads of all its iterations first; and how many loops were rewritten."""
    count = 0

    def rewrite(m: re.Match) -> str:
        nonlocal count
        count += 1
        ind, it, stmt = m["ind"], m["it"], m["stmt"]
        target, value = stmt.split(" -= ", 1)

        def at(text: str, u: int) -> str:
            return re.sub(rf"\b{it}\b", f"({it} + {u})", text)

        refs = list(dict.fromkeys(r.group(0) for r in REF.finditer(stmt)))
        loads, stores = [], []
        for u in range(unroll):
            names = {}
            for k, ref in enumerate(refs):
                names[ref] = f"pg_p{u}_{k}"
                loads.append(f"const {ctype} pg_p{u}_{k} = {at(ref, u)};")
            expr = REF.sub(lambda r, names=names: names[r.group(0)], value)
            stores.append(f"{at(target, u)} = {names[target]} - {expr};")
        body = "\n".join(f"{ind}    {line}" for line in loads + stores)
        return (f"{ind}{{\n{ind}  int {it} = {m['init']};\n"
                f"{ind}  const int pg_hi = {m['hi']};\n"
                f"{ind}  for (; {it} + {unroll - 1} <= pg_hi; {it} += {unroll})\n"
                f"{ind}  {{\n{body}\n{ind}  }}\n"
                f"{ind}  for (; {it} <= pg_hi; {it} += 1)\n{ind}    {stmt};\n{ind}}}\n")

    return LOOP.sub(rewrite, source), count


def rolled(source: str, outer: bool = True) -> tuple[str, int]:
    """``source`` with ``#pragma unroll 1`` before every innermost one-statement ``-=``
    loop (nvcc otherwise unrolls it by 4, with a remainder's prologue for a loop of a
    few iterations), and before the loop around it where that loop's trip depends on a
    thread id; and how many loops were marked."""
    count = 0

    def mark(m: re.Match) -> str:
        nonlocal count
        count += 1
        return f"{m['ind']}#pragma unroll 1\n{m.group(0)}"

    out = LOOP.sub(mark, source)
    if not outer:
        return out, count
    around = re.compile(r"(?P<ind>[ \t]*)(for \(int \w+ = [^;]*\b(tx|ty)\b[^;]*;[^\n]*\n"
                       r"[ \t]*\{\n[ \t]*#pragma unroll 1\n)")
    out = around.sub(lambda m: f"{m['ind']}#pragma unroll 1\n{m.group(0)}", out)
    return out, count


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=64)
    p.add_argument("--megabytes", type=int, default=1536)
    p.add_argument("--dtype", nargs="*", default=["float32", "float64"])
    p.add_argument("--unroll", type=int, nargs="*", default=[4])
    p.add_argument("--backend", default="gpu")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    device = get_device(args.backend)
    rows = []
    for dtype in args.dtype:
        size = 4 if dtype == "float32" else 8
        nb = args.megabytes * 10**6 // (2 * size * args.n * (args.n + 1))  # as batched.py
        defines = () if dtype == "float32" else ("DATA_TYPE=double", "SQRT_FUN=sqrt")
        ctype = "float" if dtype == "float32" else "double"
        sizes, small = {"nb": nb, "n": args.n}, {"nb": 37, "n": args.n}
        prepared = prepare(str(SPEC), params=sizes, defines=defines)
        variant = plan_model.choose(prepared, sizes).ranking[0].variant
        program = compile_variant(prepared, variant, sizes).program
        row = {"dtype": dtype, "n": args.n, "nb": nb, "variant": variant.to_json(),
               "original_ms": time_program(device, program, sizes, 10)}
        check_prep = prepare(str(SPEC), params=small, defines=defines)
        check_prog = compile_variant(check_prep, variant, small).program
        for unroll in args.unroll:
            source, loops = pipelined(program.source, unroll, ctype)
            small_source, _ = pipelined(check_prog.source, unroll, ctype)
            result = check_program(replace(check_prog, source=small_source),
                                   check_prep.source_scop, str(SPEC), small,
                                   backend=device, seed=11, defines=defines)
            entry = {"loops": loops, "check": result.ok,
                     "message": result.message.splitlines()[0][:200]}
            if result.ok and loops:
                entry["ms"] = time_program(device, replace(program, source=source),
                                           sizes, 10)
            row[f"unroll{unroll}"] = entry
        for key, outer in (("rolled", True), ("rolled_inner", False)):
            source, loops = rolled(program.source, outer)
            small_source, _ = rolled(check_prog.source, outer)
            result = check_program(replace(check_prog, source=small_source),
                                   check_prep.source_scop, str(SPEC), small,
                                   backend=device, seed=11, defines=defines)
            row[key] = {"loops": loops, "check": result.ok,
                        "pragmas": source.count("#pragma unroll 1"),
                        "message": result.message.splitlines()[0][:200]}
            if result.ok and loops:
                row[key]["ms"] = time_program(device, replace(program, source=source),
                                              sizes, 10)
        print(json.dumps({k: v for k, v in row.items() if k != "variant"}), flush=True)
        rows.append(row)
    args.out.write_text(json.dumps({"gpu": getattr(device, "name", args.backend),
                                    "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
