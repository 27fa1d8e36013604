"""Test order for CI's workers (``pytest -n auto --dist loadfile``).

xdist hands whole files to its workers, round-robin at first and then to whichever
worker is free -- by default the files with the most tests first.  The two longest
files hold one (hypothesis) test each -- the end-to-end random nests (about 25 minutes
on 2 cores) and the fuzzed nests (about 20; they run their own pool of compiler
processes) -- so they came last, one after the other on the same worker while the other
sat idle, and CI passed its 90 minutes (2026-12-02).  Here xdist keeps the collection
order (``loadscopereorder`` off) and the longest files are collected first: they start
at once, one per worker, and the short files fill in around them.
"""

from __future__ import annotations

import pytest

# longest first, as measured (.ci/run with --durations, 2 cores, 2026-12-02)
LONGEST = (
    "tests/test_end_to_end_random.py",
    "tests/test_fuzz_nests.py",
)


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):  # (pytest-xdist present)
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    """Files of :data:`LONGEST` first, in its order; then files with ``slow`` tests;
    then the rest, each group in collection order (a stable sort, whole files kept
    together)."""
    slow_files = {_file(item) for item in items if item.get_closest_marker("slow")}

    def rank(item) -> tuple[int, int]:
        path = _file(item)
        if path in LONGEST:
            return (0, LONGEST.index(path))
        return (1, 0) if path in slow_files else (2, 0)

    items.sort(key=rank)


def _file(item) -> str:
    return item.nodeid.split("::")[0]


@pytest.fixture(scope="module")
def private_cache(tmp_path_factory):
    """A private build cache for a test file (``pytestmark =
    pytest.mark.usefixtures("private_cache")``), inherited by the workers and children it
    starts: no test depends on an earlier run's libraries."""
    mp = pytest.MonkeyPatch()
    mp.setenv("POLYGPU_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    yield
    mp.undo()


@pytest.fixture(scope="module")
def isolated(private_cache, tmp_path_factory):
    """A private build cache and a default tuning database that does not exist: no test
    depends on the user's own tuning results either."""
    mp = pytest.MonkeyPatch()
    mp.setenv("POLYGPU_TUNING_DB", str(tmp_path_factory.mktemp("db") / "absent.sqlite"))
    yield
    mp.undo()
