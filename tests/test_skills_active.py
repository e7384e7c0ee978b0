"""An active skill's `allowed-tools`, `context: fork` skills, and skills a task preloads.

The model is hostile where it matters: it tries to call past a skill's tool list, to escape it
by loading another skill, and to widen a forked skill's sub-agent.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skill_factory import write_skill

from orchestrator import Agent, Orchestrator, Permissions, tool
from orchestrator.models import ScriptedModel
from orchestrator.skills import SkillCatalog
from orchestrator.skills.allowed import tool_rule
from orchestrator.tasks import ForkExtension, SubagentDef, SubagentRegistry


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "arguments": arguments}]}


def tool_results(model: ScriptedModel, agent: str) -> list[tuple[str | None, str]]:
    request = [r for r in model.requests if r.agent == agent][-1]
    return [(m.error_type, m.content or "") for m in request.messages if m.role == "tool"]


def catalog(root: Path) -> SkillCatalog:
    return SkillCatalog([root])  # the built-ins too: files, shell, data...


def test_claude_code_tool_names_map_to_ours() -> None:
    rule = tool_rule("x", "Read Grep Glob Bash(git diff *) WebFetch Task mcp__gh__pr WebSearch")
    assert rule is not None
    assert rule.names == {
        "files__read_file", "files__grep", "files__glob", "shell__run", "http__get", "fork"
    }  # fmt: skip
    assert rule.allows("load_skill") and rule.allows("read_task_output")
    assert not rule.allows("files__write_file") and not rule.allows("http__post")
    assert tool_rule("x", "WebSearch TodoWrite mcp__x__y") is None  # another client's only
    listed = tool_rule("x", ["Read", "data"], ["files__read_file"], skills={"data"})
    assert listed is not None and listed.allows("data__query")
    assert not listed.allows("files__read_file")  # denied wins


async def test_restrict_makes_allowed_tools_refuse_everything_else(tmp_path: Path) -> None:
    # `skill_allowed_tools: restrict`: the list is a limit (by default it pre-approves).
    write_skill(
        tmp_path / "skills",
        "auditor",
        description="Audits files, read-only.",
        extra="allowed-tools: Read Grep\n",
        body="Read and grep; never change anything.",
    )
    (tmp_path / "notes.txt").write_text("a note\n")
    script = {
        "agent": [
            call("load_skill", name="files"),
            call("load_skill", name="auditor"),
            call("files__read_file", path="notes.txt"),
            call("files__write_file", path="owned.txt", content="x"),
            # Escapes: load another skill, then use its tools; fork around it.
            call("load_skill", name="shell"),
            call("shell__run", command="touch owned.txt"),
            call("fork", tasks=[{"id": "a", "task": "Write owned.txt."}]),
            {"content": "done"},
        ]
    }
    model = ScriptedModel(script)
    agent = Agent(
        model,
        name="agent",
        skills=catalog(tmp_path / "skills"),
        permissions=Permissions(workspace=tmp_path, shell=True, skill_allowed_tools="restrict"),
    )
    result = await agent.run("Audit.")

    assert result.status == "completed"
    assert not (tmp_path / "owned.txt").exists()
    found = tool_results(model, "agent")
    _, loaded, read, write, _, shell, forked = found
    assert "## Tools allowed from now on" in loaded[1]
    assert "files__read_file" in loaded[1] and "files__grep" in loaded[1]
    assert read == (None, "a note\n")
    assert write[0] == "denied"
    assert "not among the tools allowed by the active skill 'auditor' (allowed-tools)" in write[1]
    assert shell[0] in ("denied", "unknown_tool")
    assert forked[0] == "unknown_tool"  # this agent has no fork extension
    assert "shell__run" not in [t.name for t in model.requests[-1].tools]


async def test_a_tool_list_of_another_client_limits_nothing(tmp_path: Path) -> None:
    write_skill(
        tmp_path / "skills",
        "researcher",
        description="Researches.",
        extra="allowed-tools: WebSearch mcp__search__query\n",
    )
    script = {
        "agent": [
            call("load_skill", name="researcher"),
            call("load_skill", name="files"),
            call("files__write_file", path="notes.txt", content="found"),
            {"content": "done"},
        ]
    }
    model = ScriptedModel(script)
    agent = Agent(
        model, name="agent", skills=catalog(tmp_path / "skills"),
        permissions=Permissions(workspace=tmp_path),
    )  # fmt: skip
    await agent.run("go")
    assert (tmp_path / "notes.txt").read_text() == "found"


FORKED = """\
Summarise the file $ARGUMENTS in one line.
Use only read tools.
"""


def forked_skill(root: Path, agent: str | None = None, allowed: str = "Read") -> Path:
    extra = f"context: fork\nallowed-tools: {allowed}\n" + (f"agent: {agent}\n" if agent else "")
    return write_skill(
        root, "summarise", description="Summarises a file.", extra=extra, body=FORKED
    )


async def test_a_context_fork_skill_runs_as_a_sub_agent_through_fork(tmp_path: Path) -> None:
    forked_skill(tmp_path / "skills", agent="reader")
    (tmp_path / "report.txt").write_text("sales up 5%\n")
    reader = SubagentDef(name="reader", description="Reads.", skills=["files"], system="You read.")
    script = {
        "planner": [
            call("load_skill", name="summarise", arguments="report.txt"),
            {"content": "Sales are up."},
        ],
        "planner/summarise-1": [
            call("load_skill", name="files"),
            call("files__read_file", path="report.txt"),
            call("files__write_file", path="owned.txt", content="x"),
            {"content": "sales up 5%"},
        ],
    }
    model = ScriptedModel(script)
    orchestrator = Orchestrator(
        model,
        skills=[tmp_path / "skills"],
        subagents=SubagentRegistry([reader]),
        permissions=Permissions(workspace=tmp_path, shell=True, skill_allowed_tools="restrict"),
    )
    result = await orchestrator.run("Summarise report.txt")

    assert result.status == "completed"
    model.assert_all_used()
    [child] = [r for r in model.requests if r.agent == "planner/summarise-1"][:1]
    assert child.messages[0].content == "You read." or "You read." in (
        child.messages[0].content or ""
    )
    assert (
        child.messages[1].content
        == "Summarise the file report.txt in one line.\nUse only read tools."
    )
    loaded, read, write = tool_results(model, "planner/summarise-1")
    assert "Not callable by this agent, which is limited: " in loaded[1]
    assert "files__write_file" in loaded[1].split("which is limited: ")[1]
    assert read[0] is None and write[0] == "unknown_tool"  # not even in its tools array
    assert not (tmp_path / "owned.txt").exists()
    (observation,) = tool_results(model, "planner")
    assert observation[0] is None
    assert "Skill 'summarise' ran as a sub-agent (context: fork)." in observation[1]
    assert "### summarise-1 [completed] agent=reader" in observation[1]
    assert "sales up 5%" in observation[1]
    assert result.children[0].agent == "reader"


async def test_a_forked_skill_cannot_widen_past_its_parent(tmp_path: Path) -> None:
    # The planner forks a sub-agent limited to files; it runs a context: fork skill whose
    # agent is the general one (all skills): the skill's sub-agent still has only files.
    forked_skill(tmp_path / "skills", allowed="Read Bash")
    limited = SubagentDef(name="limited", description="Files only.", skills=["files", "summarise"],
                          system="You read.")  # fmt: skip
    script = {
        "planner": [
            call("fork", tasks=[{"id": "a", "agent": "limited", "task": "Summarise x."}]),
            {"content": "done"},
        ],
        "planner/a": [call("load_skill", name="summarise", arguments="x"), {"content": "a"}],
        "planner/a/summarise-1": [
            call("load_skill", name="shell"),
            call("shell__run", command="touch owned.txt"),
            {"content": "could not"},
        ],
    }
    model = ScriptedModel(script)
    orchestrator = Orchestrator(
        model,
        skills=[tmp_path / "skills"],
        subagents=SubagentRegistry([limited]),
        permissions=Permissions(workspace=tmp_path, shell=True),
    )
    await orchestrator.run("go")

    model.assert_all_used()
    loaded, ran = tool_results(model, "planner/a/summarise-1")
    assert "Unknown skill 'shell'" in loaded[1]
    assert ran[0] == "unknown_tool"
    grandchild = next(r for r in model.requests if r.agent == "planner/a/summarise-1")
    assert not any(t.name.startswith("shell__") for t in grandchild.tools)
    assert not (tmp_path / "owned.txt").exists()


async def test_a_context_fork_skill_at_the_depth_limit_is_refused(tmp_path: Path) -> None:
    forked_skill(tmp_path / "skills", agent="nobody-here")
    script = {
        "planner": [
            call("load_skill", name="summarise"),
            call("fork", tasks=[{"id": "a", "task": "Summarise."}]),
            {"content": "done"},
        ],
        "planner/a": [call("load_skill", name="summarise"), {"content": "a"}],
    }
    model = ScriptedModel(script)
    orchestrator = Orchestrator(
        model, skills=[tmp_path / "skills"], max_depth=1,
        permissions=Permissions(workspace=tmp_path),
    )  # fmt: skip
    await orchestrator.run("go")

    unknown, _ = tool_results(model, "planner")
    assert unknown[0] == "tool_error"
    assert "runs as the sub-agent 'nobody-here' (its `agent` field)" in unknown[1]
    [(kind, text)] = tool_results(model, "planner/a")
    assert kind == "tool_error" and "cannot start sub-agents" in text


async def test_a_task_gives_its_agent_a_skill_the_model_may_not_choose(tmp_path: Path) -> None:
    write_skill(
        tmp_path / "skills",
        "deploy",
        description="Deploys.",
        extra="disable-model-invocation: true\n",
        body="Deploy with care: check the tag first.",
    )
    script = {
        "planner": [
            call("load_skill", name="deploy"),
            call("fork", tasks=[{"id": "d", "task": "Deploy.", "skills": ["deploy", "files"]}]),
            {"content": "done"},
        ],
        "planner/d": [call("load_skill", name="deploy"), {"content": "deployed"}],
    }
    model = ScriptedModel(script)
    orchestrator = Orchestrator(
        model, skills=[tmp_path / "skills"], permissions=Permissions(workspace=tmp_path)
    )
    await orchestrator.run("go")

    refused, forked = tool_results(model, "planner")
    assert refused[0] == "tool_error" and "disable-model-invocation" in refused[1]
    assert "d [completed]" in forked[1]
    child = next(r for r in model.requests if r.agent == "planner/d")
    system = child.messages[0].content or ""
    assert "### Skill: deploy" in system and "check the tag first" in system
    assert "### Skill: files" in system
    assert "files__read_file" in [t.name for t in child.tools]  # preloaded: from the start
    [(kind, text)] = tool_results(model, "planner/d")
    assert kind is None and "already loaded" in text


async def test_a_sub_agents_tool_list_refuses_even_tools_in_its_array(tmp_path: Path) -> None:
    marker = tmp_path / "saved.txt"

    @tool
    def save(text: str) -> str:
        """Save a text."""
        marker.write_text(text)
        return "saved"

    reader = SubagentDef(name="reader", description="Reads.", tools=["Read"], system="Read.")
    fork = ForkExtension(SubagentRegistry([reader]), tools=[save])
    script = {
        "planner": [
            call("fork", tasks=[{"id": "r", "agent": "reader", "task": "Read."}]),
            {"content": "done"},
        ],
        "planner/r": [call("save", text="x"), {"content": "read"}],
    }
    model = ScriptedModel(script)
    await Agent(model, name="planner", extensions=[fork]).run("go")

    [(kind, text)] = tool_results(model, "planner/r")
    assert kind == "denied"
    assert "not among the tools allowed by its sub-agent definition 'reader' (tools)" in text
    assert not marker.exists()
