"""The README's two commands are exactly what CI runs."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ci_runs_the_readme_commands():
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"```sh\n(.+?)\n```", readme)
    setup, tests = commands[0], commands[1]
    assert "pip install -e" in setup and "polygpu check kernels/" in setup
    assert "pytest" in tests
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert setup in ci_lines and tests in ci_lines


def test_cli_docs_show_the_current_help():
    import os
    import subprocess
    import sys

    env = dict(os.environ, COLUMNS="80")
    docs = (ROOT / "docs" / "cli.md").read_text()
    for args in (["--help"], ["analyze", "--help"], ["compile", "--help"], ["check", "--help"],
                 ["tune", "--help"], ["db", "--help"]):
        out = subprocess.run([sys.executable, "-m", "polygpu", *args], cwd=ROOT, env=env,
                             capture_output=True, text=True).stdout
        assert out.replace("python -m polygpu", "polygpu") in docs, args
