"""Frontends: turn a user's loop nest (C ``#pragma scop`` or Python ``@affine``) into the
loop-tree IR of :mod:`polygpu.frontend.ir`."""

from __future__ import annotations

from collections.abc import Sequence

from polygpu.errors import PolygpuError
from polygpu.frontend.ir import Program


def load(
    spec: str,
    function: str | None = None,
    defines: Sequence[str] = (),
    include_dirs: Sequence[str] = (),
) -> Program:
    """Read ``spec`` -- ``file.c[:function]`` or ``module.py:function`` -- into a
    :class:`Program`.

    ``function`` picks the function when the spec has no ``:function`` suffix (needed
    for a C file with several regions); a suffix and a different ``function`` conflict.
    """
    head, sep, tail = spec.rpartition(":")
    if sep and head.endswith((".py", ".c")):
        if function and function != tail:
            raise PolygpuError(f"{spec}: the function is named twice ({tail} and {function})")
        path, name = head, tail
    else:
        path, name = spec, function
    if path.endswith(".py"):
        from polygpu.frontend.python_frontend import parse_python_function

        if not name:
            raise PolygpuError(f"{spec}: name the Python function as {spec}:FUNCTION")
        return parse_python_function(path, name)
    if path.endswith(".c"):
        from polygpu.frontend.c_frontend import parse_c_file

        return parse_c_file(path, name, defines=defines, include_dirs=include_dirs)
    raise PolygpuError(f"{spec}: unknown input kind (expected FILE.c or MODULE.py:FUNCTION)")
