"""`mypy --strict` (the [tool.mypy] section of pyproject.toml) on the rooms already typed all the
way (issue #25). The other rooms join the list as they become clean; then the whole package
goes to .ci/run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy")

ROOT = Path(__file__).resolve().parent.parent
TYPED = [
    "orchestrator/__init__.py",
    "orchestrator/__main__.py",
    "orchestrator/_builtin",
    "orchestrator/cli",
    "orchestrator/errors.py",
    "orchestrator/messages.py",
    "orchestrator/ray",
    "orchestrator/report",
    "orchestrator/security",
    "orchestrator/telemetry",
    "orchestrator/testing.py",
    "orchestrator/tokens.py",
    "orchestrator/trace",
]


@pytest.mark.slow
def test_the_typed_rooms_pass_mypy_strict() -> None:
    # Imported modules of other rooms are read for their types, their own findings left out.
    command = [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", *TYPED]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
