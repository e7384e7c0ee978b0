"""Human approval through the Python API: `ask` permissions, the callback, the trace.

The model's decisions are scripted; the tools, the shell and the files are real. Attacks: a
denied call must not run at all, an approval must grant nothing beyond its own call.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from trace_lines import trace_lines

from orchestrator import Agent, Orchestrator, Permissions, ToolContext, Trace, tool
from orchestrator.agent import ApprovalRequest
from orchestrator.jobs import SpecError, load_job
from orchestrator.models import ScriptedModel
from orchestrator.security import Permissions as SecurityPermissions


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "arguments": arguments}]}


def results(messages: list[Any]) -> list[tuple[str | None, str]]:
    return [(m.error_type, m.content or "") for m in messages if m.role == "tool"]


def shell_agent(tmp_path: Path, turns: list[dict[str, Any]], **options: Any) -> Agent:
    return Agent(
        ScriptedModel({"agent": turns}),
        skills=[],
        name="agent",
        permissions=Permissions(workspace=tmp_path, shell="ask", **options.pop("grant", {})),
        trace=options.pop("trace", None),
        **options,
    )


TURNS = [
    call("load_skill", name="shell"),
    call("shell__run", command="touch approved.txt"),
    {"content": "done"},
]


def approvals(trace: Path) -> list[dict[str, Any]]:
    return [e for e in trace_lines(trace) if e["type"] == "approval"]


async def test_a_sync_callback_approves_and_sees_the_call(tmp_path: Path) -> None:
    seen: list[ApprovalRequest] = []

    def approve(request: ApprovalRequest) -> bool:
        seen.append(request)
        return True

    trace = tmp_path / "run.jsonl"
    with Trace(trace) as opened:
        result = await shell_agent(tmp_path, TURNS, approve=approve, trace=opened).run("go")

    assert result.status == "completed"
    assert (tmp_path / "approved.txt").exists()
    [request] = seen
    assert (request.agent, request.tool) == ("agent", "shell__run")
    assert request.arguments == {"command": "touch approved.txt"}
    assert request.rule == "permissions.shell is 'ask'"
    [event] = approvals(trace)
    assert (event["decision"], event["by"], event["name"]) == ("approved", "person", "shell__run")


async def test_an_async_callback_that_denies_is_an_observation_and_nothing_runs(
    tmp_path: Path,
) -> None:
    async def deny(request: ApprovalRequest) -> bool:
        await asyncio.sleep(0)
        return False

    trace = tmp_path / "run.jsonl"
    with Trace(trace) as opened:
        result = await shell_agent(tmp_path, TURNS, approve=deny, trace=opened).run("go")

    assert result.status == "completed"
    assert not (tmp_path / "approved.txt").exists()
    kind, text = results(result.messages)[-1]
    assert kind == "denied"
    assert "needs a person's approval (permissions.shell is 'ask'); a person denied it" in text
    [event] = approvals(trace)
    assert (event["decision"], event["by"]) == ("denied", "person")
    starts = [e for e in trace_lines(trace) if e["type"] == "tool_start"]
    assert [e["name"] for e in starts] == ["load_skill"]  # the denied call never started


async def test_without_a_callback_and_on_input_deny_the_call_is_denied_and_the_model_is_told(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "run.jsonl"
    with Trace(trace) as opened:
        result = await shell_agent(tmp_path, TURNS, trace=opened, on_input="deny").run("go")

    assert not (tmp_path / "approved.txt").exists()
    kind, text = results(result.messages)[-1]
    assert kind == "denied" and "no one can be asked in this run" in text
    [event] = approvals(trace)
    assert (event["decision"], event["by"]) == ("denied", "nobody")


@pytest.mark.parametrize("answer", ["yes", 1, None])
async def test_only_true_approves_and_a_failing_callback_denies(
    tmp_path: Path, answer: Any
) -> None:
    result = await shell_agent(tmp_path, TURNS, approve=lambda _: answer).run("go")
    assert results(result.messages)[-1][0] == "denied"

    def broken(_: ApprovalRequest) -> bool:
        raise RuntimeError("no display")

    result = await shell_agent(tmp_path, TURNS, approve=broken).run("go")
    kind, text = results(result.messages)[-1]
    assert kind == "denied" and "the approval callback failed (RuntimeError: no display)" in text
    assert not (tmp_path / "approved.txt").exists()


async def test_a_tools_map_asks_for_file_writes_and_denies_by_rule(tmp_path: Path) -> None:
    asked: list[str] = []

    def approve(request: ApprovalRequest) -> bool:
        asked.append(request.tool)
        return request.arguments["path"] == "ok.txt"

    turns = [
        call("load_skill", name="files"),
        call("files__write_file", path="ok.txt", content="fine"),
        call("files__write_file", path="no.txt", content="refused"),
        call("files__list_dir", path="."),
        call("files__read_file", path="ok.txt"),
        {"content": "done"},
    ]
    agent = Agent(
        ScriptedModel({"agent": turns}),
        skills=[],
        name="agent",
        approve=approve,
        permissions=Permissions(
            workspace=tmp_path,
            tools={"files__write_file": "ask", "files__list_*": "deny", "files": "allow"},
        ),
    )
    result = await agent.run("go")

    assert asked == ["files__write_file", "files__write_file"]
    assert (tmp_path / "ok.txt").read_text() == "fine"
    assert not (tmp_path / "no.txt").exists()
    _, wrote, refused, listed, read = results(result.messages)
    assert wrote[0] is None and refused[0] == "denied"
    assert listed == (
        "denied",
        "Permission denied: files__list_dir is not allowed in this run "
        "(permissions.tools['files__list_*'] is 'deny').",
    )
    assert read[0] is None


def test_the_strictest_rule_wins() -> None:
    permissions = SecurityPermissions(
        shell="ask", tools={"shell__run": "allow", "data": "deny", "data__query": "ask"}
    )
    assert permissions.decision("shell__run")[0] == "ask"
    assert permissions.decision("data__query")[0] == "deny"
    assert permissions.decision("files__read_file") == ("allow", None)


async def test_an_approval_grants_the_shell_to_that_call_only(tmp_path: Path) -> None:
    # A tool of the user's that runs shell commands itself: `shell: ask` must hold for it
    # too, even when a person approved another call in the same turn.
    @tool
    def sneaky(ctx: ToolContext) -> str:
        """Run a command behind the shell skill's back."""
        ctx.permissions.require_shell()
        (tmp_path / "sneaky.txt").write_text("ran")
        return "ran"

    turns = [
        call("load_skill", name="shell"),
        {
            "tool_calls": [
                {"name": "shell__run", "arguments": {"command": "touch approved.txt"}},
                {"name": "sneaky", "arguments": {}},
            ]
        },
        {"content": "done"},
    ]
    agent = Agent(
        ScriptedModel({"agent": turns}),
        [sneaky],
        skills=[],
        name="agent",
        approve=lambda _: True,
        permissions=Permissions(workspace=tmp_path, shell="ask"),
    )
    result = await agent.run("go")

    assert (tmp_path / "approved.txt").exists()
    assert not (tmp_path / "sneaky.txt").exists()
    kind, text = results(result.messages)[-1]
    assert kind == "denied" and "only calls of the shell skill are put to a person" in text


async def test_sub_agents_ask_the_same_callback(tmp_path: Path) -> None:
    seen: list[str] = []

    def approve(request: ApprovalRequest) -> bool:
        seen.append(request.agent)
        return True

    script = {
        "planner": [
            call("fork", tasks=[{"id": "a", "task": "Make the file."}]),
            {"content": "done"},
        ],
        "planner/a": TURNS,
    }
    orchestrator = Orchestrator(
        ScriptedModel(script),
        permissions=Permissions(workspace=tmp_path, shell="ask"),
        approve=approve,
    )
    result = await orchestrator.run("go")
    assert result.status == "completed"
    assert seen == ["planner/a"]
    assert (tmp_path / "approved.txt").exists()


def test_a_job_spec_sets_ask_and_the_tools_map(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text("goal: [{content: ok}]\n")
    (tmp_path / "job.yaml").write_text(
        "name: j\nmodel: scripted:s.yaml\ngoal: Go.\n"
        "permissions: {shell: ask, tools: {files__write_file: ask, http: deny}}\n"
    )
    permissions = load_job(tmp_path / "job.yaml").permissions
    assert permissions.shell == "ask"
    assert permissions.decision("files__write_file")[0] == "ask"
    assert permissions.decision("http__get")[0] == "deny"
    (tmp_path / "bad.yaml").write_text(
        "name: j\nmodel: scripted:s.yaml\ngoal: Go.\npermissions: {tools: {x: maybe}}\n"
    )
    with pytest.raises(SpecError, match="permissions.tools.x"):
        load_job(tmp_path / "bad.yaml")
