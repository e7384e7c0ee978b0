"""`fork`: sub-agents as a DAG under one budget, results as one observation."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from trace_lines import trace_lines

from orchestrator import (
    Agent,
    Message,
    Orchestrator,
    TokenBudget,
    ToolContext,
    Trace,
    rebuild_conversations,
    tool,
)
from orchestrator.models import ScriptedModel
from orchestrator.tasks import ForkExtension, ForkSettings, SubagentDef, SubagentRegistry


def fork_call(*tasks: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": [{"name": "fork", "arguments": {"tasks": list(tasks)}}]}


def planner(
    model: ScriptedModel,
    *,
    registry: SubagentRegistry | None = None,
    budget: TokenBudget | None = None,
    trace: Trace | None = None,
    **settings: Any,
) -> Agent:
    extension = ForkExtension(registry or SubagentRegistry(), settings=ForkSettings(**settings))
    return Agent(model, name="planner", extensions=[extension], budget=budget, trace=trace)


def observation(result_messages: list[Message], index: int = 0) -> str:
    forks = [m for m in result_messages if m.role == "tool" and m.name == "fork"]
    return forks[index].content or ""


async def test_diamond_dependents_see_outputs_and_independent_tasks_overlap(tmp_path: Path) -> None:
    script = {
        "planner": [
            fork_call(
                {"id": "load", "task": "Load the sales figures."},
                {"id": "north", "task": "Analyse the north.", "depends_on": ["load"]},
                {"id": "south", "task": "Analyse the south.", "depends_on": ["load"]},
                {"id": "report", "task": "Combine.", "depends_on": ["north", "south"]},
            ),
            {"content": "Report: north up, south down."},
        ],
        "planner/load": [{"content": "sales: north 120, south 80"}],
        "planner/north": [{"content": "north is up 20%"}],
        "planner/south": [{"content": "south is down 5%"}],
        "planner/report": [{"content": "north up, south down"}],
    }
    model = ScriptedModel(script, latency=0.1)
    trace_path = tmp_path / "run.jsonl"
    with Trace(trace_path) as trace:
        result = await planner(model, trace=trace).run("Review sales")

    assert result.status == "completed"
    model.assert_all_used()
    prompts = {
        r.agent: r.messages[-1].content or "" for r in model.requests if r.agent != "planner"
    }
    assert (
        '<result task="load" status="completed">\nsales: north 120, south 80\n</result>'
        in prompts["planner/north"]
    )
    assert '<result task="north" status="completed">\nnorth is up 20%' in prompts["planner/report"]
    assert '<result task="south" status="completed">' in prompts["planner/report"]
    assert "<result" not in prompts["planner/load"]

    events = trace_lines(trace_path)
    starts = {e["agent"]: e["ts"] for e in events if e["type"] == "task_start"}
    ends = {e["agent"]: e["ts"] for e in events if e["type"] == "task_end"}
    assert (
        starts["planner/north"] < ends["planner/south"]
        and starts["planner/south"] < ends["planner/north"]
    )
    assert starts["planner/north"] >= ends["planner/load"]
    assert starts["planner/report"] >= max(ends["planner/north"], ends["planner/south"])
    fork_event = next(e for e in events if e["type"] == "fork")
    assert fork_event["tasks"][3] == {
        "id": "report",
        "path": "planner/report",
        "agent": "general",
        "depends_on": ["north", "south"],
    }

    text = observation(result.messages)
    assert text.startswith("Fork finished: 4 tasks (4 completed).")
    assert "### north [completed] agent=general tokens=" in text and "north is up 20%" in text
    assert [c.id for c in result.children] == ["load", "north", "south", "report"]
    assert set(result.usage_by_agent()) == {
        "planner",
        "planner/load",
        "planner/north",
        "planner/south",
        "planner/report",
    }
    conversations = rebuild_conversations(trace_path)
    assert conversations["planner"] == result.messages
    assert conversations["planner/report"] == result.children[3].run.messages


async def test_a_failed_task_skips_its_dependents_and_others_go_on() -> None:
    script = {
        "planner": [
            fork_call(
                {"id": "fetch", "task": "Fetch."},
                {"id": "parse", "task": "Parse.", "depends_on": ["fetch"]},
                {"id": "summary", "task": "Summarize.", "depends_on": ["parse"]},
                {"id": "other", "task": "Unrelated work."},
            ),
            {"content": "partial"},
        ],
        "planner/fetch": [],  # the model fails for this task: its run ends as an error
        "planner/other": [{"content": "other done"}],
    }
    result = await planner(ScriptedModel(script)).run("go")

    statuses = {c.id: (c.status, c.reason) for c in result.children}
    assert statuses["fetch"][0] == "error" and "no turn left" in (statuses["fetch"][1] or "")
    assert statuses["parse"] == ("skipped", "dependency 'fetch' ended error")
    assert statuses["summary"] == ("skipped", "dependency 'parse' ended skipped")
    assert statuses["other"] == ("completed", None)
    text = observation(result.messages)
    assert "### parse [skipped] agent=general\nreason: dependency 'fetch' ended error" in text


@pytest.mark.parametrize(
    ("bad_tasks", "expected"),
    [
        (
            [
                {"id": "a", "task": "x", "depends_on": ["c"]},
                {"id": "b", "task": "x", "depends_on": ["a"]},
                {"id": "c", "task": "x", "depends_on": ["b"]},
            ],
            "dependency cycle: a -> c -> b -> a",
        ),
        (
            [{"id": "a", "task": "x", "depends_on": ["lod"]}, {"id": "load", "task": "x"}],
            "depends on unknown task 'lod' (did you mean 'load'?)",
        ),
        ([{"id": "a", "task": "x"}, {"id": "a", "task": "y"}], "duplicate task id 'a'"),
        (
            [{"id": "a", "task": "x", "agent": "reviewr"}],
            "unknown agent 'reviewr' (did you mean 'reviewer'?)",
        ),
        (
            [{"id": "a", "task": "x", "agent": "reviewer", "skills": ["shell"]}],
            "agent 'reviewer' may not use skill 'shell'",
        ),
        ([], "tasks: List should have at least 1 item"),
    ],
)
async def test_a_bad_graph_is_an_observation_the_planner_corrects(
    bad_tasks: list[dict[str, Any]], expected: str
) -> None:
    registry = SubagentRegistry(
        [SubagentDef(name="reviewer", description="Reviews.", skills=["files"], system="Review.")]
    )
    script = {
        "planner": [
            fork_call(*bad_tasks),
            fork_call({"id": "fixed", "task": "Do it properly."}),
            {"content": "fixed it"},
        ],
        "planner/fixed": [{"content": "done"}],
    }
    model = ScriptedModel(script)
    result = await planner(model, registry=registry).run("go")

    first, second = [m for m in result.messages if m.role == "tool"]
    assert first.is_error and expected in (first.content or "")
    assert not second.is_error and "1 completed" in (second.content or "")
    assert result.status == "completed"
    assert [c.id for c in result.children] == ["fixed"]  # nothing of the bad fork ran
    model.assert_all_used()


async def test_nested_forks_stop_at_the_depth_limit() -> None:
    script = {
        "planner": [
            fork_call({"id": "team", "task": "Split this further."}),
            {"content": "all done"},
        ],
        "planner/team": [
            fork_call({"id": "leaf", "task": "Do the smallest part."}),
            {"content": "team done"},
        ],
        "planner/team/leaf": [{"content": "leaf done"}],
    }
    model = ScriptedModel(script)
    result = await planner(model, max_depth=2).run("go")

    assert result.status == "completed"
    tools_seen = {r.agent: [t.name for t in r.tools] for r in model.requests}
    assert "fork" in tools_seen["planner"] and "fork" in tools_seen["planner/team"]
    assert "fork" not in tools_seen["planner/team/leaf"]
    (team,) = result.children
    assert team.run is not None and [c.id for c in team.run.children] == ["leaf"]
    assert set(result.usage_by_agent()) == {"planner", "planner/team", "planner/team/leaf"}


async def test_large_outputs_are_capped_and_readable_in_full() -> None:
    long_text = " ".join(f"line{i}" for i in range(600))
    script = {
        "planner": [
            fork_call({"id": "dump", "task": "Produce a lot."}),
            {"tool_calls": [{"name": "read_task_output", "arguments": {"id": "dump"}}]},
            {"tool_calls": [{"name": "read_task_output", "arguments": {"id": "dumb"}}]},
            {"content": "read it"},
        ],
        "planner/dump": [{"content": long_text}],
    }
    result = await planner(ScriptedModel(script), output_cap_tokens=50).run("go")

    fork_result, full, missing = [m for m in result.messages if m.role == "tool"]
    assert "[output cut at 50 tokens; read_task_output(id='dump') returns all of it]" in (
        fork_result.content or ""
    )
    assert len(fork_result.content or "") < len(long_text) / 4
    assert full.content == long_text
    assert missing.is_error and "(did you mean 'dump'?)" in (missing.content or "")


async def test_budget_exhaustion_mid_fan_out_skips_tasks_not_started() -> None:
    @tool
    def noop() -> str:
        """Nothing."""
        return "ok"

    tasks = [{"id": f"t{i}", "task": f"Task number {i}."} for i in range(8)]
    script: dict[str, Any] = {
        "planner": [fork_call(*tasks), {"content": "as far as the budget went"}]
    }
    for i in range(8):
        script[f"planner/t{i}"] = [{"content": f"result {i}"}]
    budget = TokenBudget(2_500)
    settings = ForkSettings(max_parallel=1, max_output_tokens=300)
    extension = ForkExtension(SubagentRegistry(), settings=settings)
    agent = Agent(
        ScriptedModel(script),
        name="planner",
        extensions=[extension],
        budget=budget,
        max_output_tokens=300,
    )
    result = await agent.run("go")

    statuses = [c.status for c in result.children]
    assert statuses[0] == "completed"
    assert "skipped" in statuses
    skipped = [c for c in result.children if c.status == "skipped"]
    assert all((c.reason or "").startswith("budget:") for c in skipped)
    assert budget.used <= 2_500
    assert "Budget remaining:" in observation(result.messages)


async def test_fifty_concurrent_sub_agents_never_overdraw_the_budget() -> None:
    @tool
    async def lookup(n: int) -> str:
        """Look a number up."""
        await asyncio.sleep(0.01)
        return f"value {n}"

    registry = SubagentRegistry()
    tasks = [{"id": f"w{i}", "task": f"Look up {i}."} for i in range(50)]
    script: dict[str, Any] = {"planner": [fork_call(*tasks), {"content": "summary"}]}
    for i in range(50):
        script[f"planner/w{i}"] = [
            {"content": "first look", "tool_calls": [{"name": "lookup", "arguments": {"n": i}}]},
            {
                "content": "second look",
                "tool_calls": [{"name": "lookup", "arguments": {"n": i + 100}}],
            },
            {"content": f"w{i} done"},
        ]
    budget = TokenBudget(12_000)
    settings = ForkSettings(max_parallel=50, max_output_tokens=100)
    extension = ForkExtension(registry, tools=[lookup], settings=settings)
    model = ScriptedModel(script, latency=0.02)
    result = await Agent(model, name="planner", extensions=[extension], budget=budget).run("go")

    assert budget.used <= 12_000
    assert budget.reserved == 0
    assert budget.used == sum(u.total_tokens for u in result.usage_by_agent().values())
    statuses = {c.status for c in result.children}
    assert statuses <= {"completed", "budget_exhausted", "skipped"}
    assert statuses & {"budget_exhausted", "skipped"}
    assert len(result.children) == 50
    assert budget.used > 0.9 * 12_000  # the budget was spent, not refused up front


async def test_cancelling_a_running_fork_leaves_every_call_with_a_result(tmp_path: Path) -> None:
    started = asyncio.Event()

    @tool(exclusive=True)
    async def slow(n: int) -> str:
        """Take a long time."""
        started.set()
        await asyncio.sleep(30)
        return "never"

    script = {
        "planner": [
            fork_call(
                {"id": "a", "task": "Slow work."},
                {"id": "b", "task": "Needs a.", "depends_on": ["a"]},
            )
        ],
        "planner/a": [
            {
                "tool_calls": [
                    {"name": "slow", "arguments": {"n": 1}},
                    {"name": "slow", "arguments": {"n": 2}},
                ]
            }
        ],
    }
    extension = ForkExtension(SubagentRegistry(), tools=[slow])
    trace_path = tmp_path / "run.jsonl"
    trace = Trace(trace_path)
    run = asyncio.create_task(
        Agent(ScriptedModel(script), name="planner", extensions=[extension], trace=trace).run("go")
    )
    await asyncio.wait_for(started.wait(), 5)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    trace.close()

    conversations = rebuild_conversations(trace_path)
    for agent, messages in conversations.items():
        calls = [c.id for m in messages if m.role == "assistant" for c in m.tool_calls]
        answered = [m.tool_call_id for m in messages if m.role == "tool"]
        assert calls == answered, agent
    child = conversations["planner/a"]
    assert [m.error_type for m in child if m.role == "tool"] == ["aborted", "skipped"]
    assert [m.error_type for m in conversations["planner"] if m.role == "tool"] == ["aborted"]
    ends = {e["agent"]: e["status"] for e in trace_lines(trace_path) if e["type"] == "run_end"}
    assert ends == {"planner": "cancelled", "planner/a": "cancelled"}


async def test_a_sub_agent_whose_model_cannot_be_built_fails_alone() -> None:
    registry = SubagentRegistry(
        [SubagentDef(name="remote", description="Elsewhere.", model="nowhere:x", system="Hi.")]
    )
    script = {
        "planner": [
            fork_call(
                {"id": "far", "task": "Go far.", "agent": "remote"},
                {"id": "near", "task": "Stay near."},
            ),
            {"content": "one of two"},
        ],
        "planner/near": [{"content": "near done"}],
    }
    result = await planner(
        ScriptedModel(script), registry=registry, budget=TokenBudget(50_000)
    ).run("go")

    statuses = {c.id: (c.status, c.reason) for c in result.children}
    assert statuses["near"] == ("completed", None)
    assert statuses["far"][0] == "error" and "unknown model provider 'nowhere'" in (
        statuses["far"][1] or ""
    )
    assert result.status == "completed"


async def test_task_ids_are_unique_across_the_forks_of_a_run() -> None:
    script = {
        "planner": [
            fork_call({"id": "a", "task": "First."}),
            fork_call({"id": "a", "task": "Again."}),
            fork_call({"id": "a2", "task": "Again, new id."}),
            {"content": "done"},
        ],
        "planner/a": [{"content": "first"}],
        "planner/a2": [{"content": "second"}],
    }
    result = await planner(ScriptedModel(script)).run("go")

    forks = [m for m in result.messages if m.role == "tool"]
    assert forks[1].is_error and "id 'a' was used by an earlier fork" in (forks[1].content or "")
    assert [c.id for c in result.children] == ["a", "a2"]
    assert set(result.usage_by_agent()) == {"planner", "planner/a", "planner/a2"}


async def test_usage_survives_a_time_limit_that_cuts_a_fork_short(tmp_path: Path) -> None:
    @tool
    async def wait(seconds: float) -> str:
        """Wait."""
        await asyncio.sleep(seconds)
        return "waited"

    script = {
        "planner": [
            fork_call(
                {"id": "quick", "task": "Quick."},
                {"id": "slow", "task": "Slow."},
                {"id": "later", "task": "After slow.", "depends_on": ["slow"]},
            )
        ],
        "planner/quick": [{"content": "quick done"}],
        "planner/slow": [
            {"tool_calls": [{"name": "wait", "arguments": {"seconds": 0}}]},
            {"tool_calls": [{"name": "wait", "arguments": {"seconds": 30}}]},
            {"content": "never"},
        ],
    }
    budget = TokenBudget()
    extension = ForkExtension(SubagentRegistry(), tools=[wait])
    trace_path = tmp_path / "run.jsonl"
    with Trace(trace_path) as trace:
        agent = Agent(
            ScriptedModel(script),
            name="planner",
            extensions=[extension],
            budget=budget,
            trace=trace,
            time_limit=1.0,
        )
        result = await agent.run("go")

    assert result.status == "cancelled"
    by_agent = result.usage_by_agent()
    assert set(by_agent) == {"planner", "planner/quick", "planner/slow"}
    assert sum(u.total_tokens for u in by_agent.values()) == budget.used > 0
    assert {c.id: c.status for c in result.children} == {
        "quick": "completed",
        "slow": "cancelled",
        "later": "skipped",
    }
    (slow,) = [c for c in result.children if c.id == "slow"]
    assert slow.usage.total_tokens > 0  # its first call counts, though the task was cut short
    ends = {e["agent"]: e["status"] for e in trace_lines(trace_path) if e["type"] == "task_end"}
    assert ends == {
        "planner/quick": "completed",
        "planner/slow": "cancelled",
        "planner/later": "skipped",
    }


LEDGER = '''
from orchestrator import tool

@tool
def lookup(account: str) -> str:
    """Look up an account's balance.

    Args:
        account: The account id.
    """
    return f"{account}: 12,480.00 EUR"
'''
NOTES = '''
from orchestrator import tool

@tool
def jot(text: str) -> str:
    """Keep a note.

    Args:
        text: The note.
    """
    return f"noted: {text}"
'''


def tool_names(request: Any) -> list[str]:
    return [t.name for t in request.tools]


def results_of(model: ScriptedModel, agent: str) -> list[tuple[str | None, str]]:
    last = [r for r in model.requests if r.agent == agent][-1]
    return [(m.error_type, m.content or "") for m in last.messages if m.role == "tool"]


async def test_a_sub_agent_starts_its_tools_array_as_its_parent_does(tmp_path: Path) -> None:
    # Providers cache the tools array first: a sub-agent whose array begins with its parent's
    # reads the tools its parent's requests cached. Its preloaded skill's tools come after
    # the fork tools, and it keeps call_skill_tool, which works for a skill it loads later.
    from skill_factory import write_skill

    from orchestrator import Orchestrator

    write_skill(tmp_path / "skills", "ledger", description="Ledger balances.", tools=LEDGER)
    write_skill(tmp_path / "skills", "notes", description="Keep notes.", tools=NOTES)
    clerk = SubagentDef(name="clerk", description="Books.", system="You book.", preload=["ledger"])
    dispatched = {"tool": "notes__jot", "arguments": {"text": "north done"}}
    script = {
        "planner": [
            fork_call(
                {"id": "books", "task": "Book the north.", "agent": "clerk"},
                {"id": "audit", "task": "Audit the south.", "skills": ["ledger"]},
            ),
            {"content": "done"},
        ],
        "planner/books": [
            {"tool_calls": [{"name": "ledger__lookup", "arguments": {"account": "north"}}]},
            {"tool_calls": [{"name": "load_skill", "arguments": {"name": "notes"}}]},
            {"tool_calls": [{"name": "call_skill_tool", "arguments": dispatched}]},
            {"content": "booked"},
        ],
        "planner/audit": [
            {"tool_calls": [{"name": "call_skill_tool", "arguments": {"tool": "ledger__lookup"}}]},
            {"content": "audited"},
        ],
    }
    model = ScriptedModel(script)
    orchestrator = Orchestrator(
        model, skills=[tmp_path / "skills"], subagents=SubagentRegistry([clerk])
    )
    result = await orchestrator.run("Book and audit.")

    assert result.status == "completed"
    model.assert_all_used()
    firsts = {r.agent: tool_names(r) for r in reversed(model.requests)}
    parent = firsts["planner"]
    assert parent[3:5] == ["call_skill_tool", "fork"]
    for agent in ("planner/books", "planner/audit"):
        assert firsts[agent] == [*parent, "ledger__lookup"]
    # The skill loaded later is called through the dispatcher; the array does not change.
    assert [tool_names(r) for r in model.requests if r.agent == "planner/books"] == [
        firsts["planner/books"]
    ] * 4
    booked, loaded, jotted = results_of(model, "planner/books")
    assert booked == (None, "north: 12,480.00 EUR")
    assert loaded[0] is None and "notes__jot" in loaded[1]
    assert jotted == (None, "noted: north done")
    # Where every skill with tools is preloaded, the dispatcher is there for the shared
    # prefix only: a call of an advertised tool through it is an observation to correct.
    [(error, text)] = results_of(model, "planner/audit")
    assert error == "invalid_arguments" and "call it directly" in text


async def test_a_sub_agent_that_cannot_fork_keeps_no_idle_dispatcher(tmp_path: Path) -> None:
    # Without fork tools its array shares too little with its parent's to be read from a
    # cache: the dispatcher would only cost tokens in each of its requests.
    from skill_factory import write_skill

    from orchestrator import Orchestrator

    write_skill(tmp_path / "skills", "ledger", description="Ledger balances.", tools=LEDGER)
    script = {
        "planner": [
            fork_call({"id": "audit", "task": "Audit the south.", "skills": ["ledger"]}),
            {"content": "done"},
        ],
        "planner/audit": [{"content": "audited"}],
    }
    model = ScriptedModel(script)
    orchestrator = Orchestrator(model, skills=[tmp_path / "skills"], max_depth=1)
    assert (await orchestrator.run("Audit.")).status == "completed"
    [audit] = [r for r in model.requests if r.agent == "planner/audit"]
    assert tool_names(audit) == ["load_skill", "read_skill_file", "search_skills", "ledger__lookup"]


async def test_the_planners_own_tools_reach_its_sub_agents_as_its_skills_do(
    tmp_path: Path,
) -> None:
    """`Orchestrator(tools=...)`: a sub-agent calls the planner's tool, unless its definition's
    `tools:` leaves it out (the rule a definition applies to skills' tools)."""
    callers: list[str] = []

    @tool
    def whoami(ctx: ToolContext) -> str:
        """Who is calling."""
        callers.append(ctx.agent)
        return f"you are {ctx.agent}"

    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "reader.md").write_text(
        "---\nname: reader\ndescription: Reads.\ntools: [Read]\n---\nRead files.\n"
    )
    script = {
        "planner": [
            fork_call(
                {"id": "any", "task": "Ask who you are."},
                {"id": "narrow", "agent": "reader", "task": "Ask who you are."},
            ),
            {"content": "done"},
        ],
        "planner/any": [{"tool_calls": [{"name": "whoami", "arguments": {}}]}, {"content": "ok"}],
        "planner/narrow": [
            {"tool_calls": [{"name": "whoami", "arguments": {}}]},
            {"content": "refused"},
        ],
    }
    model = ScriptedModel(script)
    orchestrator = Orchestrator(model, tools=[whoami], subagents=[folder], builtin=False)
    result = await orchestrator.run("go")
    assert result.status == "completed", result.error
    assert callers == ["planner/any"]
    requests = {r.agent: r for r in model.requests}
    assert "whoami" in [t.name for t in requests["planner/any"].tools][:1]
    narrow_run = result.children[1].run
    assert narrow_run is not None
    narrow = [m for m in narrow_run.messages if m.role == "tool"]
    assert narrow and narrow[0].is_error and "reader" in (narrow[0].content or ""), narrow
