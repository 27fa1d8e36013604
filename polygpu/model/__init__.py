"""The polyhedral model: isl domains, schedules and accesses of a region, its exact
dependences, reductions, loop parallelism and per-reference reuse (paper §4.1)."""
