"""Runtimes: execute a generated :class:`~polygpu.codegen.program.KernelProgram` and check
it against the user's original function.

One module per idea:

* ``cuda_emulation.h`` -- lets CUDA kernel text compile as C++20 and run on the host;
* ``cpu`` -- compiles a program with that header and runs it through ctypes;
* ``gpu`` -- runs and times it on a real GPU through PyCUDA (imported lazily);
* ``grid`` -- the launch-grid expression language both backends accept;
* ``arguments`` -- binds and checks concrete argument values;
* ``compiler`` -- compiles once into a content-hashed cache;
* ``reference`` -- the sequential reference (the original C or Python function);
* ``inputs`` -- parameters, shapes and random inputs for a run;
* ``footprint`` -- the elements a region writes, and those it writes before reading (isl);
* ``check`` -- ``check_program``: kernel vs reference on poisoned random inputs.
"""
