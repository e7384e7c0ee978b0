"""What the sandbox costs per command: `run_process` through each backend against `none`.

    python bench/sandbox_cost.py [--calls 50] [--commands true python]

Each figure is the median of `--calls` commands, one after another, with [p10, p90], in
milliseconds, measured around `run_process` as the shell and python tools call it: `true`
through bash, and `python -c pass` (the interpreter's start is most of it). Rows: `none`
(the command as the user), `bubblewrap` (namespaces, mounts, the cgroups made and removed),
`bubblewrap + network` (the proxy started and stopped, and the forwarder inside). A backend
that cannot run here is reported as such.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from orchestrator.security import Permissions, SandboxSettings
from orchestrator.security.sandbox import bubblewrap_runs, command_sandbox
from orchestrator.skills.process import run_process

COMMANDS = {
    "true": [shutil.which("bash") or "/bin/sh", "-c", "true"],
    "python": [sys.executable, "-c", "pass"],
}
SETUPS = {
    "none": SandboxSettings(backend="none"),
    "bubblewrap": SandboxSettings(backend="bubblewrap"),
    "bubblewrap + network": SandboxSettings(backend="bubblewrap", network=("127.0.0.1:9",)),
}


async def timed(
    workspace: Path, settings: SandboxSettings, argv: list[str], calls: int
) -> list[float]:
    """Milliseconds of each of `calls` commands, after 3 unmeasured ones."""
    sandbox = command_sandbox(Permissions(workspace=workspace, shell=True, sandbox=settings))
    spent = []
    for index in range(calls + 3):
        began = time.perf_counter()
        result = await run_process(argv, cwd=workspace, sandbox=sandbox)
        if result.exit_code != 0:
            raise RuntimeError(f"{argv} failed in {settings.backend}: {result.output}")
        if index >= 3:
            spent.append((time.perf_counter() - began) * 1e3)
    return spent


def shown(values: list[float]) -> str:
    tenths = statistics.quantiles(values, n=10)
    return f"{statistics.median(values):.1f} ms [{tenths[0]:.1f}, {tenths[8]:.1f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=50, help="measured commands per figure")
    parser.add_argument("--commands", nargs="+", default=list(COMMANDS), choices=list(COMMANDS))
    args = parser.parse_args()
    print("| command | " + " | ".join(SETUPS) + " |")
    print("| --- |" + " --- |" * len(SETUPS))
    with tempfile.TemporaryDirectory() as folder:
        workspace = Path(folder).resolve()
        for name in args.commands:
            cells = []
            for settings in SETUPS.values():
                if settings.backend == "bubblewrap" and bubblewrap_runs() is not None:
                    cells.append(f"unavailable ({bubblewrap_runs()})")
                    continue
                spent = asyncio.run(timed(workspace, settings, COMMANDS[name], args.calls))
                cells.append(shown(spent))
            print(f"| `{name}` | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
