"""C frontend: the ``#pragma scop`` region of a C99 function -> loop-tree IR.

Pipeline: the system C preprocessor (with the fake libc headers of
``fake_libc/``, because pycparser parses standard C only and chokes on glibc's
extensions) -> pycparser AST -> :class:`_Translator`, which reads the
function's parameters and the statements between ``#pragma scop`` and
``#pragma endscop`` and builds :mod:`polygpu.frontend.ir` nodes.

Everything outside the accepted subset is rejected *here*, with the line of the
offending construct, so that later stages only see well-formed loop trees.  The
one thing deliberately left to the model builder is affinity: products such as
``i * j`` are translated as they stand, since only isl can tell whether a whole
expression is affine (``(2 * i) * 3`` is, ``i * j`` is not).
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, replace

from pycparser import c_ast, c_generator, c_parser

from polygpu.errors import PolygpuError, SourceLoc, UnsupportedError
from polygpu.frontend import names as reserved
from polygpu.frontend.ir import (
    PURE_FUNCTIONS,
    ArrayDecl,
    ArrayRef,
    Assign,
    BinOp,
    BoolConst,
    BoolOp,
    Call,
    Compare,
    Cond,
    Const,
    Expr,
    For,
    If,
    IntBinOp,
    IntConst,
    IntExpr,
    IntMinMax,
    IntNeg,
    IntSelect,
    IntValue,
    IntVar,
    Node,
    Not,
    Program,
    ScalarDecl,
    ScalarRef,
    Select,
    UnaryOp,
    ValueCompare,
    ValueLogical,
)

FAKE_LIBC_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_libc")

_CMP_OPS = ("<", "<=", ">", ">=", "==", "!=")
_INT_OPS = {"+": "+", "-": "-", "*": "*", "/": "truncdiv", "%": "rem"}
_VALUE_OPS = ("+", "-", "*", "/", "%")
_ASSIGN_OPS = ("=", "+=", "-=", "*=", "/=")
_MINMAX_NAMES = {"min": "min", "max": "max", "MIN": "min", "MAX": "max"}

_SIDE_EFFECT_HINT = "only pure math functions are allowed (a call may have side effects)"
_POINTER_HINT = "declare arrays with C99 extents, e.g. float a[n][m]"

# Control flow that cannot be expressed as a static loop tree, with the reason.
_REJECTED_STATEMENTS = {
    c_ast.While: "while loop: only for loops with affine bounds and constant steps are supported",
    c_ast.DoWhile: "do-while loop: only for loops with affine bounds and constant steps "
    "are supported",
    c_ast.Break: "break: loops must run over their whole iteration domain (no early exit)",
    c_ast.Continue: "continue: put the rest of the loop body under an if instead",
    c_ast.Goto: "goto: unstructured control flow is not supported",
    c_ast.Label: "label: unstructured control flow is not supported",
    c_ast.Return: "return inside #pragma scop: the region must run to its end",
    c_ast.Switch: "switch: use if/else with affine conditions instead",
    c_ast.Case: "case label: use if/else with affine conditions instead",
    c_ast.Default: "default label: use if/else with affine conditions instead",
}


def parse_c_file(
    path: str,
    function: str | None = None,
    defines: Sequence[str] = (),
    include_dirs: Sequence[str] = (),
) -> Program:
    """Read the ``#pragma scop`` region of ``function`` (or of the only function that
    has one) in the C file ``path``.

    ``defines`` are ``NAME`` or ``NAME=VALUE`` macro definitions and
    ``include_dirs`` extra header directories, as for ``cc -D``/``-I``.  Raises
    :class:`PolygpuError` (located ``FILE:LINE``) for any problem with the input.
    """
    text = _preprocess(path, defines, include_dirs)
    ast = _parse(text, path)
    funcdef = _select_function(ast, path, function)
    typedefs = {n.name: n.type for n in ast.ext if isinstance(n, c_ast.Typedef)}
    return _Translator(path, funcdef, typedefs).program()


# --------------------------------------------------------------------------
# Preprocessing and parsing
# --------------------------------------------------------------------------


def _preprocessor() -> list[str] | None:
    for command in (["cpp"], ["gcc", "-E"], ["clang", "-E"]):
        if shutil.which(command[0]):
            return command
    return None


def _strip_option(value: str, option: str) -> str:
    return value[len(option) :] if value.startswith(option) else value


def _preprocess(path: str, defines: Sequence[str], include_dirs: Sequence[str]) -> str:
    """Run the C preprocessor, keeping line markers so pycparser's coordinates name
    ``path`` as the user spelled it and its original line numbers.

    ``-nostdinc`` plus the fake libc keeps glibc's GNU extensions out of the
    parser's way; ``-std=c11`` keeps GNU's predefined ``linux``/``unix`` macros from
    rewriting identifiers.
    """
    if not os.path.isfile(path):
        raise PolygpuError(f"{path}: no such file")
    command = _preprocessor()
    if command is None:
        raise PolygpuError("no C preprocessor found: install cpp (gcc) or clang")
    args = [*command, "-std=c11", "-nostdinc", "-isystem", FAKE_LIBC_DIR]
    args += ["-include", os.path.join(FAKE_LIBC_DIR, "_fake_defines.h")]
    args += ["-D" + _strip_option(d, "-D") for d in defines]
    args += ["-I" + _strip_option(d, "-I") for d in include_dirs]
    args.append(path)
    try:
        proc = subprocess.run(args, capture_output=True, text=True, errors="replace", check=False)
    except OSError as exc:
        raise PolygpuError(f"cannot run the C preprocessor '{command[0]}': {exc}") from None
    if proc.returncode != 0:
        raise _preprocessor_error(proc.stderr, path, command[0])
    return proc.stdout


_CPP_ERROR = re.compile(
    r"^(?P<file>.+?):(?P<line>\d+):(?:\d+:)?\s*(?:fatal )?error:\s*(?P<msg>.*)$"
)


def _preprocessor_error(stderr: str, path: str, tool: str) -> PolygpuError:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in lines:
        match = _CPP_ERROR.match(line)
        if match:
            loc = SourceLoc(match["file"], int(match["line"]))
            return PolygpuError(f"preprocessor: {match['msg']}", loc)
    errors = [line for line in lines if "error" in line] or lines
    first = errors[0] if errors else "failed without a message"
    return PolygpuError(f"{path}: preprocessor ({tool}): {first}")


_PARSE_ERROR = re.compile(r"^(?P<file>.+?):(?P<line>\d+)(?::\d+)?:\s*(?P<msg>.*)$")


def _parse(text: str, path: str) -> c_ast.FileAST:
    parser = c_parser.CParser()
    try:
        return parser.parse(text, path)
    except c_parser.ParseError as exc:
        raise _syntax_error(str(exc), parser, path) from None
    except RecursionError:
        raise PolygpuError(f"{path}: input nested too deeply for the C parser") from None


def _syntax_error(message: str, parser: c_parser.CParser, path: str) -> PolygpuError:
    """Turn pycparser's ``file:line:col: before: x`` into a located PolygpuError."""
    match = _PARSE_ERROR.match(message)
    if match:
        loc = SourceLoc(match["file"], int(match["line"]))
        detail = match["msg"]
    else:
        # Some messages carry only the file name: the parser's next token tells where,
        # or, at the end of the input, the file's last line.
        loc = _parser_position(parser) or SourceLoc(path, _line_count(path))
        detail = message.split(":", 1)[1].strip() if ":" in message else message
    if detail.startswith("before:"):
        return PolygpuError(f"syntax error before '{detail[len('before:') :].strip()}'", loc)
    if detail == "At end of input":
        detail = "unexpected end of file (missing '}'?)"
    return PolygpuError(f"syntax error: {detail}", loc)


def _line_count(path: str) -> int:
    with open(path, encoding="utf-8", errors="replace") as source:
        return max(1, sum(1 for _ in source))


def _parser_position(parser: c_parser.CParser) -> SourceLoc | None:
    """Best effort: where the parser stopped (pycparser >= 3 keeps a token stream)."""
    try:
        token = parser._peek()  # noqa: SLF001 - no public API for the position
        return SourceLoc(token.filename, token.lineno) if token is not None else None
    except Exception:  # noqa: BLE001 - older pycparser versions: no position
        return None


def _pragma_word(node: c_ast.Node) -> str | None:
    if not isinstance(node, c_ast.Pragma):
        return None
    words = (node.string or "").split()
    return words[0] if words else ""


def _find_pragmas(node: c_ast.Node, word: str) -> list[c_ast.Pragma]:
    """All ``#pragma word`` nodes anywhere under ``node``, in source order."""
    found = []
    for _, child in node.children():
        if _pragma_word(child) == word:
            found.append(child)
        found.extend(_find_pragmas(child, word))
    return found


def _coord_loc(node: c_ast.Node, path: str) -> SourceLoc:
    coord = node.coord
    return SourceLoc(coord.file or path, coord.line) if coord else SourceLoc(path, 1)


def _select_function(ast: c_ast.FileAST, path: str, name: str | None) -> c_ast.FuncDef:
    funcs = [n for n in ast.ext if isinstance(n, c_ast.FuncDef)]
    names = ", ".join(f.decl.name for f in funcs) or "none"
    if name is not None:
        for func in funcs:
            if func.decl.name == name:
                return func
        raise PolygpuError(f"{path}: no function '{name}' is defined (functions: {names})")
    with_scop = [f for f in funcs if _find_pragmas(f.body, "scop")]
    if len(with_scop) == 1:
        return with_scop[0]
    if len(with_scop) > 1:
        listed = ", ".join(f.decl.name for f in with_scop)
        raise PolygpuError(
            f"several functions have a #pragma scop ({listed}): choose one with --function",
            _coord_loc(with_scop[0].decl, path),
        )
    if len(funcs) == 1:
        return funcs[0]  # the translator reports its missing scop at the function
    if not funcs:
        raise PolygpuError(f"{path}: no function definition")
    raise UnsupportedError(
        f"no #pragma scop ... #pragma endscop region in any function ({names})",
        _coord_loc(funcs[0].decl, path),
    )


# --------------------------------------------------------------------------
# Types
# --------------------------------------------------------------------------


def _base_dtype(names: list[str]) -> str | None:
    """``['long', 'int']`` -> 'int64'; None for types polygpu has no use for."""
    words = [w for w in names if w != "signed"]
    if words in (["float"], ["double"]):
        return "float32" if words == ["float"] else "float64"
    if not words or any(w not in ("int", "long") for w in words):
        return None  # unsigned, short, char, _Bool, long double, void, structs, ...
    return "int64" if "long" in words else "int32"


@dataclass(frozen=True)
class _IntCtx:
    """Where an integer expression sits, to explain why something is rejected there."""

    text: str  # the whole construct, quoted at the head of messages
    where: str  # 'a subscript', 'a loop bound', ...
    data_problem: str  # what reading an array here amounts to
    rule: str

    def error(self, problem: str) -> str:
        return f"{self.text}: {problem}: {self.rule}"


@dataclass
class _Local:
    """A variable declared in the function before the scop: an iterator or a temporary,
    depending on how the region uses it."""

    name: str
    dtype: str | None
    loc: SourceLoc
    problem: str | None  # why it cannot be used in the region at all (array, static, ...)
    initialised: bool
    init: c_ast.Node | None = None  # the initialiser, for a scalar only read in the region


# --------------------------------------------------------------------------
# The translator
# --------------------------------------------------------------------------


class _Translator:
    """Translates one function definition.  Names resolve to exactly one role:
    parameter, array, loop iterator (only inside its loop) or scalar temporary."""

    def __init__(self, path: str, funcdef: c_ast.FuncDef, typedefs: dict[str, c_ast.Node]):
        self.path = path
        self.func = funcdef
        self.name = funcdef.decl.name
        self.typedefs = typedefs
        self.func_loc = _coord_loc(funcdef.decl, path)
        self.generator = c_generator.CGenerator()
        self.params: dict[str, ScalarDecl] = {}
        self.arrays: dict[str, ArrayDecl] = {}
        self.signature: list[str] = []
        self.locals: dict[str, _Local] = {}
        # arrays declared before the region (read once the parameters are known)
        self.local_array_decls: list[c_ast.Decl] = []
        self.local_arrays: dict[str, ArrayDecl] = {}
        self.temporaries: dict[str, ScalarDecl] = {}
        self.active: list[str] = []  # iterators of the enclosing loops, outermost first
        self.iterator_names: set[str] = set()  # every name used as an iterator so far
        self.scop_loc = self.func_loc  # the #pragma scop line, once found
        self.written_in_region: set[str] = set()  # names the region assigns (pre-scan)
        # scalars initialised before the region and only read in it -> their value
        # (an IntExpr for integer ones, an Expr for floating-point ones), substituted
        self.derived: dict[str, IntExpr | Expr] = {}
        self.deriving: list[str] = []  # initialisers being translated (cycle guard)

    # ---- helpers ---------------------------------------------------------

    def loc(self, node: c_ast.Node) -> SourceLoc:
        coord = getattr(node, "coord", None)
        if coord is None or not coord.line:
            return self.func_loc
        return SourceLoc(coord.file or self.path, coord.line)

    def unsupported(self, node: c_ast.Node, message: str) -> UnsupportedError:
        return UnsupportedError(message, self.loc(node))

    def text(self, node: c_ast.Node) -> str:
        """The C spelling of ``node`` on one line, to quote in messages."""
        try:
            return " ".join(self.generator.visit(node).split())
        except Exception:  # noqa: BLE001 - rendering is only for messages
            return type(node).__name__

    def dtype(self, typ: c_ast.Node, what: str, name: str) -> str:
        """The IR dtype of a scalar C type (``TypeDecl``), resolving typedefs."""
        inner = typ.type if isinstance(typ, c_ast.TypeDecl) else None
        seen = set()
        while (
            isinstance(inner, c_ast.IdentifierType)
            and len(inner.names) == 1
            and inner.names[0] in self.typedefs
            and inner.names[0] not in seen
        ):
            seen.add(inner.names[0])
            target = self.typedefs[inner.names[0]]
            inner = target.type if isinstance(target, c_ast.TypeDecl) else target
        dtype = _base_dtype(inner.names) if isinstance(inner, c_ast.IdentifierType) else None
        if dtype is None:
            spelled = self.text(typ).strip() if typ is not None else "?"
            raise self.unsupported(
                typ,
                f"{what} '{name}' has type '{spelled}': supported element and scalar types "
                "are int, long, float and double",
            )
        return dtype

    # ---- the function ----------------------------------------------------

    def program(self) -> Program:
        items = self.func.body.block_items or []
        region = self.scop_region(items)  # first: is there one?
        self.read_parameters()
        self.read_local_arrays()
        self.written_in_region = set().union(*map(_written_names, region)) if region else set()
        body = self.statements(region)
        if not body:
            raise UnsupportedError("the #pragma scop region has no statements", self.scop_loc)
        self.check_outside(items)
        return Program(
            name=self.name,
            file=self.path,
            loc=self.func_loc,
            signature=tuple(self.signature),
            params=tuple(self.params.values()),
            arrays=tuple(self.arrays.values()),
            temporaries=tuple(self.temporaries.values()),
            body=tuple(body),
            language="c",
            local_arrays=tuple(self.local_arrays.values()),
            not_live_out=self.not_live_out(items),
        )

    def not_live_out(self, items: list[c_ast.Node]) -> tuple[str, ...]:
        """The array arguments ``#pragma polygpu not_live_out(A, B)`` lines before the
        region name (:attr:`Program.not_live_out`); any other ``#pragma polygpu`` is an
        error, as is a name that is no array argument."""
        start = next(i for i, n in enumerate(items) if _pragma_word(n) == "scop")
        names: list[str] = []
        for node in _find_pragmas(self.func.body, "polygpu"):
            text = " ".join((node.string or "").split()[1:])
            match = re.fullmatch(r"not_live_out\s*\(\s*(\w+(?:\s*,\s*\w+)*)\s*\)", text)
            if match is None:
                raise self.unsupported(node, f"'#pragma {node.string}': the polygpu pragma "
                                       "is '#pragma polygpu not_live_out(NAME, ...)'")
            if node not in items[:start]:
                raise self.unsupported(node, "#pragma polygpu not_live_out goes before "
                                       "#pragma scop, in the function's outermost block")
            for name in re.split(r"\s*,\s*", match.group(1)):
                if name not in self.arrays:
                    raise self.unsupported(node, f"not_live_out: '{name}' is not an array "
                                           f"argument of '{self.name}'")
                if name not in names:
                    names.append(name)
        return tuple(names)

    def scop_region(self, items: list[c_ast.Node]) -> list[c_ast.Node]:
        """The statements between ``#pragma scop`` and ``#pragma endscop``; declarations
        before the scop are recorded as candidate iterators/temporaries."""
        starts = [i for i, n in enumerate(items) if _pragma_word(n) == "scop"]
        if not starts:
            nested = _find_pragmas(self.func.body, "scop")
            if nested:
                raise self.unsupported(
                    nested[0], "#pragma scop must be in the outermost block of the function body"
                )
            raise UnsupportedError(
                f"no #pragma scop ... #pragma endscop region in function '{self.name}'",
                self.func_loc,
            )
        start = starts[0]
        self.scop_loc = self.loc(items[start])
        if len(starts) > 1:
            raise self.unsupported(
                items[starts[1]],
                f"several #pragma scop regions in function '{self.name}': only one is supported",
            )
        ends = [i for i, n in enumerate(items) if _pragma_word(n) == "endscop"]
        if ends and ends[0] < start:
            raise self.unsupported(items[ends[0]], "#pragma endscop before #pragma scop")
        if not ends:
            raise UnsupportedError(
                "#pragma scop without a matching #pragma endscop in the same block", self.scop_loc
            )
        for item in items[:start]:
            if isinstance(item, c_ast.Decl):
                self.declare_local(item)
        return items[start + 1 : ends[0]]

    def read_parameters(self) -> None:
        args = self.func.decl.type.args
        params = list(args.params) if args is not None else []
        if len(params) == 1 and isinstance(params[0], c_ast.Typename):
            params = []  # f(void)
        all_names = [getattr(p, "name", None) for p in params]
        for k, param in enumerate(params):
            if param.name is not None and param.name in all_names[:k]:
                raise self.unsupported(param, f"duplicate parameter '{param.name}'")
        for param in params:
            if isinstance(param, c_ast.EllipsisParam):
                raise self.unsupported(param, "variadic function: parameters must be named")
            if not isinstance(param, c_ast.Decl) or not param.name:
                raise self.unsupported(param, "unnamed parameter: every parameter needs a name")
            reserved.check_name(param.name, "parameter", self.loc(param))
            self.read_parameter(param, all_names)
            self.signature.append(param.name)
        reserved.check_signature(
            self.name, [(p.name, self.loc(p)) for p in params], self.arrays
        )

    def read_parameter(self, param: c_ast.Decl, all_names: list[str | None]) -> None:
        name, typ, loc = param.name, param.type, self.loc(param)
        if isinstance(typ, c_ast.PtrDecl):
            raise self.unsupported(param, f"pointer parameter '{name}': {_POINTER_HINT}")
        if isinstance(typ, c_ast.TypeDecl):
            self.params[name] = ScalarDecl(name, self.dtype(typ, "parameter", name), loc, "param")
            return
        if not isinstance(typ, c_ast.ArrayDecl):
            raise self.unsupported(param, f"parameter '{name}': only scalars and arrays")
        dims = []
        while isinstance(typ, c_ast.ArrayDecl):
            if typ.dim is None:
                raise self.unsupported(
                    param, f"array parameter '{name}' needs all its extents, e.g. float a[n][m]"
                )
            dims.append(typ.dim)
            typ = typ.type
        if isinstance(typ, c_ast.PtrDecl):
            raise self.unsupported(param, f"array of pointers '{name}': {_POINTER_HINT}")
        dtype = self.dtype(typ, "array", name)
        later = set(all_names[all_names.index(name) + 1 :])
        self.arrays[name] = ArrayDecl(name, dtype, self.extents(name, dims, later), loc)

    def extents(self, name: str, dims: list[c_ast.Node], later: set) -> tuple:
        """An array's extents: integer constants or affine in integer parameters (of
        those declared before it, ``later`` naming the others)."""
        shape = []
        for dim in dims:
            for used in self.names_in(dim):
                if used in later:
                    raise self.unsupported(
                        dim,
                        f"extent '{self.text(dim)}' of array '{name}' uses parameter '{used}', "
                        "which comes later: extents may only use earlier integer parameters",
                    )
            ctx = _IntCtx(
                f"extent '{self.text(dim)}' of array '{name}'",
                "an array extent",
                "data-dependent array extent",
                "array extents must be integer constants or earlier integer parameters",
            )
            shape.append(self.int_expr(dim, ctx))
        return tuple(shape)

    def read_local_arrays(self) -> None:
        """Arrays declared before the region (``float t[n][m];``): region-local
        temporaries.  Their extents may use every integer parameter; a local array
        with an initialiser, of pointers or without all its extents keeps its problem,
        reported where the region uses it (an unused one is none of polygpu's)."""
        for decl in self.local_array_decls:
            name, typ, dims = decl.name, decl.type, []
            while isinstance(typ, c_ast.ArrayDecl):
                dims.append(typ.dim)
                typ = typ.type
            local = self.locals[name]
            if decl.init is not None:
                problem = (f"local array '{name}' has an initialiser: set its elements "
                           "inside the region")
            elif any(d is None for d in dims) or not isinstance(typ, c_ast.TypeDecl):
                problem = (f"local array '{name}' needs all its extents and a scalar "
                           "element type, e.g. float t[n][m]")
            else:
                problem = None
            if problem is not None:
                self.locals[name] = replace(local, problem=problem)
                continue
            reserved.check_name(name, "array", local.loc)
            if name in self.params or name in self.arrays:
                raise self.unsupported(decl, f"local array '{name}' shadows a parameter")
            dtype = self.dtype(typ, "array", name)
            self.local_arrays[name] = ArrayDecl(name, dtype, self.extents(name, dims, set()),
                                                local.loc)
            del self.locals[name]

    def array_decl(self, name: str) -> ArrayDecl:
        """An array argument's or a local array's declaration."""
        return self.arrays[name] if name in self.arrays else self.local_arrays[name]

    def names_in(self, node: c_ast.Node) -> set[str]:
        names = {node.name} if isinstance(node, c_ast.ID) else set()
        for _, child in node.children():
            names |= self.names_in(child)
        return names

    def declare_local(self, decl: c_ast.Decl) -> None:
        """Record a declaration that precedes the scop (``int i, j;``, ``float t;``)."""
        if decl.name is None:
            return  # a struct/enum declaration without a variable
        problem = dtype = None
        typ = decl.type
        if "static" in (decl.storage or []) or "extern" in (decl.storage or []):
            problem = f"'{decl.name}' is a static/extern variable: use a plain local"
        elif isinstance(typ, c_ast.ArrayDecl):
            self.local_array_decls.append(decl)  # read_local_arrays, after the parameters
        elif isinstance(typ, c_ast.PtrDecl):
            problem = f"local pointer '{decl.name}': pass arrays as parameters"
        elif isinstance(typ, c_ast.FuncDecl):
            problem = f"'{decl.name}' is a function, not a variable"
        else:
            try:
                dtype = self.dtype(typ, "variable", decl.name)
            except UnsupportedError as exc:
                problem = exc.message
        self.locals[decl.name] = _Local(
            decl.name, dtype, self.loc(decl), problem, decl.init is not None, decl.init
        )

    # ---- names -----------------------------------------------------------

    def role(self, name: str) -> str:
        """What ``name`` denotes at this point of the region."""
        if name in self.active:
            return "iterator"
        if name in self.params:
            return "int_param" if self.params[name].dtype.startswith("int") else "float_param"
        if name in self.arrays or name in self.local_arrays:
            return "array"
        if name in self.temporaries:
            return "temporary"
        if name in self.iterator_names:
            return "dead_iterator"
        if name in self.locals:
            local = self.locals[name]
            if local.initialised and local.problem is None and (
                name not in self.written_in_region
            ):
                return "derived"
            return "local"
        return "unknown"

    def name_error(self, node: c_ast.Node, name: str, role: str) -> UnsupportedError:
        """The error for a name that cannot be used where it is (dead iterator/unknown)."""
        if role == "dead_iterator":
            return self.unsupported(node, f"iterator '{name}' used outside its loop")
        return self.unsupported(node, f"unknown variable '{name}'")

    def temporary(self, node: c_ast.Node, name: str) -> ScalarRef:
        """A scalar local read or written in the region; the first use makes a function
        local a temporary."""
        if name not in self.temporaries:
            local = self.locals[name]
            if local.problem:
                raise self.unsupported(node, local.problem)
            if local.initialised:
                raise self.unsupported(
                    node,
                    f"'{name}' is initialised outside #pragma scop: initialise scalar "
                    "temporaries inside the region",
                )
            reserved.check_name(name, "variable", local.loc)
            self.temporaries[name] = ScalarDecl(name, local.dtype, local.loc, "temporary")
        return ScalarRef(name, self.loc(node))

    def derived_value(self, name: str) -> IntExpr | Expr:
        """The value of a scalar initialised before the region and only read in it
        (``double eps = 0.1;``, ``int k = n / 2;``), as PPCG treats it: a read-only
        input computed from constants and the function's parameters.  Its initialiser
        is translated once and substituted wherever the region reads the scalar, so
        nothing downstream needs to know it existed (the reference runs the whole
        function, initialisation included)."""
        if name in self.derived:
            return self.derived[name]
        local = self.locals[name]
        init = local.init
        if isinstance(init, c_ast.InitList):
            raise self.unsupported(init, f"initialiser list for scalar '{name}'")
        earlier = list(self.locals)[: list(self.locals).index(name)]
        for used in _value_names(init):
            ok = (used in self.params) or (
                used in earlier
                and self.role(used) == "derived"
                and used not in self.deriving
            )
            if not ok:
                what = "an array" if used in self.arrays else f"'{used}'"
                raise UnsupportedError(
                    f"'{name}' is initialised before #pragma scop with '{self.text(init)}', "
                    f"which reads {what}: a scalar set before the region and read in it must "
                    "be initialised with an expression of constants and the function's "
                    "scalar parameters (or be assigned inside the region)",
                    local.loc,
                )
        reserved.check_name(name, "variable", local.loc)
        saved, self.active = self.active, []
        self.deriving.append(name)
        try:
            if local.dtype.startswith("int"):
                ctx = _IntCtx(
                    f"initialiser '{self.text(init)}' of '{name}'",
                    "the initialiser of an integer scalar read in the region",
                    "data-dependent initialiser",
                    "it must be an integer expression of constants and integer parameters",
                )
                value: IntExpr | Expr = self.int_expr(init, ctx)
            else:
                value = self.value(init)
                if isinstance(value, Const):
                    value = Const(_rounded(float(value.value), local.dtype), local.dtype)
        finally:
            self.active = saved
            self.deriving.pop()
        self.derived[name] = value
        return value

    def check_outside(self, items: list[c_ast.Node]) -> None:
        """Statements of the function outside the region are not compiled: refuse those
        that write what the region computes with or what the function returns (any
        array argument), instead of dropping them silently.  Before the region that is
        also a parameter, temporary or derived scalar the region reads."""
        start = next(i for i, n in enumerate(items) if _pragma_word(n) == "scop")
        end = next(i for i, n in enumerate(items) if _pragma_word(n) == "endscop")
        before = set(self.arrays) | set(self.params) | set(self.temporaries)
        before |= set(self.derived) | set(self.local_arrays)
        for where, chunk, watched in (
            ("before", items[:start], before),
            ("after", items[end + 1 :], set(self.arrays)),
        ):
            for item in chunk:
                if isinstance(item, (c_ast.Decl, c_ast.Pragma)):
                    continue
                writer = _writer(item, watched)
                if writer is None:
                    continue
                item, name = writer
                used = "an array argument" if name in self.arrays else \
                    "a local array of the region" if name in self.local_arrays else \
                    "read by the region"
                verb = "may write" if isinstance(item, c_ast.FuncCall) else "writes"
                raise self.unsupported(
                    item,
                    f"'{self.text(item)}' {where} #pragma scop {verb} '{name}' ({used}): "
                    "only the #pragma scop region is compiled, so this statement would be "
                    "lost; move it into the region or out of the function",
                )

    # ---- statements ------------------------------------------------------

    def statements(self, items: Sequence[c_ast.Node]) -> list[Node]:
        out: list[Node] = []
        for item in items:
            out.extend(self.statement(item))
        return out

    def statement(self, node: c_ast.Node) -> list[Node]:
        if isinstance(node, c_ast.Compound):
            return self.statements(node.block_items or [])
        if isinstance(node, c_ast.For):
            return [self.for_loop(node)]
        if isinstance(node, c_ast.If):
            return [self.if_stmt(node)]
        if isinstance(node, c_ast.Assignment):
            return [self.assignment(node)]
        if isinstance(node, c_ast.UnaryOp) and node.op in ("++", "--", "p++", "p--"):
            target = self.target(node.expr)
            return [Assign(target, "+=" if "++" in node.op else "-=", Const(1), self.loc(node))]
        if isinstance(node, c_ast.Decl):
            return self.declaration(node)
        if isinstance(node, c_ast.EmptyStatement) or node is None:
            return []
        if isinstance(node, c_ast.Pragma):
            if _pragma_word(node) == "scop":
                raise self.unsupported(node, "nested #pragma scop")
            return []  # other pragmas (unroll, omp, ...) carry no semantics we need
        for kind, message in _REJECTED_STATEMENTS.items():
            if isinstance(node, kind):
                raise self.unsupported(node, message)
        if isinstance(node, c_ast.FuncCall):
            name = self.callee(node)
            if name in PURE_FUNCTIONS:
                raise self.unsupported(node, f"call to '{name}' as a statement has no effect")
            raise self.unsupported(node, f"call to '{name}': {_SIDE_EFFECT_HINT}")
        if isinstance(node, c_ast.Typedef):
            raise self.unsupported(node, "typedef inside #pragma scop")
        if isinstance(node, (c_ast.BinaryOp, c_ast.ID, c_ast.Constant, c_ast.ArrayRef)):
            raise self.unsupported(node, f"'{self.text(node)}': statement has no effect")
        raise self.rejected(node)

    def declaration(self, decl: c_ast.Decl) -> list[Node]:
        """``float t;`` / ``double t = e;`` inside the region: a scalar temporary."""
        name, loc = decl.name, self.loc(decl)
        if "static" in (decl.storage or []) or "extern" in (decl.storage or []):
            raise self.unsupported(decl, f"static/extern local '{name}' inside #pragma scop")
        if isinstance(decl.type, (c_ast.ArrayDecl, c_ast.PtrDecl)):
            raise self.unsupported(
                decl,
                f"local array or pointer '{name}' inside #pragma scop: declare local arrays "
                "before the region (float t[n];), pass others as parameters",
            )
        if isinstance(decl.type, c_ast.FuncDecl):
            raise self.unsupported(decl, f"function declaration '{name}' inside #pragma scop")
        if name is None or not isinstance(decl.type, c_ast.TypeDecl):
            raise self.unsupported(decl, "only scalar declarations are allowed in #pragma scop")
        dtype = self.dtype(decl.type, "variable", name)
        reserved.check_name(name, "variable", loc)
        role = self.role(name)
        if role in ("int_param", "float_param", "array"):
            raise self.unsupported(decl, f"declaration of '{name}' shadows a parameter")
        if role in ("iterator", "dead_iterator"):
            raise self.unsupported(
                decl, f"'{name}' is used both as a loop iterator and as a scalar temporary"
            )
        if role == "temporary" and self.temporaries[name].dtype != dtype:
            raise self.unsupported(decl, f"'{name}' is redeclared with another type")
        if role != "temporary":
            self.temporaries[name] = ScalarDecl(name, dtype, loc, "temporary")
        if decl.init is None:
            return []
        if isinstance(decl.init, c_ast.InitList):
            raise self.unsupported(decl.init, f"initialiser list for scalar '{name}'")
        return [Assign(ScalarRef(name, loc), "=", self.value(decl.init), loc)]

    def assignment(self, node: c_ast.Assignment) -> Assign:
        if node.op not in _ASSIGN_OPS:
            raise self.unsupported(
                node, f"compound assignment '{node.op}': only =, +=, -=, *= and /= are supported"
            )
        target = self.target(node.lvalue)
        return Assign(target, node.op, self.value(node.rvalue), self.loc(node))

    def target(self, node: c_ast.Node) -> ArrayRef | ScalarRef:
        if isinstance(node, c_ast.ArrayRef):
            return self.array_ref(node)
        if not isinstance(node, c_ast.ID):
            raise self.rejected(node)
        name = node.name
        role = self.role(name)
        if role in ("int_param", "float_param"):
            raise self.unsupported(
                node,
                f"assignment to parameter '{name}': scalar parameters are read-only in "
                "#pragma scop (use a local temporary)",
            )
        if role in ("iterator", "dead_iterator"):
            raise self.unsupported(
                node, f"assignment to loop iterator '{name}': only the for header may change it"
            )
        if role == "array":
            raise self.unsupported(node, f"assignment to the whole array '{name}'")
        if role == "unknown":
            raise self.name_error(node, name, role)
        return self.temporary(node, name)  # a 'derived' one is refused there

    # ---- loops and guards ------------------------------------------------

    def for_loop(self, node: c_ast.For) -> For:
        loc = self.loc(node)
        parts = (node.init, node.cond, node.next)
        header = "for (" + "; ".join("" if p is None else self.text(p) for p in parts) + ")"
        for part, what in zip(parts, ("initialisation", "condition", "increment"), strict=True):
            if part is None:
                raise self.unsupported(node, f"{header}: for loop without {what}")
        iterator, init = self.loop_init(node.init, header)
        self.active.append(iterator)
        self.iterator_names.add(iterator)
        cond = self.cond(node.cond, self.bound_ctx(node.cond))
        if iterator not in _cond_names(cond):
            raise self.unsupported(
                node.cond,
                f"{header}: the loop condition does not bound the iterator '{iterator}'",
            )
        step = self.loop_step(node.next, iterator)
        body = self.statement(node.stmt)
        self.active.pop()
        declared_here = isinstance(node.init, c_ast.DeclList)
        return For(iterator, init, cond, step, tuple(body), loc, declared_here)

    def bound_ctx(self, node: c_ast.Node) -> _IntCtx:
        return _IntCtx(
            self.text(node),
            "a loop bound",
            "data-dependent loop bound",
            "loop bounds must be affine in outer loop iterators and integer parameters",
        )

    def loop_init(self, init: c_ast.Node, header: str) -> tuple[str, IntExpr]:
        """``i = e`` (i declared in the function) or ``int i = e``: iterator and start."""
        if isinstance(init, c_ast.DeclList) and len(init.decls) == 1:
            decl = init.decls[0]
            if not isinstance(decl.type, c_ast.TypeDecl) or decl.init is None:
                raise self.unsupported(init, f"{header}: the iterator needs an initial value")
            name = decl.name
            self.check_iterator(decl, name, self.dtype(decl.type, "loop iterator", name))
            return name, self.int_expr(decl.init, self.bound_ctx(decl.init))
        if (
            isinstance(init, c_ast.Assignment)
            and init.op == "="
            and isinstance(init.lvalue, c_ast.ID)
        ):
            name = init.lvalue.name
            role = self.role(name)
            if role == "unknown":
                raise self.name_error(init.lvalue, name, role)
            if role == "local" and self.locals[name].problem:
                raise self.unsupported(init.lvalue, self.locals[name].problem)
            dtype = self.locals[name].dtype if name in self.locals else None
            self.check_iterator(init.lvalue, name, dtype)
            return name, self.int_expr(init.rvalue, self.bound_ctx(init.rvalue))
        raise self.unsupported(
            init, f"{header}: a for loop must start with 'i = e' or 'int i = e' (one iterator)"
        )

    def check_iterator(self, node: c_ast.Node, name: str, dtype: str | None) -> None:
        reserved.check_name(name, "loop iterator", self.loc(node))
        role = self.role(name)
        if role == "iterator":
            raise self.unsupported(node, f"loop reuses iterator '{name}' of an enclosing loop")
        if role in ("int_param", "float_param"):
            raise self.unsupported(
                node, f"loop iterator '{name}' is a function parameter: parameters are read-only"
            )
        if role == "array":
            raise self.unsupported(node, f"loop iterator '{name}' is an array parameter")
        if role == "temporary":
            raise self.unsupported(
                node, f"'{name}' is used both as a loop iterator and as a scalar temporary"
            )
        if dtype not in ("int32", "int64"):
            raise self.unsupported(node, f"loop iterator '{name}' must have an integer type")

    def loop_step(self, node: c_ast.Node, iterator: str) -> int:
        """``i++``, ``++i``, ``i--``, ``i += c``, ``i -= c``, ``i = i + c``: the constant
        step (the IR, like isl, needs it as a number)."""
        text = self.text(node)
        hint = "use i++, i--, i += c or i -= c with an integer constant c"
        if isinstance(node, c_ast.UnaryOp) and node.op in ("++", "p++", "--", "p--"):
            self.check_step_variable(node.expr, iterator, text)
            return 1 if "++" in node.op else -1
        if not isinstance(node, c_ast.Assignment):
            raise self.unsupported(node, f"unsupported loop increment '{text}': {hint}")
        self.check_step_variable(node.lvalue, iterator, text)
        sign, amount = 1, None
        if node.op in ("+=", "-="):
            sign, amount = (1 if node.op == "+=" else -1), node.rvalue
        elif node.op == "=" and isinstance(node.rvalue, c_ast.BinaryOp):
            lhs, rhs, op = node.rvalue.left, node.rvalue.right, node.rvalue.op
            if op in ("+", "-") and _is_id(lhs, iterator):
                sign, amount = (1 if op == "+" else -1), rhs
            elif op == "+" and _is_id(rhs, iterator):
                amount = lhs
        if amount is None:
            raise self.unsupported(node, f"unsupported loop increment '{text}': {hint}")
        ctx = _IntCtx(
            text, "a loop step", "data-dependent loop step", "loop steps must be integer constants"
        )
        value = _const_value(self.int_expr(amount, ctx))
        if value is None:
            raise self.unsupported(node, ctx.error("non-constant loop step"))
        if value == 0:
            raise self.unsupported(node, f"'{text}': the loop step is zero")
        return sign * value

    def check_step_variable(self, node: c_ast.Node, iterator: str, text: str) -> None:
        if not _is_id(node, iterator):
            raise self.unsupported(
                node, f"loop increment '{text}' does not step the loop iterator '{iterator}'"
            )

    def if_stmt(self, node: c_ast.If) -> If:
        ctx = _IntCtx(
            self.text(node.cond),
            "a condition",
            "data-dependent condition",
            "if conditions must be affine in loop iterators and integer parameters",
        )
        cond = self.cond(node.cond, ctx)
        then = self.statement(node.iftrue)
        else_ = self.statement(node.iffalse) if node.iffalse is not None else []
        return If(cond, tuple(then), tuple(else_), self.loc(node))

    # ---- affine candidates: conditions and integer expressions -----------

    def cond(self, node: c_ast.Node, ctx: _IntCtx) -> Cond:
        if isinstance(node, c_ast.BinaryOp):
            if node.op in _CMP_OPS:
                return Compare(
                    node.op, self.int_expr(node.left, ctx), self.int_expr(node.right, ctx)
                )
            if node.op in ("&&", "||"):
                op = "and" if node.op == "&&" else "or"
                args = []
                for side in (node.left, node.right):
                    sub = self.cond(side, ctx)
                    args.extend(sub.args if isinstance(sub, BoolOp) and sub.op == op else [sub])
                return BoolOp(op, tuple(args))
        if isinstance(node, c_ast.UnaryOp) and node.op == "!":
            return Not(self.cond(node.expr, ctx))
        expr = self.int_expr(node, ctx)
        if isinstance(expr, IntConst):
            return BoolConst(expr.value != 0)
        return Compare("!=", expr, IntConst(0))  # C truth: non-zero

    def int_expr(self, node: c_ast.Node, ctx: _IntCtx) -> IntExpr:
        """An integer expression over iterators and integer parameters.  Reads of data
        (arrays, float or temporary scalars, float literals) are rejected with ``ctx``."""
        if isinstance(node, c_ast.Constant):
            if _is_int_constant(node):
                return IntConst(_int_value(node.value))
            if node.type in ("float", "double", "long double"):
                raise self.unsupported(
                    node, ctx.error(f"floating-point constant {node.value} in {ctx.where}")
                )
            raise self.constant_error(node)
        if isinstance(node, c_ast.ID):
            return self.int_name(node, ctx)
        if isinstance(node, c_ast.BinaryOp):
            if node.op in _INT_OPS:
                return IntBinOp(
                    _INT_OPS[node.op], self.int_expr(node.left, ctx), self.int_expr(node.right, ctx)
                )
            if node.op in _CMP_OPS or node.op in ("&&", "||"):
                raise self.unsupported(
                    node, ctx.error(f"condition '{self.text(node)}' used as a number")
                )
            raise self.rejected(node)
        if isinstance(node, c_ast.UnaryOp):
            if node.op == "-":
                return IntNeg(self.int_expr(node.expr, ctx))
            if node.op == "+":
                return self.int_expr(node.expr, ctx)
            raise self.rejected(node)
        if isinstance(node, c_ast.Cast):
            if self.cast_dtype(node).startswith("float"):
                raise self.unsupported(node, ctx.error(f"cast to floating point in {ctx.where}"))
            return self.int_expr(node.expr, ctx)
        if isinstance(node, c_ast.TernaryOp):
            return self.int_select(node, ctx)
        if isinstance(node, c_ast.FuncCall):
            name = self.callee(node)
            args = self.call_args(node)
            if name in _MINMAX_NAMES and len(args) >= 2:
                return IntMinMax(_MINMAX_NAMES[name], tuple(self.int_expr(a, ctx) for a in args))
            if name in PURE_FUNCTIONS:
                raise self.unsupported(node, ctx.error(f"call to '{name}' in {ctx.where}"))
            raise self.unsupported(node, f"call to '{name}': {_SIDE_EFFECT_HINT}")
        if isinstance(node, c_ast.ArrayRef):
            raise self.unsupported(node, ctx.error(ctx.data_problem))
        raise self.rejected(node)

    def int_name(self, node: c_ast.ID, ctx: _IntCtx) -> IntExpr:
        name = node.name
        role = self.role(name)
        if role in ("iterator", "int_param"):
            return IntVar(name)
        if role == "derived":
            value = self.derived_value(name)
            if isinstance(value, IntExpr):
                return value
            problem = f"floating-point variable '{name}' in {ctx.where}"
        elif role == "float_param":
            problem = f"floating-point parameter '{name}' in {ctx.where}"
        elif role in ("temporary", "local"):
            problem = f"scalar variable '{name}' in {ctx.where} (its value is data)"
        elif role == "array":
            problem = f"{ctx.data_problem} (array '{name}' used as a number)"
        else:
            raise self.name_error(node, name, role)
        raise self.unsupported(node, ctx.error(problem))

    def int_select(self, node: c_ast.TernaryOp, ctx: _IntCtx) -> IntExpr:
        """``c ? a : b``; the MIN/MAX macro shapes ``a < b ? a : b`` become IntMinMax."""
        cond = self.cond(node.cond, ctx)
        then = self.int_expr(node.iftrue, ctx)
        else_ = self.int_expr(node.iffalse, ctx)
        if isinstance(cond, Compare) and cond.op in ("<", "<=", ">", ">="):
            less = cond.op in ("<", "<=")
            if (then, else_) == (cond.lhs, cond.rhs):
                return IntMinMax("min" if less else "max", (then, else_))
            if (then, else_) == (cond.rhs, cond.lhs):
                return IntMinMax("max" if less else "min", (then, else_))
        return IntSelect(cond, then, else_)

    # ---- value expressions -----------------------------------------------

    def value(self, node: c_ast.Node) -> Expr:
        if isinstance(node, c_ast.Constant):
            if _is_int_constant(node):
                return Const(_int_value(node.value), "int")
            if node.type in ("float", "double", "long double"):
                return _float_const(node.value)
            raise self.constant_error(node)
        if isinstance(node, c_ast.ID):
            name = node.name
            role = self.role(name)
            if role in ("iterator", "int_param"):
                return IntValue(IntVar(name))
            if role == "float_param":
                return ScalarRef(name, self.loc(node))
            if role == "derived":
                value = self.derived_value(name)
                return IntValue(value) if isinstance(value, IntExpr) else value
            if role in ("temporary", "local"):
                return self.temporary(node, name)
            if role == "array":
                raise self.unsupported(node, f"array '{name}' used without subscripts")
            raise self.name_error(node, name, role)
        if isinstance(node, c_ast.ArrayRef):
            return self.array_ref(node)
        if isinstance(node, c_ast.BinaryOp):
            if node.op in _VALUE_OPS:
                return BinOp(node.op, self.value(node.left), self.value(node.right))
            if node.op in _CMP_OPS:
                return ValueCompare(node.op, self.value(node.left), self.value(node.right))
            if node.op in ("&&", "||"):
                op = "and" if node.op == "&&" else "or"
                args = []
                for side in (node.left, node.right):
                    sub = self.value(side)
                    args.extend(
                        sub.args if isinstance(sub, ValueLogical) and sub.op == op else [sub]
                    )
                return ValueLogical(op, tuple(args))
            raise self.rejected(node)
        if isinstance(node, c_ast.UnaryOp):
            if node.op in ("-", "+"):
                return UnaryOp(node.op, self.value(node.expr))
            if node.op == "!":
                return ValueLogical("not", (self.value(node.expr),))
            raise self.rejected(node)
        if isinstance(node, c_ast.Cast):
            return self.cast(node)
        if isinstance(node, c_ast.TernaryOp):
            return Select(self.value(node.cond), self.value(node.iftrue), self.value(node.iffalse))
        if isinstance(node, c_ast.FuncCall):
            name = self.callee(node)
            if name not in PURE_FUNCTIONS:
                raise self.unsupported(node, f"call to '{name}': {_SIDE_EFFECT_HINT}")
            return Call(name, tuple(self.value(a) for a in self.call_args(node)))
        raise self.rejected(node)

    def cast(self, node: c_ast.Cast) -> Expr:
        """Casts between numeric types.  The IR has no cast node, so an int -> float
        conversion is kept exact as ``1.0 * e`` (C converts ``e`` before multiplying);
        other casts are dropped, except a float -> int truncation of a non-constant,
        which the IR cannot express and is rejected."""
        target = self.cast_dtype(node)
        inner = self.value(node.expr)
        if target.startswith("float"):
            if isinstance(inner, Const) and inner.dtype == "int":
                return Const(float(inner.value), target)
            if self.is_int_valued(inner):
                return BinOp("*", Const(1.0, target), inner)
            return inner
        if isinstance(inner, Const) and inner.dtype != "int":
            return Const(int(inner.value), "int")  # truncation toward zero, like C
        if not self.is_int_valued(inner):
            raise self.unsupported(
                node, f"'{self.text(node)}': cast of a floating-point value to an integer type"
            )
        return inner

    def cast_dtype(self, node: c_ast.Cast) -> str:
        typ = node.to_type.type
        if not isinstance(typ, c_ast.TypeDecl):
            raise self.unsupported(node, f"'{self.text(node)}': cast to a non-numeric type")
        return self.dtype(typ, "cast", self.text(node))

    def is_int_valued(self, expr: Expr) -> bool:
        """Whether C evaluates ``expr`` in an integer type (decides what a cast does)."""
        if isinstance(expr, Const):
            return expr.dtype == "int"
        if isinstance(expr, IntValue):
            return True
        if isinstance(expr, ArrayRef):
            return self.array_decl(expr.array).dtype.startswith("int")
        if isinstance(expr, ScalarRef):
            decl = self.params.get(expr.name) or self.temporaries[expr.name]
            return decl.dtype.startswith("int")
        if isinstance(expr, (ValueCompare, ValueLogical)):
            return True
        if isinstance(expr, BinOp):
            return self.is_int_valued(expr.lhs) and self.is_int_valued(expr.rhs)
        if isinstance(expr, UnaryOp):
            return self.is_int_valued(expr.arg)
        if isinstance(expr, Select):
            return self.is_int_valued(expr.then) and self.is_int_valued(expr.else_)
        if isinstance(expr, Call):
            return expr.func in ("abs", "min", "max") and all(map(self.is_int_valued, expr.args))
        return False

    def array_ref(self, node: c_ast.ArrayRef) -> ArrayRef:
        """``A[i][j]``: exactly one affine-candidate subscript per dimension."""
        text = self.text(node)
        subscripts = []
        base = node
        while isinstance(base, c_ast.ArrayRef):
            subscripts.append(base.subscript)
            base = base.name
        subscripts.reverse()
        if not isinstance(base, c_ast.ID):
            raise self.rejected(base)
        name = base.name
        role = self.role(name)
        if role == "unknown":
            raise self.unsupported(base, f"{text}: unknown array '{name}'")
        if role == "dead_iterator":
            raise self.name_error(base, name, role)
        if role == "local" and self.locals[name].problem:
            raise self.unsupported(base, self.locals[name].problem)  # e.g. a local array
        if role != "array":
            raise self.unsupported(base, f"{text}: '{name}' is not an array")
        rank = len(self.array_decl(name).shape)
        if len(subscripts) != rank:
            raise self.unsupported(
                node,
                f"{text}: array '{name}' has {rank} dimension{'s' * (rank != 1)} but "
                f"{len(subscripts)} subscript{'s' * (len(subscripts) != 1)}",
            )
        ctx = _IntCtx(
            text,
            "a subscript",
            "indirect subscript",
            "subscripts must be affine in loop iterators and integer parameters",
        )
        index = tuple(self.int_expr(s, ctx) for s in subscripts)
        return ArrayRef(name, index, self.loc(node))

    # ---- calls and rejected constructs -----------------------------------

    def callee(self, node: c_ast.FuncCall) -> str:
        if not isinstance(node.name, c_ast.ID):
            raise self.unsupported(node, f"'{self.text(node)}': call through a pointer")
        return node.name.name

    def call_args(self, node: c_ast.FuncCall) -> list[c_ast.Node]:
        return list(node.args.exprs) if node.args is not None else []

    def constant_error(self, node: c_ast.Constant) -> UnsupportedError:
        kind = "string literal" if node.type == "string" else f"{node.type} constant"
        return self.unsupported(node, f"{kind} {node.value} is not supported in #pragma scop")

    def rejected(self, node: c_ast.Node) -> UnsupportedError:
        """The error for C constructs outside the language whatever the context."""
        text = self.text(node)
        if isinstance(node, c_ast.UnaryOp):
            reasons = {
                "*": f"pointer dereference: {_POINTER_HINT}",
                "&": "address-of: pointers are not supported",
                "sizeof": "sizeof is not supported",
                "~": "bitwise operator '~' is not supported",
                "++": "increment inside an expression: write it as a separate statement",
                "p++": "increment inside an expression: write it as a separate statement",
                "--": "decrement inside an expression: write it as a separate statement",
                "p--": "decrement inside an expression: write it as a separate statement",
            }
            reason = reasons.get(node.op, f"operator '{node.op}' is not supported")
        elif isinstance(node, c_ast.BinaryOp):
            reason = f"operator '{node.op}' is not supported"
        elif isinstance(node, c_ast.Assignment):
            reason = "assignment inside an expression: write it as a separate statement"
        elif isinstance(node, c_ast.ExprList):
            reason = "comma expression: write separate statements"
        elif isinstance(node, c_ast.StructRef):
            reason = "struct member access is not supported"
        elif isinstance(node, c_ast.CompoundLiteral):
            reason = "compound literal is not supported"
        elif isinstance(node, c_ast.FuncDef):
            reason = "nested function is not supported"
        else:
            reason = f"{type(node).__name__} is not supported in #pragma scop"
        return self.unsupported(node, f"'{text}': {reason}")


# --------------------------------------------------------------------------
# Small pure helpers
# --------------------------------------------------------------------------


def _is_id(node: c_ast.Node, name: str) -> bool:
    return isinstance(node, c_ast.ID) and node.name == name


def _is_int_constant(node: c_ast.Constant) -> bool:
    return "int" in node.type.split()  # 'int', 'unsigned long int', ...


def _int_value(text: str) -> int:
    """Value of a C integer literal (decimal, 0x hex, 0b binary, leading-0 octal)."""
    digits = text.rstrip("uUlL")
    if len(digits) > 1 and digits[0] == "0" and digits[1].isdigit():
        return int(digits, 8)
    return int(digits, 0)


def _float_const(text: str) -> Const:
    """``1.0f`` -> float32, ``1.0``/``1e3``/``0x1p3``/``1.0L`` -> float64.  (A hex float
    always has a ``p`` exponent, so a trailing ``f`` is a suffix there too.)"""
    digits = text.rstrip("fFlL")
    value = float.fromhex(digits) if digits.lower().startswith("0x") else float(digits)
    return Const(value, "float32" if text[-1] in "fF" else "float64")


def _const_value(expr: IntExpr) -> int | None:
    """Fold a constant integer expression (C semantics); None if it has variables."""
    if isinstance(expr, IntConst):
        return expr.value
    if isinstance(expr, IntNeg):
        arg = _const_value(expr.arg)
        return None if arg is None else -arg
    if isinstance(expr, IntBinOp):
        lhs, rhs = _const_value(expr.lhs), _const_value(expr.rhs)
        if lhs is None or rhs is None:
            return None
        if expr.op in ("truncdiv", "rem"):
            if rhs == 0:
                return None
            quotient = abs(lhs) // abs(rhs) * (1 if (lhs >= 0) == (rhs >= 0) else -1)
            return quotient if expr.op == "truncdiv" else lhs - quotient * rhs
        return {"+": lhs + rhs, "-": lhs - rhs, "*": lhs * rhs}.get(expr.op)
    if isinstance(expr, IntMinMax):
        args = [_const_value(a) for a in expr.args]
        if None in args:
            return None
        return min(args) if expr.op == "min" else max(args)
    return None


def _int_names(expr: IntExpr) -> set[str]:
    if isinstance(expr, IntVar):
        return {expr.name}
    if isinstance(expr, IntBinOp):
        return _int_names(expr.lhs) | _int_names(expr.rhs)
    if isinstance(expr, IntNeg):
        return _int_names(expr.arg)
    if isinstance(expr, IntMinMax):
        return set().union(*map(_int_names, expr.args))
    if isinstance(expr, IntSelect):
        return _cond_names(expr.cond) | _int_names(expr.then) | _int_names(expr.else_)
    return set()


def _cond_names(cond: Cond) -> set[str]:
    if isinstance(cond, Compare):
        return _int_names(cond.lhs) | _int_names(cond.rhs)
    if isinstance(cond, BoolOp):
        return set().union(*map(_cond_names, cond.args))
    if isinstance(cond, Not):
        return _cond_names(cond.arg)
    return set()


def _rounded(value: float, dtype: str) -> float:
    """``value`` as the C type ``dtype`` stores it (a float32 variable rounds)."""
    if dtype == "float32":
        return struct.unpack("f", struct.pack("f", value))[0]
    return value


def _value_names(node: c_ast.Node | None) -> list[str]:
    """Variable names read in an expression, in order (not called function names)."""
    if node is None:
        return []
    if isinstance(node, c_ast.ID):
        return [node.name]
    if isinstance(node, c_ast.FuncCall):
        return [n for arg in (node.args.exprs if node.args else []) for n in _value_names(arg)]
    if isinstance(node, (c_ast.Cast, c_ast.Typename)):
        return _value_names(node.expr) if isinstance(node, c_ast.Cast) else []
    if isinstance(node, c_ast.UnaryOp) and node.op == "sizeof":
        return []
    return [n for _, child in node.children() for n in _value_names(child)]


def _assigned_base(node: c_ast.Node) -> set[str]:
    """The variable an lvalue writes (all names under a dereference, conservatively)."""
    while isinstance(node, (c_ast.ArrayRef, c_ast.StructRef)):
        node = node.name
    if isinstance(node, c_ast.ID):
        return {node.name}
    return set(_value_names(node))


def _written_names(node: c_ast.Node | None, calls: bool = False) -> set[str]:
    """Names a statement may write: assignment targets, ``++``/``--`` operands, loop
    variables, names declared in it, and (``calls``) variables passed by name or address
    to a call."""
    if node is None:
        return set()
    found: set[str] = set()
    if isinstance(node, c_ast.Assignment):
        found |= _assigned_base(node.lvalue)
    elif isinstance(node, c_ast.UnaryOp) and node.op in ("++", "--", "p++", "p--"):
        found |= _assigned_base(node.expr)
    elif isinstance(node, c_ast.Decl) and node.name:
        found.add(node.name)
    elif calls and isinstance(node, c_ast.FuncCall) and node.args is not None:
        found |= {a.name for a in node.args.exprs if isinstance(a, c_ast.ID)}
        found |= {
            n for a in node.args.exprs
            if isinstance(a, c_ast.UnaryOp) and a.op == "&" for n in _assigned_base(a.expr)
        }
    for _, child in node.children():
        found |= _written_names(child, calls)
    return found


def _writer(node: c_ast.Node, watched: set[str]) -> tuple[c_ast.Node, str] | None:
    """The innermost statement under ``node`` that may write a name in ``watched``, and
    the name (for the message's line), or None."""
    for _, child in node.children():
        found = _writer(child, watched)
        if found is not None:
            return found
    if isinstance(node, (c_ast.Assignment, c_ast.UnaryOp, c_ast.FuncCall, c_ast.Decl)):
        hit = sorted(_written_names(node, calls=True) & watched)
        if hit:
            return node, hit[0]
    return None
