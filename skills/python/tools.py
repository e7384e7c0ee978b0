"""Tools of the `python` skill: run a Python snippet in a separate process (CodeAct style).

Off unless the run's permissions have `python=True`. The snippet is written to a temporary
file and run in the run's sandbox (`permissions.sandbox`, docs/sandbox.md) by the same
interpreter as the orchestrator (a container's own `python3`), with the workspace as its
working folder and on its import path, a timeout that kills it, and capped output.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from orchestrator import ToolContext, tool
from orchestrator.security.sandbox import command_sandbox
from orchestrator.skills.process import (
    DEFAULT_TIMEOUT,
    child_environment,
    clamp_timeout,
    run_process,
)


@tool
async def run(code: str, ctx: ToolContext, timeout_seconds: float = DEFAULT_TIMEOUT) -> str:
    """Run a Python program in a fresh process; returns its exit code and what it printed.

    Nothing carries over between calls: import, compute and print in one snippet.

    Args:
        code: The Python source to run; print() the results you want to see.
        timeout_seconds: Seconds before the process is killed (1-600).
    """
    permissions = ctx.permissions
    permissions.require_python()
    root = permissions.workspace_root()
    sandbox = command_sandbox(permissions)
    seconds = sandbox.timeout(clamp_timeout(timeout_seconds))
    inherited = os.environ.get("PYTHONPATH") if sandbox.backend == "none" else None
    search_path = os.pathsep.join(filter(None, [str(root), inherited]))
    env = child_environment(
        {"PYTHONPATH": search_path, "PYTHONIOENCODING": "utf-8", "PYTHONUNBUFFERED": "1"}
    )
    with tempfile.TemporaryDirectory(prefix="orchestrator-python-") as folder:
        script = Path(folder) / "snippet.py"
        script.write_text(code, encoding="utf-8")
        result = await run_process(
            [sandbox.python(), str(script)],
            cwd=root,
            timeout_seconds=seconds,
            env=env,
            sandbox=sandbox,
            read_only=[Path(folder)],
        )
    return result.render(seconds)
