"""No widening through forks: a child's skills, permissions, depth and budget stay within its
parent's. The model is hostile: it forks sub-agents that try to reach past their parent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trace_lines import trace_lines

from orchestrator import Orchestrator, Permissions, TokenBudget, Trace
from orchestrator.models import ScriptedModel
from orchestrator.tasks import SubagentDef, SubagentRegistry


def fork_call(*tasks: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": [{"name": "fork", "arguments": {"tasks": list(tasks)}}]}


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "arguments": arguments}]}


def registry(*agents: SubagentDef) -> SubagentRegistry:
    return SubagentRegistry(list(agents))


LIMITED = SubagentDef(
    name="limited", description="Reads files only.", skills=["files"], system="You read."
)


def orchestrator(model: ScriptedModel, workspace: Path, **options: Any) -> Orchestrator:
    return Orchestrator(
        model,
        subagents=registry(LIMITED, *options.pop("agents", ())),
        permissions=Permissions(workspace=workspace, **options.pop("grant", {})),
        **options,
    )


def tool_results(model: ScriptedModel, agent: str) -> list[str]:
    """What the tools of `agent` answered, as the model saw them in its last request."""
    request = [r for r in model.requests if r.agent == agent][-1]
    return [m.content or "" for m in request.messages if m.role == "tool"]


async def test_a_limited_agent_cannot_fork_a_child_with_more_skills(tmp_path: Path) -> None:
    script = {
        "planner": [
            fork_call({"id": "a", "agent": "limited", "task": "Look around."}),
            {"content": "done"},
        ],
        "planner/a": [
            # Ask for a skill it lacks by name: refused before anything runs.
            fork_call({"id": "b", "task": "Run a command.", "skills": ["shell"]}),
            # A general child with no skills named: it gets only what its parent has.
            fork_call({"id": "c", "task": "Run a command."}),
            {"content": "a done"},
        ],
        "planner/a/c": [call("load_skill", name="shell"), {"content": "c done"}],
    }
    model = ScriptedModel(script)
    result = await orchestrator(model, tmp_path, grant={"shell": True}).run("go")

    assert result.status == "completed"
    model.assert_all_used()
    refused, ran = tool_results(model, "planner/a")
    assert "The fork was not run" in refused
    assert "'shell' is outside what this agent may use" in refused
    assert "available: files" in refused
    assert "c [completed]" in ran
    child = next(r for r in model.requests if r.agent == "planner/a/c")
    assert "- files:" in (child.messages[0].content or "")
    assert "- shell:" not in (child.messages[0].content or "")
    assert not any(t.name.startswith("shell__") for t in child.tools)
    (loaded,) = tool_results(model, "planner/a/c")
    assert "Unknown skill 'shell'" in loaded


async def test_a_child_keeps_its_parents_permissions(tmp_path: Path) -> None:
    # The shell skill is allowed, the shell permission is not: no fork can grant it.
    script = {
        "planner": [fork_call({"id": "a", "task": "Nest."}), {"content": "done"}],
        "planner/a": [fork_call({"id": "b", "task": "Run it."}), {"content": "a done"}],
        "planner/a/b": [
            call("load_skill", name="shell"),
            call("shell__run", command="touch owned.txt"),
            {"content": "b done"},
        ],
    }
    model = ScriptedModel(script)
    await orchestrator(model, tmp_path).run("go")

    model.assert_all_used()
    assert "Permission denied" in tool_results(model, "planner/a/b")[-1]
    assert not (tmp_path / "owned.txt").exists()


async def test_depth_cannot_grow_past_the_limit(tmp_path: Path) -> None:
    script = {
        "planner": [fork_call({"id": "a", "task": "Nest."}), {"content": "done"}],
        "planner/a": [fork_call({"id": "b", "task": "Nest again."}), {"content": "a done"}],
        "planner/a/b": [fork_call({"id": "c", "task": "And again."}), {"content": "b done"}],
    }
    model = ScriptedModel(script)
    await orchestrator(model, tmp_path, max_depth=2).run("go")

    model.assert_all_used()
    deepest = next(r for r in model.requests if r.agent == "planner/a/b")
    assert "fork" not in [t.name for t in deepest.tools]
    assert "Unknown tool 'fork'" in tool_results(model, "planner/a/b")[0]
    assert not any(r.agent.startswith("planner/a/b/") for r in model.requests)


async def test_a_childs_budget_is_a_cap_inside_its_parents(tmp_path: Path) -> None:
    tight = SubagentDef(name="tight", description="Capped.", max_tokens=12_000, system="Be brief.")
    greedy = SubagentDef(
        name="greedy", description="Asks for a lot.", max_tokens=1_000_000, system="Take all."
    )
    # Each turn has text too, so the wrap-up call (tools disabled) can answer with it.
    busy = [{**call("read_task_output", id=f"x{i}"), "content": "working"} for i in range(40)]
    script = {
        "planner": [fork_call({"id": "a", "agent": "tight", "task": "Nest."}), {"content": "ok"}],
        "planner/a": [
            fork_call({"id": "b", "agent": "greedy", "task": "Spend."}),
            {"content": "a done"},
        ],
        "planner/a/b": [*busy, {"content": "b done"}],
    }
    model = ScriptedModel(script)
    budget = TokenBudget(200_000)
    trace = tmp_path / "run.jsonl"
    with Trace(trace) as opened:
        orch = orchestrator(model, tmp_path, agents=[tight, greedy], trace=opened)
        result = await orch.planner(budget=budget, trace=opened).run("go")

    by_agent = result.usage_by_agent()
    subtree = sum(u.total_tokens for path, u in by_agent.items() if path.startswith("planner/a"))
    assert subtree <= 12_000
    ends = {e["agent"]: e for e in trace_lines(trace) if e["type"] == "run_end"}
    assert ends["planner/a/b"]["status"] == "budget_exhausted", ends["planner/a/b"]["error"]
    assert budget.used == sum(u.total_tokens for u in by_agent.values())


async def test_a_definition_cannot_raise_the_runs_step_cap(tmp_path: Path) -> None:
    eager = SubagentDef(name="eager", description="Wants more.", max_steps=5, system="Go on.")
    frugal = SubagentDef(name="frugal", description="Wants less.", max_steps=1, system="Stop.")
    busy = [{**call("read_task_output", id=f"x{i}"), "content": "working"} for i in range(5)]
    script = {
        "planner": [
            fork_call(
                {"id": "a", "agent": "eager", "task": "Work."},
                {"id": "b", "agent": "frugal", "task": "Work."},
            ),
            {"content": "done"},
        ],
        "planner/a": busy,
        "planner/b": busy,
    }
    model = ScriptedModel(script)
    result = await orchestrator(model, tmp_path, agents=[eager, frugal], max_steps=2).run("go")

    steps = {child.id: (child.status, child.steps) for child in result.children}
    assert steps == {"a": ("max_steps", 2), "b": ("completed", 1)}
