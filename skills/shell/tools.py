"""Tools of the `shell` skill: one shell command at a time, in the workspace.

Off unless the run's permissions have `shell=True`. The command runs in the run's sandbox
(`permissions.sandbox`, docs/sandbox.md), in its own process group with a timeout that kills
the whole group, and its output is capped.
"""

from __future__ import annotations

import shutil

from orchestrator import ToolContext, tool
from orchestrator.security.sandbox import command_sandbox
from orchestrator.skills.process import DEFAULT_TIMEOUT, clamp_timeout, run_process


@tool
async def run(command: str, ctx: ToolContext, timeout_seconds: float = DEFAULT_TIMEOUT) -> str:
    """Run a shell command in the workspace; returns its exit code and its output.

    stdout and stderr come back together; long output keeps its beginning and its end.

    Args:
        command: The command line, run by bash (or sh) with the workspace as working folder.
        timeout_seconds: Seconds before the command and everything it started are killed (1-600).
    """
    permissions = ctx.permissions
    permissions.require_shell()
    sandbox = command_sandbox(permissions)
    shell = shutil.which("bash") or "/bin/sh"
    seconds = sandbox.timeout(clamp_timeout(timeout_seconds))
    result = await run_process(
        [shell, "-c", command],
        cwd=permissions.workspace_root(),
        timeout_seconds=seconds,
        sandbox=sandbox,
    )
    return result.render(seconds)
