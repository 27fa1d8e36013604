"""The Python API, ``polygpu.optimize``: kernels from C files, specs and ``@affine``
functions, called on NumPy arrays; argument checking; where the variant comes from
(given, database, tuned).

Everything runs on the CPU emulator (no GPU in CI).  Device arrays are represented only by
fake ``__cuda_array_interface__`` objects, which exercise the validation, never a launch.
"""

from __future__ import annotations

import importlib.util
import shutil
import textwrap
from pathlib import Path

import numpy as np
import pytest

import polygpu
from polygpu import PolygpuError, optimize
from polygpu.api import Kernel, lookup_environment
from polygpu.schedule.variant import Variant
from polygpu.search import tuner
from polygpu.search.database import TuningDatabase
from polygpu.search.measurement import Measurement, canonical, source_hash

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "kernels"
MV = str(KERNELS / "mv.c")
N = 37
# one thread per row, no staging: a variant other than the default
SIMPLE = {"tile": [32], "threads": [32], "shared": False, "registers": False}


pytestmark = pytest.mark.usefixtures("isolated")  # tests/conftest.py


@pytest.fixture(scope="module")
def mv() -> Kernel:
    return optimize(MV, backend="cpu")


def mv_inputs(n: int = N, seed: int = 0):
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.5, 1.5, (n, n)).astype(np.float32)
    y = rng.uniform(0.5, 1.5, n).astype(np.float32)
    return a, np.full(n, np.nan, dtype=np.float32), y


def import_file(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class FakeDeviceArray:
    """Just a ``__cuda_array_interface__`` (version 3), as CuPy or PyTorch exposes it."""

    def __init__(self, shape, typestr="<f4", strides=None, readonly=False, pointer=0x7F000000):
        self.__cuda_array_interface__ = {
            "shape": tuple(shape), "typestr": typestr, "strides": strides,
            "data": (pointer, readonly), "version": 3, "stream": 1,
        }


# ------------------------------------------------------------------------------ calling


def test_c_kernel_on_numpy_arrays(mv):
    a, x, y = mv_inputs()
    assert mv(N, a, x, y) is None
    np.testing.assert_allclose(x, a.astype(np.float64) @ y, rtol=1e-5)
    assert mv.origin == "default" and mv.variant == Variant() and mv.backend == "cpu"
    assert mv.signature == ("n", "a", "x", "y")
    assert "__global__" in mv.source and mv.launches == mv.program.launches
    assert mv.compiled.program is mv.program
    assert "mv(n, a, x, y)" in repr(mv) and "default variant" in repr(mv)


def test_arguments_by_name_and_other_sizes(mv):
    for n in (1, 5, 130):  # one size compiled, every size callable
        a, x, y = mv_inputs(n, seed=n)
        mv(n, a, y=y, x=x)
        np.testing.assert_allclose(x, a.astype(np.float64) @ y, rtol=1e-5)


def test_affine_function_with_given_variant():
    module = import_file(KERNELS / "mv.py")
    kernel = polygpu.optimize(module.mv, variant=SIMPLE, backend="cpu")
    assert kernel.variant == Variant.from_json(SIMPLE) and kernel.origin == "given"
    assert "__global__" in kernel.source
    assert kernel.spec == f"{KERNELS / 'mv.py'}:mv"
    a, x, y = mv_inputs()
    kernel(N, a, x, y)
    np.testing.assert_allclose(x, a.astype(np.float64) @ y, rtol=1e-5)
    # the same region named by a spec, and by a path with function=
    for source in (f"{KERNELS / 'mv.py'}:mv", KERNELS / "mv.py"):
        other = optimize(source, function="mv" if isinstance(source, Path) else None,
                         variant=Variant.from_json(SIMPLE), backend="cpu")
        assert other.source == kernel.source


def test_affine_function_with_float_scalar_in_own_module(tmp_path):
    path = tmp_path / "scaled.py"
    path.write_text(textwrap.dedent("""\
        from __future__ import annotations

        from polygpu import affine, f64

        @affine
        def scaled(n: int, m: int, alpha: f64, a: f64[n, m], b: f64[n, m]):
            for i in range(n):
                for j in range(m):
                    b[i, j] = alpha * a[i, j] + b[i, j]
        """))
    scaled = import_file(path).scaled
    kernel = optimize(scaled, backend="cpu")
    rng = np.random.default_rng(1)
    a, b = rng.random((7, 45)), rng.random((7, 45))
    expected = b.copy()
    scaled(7, 45, 0.5, a, expected)  # the decorated function is the reference
    kernel(7, 45, 0.5, a, b)
    np.testing.assert_allclose(b, expected, rtol=1e-12)
    with pytest.raises(PolygpuError, match="argument 'alpha' must be a real number"):
        kernel(7, 45, "0.5", a, b)


def test_constant_memory_program():
    kernel = optimize(KERNELS / "conv1d.c", backend="cpu")
    rng = np.random.default_rng(2)
    n = 50
    w, a = rng.random(5, dtype=np.float32), rng.random(n + 4, dtype=np.float32)
    b = np.zeros(n, dtype=np.float32)
    kernel(n, w, a, b)
    expected = np.correlate(a.astype(np.float64), w.astype(np.float64), "valid")
    np.testing.assert_allclose(b, expected, rtol=1e-5)


# ------------------------------------------------------------------------------- errors


@pytest.mark.parametrize("change, message", [
    (lambda a, x, y: (N, a.astype(np.float64), x, y),
     r"argument 'a' must be a float32 array of shape \(37, 37\) \(from n=37\), got dtype "
     "float64"),
    (lambda a, x, y: (N, a[:, :-1].copy(), x, y), r"argument 'a' .* got shape \(37, 36\)"),
    (lambda a, x, y: (N + 1, a, x, y), r"argument 'a' .* shape \(38, 38\) \(from n=38\)"),
    (lambda a, x, y: (N, a.T, x, y), "argument 'a' must be C-contiguous"),
    (lambda a, x, y: (N, a, x, list(y)), "argument 'y' .* got list"),
    (lambda a, x, y: (N, a, x), "missing argument 'y'"),
    (lambda a, x, y: (N, a, x, y, y), "takes 4 arguments"),
    (lambda a, x, y: (float(N), a, x, y), "argument 'n' must be an integer, got float"),
    (lambda a, x, y: (True, a, x, y), "argument 'n' must be an integer"),
    (lambda a, x, y: (2**40, a, x, y), "does not fit the kernel's int32"),
    (lambda a, x, y: (0, a, x, y), "violate the region's assumptions"),
])
def test_bad_arguments(mv, change, message):
    a, x, y = mv_inputs()
    with pytest.raises(PolygpuError, match=message):
        mv(*change(a, x, y))
    assert np.isnan(x).all()  # nothing ran


def test_bad_keywords_and_read_only(mv):
    a, x, y = mv_inputs()
    with pytest.raises(PolygpuError, match="has no argument 'z'"):
        mv(N, a, x, y=y, z=y)
    with pytest.raises(PolygpuError, match="argument 'x' given twice"):
        mv(N, a, x, y, x=x)
    y.flags.writeable = False
    with pytest.raises(PolygpuError, match="argument 'y' is read-only"):
        mv(N, a, x, y)


@pytest.mark.parametrize("fake, message", [
    (FakeDeviceArray((N, N), "<f8"), r"got a device array of dtype float64 \(typestr '<f8'\)"),
    (FakeDeviceArray((N, N + 1)), r"got a device array of shape \(37, 38\)"),
    (FakeDeviceArray((N, N), strides=(4, 4 * N)), "must be C-contiguous, got a device array"),
    (FakeDeviceArray((N, N), readonly=True), "read-only device array"),
])
def test_device_array_validation(mv, fake, message):
    a, x, y = mv_inputs()
    with pytest.raises(PolygpuError, match=f"argument 'a'.* {message}"):
        mv(N, fake, x, y)


def test_device_array_needs_the_gpu(mv):
    a, x, y = mv_inputs()
    good = FakeDeviceArray((N, N), strides=(4 * N, 4))  # explicit C strides are fine
    with pytest.raises(PolygpuError, match="argument 'a' is a device array .* CPU emulator"):
        mv(N, good, x, y)
    assert np.isnan(x).all()


@pytest.mark.skipif(importlib.util.find_spec("pycuda") is not None, reason="PyCUDA installed")
def test_auto_backend_without_gpu():
    kernel = optimize(MV)
    assert kernel.backend == "cpu"
    a, x, y = mv_inputs()
    with pytest.raises(PolygpuError, match="CPU emulator .*needs PyCUDA"):
        kernel(N, FakeDeviceArray((N, N)), x, y)
    with pytest.raises(PolygpuError, match="tune=True measures on the GPU.*backend='cpu'"):
        optimize(MV, params={"n": 64}, tune=True)


def test_bad_optimize_arguments(tmp_path):
    with pytest.raises(PolygpuError, match="expected an @affine function or a spec"):
        optimize(42, backend="cpu")
    with pytest.raises(PolygpuError, match="backend 'tpu'"):
        optimize(MV, backend="tpu")
    module = import_file(KERNELS / "mv.py")
    with pytest.raises(PolygpuError, match="function='tmv' but the function given is 'mv'"):
        optimize(module.mv, function="tmv", backend="cpu")
    with pytest.raises(PolygpuError, match="unknown field"):
        optimize(MV, variant={"tiles": [32]}, backend="cpu")
    with pytest.raises(PolygpuError, match="no integer parameter m"):
        optimize(MV, params={"n": 64, "m": 3}, backend="cpu")
    with pytest.raises(PolygpuError, match="tune=True needs params"):
        optimize(MV, tune=True, backend="cpu")


# ------------------------------------------------------------------- where the variant is from


def record(db: TuningDatabase, variant: dict | None, status: str, ms: float | None,
           params=None, env=None) -> None:
    key = canonical(Variant.from_json(variant or {}).to_json()) if variant is not None \
        else canonical({"tile": [999]})
    db.record(spec="kernels/mv.c", function="mv", source_hash=source_hash(Path(MV).read_text()),
              params=params or {"n": 4096}, env=env or lookup_environment("cpu"),
              m=Measurement(key, status, ms, (ms,) if ms else (), reason="" if ms else "x"))


def test_variant_from_the_database(tmp_path):
    path = tmp_path / "tuning.sqlite"
    with TuningDatabase(path) as db:
        record(db, SIMPLE, "ok", 1.5)
        record(db, {}, "ok", 2.0)  # the default variant, slower
        record(db, {"tile": [64], "threads": [64]}, "wrong", None)  # failures never win
        record(db, {"tile": [16], "threads": [16]}, "ok", 0.5, params={"n": 1024})
        other = lookup_environment("cpu")
        other = type(other)(**{**other.to_json(), "gpu_name": "NVIDIA H100"})
        record(db, {"tile": [8], "threads": [8]}, "ok", 0.1, env=other)
        record(db, None, "ok", 0.2)  # not a valid variant (any more): skipped

    kernel = optimize(MV, params={"n": 4096}, backend="cpu", database=path)
    assert kernel.origin == "database" and kernel.variant == Variant.from_json(SIMPLE)
    assert kernel.measurement.time_ms == 1.5 and "1.5 ms" in repr(kernel)
    a, x, y = mv_inputs()
    kernel(N, a, x, y)
    np.testing.assert_allclose(x, a.astype(np.float64) @ y, rtol=1e-5)

    with TuningDatabase(path) as db:  # an open database works as well as its path
        assert optimize(MV, params={"n": 1024}, backend="cpu", database=db).variant == \
            Variant(tile=(16,), threads=(16,))
    # other sizes: nothing to look up, the cost model chooses at them; no sizes: the
    # fixed default
    assert optimize(MV, params={"n": 2048}, backend="cpu", database=path).origin == "model"
    assert optimize(MV, params=None, backend="cpu", database=path).origin == "default"
    assert optimize(MV, params={"n": 4096}, backend="cpu", database=False).origin == "model"
    assert optimize(MV, params={"n": 4096}, variant={}, backend="cpu",
                    database=path).origin == "given"


def test_default_database_is_read_not_created(tmp_path, monkeypatch):
    default = tmp_path / "cache" / "tuning.sqlite"
    monkeypatch.setenv("POLYGPU_TUNING_DB", str(default))
    assert optimize(MV, params={"n": 4096}, backend="cpu").origin == "model"
    assert not default.exists()
    with TuningDatabase(default) as db:
        record(db, SIMPLE, "ok", 1.0)
    kernel = optimize(MV, params={"n": 4096}, backend="cpu")
    assert kernel.origin == "database" and kernel.variant == Variant.from_json(SIMPLE)


class FakeTuneResult:
    def __init__(self, best):
        self.best = best

    def counts(self):
        return {"timed": 3} if self.best is None else {"timed": 1}


def test_tuned_variant(tmp_path, monkeypatch):
    calls = []

    def fake_tune(spec, params, runner, *, function=None, options=None, database=None,
                  limits=None):
        calls.append((spec, dict(params), runner.backend, options.strategy, options.budget,
                      database))
        m = Measurement(canonical(Variant.from_json(SIMPLE).to_json()), "ok", 0.25, (0.25,))
        best = tuner.Candidate(m.key, Variant.from_json(SIMPLE), "timed", measurement=m)
        return FakeTuneResult(best)

    monkeypatch.setattr(tuner, "tune", fake_tune)
    kernel = optimize(MV, params={"n": 512}, tune=True, strategy="exhaustive", budget=3,
                      backend="cpu", database=False)
    assert calls == [(MV, {"n": 512}, "cpu", "exhaustive", 3, None)]
    assert kernel.origin == "tuned" and kernel.variant == Variant.from_json(SIMPLE)
    assert kernel.tuning.best.measurement.time_ms == 0.25

    monkeypatch.setattr(tuner, "tune", lambda *a, **k: FakeTuneResult(None))
    with pytest.raises(PolygpuError, match=r"no variant that passed .*\(3 timed\)"):
        optimize(MV, params={"n": 512}, tune=True, backend="cpu", database=False)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="the search compiles with nvcc")
def test_tune_then_database_round_trip(tmp_path):
    """A real search (on the emulator) records what a later optimize() finds."""
    path = tmp_path / "tuning.sqlite"
    tuned = optimize(MV, params={"n": 256}, tune=True, budget=1, backend="cpu",
                     database=path)
    assert tuned.origin == "tuned" and tuned.measurement.status == "ok"
    found = optimize(MV, params={"n": 256}, backend="cpu", database=path)
    assert found.origin == "database" and found.variant == tuned.variant
    assert found.measurement.time_ms == tuned.measurement.time_ms


def test_the_model_plan_is_specialized_at_its_sizes_with_a_parametric_twin():
    """With params and nothing recorded, the cost model's plan is specialized for them
    (constant bounds, as the tuner's variants); a call at other sizes compiles the plan
    without them once and keeps it; both give the loop nest's results."""
    kernel = optimize(MV, params={"n": 64}, backend="cpu", database=False)
    assert kernel.origin == "model" and kernel.variant.specialize
    assert kernel.program.specialized == (("n", 64),)
    for n in (64, N, N, 64):
        a, x, y = mv_inputs(n)
        kernel(n, a, x, y)
        np.testing.assert_allclose(x, a.astype(np.float64) @ y, rtol=1e-5)
    assert len(kernel._twins) == 1
    twin = kernel._twins[0]
    assert not twin.specialized
    assert kernel._program_for({"n": N}) is twin and kernel._program_for({"n": 64}) is \
        kernel.program
