"""Our A2A client against an agent built with the JavaScript SDK (`@a2a-js/sdk`, run with
node): tests/a2a_js/ holds the agent and its locked packages, which `.ci/run` installs with
`npm ci`. Without them (or without node) the test is skipped, saying why."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from trace_lines import trace_lines

pytest.importorskip("a2a", reason="the [a2a] extra is not installed")

from a2a_helpers import call, write_job

from orchestrator.jobs import Job, load_job
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


@contextlib.asynccontextmanager
async def node_agent(tmp_path: Path, task: str) -> AsyncIterator[Job]:
    """The node agent running while the block runs; yields a job whose planner forks it
    `task`."""
    assert NODE is not None
    server = await asyncio.create_subprocess_exec(
        NODE, str(AGENT / "server.mjs"), cwd=AGENT, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert server.stdout is not None
        url = (await asyncio.wait_for(server.stdout.readline(), 30)).decode().strip()
        script = {
            "goal": [
                call("fork", tasks=[{"id": "js", "agent": "node", "task": task}]),
                {"content": "done"},
            ]
        }
        yield load_job(write_job(tmp_path, SPEC.replace("URL", url), script, "to-node"))
    finally:
        server.terminate()
        await server.wait()


async def test_a_javascript_sdk_agent_is_forked_like_any_other(tmp_path: Path) -> None:
    async with node_agent(tmp_path, "hello node") as job:
        result = await run_job(job, trace=tmp_path / "run.jsonl")
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


async def test_a_javascript_sdk_agent_that_asks_gets_the_answer_on_the_same_task(
    tmp_path: Path,
) -> None:
    """The node agent asks for input; our run waits with its question, and resumed with the
    answer, sends it to the same task, which completes with it. The agent sends the task as
    it stood (still asking) before its end: that is not taken for a second question."""
    from orchestrator import Orchestrator

    trace = tmp_path / "run.jsonl"
    async with node_agent(tmp_path, "ask about colours") as job:
        first = await run_job(job, trace=trace)
        [waiting] = first.waiting
        second = await Orchestrator.resume(trace, answers={waiting.id: "blue"})
    assert first.status == "input_required"
    assert (waiting.kind, waiting.question) == ("remote", "Which colour, node asks?")
    assert second.status == "completed", second
    events = list(trace_lines(trace))
    [task_id] = {e["task_id"] for e in events if e["type"] == "a2a_task"}
    answers = [e for e in events if e["type"] == "a2a_send" and e.get("answer")]
    assert [(e["task_id"], e["answer"]) for e in answers] == [(task_id, waiting.id)]
    observation = [
        str(e["message"]["content"]) for e in events
        if e["type"] == "message" and e["message"]["role"] == "tool"
    ][-1]  # fmt: skip
    assert "### js [completed] agent=node" in observation
    assert "node was told: blue" in observation and "Which colour" not in observation
    ends = [e["status"] for e in events if e["type"] == "a2a_end"]
    assert ends == ["input_required", "completed"]
