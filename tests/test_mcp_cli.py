"""MCP servers from the command line: a job's `mcp_servers:`, Ctrl-C, `skills show --connect`,
`skills check`, each through a real `orchestrator` process."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_process import orchestrator
from mcp_helpers import (
    LEGACY_SERVER,
    TEST_SERVER,
    TIME_SERVER,
    alive,
    command_line,
    kit_server,
    mcp_skill,
    servers_below,
)
from skill_factory import CORPUS, needs_mcp_transcripts
from trace_lines import trace_lines

pytest.importorskip("mcp")

# Starts real MCP servers: left out of the inner loop (`pytest -m "not slow"`).
pytestmark = pytest.mark.slow

JOB = """\
name: with-servers
model: scripted:script.yaml
permissions: {{workspace: .}}
mcp_servers:
{servers}
goal: Tell the time.
"""


def _job(folder: Path, servers: str, script: str) -> None:
    (folder / "job.yaml").write_text(JOB.format(servers=servers))
    (folder / "script.yaml").write_text(script)


def test_job_mcp_servers_become_skills_in_the_index(tmp_path: Path) -> None:
    servers = f"  time:\n    command: {TIME_SERVER}\n    description: Current time anywhere.\n"
    script = """\
goal:
  - tool_calls: [{name: load_skill, arguments: {name: time}}]
  - tool_calls: [{name: time__get_current_time, arguments: {timezone: UTC}}]
  - content: it is now
"""
    _job(tmp_path, servers, script)
    done = orchestrator("run", "job.yaml", "--json", "--quiet", "--trace", "t.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    events = trace_lines(tmp_path / "t.jsonl")
    messages = [e["message"] for e in events if e["type"] == "message"]
    system = next(m["content"] for m in messages if m["role"] == "system")
    assert "- time: Current time anywhere." in system
    answer = next(m for m in messages if m.get("name") == "time__get_current_time")
    assert not answer.get("is_error") and '"timezone": "UTC"' in answer["content"]


def test_a_bad_job_server_is_a_spec_error_naming_the_field(tmp_path: Path) -> None:
    _job(tmp_path, "  time:\n    comand: x\n", "goal: [{content: x}]\n")
    done = orchestrator("run", "job.yaml", "--quiet", cwd=tmp_path)
    assert done.returncode != 0
    assert "mcp_servers.time" in done.stderr


def test_ctrl_c_stops_the_servers_and_resume_brings_their_tools_back(tmp_path: Path) -> None:
    servers = f"  kit:\n    command: {sys.executable}\n    args: [{TEST_SERVER}, stdio]\n"
    script = """\
goal:
  - tool_calls: [{name: load_skill, arguments: {name: kit}}]
  - tool_calls: [{name: kit__hang, arguments: {seconds: 600}}]
  - tool_calls: [{name: kit__echo, arguments: {text: after resume}}]
  - content: done
"""
    _job(tmp_path, servers, script)
    trace = tmp_path / "t.jsonl"
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "run", "job.yaml", "--trace", str(trace)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if trace.exists() and any(
            e["type"] == "tool_start" and e["name"] == "kit__hang" for e in trace_lines(trace)
        ):
            break
        time.sleep(0.05)
    pids = servers_below(process.pid, TEST_SERVER)
    assert len(pids) == 1
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert not any(alive(pid) for pid in pids)

    # The resumed run loads the skill's server tools again (restore), without a new load.
    resumed = orchestrator("resume", "t.jsonl", "--quiet", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    messages = [e["message"] for e in trace_lines(trace) if e["type"] == "message"]
    echo = [m for m in messages if m.get("name") == "kit__echo"]
    assert [m["content"] for m in echo] == ["echo: after resume"]


def test_a_job_step_starts_with_a_server_skill_preloaded(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(
        f"""\
name: preloaded
model: scripted:script.yaml
permissions: {{workspace: .}}
mcp_servers:
  time: {{command: {TIME_SERVER}}}
steps:
  - {{id: now, task: Tell the time., skills: [time]}}
"""
    )
    (tmp_path / "script.yaml").write_text(
        """\
now:
  - tool_calls: [{name: time__get_current_time, arguments: {timezone: UTC}}]
  - content: told
"""
    )
    done = orchestrator("run", "job.yaml", "--quiet", "--trace", "t.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    messages = [e["message"] for e in trace_lines(tmp_path / "t.jsonl") if e["type"] == "message"]
    answer = next(m for m in messages if m.get("name") == "time__get_current_time")
    assert not answer.get("is_error") and '"timezone": "UTC"' in answer["content"]


def test_ctrl_c_while_a_server_starts_leaves_no_process(tmp_path: Path) -> None:
    # A server that never answers the handshake: the load waits for it until Ctrl-C.
    mute = "import time; time.sleep(600)  # mute-mcp-server"
    servers = f"  mute:\n    command: {sys.executable}\n    args: ['-c', '{mute}']\n"
    servers += "    startTimeout: 300\n"
    script = "goal:\n  - tool_calls: [{name: load_skill, arguments: {name: mute}}]\n"
    _job(tmp_path, servers, script)
    trace = tmp_path / "t.jsonl"
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "run", "job.yaml", "--trace", str(trace)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pid = _running_server(process, [sys.executable, "-c", mute])
    process.send_signal(signal.SIGINT)
    try:
        _, stderr = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        _kill(process, [pid])
        pytest.fail(f"the run did not end within 60 s of Ctrl-C; stderr: {_stderr(process)}")
    left = alive(pid)
    if left:
        _kill(process, [pid])
    assert process.returncode == 130, stderr
    assert not left, f"the server ({pid}) outlived the interrupted run; its stderr: {stderr}"


def _running_server(process: subprocess.Popen[str], argv: list[str]) -> int:
    """The one process below the run whose command line is exactly `argv`: the server itself,
    once it runs (before, the launcher's line holds the same words). The test fails with the
    run's stderr if the run ends first, or after a minute."""
    deadline = time.monotonic() + 60
    wanted = " ".join(argv)
    while time.monotonic() < deadline and process.poll() is None:
        below = servers_below(process.pid, argv[-1])
        found = [p for p in below if command_line(p).rstrip() == wanted]
        if found:
            assert len(found) == 1, f"more than one server started: {found}"
            return found[0]
        time.sleep(0.02)
    ended = process.poll()
    _kill(process, [])
    state = f"the run ended ({ended})" if ended is not None else "no server after 60 s"
    pytest.fail(f"{state}; stderr: {_stderr(process)}")


def _kill(process: subprocess.Popen[str], pids: list[int]) -> None:
    """Whatever a failed test found is ended (none of it may outlive the test)."""
    if process.poll() is None:
        process.kill()
    for pid in [p for p in pids if alive(p)]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _stderr(process: subprocess.Popen[str]) -> str:
    _, stderr = process.communicate(timeout=30)
    return stderr


def test_skills_show_lists_servers_and_with_connect_their_tools(tmp_path: Path) -> None:
    mcp_skill(tmp_path / "skills", "kit", {"kit": kit_server()})
    args = ("skills", "show", "kit", "--skills", "skills", "--no-builtin")
    shown = orchestrator(*args, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert f"  - kit: command {sys.executable}" in shown.stdout
    assert "kit__echo" not in shown.stdout  # nothing was started
    connected = orchestrator(*args, "--connect", cwd=tmp_path)
    assert connected.returncode == 0, connected.stderr
    assert "  - kit__echo: Say the text back." in connected.stdout
    assert "Call echo to hear yourself." in connected.stdout
    assert "  - kit: connected, protocol 2026-" in connected.stdout  # the discover era


def test_skills_show_connect_falls_back_to_the_handshake_era(tmp_path: Path) -> None:
    needs_mcp_transcripts()
    recording = CORPUS / "mcp-transcripts" / "mcp-server-time_2025-06-18_handshake.jsonl"
    server = {"command": sys.executable, "args": [LEGACY_SERVER, str(recording)]}
    mcp_skill(tmp_path / "skills", "clock", {"time": server})
    args = ("skills", "show", "clock", "--skills", "skills", "--no-builtin", "--connect")
    shown = orchestrator(*args, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "  - time: connected, protocol 2025-06-18" in shown.stdout
    assert "  - clock__get_current_time: Get current time in a specific timezone" in shown.stdout


def test_skills_check_flags_a_bad_mcp_json(tmp_path: Path) -> None:
    folder = mcp_skill(tmp_path, "kit", {"kit": {"type": "http", "headers": {}}})
    good = mcp_skill(tmp_path, "fine", {"kit": {"command": "x", "env": {"K": "${UNSET_Q_1}"}}})
    done = orchestrator("skills", "check", str(folder), str(good), cwd=tmp_path)
    assert done.returncode == 1
    assert "an http server needs a `url` [mcp-config]" in done.stdout
    assert "UNSET_Q_1 [mcp-variables]" in done.stdout  # a warning only
    assert f"ok    {good}" in done.stdout
    (folder / ".mcp.json").write_text("{broken")
    again = orchestrator("skills", "check", str(folder), cwd=tmp_path)
    assert again.returncode == 1 and "not valid JSON" in again.stdout


def test_job_server_variables_come_from_the_env_file_and_stay_out_of_the_trace(
    tmp_path: Path,
) -> None:
    value = "dotenv-value-7f3a9c1e2b"
    (tmp_path / ".env").write_text(f"KIT_FROM_DOTENV={value}\n")
    servers = (
        f"  kit:\n    command: {sys.executable}\n    args: [{TEST_SERVER}, stdio]\n"
        "    env: {TEST_SECRET: '${KIT_FROM_DOTENV}'}\n"
    )
    script = """\
goal:
  - tool_calls: [{name: load_skill, arguments: {name: kit}}]
  - tool_calls: [{name: kit__has_secret, arguments: {}}]
  - content: checked
"""
    _job(tmp_path, servers, script)
    done = orchestrator("run", "job.yaml", "--quiet", "--trace", "t.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "t.jsonl").read_text()
    messages = [e["message"] for e in trace_lines(tmp_path / "t.jsonl") if e["type"] == "message"]
    assert next(m for m in messages if m.get("name") == "kit__has_secret")["content"] == "yes"
    assert value not in text and value not in done.stdout + done.stderr


def test_a_catalog_whose_only_tools_come_from_spec_servers_has_the_dispatcher(
    tmp_path: Path,
) -> None:
    from orchestrator.skills import SkillCatalog, SkillsExtension
    from orchestrator.skills.servers import parse_servers

    catalog = SkillCatalog([], include_builtin=False)
    catalog.add_servers(parse_servers({"time": {"command": TIME_SERVER}}, "spec"), tmp_path)
    names = [t.name for t in SkillsExtension(catalog).tools()]
    assert "call_skill_tool" in names
    assert catalog.get("time") is not None and catalog.get("time").gives_tools


@pytest.mark.slow  # starts MCP servers
def test_skills_check_connect_starts_the_servers_and_fails_one_that_does_not_start(
    tmp_path: Path,
) -> None:
    """`skills check --connect`: a server that exits at start is a problem of its folder (it
    was caught only at run time before); one that starts has its tools listed."""
    skills = tmp_path / "skills"
    mcp_skill(skills, "kit", {"kit": kit_server()})
    mcp_skill(skills, "dies", {"dead": {"command": sys.executable, "args": ["-c", "exit(3)"]}})
    plain = orchestrator("skills", "check", skills, cwd=tmp_path)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    done = orchestrator("skills", "check", skills, "--connect", cwd=tmp_path)
    said = done.stdout + done.stderr
    assert done.returncode == 1, said
    assert "[mcp-start]" in said and "dead" in said
    assert "mcp servers started; their tools: kit__" in said


@pytest.mark.slow  # starts MCP servers
def test_an_mcp_skill_as_the_model_gets_it_counts_its_servers_schemas(tmp_path: Path) -> None:
    """The model view's `tool_schemas` counts the MCP tools' schemas the load result holds
    (it said 0 before)."""
    skills = tmp_path / "skills"
    # The server's script inside the skill's folder: the view runs in a sandbox that mounts
    # the catalog's folders, and a server is started as the skill declares it.
    server = {"command": sys.executable, "args": ["${CLAUDE_PLUGIN_ROOT}/server.py", "stdio"]}
    folder = mcp_skill(skills, "kit", {"kit": server})
    (folder / "server.py").write_text(Path(TEST_SERVER).read_text(encoding="utf-8"))
    done = orchestrator(
        "skills", "show", "kit", "--skills", skills, "--as-model", "--json", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout)
    assert "kit__" in view["load_result"]
    assert view["tokens"]["tool_schemas"] > 0
