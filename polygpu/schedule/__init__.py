"""Scheduling: legal GPU transformations (time schedule, space partition) for a model,
found by the paper's Algorithm 1 (adjacency constraints) or isl's scheduler, and proven
legal with isl (paper §4.2-§4.3)."""
