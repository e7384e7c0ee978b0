"""Remote A2A agents as sub-agents: our client against an agent built with the Python SDK,
and against servers that misbehave. Real specs, scripted planners, servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import io
import sys
from pathlib import Path
from typing import Any

import pytest
from trace_lines import trace_lines

pytest.importorskip("a2a", reason="the [a2a] extra is not installed")

from a2a_helpers import call, write_job
from a2a_servers import EchoAgent, Misbehaviour, hostile_agent, sdk_agent

from orchestrator import read_trace
from orchestrator.cli.progress import PlainProgress
from orchestrator.jobs import SpecError, load_job
from orchestrator.planner import run_job
from orchestrator.tasks import SubagentRegistry
from orchestrator.trace import Trace
from orchestrator.trace.summary import summarize

SPEC = """\
name: remote
model: scripted:SCRIPT
budget: {max_tokens: 100000}
agents:
  echo: {a2a: "URL", time_limit: LIMIT, description: Echoes what it is sent.}
goal: Use the echo agent.
"""


def fork_script(tasks: list[dict[str, Any]], **agents: list[dict[str, Any]]) -> dict[str, Any]:
    return {"goal": [call("fork", tasks=tasks), {"content": "done"}], **agents}


def remote_job(tmp_path: Path, url: str, script: dict[str, Any], limit: float = 10) -> Path:
    spec = SPEC.replace("URL", url).replace("LIMIT", str(limit))
    return write_job(tmp_path, spec, script, "remote")


def fork_observation(trace: Path) -> str:
    for event in trace_lines(trace):
        message = event.get("message") or {}
        content = str(message.get("content", ""))
        if message.get("role") == "tool" and content.startswith("Fork finished"):
            return content
    raise AssertionError("no fork observation in the trace")


def events_of(trace: Path, kind: str) -> list[dict[str, Any]]:
    return [e for e in trace_lines(trace) if e["type"] == kind]


async def test_a_remote_sdk_agent_is_forked_like_any_other(tmp_path: Path) -> None:
    agent = EchoAgent()
    script = fork_script(
        [
            {"id": "far", "agent": "echo", "task": "repeat after me"},
            {"id": "near", "task": "Use what came back.", "depends_on": ["far"]},
        ],
        **{"goal/near": [{"content": "near done"}]},
    )
    shown = io.StringIO()
    trace = tmp_path / "run.jsonl"
    async with sdk_agent(agent) as url:
        job = load_job(remote_job(tmp_path, url, script))
        with Trace(trace, listeners=[PlainProgress(shown)]) as written:
            result = await run_job(job, trace=written)
    assert result.status == "completed"
    assert agent.received == ["repeat after me"]
    # The live view's plain twin shows the remote task as it streams, then its end.
    lines = [line.split("] ", 1)[1] for line in shown.getvalue().splitlines()]
    assert "goal/far: remote task working: thinking" in lines
    assert any(line.startswith("goal/far: completed") for line in lines)
    observation = fork_observation(trace)
    assert "### far [completed] agent=echo tokens=12" in observation
    assert "[untrusted: the answer of the remote agent at" in observation
    assert "echo: repeat after me" in observation
    assert '<artifact name="echo.txt">\nartifact of: repeat after me' in observation
    # The dependent local task was given the remote one's result.
    near_prompt = next(
        e["message"]["content"] for e in trace_lines(trace)
        if e["type"] == "message" and e["agent"] == "goal/near" and e["message"]["role"] == "user"
    )  # fmt: skip
    assert "echo: repeat after me" in near_prompt
    [start] = [e for e in events_of(trace, "task_start") if e["agent"] == "goal/far"]
    assert (start["executor"], start["worker"]) == ("a2a", url)
    [tied] = events_of(trace, "a2a_task")
    assert tied["agent"] == "goal/far" and tied["task_id"]
    states = [e["state"] for e in events_of(trace, "a2a_status")]
    assert states == ["submitted", "working", "completed"]
    # What the remote reported (7 + 5) counts with the model calls made here.
    here = sum(e["usage"]["total_tokens"] for e in events_of(trace, "model_call"))
    assert result.usage.total_tokens == here + 12
    assert events_of(trace, "a2a_end")[0]["usage"]["total_tokens"] == 12
    shown = summarize(read_trace(trace))
    assert shown.agents["goal/far"].tokens == 12


async def test_the_card_url_works_as_well_as_the_base_url(tmp_path: Path) -> None:
    agent = EchoAgent()
    script = fork_script([{"id": "far", "agent": "echo", "task": "hello"}])
    async with sdk_agent(agent) as url:
        job = load_job(remote_job(tmp_path, url + ".well-known/agent-card.json", script))
        result = await run_job(job, trace=tmp_path / "run.jsonl")
    assert result.status == "completed"
    assert "echo: hello" in fork_observation(tmp_path / "run.jsonl")


@pytest.mark.parametrize(
    ("how", "reason"),
    [
        ("silent", "time limit of 1 s reached"),
        ("drop", "its stream ended before the task did"),
        ("malformed", "remote agent 'echo': "),
        ("elsewhere", "its agent card sends tasks to http://127.0.0.2:9/"),
    ],
)
async def test_a_misbehaving_server_gives_an_error_observation(
    tmp_path: Path, how: Misbehaviour, reason: str
) -> None:
    script = fork_script([{"id": "far", "agent": "echo", "task": "anything"}])
    async with hostile_agent(how) as (url, called):
        job = load_job(remote_job(tmp_path, url, script, limit=1))
        result = await asyncio.wait_for(run_job(job, trace=tmp_path / "run.jsonl"), 30)
    assert result.status == "completed"  # the planner went on; the fork's task failed
    observation = fork_observation(tmp_path / "run.jsonl")
    assert "### far [error] agent=echo" in observation
    assert reason in observation
    if how == "elsewhere":
        assert called == []  # nothing was sent to the other host, nor here
    if how in ("silent", "drop", "malformed"):
        assert called[0] == "SendStreamingMessage"


async def test_cancelling_our_run_cancels_the_remote_task(tmp_path: Path) -> None:
    agent = EchoAgent(hang=True)
    script = fork_script([{"id": "far", "agent": "echo", "task": "wait"}])
    trace = tmp_path / "run.jsonl"
    async with sdk_agent(agent) as url:
        job = load_job(remote_job(tmp_path, url, script))
        running = asyncio.create_task(run_job(job, trace=trace))
        for _ in range(500):
            if trace.exists() and events_of(trace, "a2a_task"):
                break
            await asyncio.sleep(0.02)
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
    [tied] = events_of(trace, "a2a_task")
    assert agent.cancelled == [tied["task_id"]]
    [cancel] = events_of(trace, "a2a_cancel")
    assert cancel["ok"] is True
    assert events_of(trace, "job_end")[0]["status"] == "cancelled"


async def test_max_calls_caps_the_tasks_one_run_sends(tmp_path: Path) -> None:
    agent = EchoAgent()
    script = fork_script(
        [
            {"id": "one", "agent": "echo", "task": "first"},
            {"id": "two", "agent": "echo", "task": "second", "depends_on": ["one"]},
        ]
    )
    async with sdk_agent(agent) as url:
        path = remote_job(tmp_path, url, script)
        path.write_text(path.read_text().replace("time_limit: 10", "time_limit: 10, max_calls: 1"))
        result = await run_job(load_job(path), trace=tmp_path / "run.jsonl")
    assert result.status == "completed"
    assert agent.received == ["first"]
    observation = fork_observation(tmp_path / "run.jsonl")
    assert "its cap for one run (max_calls)" in observation


async def test_what_a_remote_reports_is_charged_up_the_tree_and_stops_further_tasks(
    tmp_path: Path,
) -> None:
    agent = EchoAgent(reported=150_000)  # more than the job's whole budget of 100,000
    script = fork_script(
        [
            {"id": "one", "agent": "echo", "task": "first"},
            {"id": "two", "agent": "echo", "task": "second", "depends_on": ["one"]},
        ]
    )
    async with sdk_agent(agent) as url:
        path = remote_job(tmp_path, url, script)
        result = await run_job(load_job(path), trace=tmp_path / "run.jsonl")
    assert agent.received == ["first"]  # nothing left: the second task was never sent
    assert "budget: no tokens left for remote agent 'echo'" in fork_observation(
        tmp_path / "run.jsonl"
    )
    # The job's own total holds what the remote said it used (it is known after the fact).
    assert result.usage.total_tokens >= 150_005
    assert result.status == "budget_exhausted"


def test_a_definition_file_with_a2a_is_a_remote_agent(tmp_path: Path) -> None:
    (tmp_path / "far.md").write_text(
        "---\nname: far\ndescription: Lives elsewhere.\na2a: http://127.0.0.1:9/\n"
        "token_env: FAR_TOKEN\ntime_limit: 30\n---\n"
    )
    far = SubagentRegistry(folders=[tmp_path]).get("far")
    assert far is not None and far.remote is not None
    assert (far.remote.url, far.remote.token_env, far.remote.time_limit) == (
        "http://127.0.0.1:9/",
        "FAR_TOKEN",
        30.0,
    )


async def test_a_missing_token_is_an_error_before_anything_is_sent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ECHO_TOKEN", raising=False)
    agent = EchoAgent()
    script = fork_script([{"id": "far", "agent": "echo", "task": "secret work"}])
    async with sdk_agent(agent) as url:
        path = remote_job(tmp_path, url, script)
        path.write_text(
            path.read_text().replace("time_limit: 10", "time_limit: 10, token_env: ECHO_TOKEN")
        )
        await run_job(load_job(path), trace=tmp_path / "run.jsonl")
    assert agent.received == []
    assert "ECHO_TOKEN (token_env) is not set" in fork_observation(tmp_path / "run.jsonl")


async def test_resume_looks_up_the_remote_task_before_sending_again(tmp_path: Path) -> None:
    """A run killed while its remote task ran: on resume the task is fetched by its id, and
    its result (it ended meanwhile) is kept; nothing is sent twice."""
    agent = EchoAgent(hang=True)
    script = fork_script([{"id": "far", "agent": "echo", "task": "long work"}])
    trace = tmp_path / "run.jsonl"
    async with sdk_agent(agent) as url:
        remote_job(tmp_path, url, script)
        command = [sys.executable, "-m", "orchestrator"]
        killed = await asyncio.create_subprocess_exec(
            *command, "run", "remote.yaml", "--trace", str(trace), "-q", cwd=tmp_path,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        for _ in range(1500):
            if trace.exists() and events_of(trace, "a2a_task"):
                break
            await asyncio.sleep(0.02)
        killed.kill()
        await killed.wait()
        [tied] = events_of(trace, "a2a_task")
        agent.release.set()
        for _ in range(500):
            if agent.finished:
                break
            await asyncio.sleep(0.02)
        resumed = await asyncio.create_subprocess_exec(
            *command, "resume", str(trace), "-q", cwd=tmp_path,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(resumed.communicate(), 60)
    assert resumed.returncode == 0, err.decode()
    assert agent.received == ["long work"]
    assert agent.finished == [tied["task_id"]]
    again = events_of(trace, "a2a_task")[-1]
    assert again["task_id"] == tied["task_id"] and again["resumed"] is True
    assert events_of(trace, "a2a_send") and len(events_of(trace, "a2a_send")) == 1
    assert "echo: long work" in fork_observation_last(trace)


async def test_retry_failed_sends_a_failed_remote_task_anew(tmp_path: Path) -> None:
    from orchestrator import Orchestrator

    agent = EchoAgent(fail_first=1)
    script = fork_script([{"id": "far", "agent": "echo", "task": "look it up"}])
    script["goal"].append({"content": "done, with the echo"})
    trace = tmp_path / "run.jsonl"
    async with sdk_agent(agent) as url:
        first = await run_job(load_job(remote_job(tmp_path, url, script)), trace=trace)
        assert first.step("goal").run is not None
        assert first.step("goal").run.children[0].status == "error"

        again = await Orchestrator.resume(trace, retry_failed=True)

    assert again.status == "completed" and again.output == "done, with the echo"
    assert agent.received == ["look it up", "look it up"]  # sent anew, not looked up
    assert len(events_of(trace, "a2a_send")) == 2
    assert "echo: look it up" in fork_observation_last(trace)


def fork_observation_last(trace: Path) -> str:
    found = [
        str(e["message"]["content"]) for e in trace_lines(trace)
        if e["type"] == "message" and e["message"].get("role") == "tool"
        and str(e["message"].get("content", "")).startswith("Fork finished")
    ]  # fmt: skip
    return found[-1]


async def test_a_job_step_may_be_a_remote_agent(tmp_path: Path) -> None:
    agent = EchoAgent()
    spec = """\
name: stepped
model: scripted:SCRIPT
agents:
  echo: {a2a: "URL"}
steps:
  - {id: far, agent: echo, task: "from a step"}
  - {id: near, depends_on: [far], task: "Summarize: {steps.far.output}"}
"""
    async with sdk_agent(agent) as url:
        path = write_job(tmp_path, spec.replace("URL", url), {"near": [{"content": "ok"}]})
        result = await run_job(load_job(path), trace=tmp_path / "run.jsonl")
    assert result.status == "completed"
    assert agent.received == ["from a step"]
    assert "echo: from a step" in result.step("far").output
    near_prompt = next(
        e["message"]["content"] for e in trace_lines(tmp_path / "run.jsonl")
        if e["type"] == "message" and e["agent"] == "near" and e["message"]["role"] == "user"
    )  # fmt: skip
    assert "echo: from a step" in near_prompt


async def test_the_bearer_token_is_sent_and_never_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ECHO_TOKEN", "tok-7f3a9c1e5b")
    agent = EchoAgent()
    script = fork_script([{"id": "far", "agent": "echo", "task": "guarded work"}])
    async with sdk_agent(agent, token="tok-7f3a9c1e5b") as url:
        path = remote_job(tmp_path, url, script)
        spec = path.read_text().replace("time_limit: 10", "time_limit: 10, token_env: ECHO_TOKEN")
        path.write_text(spec)
        result = await run_job(load_job(path), trace=tmp_path / "run.jsonl")
    assert result.status == "completed"
    assert agent.received == ["guarded work"]
    assert "tok-7f3a9c1e5b" not in (tmp_path / "run.jsonl").read_text()


@pytest.mark.parametrize(
    ("agents", "message"),
    [
        ("{general: {a2a: 'http://127.0.0.1:9/'}}", "the name of a built-in agent"),
        ("{Far: {a2a: 'http://127.0.0.1:9/'}}", "lowercase letters"),
        ("{far: {a2a: 'ftp://127.0.0.1/'}}", "agents.far.a2a"),
        ("{far: {a2a: 'http://127.0.0.1:9/', colour: red}}", "agents.far.colour"),
    ],
)
def test_the_spec_checks_its_remote_agents(tmp_path: Path, agents: str, message: str) -> None:
    spec = f"name: bad\nmodel: scripted:SCRIPT\nagents: {agents}\ngoal: Go.\n"
    path = write_job(tmp_path, spec, {"goal": [{"content": "ok"}]})
    with pytest.raises(SpecError, match=message):
        load_job(path)
