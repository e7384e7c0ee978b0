"""The built-in `shell` and `python` skills: real processes, real timeouts, real kills."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest
from skill_factory import call, context, scripted_agent

from orchestrator.agent import Tool
from orchestrator.errors import PermissionDenied
from orchestrator.security import Permissions
from orchestrator.skills import SkillCatalog


@pytest.fixture(scope="module")
def shell() -> Tool:
    [run] = SkillCatalog().load("shell").tools
    return run


@pytest.fixture(scope="module")
def python() -> Tool:
    [run] = SkillCatalog().load("python").tools
    return run


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """The workspace, symlinks resolved (as the tools report it)."""
    return tmp_path.resolve()


def gone(pid: int) -> bool:
    """True once a process no longer runs (reaped, or a zombie waiting to be)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "State:\tZ" in status.read_text()


def wait_until_gone(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if gone(pid):
            return True
        time.sleep(0.05)
    return gone(pid)


def running_with(marker: str) -> list[int]:
    """The live processes (zombies aside) whose command line holds `marker`, as the host
    sees them: a sandboxed command's process IDs inside mean nothing out here."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                found.append(int(entry.name))
        except OSError:
            continue
    return [pid for pid in found if not gone(pid)]


def wait_until_none_with(marker: str, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not running_with(marker):
            return True
        time.sleep(0.05)
    return not running_with(marker)


def unique_sleep() -> str:
    """A `sleep` of about a minute whose command line no other process has."""
    return f"sleep 60.{uuid.uuid4().int % 10**9:09d}"


async def test_shell_is_denied_without_the_permission(shell: Tool, tmp_path: Path) -> None:
    with pytest.raises(PermissionDenied, match="`shell` permission"):
        await call(shell, context(tmp_path), command="touch made.txt")
    assert not (tmp_path / "made.txt").exists()


async def test_shell_runs_in_the_workspace(shell: Tool, ws: Path) -> None:
    ctx = context(ws, shell=True)
    out = await call(shell, ctx, command="pwd; echo hi > made.txt; echo oops >&2; exit 3")
    assert out == f"[exit code 3]\n{ws}\noops\n"
    assert (ws / "made.txt").read_text() == "hi\n"
    assert await call(shell, ctx, command="true") == "[exit code 0]\n(no output)"


async def test_shell_timeout_kills_the_whole_process_group(shell: Tool, tmp_path: Path) -> None:
    ctx = context(tmp_path, shell=True)
    sleep = unique_sleep()
    began = time.monotonic()
    out = await call(shell, ctx, command=f"{sleep} & echo started; wait", timeout_seconds=1)
    assert time.monotonic() - began < 10
    assert out == "[timed out after 1 s; the process was killed]\nstarted\n"
    assert wait_until_none_with(sleep)


async def test_shell_output_is_capped_keeping_both_ends(shell: Tool, tmp_path: Path) -> None:
    ctx = context(tmp_path, shell=True)
    out = await call(
        shell, ctx, command="echo first; head -c 300000 /dev/zero | tr '\\0' x; echo; echo last"
    )
    assert len(out) < 21_000
    assert out.startswith("[exit code 0]\nfirst\n")
    assert out.rstrip().endswith("last")
    assert "bytes of output left out" in out


async def test_shell_does_not_pass_secrets_on(
    shell: Tool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_SERVICE_API_KEY", "sk-very-secret")
    monkeypatch.setenv("PLAIN_SETTING", "visible")
    ctx = context(tmp_path, shell=True)
    out = await call(shell, ctx, command='echo "${MY_SERVICE_API_KEY:-none} $PLAIN_SETTING"')
    assert out == "[exit code 0]\nnone visible\n"


def test_a_loop_tool_timeout_also_kills_the_command(tmp_path: Path) -> None:
    sleep = unique_sleep()
    command = f"{sleep} & echo started; wait"
    agent, _ = scripted_agent(
        [
            {"tool_calls": [{"name": "load_skill", "arguments": {"name": "shell"}}]},
            {"tool_calls": [{"name": "shell__run", "arguments": {"command": command}}]},
            {"content": "it took too long"},
        ],
        skills=SkillCatalog(),
        permissions=Permissions(workspace=tmp_path, shell=True),
        tool_timeout=1.0,
    )
    began = time.monotonic()
    result = agent.run_sync("run it")
    assert time.monotonic() - began < 10
    [message] = [m for m in result.messages if m.name == "shell__run"]
    assert message.error_type == "timeout"
    assert wait_until_none_with(sleep)


async def test_python_is_denied_without_the_permission(python: Tool, tmp_path: Path) -> None:
    with pytest.raises(PermissionDenied, match="`python` permission"):
        await call(python, context(tmp_path, shell=True), code="print(1)")


async def test_python_runs_a_snippet_in_the_workspace(python: Tool, ws: Path) -> None:
    (ws / "helper.py").write_text("VALUE = 21\n")
    (ws / "data.txt").write_text("abc")
    code = (
        "import os, helper\nprint(os.getcwd())\nprint(helper.VALUE * 2, open('data.txt').read())\n"
    )
    out = await call(python, context(ws, python=True), code=code)
    assert out == f"[exit code 0]\n{ws}\n42 abc\n"


async def test_python_errors_come_back_with_the_traceback(python: Tool, tmp_path: Path) -> None:
    out = await call(python, context(tmp_path, python=True), code="x = 1\n1 / 0\n")
    assert out.startswith("[exit code 1]\nTraceback")
    assert "1 / 0" in out
    assert "ZeroDivisionError: division by zero" in out


async def test_python_timeout_kills_the_process(python: Tool, tmp_path: Path) -> None:
    sleep = unique_sleep()
    code = (
        "import subprocess, time\n"
        f"subprocess.Popen({sleep.split()!r})\n"
        "print('up', flush=True)\n"
        "time.sleep(60)\n"
    )
    began = time.monotonic()
    out = await call(python, context(tmp_path, python=True), code=code, timeout_seconds=1)
    assert time.monotonic() - began < 10
    assert out == "[timed out after 1 s; the process was killed]\nup\n"
    assert wait_until_none_with(sleep)


async def test_python_output_is_capped(python: Tool, tmp_path: Path) -> None:
    out = await call(python, context(tmp_path, python=True), code="print('z' * 500_000)")
    assert len(out) < 21_000
    assert "bytes of output left out" in out
