"""`mypy --strict` on a file of a user's own, as the project's config and an installed package
would check it: for tests that show what the type checker catches in code that uses us."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def mypy_on(folder: Path, name: str) -> subprocess.CompletedProcess[str]:
    """`mypy --strict` run on `folder / name`, from `folder`."""
    command = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")]
    return subprocess.run(
        [*command, "--strict", "--no-incremental", name],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "MYPYPATH": str(ROOT)},
    )


def error_lines(done: subprocess.CompletedProcess[str]) -> list[str]:
    """The errors mypy reported, one line each."""
    return [line for line in done.stdout.splitlines() if ": error:" in line]
