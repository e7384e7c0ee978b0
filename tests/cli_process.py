"""Running the `orchestrator` command line as a user does: a real process, output captured."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path


def orchestrator(
    *args: str | Path,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """`python -m orchestrator ARGS` in `cwd`, with `env` on top of this environment and
    `stdin` as its standard input (None: this process's)."""
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *map(str, args)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, **env} if env is not None else None,
    )
