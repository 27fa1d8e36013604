"""One compile of each variant per test module: searches in a module differ in what
they do with the compiled programs, not in the programs, and the compile (isl, code
generation, traffic) is most of their time.  The first search compiles for real."""

from __future__ import annotations

from polygpu.search import tuner
from polygpu.search.measurement import canonical


def cached_compile_all():
    """A stand-in for ``tuner._compile_all`` that compiles each key once."""
    real, done = tuner._compile_all, {}

    def cached(spec, function, options, variants, params, mode="program"):
        modes = [mode] * len(variants) if isinstance(mode, str) else list(mode)
        keys = [(spec, function, canonical(v.to_json()), tuple(sorted(params.items())),
                 repr(options.check_params), options.defines, options.include_dirs, m)
                for v, m in zip(variants, modes, strict=True)]
        missing = {k: v for k, v in zip(keys, variants, strict=True) if k not in done}
        if missing:
            found = real(spec, function, options, list(missing.values()), params,
                         [k[-1] for k in missing])
            done.update(zip(missing, found, strict=True))
        return [done[k] for k in keys]

    return cached
