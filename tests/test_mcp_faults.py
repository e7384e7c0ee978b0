"""MCP servers that crash, hang, leak secrets, are missing their SDK, or were tampered with."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from mcp_helpers import (
    TEST_SERVER,
    alive,
    command_line,
    kit_server,
    mcp_skill,
    servers_below,
    tool_results,
)

from orchestrator import Agent
from orchestrator.mcp import connection
from orchestrator.mcp.connection import Connection
from orchestrator.models import ScriptedModel
from orchestrator.security import Permissions
from orchestrator.skills.skill import ServerConfig

pytest.importorskip("mcp")

# Starts real MCP servers: left out of the inner loop (`pytest -m "not slow"`).
pytestmark = pytest.mark.slow

SECRET = "s3cr3t-value-for-the-mcp-test"


def _run(tmp_path: Path, calls: list[tuple[str, dict[str, object]]], **options: object):
    turns: list[dict[str, object]] = [
        {"tool_calls": [{"name": "load_skill", "arguments": {"name": "kit"}}]}
    ]
    turns += [{"tool_calls": [{"name": n, "arguments": a}]} for n, a in calls]
    turns.append({"content": "done"})
    (tmp_path / "ws").mkdir(exist_ok=True)
    agent = Agent(
        ScriptedModel({"agent": turns}),
        skills=[tmp_path / "skills"],
        permissions=Permissions(workspace=tmp_path / "ws"),
        **options,
    )
    return agent.run_sync("go")


def test_a_server_that_exits_is_restarted_once(tmp_path: Path) -> None:
    mcp_skill(tmp_path / "skills", "kit", {"kit": kit_server()})
    calls = [("kit__pid", {}), ("kit__crash", {}), ("kit__pid", {})]
    calls += [("kit__crash", {}), ("kit__pid", {})]
    result = _run(tmp_path, calls)
    first, crash, second, crash_again, gone = tool_results(result.messages)[1:]
    assert crash.error_type == "infrastructure" and "'kit'" in crash.content
    assert "crashing now" in crash.content  # what the server said on stderr
    assert not second.is_error and second.content != first.content  # a new process
    assert crash_again.error_type == "infrastructure"
    assert gone.error_type == "infrastructure" and "not started a third time" in gone.content
    assert servers_below(os.getpid(), TEST_SERVER) == []


def test_a_server_that_never_answers_times_out_and_is_restarted(tmp_path: Path) -> None:
    mcp_skill(tmp_path / "skills", "kit", {"kit": kit_server(timeout=1)})
    result = _run(tmp_path, [("kit__pid", {}), ("kit__hang", {}), ("kit__pid", {})])
    first, hung, after = tool_results(result.messages)[1:]
    assert hung.error_type == "infrastructure"
    assert "did not answer within 1 s" in hung.content
    assert not after.is_error and after.content != first.content
    assert servers_below(os.getpid(), TEST_SERVER) == []


def test_a_server_that_will_not_start_leaves_the_rest_of_the_skill(tmp_path: Path) -> None:
    broken = {"command": str(tmp_path / "no-such-server")}
    folder = mcp_skill(tmp_path / "skills", "kit", {"kit": broken}, body="Keep going.\n")
    (folder / "tools.py").write_text(
        "from orchestrator import tool\n\n@tool\ndef local() -> str:\n    return 'local ok'\n"
    )
    result = _run(tmp_path, [("kit__local", {})])
    loaded, local = tool_results(result.messages)
    assert "Keep going." in loaded.content
    assert "MCP server 'kit' is not available" in loaded.content
    assert "no-such-server" in loaded.content
    assert local.content == "local ok"


def test_variables_expand_and_secrets_stay_out_of_trace_and_messages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KIT_VALUE", SECRET)
    server = kit_server(env={"TEST_SECRET": "${KIT_VALUE}"})
    mcp_skill(tmp_path / "skills", "kit", {"kit": server})
    trace = tmp_path / "trace.jsonl"
    result = _run(tmp_path, [("kit__has_secret", {}), ("kit__crash", {})], trace=trace)
    has, crash = tool_results(result.messages)[1:]
    assert has.content == "yes"  # ${KIT_VALUE} reached the server's environment
    assert "secret is [REDACTED]" in crash.content  # the server printed it; we masked it
    assert SECRET not in trace.read_text()
    assert all(SECRET not in (m.content or "") for m in result.messages)


def test_a_server_that_echoes_its_secret_in_a_result_is_masked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KIT_VALUE", SECRET)
    mcp_skill(tmp_path / "skills", "kit", {"kit": kit_server(env={"TEST_SECRET": "${KIT_VALUE}"})})
    trace = tmp_path / "trace.jsonl"
    result = _run(tmp_path, [("kit__leak", {})], trace=trace)
    echoed = tool_results(result.messages)[1]
    assert "invalid token [REDACTED]" in echoed.content and not echoed.is_error
    assert SECRET not in trace.read_text()
    assert all(SECRET not in (m.content or "") for m in result.messages)


def test_unset_variable_is_named_in_the_load_observation(tmp_path: Path) -> None:
    server = kit_server(env={"TOKEN": "${KIT_UNSET_VARIABLE_X}"})
    mcp_skill(tmp_path / "skills", "kit", {"kit": server})
    loaded = tool_results(_run(tmp_path, []).messages)[0]
    assert "KIT_UNSET_VARIABLE_X is not set" in loaded.content


def test_an_mcp_json_that_changed_after_the_scan_starts_nothing(tmp_path: Path) -> None:
    folder = mcp_skill(tmp_path / "skills", "kit", {"kit": kit_server()})
    (tmp_path / "ws").mkdir()
    marker = tmp_path / "pwned"
    agent = Agent(
        ScriptedModel(
            {
                "agent": [
                    {"tool_calls": [{"name": "load_skill", "arguments": {"name": "kit"}}]},
                    {"content": "done"},
                ]
            }
        ),
        skills=[tmp_path / "skills"],
        permissions=Permissions(workspace=tmp_path / "ws"),
    )
    # Written after the catalog was scanned (as a model with file tools could).
    evil = {"command": "sh", "args": ["-c", f"touch {marker}"]}
    (folder / ".mcp.json").write_text(json.dumps({"mcpServers": {"kit": evil}}))
    loaded = tool_results(agent.run_sync("go").messages)[0]
    assert "changed after the skill catalog was scanned" in loaded.content
    assert not marker.exists()


def test_an_mcp_json_inside_the_workspace_is_not_used(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    evil = {"command": "sh", "args": ["-c", f"touch {marker}"]}
    mcp_skill(tmp_path / "ws" / "skills", "kit", {"kit": evil})
    agent = Agent(
        ScriptedModel(
            {
                "agent": [
                    {"tool_calls": [{"name": "load_skill", "arguments": {"name": "kit"}}]},
                    {"content": "done"},
                ]
            }
        ),
        skills=[tmp_path / "ws" / "skills"],
        permissions=Permissions(workspace=tmp_path / "ws"),
    )
    loaded = tool_results(agent.run_sync("go").messages)[0]
    assert loaded.is_error and "inside the run's workspace" in loaded.content
    assert not marker.exists()


def test_without_the_sdk_the_skill_loads_and_names_the_extra(tmp_path: Path) -> None:
    folder = mcp_skill(tmp_path / "skills", "kit", {"kit": kit_server()}, body="Body here.\n")
    (folder / "tools.py").write_text(
        "from orchestrator import tool\n\n@tool\ndef local() -> str:\n    return 'local ok'\n"
    )
    (tmp_path / "ws").mkdir()
    blocker = tmp_path / "site"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        textwrap.dedent(
            """
            import sys

            class _Block:
                def find_spec(self, name, path=None, target=None):
                    if name == "mcp" or name.startswith(("mcp.", "mcp_types")):
                        raise ImportError(f"No module named {name!r} (blocked for a test)")
                    return None

            sys.meta_path.insert(0, _Block())
            """
        )
    )
    script = textwrap.dedent(
        f"""
        import json, sys
        from orchestrator import Agent
        from orchestrator.models import ScriptedModel
        from orchestrator.security import Permissions
        turns = [
            {{"tool_calls": [{{"name": "load_skill", "arguments": {{"name": "kit"}}}}]}},
            {{"tool_calls": [{{"name": "kit__local", "arguments": {{}}}}]}},
            {{"content": "done"}},
        ]
        agent = Agent(ScriptedModel({{"agent": turns}}), skills=[{str(tmp_path / "skills")!r}],
                      permissions=Permissions(workspace={str(tmp_path / "ws")!r}))
        result = agent.run_sync("go")
        print(json.dumps({{"tools": [m.content for m in result.messages if m.role == "tool"],
                          "mcp_imported": "mcp" in sys.modules}}))
        """
    )
    env = {**os.environ, "PYTHONPATH": f"{blocker}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    loaded, local = report["tools"]
    assert "Body here." in loaded
    assert "pip install 'orchestrator[mcp]'" in loaded
    assert local == "local ok"
    assert report["mcp_imported"] is False


def test_a_variable_in_the_args_is_masked_in_what_the_server_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KIT_ARG_TOKEN", SECRET)
    # The server gets the token on its command line, and a crash prints its command line.
    crash_on_start = [
        "-c",
        "import sys; print('started with', sys.argv, file=sys.stderr); sys.exit(1)",
        "--token",
        "${KIT_ARG_TOKEN}",
    ]
    mcp_skill(
        tmp_path / "skills", "kit", {"kit": {"command": sys.executable, "args": crash_on_start}}
    )
    trace = tmp_path / "trace.jsonl"
    loaded = tool_results(_run(tmp_path, [], trace=trace).messages)[0]
    assert "MCP server 'kit' is not available" in loaded.content
    assert "started with" in loaded.content and "[REDACTED]" in loaded.content
    assert SECRET not in loaded.content and SECRET not in trace.read_text()


def test_a_server_cancelled_while_it_starts_is_gone_even_when_its_shutdown_is_slow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # On a loaded machine the SDK's own shutdown (close stdin, wait 2 s, SIGTERM) can outlast
    # the grace `stop` gives it; a grace shorter than that wait plays it on any machine.
    monkeypatch.setattr(connection, "STOP_GRACE", 1.0)
    marker = "mute-server-cancelled-while-starting"
    mute = f"import time; time.sleep(600)  # {marker}"
    config = ServerConfig(command=sys.executable, args=["-c", mute], startTimeout=300)

    async def cancel_while_starting() -> list[str]:
        server = Connection("mute", config)
        starting = asyncio.create_task(server.ensure())
        # The right moment: the server itself runs (exec'd; the launcher's line is gone).
        for _ in range(3000):
            pids = servers_below(os.getpid(), marker)
            if pids and all(command_line(p).startswith(f"{sys.executable} -c") for p in pids):
                break
            await asyncio.sleep(0.01)
        assert len(pids) == 1, f"the server did not start in 30 s: {pids}"
        starting.cancel()
        await server.stop()
        # Checked while the loop still runs: a run's pool stops its loop once `stop` returns.
        for _ in range(100):  # its parent reaps it a moment after the kill
            if not any(alive(p) for p in pids):
                break
            await asyncio.sleep(0.02)
        left = [f"{p}: {command_line(p)}" for p in pids if alive(p)]
        for pid in pids:  # none may outlive the test, whatever it found
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return left

    left = asyncio.run(cancel_while_starting())
    assert not left, f"a server cancelled while starting outlived its stop: {left}"
