"""Serving jobs over A2A in a test: real specs, scripted models, the server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from orchestrator.a2a import serve
from orchestrator.jobs import Job, load_job


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "arguments": arguments}]}


# A job whose one call asks a person first (`shell: ask`): its task waits for an answer.
ASK = """\
name: asker
model: scripted:SCRIPT
permissions: {workspace: ./work, shell: ask}
goal: Overwritten.
"""
ASK_SCRIPT = {
    "goal": [
        call("load_skill", name="shell"),
        call("shell__run", command="touch approved.txt"),
        {"content": "done"},
    ]
}

# A job whose agent asks the user (`questions: true`): one of two cities.
PICKER = """\
name: picker
model: scripted:SCRIPT
questions: true
goal: Overwritten.
"""
PICKER_SCRIPT = {
    "goal": [
        call("ask_user", question="Which city?", choices=["Paris", "Rome"]),
        {"content": "going to Rome"},
    ]
}


def write_job(folder: Path, spec: str, script: dict[str, Any], name: str = "job") -> Path:
    """A job spec and its scripted model's turns, in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.script.yaml").write_text(yaml.safe_dump(script))
    path = folder / f"{name}.yaml"
    path.write_text(spec.replace("SCRIPT", f"{name}.script.yaml"))
    return path


def load_served(path: Path) -> Job:
    return load_job(path, open_inputs=True)


@contextlib.asynccontextmanager
async def served(jobs: Sequence[Job], trace_dir: Path, **options: Any) -> AsyncIterator[str]:
    """Serve `jobs` on a free port of 127.0.0.1 while the block runs; yields the agent URL."""
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    server = asyncio.create_task(
        serve(jobs, port=0, trace_dir=trace_dir, ready=ready.set_result, **options)
    )
    try:
        done, _ = await asyncio.wait([ready, server], return_when=asyncio.FIRST_COMPLETED)
        if server in done:
            server.result()  # raises what stopped it
        yield ready.result()
    finally:
        server.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await server
