"""Claude Code's and Codex's sub-agent files load unchanged, and run with their limits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator import Orchestrator, Permissions
from orchestrator.errors import SafetyWarning
from orchestrator.models import ScriptedModel
from orchestrator.tasks import SubagentRegistry, check_subagent_folder
from orchestrator.tasks.subagents import read_subagent

# The shape of the code-reviewer example in Claude Code's sub-agent documentation, as the
# `/agents` command writes it (with a `color`).
CODE_REVIEWER = """\
---
name: code-reviewer
description: Expert code reviewer. Reviews changed code for quality, security and \
maintainability; use right after code is written or changed.
tools: Read, Grep, Glob, Bash
model: inherit
color: blue
---

You are a senior code reviewer who keeps the code base clean and safe.

When invoked:
1. Look at what changed.
2. Read the files that changed.
3. Report problems by priority, each with a fix.
"""

# The shape of the agents in Anthropic's Claude Code plugins (plugins/*/agents/*.md): a long
# tool list with tools that have no equivalent here, a model alias, a colour.
PLUGIN_AGENT = """\
---
name: code-explorer
description: Traces how a feature works: entry points, call chains, data flow. Use when: \
someone asks how something works.
tools: Glob, Grep, LS, Read, NotebookRead, WebFetch, TodoWrite, WebSearch, KillShell, BashOutput
model: sonnet
color: yellow
---

You are an expert code analyst.
"""

LIST_AGENT = """\
---
name: test-runner
description: Runs the tests and reports failures.
tools:
  - Read
  - Bash
disallowedTools: [Write]
skills: [data]
maxTurns: 12
permissionMode: acceptEdits
---
Run the tests.
"""

CODEX_AGENT = """\
name = "code_mapper"
description = "Maps a code base read-only: modules, owners, call paths."
model = "gpt-5.3-codex"
model_reasoning_effort = "medium"
sandbox_mode = "read-only"
nickname_candidates = ["Atlas", "Scout"]
developer_instructions = \"\"\"
Trace the real call paths and cite files.
Do not change anything.
\"\"\"
"""


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_claude_codes_example_file_loads_unchanged(tmp_path: Path) -> None:
    agent, notes = read_subagent(
        write(tmp_path / ".claude" / "agents", "reviewer.md", CODE_REVIEWER)
    )
    assert notes == []
    assert agent.name == "code-reviewer"  # the file's name need not be the agent's
    assert agent.format == "claude"
    assert agent.model is None  # inherit: the parent's model
    assert agent.skills == ["files", "shell"]
    assert agent.preload == ["files", "shell"]
    assert agent.tools == ["Read", "Grep", "Glob", "Bash"]
    assert agent.metadata == {"color": "blue"}
    assert agent.system.startswith("You are a senior code reviewer")
    assert check_subagent_folder(tmp_path / ".claude" / "agents") == []


def test_a_plugin_agent_loads_and_unknown_tools_are_warned_about(tmp_path: Path) -> None:
    folder = tmp_path / "plugins" / "feature-dev" / "agents"
    write(folder, "code-explorer.md", PLUGIN_AGENT)
    registry = SubagentRegistry(folders=[folder])
    agent = registry.get("code-explorer")
    assert agent is not None
    assert agent.description.endswith("Use when: someone asks how something works.")
    assert agent.model is not None and agent.model.name == "sonnet"  # an alias, for models
    assert agent.skills == ["files", "http"]
    assert agent.metadata == {"color": "yellow"}
    warned = sorted(
        str(w).split(": tool ")[1].split(" ")[0]
        for w in registry.warnings
        if "has no equivalent" in str(w)
    )
    assert warned == sorted(
        ["'NotebookRead'", "'TodoWrite'", "'WebSearch'", "'KillShell'", "'BashOutput'"]
    )
    assert not any("left out" in str(w) for w in registry.warnings)


def test_yaml_lists_max_turns_and_preloaded_skills(tmp_path: Path) -> None:
    agent, notes = read_subagent(write(tmp_path, "test-runner.md", LIST_AGENT))
    # Claude Code's permission mode has no equivalent here: loaded, but not in silence.
    assert notes == [
        "permissionMode: not a field of a sub-agent here, so it has no effect (its agent gets "
        "its parent's permissions, narrowed only by `skills`)"
    ]
    assert agent.max_steps == 12
    assert agent.skills == ["files", "shell", "data"]
    assert agent.preload == ["files", "shell", "data"]
    assert agent.disallowed_tools == ["Write"]
    assert agent.metadata == {"permissionMode": "acceptEdits"}


def test_a_codex_agent_file_loads(tmp_path: Path) -> None:
    folder = tmp_path / ".codex" / "agents"
    write(folder, "code_mapper.toml", CODEX_AGENT)
    with pytest.warns(SafetyWarning, match="sandbox_mode: not a field"):
        registry = SubagentRegistry(folders=[folder])
    assert [w.message.split(":")[0] for w in registry.warnings] == ["sandbox_mode"]
    agent = registry.get("code_mapper")
    assert agent is not None and agent.format == "codex"
    assert agent.description.startswith("Maps a code base read-only")
    assert agent.system == "Trace the real call paths and cite files.\nDo not change anything."
    assert agent.model is not None and agent.model.name == "gpt-5.3-codex"
    assert agent.skills == "*"
    assert agent.metadata == {
        "model_reasoning_effort": "medium",
        "sandbox_mode": "read-only",
        "nickname_candidates": '["Atlas", "Scout"]',
    }
    write(folder, "broken.toml", "name = \n")
    assert any(
        "broken.toml: left out: not valid TOML" in str(w)
        for w in SubagentRegistry(folders=[folder]).warnings
    )


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "arguments": arguments}]}


def fork(*tasks: dict[str, Any]) -> dict[str, Any]:
    return call("fork", tasks=list(tasks))


async def test_a_claude_agent_runs_with_its_tools_preloaded_and_nothing_more(
    tmp_path: Path,
) -> None:
    agents = tmp_path / ".claude" / "agents"
    write(agents, "code-reviewer.md", CODE_REVIEWER)
    (tmp_path / "app.py").write_text("print('hi')\n")
    script = {
        "planner": [
            fork({"id": "review", "agent": "code-reviewer", "task": "Review app.py."}),
            {"content": "reviewed"},
        ],
        "planner/review": [
            call("files__read_file", path="app.py"),
            # A hostile turn: its definition gives it no Write, and no load widens that.
            call("files__write_file", path="owned.txt", content="x"),
            call("load_skill", name="files"),
            {"content": "app.py prints hi; no problems."},
        ],
    }
    model = ScriptedModel(script)
    orchestrator = Orchestrator(
        model,
        subagents=[agents],
        permissions=Permissions(workspace=tmp_path, shell=True),
    )
    result = await orchestrator.run("Review the code.")

    assert result.status == "completed"
    model.assert_all_used()
    first = next(r for r in model.requests if r.agent == "planner/review")
    tools = [t.name for t in first.tools]
    assert {"files__read_file", "files__grep", "files__glob", "shell__run"} <= set(tools)
    assert "files__write_file" not in tools and "files__edit_file" not in tools
    system = first.messages[0].content or ""
    assert system.startswith("You are a senior code reviewer")
    assert "# Skills loaded for you" in system and "### Skill: files" in system
    last = [r for r in model.requests if r.agent == "planner/review"][-1]
    read, write_refused, reload = (m for m in last.messages if m.role == "tool")
    assert "print('hi')" in (read.content or "")
    assert write_refused.error_type == "unknown_tool"  # never in its tools array
    assert "already loaded" in (reload.content or "")
    assert not (tmp_path / "owned.txt").exists()
