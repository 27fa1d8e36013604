"""What ``polygpu compile`` writes: ``FUNCTION.cu`` and ``FUNCTION.json``.

Files appear whole or not at all: each is written to a temporary file in the output
directory and renamed into place only after both are complete.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from polygpu import __version__
from polygpu.errors import PolygpuError
from polygpu.pipeline import Compiled


def compile_json(c: Compiled, params: dict[str, int]) -> dict[str, Any]:
    scop = c.analysis.scop
    unknown = set(params) - set(scop.parameters)
    if unknown:
        raise PolygpuError(f"-p: {', '.join(sorted(unknown))} is not an integer parameter "
                           f"of {scop.function} (parameters: {', '.join(scop.parameters)})")
    return {
        "polygpu": __version__,
        "function": scop.function,
        "source": c.spec,
        "parameters": {name: params.get(name) for name in scop.parameters},
        "variant": c.variant.to_json(),
        # the sizes the kernels were generated for (empty: any); they run only at those
        "specialized": dict(c.program.specialized),
        "arguments": [
            {"name": a.name, "kind": a.kind, "dtype": a.dtype, "shape": list(a.shape)}
            for a in c.program.arguments
        ],
        # the plan: every kernel with its statements, its own variant and tiled schedule;
        # `launches` is what the runtime launches (one per kernel, or with device steps
        # one block running them all); `launch_count` their number per run at -p sizes
        "kernels": [_kernel_json(c, k) for k in c.kernels],
        "launches": [
            {"kernel": launch.kernel, "grid": list(launch.grid), "block": list(launch.block)}
            for launch in c.program.launches
        ],
        "device_steps": c.variant.device_steps,
        # device steps: per launch, the arrays the block keeps in shared memory for its
        # life, and those it leaves in global memory with the reason
        # (memory/residence.py); null when not resident
        "resident": [r.to_json() for r in c.residences] if c.residences else None,
        "launch_count": launch_count(c, params),
        # temporaries expanded into scratch copies before scheduling (or refused, why)
        "expansion": c.expansion.to_json() if c.expansion is not None else [],
        # statements split where a read meets their own write (or refused, why), only
        # tried where the scheduler found nothing but the one-thread plan
        "split": c.splitting.to_json() if c.splitting is not None else [],
        # reads that see only entry values, redirected to a copy taken first (or
        # refused, why), kept only where the scheduler then finds more parallel loops
        "snapshot": c.snapshot.to_json() if c.snapshot is not None else [],
        # a relayout variant: the interleaved arrays relaid element-outermost, and the
        # transposing copies in and out (transform/layout.py); null for another
        "relayout": c.relayout.to_json() if c.relayout is not None else None,
        # host loops: the kernels take these integer arguments last and run at every
        # step of `host_steps` (isl set per kernel name), steps in lexicographic order
        "host": {
            "iterators": list(c.program.host_iterators),
            "steps": c.program.host_steps,
            "schedule": str(c.transformation.host.schedule),
        } if c.transformation.host is not None else None,
        "schedule": {
            "origin": c.transformation.origin,
            "candidates": len(c.candidates),
            "kernels": [
                {"statements": list(k.statements), "space": str(k.space), "time": str(k.time)}
                for k in c.transformation.kernels
            ],
        },
        "placement": [
            {"statement": p.statement, "ref": p.ref, "array": p.array, "access": p.access,
             "kind": p.kind, "placement": p.placement, "candidate": p.candidate,
             **({"reason": p.reason} if p.reason else {})}
            for p in c.placement
        ],
        "memory": {
            "buffers": [b.to_json() for b in c.memory.buffers],
            "constants": list(c.memory.constants),
            "shared_bytes": [c.memory.shared_bytes(k.index) for k in c.kernels],
        },
    }


def launch_count(c: Compiled, params: dict[str, int]) -> int | None:
    """Kernel launches per run at ``params`` (None unless every parameter is given)."""
    scop = c.analysis.scop
    if any(p not in params for p in scop.parameters):
        return None
    return len(c.program.steps({p: params[p] for p in scop.parameters}))


def _kernel_json(c: Compiled, kernel) -> dict[str, Any]:
    name = f"{c.analysis.scop.function}_kernel{kernel.index}"
    launch = next((x for x in c.program.launches if x.kernel == name), None)
    return {
        "name": name,
        "statements": list(kernel.statements),
        **({"grid": list(launch.grid), "block": list(launch.block)} if launch else
           {"threads": list(kernel.threads), "runs_in": c.program.launches[0].kernel}),
        "variant": c.built.for_kernel(kernel.index).to_json(),
        "schedule": str(kernel.schedule),
    }


def require_writable_dir(path: str | os.PathLike, what: str) -> None:
    """Refuse (``PolygpuError``, before any work) a directory that cannot be created or
    written: an existing file in the way, a missing or read-only parent.  Nothing is left
    behind: the probe file is removed and no directory is created."""
    directory = Path(path)
    if directory.exists() and not directory.is_dir():
        raise PolygpuError(f"{path}: the {what} is a file, not a directory")
    existing = directory
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        raise PolygpuError(f"{path}: cannot create the {what}: {existing} is not a "
                           "directory")
    _probe(existing, path, f"cannot {'write to' if existing == directory else 'create'} "
           f"the {what}")


def require_writable_file(path: str | os.PathLike, what: str) -> None:
    """Like :func:`require_writable_dir` for a file to be created or updated in place."""
    file = Path(path)
    if file.is_dir():
        raise PolygpuError(f"{path}: the {what} is a directory, not a file")
    if file.exists():
        try:
            with open(file, "ab"):
                pass
        except OSError as err:
            raise PolygpuError(f"{path}: cannot write the {what} ({err.strerror})") from None
    parent = file.parent
    while not parent.exists() and parent.parent != parent:
        parent = parent.parent
    if not parent.is_dir():
        raise PolygpuError(f"{path}: cannot create the {what}: {parent} is not a directory")
    _probe(parent, path, f"cannot {'write' if file.exists() else 'create'} the {what}")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _probe(directory: Path, path, message: str) -> None:
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".polygpu-probe-")
    except OSError as err:
        raise PolygpuError(f"{path}: {message} ({err.strerror or err})") from None
    os.close(fd)
    os.unlink(tmp)


def write_outputs(outdir: str, c: Compiled, description: dict[str, Any]) -> list[Path]:
    directory = Path(outdir)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise PolygpuError(f"{outdir}: cannot create the output directory ({err.strerror})"
                           ) from None
    contents = {
        directory / f"{c.program.function}.cu": c.program.source,
        directory / f"{c.program.function}.json": json.dumps(description, indent=2) + "\n",
    }
    staged = []
    try:
        for path, text in contents.items():
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.")
            staged.append((tmp, path))
            os.fchmod(fd, 0o666 & ~_umask())  # what open() would give, not mkstemp's 0600
            with os.fdopen(fd, "w") as f:
                f.write(text)
        for tmp, path in staged:
            os.replace(tmp, path)
    except OSError as err:
        for tmp, _ in staged:
            if os.path.exists(tmp):
                os.unlink(tmp)
        raise PolygpuError(f"{outdir}: cannot write the output ({err.strerror})") from None
    return list(contents)
