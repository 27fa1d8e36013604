"""User mistakes on the command line: exit status 2 with a sentence, never a traceback or
an internal error (status 3), and no partial files (issue 17, items 6 and 7)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from polygpu import cli
from polygpu.errors import PolygpuError
from polygpu.frontend import load
from polygpu.runtime import compiler, inputs
from tests import inprocess

ROOT = Path(__file__).resolve().parent.parent


# in-process (tests/inprocess.py): the same status and output as ``python -m polygpu``
# without an interpreter's start-up per call
polygpu = inprocess.polygpu


def one_clean_line(result: subprocess.CompletedProcess) -> str:
    """The single stderr line of a status-2 input error."""
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert result.stdout == ""
    return lines[0]


def usage_error(result: subprocess.CompletedProcess) -> str:
    """argparse's usage error: status 2, the last line names the option."""
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    return result.stderr.strip().splitlines()[-1]


def a_file(tmp_path: Path) -> Path:
    """A regular file: paths below it can be neither created nor written, even as root."""
    f = tmp_path / "plain-file"
    f.write_text("x")
    return f


# -- host memory --------------------------------------------------------------------------

def test_sizes_beyond_host_memory_are_refused_before_allocating():
    line = one_clean_line(polygpu("check", "kernels/mm.c", "-p", "n=1000000"))
    assert line.startswith("kernels/mm.c:") and "host memory" in line
    assert "n=1000000" in line


def test_random_values_checks_memory_and_catches_memory_error(monkeypatch):
    program = load("kernels/mm.c")
    ints = {"n": 1 << 20}
    shapes = inputs.array_shapes(program, ints)
    with pytest.raises(PolygpuError, match="host memory"):
        inputs.random_values(program, ints, shapes, np.random.default_rng(0))
    # an allocation failing although the estimate passed: still a PolygpuError
    monkeypatch.setattr(inputs, "available_host_memory", lambda: None)
    with pytest.raises(PolygpuError, match="not enough host memory"):
        inputs.random_values(program, {"n": 1 << 40}, {k: (1 << 40, 1 << 40) for k in shapes},
                             np.random.default_rng(0))


# -- seeds, counts, replay ---------------------------------------------------------------

@pytest.mark.parametrize("seed", ["-1", str(2**32), "x"])
def test_bad_seed_is_a_usage_error(seed):
    line = usage_error(polygpu("check", "kernels/mv.c", "-p", "n=8", "--seed", seed))
    assert "--seed" in line


@pytest.mark.parametrize("option, value", [
    ("--budget", "0"), ("--budget", "-1"), ("--jobs", "0"), ("--repeats", "0"),
    ("--timeout", "0"), ("--seed", "-1"), ("--traffic-slack", "-5"), ("--time-budget", "-1"),
])
def test_bad_tune_numbers_are_usage_errors(tmp_path, option, value):
    line = usage_error(polygpu("tune", "kernels/mv.c", "-p", "n=64", "-o",
                               str(tmp_path / "out"), "--no-db", option, value))
    assert option in line
    assert not (tmp_path / "out").exists()


def test_missing_replay_file(tmp_path):
    line = one_clean_line(polygpu("tune", "kernels/mv.c", "-p", "n=64", "-o",
                                  str(tmp_path / "out"), "--no-db", "--replay",
                                  str(tmp_path / "nope.json")))
    assert "no such replay file" in line
    assert not (tmp_path / "out").exists()


def test_replay_file_that_is_not_one(tmp_path):
    line = one_clean_line(polygpu("tune", "kernels/mv.c", "-p", "n=64", "-o",
                                  str(tmp_path / "out"), "--no-db", "--replay",
                                  "kernels/mv.c"))
    assert "not JSON" in line


# -- directories that cannot be written --------------------------------------------------

def test_unwritable_compile_output(tmp_path):
    out = a_file(tmp_path) / "out"
    line = one_clean_line(polygpu("compile", "kernels/mv.c", "-o", str(out)))
    assert "output directory" in line and "not a directory" in line


def test_tune_report_directory_is_checked_before_the_search(tmp_path):
    start = time.monotonic()
    line = one_clean_line(polygpu("tune", "kernels/mv.c", "-p", "n=64", "-o",
                                  str(tmp_path / "out"), "--no-db", "--report",
                                  str(a_file(tmp_path) / "report"), "--replay", "x.json"))
    assert "report directory (--report)" in line
    assert time.monotonic() - start < 60
    assert not (tmp_path / "out").exists()


def test_tune_database_directory(tmp_path):
    line = one_clean_line(polygpu("tune", "kernels/mv.c", "-p", "n=64", "-o",
                                  str(tmp_path / "out"), "--db",
                                  str(a_file(tmp_path) / "db.sqlite"), "--replay", "x.json"))
    assert "tuning database (--db)" in line
    line = one_clean_line(polygpu("tune", "kernels/mv.c", "-p", "n=64", "-o",
                                  str(tmp_path / "out"), "--db", str(tmp_path),
                                  "--replay", "x.json"))
    assert "is a directory" in line


def test_unwritable_cache_directory(tmp_path):
    cache = a_file(tmp_path) / "cache"
    line = one_clean_line(polygpu("check", "kernels/mv.c", "-p", "n=8",
                                  env={"POLYGPU_CACHE_DIR": str(cache)}))
    assert "build cache" in line and "POLYGPU_CACHE_DIR" in line


def test_require_writable_dir_leaves_nothing(tmp_path):
    from polygpu.output import require_writable_dir

    require_writable_dir(tmp_path / "a" / "b", "output directory")
    assert list(tmp_path.iterdir()) == []  # neither created nor probed-and-left
    with pytest.raises(PolygpuError, match="not a directory"):
        require_writable_dir(a_file(tmp_path) / "x", "output directory")


def test_db_export_writes_whole_or_nothing(tmp_path):
    line = one_clean_line(polygpu("db", "--db", str(tmp_path / "none.sqlite"), "export",
                                  "-o", str(a_file(tmp_path) / "x.csv")))
    assert "cannot write" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain-file"]


# -- parameter values: compile validates like check ----------------------------------------

@pytest.mark.parametrize("value, message", [
    ("-5", "violate the region's assumptions"),
    ("1000000000000", "does not fit its C type (int n"),
    ("1.5", "needs an integer"),
])
@pytest.mark.parametrize("command", ["compile", "check"])
def test_parameter_values_are_validated_alike(tmp_path, command, value, message):
    extra = ["-o", str(tmp_path / "out")] if command == "compile" else []
    line = one_clean_line(polygpu(command, "kernels/mm.c", "-p", f"n={value}", *extra))
    assert line.startswith("kernels/mm.c:") and message in line
    assert not (tmp_path / "out").exists()


def test_unknown_parameter_lists_the_functions_parameters():
    line = one_clean_line(polygpu("check", "kernels/gemm.c", "-p", "ni=8", "-p", "nj=8",
                                  "-p", "nk=8", "-p", "gamma=2"))
    assert "no parameter gamma" in line
    assert "int ni" in line and "float alpha" in line and "float beta" in line


def test_parameter_values_split_ints_and_float_scalars():
    program = load("kernels/gemm.c")
    ints, scalars = inputs.parameter_values(
        program, {"ni": 3, "nj": 4, "nk": 5, "alpha": 1.5, "beta": 2})
    assert ints == {"ni": 3, "nj": 4, "nk": 5} and scalars == {"alpha": 1.5, "beta": 2.0}
    with pytest.raises(PolygpuError, match="needs an integer"):
        inputs.parameter_values(program, {"ni": 3.0})
    with pytest.raises(PolygpuError, match="not a finite float"):
        inputs.parameter_values(program, {"alpha": float("inf")})
    with pytest.raises(PolygpuError, match="missing parameter nj"):
        inputs.parameter_values(program, {"ni": 3}, need_all=True)
    shapes = inputs.array_shapes(program, ints)
    values = inputs.random_values(program, ints, shapes, np.random.default_rng(0),
                                  scalars=scalars)
    assert values["alpha"] == 1.5 and values["beta"] == 2.0
    drawn = inputs.random_values(program, ints, shapes, np.random.default_rng(0))
    assert inputs.FLOAT_LOW <= drawn["alpha"] < inputs.FLOAT_HIGH


def test_float_parameter_values_parse():
    assert cli.arguments.parse_params(["n=12", "alpha=1.5", "beta=-2e3"]) == {
        "n": 12, "alpha": 1.5, "beta": -2000.0}
    with pytest.raises(PolygpuError, match="'abc' is not a number"):
        cli.arguments.parse_params(["alpha=abc"])


def test_compile_accepts_a_float_scalar(tmp_path):
    result = polygpu("compile", "kernels/gemm.c", "-p", "ni=64", "-p", "alpha=1.5",
                     "-o", str(tmp_path))
    assert result.returncode == 0, result.stderr


# -- analyze --traffic at huge sizes ---------------------------------------------------------

def test_traffic_at_huge_sizes_returns_within_seconds():
    # counted symbolically (barvinok): the exact counts, not a refusal, in seconds
    start = time.monotonic()
    result = polygpu("analyze", "kernels/mm.c", "--traffic", "--json", "-p", "n=2000000000",
                     timeout=120)
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - start < 60  # seconds unloaded; 2 shared cores in CI
    traffic = {t["array"]: t for t in json.loads(result.stdout)["traffic"]}
    n = 2_000_000_000
    assert traffic["c"]["loads"] == traffic["c"]["stores"] == n * n  # c read and written once


# -- compiler diagnostics are shown in full -----------------------------------------------------

CONFLICTING = """\
#include <stdlib.h>

void abs(int n, float a[n])
{
#pragma scop
  for (int i = 0; i < n; i++)
    a[i] = a[i] + 1.0f;
#pragma endscop
}
"""


def test_compiler_diagnostic_is_shown_in_full(tmp_path):
    # pycparser reads fake headers and accepts it; gcc sees stdlib.h's abs
    source = tmp_path / "abs.c"
    source.write_text(CONFLICTING)
    result = polygpu("check", str(source), "-p", "n=10",
                     env={"POLYGPU_CACHE_DIR": str(tmp_path / "cache")})
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert "gcc says:" in lines[0] and len(lines) > 2
    assert any("error: conflicting types for 'abs'" in x for x in lines)
    assert not lines[-1].endswith(":")


def test_cli_prints_multi_line_errors_whole_and_one_line_errors_as_one(monkeypatch, capsys):
    def fail(message):
        def run(args):
            raise PolygpuError(message)
        return run

    message = "cannot compile x; g++ says:\nx.cc:1:1: error: bad\n    1 | bad\n      | ^~~"
    parser = cli.build_parser()
    real = parser.parse_args

    def parse(argv=None):
        args = real(argv)
        args.run = fail(message)
        return args
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    monkeypatch.setattr(parser, "parse_args", parse)
    assert cli.main(["analyze", "kernels/mv.c"]) == 2
    assert capsys.readouterr().err == message + "\n"
    message = "kernels/mv.c:3: one line"
    assert cli.main(["analyze", "kernels/mv.c"]) == 2
    assert capsys.readouterr().err == message + "\n"


def test_long_diagnostics_are_trimmed_with_a_note(tmp_path):
    output = "\n".join(["x.c: In function 'f':", "x.c:2:1: error: first"]
                       + [f"note {k}" for k in range(100)])
    text = compiler.first_errors(output, log=tmp_path / "x.log")
    lines = text.splitlines()
    assert lines[0] == "x.c: In function 'f':" and len(lines) == compiler.DIAGNOSTIC_LINES + 1
    assert lines[-1] == f"[... 62 more lines; the full output is in {tmp_path / 'x.log'}]"
    assert compiler.first_errors("") == "(no output; exit status only)"


def test_build_error_keeps_the_full_log(tmp_path, monkeypatch):
    monkeypatch.setenv("POLYGPU_CACHE_DIR", str(tmp_path))
    bad = "\n".join(f"int f{k}(void) {{ return x{k}; }}" for k in range(60))
    with pytest.raises(compiler.CompileError) as err:
        compiler.build_shared_library(bad, "gcc", ("-x", "c", "-shared", "-fPIC"),
                                      stem="bad", suffix=".c", what="a test source")
    text = str(err.value)
    assert "gcc says:" in text and "error:" in text and "more lines" in text
    logs = list(tmp_path.glob("bad-*.log"))
    assert len(logs) == 1 and str(logs[0]) in text
    assert not list(tmp_path.glob("*.so"))


# -- other mistakes ----------------------------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    (["analyze", "kernels/no_such.c"], "no such file"),
    (["analyze", "kernels"], "unknown input kind"),
    (["analyze", "kernels/mv.c:nosuch"], "no function 'nosuch'"),
    (["analyze", "kernels/mv.py:nosuch"], "no top-level function 'nosuch'"),
    (["compile", "kernels/mv.c", "-o", "kernels/mv.c"], "is a file, not a directory"),
    (["compile", "kernels/mv.c", "-o", "OUT", "--variant", "{bad"], "not valid JSON"),
    (["compile", "kernels/mv.c", "-o", "OUT", "--variant", '{"tiles": [4]}'],
     "unknown field"),
    (["compile", "kernels/mv.c", "-o", "OUT", "--tile", "4,4", "--threads", "4"],
     "must have the same length"),
    (["compile", "kernels/mv.c", "-o", "OUT", "--tile", "a,b"], "expected integers"),
    (["compile", "kernels/mv.c", "-o", "OUT", "-p", "n=x"], "is not a number"),
    (["check", "kernels/mv.c"], "missing parameter n"),
    (["tune", "kernels/mv.c", "-o", "OUT", "--no-db", "--replay", "x.json"],
     "tune needs a value for n"),
    (["tune", "kernels/mv.c", "-p", "n=64", "--check-param", "n=0", "-o", "OUT",
      "--no-db", "--replay", "x.json"], "violate the region's assumptions"),
    (["db", "--db", "kernels", "list"], "cannot use the tuning database"),
])
def test_other_mistakes_are_one_clean_line(tmp_path, args, message):
    args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
    line = one_clean_line(polygpu(*args))
    assert message in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args", [
    ["compile", "kernels/mv.c", "-o", "OUT", "--candidate", "-1"],
    ["check", "kernels/mv.c", "-p", "n=8", "--backend", "tpu"],
    ["tune", "kernels/mv.c", "-p", "n=8", "-o", "OUT", "--strategy", "best"],
])
def test_other_usage_errors(tmp_path, args):
    usage_error(polygpu(*[str(tmp_path / "out") if a == "OUT" else a for a in args]))


def test_tune_refuses_sizes_at_which_an_access_leaves_its_array(tmp_path):
    # once, before any candidate is compiled (each would fail its check otherwise)
    src = tmp_path / "ten.c"
    src.write_text("void ten(int n, float a[10], float b[n])\n{\n#pragma scop\n"
                   "  for (int i = 0; i < n; i++)\n    b[i] = 2 * a[i];\n#pragma endscop\n}\n")
    out = tmp_path / "out"
    line = one_clean_line(polygpu("tune", str(src), "-p", "n=11", "--backend", "cpu",
                                  "--no-db", "-o", str(out)))
    assert line.startswith(f"{src}:5: a[i] reads outside array 'a'") and "n = 11" in line
    assert not out.exists()
