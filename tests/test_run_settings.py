"""One set of per-run settings for `run`, `run_sync` and `iter`, typed deps, and cancellation
as data: a cancel handle makes a run return its own `cancelled` result; a cancelled task raises
`RunCancelled` carrying it; a trace listener that raises `KeyboardInterrupt` or `SystemExit`
leaves a complete record before the exception goes on."""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from skill_factory import write_skill
from user_mypy import error_lines, mypy_on

from orchestrator import (
    Agent,
    CancelHandle,
    ConfigError,
    Permissions,
    RunCancelled,
    RunResult,
    RunSettings,
    ToolContext,
    Trace,
    read_trace,
    tool,
)
from orchestrator.errors import PermissionDenied
from orchestrator.events import ListenerError, RunEnd, RunStart, ToolEnd, ToolStart, TraceEvent
from orchestrator.models import ModelRequest, ModelResponse, ScriptedModel
from orchestrator.skills import SkillCatalog, SkillsExtension
from orchestrator.tasks import ForkExtension, SubagentRegistry


@dataclass
class Shop:
    name: str
    stock: dict[str, int]


@tool
def in_stock(item: str, ctx: ToolContext[Shop]) -> str:
    """How many of an item the shop has.

    Args:
        item: the item's name
    """
    return f"{ctx.deps.stock.get(item, 0)} {item} at {ctx.deps.name}"


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def tool_answers(result: RunResult[Any]) -> list[tuple[str | None, str | None]]:
    return [(m.error_type, m.content) for m in result.messages if m.role == "tool"]


def paired(events: list[TraceEvent]) -> dict[str, str | None]:
    """Each started call's tool_end error type (None: ended well); a start without an end is
    missing from nothing: it maps to 'no tool_end'."""
    ends = {e.call_id: e.error_type for e in events if isinstance(e, ToolEnd)}
    return {
        e.call_id: ends.get(e.call_id, "no tool_end") for e in events if isinstance(e, ToolStart)
    }


class Gate:
    """A tool that waits until opened, and says when it was entered."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.open = asyncio.Event()
        self.waiting = 0
        self.both_waiting = asyncio.Event()

    def tool(self) -> Any:
        @tool
        async def wait_here() -> str:
            """Waits for the gate."""
            self.waiting += 1
            self.entered.set()
            if self.waiting == 2:
                self.both_waiting.set()
            await self.open.wait()
            return "passed"

        return wait_here


# --- the same settings for run, run_sync and iter --------------------------------------------


async def test_iter_hands_the_runs_deps_to_its_tools() -> None:
    script = {"*": [call("in_stock", item="lamp"), {"content": "checked"}]}
    agent = Agent(ScriptedModel(script), [in_stock], deps_type=Shop)
    async with agent.iter("Is there a lamp?", deps=Shop("north", {"lamp": 3})) as run:
        async for _ in run:
            pass
    assert run.result is not None and run.result.status == "completed"
    assert tool_answers(run.result) == [(None, "3 lamp at north")]


async def test_a_settings_dict_built_ahead_serves_every_form(tmp_path: Path) -> None:
    script = {"*": [call("in_stock", item="lamp"), {"content": "checked"}] * 2}
    agent = Agent(ScriptedModel(script), [in_stock], deps_type=Shop)
    settings: RunSettings[Shop] = {"deps": Shop("south", {}), "max_tokens": 50_000}
    ran = await agent.run("Lamp?", **settings, trace=tmp_path / "run.jsonl")
    async with agent.iter("Lamp?", **settings, trace=tmp_path / "iter.jsonl") as run:
        async for _ in run:
            pass
    assert run.result is not None
    for result in (ran, run.result):
        assert tool_answers(result) == [(None, "0 lamp at south")]
    starts = [e for e in read_trace(tmp_path / "iter.jsonl") if isinstance(e, RunStart)]
    assert [e.max_tokens for e in starts] == [50_000]


async def test_iter_on_an_agent_given_a_trace_path_moves_on_to_the_next_free_name(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agent.jsonl"
    # Each run keeps its own place in the script: both answer "one", in files of their own.
    agent = Agent(ScriptedModel({"*": [{"content": "one"}]}), trace=path)
    traces = []
    for _ in range(2):
        async with agent.iter("Go.") as run:
            async for _ in run:
                pass
        assert run.result is not None and run.result.status == "completed"
        traces.append(run.result.trace)
    assert traces == [str(path), str(tmp_path / "agent-2.jsonl")]
    ends = [read_trace(path)[-1], read_trace(tmp_path / "agent-2.jsonl")[-1]]
    assert [e.output for e in ends if isinstance(e, RunEnd)] == ["one", "one"]


# --- typed deps ------------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["run", "iter"])
async def test_an_agent_that_declares_deps_refuses_a_run_without_them(
    tmp_path: Path, form: str
) -> None:
    model = ScriptedModel({"*": [{"content": "never"}]})
    agent = Agent(model, [in_stock], deps_type=Shop, trace=tmp_path / "t.jsonl")
    with pytest.raises(ConfigError, match=r"declares deps of type Shop .* given none"):
        if form == "run":
            await agent.run("Lamp?")
        else:
            agent.iter("Lamp?")
    with pytest.raises(ConfigError, match=r"declares deps of type Shop .* given a int"):
        await agent.run("Lamp?", deps=42)  # type: ignore[arg-type]  # the refusal under test
    assert model.requests == [] and not (tmp_path / "t.jsonl").exists()  # nothing started


async def test_a_tool_that_asks_for_deps_makes_its_agent_refuse_a_run_without_them() -> None:
    model = ScriptedModel({"*": [call("in_stock", item="lamp"), {"content": "checked"}]})
    agent = Agent(model, [in_stock])  # no deps_type: the tool's annotation says it
    with pytest.raises(ConfigError, match=r"tool 'in_stock' asks for deps of type Shop .*none"):
        await agent.run("Lamp?")
    assert model.requests == []  # refused before the first call, not failed in the tool
    result = await agent.run("Lamp?", deps=Shop("east", {"lamp": 1}))  # type: ignore[arg-type]
    assert tool_answers(result) == [(None, "1 lamp at east")]


@pytest.mark.slow
def test_mypy_strict_checks_the_deps_a_run_is_given(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    (tmp_path / "deps_use.py").write_text(
        """from dataclasses import dataclass

from orchestrator import Agent, CancelHandle, RunResult, RunSettings, ToolContext, tool
from orchestrator.models import ModelRequest, ModelResponse, ScriptedModel


@dataclass
class Shop:
    name: str


@dataclass
class City:
    name: str


@tool
def shop_name(ctx: ToolContext[Shop]) -> str:
    \"\"\"The shop's name.\"\"\"
    return ctx.deps.name


model = ScriptedModel({"*": [{"content": "x"}]})
agent = Agent(model, [shop_name], deps_type=Shop, output_type=City)
reveal_type(agent)
ok: RunResult[City] = agent.run_sync("x", deps=Shop("north"), cancel=CancelHandle())
agent.run_sync("x", deps=42)
settings: RunSettings[Shop] = {"deps": Shop("south")}
agent.iter("x", **settings)
plain = Agent(model)
plain.run_sync("x", deps=Shop("north"))
""",
        encoding="utf-8",
    )
    done = mypy_on(tmp_path, "deps_use.py")
    lines = done.stdout.splitlines()
    assert any(
        "deps_use.py:25: note: Revealed type is" in line and "Agent[deps_use.Shop, deps_use.City]"
        in line for line in lines
    ), done.stdout  # fmt: skip
    errors = error_lines(done)
    assert [line.split(":")[1] for line in errors] == ["27", "31"], done.stdout
    assert 'Argument "deps" to "run_sync" of "AgentLoop" has incompatible type "int"; ' in errors[0]
    assert 'expected "Shop"' in errors[0]
    assert 'incompatible type "Shop"; expected "None"' in errors[1]


# --- the cancel handle -----------------------------------------------------------------------


async def test_a_cancel_handle_makes_the_run_return_its_own_cancelled_result(
    tmp_path: Path,
) -> None:
    gate = Gate()
    both = {"tool_calls": [{"name": "wait_here", "arguments": {}}] * 2}
    model = ScriptedModel({"*": [both, {"content": "late"}]})
    agent = Agent(model, [gate.tool()], tool_concurrency=1)
    handle = CancelHandle()
    path = tmp_path / "t.jsonl"
    running = asyncio.create_task(agent.run("Wait.", cancel=handle, trace=path))
    await asyncio.wait_for(gate.entered.wait(), 10)
    handle.cancel()
    result = await running  # returned, not raised
    assert result.status == "cancelled" and handle.cancelled
    assert result.error == "cancelled through its cancel handle"
    assert result.steps == 1 and result.usage.total_tokens > 0 and result.trace == str(path)
    # One call had started (aborted), the other was waiting for its slot (skipped).
    assert [kind for kind, _ in tool_answers(result)] == ["aborted", "skipped"]
    events = read_trace(path)
    assert list(paired(events).values()) == ["aborted"]
    assert isinstance(events[-1], RunEnd) and events[-1].status == "cancelled"
    assert events[-1].error == result.error  # the trace says why, as the result does


def test_a_handle_cancelled_from_another_thread_ends_a_sync_run(tmp_path: Path) -> None:
    started = threading.Event()

    @tool
    async def nap() -> str:
        """Sleeps a long time."""
        started.set()
        await asyncio.sleep(60)
        return "rested"

    handle = CancelHandle()
    threading.Thread(target=lambda: started.wait(10) and handle.cancel(), daemon=True).start()
    agent = Agent(ScriptedModel({"*": [call("nap"), {"content": "late"}]}), [nap])
    result = agent.run_sync("Nap.", cancel=handle)
    assert result.status == "cancelled" and tool_answers(result)[0][0] == "aborted"


async def test_a_run_given_a_handle_already_cancelled_ends_before_any_model_call() -> None:
    handle = CancelHandle()
    handle.cancel()
    model = ScriptedModel({"*": [{"content": "never"}]})
    result = await Agent(model).run("Go.", cancel=handle)
    assert result.status == "cancelled" and result.steps == 0 and model.requests == []


async def test_a_cancelled_task_raises_run_cancelled_carrying_the_result(
    tmp_path: Path,
) -> None:
    gate = Gate()
    agent = Agent(ScriptedModel({"*": [call("wait_here"), {"content": "late"}]}), [gate.tool()])
    path = tmp_path / "t.jsonl"
    running = asyncio.create_task(agent.run("Wait.", trace=path))
    await asyncio.wait_for(gate.entered.wait(), 10)
    running.cancel()
    with pytest.raises(RunCancelled) as raised:
        await running
    assert running.cancelled()  # asyncio's own view: the task was cancelled
    result = raised.value.result
    assert result.status == "cancelled" and result.trace == str(path)
    assert result.steps == 1 and tool_answers(result)[0][0] == "aborted"
    assert list(paired(read_trace(path)).values()) == ["aborted"]


async def test_two_concurrent_runs_of_one_agent_cancel_and_finish_independently(
    tmp_path: Path,
) -> None:
    # Each run follows the script from its first turn, which waits at the gate: both calls
    # are made before either run's next turn (the answer).
    gate = Gate()
    script = {"*": [call("wait_here"), {"content": "done"}]}
    agent = Agent(ScriptedModel(script), [gate.tool()], trace=tmp_path / "agent.jsonl")
    first, second = CancelHandle(), CancelHandle()
    one = asyncio.create_task(agent.run("One.", cancel=first))
    two = asyncio.create_task(agent.run("Two.", cancel=second))
    await asyncio.wait_for(gate.both_waiting.wait(), 10)
    first.cancel()
    cancelled = await one
    assert not two.done()
    gate.open.set()
    finished = await two
    assert (cancelled.status, finished.status) == ("cancelled", "completed")
    assert tool_answers(cancelled)[0][0] == "aborted"
    assert tool_answers(finished) == [(None, "passed")] and finished.text == "done"
    assert cancelled.trace != finished.trace  # each its own trace, its own result
    for result in (cancelled, finished):
        assert result.trace is not None
        [end] = [e for e in read_trace(result.trace) if isinstance(e, RunEnd)]
        assert end.status == result.status


async def test_of_two_concurrent_runs_a_cancelled_task_carries_only_its_own_result() -> None:
    gate = Gate()
    script = {"*": [call("wait_here"), call("wait_here"), {"content": "done"}]}
    agent = Agent(ScriptedModel(script), [gate.tool()])
    one = asyncio.create_task(agent.run("One."))
    two = asyncio.create_task(agent.run("Two."))
    await asyncio.wait_for(gate.both_waiting.wait(), 10)
    two.cancel()
    with pytest.raises(RunCancelled) as raised:
        await two
    gate.open.set()
    finished = await one
    assert raised.value.result.status == "cancelled" and finished.status == "completed"
    assert raised.value.result.messages[0].content == "Two."
    assert finished.messages[0].content == "One."


# --- a listener that asks the process to stop ------------------------------------------------


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
async def test_a_listener_that_raises_an_interrupt_leaves_a_complete_record_first(
    tmp_path: Path, interrupt: type[BaseException]
) -> None:
    gate = Gate()
    both = {"tool_calls": [{"name": "wait_here", "arguments": {}}] * 2}
    agent = Agent(ScriptedModel({"*": [both, {"content": "late"}]}), [gate.tool()])
    path = tmp_path / "t.jsonl"
    heard: list[str] = []

    def stop_at_tool_start(event: TraceEvent) -> None:
        heard.append(event.type)
        if isinstance(event, ToolStart):
            raise interrupt()

    trace = Trace(path, listeners=[stop_at_tool_start])
    with pytest.raises(interrupt):
        await agent.run("Wait.", trace=trace)
    trace.close()
    events = read_trace(path)
    assert isinstance(events[-1], RunEnd) and events[-1].status == "cancelled"
    assert list(paired(events).values()) == ["aborted", "aborted"]
    [record] = [e for e in events if isinstance(e, ListenerError)]
    assert record.error == interrupt.__name__
    assert heard[-1] == "run_end"  # it went on hearing the record to its end


# --- per-run permissions rule the preloaded skills --------------------------------------------


async def test_a_run_given_restrict_holds_the_preloaded_skills_list_as_a_limit(
    tmp_path: Path,
) -> None:
    skills = tmp_path / "skills"
    write_skill(skills, "reader", description="Reads.", extra="allowed-tools: Read\n")
    work = tmp_path / "work"
    work.mkdir()
    write = call("files__write_file", path="owned.txt", content="pwned")
    model = ScriptedModel({"agent": [write, {"content": "done"}] * 2})
    extension = SkillsExtension(SkillCatalog([skills]), preload=["files", "reader"])
    agent = Agent(model, name="agent", skills=extension, permissions=Permissions(workspace=work))

    restricted = Permissions(workspace=work, skill_allowed_tools="restrict")
    narrowed = await agent.run("Write.", permissions=restricted)
    [(kind, text)] = tool_answers(narrowed)
    assert kind == "denied" and "not among the tools allowed" in str(text)
    assert not (work / "owned.txt").exists()
    # The agent's own rules are as they were: the next run, without the narrowing, writes.
    await agent.run("Write.")
    assert (work / "owned.txt").read_text(encoding="utf-8") == "pwned"


class HeldSubagents(ScriptedModel):
    """A scripted model that holds every sub-agent's call until `release` is set."""

    def __init__(self, script: dict[str, list[dict[str, Any]]]) -> None:
        super().__init__(script)
        self.held = 0
        self.both_held = asyncio.Event()
        self.release = asyncio.Event()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if "/" in request.agent:
            self.held += 1
            if self.held == 2:
                self.both_held.set()
            await self.release.wait()
        return await super().complete(request)


async def test_two_concurrent_runs_of_one_forking_agent_cancel_and_finish_independently(
    tmp_path: Path,
) -> None:
    fork = call("fork", tasks=[{"id": "a", "task": "Count the lamps."}])
    model = HeldSubagents(
        {"planner": [fork, fork, {"content": "all done"}], "planner/a": [{"content": "a done"}]}
    )
    agent = Agent(
        model,
        name="planner",
        extensions=[ForkExtension(SubagentRegistry())],
        trace=tmp_path / "planner.jsonl",
    )
    first, second = CancelHandle(), CancelHandle()
    one = asyncio.create_task(agent.run("One.", cancel=first))
    two = asyncio.create_task(agent.run("Two.", cancel=second))
    await asyncio.wait_for(model.both_held.wait(), 10)  # each run's sub-agent is in its call
    first.cancel()
    cancelled = await one
    assert not two.done()
    model.release.set()
    finished = await two
    assert (cancelled.status, finished.status) == ("cancelled", "completed")
    assert [(t.id, t.status) for t in cancelled.children] == [("a", "cancelled")]
    assert [(t.id, t.status, t.output) for t in finished.children] == [("a", "completed", "a done")]
    assert finished.output == "all done" and cancelled.trace != finished.trace
    for result in (cancelled, finished):
        assert result.trace is not None
        ends = {e.agent: e.status for e in read_trace(result.trace) if isinstance(e, RunEnd)}
        assert ends == {"planner": result.status, "planner/a": result.children[0].status}


# --- The planner with forks: Orchestrator.run, run_sync and iter take the same settings ------


@dataclass
class Tenant:
    name: str


@tool
def tenant_name(ctx: ToolContext[Tenant]) -> str:
    """The tenant this run serves."""
    return ctx.deps.name


FORKING = {
    "planner": [
        {"tool_calls": [{"name": "fork", "arguments": {"tasks": [{"id": "ask", "task": "Who?"}]}}]},
        {"content": "done"},
    ],
    "planner/ask": [
        {"tool_calls": [{"name": "tenant_name", "arguments": {}}]},
        {"content": "asked"},
    ],
}


def test_an_orchestrator_run_takes_the_agents_settings_deps_reaching_its_forks(
    tmp_path: Path,
) -> None:
    from orchestrator import Orchestrator

    orchestrator = Orchestrator(ScriptedModel(FORKING), tools=[tenant_name], builtin=False)

    async def both() -> list[RunResult]:
        runs = [
            orchestrator.run("go", deps=Tenant(name), trace=tmp_path / f"{name}.jsonl")
            for name in ("north", "south")
        ]
        return list(await asyncio.gather(*runs))

    north, south = asyncio.run(both())
    for result, name in ((north, "north"), (south, "south")):
        assert result.status == "completed", result.error
        child = result.children[0].run
        assert child is not None
        assert [m.content for m in child.messages if m.role == "tool"] == [name]

    cancelled = CancelHandle()
    cancelled.cancel()
    result = orchestrator.run_sync("go", deps=Tenant("x"), cancel=cancelled)
    assert result.status == "cancelled" and result.steps == 0
    capped = orchestrator.run_sync("go", deps=Tenant("x"), max_tokens=50)
    assert capped.status == "budget_exhausted"


def test_an_orchestrator_iter_gives_the_trees_events_and_its_result(tmp_path: Path) -> None:
    from orchestrator import Orchestrator

    orchestrator = Orchestrator(ScriptedModel(FORKING), tools=[tenant_name], builtin=False)

    async def watch() -> tuple[list[TraceEvent], RunResult | None]:
        seen: list[TraceEvent] = []
        async with orchestrator.iter("go", deps=Tenant("east"), trace=tmp_path / "t.jsonl") as run:
            async for event in run:
                seen.append(event)
        return seen, run.result

    seen, result = asyncio.run(watch())
    assert result is not None and result.status == "completed"
    ends = [e for e in seen if isinstance(e, ToolEnd)]
    assert {e.agent for e in ends} >= {"planner", "planner/ask"}
    assert any(e.agent == "planner/ask" and e.name == "tenant_name" for e in ends)
    assert [e.type for e in read_trace(tmp_path / "t.jsonl")][-1] == "run_end"


def test_settings_an_executor_cannot_carry_are_refused_not_dropped() -> None:
    from orchestrator import Orchestrator

    orchestrator = Orchestrator(ScriptedModel(FORKING), executor=object())  # type: ignore[arg-type]
    for settings in ({"max_tokens": 10}, {"permissions": Permissions()}, {"deps": Tenant("x")}):
        with pytest.raises(ConfigError, match="executor"):
            orchestrator.run_sync("go", **settings)  # type: ignore[arg-type]


def test_a_runs_own_permissions_keep_what_defines_the_run_read_only(tmp_path: Path) -> None:
    """Permissions given to one orchestrator run narrow; they never open the sub-agent
    definitions (here inside the workspace) to the model's writes."""
    from orchestrator import Orchestrator

    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "helper.md").write_text("---\nname: helper\ndescription: Helps.\n---\nHelp.\n")
    answers: list[str] = []

    @tool
    def try_write(ctx: ToolContext) -> str:
        """Try to write a definition."""
        try:
            ctx.permissions.require_writable((agents / "helper.md").resolve(), "helper.md")
        except PermissionDenied as exc:  # the refusal, in the permissions' words
            answers.append(f"refused: {exc}")
        else:
            answers.append("writable")
        return answers[-1]

    script = {"planner": [call("try_write"), {"content": "done"}]}
    orchestrator = Orchestrator(ScriptedModel(script), tools=[try_write], subagents=[agents])
    result = orchestrator.run_sync("Go.", permissions=Permissions(workspace=tmp_path))
    assert result.status == "completed", result.error
    assert len(answers) == 1 and answers[0].startswith("refused"), answers


def gated_job(tmp_path: Path, gate: Gate) -> tuple[Any, Any]:
    from orchestrator import Orchestrator, load_job

    (tmp_path / "job.yaml").write_text("name: gated\nmodel: scripted:script.json\ngoal: Wait.\n")
    script = {"goal": [call("wait_here"), {"content": "x"}]}
    (tmp_path / "script.json").write_text(json.dumps(script))
    job = load_job(tmp_path / "job.yaml")
    return job, Orchestrator.from_job(job, tools=[gate.tool()])


async def test_a_cancel_handle_makes_a_job_return_its_own_cancelled_result(
    tmp_path: Path,
) -> None:
    gate = Gate()
    job, orchestrator = gated_job(tmp_path, gate)
    handle = CancelHandle()
    path = tmp_path / "t.jsonl"
    running = asyncio.create_task(orchestrator.run_job(job, trace=path, cancel=handle))
    await asyncio.wait_for(gate.entered.wait(), 10)
    handle.cancel()
    result = await running  # returned, not raised
    assert result.status == "cancelled" and result.trace == str(path)
    assert [step.status for step in result.steps] == ["cancelled"]
    events = read_trace(path)
    assert events[-1].type == "job_end" and events[-1].status == "cancelled"
    assert list(paired(events).values()) == ["aborted"]


async def test_a_cancelled_job_task_raises_job_cancelled_carrying_the_result(
    tmp_path: Path,
) -> None:
    from orchestrator import JobCancelled

    gate = Gate()
    job, orchestrator = gated_job(tmp_path, gate)
    running = asyncio.create_task(orchestrator.run_job(job, trace=tmp_path / "t.jsonl"))
    await asyncio.wait_for(gate.entered.wait(), 10)
    running.cancel()
    with pytest.raises(JobCancelled) as raised:
        await running
    assert running.cancelled()
    assert raised.value.result.status == "cancelled"
    assert raised.value.result.usage.total_tokens > 0
