"""End-to-end tests of ``polygpu analyze`` through the real command line.

The bad-input corpus lives in ``tests/bad_inputs/``: each file says on its first line
``// expect: TEXT`` (or ``# expect: TEXT``), Python files name the function on the
second line (``# function: NAME``), and the offending line carries the marker
``<- error``.  A file may name the command it fails under in its first lines
(``// command: check -p n=11``; default ``analyze``): mistakes that depend on the
sizes, such as an access outside its array at these sizes, are found by ``check`` and
``compile``.  Each must give exactly one line ``FILE:LINE: ...TEXT...`` on stderr,
nothing on stdout, and exit status 2.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests import inprocess

ROOT = Path(__file__).resolve().parent.parent
BAD = sorted((ROOT / "tests" / "bad_inputs").glob("*.[cp]*"))


def process(*args: str) -> subprocess.CompletedProcess:
    """The real entry point, ``python -m polygpu``, in a child process."""
    return subprocess.run([sys.executable, "-m", "polygpu", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


polygpu = inprocess.polygpu  # main() in this process: the same status and output


@pytest.mark.parametrize("spec", ["kernels/mv.c", "kernels/tmv.c", "kernels/mvt.c",
                                  "kernels/mm.c", "kernels/mv.py:mv", "kernels/mm.py:mm"])
def test_analyze_json_is_one_object_with_the_documented_keys(spec):
    result = polygpu("analyze", spec, "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)  # exactly one JSON document, nothing else
    assert data["function"] == Path(spec.split(":")[0]).stem
    assert data["parameters"] == ["n"]
    for s in data["statements"]:
        assert set(s) >= {"name", "domain", "line"} and s["domain"].startswith("[n] -> {")
    for a in data["accesses"]:
        assert set(a) >= {"statement", "array", "kind", "relation", "reuse", "line"}
        assert a["kind"] in ("read", "write")
        assert a["reuse"] in ("no-reuse", "reuse", "constant", "register")
    assert data["dependences"], "every shipped kernel has a reduction dependence"
    for d in data["dependences"]:
        assert set(d) >= {"kind", "source", "sink", "relation"}
        assert d["kind"] in ("flow", "anti", "output")


def test_analyze_tmv_json_golden_values():
    data = json.loads(polygpu("analyze", "kernels/tmv.c", "--json").stdout)
    by_text = {(a["text"], a["kind"]): a for a in data["accesses"]}
    assert by_text["a[j][i]", "read"]["rank"] == 2
    assert by_text["a[j][i]", "read"]["reuse"] == "no-reuse"
    assert by_text["y[j]", "read"]["higher_order_reuse"] is True
    assert [lp["parallel"] for lp in data["loops"]] == [True, False]


def test_analyze_report_has_the_tables():
    result = polygpu("analyze", "kernels/mm.c")
    assert result.returncode == 0, result.stderr
    for title in ("Statements", "Accesses and reuse", "Dependences", "Loops"):
        assert title in result.stdout
    assert "c[i][j]" in result.stdout and "parallel" in result.stdout


def _command(path: Path) -> list[str]:
    for line in path.read_text().splitlines()[:4]:
        if m := re.match(r"(?://|#)\s*command:\s*(.+)", line):
            return m.group(1).split()
    return ["analyze"]


def _expectation(path: Path) -> tuple[str, str | None, int]:
    lines = path.read_text().splitlines()
    expect = re.match(r"(?://|#)\s*expect:\s*(.+)", lines[0]).group(1).strip()
    function = None
    if len(lines) > 1 and (m := re.match(r"(?://|#)\s*function:\s*(\w+)", lines[1])):
        function = m.group(1)
    marked = [k + 1 for k, line in enumerate(lines) if "<- error" in line]
    assert len(marked) == 1, f"{path.name}: mark the offending line with '<- error'"
    return expect, function, marked[0]


def test_bad_input_corpus_is_large_enough():
    assert len(BAD) >= 15


@pytest.mark.parametrize("path", BAD, ids=[p.name for p in BAD])
def test_bad_input_gets_one_line_error(path):
    expect, function, line = _expectation(path)
    rel = str(path.relative_to(ROOT))
    spec = f"{rel}:{function}" if path.suffix == ".py" else rel
    command = _command(path)
    result = polygpu(command[0], spec, *command[1:])
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    err = result.stderr.rstrip("\n")
    assert "\n" not in err and "Traceback" not in err, err
    assert err.startswith(f"{rel}:{line}: "), err
    assert expect in err, err


def test_debug_shows_the_traceback():
    path = next(p for p in BAD if p.suffix == ".c")
    result = process("--debug", "analyze", str(path.relative_to(ROOT)))
    assert result.returncode == 2 and "Traceback" in result.stderr


def test_missing_file_is_a_clean_error():
    result = process("analyze", "kernels/no_such_kernel.c")
    assert result.returncode == 2
    assert "no_such_kernel.c" in result.stderr and "Traceback" not in result.stderr


def test_out_of_bounds_warning_goes_to_stderr_and_json(tmp_path):
    src = tmp_path / "oob.c"
    src.write_text("void f(int n, float a[n], float b[n])\n{\n#pragma scop\n"
                   "  for (int i = 0; i < n; i++)\n    b[i] = a[i + 1];\n#pragma endscop\n}\n")
    result = polygpu("analyze", str(src), "--json")
    assert result.returncode == 0
    assert result.stderr.startswith(f"{src}:5: warning: a[(i + 1)] may access outside")
    assert len(json.loads(result.stdout)["warnings"]) == 1


def test_closed_pipe_is_not_an_error(tmp_path):
    # 40 statements: a JSON report larger than a pipe's buffer, so the write does fail
    body = "".join(f"    a[i] += b[i + {k % 3}];\n" for k in range(40))
    src = tmp_path / "big.c"
    src.write_text("void f(int n, float a[n], float b[n + 2])\n{\n#pragma scop\n"
                   f"  for (int i = 0; i < n; i++) {{\n{body}  }}\n#pragma endscop\n}}\n")
    proc = subprocess.Popen([sys.executable, "-m", "polygpu", "analyze", str(src), "--json"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.read(10)
    proc.stdout.close()
    assert proc.wait(timeout=120) == 0
    assert b"internal error" not in proc.stderr.read()


def test_function_suffix_on_a_c_file_and_debug_after_the_subcommand():
    ok = polygpu("analyze", "kernels/mvt.c:mvt", "--json")
    assert ok.returncode == 0 and json.loads(ok.stdout)["function"] == "mvt"
    missing = polygpu("analyze", "kernels/mvt.c:nope", "--debug")
    assert missing.returncode == 2 and "Traceback" in missing.stderr and "nope" in missing.stderr
    clash = polygpu("analyze", "kernels/mv.py:mv", "--function", "mm")
    assert clash.returncode == 2 and "named twice" in clash.stderr



def _imported_modules(source: str, package: str) -> set[str]:
    """Every module ``source`` (a module of ``package``) imports, at any depth, relative
    imports made absolute; ``from A import B`` counts as A and as A.B."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            base = node.module or ""
            if node.level:
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def _imports_cli(source: str, package: str) -> bool:
    return any(m == "polygpu.cli" or m.startswith("polygpu.cli.")
               for m in _imported_modules(source, package))


def test_the_search_never_imports_the_cli():
    """The CLI imports the search, never the reverse (no import cycle): what both need
    lives below them (polygpu.params, polygpu.output)."""
    # the check sees such an import wherever it hides
    for text in ("import polygpu.cli\n", "from polygpu import cli\n",
                 "def f():\n    from polygpu.cli.arguments import parse_params\n",
                 "from ..cli import main\n"):
        assert _imports_cli(text, "polygpu.search"), text
    assert not _imports_cli("from polygpu import client, params\n", "polygpu.search")
    files = sorted((ROOT / "polygpu" / "search").rglob("*.py"))
    assert len(files) > 5
    offenders = [str(f.relative_to(ROOT)) for f in files
                 if _imports_cli(f.read_text(), ".".join(f.relative_to(ROOT).parts[:-1]))]
    assert not offenders, f"these modules of polygpu.search import polygpu.cli: {offenders}"


def test_check_reports_an_inconclusive_verdict_as_such(monkeypatch):
    # runtime/check.py's INCONCLUSIVE (inputs too ill-conditioned to tell a wrong result
    # from rounding) was printed as MISMATCH with status 1; it is neither a pass nor a
    # mismatch: its own verdict and status 4 (docs/cli.md)
    import dataclasses

    from polygpu.runtime import check

    inconclusive = check.CheckResult(
        ok=False, max_relative_error={"x": 1e-8}, threshold=1e-10, seed=5,
        message="mv at n=8, seed 5, cpu: INCONCLUSIVE: inputs too ill-conditioned for a "
        "meaningful check\n  x[3] ...", inconclusive=True)
    verdicts = {"INCONCLUSIVE": (inconclusive, 4),
                "MISMATCH": (dataclasses.replace(inconclusive, inconclusive=False,
                                                 message="mv: WRONG"), 1),
                "ok": (dataclasses.replace(inconclusive, ok=True,
                                           inconclusive=False, message="mv: ok"), 0)}
    for word, (result, status) in verdicts.items():
        monkeypatch.setattr(check, "check_program", lambda *a, result=result, **k: result)
        done = inprocess.polygpu("check", "kernels/mv.c", "-p", "n=8")
        assert done.returncode == status, (word, done.stdout, done.stderr)
        assert done.stdout.startswith(f"{word}: mv (")
        assert result.message in done.stdout
