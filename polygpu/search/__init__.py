"""The empirical search (paper §6): what prunes variants before they are timed.  So far:
``occupancy.py``, resident warps per SM from nvcc's resource report."""
