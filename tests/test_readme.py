"""The README's two commands are exactly what CI runs."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ci_runs_the_readme_commands():
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"```sh\n(.+?)\n```", readme)
    setup, tests = commands[0], commands[1]
    assert "pip install -e" in setup and "polygpu analyze kernels/" in setup
    assert "pytest" in tests
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert setup in ci_lines and tests in ci_lines
