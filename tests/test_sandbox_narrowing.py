"""What a part of a run gives the sandbox stays within the run's, and checking costs nothing.

An MCP server's `sandbox:` entry is narrowed by the run's sandbox (a host the run does not
allow is not reached through it); a skill listing the whole `shell` skill is not announced as
pre-approving commands that run unconfined; a run's start (each sub-agent's too) makes no
cgroup to say which limits hold, and `validate` makes no folder; sandbox paths are absolute
once parsed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_process import orchestrator
from skill_factory import write_skill
from test_sandbox import SPEC, Host, allowed_server, call, host, needs_bubblewrap

from orchestrator import Agent, Orchestrator, Permissions
from orchestrator.messages import ToolCall
from orchestrator.models import ScriptedModel
from orchestrator.security import SandboxSettings
from orchestrator.skills import SkillCatalog
from orchestrator.skills.allowed import skill_preapproval, standing_approvals
from orchestrator.skills.servers import parse_config

__all__ = ["allowed_server", "host"]  # the fixtures, used by name

FETCHING_SERVER = '''\
import urllib.request

from mcp.server.mcpserver import MCPServer

server = MCPServer("fetcher")


@server.tool()
def fetch(url: str) -> str:
    """Fetch a page (through the sandbox's proxy, where one is set)."""
    try:
        return urllib.request.urlopen(url, timeout=5).read().decode()
    except OSError as exc:
        return f"refused: {exc}"


if __name__ == "__main__":
    server.run("stdio")
'''


@needs_bubblewrap
def test_an_mcp_servers_sandbox_entry_cannot_widen_the_runs_network(
    host: Host, allowed_server: int
) -> None:
    pytest.importorskip("mcp")
    skills = host.root / "skills"
    folder = write_skill(skills, "fetcher", description="Fetches.")
    (folder / "server.py").write_text(FETCHING_SERVER)
    # The skill's own entry asks for a host the run's sandbox does not allow.
    entry: dict[str, Any] = {
        "command": sys.executable,
        "args": ["server.py"],
        "sandbox": {"network": [f"127.0.0.1:{allowed_server}"]},
    }
    (folder / ".mcp.json").write_text(json.dumps({"mcpServers": {"fetch": entry}}))
    turns = [
        call("load_skill", name="fetcher"),
        call("fetcher__fetch", url=f"http://127.0.0.1:{allowed_server}/"),
    ]
    model = ScriptedModel({"agent": [*turns, {"content": "done"}]})
    agent = Agent(
        model,
        name="agent",
        skills=SkillCatalog([skills]),
        permissions=Permissions(workspace=host.work, sandbox=SandboxSettings(network=())),
    )
    assert agent.run_sync("Fetch.").status == "completed"

    loaded, fetched = [m.content or "" for m in model.requests[-1].messages if m.role == "tool"]
    assert "hello from the allowed port" not in fetched
    assert "MCP server 'fetch' is not available" in loaded
    assert f"network 127.0.0.1:{allowed_server}" in loaded


def test_within_keeps_any_settings_under_no_sandbox_and_lets_a_part_name_the_workspace(
    tmp_path: Path,
) -> None:
    asked = SandboxSettings(network=("api.example.com:443",), memory_mb=512)
    assert asked.within(SandboxSettings(backend="none")) == asked
    work = tmp_path / "work"
    given = SandboxSettings(writable=(work / "out",))
    assert given.within(SandboxSettings(), parent_writes=[work]).writable == (work / "out",)
    with pytest.raises(Exception, match="writable"):
        given.within(SandboxSettings())
    # A part may ask for a sandbox where the run has none: that narrows it.
    assert SandboxSettings(backend="bubblewrap").within(SandboxSettings(backend="none"))


def test_a_skill_listing_the_whole_shell_skill_is_not_announced_pre_approved_unconfined(
    tmp_path: Path,
) -> None:
    skills = tmp_path / "skills"
    write_skill(skills, "runner", description="Runs.", extra="allowed-tools: shell python Read\n")
    catalog = SkillCatalog([skills])
    (tmp_path / "work").mkdir()
    permissions = Permissions(
        workspace=tmp_path / "work",
        shell="ask",
        python="ask",
        sandbox=SandboxSettings(backend="none"),
    )

    [line] = standing_approvals(catalog, permissions)

    assert "shell__" not in line and "python__" not in line and "files__read_file" in line
    info = catalog.get("runner")
    assert info is not None
    run = ToolCall(id="c1", name="shell__run", arguments='{"command": "ls"}')
    verdict = skill_preapproval(info, run, permissions)
    assert verdict is not None and not verdict.granted  # what the check does, the start says


@needs_bubblewrap
def test_a_runs_start_and_its_sub_agents_make_no_cgroup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from orchestrator.security import sandbox

    made: list[object] = []
    original = sandbox._Cgroups.made

    def counted(settings: SandboxSettings) -> sandbox._Cgroups:
        made.append(settings)
        return original(settings)

    monkeypatch.setattr(sandbox._Cgroups, "made", counted)
    sandbox.sandbox_at_start(Permissions(workspace=tmp_path, shell=True))  # the process's probe
    made.clear()
    fork = {"id": "a", "task": "A."}, {"id": "b", "task": "B."}
    script = {
        "planner": [call("fork", tasks=list(fork)), {"content": "done"}],
        "planner/a": [{"content": "a done"}],
        "planner/b": [{"content": "b done"}],
    }
    planner = Orchestrator(
        ScriptedModel(script), permissions=Permissions(workspace=tmp_path, shell=True)
    )
    result = planner.run_sync("Go.")

    assert result.status == "completed", result.error
    assert len(result.children) == 2
    assert made == []


def test_validate_of_a_job_that_allows_commands_makes_no_workspace(tmp_path: Path) -> None:
    (tmp_path / "script.yaml").write_text("only: [{content: listed}]\n")
    permissions = "{shell: true, sandbox: {backend: none}}"  # the default workspace: work/
    (tmp_path / "job.yaml").write_text(SPEC.format(permissions=permissions))

    done = orchestrator("validate", "job.yaml", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "work").exists()


def test_sandbox_paths_are_absolute_once_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    settings = SandboxSettings(read_only=(Path("ref"),), writable=(Path("out/../out2"),))
    assert settings.read_only == (tmp_path.resolve() / "ref",)
    assert settings.writable == (tmp_path.resolve() / "out2",)
    # A skill's `.mcp.json` gives them against its own folder, as a spec does against its.
    folder = tmp_path / "skill"
    text = json.dumps({"mcpServers": {"s": {"command": "x", "sandbox": {"read_only": ["data"]}}}})
    declared = parse_config(text, folder, "s/.mcp.json")
    sandboxed = declared.servers["s"].sandbox
    assert sandboxed is not None and sandboxed.read_only == (folder.resolve() / "data",)
