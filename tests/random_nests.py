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
    # rendered right-hand side: ``scale * (reads...) + 1.0`` when set (keeps values
    # bounded under in-place updates and time steps), ``reads... + 1.0`` when None
    scale: float | None = None


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


# ---------------------------------------------------------------- richer nests (fuzz)
#
# ``fuzz_nests`` draws the same tree types with more of everything: up to 4 statements,
# 1 to 4 loop dimensions, offset bounds (``i = 1; i < n - 2``), triangular, windowed and
# min/max bounds on any outer iterator, strided and descending loops, subscripts shifted
# by small constants (``A[i - 1][j + 2]``) or scaled (``x[2 * i + 1]``), in-place
# updates reading their own target at shifted subscripts, reductions (a ``+=`` target
# that ignores inner iterators), and time-step loops ``for (t = 0; t < T; t++)`` (T of 2
# to 4, ``t`` in no subscript) around sibling nests, whose arrays are biased towards
# reading what an earlier statement wrote and writing what it read -- so dependences are
# carried by the outer loop.  Right-hand sides are scaled (``0.5 * (..) + 1.0``) so
# values stay bounded however often an element is updated.
#
# In bounds by construction: every iterator carries an interval ``[lo, hi]`` of affine
# functions of n that holds whenever its loop runs, and a subscript's constant is clamped
# so that its interval lies in ``[0, 2n + 3)`` for every n >= NMIN.  ``nests`` above is
# left as it was: its derandomized users keep their examples.

NMIN = 6  # every access of a fuzz nest lies inside its array for every n >= NMIN

Aff = tuple[int, int]  # a * n + b


@dataclass(frozen=True)
class _Iter:
    name: str
    lo: Aff  # lower and upper bounds on the values (whenever the loop runs)
    hi: Aff
    time: bool = False  # a time-step iterator: never in a subscript


@dataclass
class _State:
    stmts: int  # statements left to place
    depth: int  # the most loop dimensions
    written: list = field(default_factory=list)
    read: list = field(default_factory=list)


def _add(x: Aff, y: Aff, k: int = 1) -> Aff:
    return x[0] + k * y[0], x[1] + k * y[1]


def _at_least(v: Aff) -> int:
    """The least value of ``v`` over n >= NMIN (v[0] >= 0)."""
    return v[0] * NMIN + v[1]


def _subscript(terms: tuple[tuple[str, int], ...], const: int, iters) -> tuple[str, int]:
    """Render ``sum(c * name) + const``, ``const`` clamped so the subscript stays inside
    ``[0, 2n + 3)`` for n >= NMIN; the plain first iterator if no constant can."""
    by_name = {it.name: it for it in iters}
    lo, hi = (0, 0), (0, 0)
    for name, c in terms:
        if name == "n":
            lo, hi = _add(lo, (c, 0)), _add(hi, (c, 0))
        else:
            it = by_name[name]
            lo = _add(lo, it.lo if c > 0 else it.hi, c)
            hi = _add(hi, it.hi if c > 0 else it.lo, c)
    if lo[0] < 0 or hi[0] > 2:
        terms, const = ((terms[0][0], 1),), 0
        return _subscript(terms, const, iters)
    cmin = -_at_least(lo)
    cmax = (2 - hi[0]) * NMIN + 2 - hi[1]  # hi + const <= 2n + 2 for n >= NMIN
    if cmin > cmax:
        return _subscript(((terms[0][0], 1),), 0, iters)
    const = min(max(const, cmin), cmax)
    parts = []
    for name, c in sorted(terms, key=lambda t: t[1] < 0):  # positive terms first
        text = name if abs(c) == 1 else f"{abs(c)} * {name}"
        parts.append(text if not parts and c > 0 else ("- " if c < 0 else "+ ") + text)
    if const or not parts:
        parts.append(str(const) if not parts else f"{'-' if const < 0 else '+'} {abs(const)}")
    return " ".join(parts), const


@st.composite
def _sub_terms(draw, iters) -> tuple[tuple[tuple[str, int], ...], int]:
    space = [it for it in iters if not it.time]
    const = draw(st.integers(-2, 2))
    if not space:
        return (), abs(const)
    a = draw(st.sampled_from(space)).name
    form = draw(st.integers(0, 5))
    if form == 1:
        return (("n", 1), (a, -1)), const - 1  # n - 1 - a (+ const)
    if form == 2 and len(space) > 1:
        b = draw(st.sampled_from([it.name for it in space if it.name != a]))
        return ((a, 1), (b, 1)), const
    if form == 3:
        return (), abs(const)
    if form == 4:
        return ((a, 2),), const
    return ((a, 1),), const


@st.composite
def _fuzz_ref(draw, iters, state: _State, pool: list | None = None):
    names = sorted(ARRAYS)
    if pool and draw(st.booleans()):
        names = sorted(set(pool))
    name = draw(st.sampled_from(names))
    subs = [draw(_sub_terms(iters)) for _ in range(ARRAYS[name])]
    return name, subs


def _show(ref, iters, shift=()) -> tuple[str, tuple[str, ...]]:
    name, subs = ref
    shift = tuple(shift) + (0,) * (len(subs) - len(shift))
    return name, tuple(_subscript(t, c + d, iters)[0]
                       for (t, c), d in zip(subs, shift, strict=True))


@st.composite
def _fuzz_statement(draw, iters, state: _State) -> Stmt:
    state.stmts -= 1
    kind = draw(st.integers(0, 2))
    space = [it for it in iters if not it.time]
    if kind == 2 and space:  # a reduction: the target ignores the inner iterators
        keep = [it for it in iters if it.time] + space[: draw(st.integers(0, len(space) - 1))]
        target = draw(_fuzz_ref(keep, state, state.read))
        target_iters = keep
        reads = draw(st.lists(_fuzz_ref(iters, state, state.written), min_size=1, max_size=2))
        op = "+="
    else:
        target = draw(_fuzz_ref(iters, state, state.read))
        target_iters = iters
        reads = draw(st.lists(_fuzz_ref(iters, state, state.written), min_size=0, max_size=2))
        op = draw(st.sampled_from(["=", "+=", "="]))
    shown = [_show(r, iters) for r in reads]
    if kind == 1:  # in place: read the target itself at shifted subscripts
        op = "="
        for _ in range(draw(st.integers(1, 2))):
            shift = [draw(st.integers(-1, 1)) for _ in target[1]]
            shown.append(_show(target, iters, shift))
    state.written.append(target[0])
    state.read += [r[0] for r in reads]
    scale = 0.5 if len(shown) <= 2 else 0.25
    return Stmt(_show(target, target_iters), op, shown, scale)


@st.composite
def _fuzz_loop(draw, iters: tuple, state: _State) -> Loop:
    it = ITERS[sum(not x.time for x in iters)]
    c0, c1 = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    hi_n = "n" if c1 == 0 else f"n - {c1}"
    lo, hi, rng = str(c0), hi_n, ((0, c0), (1, -1 - c1))
    step = 1
    outer = [x for x in iters if not x.time]
    kind = draw(st.integers(0, 6 if outer else 2))
    if kind == 1:  # strided
        step = draw(st.integers(2, 3))
    elif kind == 2:  # descending: n - 1 - c1 down to c0
        step = -draw(st.integers(1, 2))
        lo, hi = f"n - {1 + c1}", str(c0 - 1)
    elif kind >= 3:
        o = draw(st.sampled_from(outer))
        if kind == 3:  # lower triangle: c0 <= it <= o (or < o)
            strict = draw(st.booleans())
            hi = o.name if strict else f"{o.name} + 1"
            rng = ((0, c0), _add(o.hi, (0, -1 if strict else 0)))
        elif kind == 4:  # upper triangle: o (+ 1) <= it < n - c1
            d = draw(st.integers(0, 1))
            lo = o.name if d == 0 else f"{o.name} + 1"
            rng = (_add(o.lo, (0, d)), rng[1])
        elif kind == 5:  # a window clipped by min/max
            d, e = draw(st.integers(1, 2)), draw(st.integers(1, 2))
            lo, hi = f"max({o.name} - {d}, {c0})", f"min({o.name} + {e}, {hi_n})"
        else:  # a window from o: o <= it < o + w
            w = draw(st.integers(1, 3))
            lo, hi = o.name, f"{o.name} + {w}"
            rng = (o.lo, _add(o.hi, (0, w - 1)))
    var = _Iter(it, *rng)
    node = Loop(it, lo, hi, step)
    node.body = draw(_fuzz_body(iters + (var,), state))
    return node


@st.composite
def _fuzz_body(draw, iters: tuple, state: _State) -> list:
    items = []
    for k in range(draw(st.integers(1, 3))):
        if state.stmts == 0:
            break
        deeper = len(iters) < state.depth
        choice = draw(st.integers(0, 5))
        if deeper and (choice <= 1 or (k == 0 and choice != 5)):
            items.append(draw(_fuzz_loop(iters, state)))
        elif choice == 2:
            a = draw(st.sampled_from(iters)).name
            rhs = draw(st.sampled_from([iters[0].name, "n - 2", "1", "2"]))
            op = draw(st.sampled_from(["<", ">=", "!=", "=="]))
            g = Guard((a, op, rhs), [draw(_fuzz_statement(iters, state))])
            if state.stmts and draw(st.booleans()):
                g.orelse = [draw(_fuzz_statement(iters, state))]
            items.append(g)
        else:
            items.append(draw(_fuzz_statement(iters, state)))
    return items


@st.composite
def fuzz_nests(draw) -> list:
    """A richer random nest than ``nests`` (see above), in bounds for n >= NMIN."""
    state = _State(stmts=draw(st.integers(1, 4)), depth=draw(st.integers(1, 4)))
    items = []
    for _ in range(draw(st.integers(1, 3))):
        if state.stmts == 0:
            break
        if state.depth >= 2 and draw(st.integers(0, 2)) == 2:  # a time-step loop
            steps = draw(st.integers(2, 4))
            t = _Iter("t", (0, 0), (0, steps - 1), time=True)
            node = Loop("t", "0", str(steps), 1)
            node.body = draw(_fuzz_body((t,), state))
            items.append(node)
        else:
            items.append(draw(_fuzz_loop((), state)))
    return items


# ---------------------------------------------------------------- rendering


def _py_ref(r) -> str:
    return f"{r[0]}[{', '.join(r[1])}]"


def _c_ref(r) -> str:
    return r[0] + "".join(f"[{s}]" for s in r[1])


def _rhs(stmt: Stmt, show) -> str:
    reads = [show(r) for r in stmt.reads]
    if stmt.scale is None or not reads:
        return " + ".join(reads + ["1.0"])
    return f"{stmt.scale!r} * ({' + '.join(reads)}) + 1.0"


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
                rhs = _rhs(node, _py_ref)
                lines.append(f"{pad}{_py_ref(node.target)} {node.op} {rhs}")

    emit(tree, 1)
    return "\n".join(lines) + "\n"


def render_c(tree: list, name: str = "nest", batch: bool = False) -> str:
    """The nest as a C function; with ``batch``, ``nb`` independent copies of it
    interleaved (structure of arrays): every array gets a last dimension ``[nb]``, every
    reference the subscript ``[e]``, and the whole nest runs inside ``for (e < nb)``."""
    last = "[nb]" if batch else ""
    lines = [
        "#define min(a, b) ((a) < (b) ? (a) : (b))",
        "#define max(a, b) ((a) > (b) ? (a) : (b))",
        f"void {name}(int n, {'int nb, ' if batch else ''}"
        f"double A[2 * n + 3][2 * n + 3]{last}, double B[2 * n + 3][2 * n + 3]{last}, "
        f"double x[2 * n + 3]{last}, double y[2 * n + 3]{last})",
        "{",
        "#pragma scop",
    ]
    show = (lambda r: _c_ref(r) + "[e]") if batch else _c_ref

    def emit(items, indent):
        pad = "  " * indent
        for node in items:
            if isinstance(node, Loop):
                if node.step > 0:
                    head = (f"for (int {node.it} = {node.lo}; {node.it} < {node.hi}; "
                            f"{node.it} += {node.step})")
                elif node.step == -1:
                    head = f"for (int {node.it} = {node.lo}; {node.it} > {node.hi}; {node.it}--)"
                else:
                    head = (f"for (int {node.it} = {node.lo}; {node.it} > {node.hi}; "
                            f"{node.it} -= {-node.step})")
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
                rhs = _rhs(node, show)
                lines.append(f"{pad}{show(node.target)} {node.op} {rhs};")

    if batch:
        lines.append("  for (int e = 0; e < nb; e++) {")
    emit(tree, 2 if batch else 1)
    lines += ["  }"] if batch else []
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
