"""MCP servers as skill tools, end to end: real servers (mcp-server-git, a server of our own
built on the SDK), a scripted planner, processes checked in /proc."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mcp_helpers import (
    GIT_SERVER,
    LEGACY_SERVER,
    TEST_SERVER,
    command_line,
    git_repo,
    git_server,
    kit_server,
    mcp_skill,
    servers_below,
    tool_results,
)
from skill_factory import CORPUS, needs_mcp_transcripts

from orchestrator import Agent, Orchestrator, tool
from orchestrator.models import ScriptedModel
from orchestrator.security import Permissions

pytest.importorskip("mcp")

# Starts real MCP servers: left out of the inner loop (`pytest -m "not slow"`).
pytestmark = pytest.mark.slow


def _agent(model: ScriptedModel, skills: Path, workspace: Path, **options: object) -> Agent:
    workspace.mkdir(exist_ok=True)
    return Agent(model, skills=[skills], permissions=Permissions(workspace=workspace), **options)


def test_nothing_starts_before_load_and_git_log_finds_the_commit(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo", "the commit to find")
    mcp_skill(tmp_path / "skills", "git", {"git": git_server(repo)}, description="Git history.")
    seen: dict[str, list[int]] = {}

    @tool
    def look(when: str) -> str:
        """Record the git servers running now."""
        seen[when] = servers_below(os.getpid(), GIT_SERVER)
        return "looked"

    model = ScriptedModel(
        {
            "agent": [
                {"tool_calls": [{"name": "look", "arguments": {"when": "before"}}]},
                {"tool_calls": [{"name": "load_skill", "arguments": {"name": "git"}}]},
                {
                    "tool_calls": [
                        {"name": "git__git_log", "arguments": {"repo_path": str(repo)}},
                        {"name": "look", "arguments": {"when": "during"}},
                    ]
                },
                {"content": "done"},
            ]
        }
    )
    result = _agent(model, tmp_path / "skills", tmp_path / "ws", tools=[look]).run_sync("go")
    assert result.status == "completed"
    assert seen["before"] == []
    assert len(seen["during"]) == 1, [command_line(p) for p in seen["during"]]
    # Zero schema tokens before the load; after it the schemas are in the load's observation
    # and the tools array stays as it was (the prompt cache keeps the prefix).
    first, second, third = (r.tools for r in model.requests[:3])
    assert first == second == third
    assert not any(s.name.startswith("git__") for s in first)
    loaded = tool_results(result.messages)[1]
    assert "- git__git_log:" in loaded.content and '"repo_path"' in loaded.content
    log = tool_results(result.messages)[2]
    assert not log.is_error and "the commit to find" in log.content
    assert servers_below(os.getpid(), GIT_SERVER) == []  # gone after the run


def test_missing_required_field_is_an_error_observation_naming_it(tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    mcp_skill(tmp_path / "skills", "git", {"git": git_server(repo)})
    model = ScriptedModel(
        {
            "agent": [
                {"tool_calls": [{"name": "load_skill", "arguments": {"name": "git"}}]},
                {"tool_calls": [{"name": "git__git_log", "arguments": {"max_count": 3}}]},
                {"content": "done"},
            ]
        }
    )
    result = _agent(model, tmp_path / "skills", tmp_path / "ws").run_sync("go")
    failed = tool_results(result.messages)[1]
    assert failed.is_error and failed.error_type == "invalid_arguments"
    assert "repo_path" in failed.content


def test_load_observation_lists_tools_and_server_instructions(tmp_path: Path) -> None:
    mcp_skill(tmp_path / "skills", "kit", {"kit": kit_server()})
    model = ScriptedModel(
        {
            "agent": [
                {"tool_calls": [{"name": "load_skill", "arguments": {"name": "kit"}}]},
                {
                    "tool_calls": [
                        {"name": "kit__echo", "arguments": {"text": "hi"}},
                        {"name": "kit__picture", "arguments": {}},
                        {"name": "kit__weather", "arguments": {"city": "Oslo"}},
                    ]
                },
                {"content": "done"},
            ]
        }
    )
    result = _agent(model, tmp_path / "skills", tmp_path / "ws").run_sync("go")
    loaded, echo, picture, weather = (m.content for m in tool_results(result.messages))
    assert "- kit__echo: Say the text back." in loaded
    assert "Call echo to hear yourself." in loaded  # the server's instructions
    assert echo == "echo: hi"
    assert picture.startswith("[image: image/png, 32 bytes]")
    assert json.loads(weather) == {"city": "Oslo", "celsius": 21}


def _fork_script(skill: str) -> dict[str, list[dict[str, object]]]:
    tasks = [{"id": i, "task": f"task {i}", "skills": [skill]} for i in ("a", "b")]
    sub = [
        {"tool_calls": [{"name": f"{skill}__pid", "arguments": {}}]},
        {"tool_calls": [{"name": f"{skill}__meet", "arguments": {"count": 2}}]},
        {"content": "sub done"},
    ]
    return {
        "planner": [
            {"tool_calls": [{"name": "load_skill", "arguments": {"name": skill}}]},
            {"tool_calls": [{"name": "fork", "arguments": {"tasks": tasks}}]},
            {"content": "planned"},
        ],
        "planner/a": sub,
        "planner/b": list(sub),
    }


def test_sub_agents_share_one_server_process(tmp_path: Path) -> None:
    mcp_skill(tmp_path / "skills", "kit", {"kit": kit_server()})
    (tmp_path / "ws").mkdir()
    model = ScriptedModel(_fork_script("kit"))
    orchestrator = Orchestrator(
        model,
        skills=[tmp_path / "skills"],
        builtin=False,
        permissions=Permissions(workspace=tmp_path / "ws"),
        trace=tmp_path / "trace.jsonl",
    )
    result = orchestrator.run_sync("go")
    assert result.status == "completed", result.error
    pids, meetings = {}, {}
    for line in (tmp_path / "trace.jsonl").read_text().splitlines():
        event = json.loads(line)
        message = event.get("message") or {}
        if event["type"] == "message" and message.get("name") == "kit__pid":
            pids[event["agent"]] = message["content"]
        if event["type"] == "message" and message.get("name") == "kit__meet":
            meetings[event["agent"]] = message["content"]
    assert set(pids) == {"planner/a", "planner/b"}
    assert len(set(pids.values())) == 1  # both children, one process
    assert meetings == {"planner/a": "met", "planner/b": "met"}  # its calls ran at once
    model.assert_all_used()
    assert servers_below(os.getpid(), TEST_SERVER) == []


def test_server_is_stopped_after_a_failed_run(tmp_path: Path) -> None:
    mcp_skill(tmp_path / "skills", "kit", {"kit": kit_server()})
    seen: list[int] = []

    @tool
    def look() -> str:
        """Record the servers running now."""
        seen.extend(servers_below(os.getpid(), TEST_SERVER))
        return "looked"

    # The model's turns run out after the load: the run ends in error.
    model = ScriptedModel(
        {
            "agent": [
                {"tool_calls": [{"name": "load_skill", "arguments": {"name": "kit"}}]},
                {"tool_calls": [{"name": "look", "arguments": {}}]},
            ]
        }
    )
    result = _agent(model, tmp_path / "skills", tmp_path / "ws", tools=[look]).run_sync("go")
    assert result.status == "error"
    assert len(seen) == 1
    assert servers_below(os.getpid(), TEST_SERVER) == []


@pytest.fixture
def http_server(tmp_path: Path):
    """Our test server over streamable HTTP on 127.0.0.1, in a subprocess."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = (tmp_path / "http-server.log").open("w")
    process = subprocess.Popen([sys.executable, TEST_SERVER, "http", str(port)], stderr=log)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                pytest.fail("the streamable-HTTP test server did not start")
            time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/mcp"
    process.terminate()
    process.wait(10)
    log.close()


def test_streamable_http_server_with_a_secret_header(
    tmp_path: Path, http_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCS_HEADER_VALUE", "hdr-secret-0123456789")
    server = {"type": "http", "url": http_server, "headers": {"X-Api": "${DOCS_HEADER_VALUE}"}}
    mcp_skill(tmp_path / "skills", "docs", {"docs": server})
    model = ScriptedModel(
        {
            "agent": [
                {"tool_calls": [{"name": "load_skill", "arguments": {"name": "docs"}}]},
                {"tool_calls": [{"name": "docs__echo", "arguments": {"text": "over http"}}]},
                {"content": "done"},
            ]
        }
    )
    trace = tmp_path / "trace.jsonl"
    result = _agent(model, tmp_path / "skills", tmp_path / "ws", trace=trace).run_sync("go")
    assert tool_results(result.messages)[1].content == "echo: over http"
    assert "hdr-secret-0123456789" not in trace.read_text()


def test_a_handshake_era_server_is_reached_by_falling_back(tmp_path: Path) -> None:
    needs_mcp_transcripts()
    recording = CORPUS / "mcp-transcripts" / "mcp-server-time_2025-06-18_handshake.jsonl"
    server = {"command": sys.executable, "args": [LEGACY_SERVER, str(recording)]}
    mcp_skill(tmp_path / "skills", "clock", {"time": server})
    model = ScriptedModel(
        {
            "agent": [
                {"tool_calls": [{"name": "load_skill", "arguments": {"name": "clock"}}]},
                {
                    "tool_calls": [
                        {"name": "clock__get_current_time", "arguments": {"timezone": "UTC"}}
                    ]
                },
                {"content": "done"},
            ]
        }
    )
    result = _agent(model, tmp_path / "skills", tmp_path / "ws").run_sync("go")
    loaded, answer = tool_results(result.messages)
    assert "clock__convert_time" in loaded.content
    assert not answer.is_error and '"timezone"' in answer.content
