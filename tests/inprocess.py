"""``polygpu ARGS`` run in this process: what a subprocess would print and return, without
the start-up of a fresh interpreter (islpy, numpy, rich and the model imported again).

Only for what happens inside :func:`polygpu.cli.main`; the entry point itself (``python
-m polygpu``, the console script, closed pipes) keeps real subprocess tests."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def _environment(env: dict[str, str]):
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def polygpu(*args: str, env: dict[str, str] | None = None, **_ignored
            ) -> subprocess.CompletedProcess:
    """``main(args)`` from the repository root with ``env`` added to the environment,
    stdout and stderr captured, as a CompletedProcess; argparse's own exits (usage
    errors, ``--help``) become their status, as they would in a process."""
    from polygpu.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(ROOT), _environment(env or {}), \
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(list(args))
        except SystemExit as exit_:
            code = exit_.code
            status = code if isinstance(code, int) else (0 if code is None else 1)
    return subprocess.CompletedProcess(["polygpu", *args], status, out.getvalue(),
                                       err.getvalue())
