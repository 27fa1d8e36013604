"""Explain a model to a person (rich tables) or to a program (one JSON object).

Both views show the same facts: statements and their domains, every reference with
its reuse class, the exact dependences as isl relations, and which loops are
parallel.  The JSON keys are part of polygpu's interface (``polygpu analyze --json``).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from polygpu.model.analysis import Analysis


def to_json(an: Analysis) -> dict[str, Any]:
    scop = an.scop
    reuse = {(r.statement, r.ref): r for r in an.reuse}
    loops = {lp.loop: lp for lp in an.loops}
    return {
        "function": scop.function,
        "file": scop.file,
        "language": scop.language,
        "parameters": list(scop.parameters),
        "context": str(scop.context),
        "arrays": [
            {
                "name": a.name,
                "dtype": a.dtype,
                "shape": list(a.shape_text),
                "extent": str(a.extent),
                "kind": a.kind,
                "read_only": a.name not in scop.written_arrays(),
                "line": a.loc.line,
            }
            for a in scop.arrays
        ],
        "statements": [
            {
                "name": s.name,
                "domain": str(s.domain),
                "schedule": str(s.schedule),
                "iterators": list(s.iterators),
                "body": str(s.body),
                "line": s.loc.line,
            }
            for s in scop.statements
        ],
        "accesses": [
            {
                "statement": a.statement,
                "ref": a.ref,
                "array": a.array,
                "kind": a.kind,
                "text": a.text,
                "relation": str(a.relation),
                "reuse": reuse[a.statement, a.ref].reuse,
                "candidate": reuse[a.statement, a.ref].candidate,
                "rank": reuse[a.statement, a.ref].rank,
                "dimensions": reuse[a.statement, a.ref].dimensions,
                "higher_order_reuse": reuse[a.statement, a.ref].higher_order_reuse,
                "redundant_loops": list(reuse[a.statement, a.ref].redundant_loops),
                "line": a.loc.line,
            }
            for a in scop.accesses
        ],
        "dependences": [
            {
                "kind": d.kind,
                "array": d.array,
                "source": d.source,
                "sink": d.sink,
                "relation": str(d.relation),
            }
            for d in an.dependences.items
        ],
        "loops": [
            {
                "iterator": loop.iterator,
                "depth": loop.depth,
                "line": loop.loc.line,
                "statements": list(loop.statements),
                "parallel": loops[loop.id].parallel,
                "reduction": loops[loop.id].reduction,
                "carried": list(loops[loop.id].carried),
            }
            for loop in scop.loops
        ],
        "reductions": [
            {"statement": r.statement, "array": r.array, "op": r.op, "loops": list(r.loops)}
            for r in an.reductions
        ],
        "warnings": [str(w) for w in an.warnings],
    }


def _loop_status(lp) -> str:
    if lp.parallel:
        return "[green]parallel[/]"
    if lp.reduction:
        return "[yellow]reduction[/] (parallel up to a reduction)"
    return f"[red]sequential[/] (carries {', '.join(lp.carried)})"


def _plain(*cells) -> list[Text]:
    """Table cells shown verbatim: isl sets and subscripts are full of [brackets]
    that rich would otherwise take for markup."""
    return [Text(str(c)) for c in cells]


def render(an: Analysis, console: Console) -> None:
    scop = an.scop
    params = ", ".join(scop.parameters) or "none"
    console.print(
        f"[bold]{escape(scop.function)}[/] ({escape(scop.file)}:{scop.loc.line}, "
        f"{scop.language})  parameters: {escape(params)}  context: {escape(str(scop.context))}"
    )

    arrays = Table(title="Arrays", title_justify="left")
    for col in ("array", "type", "shape", "kind", "line"):
        arrays.add_column(col)
    written = scop.written_arrays()
    for a in scop.arrays:
        kind = a.kind + ("" if a.name in written else ", read-only")
        shape = "[" + "][".join(a.shape_text) + "]" if a.shape_text else "scalar"
        arrays.add_row(*_plain(a.name, a.dtype, shape, kind, a.loc.line))
    console.print(arrays)

    stmts = Table(title="Statements", title_justify="left")
    for col in ("stmt", "line", "body", "domain"):
        stmts.add_column(col, overflow="fold")
    for s in scop.statements:
        stmts.add_row(*_plain(s.name, s.loc.line, s.body, s.domain.gist_params(scop.context)))
    console.print(stmts)

    acc = Table(title="Accesses and reuse (paper §4.1)", title_justify="left")
    for col in ("stmt", "line", "reference", "kind", "rank/dims", "redundant loops", "reuse",
                "candidate"):
        acc.add_column(col)
    for r, a in zip(an.reuse, scop.accesses, strict=True):
        rank = "?" if r.rank is None else str(r.rank)
        acc.add_row(*_plain(r.statement, a.loc.line, r.text, r.kind, f"{rank}/{r.dimensions}",
                            ", ".join(r.redundant_loops) or "-", r.reuse, r.candidate))
    console.print(acc)

    deps = Table(title="Dependences (exact, isl dataflow)", title_justify="left")
    for col in ("kind", "array", "source -> sink", "relation"):
        deps.add_column(col, overflow="fold")
    for d in an.dependences.items:
        deps.add_row(*_plain(d.kind, d.array, f"{d.source} -> {d.sink}", d.relation))
    if not an.dependences.items:
        deps.add_row("-", "-", "-", "no dependences")
    console.print(deps)

    loops = Table(title="Loops", title_justify="left")
    for col in ("loop", "line", "depth", "statements", "parallelism"):
        loops.add_column(col)
    status = {lp.loop: lp for lp in an.loops}
    for loop in scop.loops:
        loops.add_row(*_plain(loop.iterator, loop.loc.line, loop.depth,
                              ", ".join(loop.statements)), _loop_status(status[loop.id]))
    console.print(loops)

    if an.reductions:
        console.print("[bold]Reductions[/]")
        for r in an.reductions:
            console.print(escape(f"  {r.statement}: {r.array} {r.op}= ... along "
                                 f"{', '.join(r.loops)}"))
