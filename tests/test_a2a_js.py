"""Our A2A client against an agent built with the JavaScript SDK (`@a2a-js/sdk`, run with
node): tests/a2a_js/ holds the agent and its locked packages, which `.ci/run` installs with
`npm ci`. Without them (or without node) the test is skipped, saying why."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from trace_lines import trace_lines

pytest.importorskip("a2a", reason="the [a2a] extra is not installed")

from a2a_helpers import call, write_job

from orchestrator.jobs import load_job
from orchestrator.planner import run_job

AGENT = Path(__file__).resolve().parent / "a2a_js"
NODE = shutil.which("node")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(NODE is None, reason="node is not installed"),
    pytest.mark.skipif(
        not (AGENT / "node_modules" / "@a2a-js" / "sdk").is_dir(),
        reason="the JavaScript SDK is not installed: run `npm ci` in tests/a2a_js",
    ),
]
SPEC = """\
name: to-node
model: scripted:SCRIPT
agents:
  node: {a2a: "URL", time_limit: 30}
goal: Ask node.
"""


async def test_a_javascript_sdk_agent_is_forked_like_any_other(tmp_path: Path) -> None:
    assert NODE is not None
    server = await asyncio.create_subprocess_exec(
        NODE, str(AGENT / "server.mjs"), cwd=AGENT, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert server.stdout is not None
        url = (await asyncio.wait_for(server.stdout.readline(), 30)).decode().strip()
        script = {
            "goal": [
                call("fork", tasks=[{"id": "js", "agent": "node", "task": "hello node"}]),
                {"content": "done"},
            ]
        }
        job = load_job(write_job(tmp_path, SPEC.replace("URL", url), script, "to-node"))
        result = await run_job(job, trace=tmp_path / "run.jsonl")
    finally:
        server.terminate()
        await server.wait()
    assert result.status == "completed"
    events = list(trace_lines(tmp_path / "run.jsonl"))
    observation = next(
        str(e["message"]["content"]) for e in events
        if e["type"] == "message" and e["message"]["role"] == "tool"
    )  # fmt: skip
    assert "### js [completed] agent=node" in observation
    assert "node echo: hello node" in observation
    assert '<artifact name="shout.txt">\nHELLO NODE' in observation
    assert "its cost is unknown" in observation
    states = [e["state"] for e in events if e["type"] == "a2a_status"]
    assert states == ["submitted", "working", "completed"]
