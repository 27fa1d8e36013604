"""The empirical search (paper §6): space, pruning, runners, tuning database, report.

``space`` enumerates variants; ``tuner.tune`` compiles them and hands them to a strategy
of ``strategies`` (pruning rules in ``pruning``, registers from a ``resources`` oracle,
the order from ``cost``), then measures through a ``runner`` (child processes on the GPU
or the emulator, or recorded measurements), recording each result in ``database``;
``metrics``, ``peers`` and ``summary`` read the times against the roofline and cuBLAS;
``report`` presents them.  The command line (``polygpu.cli``) imports this package,
never the reverse.  See docs/search.md."""
