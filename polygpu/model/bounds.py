"""Do the accesses stay inside the declared arrays?

An access outside its array's extent is undefined behaviour in the user's C and an
``IndexError`` (or a silent wrap-around for negative indices) in Python; the generated
CUDA would read or write someone else's memory.  polygpu therefore proves, exactly and
symbolically with isl (no point is ever enumerated, so ``n = 2000000000`` costs what
``n = 7`` costs), that every access -- read and write -- satisfies
``0 <= subscript < extent`` in every dimension.

**The rule.**  For one access, let *runs* be the parameter values (allowed by the
context, and equal to the given values where some are given) at which the access
executes at least once, and *out* those at which some instance of it falls outside the
array.

- ``out`` empty: the access is proven inside.
- ``runs`` contained in ``out``: the access leaves its array **every time it runs**:
  an error (:func:`require_in_bounds`).  With every parameter given (``compile -p``,
  ``check``, ``tune``, the Python API at the sizes of a call) this is simply "outside at
  these sizes" -- ``float a[10]`` under ``for (i = 0; i < n; i++)`` is an error at
  ``n = 11``, fine at ``n = 10``.  Without values it catches what no call can survive:
  ``a[i - 1]`` at ``i = 0``, ``a[i + 1]`` for ``i < n`` on ``a[n]``, Python's ``a[-1]``
  (kept as index -1: polygpu does not wrap negative indices), ``range(n, 0, -1)``
  writing ``a[n]``.
- otherwise (outside only for some parameter values): a *warning*
  (:func:`check_bounds`, shown by ``analyze``).  The input language cannot state
  relations between parameters (``m <= n``) that would make such an access safe, so
  refusing it would refuse correct programs; the sizes of an actual call are then
  checked when they are known.

``check_bounds`` is what ``analyze`` reports (every access that may leave its array,
the certain ones included, as warnings: ``analyze`` explains rather than refuses);
``require_in_bounds`` is what ``compile``, ``check``, ``tune`` and the runtime call.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial

import islpy as isl

from polygpu.errors import PolygpuError, SourceLoc
from polygpu.model.scop import Access, Scop, fix_parameters


@dataclass(frozen=True)
class BoundsWarning:
    statement: str
    ref: int
    array: str
    text: str  # the reference as written
    example: str  # an isl point: parameter values and an instance that is outside
    loc: SourceLoc
    at: str = ""  # the same in words: "n = 1, i = 0 it reads a[1]"
    always: bool = False  # outside every time it runs (compile refuses it)

    def __str__(self) -> str:
        where = f": at {self.at}" if self.at else f" (for example at {self.example})"
        tail = ("; it does for every parameter value where it runs, so compile and "
                "check refuse it") if self.always else ""
        return (f"{self.loc}: warning: {self.text} may access outside array "
                f"'{self.array}'{where}{tail}")


@dataclass(frozen=True)
class _Finding:
    """One access that may leave its array, under some fixed parameter values."""

    access: Access
    always: bool  # outside for every (remaining) parameter value where it runs
    values: dict[str, int]  # an offending parameter point ...
    iteration: dict[str, int]  # ... and iteration
    element: tuple[int, ...]  # the element it touches there
    example: str  # the same as an isl point


def check_bounds(scop: Scop) -> tuple[BoundsWarning, ...]:
    """Every access that may leave its array for some parameter value the context
    allows, as warnings (``analyze``); ``always`` marks those that do every time."""
    return tuple(_warning(scop, f) for f in _findings(scop, {}))


def require_in_bounds(scop: Scop, params: Mapping[str, int] | None = None
                      ) -> tuple[BoundsWarning, ...]:
    """Raise :class:`PolygpuError` at the first access of ``scop`` that leaves its array.

    ``params`` maps parameter names to the sizes of a call (names that are not
    parameters of the region are ignored; missing ones stay symbolic).  With every
    parameter given, any access outside at those sizes is an error; for the parameters
    left free, only an access outside for *every* value at which it runs is (see the
    module doc).  Returns the remaining warnings: accesses that leave their array for
    some values of the free parameters only (none when every parameter is given).

    Cheap to call at every kernel launch: the answer is cached per region object and
    parameter values (the proof itself is symbolic, independent of the sizes).
    The runtime calls it with the integer arguments of each launch.
    """
    fixed = {p: int(params[p]) for p in scop.parameters if params and p in params}
    key = tuple(sorted(fixed.items()))
    ident = id(scop)
    entry = _CACHE.get(ident)
    if entry is None or entry[0]() is not scop:
        entry = (weakref.ref(scop, partial(_forget, ident)), {})
        _CACHE[ident] = entry
    results = entry[1]
    if key not in results:
        if len(results) >= _SIZES_KEPT:  # a kernel called at ever new sizes: oldest out
            results.pop(next(iter(results)), None)
        findings = _findings(scop, fixed)
        error = next((f for f in findings if f.always), None)
        results[key] = (("error", _message(scop, error, fixed), error.access.loc)
                        if error is not None else
                        ("ok", tuple(_warning(scop, f) for f in findings)))
    result = results[key]
    if result[0] == "error":
        raise PolygpuError(result[1], result[2])
    return result[1]


# id(scop) -> (weak reference to the scop,
#              {parameter values: ('error', message, loc) | ('ok', warnings)})
_CACHE: dict[int, tuple[weakref.ref, dict]] = {}
_SIZES_KEPT = 256  # answers kept per region


def _forget(ident: int, _ref: weakref.ref) -> None:
    """The region is gone (a later object may get its id): drop its answers."""
    _CACHE.pop(ident, None)


def _findings(scop: Scop, fixed: Mapping[str, int]) -> list[_Finding]:
    context = fix_parameters(scop.context, fixed)
    found = []
    for acc in scop.accesses:
        array = scop.array(acc.array)
        if array.rank == 0:
            continue
        relation = acc.relation.intersect_params(context)
        outside = relation.subtract_range(array.extent.intersect_params(context))
        if outside.is_empty():
            continue
        runs = relation.domain().params()
        always = runs.is_subset(outside.domain().params())
        stmt = scop.statement(acc.statement)
        values, iteration, element, example = _example(outside, stmt.iterators)
        found.append(_Finding(acc, always, values, iteration, element, example))
    return found


def _example(outside: isl.Map, iterators: tuple[str, ...]
             ) -> tuple[dict[str, int], dict[str, int], tuple[int, ...], str]:
    """The smallest offending point (parameters first, then the iteration) where isl
    can find one, else any; symbolic, whatever the sizes."""
    domain = outside.domain()
    n_param = domain.dim(isl.dim_type.param)
    names = [domain.get_dim_name(isl.dim_type.param, k) for k in range(n_param)]
    flat = domain.move_dims(isl.dim_type.set, 0, isl.dim_type.param, 0, n_param)
    try:
        point = flat.lexmin().sample_point()
    except isl.Error:  # unbounded below (a parameter in no extent): any point will do
        point = flat.sample_point()
    coords = [int(point.get_coordinate_val(isl.dim_type.set, k).to_python())
              for k in range(flat.dim(isl.dim_type.set))]
    values = dict(zip(names, coords[:n_param], strict=True))
    iteration = dict(zip(iterators, coords[n_param:], strict=True))
    at = outside
    for k, v in enumerate(coords[:n_param]):
        at = at.fix_val(isl.dim_type.param, k, isl.Val(str(v)))
    for k, v in enumerate(coords[n_param:]):
        at = at.fix_val(isl.dim_type.in_, k, isl.Val(str(v)))
    target = at.range().lexmin().sample_point()
    element = tuple(int(target.get_coordinate_val(isl.dim_type.set, k).to_python())
                    for k in range(at.dim(isl.dim_type.out)))
    params = ", ".join(f"{k} = {v}" for k, v in values.items())
    instance = ", ".join(str(v) for v in iteration.values())
    example = f"[{params}] -> {{ {outside.get_tuple_name(isl.dim_type.in_)}[{instance}] }}"
    return values, iteration, element, example


def _where(f: _Finding) -> str:
    """``n = 37, i = 0 it reads a[-1]``"""
    point = ", ".join(f"{k} = {v}" for k, v in {**f.values, **f.iteration}.items())
    verb = "reads" if f.access.kind == "read" else "writes"
    element = f.access.array + "".join(f"[{v}]" for v in f.element)
    return f"{point} it {verb} {element}" if point else f"it {verb} {element}"


def _warning(scop: Scop, f: _Finding) -> BoundsWarning:
    acc = f.access
    return BoundsWarning(acc.statement, acc.ref, acc.array, acc.text, f.example, acc.loc,
                         _where(f), f.always)


def _message(scop: Scop, f: _Finding, fixed: Mapping[str, int]) -> str:
    acc = f.access
    array = scop.array(acc.array)
    verb = "reads" if acc.kind == "read" else "writes"
    text = acc.array + "".join(f"[{_unparen(str(s))}]" for s in acc.subscripts)
    extent = "".join(f"[{s}]" for s in array.shape_text)
    message = (f"{text} {verb} outside array '{acc.array}' (extent {extent}): "
               f"at {_where(f)}")
    free = [p for p in scop.parameters if p not in fixed]
    if free and f.values:
        message += f", and it does for every {', '.join(free)} where it runs"
    negative = [k for k, v in enumerate(f.element) if v < 0]
    if scop.language == "python" and negative:
        k = negative[0]
        message += (" (Python's negative indices do not wrap around here: index "
                    f"{f.element[k]} means position {f.element[k]}, not "
                    f"{_unparen(array.shape_text[k])} - {-f.element[k]})")
    return message


def _unparen(text: str) -> str:
    """``(i - 1)`` -> ``i - 1`` when the outer parentheses enclose the whole text."""
    if not (text.startswith("(") and text.endswith(")")):
        return text
    depth = 0
    for k, c in enumerate(text):
        depth += {"(": 1, ")": -1}.get(c, 0)
        if depth == 0 and k < len(text) - 1:
            return text
    return text[1:-1]
