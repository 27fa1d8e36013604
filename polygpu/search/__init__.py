"""The empirical search (paper §6): space, pruning, runners, tuning database, report.

``space`` enumerates variants; ``tuner.tune`` compiles, prunes (traffic, occupancy from
``occupancy``), and measures through a ``runner`` (child processes on the GPU or the
emulator, or recorded measurements), recording each result in ``database``; ``metrics``,
``peers`` and ``summary`` read the times against the roofline and cuBLAS; ``report`` and
``tune_cli`` present them.  See docs/search.md."""
