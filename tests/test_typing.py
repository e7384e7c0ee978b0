"""`mypy --strict` on the whole package (the [tool.mypy] section of pyproject.toml): typed all
the way down. `.ci/run` runs the same check; this test keeps it in the test run too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy")

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_the_package_passes_mypy_strict() -> None:
    command = [sys.executable, "-m", "mypy", "--strict", "orchestrator"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
