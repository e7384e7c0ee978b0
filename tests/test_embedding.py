"""Embedding an agent in a program: one agent object serving many runs, each with the caller's
own objects (`deps`), trace, permissions and limits; the caller's context variables reaching
sync tools; errors and cancellations as data; and unrelated runs never holding each other up.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from provider_server import Fault, ProviderServer
from skill_factory import write_skill
from trace_lines import trace_lines

from orchestrator import Agent, Orchestrator, RunCancelled, ToolContext, tool
from orchestrator.models import ModelRequest, ModelResponse, ScriptedModel
from orchestrator.security import Permissions

SHOP_TOOLS = '''
from orchestrator import ToolContext, tool


@tool
def price(item: str, ctx: ToolContext) -> str:
    """The price of an item in the caller's shop.

    Args:
        item: The item's name.
    """
    return f"{item} costs {ctx.deps.prices[item]} at {ctx.deps.name}"
'''


@dataclass
class Shop:
    name: str
    prices: dict[str, int]


def call(tool_name: str, /, **arguments: object) -> dict[str, object]:
    return {"tool_calls": [{"name": tool_name, "arguments": arguments}]}


async def test_deps_reach_a_skill_tool_of_a_sub_agent_forked_by_the_planner(
    tmp_path: Path,
) -> None:
    skills = tmp_path / "skills"
    write_skill(skills, "shop", description="Prices of the shop.", tools=SHOP_TOOLS)
    work = tmp_path / "work"
    work.mkdir()
    script = {
        "planner": [
            call("fork", tasks=[{"id": "ask", "task": "Price the lamp."}]),
            {"content": "The sub-agent has the price."},
        ],
        "planner/ask": [
            call("load_skill", name="shop"),
            call("shop__price", item="lamp"),
            {"content": "priced"},
        ],
    }
    model = ScriptedModel(script)
    orchestrator = Orchestrator(model, skills=[skills], permissions=Permissions(workspace=work))
    result = await orchestrator.run(
        "Price the lamp.", deps=Shop("Corner Shop", {"lamp": 42}), trace=tmp_path / "t.jsonl"
    )
    assert result.status == "completed"
    [task] = result.children
    assert task.run is not None
    answers = [m.content for m in task.run.messages if m.role == "tool" and m.name == "shop__price"]
    assert answers == ["lamp costs 42 at Corner Shop"]


async def test_deps_reach_the_tools_of_a_job_step(tmp_path: Path) -> None:
    from orchestrator import load_job

    @tool
    def who(ctx: ToolContext[Shop]) -> str:
        """Which shop this run serves."""
        return ctx.deps.name

    (tmp_path / "job.yaml").write_text(
        "name: shops\nmodel: openai:gpt-4o-mini\ngoal: Say which shop.\n",
        encoding="utf-8",
    )
    job = load_job(tmp_path / "job.yaml")
    model = ScriptedModel({"*": [call("who"), {"content": "done"}]})
    orchestrator = Orchestrator(model, tools=[who], permissions=Permissions(workspace=tmp_path))
    result = await orchestrator.run_job(job, deps=Shop("Main Street", {}))
    assert result.status == "completed"
    steps = [r.run for r in result.steps if r.run is not None]
    seen = [m.content for run in steps for m in run.messages if m.role == "tool"]
    assert seen == ["Main Street"]


REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="unset")


async def test_a_sync_tool_sees_the_callers_context_variables() -> None:
    @tool
    def request_id() -> str:
        """The id of the request being served."""
        return REQUEST_ID.get()

    REQUEST_ID.set("req-7")
    model = ScriptedModel({"*": [call("request_id"), {"content": "ok"}]})
    result = await Agent(model, [request_id]).run("Which request?")
    [answer] = [m.content for m in result.messages if m.role == "tool"]
    assert answer == "req-7"


@tool
def where(ctx: ToolContext[Shop]) -> str:
    """Say which shop and workspace this run has, and leave a note there."""
    (ctx.permissions.workspace / "note.txt").write_text(ctx.deps.name, encoding="utf-8")
    return f"{ctx.deps.name} in {ctx.permissions.workspace.name}"


async def test_one_agent_serves_concurrent_runs_each_with_its_own_settings(
    tmp_path: Path,
) -> None:
    count = 5
    # Each run follows the whole script: the runs wait on the model at the same time.
    model = ScriptedModel({"*": [call("where"), {"content": "done"}]}, latency=0.05)
    agent = Agent(model, [where], max_tokens=1_000_000)

    async def serve(i: int) -> object:
        workspace = tmp_path / f"ws{i}"
        workspace.mkdir()
        return await agent.run(
            "Where are you?",
            deps=Shop(f"shop{i}", {}),
            trace=tmp_path / f"trace{i}.jsonl",
            permissions=Permissions(workspace=workspace),
            max_tokens=50_000 + i,
        )

    results = await asyncio.gather(*(serve(i) for i in range(count)))
    for i, result in enumerate(results):
        assert getattr(result, "status", None) == "completed"
        assert (tmp_path / f"ws{i}" / "note.txt").read_text(encoding="utf-8") == f"shop{i}"
        events = trace_lines(tmp_path / f"trace{i}.jsonl")
        assert len({e["run"] for e in events}) == 1
        assert [e["max_tokens"] for e in events if e["type"] == "run_start"] == [50_000 + i]
        tool_messages = [
            e["message"]["content"]
            for e in events
            if e["type"] == "message" and e["message"]["role"] == "tool"
        ]
        assert tool_messages == [f"shop{i} in ws{i}"]
    # The agent itself kept its own settings.
    assert agent.max_tokens == 1_000_000
    assert agent.trace is None


async def test_an_agent_made_with_a_trace_path_runs_twice(tmp_path: Path) -> None:
    model = ScriptedModel({"*": [{"content": "done"}]})
    path = tmp_path / "runs" / "agent.jsonl"
    agent = Agent(model, trace=path)
    first = await agent.run("First.")
    second = await agent.run("Second.")
    assert (first.status, second.status) == ("completed", "completed")
    assert first.trace == str(path)
    assert second.trace is not None and second.trace != first.trace
    assert Path(second.trace).parent == path.parent
    for result, task in ((first, "First."), (second, "Second.")):
        assert result.trace is not None
        events = trace_lines(Path(result.trace))
        asked = [
            e["message"]["content"]
            for e in events
            if e["type"] == "message" and e["message"]["role"] == "user"
        ]
        assert asked == [task]
        assert [e["output"] for e in events if e["type"] == "run_end"] == ["done"]


async def test_a_model_error_is_described_in_the_result() -> None:
    with ProviderServer({"*": [{"content": "hi"}]}) as server:
        server.fail(Fault("status", status=503), Fault("status", status=400))
        model = server.adapter("openai", "key", max_retries=0)
        overloaded = await Agent(model).run("Hello.")
        refused = await Agent(model).run("Hello.")
    assert overloaded.status == refused.status == "error"
    assert overloaded.error_detail is not None and refused.error_detail is not None
    first, second = overloaded.error_detail, refused.error_detail
    assert (first.type, first.provider, first.status, first.retryable) == (
        "ModelError",
        "openai",
        503,
        True,
    )
    assert first.message == overloaded.error
    assert (second.status, second.retryable) == (400, False)


async def test_a_tool_that_raises_is_logged_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @tool
    def broken() -> str:
        """Always fails."""
        raise KeyError("missing-thing")

    model = ScriptedModel({"*": [call("broken"), {"content": "gave up"}]})
    with caplog.at_level(logging.DEBUG, logger="orchestrator.tools"):
        result = await Agent(model, [broken]).run("Try.")
    [answer] = [m.content for m in result.messages if m.role == "tool"]
    assert answer == "Tool broken raised KeyError: 'missing-thing'"
    [record] = [r for r in caplog.records if r.name == "orchestrator.tools"]
    assert record.exc_info is not None and record.exc_info[0] is KeyError
    assert "broken" in record.getMessage()


async def test_a_run_cancelled_from_outside_leaves_its_partial_result() -> None:
    model = ScriptedModel({"*": [call("nap"), {"content": "late"}]})

    @tool
    async def nap() -> str:
        """Sleep a while."""
        await asyncio.sleep(30)
        return "rested"

    agent = Agent(model, [nap])
    running = asyncio.create_task(agent.run("Nap."))
    await asyncio.sleep(0.2)
    running.cancel()
    with pytest.raises(RunCancelled) as cancelled:
        await running
    assert isinstance(cancelled.value, asyncio.CancelledError)  # asyncio's cancellation still
    partial = cancelled.value.result
    assert partial.status == "cancelled" and partial.steps == 1
    assert partial.usage.total_tokens > 0


async def test_a_run_past_its_time_limit_returns_its_result() -> None:
    @tool
    async def nap() -> str:
        """Sleep a while."""
        await asyncio.sleep(30)
        return "rested"

    model = ScriptedModel({"*": [call("nap"), {"content": "late"}]})
    result = await Agent(model, [nap]).run("Nap.", time_limit=0.2)
    assert result.status == "cancelled"
    assert result.error == "time limit of 0.2 s reached"


class Timed(ScriptedModel):
    """A scripted model that notes when each call begins and ends (after any hold)."""

    def __init__(self, script: dict[str, list[dict[str, object]]], latency: float) -> None:
        super().__init__(script, latency=latency)
        self.started: list[float] = []
        self.ended: list[float] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.started.append(time.monotonic())
        try:
            return await super().complete(request)
        finally:
            self.ended.append(time.monotonic())


async def test_unrelated_runs_do_not_wait_for_each_others_prompt_prefix() -> None:
    system = "You reconcile ledgers. " * 400  # long enough for a provider to cache
    model = Timed({"*": [{"content": "done"}] * 5}, latency=0.3)
    agents = [Agent(model, system=system, name=f"agent{i}") for i in range(5)]
    results = await asyncio.gather(*(a.run(f"task {i}") for i, a in enumerate(agents)))
    assert [r.status for r in results] == ["completed"] * 5
    assert len(model.started) == 5
    assert max(model.started) < min(model.ended)  # every call had begun before any ended


@tool
def overwrite(path: str, text: str, ctx: ToolContext) -> str:
    """Overwrite a file of the workspace.

    Args:
        path: The file, relative to the workspace.
        text: What it will hold.
    """
    target = (ctx.permissions.workspace / path).resolve()
    ctx.permissions.require_writable(target, path)
    target.write_text(text, encoding="utf-8")
    return "written"


async def test_permissions_given_to_a_run_keep_the_skill_folders_read_only(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    # A catalog folder not named like one (`skills/`): only the run's own rules protect it.
    skill = write_skill(workspace / "catalog", "notes", description="Notes on the shop.")
    (skill / "reference.md").write_text("The shop opens at nine.\n", encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    model = ScriptedModel(
        {
            "*": [
                call("overwrite", path="catalog/notes/reference.md", text="hacked"),
                {"content": "."},
            ]
        }
    )
    agent = Agent(
        model,
        [overwrite],
        skills=[workspace / "catalog"],
        permissions=Permissions(workspace=elsewhere),
    )
    result = await agent.run("Rewrite the notes.", permissions=Permissions(workspace=workspace))
    [answer] = [m for m in result.messages if m.role == "tool"]
    assert answer.error_type == "denied"
    assert (skill / "reference.md").read_text(encoding="utf-8") == "The shop opens at nine.\n"


async def test_a_run_is_refused_permissions_that_refuse_the_code_its_agent_took_in(
    tmp_path: Path,
) -> None:
    from orchestrator import ConfigError
    from orchestrator.skills import SkillCatalog, SkillsExtension

    workspace = tmp_path / "ws"
    write_skill(workspace / "skills", "shop", description="Prices.", tools=SHOP_TOOLS)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    catalog = SkillCatalog([workspace / "skills"], include_builtin=False)
    agent = Agent(
        ScriptedModel({"*": [{"content": "never asked"}]}),
        skills=SkillsExtension(catalog, preload=["shop"]),
        permissions=Permissions(workspace=elsewhere),
    )
    with pytest.raises(ConfigError, match="skill 'shop'"):
        await agent.run("Price it.", permissions=Permissions(workspace=workspace))
