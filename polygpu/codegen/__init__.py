"""Code generation: a tiled, thread-mapped schedule -> isl AST -> CUDA C text (via cgen),
plus the launch plan the runtimes follow."""
