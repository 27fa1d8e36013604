"""Memory placement (paper §4.4-§5): where each reference's data lives.  So far: the
shared-memory padding solver (Algorithm 2) and the traffic model (§4.6)."""
