"""`mypy --strict` on the whole package (the [tool.mypy] section of pyproject.toml): typed all
the way down. `.ci/run` runs the same check; this test keeps it in the test run too."""

from __future__ import annotations

import os
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


@pytest.mark.slow
def test_a_pydantic_constructor_is_checked_with_its_fields_types(tmp_path: Path) -> None:
    """pydantic's mypy plugin checks constructors (`init_typed`): a result built with wrong
    types is a type error, not a value that passes until run time."""
    (tmp_path / "wrong.py").write_text(
        "from orchestrator import RunResult\n\n"
        'RunResult(agent=1, status="nonsense", steps="many")\n'
    )
    command = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")]
    command += ["--strict", "--no-incremental", "wrong.py"]
    done = subprocess.run(
        command,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "MYPYPATH": str(ROOT)},
    )
    assert done.returncode == 1, done.stdout + done.stderr
    for field in ('"agent"', '"status"', '"steps"'):
        assert f'Argument {field} to "RunResult"' in done.stdout, done.stdout
