"""`Agent.iter(task)`: a run's typed events as they happen, the sub-agents' included, the result
at the end, and a consumer that stops early cancels the run with its record complete."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from orchestrator import Agent, read_trace
from orchestrator.events import EventBase, RunEnd, RunStart, TaskEnd, ToolEnd, ToolStart
from orchestrator.models import ScriptedModel
from orchestrator.tasks import ForkExtension, SubagentRegistry


def forking_script() -> dict[str, list[dict[str, Any]]]:
    tasks = [{"id": "a", "task": "x"}, {"id": "b", "task": "y", "depends_on": ["a"]}]
    return {
        "planner": [
            {"tool_calls": [{"name": "fork", "arguments": {"tasks": tasks}}]},
            {"content": "all done"},
        ],
        "planner/a": [{"content": "a done"}],
        "planner/b": [{"content": "b done"}],
    }


@pytest.mark.parametrize("to_file", [True, False])
async def test_iter_yields_every_agents_events_as_they_happen_and_then_the_result(
    tmp_path: Path, to_file: bool
) -> None:
    path = tmp_path / "t.jsonl"
    agent = Agent(
        ScriptedModel(forking_script()),
        name="planner",
        extensions=[ForkExtension(SubagentRegistry())],
        trace=path if to_file else None,
    )
    seen: list[EventBase] = []
    async with agent.iter("go") as run:
        async for event in run:
            seen.append(event)
            if isinstance(event, RunStart) and event.agent == "planner/b":
                # As it happens: `a` has ended, the planner has not.
                assert any(isinstance(e, TaskEnd) and e.agent == "planner/a" for e in seen)
                assert not any(isinstance(e, RunEnd) and e.agent == "planner" for e in seen)

    assert run.result is not None and run.result.status == "completed"
    assert run.result.output == "all done"
    ends = {e.agent: e.status for e in seen if isinstance(e, RunEnd)}
    assert ends == {"planner": "completed", "planner/a": "completed", "planner/b": "completed"}
    assert [e.seq for e in seen] == sorted(e.seq for e in seen)
    if to_file:  # the same events the trace holds
        assert [e.seq for e in read_trace(path)] == [e.seq for e in seen]
    assert agent.trace == (path if to_file else None)  # the agent is as it was


async def test_leaving_early_cancels_the_run_with_its_record_complete(tmp_path: Path) -> None:
    started = asyncio.Event()

    async def wait_forever() -> str:
        """Never returns."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    script = {"*": [{"tool_calls": [{"name": "wait_forever", "arguments": {}}]}]}
    path = tmp_path / "t.jsonl"
    agent = Agent(ScriptedModel(script), [wait_forever], trace=path)
    async with agent.iter("go") as run:
        async for event in run:
            if isinstance(event, ToolStart):
                break
    assert started.is_set()
    events = read_trace(path)
    assert isinstance(events[-1], RunEnd) and events[-1].status == "cancelled"
    # The run's own result, on the iterator: what it spent, its messages, every call answered.
    assert run.result is not None and run.result.status == "cancelled"
    assert run.result.steps == 1 and run.result.usage.total_tokens > 0
    assert run.result.trace == str(path)
    [answer] = [m for m in run.result.messages if m.role == "tool"]
    assert answer.error_type == "aborted"
    # Every tool_start of the trace has its tool_end, the aborted call's included.
    starts = [e.call_id for e in events if isinstance(e, ToolStart)]
    ends = {e.call_id: e.error_type for e in events if isinstance(e, ToolEnd)}
    assert starts and {call: ends.get(call) for call in starts} == dict.fromkeys(starts, "aborted")


async def test_cancelling_the_consumer_cancels_the_run(tmp_path: Path) -> None:
    async def wait_forever() -> str:
        """Never returns."""
        await asyncio.Event().wait()
        return "never"

    script = {"*": [{"tool_calls": [{"name": "wait_forever", "arguments": {}}]}]}
    path = tmp_path / "t.jsonl"
    agent = Agent(ScriptedModel(script), [wait_forever], trace=path)
    tool_started = asyncio.Event()

    async def consume() -> None:
        async with agent.iter("go") as run:
            async for event in run:
                if isinstance(event, ToolStart):
                    tool_started.set()

    consumer = asyncio.create_task(consume())
    await asyncio.wait_for(tool_started.wait(), 10)
    consumer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await consumer
    ends = [e for e in read_trace(path) if isinstance(e, RunEnd)]
    assert [e.status for e in ends] == ["cancelled"]


async def test_iterating_without_entering_says_how() -> None:
    agent = Agent(ScriptedModel({"*": [{"content": "x"}]}))
    with pytest.raises(RuntimeError, match="async with agent.iter"):
        await anext(agent.iter("go"))


async def test_leaving_before_the_first_event_ends_the_run_cancelled_before_its_first_call(
    tmp_path: Path,
) -> None:
    model = ScriptedModel({"*": [{"content": "never"}]})
    path = tmp_path / "t.jsonl"
    async with Agent(model, trace=path).iter("go") as run:
        pass
    assert run.result is not None and run.result.status == "cancelled"
    assert model.requests == [] and run.result.trace == str(path)
    assert [e.type for e in read_trace(path)][-1] == "run_end"
