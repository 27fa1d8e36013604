"""Python frontend: an ``@affine`` function's source -> the loop-tree IR.

The function is read from its file with :mod:`ast`; the module is never imported or
executed, so translating a kernel has no side effects and works on files whose imports
are unavailable.  Only a small, statically checkable subset of Python is accepted:
``for`` loops over ``range`` with constant steps, ``if``/``elif``/``else`` on affine
conditions, and assignments to array elements or scalar temporaries whose right-hand
sides call only pure math functions.  Everything else is rejected here, with the file
and line of the offending construct, rather than being miscompiled later.

Deciding *affinity* (``a[i * j]``) is left to the model builder; this module rejects what
can never be affine whatever the values: data-dependent subscripts, bounds and guards,
float values in integer positions, and control flow that is not a counted loop.

:func:`affine` marks a function as a kernel.  The decorated object remains callable as
the original function, which is the sequential reference the generated code is checked
against.
"""

from __future__ import annotations

import ast
import functools
import inspect
import itertools
import math
import tokenize
from collections.abc import Callable, Sequence
from typing import Any

from polygpu.errors import PolygpuError, SourceLoc, UnsupportedError
from polygpu.frontend import ir
from polygpu.frontend import names as reserved
from polygpu.frontend.types import ELEMENT_TYPES

# --------------------------------------------------------------------------
# The @affine decorator
# --------------------------------------------------------------------------


class AffineFunction:
    """A kernel function: calling it runs the original Python code (the reference);
    ``.program`` is its loop-tree IR, read from the source file on first use."""

    def __init__(self, fn: Callable[..., Any]):
        functools.update_wrapper(self, fn)  # __wrapped__, __name__, __doc__, ...

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.__wrapped__(*args, **kwargs)

    @functools.cached_property
    def program(self) -> ir.Program:
        fn = self.__wrapped__
        if fn.__qualname__ != fn.__name__:  # the source is searched for a top-level def
            raise PolygpuError(
                f"'{fn.__qualname__}': only module-level functions can be affine kernels"
            )
        try:
            path = inspect.getsourcefile(fn)
        except TypeError:
            path = None
        if path is None:
            raise PolygpuError(f"cannot find the source file of '{fn.__name__}'")
        return parse_python_function(path, fn.__name__)

    def __repr__(self) -> str:
        return f"<affine function {self.__name__}>"


def affine(fn: Callable[..., Any] | None = None, *,
           not_live_out: Sequence[str] = ()) -> Any:
    """Mark ``fn`` as an affine kernel (usable as ``@affine`` or ``@affine()``).
    ``not_live_out``: array arguments whose values after the call nobody reads
    (:attr:`polygpu.frontend.ir.Program.not_live_out`) -- read from the source, like
    the rest of the function, so it must be written there as a literal list of names."""
    if fn is None:
        return functools.partial(affine, not_live_out=not_live_out)
    return AffineFunction(fn)


# --------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------


def parse_python_function(path: str, function: str) -> ir.Program:
    """Translate the top-level function ``function`` of the Python file ``path``."""
    try:
        with tokenize.open(path) as f:  # honours a PEP 263 coding cookie
            source = f.read()
    except (OSError, SyntaxError) as e:
        raise PolygpuError(f"{path}: cannot read: {getattr(e, 'strerror', None) or e}") from e
    try:
        module = ast.parse(source, filename=path)
    except SyntaxError as e:
        raise PolygpuError(f"syntax error: {e.msg}", SourceLoc(path, e.lineno or 1)) from e

    functions = [
        s for s in module.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    matches = [s for s in functions if s.name == function]
    if not matches:
        available = ", ".join(dict.fromkeys(s.name for s in functions)) or "none"
        raise PolygpuError(
            f"{path}: no top-level function '{function}' (available: {available})"
        )
    fn = matches[-1]  # like Python, a later definition replaces an earlier one
    if isinstance(fn, ast.AsyncFunctionDef):
        raise UnsupportedError("async function cannot be affine", SourceLoc(path, fn.lineno))
    return _Translator(path, module).function(fn)


# --------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------

_SCALAR_TYPES = {"int": "int32", "float": "float64"} | {
    name: t.dtype for name, t in ELEMENT_TYPES.items()
}
_INT_DTYPES = ("int32", "int64")

_CMP_OPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_INT_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "floordiv", ast.Mod: "mod"}
_VALUE_BINOPS = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Mod: "mod",
    ast.FloorDiv: "floordiv",
}
_AUG_OPS = {ast.Add: "+=", ast.Sub: "-=", ast.Mult: "*=", ast.Div: "/="}
_OP_TEXT = {
    ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>", ast.BitOr: "|", ast.BitXor: "^",
    ast.BitAnd: "&", ast.MatMult: "@", ast.FloorDiv: "//", ast.Mod: "%", ast.Div: "/",
    ast.Invert: "~",
}

# Pure functions of the math and numpy modules -> canonical C name (ir.PURE_FUNCTIONS).
# Only those this Python's math module has: the reference runs the function itself, so
# ``math.fmin`` (C has it, Python does not) must be refused here, not crash there.
_MATH_FUNCTIONS = {
    name: name
    for name in (
        "sqrt", "exp", "log", "fabs", "pow", "sin", "cos", "tan", "tanh", "floor", "ceil",
        "exp2", "log2", "log10", "erf", "fma", "fmin", "fmax",
    )
    if hasattr(math, name)
}
_NUMPY_FUNCTIONS = {
    name: name
    for name in (
        "sqrt", "exp", "log", "fabs", "sin", "cos", "tan", "tanh", "floor", "ceil",
        "exp2", "log2", "log10", "fmin", "fmax",
    )
} | {"abs": "fabs", "absolute": "fabs", "maximum": "fmax", "minimum": "fmin", "power": "pow"}
_MODULE_FUNCTIONS = {"math": _MATH_FUNCTIONS, "numpy": _NUMPY_FUNCTIONS}
_MODULE_CONSTANTS = {"pi": math.pi, "e": math.e}
_ARITY = {"pow": 2, "fmin": 2, "fmax": 2, "fma": 3}  # every other function takes 1

# Constructs with no place in an affine function, and why.
_STATEMENT_ERRORS = {
    ast.While: "'while' loop: only 'for ... in range(...)' loops are supported",
    ast.Break: "'break': loops must run their whole range (early exit is not affine)",
    ast.Continue: "'continue' is not supported: put the rest of the body under an 'if'",
    ast.Try: "'try' is not supported in an affine function",
    ast.Raise: "'raise' is not supported in an affine function",
    ast.Assert: "'assert' is not supported in an affine function",
    ast.With: "'with' is not supported in an affine function",
    ast.AsyncWith: "'async with' is not supported in an affine function",
    ast.AsyncFor: "'async for' is not supported in an affine function",
    ast.Global: "'global': a kernel may write only its array arguments and local scalars",
    ast.Nonlocal: "'nonlocal': a kernel may write only its array arguments and local scalars",
    ast.FunctionDef: "nested function definition is not supported",
    ast.AsyncFunctionDef: "nested function definition is not supported",
    ast.ClassDef: "class definition inside an affine function is not supported",
    ast.Import: "import inside an affine function is not supported",
    ast.ImportFrom: "import inside an affine function is not supported",
    ast.Delete: "'del' is not supported in an affine function",
    ast.Match: "'match' is not supported: use 'if'/'elif'",
}
_EXPRESSION_NAMES = {
    ast.Lambda: "lambda", ast.ListComp: "list comprehension", ast.SetComp: "set comprehension",
    ast.DictComp: "dict comprehension", ast.GeneratorExp: "generator expression",
    ast.NamedExpr: "assignment expression ':='", ast.JoinedStr: "f-string", ast.List: "list",
    ast.Tuple: "tuple", ast.Dict: "dict", ast.Set: "set", ast.Await: "await",
    ast.Yield: "yield", ast.YieldFrom: "yield", ast.Starred: "starred expression",
    ast.Slice: "slice",
}


def _describe(node: ast.AST) -> str:
    """A short name for an expression in error messages."""
    if isinstance(node, ast.Constant):
        return f"constant {node.value!r}"
    return _EXPRESSION_NAMES.get(type(node), f"'{ast.unparse(node)}'")


def _module_aliases(module: ast.Module) -> tuple[dict[str, str], dict[str, tuple[str, str]]]:
    """Names the module binds to math/numpy (``import numpy as np``) and to their
    functions (``from math import sqrt``); ``math``, ``np`` and ``numpy`` always count."""
    modules = {"math": "math", "np": "numpy", "numpy": "numpy"}
    functions: dict[str, tuple[str, str]] = {}
    for stmt in module.body:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.name in _MODULE_FUNCTIONS:
                    modules[alias.asname or alias.name] = alias.name
        elif isinstance(stmt, ast.ImportFrom) and stmt.module in _MODULE_FUNCTIONS:
            for alias in stmt.names:
                functions[alias.asname or alias.name] = (stmt.module, alias.name)
    return modules, functions


# --------------------------------------------------------------------------
# The translator
# --------------------------------------------------------------------------


class _Translator:
    """Translates one function.  Name resolution follows Python's scoping as far as the
    subset needs: arguments, loop iterators (in scope inside their loop) and scalar
    temporaries (every other name assigned in the body)."""

    def __init__(self, path: str, module: ast.Module):
        self.path = path
        self.modules, self.imported_functions = _module_aliases(module)
        self.signature: list[str] = []
        self.param_names: set[str] = set()  # all arguments, also those not yet declared
        self.int_params: set[str] = set()
        self.value_params: dict[str, str] = {}  # non-integer scalar argument -> dtype
        self.arrays: dict[str, ir.ArrayDecl] = {}  # the arguments', then local arrays
        self.local_names: list[str] = []  # local arrays (``t = local(f32[m])``), in order
        self.scalars: list[ir.ScalarDecl] = []
        self.loop_names: set[str] = set()  # every name some loop iterates with
        self.temp_names: set[str] = set()
        self.temps: dict[str, ir.ScalarDecl] = {}  # in order of first assignment
        self.annotated: set[str] = set()  # temporaries whose type the source declares
        self.iterators: list[str] = []  # the loops enclosing the current statement

    def loc(self, node: ast.AST) -> SourceLoc:
        return SourceLoc(self.path, getattr(node, "lineno", 1))

    def error(self, message: str, node: ast.AST) -> UnsupportedError:
        return UnsupportedError(message, self.loc(node))

    # ---- function and parameters -------------------------------------------------

    def function(self, fn: ast.FunctionDef) -> ir.Program:
        self.parameters(fn.args)
        self.check_signature(fn)
        statements = [s for s in fn.body if not self.local_array(s)]
        self.collect_names(statements)
        self.temp_names -= self.loop_names
        body = self.block(statements, top_level=True)
        return ir.Program(
            name=fn.name,
            file=self.path,
            loc=self.loc(fn),
            signature=tuple(self.signature),
            params=tuple(self.scalars),
            arrays=tuple(a for a in self.arrays.values() if a.name not in self.local_names),
            temporaries=tuple(self.temps.values()),
            body=body,
            language="python",
            local_arrays=tuple(self.arrays[n] for n in self.local_names),
            not_live_out=self.not_live_out(fn),
        )

    def not_live_out(self, fn: ast.FunctionDef) -> tuple[str, ...]:
        """The names of ``@affine(not_live_out=[...])`` (literal strings: the module is
        never run), each an array argument."""
        names: list[str] = []
        for deco in fn.decorator_list:
            if not isinstance(deco, ast.Call):
                continue
            for kw in deco.keywords:
                if kw.arg != "not_live_out":
                    continue
                items = kw.value.elts if isinstance(kw.value, (ast.List, ast.Tuple)) \
                    else [kw.value]
                for item in items:
                    if not (isinstance(item, ast.Constant) and isinstance(item.value, str)):
                        raise UnsupportedError("not_live_out: a literal list of array "
                                               "argument names, as strings", self.loc(kw))
                    if item.value not in self.arrays or item.value in self.local_names:
                        raise UnsupportedError(f"not_live_out: '{item.value}' is not an "
                                               f"array argument of '{fn.name}'",
                                               self.loc(kw))
                    if item.value not in names:
                        names.append(item.value)
        return tuple(names)

    def local_array(self, s: ast.stmt) -> bool:
        """Whether ``s``, a statement of the function body's top level, declares a local
        array (``t = local(f32[m])``: region-local, docs/input-language.md), recording
        it; elsewhere ``local`` is refused where it is called."""
        if not (isinstance(s, ast.Assign) and isinstance(s.value, ast.Call)
                and self.type_name(s.value.func) == "local"):
            return False
        call = s.value
        if len(s.targets) != 1 or not isinstance(s.targets[0], ast.Name) or call.keywords \
                or len(call.args) != 1 or not isinstance(call.args[0], ast.Subscript):
            raise self.error("a local array is declared as NAME = local(f32[extents])", s)
        name = s.targets[0].id
        if name in self.arrays or name in self.param_names:
            raise self.error(f"local array '{name}' shadows a parameter or another array", s)
        reserved.check_name(name, "array", self.loc(s))
        self.arrays[name] = self.array_type(name, call.args[0], s, "local array")
        self.local_names.append(name)
        return True

    def parameters(self, args: ast.arguments) -> None:
        for extra in (args.vararg, args.kwarg, *args.kwonlyargs):
            if extra is not None:
                raise self.error(
                    f"parameter '{extra.arg}': only plain positional parameters are supported",
                    extra,
                )
        positional = (*args.posonlyargs, *args.args)
        self.param_names = {arg.arg for arg in positional}
        for arg in positional:
            name, loc = arg.arg, self.loc(arg)
            if name in self.signature:
                raise self.error(f"duplicate parameter '{name}'", arg)
            reserved.check_name(name, "parameter", loc)
            self.signature.append(name)
            annotation = arg.annotation
            if annotation is None:
                raise self.error(
                    f"parameter '{name}' has no type annotation "
                    "(expected int, float, f32, f64, i32, i64 or an array type like f32[n, m])",
                    arg,
                )
            if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
                annotation = self.parse_string(annotation.value, arg)
            if isinstance(annotation, ast.Subscript):
                self.array_parameter(name, annotation, arg)
                continue
            dtype = _SCALAR_TYPES.get(self.type_name(annotation) or "")
            if dtype is None:
                raise self.error(
                    f"parameter '{name}': unsupported annotation '{ast.unparse(annotation)}'", arg
                )
            self.scalars.append(ir.ScalarDecl(name, dtype, loc, "param"))
            if dtype in _INT_DTYPES:
                self.int_params.add(name)
            else:
                self.value_params[name] = dtype

    def check_signature(self, fn: ast.FunctionDef) -> None:
        positional = (*fn.args.posonlyargs, *fn.args.args)
        reserved.check_signature(fn.name, [(a.arg, self.loc(a)) for a in positional],
                                 self.arrays)

    def array_parameter(self, name: str, annotation: ast.Subscript, arg: ast.arg) -> None:
        self.arrays[name] = self.array_type(name, annotation, arg, "parameter")

    def array_type(self, name: str, annotation: ast.Subscript, where: ast.AST,
                   what: str) -> ir.ArrayDecl:
        """The array ``name`` of type ``annotation`` (``f32[n, m]``; extents may be
        strings) declared at ``where``; ``what`` it is, for errors."""
        element = ELEMENT_TYPES.get(self.type_name(annotation.value) or "")
        if element is None:
            raise self.error(
                f"{what} '{name}': unsupported array element type "
                f"'{ast.unparse(annotation.value)}' (expected f32, f64, i32 or i64)",
                where,
            )
        extents = annotation.slice
        extents = extents.elts if isinstance(extents, ast.Tuple) else [extents]
        shape = []
        for extent in extents:
            if isinstance(extent, ast.Constant) and isinstance(extent.value, str):
                extent = self.parse_string(extent.value, where)
            shape.append(self.int_expr(extent, f"shape of '{name}'", where))
        return ir.ArrayDecl(name, element.dtype, tuple(shape), self.loc(where))

    @staticmethod
    def type_name(node: ast.expr) -> str | None:
        """``f32``, ``pg.f32`` and ``polygpu.f32`` all name ``f32``."""
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Attribute):
            return node.attr
        return None

    def parse_string(self, text: str, where: ast.AST) -> ast.expr:
        """Parse an annotation written as a string (``"n"``, ``"f32[n, n]"``)."""
        try:
            return ast.parse(text.strip(), mode="eval").body
        except SyntaxError as e:
            raise self.error(f"invalid annotation string {text!r}", where) from e

    def collect_names(self, stmts: Sequence[ast.stmt]) -> None:
        """Find loop iterators and assigned scalars before translating, so a temporary
        may be read textually before it is assigned (in a later loop iteration)."""
        for s in stmts:
            if isinstance(s, ast.For):
                if isinstance(s.target, ast.Name):
                    reserved.check_name(s.target.id, "loop iterator", self.loc(s))
                    self.loop_names.add(s.target.id)
                self.collect_names(s.body)
            elif isinstance(s, ast.If):
                self.collect_names(s.body)
                self.collect_names(s.orelse)
            elif isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = s.targets if isinstance(s, ast.Assign) else [s.target]
                for t in targets:
                    if isinstance(t, ast.Name) and t.id not in self.signature:
                        reserved.check_name(t.id, "variable", self.loc(s))
                        self.temp_names.add(t.id)

    # ---- statements ----------------------------------------------------------------

    def block(self, stmts: Sequence[ast.stmt], top_level: bool = False) -> tuple[ir.Node, ...]:
        nodes: list[ir.Node] = []
        for k, s in enumerate(stmts):
            if isinstance(s, ast.For):
                nodes.append(self.for_loop(s))
            elif isinstance(s, ast.If):
                nodes.append(
                    ir.If(
                        self.cond(s.test, "if condition"),
                        self.block(s.body),
                        self.block(s.orelse),
                        self.loc(s),
                    )
                )
            elif isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                assign = self.assignment(s)
                if assign is not None:
                    nodes.append(assign)
            elif isinstance(s, ast.Pass):
                pass
            elif isinstance(s, ast.Expr):
                self.expression_statement(s)
            elif isinstance(s, ast.Return):
                if s.value is not None:
                    raise self.error(
                        "'return' with a value: a kernel returns its results in its arrays", s
                    )
                if not (top_level and k == len(stmts) - 1):
                    raise self.error("early 'return' is not supported (control flow must be "
                                     "affine); only a final bare 'return' is allowed", s)
            else:
                message = _STATEMENT_ERRORS.get(
                    type(s), f"'{type(s).__name__}' statement is not supported"
                )
                raise self.error(message, s)
        return tuple(nodes)

    def expression_statement(self, s: ast.Expr) -> None:
        """Docstrings, other string literals and ``...`` are no-ops; anything else is an
        error (a call would be run for its side effects)."""
        if isinstance(s.value, ast.Constant) and isinstance(s.value.value, (str, type(...))):
            return
        if isinstance(s.value, ast.Call):
            self.value(s.value)  # rejects calls that are not pure math functions
        raise self.error(f"expression statement '{ast.unparse(s.value)}' has no effect", s)

    def for_loop(self, s: ast.For) -> ir.For:
        if s.orelse:
            raise self.error("'for ... else' is not supported", s)
        if not isinstance(s.target, ast.Name):
            raise self.error(
                f"loop target '{ast.unparse(s.target)}' must be a single name", s.target
            )
        it = s.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name)
                and it.func.id == "range"):
            raise self.error(
                f"loop over '{ast.unparse(it)}': only 'for ... in range(...)' is supported", it
            )
        if it.keywords or not 1 <= len(it.args) <= 3:
            raise self.error("range() takes 1 to 3 positional arguments", it)
        name = s.target.id
        if name in self.iterators:
            raise self.error(f"loop iterator '{name}' reuses an enclosing loop's iterator", s)
        if name in self.signature:
            raise self.error(f"loop iterator '{name}' reuses the name of a parameter", s)

        bounds = [self.int_expr(a, "loop bound") for a in it.args[:2]]
        lower, upper = bounds if len(bounds) == 2 else (ir.IntConst(0), bounds[0])
        step = 1
        if len(it.args) == 3:
            step = self.constant_int(it.args[2])
            if step is None:
                raise self.error(
                    f"non-constant step '{ast.unparse(it.args[2])}' in range(): "
                    "the step must be an integer constant",
                    it.args[2],
                )
            if step == 0:
                raise self.error("range() step must not be zero", it.args[2])

        self.iterators.append(name)
        body = self.block(s.body)
        self.iterators.pop()
        cond = ir.Compare("<" if step > 0 else ">", ir.IntVar(name), upper)
        return ir.For(name, lower, cond, step, body, self.loc(s))

    @staticmethod
    def constant_int(node: ast.expr) -> int | None:
        """The value of an integer literal, possibly negated; None for anything else."""
        sign = 1
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            sign = -1 if isinstance(node.op, ast.USub) else 1
            node = node.operand
        if (isinstance(node, ast.Constant) and isinstance(node.value, int)
                and not isinstance(node.value, bool)):
            return sign * node.value
        return None

    def assignment(self, s: ast.Assign | ast.AugAssign | ast.AnnAssign) -> ir.Assign | None:
        if isinstance(s, ast.Assign):
            if len(s.targets) > 1:
                raise self.error("chained assignment 'a = b = ...' is not supported", s)
            target_node, op = s.targets[0], "="
        elif isinstance(s, ast.AugAssign):
            target_node, op = s.target, _AUG_OPS.get(type(s.op))
            if op is None:
                raise self.error(
                    f"augmented assignment '{_OP_TEXT.get(type(s.op), '?')}=' is not supported "
                    "(only =, +=, -=, *=, /=)",
                    s,
                )
        else:
            target_node, op = s.target, "="
            if not isinstance(target_node, ast.Name):
                raise self.error("only a scalar temporary may be annotated", s)
        target = self.target(target_node)
        if isinstance(s, ast.AnnAssign):
            self.declare_temporary(target_node.id, s)
            if s.value is None:
                return None
        value = self.value(s.value)
        if isinstance(target, ir.ScalarRef) and target.name not in self.annotated:
            self.infer_temporary(target.name, op, value, s)
        return ir.Assign(target, op, value, self.loc(s))

    def infer_temporary(self, name: str, op: str, value: ir.Expr, s: ast.stmt) -> None:
        """An unannotated temporary is an int32 while every value assigned to it is
        clearly an integer (``c = 0``, ``c += 1``), else a float64 (``s = 0``, ``s += x``)."""
        is_int = self.is_int_value(value) and op != "/="
        decl = self.temps.get(name)
        if decl is None:
            dtype = "int32" if is_int else "float64"
            self.temps[name] = ir.ScalarDecl(name, dtype, self.loc(s), "temporary")
        elif decl.dtype == "int32" and not is_int:
            self.temps[name] = ir.ScalarDecl(name, "float64", decl.loc, "temporary")

    def declare_temporary(self, name: str, s: ast.AnnAssign) -> None:
        annotation = s.annotation
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            annotation = self.parse_string(annotation.value, s)
        dtype = _SCALAR_TYPES.get(self.type_name(annotation) or "")
        if dtype is None:
            raise self.error(
                f"temporary '{name}': unsupported annotation '{ast.unparse(annotation)}' "
                "(expected int, float, f32, f64, i32 or i64)",
                s,
            )
        self.temps[name] = ir.ScalarDecl(name, dtype, self.loc(s), "temporary")
        self.annotated.add(name)

    def target(self, node: ast.expr) -> ir.ArrayRef | ir.ScalarRef:
        if isinstance(node, ast.Subscript):
            return self.array_ref(node)
        if isinstance(node, ast.Name):
            name = node.id
            if name in self.loop_names:
                raise self.error(f"assignment to loop iterator '{name}'", node)
            if name in self.arrays:
                raise self.error(
                    f"assignment to array '{name}' itself: assign its elements instead", node
                )
            if name in self.signature:
                raise self.error(
                    f"assignment to parameter '{name}': scalar parameters are read-only", node
                )
            return ir.ScalarRef(name, self.loc(node))
        if isinstance(node, (ast.Tuple, ast.List, ast.Starred)):
            raise self.error("tuple assignment is not supported: assign one target at a time",
                             node)
        if isinstance(node, ast.Attribute):
            raise self.error(
                f"attribute assignment '{ast.unparse(node)}' is not supported", node
            )
        raise self.error(f"cannot assign to {_describe(node)}", node)

    # ---- integer expressions and conditions ------------------------------------------

    def int_expr(self, node: ast.expr, ctx: str, at: ast.AST | None = None) -> ir.IntExpr:
        """Translate an integer expression over iterators and integer parameters.  ``ctx``
        names its role for messages; ``at`` overrides the node reported (for annotation
        strings, whose nodes carry no useful line)."""
        where = at or node

        def sub(n: ast.expr) -> ir.IntExpr:
            return self.int_expr(n, ctx, at)

        if isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, int) and not isinstance(value, bool):
                return ir.IntConst(value)
            if isinstance(value, float):
                raise self.error(f"float literal {value!r} in {ctx}: an integer is required",
                                 where)
            raise self.error(f"{_describe(node)} in {ctx} is not an integer", where)
        if isinstance(node, ast.Name):
            return ir.IntVar(self.int_name(node.id, ctx, where))
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Div):
                raise self.error(f"true division '/' in {ctx}: use '//' for integer division",
                                 where)
            op = _INT_BINOPS.get(type(node.op))
            if op is None:
                raise self.error(
                    f"operator '{_OP_TEXT.get(type(node.op), '?')}' in {ctx} is not supported",
                    where,
                )
            return ir.IntBinOp(op, sub(node.left), sub(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            arg = sub(node.operand)
            return ir.IntNeg(arg) if isinstance(node.op, ast.USub) else arg
        if isinstance(node, ast.IfExp):
            return ir.IntSelect(self.cond(node.test, ctx, at), sub(node.body), sub(node.orelse))
        if isinstance(node, ast.Call):
            return self.int_call(node, ctx, where, sub)
        if isinstance(node, ast.Subscript):
            array = self.subscript_base(node)
            if array in self.arrays:
                raise self.error(
                    f"{ctx} reads array '{array}': it must not depend on array data "
                    "(only on loop iterators and integer parameters)",
                    where,
                )
        raise self.error(f"{_describe(node)} in {ctx} is not supported", where)

    def comparison(self, op: ast.cmpop, ctx: str, where: ast.AST) -> str:
        sym = _CMP_OPS.get(type(op))
        if sym is None:  # 'is', 'in', ...
            text = {ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}[type(op)]
            raise self.error(f"comparison '{text}' in {ctx} is not supported", where)
        return sym

    def int_name(self, name: str, ctx: str, where: ast.AST) -> str:
        if name in self.iterators or name in self.int_params:
            return name
        if name in self.value_params:
            raise self.error(
                f"{self.value_params[name]} parameter '{name}' in {ctx}: only loop iterators "
                "and integer parameters are allowed",
                where,
            )
        if name in self.temp_names:
            raise self.error(
                f"scalar temporary '{name}' in {ctx}: only loop iterators and integer "
                "parameters are allowed (a temporary holds data)",
                where,
            )
        if name in self.arrays:
            raise self.error(f"array '{name}' used as an integer in {ctx}", where)
        if name in self.loop_names:
            raise self.error(f"loop iterator '{name}' used outside its loop", where)
        if name in self.param_names:  # an argument declared after the one being declared
            raise self.error(f"{ctx} uses '{name}', which is not an earlier int parameter",
                             where)
        raise self.error(f"unknown name '{name}' in {ctx}", where)

    def int_call(self, node: ast.Call, ctx: str, where: ast.AST,
                 sub: Callable[[ast.expr], ir.IntExpr]) -> ir.IntExpr:
        func = ast.unparse(node.func)
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise self.error(f"call to '{func}' in {ctx}: keyword or starred arguments", where)
        if func in ("min", "max"):
            if len(node.args) < 2:
                raise self.error(f"{func}() in {ctx} needs at least two arguments", where)
            return ir.IntMinMax(func, tuple(sub(a) for a in node.args))
        if func == "abs":
            if len(node.args) != 1:
                raise self.error(f"abs() in {ctx} takes one argument", where)
            arg = sub(node.args[0])
            return ir.IntMinMax("max", (arg, ir.IntNeg(arg)))
        if self.pure_function(node) is not None:
            raise self.error(
                f"call to '{func}' in {ctx}: only min, max and abs are allowed here", where
            )
        raise self.error(
            f"call to '{func}': only pure math functions are allowed (a call may have side "
            "effects)",
            where,
        )

    def cond(self, node: ast.expr, ctx: str, at: ast.AST | None = None) -> ir.Cond:
        """Translate an affine condition (a loop or ``if`` guard)."""
        where = at or node
        if isinstance(node, ast.Compare):  # a chain 0 <= i < n is a conjunction
            ops = [self.comparison(op, ctx, where) for op in node.ops]
            operands = [self.int_expr(n, ctx, at) for n in (node.left, *node.comparators)]
            pairs = zip(ops, itertools.pairwise(operands), strict=True)
            parts = [ir.Compare(op, lhs, rhs) for op, (lhs, rhs) in pairs]
            return parts[0] if len(parts) == 1 else ir.BoolOp("and", tuple(parts))
        if isinstance(node, ast.BoolOp):
            op = "and" if isinstance(node.op, ast.And) else "or"
            return ir.BoolOp(op, tuple(self.cond(v, ctx, at) for v in node.values))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return ir.Not(self.cond(node.operand, ctx, at))
        if isinstance(node, ast.Constant) and isinstance(node.value, bool):
            return ir.BoolConst(node.value)
        # Python truthiness of an integer: ``if n % 2:``.
        return ir.Compare("!=", self.int_expr(node, ctx, at), ir.IntConst(0))

    # ---- value expressions -------------------------------------------------------------

    def value(self, node: ast.expr) -> ir.Expr:
        """Translate a right-hand side: any arithmetic on data, but no side effects."""
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, bool):
                return ir.Const(int(v), "int")
            if isinstance(v, int):
                return ir.Const(v, "int")
            if isinstance(v, float):
                return ir.Const(v, "float64")
            raise self.error(f"{_describe(node)} in an expression is not supported", node)
        if isinstance(node, ast.Name):
            return self.value_name(node)
        if isinstance(node, ast.Subscript):
            return self.array_ref(node)
        if isinstance(node, ast.BinOp):
            lhs, rhs = self.value(node.left), self.value(node.right)
            if isinstance(node.op, ast.Pow):
                return ir.Call("pow", (lhs, rhs))
            op = _VALUE_BINOPS.get(type(node.op))
            if op is None:
                raise self.error(
                    f"operator '{_OP_TEXT.get(type(node.op), '?')}' is not supported", node
                )
            if op == "/" and self.is_int_value(lhs) and self.is_int_value(rhs):
                lhs = self.as_float(lhs)
            return ir.BinOp(op, lhs, rhs)
        if isinstance(node, ast.UnaryOp):
            arg = self.value(node.operand)
            if isinstance(node.op, ast.Not):
                return ir.ValueLogical("not", (arg,))
            if isinstance(node.op, ast.USub):
                return ir.UnaryOp("-", arg)
            if isinstance(node.op, ast.UAdd):
                return ir.UnaryOp("+", arg)
            raise self.error("operator '~' is not supported", node)
        if isinstance(node, ast.Compare):
            ops = [self.comparison(op, "an expression", node) for op in node.ops]
            operands = [self.value(n) for n in (node.left, *node.comparators)]
            pairs = zip(ops, itertools.pairwise(operands), strict=True)
            parts = [ir.ValueCompare(op, lhs, rhs) for op, (lhs, rhs) in pairs]
            return parts[0] if len(parts) == 1 else ir.ValueLogical("and", tuple(parts))
        if isinstance(node, ast.BoolOp):
            op = "and" if isinstance(node.op, ast.And) else "or"
            return ir.ValueLogical(op, tuple(self.value(v) for v in node.values))
        if isinstance(node, ast.IfExp):
            return ir.Select(self.value(node.test), self.value(node.body), self.value(node.orelse))
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.Attribute):
            if (isinstance(node.value, ast.Name) and node.value.id in self.modules
                    and node.attr in _MODULE_CONSTANTS):
                return ir.Const(_MODULE_CONSTANTS[node.attr], "float64")
            raise self.error(f"attribute '{ast.unparse(node)}' is not supported", node)
        raise self.error(f"{_describe(node)} in an expression is not supported", node)

    @staticmethod
    def as_float(e: ir.Expr) -> ir.Expr:
        """Make an integer operand of Python's ``/`` a float: in the IR (as in C) ``/`` on
        two integers truncates, while Python's ``i / 2`` is true division."""
        if isinstance(e, ir.Const):
            return ir.Const(float(e.value), "float64")
        return ir.BinOp("*", ir.Const(1.0, "float64"), e)

    def value_name(self, node: ast.Name) -> ir.Expr:
        name = node.id
        if name in self.iterators or name in self.int_params:
            return ir.IntValue(ir.IntVar(name))
        if name in self.value_params or name in self.temp_names:
            return ir.ScalarRef(name, self.loc(node))
        if name in self.arrays:
            raise self.error(f"array '{name}' used without subscripts", node)
        if name in self.loop_names:
            raise self.error(f"loop iterator '{name}' used outside its loop", node)
        raise self.error(f"unknown name '{name}'", node)

    def call(self, node: ast.Call) -> ir.Expr:
        func = ast.unparse(node.func)
        canonical = self.pure_function(node)
        if canonical is None and func.startswith("math.") and func[5:] in ir.PURE_FUNCTIONS:
            raise self.error(
                f"call to '{func}': Python's math module has no {func[5:]} (C has it); "
                "use min/max or numpy.fmin/numpy.fmax", node)
        if canonical is None and self.type_name(node.func) == "local":
            raise self.error("local arrays are declared at the top level of the function "
                             "body: NAME = local(f32[extents])", node)
        if canonical is None:
            raise self.error(
                f"call to '{func}': only pure math functions are allowed (a call may have "
                "side effects)",
                node,
            )
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise self.error(f"call to '{func}': keyword or starred arguments", node)
        args = tuple(self.value(a) for a in node.args)
        if canonical in ("min", "max"):
            if len(args) < 2:
                raise self.error(f"{func}() needs at least two arguments", node)
            if all(map(self.is_int_value, args)):
                return ir.Call(canonical, args)
            # C's fmin/fmax are binary: fold min(a, b, c) into fmin(fmin(a, b), c).
            return functools.reduce(lambda a, b: ir.Call("f" + canonical, (a, b)), args)
        if canonical == "abs":
            canonical = "abs" if len(args) == 1 and self.is_int_value(args[0]) else "fabs"
        arity = _ARITY.get(canonical, 1)
        if len(args) != arity:
            raise self.error(f"{func}() takes {arity} argument{'s' * (arity > 1)} here", node)
        return ir.Call(canonical, args)

    def pure_function(self, node: ast.Call) -> str | None:
        """The canonical C name of a call's function if it is a known pure function
        (``min``, ``max``, ``abs``, ``math.*``, ``numpy.*``), else None."""
        f = node.func
        if isinstance(f, ast.Name):
            if f.id in self.imported_functions:
                module, name = self.imported_functions[f.id]
                return _MODULE_FUNCTIONS[module].get(name)
            return f.id if f.id in ("min", "max", "abs") else None
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            module = self.modules.get(f.value.id)
            if module is not None:
                return _MODULE_FUNCTIONS[module].get(f.attr)
        return None

    def is_int_value(self, e: ir.Expr) -> bool:
        """Whether a value is clearly an integer (decides a temporary's type and the
        integer forms of min/max/abs)."""
        if isinstance(e, ir.Const):
            return e.dtype == "int"
        if isinstance(e, (ir.IntValue, ir.ValueCompare, ir.ValueLogical)):
            return True
        if isinstance(e, ir.ScalarRef):
            decl = self.temps.get(e.name)
            return decl is not None and decl.dtype in _INT_DTYPES
        if isinstance(e, ir.ArrayRef):
            return self.arrays[e.array].dtype in _INT_DTYPES
        if isinstance(e, ir.UnaryOp):
            return self.is_int_value(e.arg)
        if isinstance(e, ir.BinOp):
            return e.op != "/" and self.is_int_value(e.lhs) and self.is_int_value(e.rhs)
        if isinstance(e, ir.Select):
            return self.is_int_value(e.then) and self.is_int_value(e.else_)
        if isinstance(e, ir.Call):
            return e.func in ("min", "max", "abs")
        return False

    # ---- array references ------------------------------------------------------------

    @staticmethod
    def subscript_base(node: ast.Subscript) -> str | None:
        base: ast.expr = node
        while isinstance(base, ast.Subscript):
            base = base.value
        return base.id if isinstance(base, ast.Name) else None

    def array_ref(self, node: ast.Subscript) -> ir.ArrayRef:
        """``a[i][j]`` and ``a[i, j]`` (or a mix) are the same reference."""
        indices: list[ast.expr] = []
        base: ast.expr = node
        while isinstance(base, ast.Subscript):
            sl = base.slice
            indices[:0] = sl.elts if isinstance(sl, ast.Tuple) else [sl]
            base = base.value
        if not isinstance(base, ast.Name):
            raise self.error(f"subscript of '{ast.unparse(base)}': only arrays may be indexed",
                             node)
        name = base.id
        if name not in self.arrays:
            if name in self.signature or name in self.temp_names or name in self.loop_names:
                raise self.error(f"'{name}' is not an array", node)
            raise self.error(f"unknown array '{name}'", node)
        for index in indices:
            if isinstance(index, ast.Slice):
                raise self.error(
                    f"slicing '{ast.unparse(node)}' is not supported: index one element", node
                )
        rank = len(self.arrays[name].shape)
        if len(indices) != rank:
            raise self.error(
                f"array '{name}' has {rank} dimension{'s' * (rank > 1)} but "
                f"{len(indices)} subscript{'s' * (len(indices) > 1)}",
                node,
            )
        ctx = f"subscript of '{name}'"
        return ir.ArrayRef(name, tuple(self.int_expr(i, ctx) for i in indices), self.loc(node))
