"""The device layer (polygpu/runtime/device.py): one launch path for check, the tuner's
child and the API.

* The API on the CPU emulator against the sequential reference, for programs with host
  loops (jacobi1d_steps: one; lu: two) and without (symm), and (slow) for every kernel
  of the catalog: the API once skipped host steps on the GPU, which a comparison with
  the reference through the shared layer catches.
* A fake PyCUDA driver (records launches, copies and attributes; runs nothing) under
  ``GpuDevice``: the API and ``check_program`` make the same launches, host steps
  included; ``__constant__`` copies, shared-memory opt-in, memory check, aliasing of
  device arrays, only written arrays copied back.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from polygpu import PolygpuError, optimize
from polygpu.codegen.program import Argument, KernelProgram, Launch, SpecializationError
from polygpu.frontend import load
from polygpu.runtime import inputs
from polygpu.runtime.check import check_program, judge_outputs
from polygpu.runtime.device import CpuEmulator, GpuDevice, RunBudget, get_device, launch_plan
from polygpu.runtime.grid import LaunchError

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "kernels"
CATALOG = json.loads((KERNELS / "catalog.json").read_text())


pytestmark = pytest.mark.usefixtures("isolated")  # tests/conftest.py


# ---------------------------------------------------------------------------- helpers


def random_inputs(spec: str, function: str | None, params, seed: int = 0):
    source = load(spec, function)
    ints = inputs.integer_parameters(source, params)
    shapes = inputs.array_shapes(source, ints)
    return source, inputs.random_values(source, ints, shapes, np.random.default_rng(seed))


def assert_matches_reference(kernel, spec: str, function: str | None, params, seed=0):
    """Call ``kernel`` and the sequential reference on the same random inputs, judged as
    ``check`` judges (fixed tolerance, then the conditioning bound; unwritten elements
    bit-identical)."""
    _, values = random_inputs(spec, function, params, seed)
    got = {n: v.copy() if isinstance(v, np.ndarray) else v for n, v in values.items()}
    kernel(**got)
    result = judge_outputs(kernel.compiled.source_scop, spec, params, values,
                           {n: v for n, v in got.items() if isinstance(v, np.ndarray)},
                           seed=seed, where="the API")
    assert result.ok, result.message


# ------------------------------------------------------------- the API on the emulator


@pytest.mark.parametrize("name, params", [
    ("jacobi1d_steps.c", {"tsteps": 40, "n": 37}),  # one host loop, 80 launches
    ("lu.c", {"n": 19}),  # two host loops
    ("symm.c", {"m": 19, "n": 13}),
])
def test_api_runs_host_steps_like_the_reference(name, params):
    spec = str(KERNELS / name)
    kernel = optimize(spec, backend="cpu")
    assert isinstance(kernel.device, CpuEmulator) and kernel.device is get_device("cpu")
    steps = kernel.program.steps(params)
    if kernel.program.host_iterators:
        assert len(steps) > len(kernel.launches)
    assert_matches_reference(kernel, spec, None, params)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CATALOG))
def test_api_matches_reference_for_every_catalog_kernel(name):
    entry = CATALOG[name]
    spec = str(KERNELS / name)
    kernel = optimize(spec, function=entry.get("function"), backend="cpu")
    assert_matches_reference(kernel, spec, entry.get("function"), entry["small"])


def test_api_refuses_aliased_written_arrays_and_allows_shared_reads():
    mv = optimize(str(KERNELS / "mv.c"), backend="cpu")
    n = 9
    a = np.ones((n, n), np.float32)
    x = np.zeros(n, np.float32)
    with pytest.raises(PolygpuError, match="arguments 'x' and 'y' share memory.*writes 'x'"):
        mv(n, a, x, x)
    both = np.zeros(2 * n, np.float32)
    with pytest.raises(PolygpuError, match="'x' and 'y' share memory"):
        mv(n, a, both[:n], both[n - 1:2 * n - 1])
    mv(n, a, both[:n], both[n:])  # adjacent, not overlapping: fine
    # gemm reads a and b: the same array for both is fine
    gemm = optimize(str(KERNELS / "gemm.c"), backend="cpu")
    m = 11
    rng = np.random.default_rng(1)
    c = rng.uniform(0.5, 1.5, (m, m)).astype(np.float32)
    ab = rng.uniform(0.5, 1.5, (m, m)).astype(np.float32)
    want = 1.5 * ab.astype(np.float64) @ ab + 0.5 * c
    gemm(m, m, m, 1.5, 0.5, c, ab, ab)
    np.testing.assert_allclose(c, want, rtol=1e-4)
    with pytest.raises(PolygpuError, match="'c' and 'a' share memory"):
        gemm(m, m, m, 1.5, 0.5, c, c, ab)


def test_api_runs_a_specialized_variant_at_other_sizes_through_its_parametric_twin():
    """The device layer refuses a specialized program at other sizes; the API's kernel
    runs its parametric twin there (the same variant, not specialized, compiled once)."""
    spec = str(KERNELS / "mv.c")
    kernel = optimize(spec, params={"n": 64}, variant={"specialize": True}, backend="cpu")
    assert kernel.program.specialized
    assert_matches_reference(kernel, spec, None, {"n": 64})
    a, x, y = np.ones((37, 37), np.float32), np.zeros(37, np.float32), np.ones(37, np.float32)
    with pytest.raises(SpecializationError, match="specialized for n=64"):
        kernel.device.run(kernel.program, {"n": 37, "a": a, "x": x, "y": y})
    kernel(37, a, x, y)
    np.testing.assert_allclose(x, np.full(37, 37.0))
    assert [t.specialized for t in kernel._twins] == [()]


def test_api_refuses_sizes_at_which_an_access_leaves_its_array(tmp_path):
    # compiled without sizes (the access is safe for n <= 10), then called at n = 10 and
    # at n = 11, where b[i] = a[i] would read a[10]: refused before anything runs
    src = tmp_path / "ten.c"
    src.write_text("void ten(int n, float a[10], float b[n])\n{\n#pragma scop\n"
                   "  for (int i = 0; i < n; i++)\n    b[i] = 2 * a[i];\n"
                   "#pragma endscop\n}\n")
    kernel = optimize(str(src), backend="cpu")
    a = np.arange(10, dtype=np.float32)
    b = np.zeros(10, np.float32)
    kernel(10, a, b)
    assert np.array_equal(b, 2 * a)
    b11 = np.full(11, -1.0, np.float32)
    with pytest.raises(PolygpuError, match=r"ten\.c:5: a\[i\] reads outside array 'a'.*"
                       r"n = 11, i = 10"):
        kernel(11, a, b11)
    assert (b11 == -1).all()  # nothing ran


def test_launch_plan_checks_grids_at_every_step():
    program = KernelProgram(
        "f", "__global__ void k(int n, int h0) {}",
        (Argument("n", "scalar", "int32", ()),), ("n",),
        (Launch("k", ("n - h0", "1", "1"), (32, 1, 1)),),
        host_iterators=("h0",), host_steps="[n] -> { k[h0] : 0 <= h0 < 3 }")
    plan = launch_plan(program, {"n": 5})
    assert [(s.grid, s.host) for s in plan] == [((5, 1, 1), (0,)), ((4, 1, 1), (1,)),
                                                ((3, 1, 1), (2,))]
    with pytest.raises(LaunchError, match="grid expressions evaluate to 0"):
        launch_plan(program, {"n": 2})


# --------------------------------------------------------------- a fake PyCUDA driver


class FakeDriver:
    """Enough of ``pycuda.driver`` for GpuDevice: records what it is asked to do."""

    device_attribute = SimpleNamespace(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN="optin",
                                       L2_CACHE_SIZE="l2", MULTIPROCESSOR_COUNT="sms")
    function_attribute = SimpleNamespace(MAX_DYNAMIC_SHARED_SIZE_BYTES="max-dynamic-shared")
    ATTRIBUTES = {"optin": 227 * 1024, "l2": 50 << 20, "sms": 132}

    def __init__(self, free: int = 1 << 40, devices: int = 2):
        self.log: list[tuple] = []
        self.free = free
        self.run_ms = 1.0  # what every pair of events measures
        self.stack: list[int] = []
        self._next = 0x10000
        driver = self

        class Device:
            @staticmethod
            def count():
                return devices

            def __init__(self, index):
                self.index = index

            def retain_primary_context(self):
                return SimpleNamespace(push=lambda: driver.stack.append(self.index))

            def compute_capability(self):
                return (9, 0)

            def name(self):
                return "Fake GPU"

            def get_attribute(self, attribute):
                return driver.ATTRIBUTES[attribute]

        class Context:
            @staticmethod
            def pop():
                driver.stack.pop()

            @staticmethod
            def synchronize():
                driver.require_context()

        class Event:
            def record(self):
                driver.require_context()

            def synchronize(self):
                pass

            def time_since(self, other):
                return driver.run_ms

        self.Device, self.Context, self.Event = Device, Context, Event

    def init(self):
        pass

    def require_context(self):
        assert self.stack, "a CUDA call without a current context"

    def mem_get_info(self):
        self.require_context()
        return self.free, 2 * self.free

    def mem_alloc(self, nbytes):
        self.require_context()
        pointer, self._next = self._next, self._next + nbytes + 256
        self.log.append(("alloc", nbytes))
        return FakeAllocation(pointer)

    def memcpy_htod(self, buffer, array):
        self.require_context()
        self.log.append(("htod", array.nbytes))

    def memcpy_dtoh(self, array, buffer):
        self.require_context()
        self.log.append(("dtoh", array.nbytes))

    def memcpy_dtod(self, dst, src, size):
        self.require_context()
        self.log.append(("dtod", dst, int(src), size))

    def module_from_buffer(self, binary):
        return FakeModule(self)

    def compiler(self, source, arch, options):
        self.log.append(("nvcc", arch))
        return FakeModule(self)


class FakeAllocation:
    def __init__(self, pointer):
        self.pointer = pointer

    def __int__(self):
        return self.pointer

    def free(self):
        pass


class FakeModule:
    def __init__(self, driver):
        self.driver = driver

    def get_function(self, name):
        return FakeFunction(self.driver, name)

    def get_global(self, name):
        return 0xC0DE, 64 * 1024


class FakeFunction:
    def __init__(self, driver, name):
        self.driver, self.name, self.types = driver, name, None

    def prepare(self, types):
        self.types = list(types)

    def set_attribute(self, attribute, value):
        self.driver.log.append(("attribute", self.name, attribute, value))

    def prepared_async_call(self, grid, block, stream, *args, shared_size=0):
        self.driver.require_context()
        assert len(args) == len(self.types), (args, self.types)
        host = len(self.types) - next(
            (k for k in range(len(self.types), 0, -1) if self.types[k - 1] != "i"), 0)
        self.driver.log.append(("launch", self.name, tuple(grid), tuple(block), shared_size,
                                tuple(int(a) for a in args[len(args) - host:])))


def fake_gpu(**kw) -> tuple[FakeDriver, GpuDevice]:
    driver = FakeDriver(**kw)
    return driver, GpuDevice(0, driver=driver, compiler=driver.compiler)


def launches(driver: FakeDriver) -> list[tuple]:
    return [e for e in driver.log if e[0] == "launch"]


@pytest.mark.parametrize("name, params", [("jacobi1d_steps.c", {"tsteps": 4, "n": 37}),
                                          ("lu.c", {"n": 19})])
def test_api_and_check_make_the_same_launches(name, params):
    """What the API runs is what check verifies: every host step, the same grids."""
    spec = str(KERNELS / name)
    driver, device = fake_gpu()
    kernel = optimize(spec, backend=device)
    assert kernel.device is device and kernel.backend == "gpu"
    program = kernel.program
    assert program.host_iterators
    _, values = random_inputs(spec, None, params)
    kernel(**values)
    by_api = launches(driver)
    expected = [(program.launches[k].kernel, h) for k, h in program.steps(params)]
    assert [(e[1], e[5]) for e in by_api] == expected
    assert len(by_api) > len(program.launches)
    # only the written arrays come back
    written = [a.name for a in load(spec).arrays if a.name in kernel.written]
    assert len([e for e in driver.log if e[0] == "dtoh"]) == len(written)

    driver.log.clear()
    result = check_program(program, kernel.compiled.source_scop, spec, params,
                           backend=device, seed=0)
    assert not result.ok  # the fake runs nothing
    assert launches(driver) == by_api
    assert ("nvcc", "sm_90") not in driver.log  # compiled once, in optimize


def test_fake_gpu_constants_shared_memory_and_memory_check():
    source = "__global__ void k(int n, float *x, float *y) {}"
    args = (Argument("n", "scalar", "int32", ()), Argument("x", "array", "float32", ("n",)),
            Argument("y", "array", "float32", ("n",)))
    program = KernelProgram("f", source, args, ("n",),
                            (Launch("k", ("n", "1", "1"), (32, 1, 1), 64 * 1024),),
                            constants=("y",))
    driver, device = fake_gpu()
    x, y = np.zeros(8, np.float32), np.ones(8, np.float32)
    device.run(program, {"n": 8, "x": x, "y": y})
    log = driver.log
    assert ("attribute", "k", "max-dynamic-shared", 64 * 1024) in log
    dtod = [e for e in log if e[0] == "dtod"]
    assert len(dtod) == 1 and dtod[0][1] == 0xC0DE and dtod[0][3] == y.nbytes
    assert [e for e in log if e[0] == "launch"] == [("launch", "k", (8, 1, 1), (32, 1, 1),
                                                     64 * 1024, ())]
    assert not driver.stack  # every push popped

    too_big = KernelProgram("g", source, args, ("n",),
                            (Launch("k", ("n", "1", "1"), (32, 1, 1), 300 * 1024),))
    with pytest.raises(LaunchError, match="307200 bytes of dynamic shared memory"):
        device.run(too_big, {"n": 8, "x": x, "y": y})

    driver.free = 40
    with pytest.raises(PolygpuError, match=r"needs 6.4e-08 GB on the GPU .* 4e-08 GB free"):
        device.run(program, {"n": 8, "x": x, "y": y})
    assert not driver.stack


class FakeDeviceArray:
    def __init__(self, shape, pointer, typestr="<f4"):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr,
                                         "strides": None, "data": (pointer, False),
                                         "version": 3}


def test_run_budget_counts():
    """Warm-ups stop at a quarter of the budget (the first always runs), timed runs at
    all of it after at least three; without a budget, exactly what was asked."""
    def runs(budget: RunBudget, ms: float) -> tuple[int, int]:
        warm, timed = [], []
        while budget.more_warmups(warm):
            warm.append(ms)
        while budget.more_timed(timed):
            timed.append(ms)
        return len(warm), len(timed)

    assert runs(RunBudget(20, 3), 5000.0) == (3, 20)
    assert runs(RunBudget(20, 3, 2000.0), 1.0) == (3, 20)
    assert runs(RunBudget(20, 3, 2000.0), 400.0) == (2, 5)  # 800 >= 500; 5 x 400 = 2000
    assert runs(RunBudget(20, 3, 2000.0), 5000.0) == (1, 3)
    assert runs(RunBudget(2, 0, 1.0), 5000.0) == (0, 2)  # never more than asked


def test_run_budget_cutoff_stops_a_candidate_that_cannot_win():
    """With a cutoff, timed runs stop once more than half of them, and two at least, are
    slower than it (the median of what ran is then over it), after one when that one is
    over twice the cutoff; a candidate faster than the cutoff is timed in full."""
    def timed(budget: RunBudget, ms) -> list[float]:
        done = []
        while budget.more_timed(done):
            done.append(ms[len(done)] if isinstance(ms, list) else ms)
        return done

    assert len(timed(RunBudget(20, 3, None, 10.0), 12.0)) == 2
    assert RunBudget(20, 3, None, 10.0).cut_off([12.0] * 2)
    assert not RunBudget(20, 3, None, 10.0).cut_off([12.0])  # one run could be noise
    assert len(timed(RunBudget(20, 3, None, 10.0), 9.0)) == 20
    # one run under the cutoff is enough to go on: the median could still win
    assert len(timed(RunBudget(20, 3, None, 10.0), [12.0, 9.5] + [11.0] * 18)) == 3
    assert len(timed(RunBudget(20, 3, None, 10.0), [12.0, 9.5, 9.0] + [9.0] * 17)) == 20
    # two over, two under: the median could be under, so the runs go on
    assert not RunBudget(20, 3, None, 10.0).cut_off([9.0, 9.5, 12.0, 13.0])
    assert RunBudget(20, 3, None, 10.0).cut_off([9.0, 12.0, 12.5, 13.0])
    assert len(timed(RunBudget(20, 3, 2000.0, 10.0), 12.0)) == 2
    assert not RunBudget(20, 3).cut_off([1e9] * 3)
    # far above the cutoff, one warm run decides; just above it, two are needed
    assert len(timed(RunBudget(20, 3, None, 10.0), 20.5)) == 1
    assert len(timed(RunBudget(20, 3, None, 10.0), 19.5)) == 2
    assert len(timed(RunBudget(20, 3, None, 10.0), [19.5, 9.0, 9.0] + [9.0] * 17)) == 20
    assert not RunBudget(20, 3, None, 10.0).cut_off([])
    # whenever the runs stop at the cutoff, the median of what ran is over it
    import itertools
    import statistics
    for runs in itertools.product([9.0, 11.0, 25.0], repeat=5):
        budget = RunBudget(5, 0, None, 10.0)
        done = timed(budget, list(runs))
        if budget.cut_off(done):
            assert statistics.median(done) > 10.0, done


def test_run_budget_counts_a_long_warm_up():
    """A single warm-up of a quarter of the budget or more is the first timed run too;
    shorter warm-ups, several, or no budget: never counted."""
    assert RunBudget(20, 3, 1000.0).counted_warmups([800.0]) == [800.0]
    assert RunBudget(20, 3, 1000.0).counted_warmups([250.0]) == [250.0]
    assert RunBudget(20, 3, 1000.0).counted_warmups([100.0, 100.0, 60.0]) == []
    assert RunBudget(20, 3, 1000.0).counted_warmups([200.0]) == []
    assert RunBudget(20, 3).counted_warmups([5000.0]) == []
    assert RunBudget(2, 1, 1000.0).counted_warmups([5000.0]) == []  # fewer than a median of 3
    assert RunBudget(20, 0, 1000.0).counted_warmups([]) == []


def test_emulator_counts_a_long_warm_up(monkeypatch):
    """On the emulator, a warm-up as long as a quarter of the budget is one of the three
    runs whose median is reported: three runs in all, not four."""
    from polygpu.runtime import device as device_module

    clock = iter(float(t) for t in range(0, 10_000, 1))  # every run takes 1 s
    monkeypatch.setattr(device_module.time, "perf_counter", lambda: next(clock))
    runs = []

    class Compiled:
        def run(self, values, steps):
            runs.append(1)

    emu = CpuEmulator()
    monkeypatch.setattr(emu, "load", lambda program: Compiled())
    monkeypatch.setattr(device_module, "_bind", lambda kind, program, values, w: (None, []))
    times = emu.time(object(), [{}], repeats=20, warmup=3, budget_ms=1000.0)
    assert len(runs) == 3 and times == [1000.0] * 3


@pytest.mark.parametrize("by_launch", [False, True])
def test_fake_gpu_timing_stops_at_the_budget(by_launch):
    """A slow run (400 ms a run, by the fake's events) is timed 5 times after 2 warm-ups
    under a 2 s budget, instead of 20 after 3; every run launches the whole plan."""
    spec = str(KERNELS / "jacobi1d_steps.c")
    params = {"tsteps": 3, "n": 37}
    driver, device = fake_gpu()
    program = optimize(spec, backend=device).program
    per_run = len(program.steps(params))
    _, values = random_inputs(spec, None, params)
    driver.run_ms = 400.0
    time = device.time_launches if by_launch else device.time
    got = time(program, [values], 20, 3, budget_ms=2000.0)
    timed = got.times_ms if by_launch else got
    assert list(timed) == [400.0] * 5
    assert len(launches(driver)) == (2 + 5) * per_run
    driver.log.clear()
    got = time(program, [values], 20, 3)
    assert len(got.times_ms if by_launch else got) == 20
    assert len(launches(driver)) == 23 * per_run


def test_emulator_timing_stops_at_the_budget():
    spec = str(KERNELS / "mv.c")
    program = optimize(spec).program
    _, values = random_inputs(spec, None, {"n": 37})
    assert len(CpuEmulator().time(program, [values], 50, 0, budget_ms=1e-9)) == 3
    timed = CpuEmulator().time_launches(program, [values], 4, 1, budget_ms=1e9)
    assert len(timed.times_ms) == 4 and len(timed.launch_ms) == 4


def test_fake_gpu_device_arrays_in_place_and_aliasing():
    driver, device = fake_gpu()
    mv = optimize(str(KERNELS / "mv.c"), backend=device)
    n = 16
    a = FakeDeviceArray((n, n), 0x100000)
    x, y = FakeDeviceArray((n,), 0x200000), FakeDeviceArray((n,), 0x300000)
    mv(n, a, x, y)
    kinds = [e[0] for e in driver.log]
    assert "alloc" not in kinds and "htod" not in kinds and "dtoh" not in kinds
    assert launches(driver)
    overlapping = FakeDeviceArray((n,), 0x200000 + 4 * (n - 1))
    with pytest.raises(PolygpuError, match="'x' and 'y' share memory"):
        mv(n, a, x, overlapping)
    with pytest.raises(PolygpuError, match="'a' and 'x' share memory"):
        mv(n, a, FakeDeviceArray((n,), 0x100000 + 8), y)


def test_gpu_device_choice():
    driver = FakeDriver(devices=2)
    second = GpuDevice(1, driver=driver, compiler=driver.compiler)
    assert second.available() and second.name == "Fake GPU"
    assert not GpuDevice(2, driver=driver).available()
    assert get_device("gpu:1") is get_device("gpu", 1)
    with pytest.raises(PolygpuError, match="unknown backend"):
        get_device("tpu")


# ------------------------------------------------------- tuning from a plain script


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="the search compiles with nvcc")
def test_parallel_compile_from_a_script_without_main_guard(tmp_path):
    """The tuner's parallel compile (what ``optimize(tune=True)`` runs first) never runs
    the caller's script again: a plain script, no ``if __name__ == "__main__":``, prints
    its top-level line once and no traceback (with a spawn pool it printed four)."""
    script = tmp_path / "plain.py"
    script.write_text(textwrap.dedent(f"""
        from polygpu.schedule.variant import Variant
        from polygpu.search import tuner
        from polygpu.search.measurement import canonical
        print("TOP-LEVEL RAN", flush=True)
        tasks = [({str(KERNELS / 'mv.c')!r}, None, (), (),
                  canonical(Variant(tile=(t,), threads=(t,)).to_json()),
                  {{"n": 64}}, {{"n": 64}}) for t in (32, 64, 128)]
        results = tuner._compile_in_child(tasks, 2)
        print("COMPILED", len(results), [r.get("error") for r in results])
    """))
    env = {**os.environ, "POLYGPU_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         cwd=tmp_path, env=env, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("TOP-LEVEL RAN") == 1, out.stdout
    assert "COMPILED 3 [None, None, None]" in out.stdout
    assert "Traceback" not in out.stderr, out.stderr


def test_parallel_compile_runs_in_a_fresh_child():
    """The tuner's worker pool lives in ``python -m polygpu.search.runner --compile``:
    its results are the in-process ones (and it does return them, not None)."""
    from polygpu.schedule.variant import Variant
    from polygpu.search import tuner
    from polygpu.search.measurement import canonical

    spec = str(KERNELS / "mv.c")
    tasks = [(spec, None, (), (), canonical(Variant(tile=(t,), threads=(t,)).to_json()),
              {"n": 64}, {"n": 64}) for t in (32, 64)]
    results = tuner._compile_in_child(tasks, 2)
    assert results is not None and len(results) == 2
    here = [tuner._compile_one(*task) for task in tasks]
    assert [r.get("error") for r in results] == [None, None]
    assert [r["program"] for r in results] == [r["program"] for r in here]


def test_api_compiles_a_twin_for_sizes_its_program_cannot_reach(tmp_path):
    # compiled without sizes, the program is 32-bit and unfolded; a call with 70000
    # blocks along y gets the same variant compiled for its sizes (blocks folded onto x),
    # and the result is right
    src = tmp_path / "batch.c"
    src.write_text("void batch(int nb, float a[nb][2], float c[nb][2])\n{\n#pragma scop\n"
                   "  for (int e = 0; e < nb; e++)\n    for (int i = 0; i < 2; i++)\n"
                   "      c[e][i] = 2 * a[e][i] + i;\n#pragma endscop\n}\n")
    kernel = optimize(str(src), backend="cpu", variant={"tile": [1, 2], "threads": [1, 2]})
    assert kernel.launches[0].grid[1] != "1"  # blocks of e along y, unfolded
    nb = 70000
    a = np.random.default_rng(0).uniform(0.5, 1.5, (nb, 2)).astype(np.float32)
    c = np.full((nb, 2), np.nan, np.float32)
    kernel(nb, a, c)
    assert np.array_equal(c, 2 * a + np.arange(2, dtype=np.float32))
    (twin,) = kernel._twins
    assert twin.launches[0].grid[1] != kernel.launches[0].grid[1]  # folded
    kernel(nb, a, c)  # the twin is kept
    assert len(kernel._twins) == 1
    # tmv at n = 46400 needs 64-bit offsets: the twin for those sizes has them
    tmv = optimize(str(KERNELS / "tmv.c"), backend="cpu")
    assert not tmv.program.index64
    assert tmv._program_for({"n": 46400}).index64
    assert tmv._program_for({"n": 100}) is tmv.program
