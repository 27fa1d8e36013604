"""Random affine loop nests for property tests, and a brute-force dependence oracle.

A nest is drawn as a small tree (loops with triangular/offset bounds, strides and
descending loops, guards, several statements, in-place updates) and rendered both
as a Python ``@affine`` function and as an equivalent C function.  The oracle runs
the *Python source itself* with arrays that record every access, labels each access
with its statement instance (the executing line and the iterator values in the
frame), and derives the true flow/anti/output pairs from the recorded trace.

All subscripts stay inside ``[0, 2n + 3)`` by construction: iterators lie in
``[0, n)`` and a subscript is at most one iterator plus one other plus a small
offset, or ``n - 1 - i``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from hypothesis import strategies as st

ARRAYS = {"A": 2, "B": 2, "x": 1, "y": 1}
ITERS = ("i", "j", "k", "l")


# ---------------------------------------------------------------- the tree


@dataclass
class Stmt:
    target: tuple[str, tuple[str, ...]]
    op: str
    reads: list[tuple[str, tuple[str, ...]]]


@dataclass
class Loop:
    it: str
    lo: str
    hi: str  # exclusive upper bound for step > 0; exclusive lower end for step < 0
    step: int
    body: list = field(default_factory=list)


@dataclass
class Guard:
    cond: tuple[str, str, str]  # lhs, op, rhs
    body: list = field(default_factory=list)
    orelse: list = field(default_factory=list)


@st.composite
def subscript(draw, its: tuple[str, ...]) -> str:
    if not its:
        return str(draw(st.integers(0, 3)))
    a = draw(st.sampled_from(its))
    form = draw(st.integers(0, 4))
    if form == 0:
        return f"{a} + {draw(st.integers(0, 2))}"
    if form == 1:
        return f"n - 1 - {a}"
    if form == 2 and len(its) > 1:
        b = draw(st.sampled_from([x for x in its if x != a]))
        return f"{a} + {b}"
    if form == 3:
        return str(draw(st.integers(0, 2)))
    return a


@st.composite
def ref(draw, its: tuple[str, ...]):
    name = draw(st.sampled_from(sorted(ARRAYS)))
    return name, tuple(draw(subscript(its)) for _ in range(ARRAYS[name]))


@st.composite
def statement(draw, its: tuple[str, ...]) -> Stmt:
    target = draw(ref(its))
    op = draw(st.sampled_from(["=", "+=", "="]))
    reads = draw(st.lists(ref(its), min_size=0, max_size=2))
    if op == "=" and draw(st.booleans()):
        reads.append(target)  # in-place update x[f] = x[f] + ...
    return Stmt(target, op, reads)


@st.composite
def loop(draw, its: tuple[str, ...], depth: int, budget: list[int]) -> Loop:
    it = ITERS[len(its)]
    outer = its[-1] if its else None
    shapes = [("0", "n", 1), ("1", "n", 1), ("0", "n - 1", 1), ("0", "n", 2),
              ("n - 1", "-1", -1)]
    if outer:
        shapes += [(outer, "n", 1), ("0", f"{outer} + 1", 1), (f"{outer} + 1", "n", 1),
                   ("0", f"min({outer} + 2, n)", 1), (f"max({outer} - 1, 0)", "n", 1)]
    lo, hi, step = draw(st.sampled_from(shapes))
    node = Loop(it, lo, hi, step)
    node.body = draw(body(its + (it,), depth, budget))
    return node


@st.composite
def body(draw, its: tuple[str, ...], depth: int, budget: list[int]) -> list:
    items = []
    for _ in range(draw(st.integers(1, 2))):
        choice = draw(st.integers(0, 5))
        if choice <= 1 and len(its) < depth and budget[0] > 0:
            budget[0] -= 1
            items.append(draw(loop(its, depth, budget)))
        elif choice == 2 and its:
            a = draw(st.sampled_from(its))
            rhs = draw(st.sampled_from([its[0], "n - 2", "1"]))
            g = Guard((a, draw(st.sampled_from(["<", ">=", "!="])), rhs))
            g.body = [draw(statement(its))]
            if draw(st.booleans()):
                g.orelse = [draw(statement(its))]
            items.append(g)
        else:
            items.append(draw(statement(its)))
    return items


@st.composite
def nests(draw) -> list:
    depth = draw(st.integers(1, 4))
    budget = [draw(st.integers(1, 4))]
    return [draw(loop((), depth, budget)) for _ in range(draw(st.integers(1, 2)))]


# ---------------------------------------------------------------- rendering


def _py_ref(r) -> str:
    return f"{r[0]}[{', '.join(r[1])}]"


def _c_ref(r) -> str:
    return r[0] + "".join(f"[{s}]" for s in r[1])


def render_python(tree: list, name: str = "nest") -> str:
    lines = [
        "from __future__ import annotations",
        "from polygpu import affine, f64",
        "",
        "",
        "@affine",
        f"def {name}(n: int, A: f64[2 * n + 3, 2 * n + 3], B: f64[2 * n + 3, 2 * n + 3], "
        "x: f64[2 * n + 3], y: f64[2 * n + 3]):",
    ]

    def emit(items, indent):
        pad = "    " * indent
        for node in items:
            if isinstance(node, Loop):
                if node.step == 1:
                    rng = f"range({node.lo}, {node.hi})"
                else:
                    rng = f"range({node.lo}, {node.hi}, {node.step})"
                lines.append(f"{pad}for {node.it} in {rng}:")
                emit(node.body, indent + 1)
            elif isinstance(node, Guard):
                lines.append(f"{pad}if {' '.join(node.cond)}:")
                emit(node.body, indent + 1)
                if node.orelse:
                    lines.append(f"{pad}else:")
                    emit(node.orelse, indent + 1)
            else:
                rhs = " + ".join([_py_ref(r) for r in node.reads] + ["1.0"])
                lines.append(f"{pad}{_py_ref(node.target)} {node.op} {rhs}")

    emit(tree, 1)
    return "\n".join(lines) + "\n"


def render_c(tree: list, name: str = "nest") -> str:
    lines = [
        "#define min(a, b) ((a) < (b) ? (a) : (b))",
        "#define max(a, b) ((a) > (b) ? (a) : (b))",
        f"void {name}(int n, double A[2 * n + 3][2 * n + 3], double B[2 * n + 3][2 * n + 3], "
        "double x[2 * n + 3], double y[2 * n + 3])",
        "{",
        "#pragma scop",
    ]

    def emit(items, indent):
        pad = "  " * indent
        for node in items:
            if isinstance(node, Loop):
                if node.step > 0:
                    head = (f"for (int {node.it} = {node.lo}; {node.it} < {node.hi}; "
                            f"{node.it} += {node.step})")
                else:
                    head = f"for (int {node.it} = {node.lo}; {node.it} > {node.hi}; {node.it}--)"
                lines.append(f"{pad}{head} {{")
                emit(node.body, indent + 1)
                lines.append(f"{pad}}}")
            elif isinstance(node, Guard):
                lhs, op, rhs = node.cond
                lines.append(f"{pad}if ({lhs} {op} {rhs}) {{")
                emit(node.body, indent + 1)
                if node.orelse:
                    lines.append(f"{pad}}} else {{")
                    emit(node.orelse, indent + 1)
                lines.append(f"{pad}}}")
            else:
                rhs = " + ".join([_c_ref(r) for r in node.reads] + ["1.0"])
                lines.append(f"{pad}{_c_ref(node.target)} {node.op} {rhs};")

    emit(tree, 1)
    lines += ["#pragma endscop", "}"]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- the oracle


class _Recorder:
    """An array that records (kind, array, index, instance) for every access."""

    def __init__(self, name: str, trace: list, label):
        self.name, self.trace, self.label, self.data = name, trace, label, {}

    def _key(self, idx):
        return idx if isinstance(idx, tuple) else (idx,)

    def __getitem__(self, idx):
        key = self._key(idx)
        self.trace.append(("R", self.name, key, self.label(sys._getframe(1))))
        return self.data.get(key, 0.0)

    def __setitem__(self, idx, value):
        key = self._key(idx)
        self.trace.append(("W", self.name, key, self.label(sys._getframe(1))))
        self.data[key] = value


def brute_force_dependences(func, n: int, statements) -> set[tuple]:
    """Run ``func`` (plain Python) at size ``n``; return {(kind, array, src, dst)} where
    src/dst are (statement, iterator values) instances."""
    by_line = {s.loc.line: s for s in statements}

    def label(frame):
        s = by_line[frame.f_lineno]
        return (s.name, tuple(frame.f_locals[it] for it in s.iterators))

    trace: list = []
    arrays = {name: _Recorder(name, trace, label) for name in ARRAYS}
    func(n, **arrays)

    deps = set()
    last_write: dict = {}
    for kind, arr, key, inst in trace:  # flow: last write before each read
        loc = (arr, key)
        if kind == "R" and loc in last_write:
            deps.add(("flow", arr, last_write[loc], inst))
        elif kind == "W":
            last_write[loc] = inst
    next_write: dict = {}
    for kind, arr, key, inst in reversed(trace):  # anti/output: first later write
        loc = (arr, key)
        later = next_write.get(loc)
        if kind == "R":
            if later is not None and later[0] != inst:
                deps.add(("anti", arr, inst, later[0]))
            elif later is not None and later[1] is not None:
                deps.add(("anti", arr, inst, later[1]))
        else:
            if later is not None:
                deps.add(("output", arr, inst, later[0]))
            # remember this write and the next different-instance write after it
            next_write[loc] = (inst, later[0] if later else None)
    return deps
