"""``NAME=VALUE`` text to parameter values: the one rule for every command line.

It lives below both :mod:`polygpu.cli` and :mod:`polygpu.search` (``python -m
polygpu.search.peers``, the tuning scripts) so that each can read ``-p`` the same way
without the search importing the CLI.  Whether the function takes a parameter, and of
which type, is checked later against the function (:mod:`polygpu.runtime.inputs`).
"""

from __future__ import annotations

from polygpu.errors import PolygpuError


def parse_params(items: list[str], option: str = "-p", integers: bool = False
                 ) -> dict[str, int | float]:
    """``NAME=VALUE`` items: an integer value stays an int, any other number a float;
    ``integers``: integers only (the tuning database's keys).  A malformed item is a
    :class:`PolygpuError` that names ``option`` and shows an example."""
    params: dict[str, int | float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if integers:
            try:
                if not sep or not name.isidentifier():
                    raise ValueError
                params[name] = int(value)
            except ValueError:
                raise PolygpuError(f"{option} {item}: expected NAME=INTEGER, e.g. "
                                   f"{option} n=4096") from None
            continue
        if not sep or not name.isidentifier():
            raise PolygpuError(f"{option} {item}: expected NAME=VALUE, e.g. {option} n=4096")
        try:
            params[name] = int(value)
        except ValueError:
            try:
                params[name] = float(value)
            except ValueError:
                raise PolygpuError(f"{option} {item}: {value!r} is not a number (expected "
                                   f"NAME=VALUE, e.g. {option} n=4096 or {option} alpha=1.5)"
                                   ) from None
    return params
