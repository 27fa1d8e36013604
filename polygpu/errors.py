"""User-facing errors.

Every problem with the user's input is reported as a :class:`PolygpuError` that
knows *what* and, whenever the problem has a place in a file, *where* (file and
line); the CLI prints it as one line ``FILE:LINE: message`` (``FILE: message`` for
a file that cannot be read at all) and exits with status 2.  A message of several
lines (a compiler's diagnostic after its first line) is printed whole.  Anything else escaping
is a bug in polygpu and is reported as an internal error.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SourceLoc:
    """A position in the user's source file (1-based line)."""

    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


class PolygpuError(Exception):
    """An error in the user's input, with its location when known."""

    def __init__(self, message: str, loc: SourceLoc | None = None):
        super().__init__(message)
        self.message = message
        self.loc = loc

    def __str__(self) -> str:
        return f"{self.loc}: {self.message}" if self.loc else self.message


class UnsupportedError(PolygpuError):
    """The input is valid C/Python but lies outside the affine language polygpu accepts."""
