"""The agent loop's invariants, each through the public API with real tools."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import pytest
from trace_lines import trace_lines

from orchestrator import Agent, Message, TokenBudget, Trace, rebuild_conversations, tool
from orchestrator.errors import PermissionDenied, ToolInfrastructureError
from orchestrator.models import ScriptedModel


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


def tool_messages(messages: list[Message]) -> list[Message]:
    return [m for m in messages if m.role == "tool"]


class Clock:
    """Records when each named piece of work started and ended."""

    def __init__(self) -> None:
        self.spans: dict[str, tuple[float, float]] = {}

    async def work(self, label: str, seconds: float) -> str:
        began = time.perf_counter()
        await asyncio.sleep(seconds)
        self.spans[label] = (began, time.perf_counter())
        return f"{label} done"


async def test_concurrent_results_come_back_in_model_order(tmp_path: Path) -> None:
    clock = Clock()

    @tool
    async def wait(label: str, seconds: float) -> str:
        """Sleep, then say which call this was."""
        return await clock.work(label, seconds)

    model = ScriptedModel(
        {
            "*": [
                {
                    "tool_calls": [
                        call("wait", label="slow", seconds=0.3),
                        call("wait", label="medium", seconds=0.15),
                        call("wait", label="fast", seconds=0.01),
                    ]
                },
                {"content": "all three answered"},
            ]
        }
    )
    trace_path = tmp_path / "run.jsonl"
    result = await Agent(model, [wait], trace=trace_path).run("go")

    assert result.status == "completed"
    assistant = result.messages[1]
    results = tool_messages(result.messages)
    assert [r.tool_call_id for r in results] == [c.id for c in assistant.tool_calls]
    assert [r.content for r in results] == ["slow done", "medium done", "fast done"]
    # They really overlapped: the fast call finished before the slow one, yet comes last.
    assert clock.spans["fast"][1] < clock.spans["slow"][1]
    assert clock.spans["medium"][0] < clock.spans["slow"][1]
    finished = [e["call_id"] for e in trace_lines(trace_path) if e["type"] == "tool_end"]
    assert finished == [c.id for c in reversed(assistant.tool_calls)]


async def test_exclusive_tool_runs_alone_as_a_barrier() -> None:
    clock = Clock()

    @tool
    async def work(label: str) -> str:
        """Do some shared work."""
        return await clock.work(label, 0.05)

    @tool(exclusive=True)
    async def migrate(label: str) -> str:
        """Change something nothing else may touch at the same time."""
        return await clock.work(label, 0.05)

    model = ScriptedModel(
        {
            "*": [
                {
                    "tool_calls": [
                        call("work", label="a1"),
                        call("work", label="a2"),
                        call("migrate", label="x"),
                        call("work", label="b1"),
                    ]
                },
                {"content": "ok"},
            ]
        }
    )
    result = await Agent(model, [work, migrate]).run("go")

    spans = clock.spans
    assert spans["a1"][0] < spans["a2"][1] and spans["a2"][0] < spans["a1"][1]  # overlapped
    assert spans["x"][0] >= max(spans["a1"][1], spans["a2"][1])
    assert spans["b1"][0] >= spans["x"][1]
    assert [r.content for r in tool_messages(result.messages)] == [
        "a1 done",
        "a2 done",
        "x done",
        "b1 done",
    ]


async def test_sync_tools_run_in_threads_without_blocking_each_other() -> None:
    spans: dict[str, tuple[float, float]] = {}

    @tool
    def blocking(label: str) -> str:
        """A synchronous tool that blocks its thread."""
        began = time.perf_counter()
        time.sleep(0.2)
        spans[label] = (began, time.perf_counter())
        return label

    model = ScriptedModel(
        {
            "*": [
                {"tool_calls": [call("blocking", label="p"), call("blocking", label="q")]},
                {"content": "ok"},
            ]
        }
    )
    await Agent(model, [blocking]).run("go")
    assert spans["q"][0] < spans["p"][1] and spans["p"][0] < spans["q"][1]


@tool
def read_note(path: str, max_lines: int = 10) -> str:
    """Read a text file.

    Args:
        path: the file to read
        max_lines: how many lines at most
    """
    return "\n".join(Path(path).read_text().splitlines()[:max_lines])


async def test_each_failure_kind_is_an_error_observation(tmp_path: Path) -> None:
    note = tmp_path / "note.txt"
    note.write_text("line one\nline two\n")

    @tool
    def explode() -> str:
        """Always fails."""
        raise ValueError("the disk is on fire")

    @tool
    def guarded() -> str:
        """Needs a permission the run does not have."""
        raise PermissionDenied("shell is not allowed (permissions.shell is false)")

    @tool
    def backend() -> str:
        """Depends on a server that will not start."""
        raise ToolInfrastructureError("server 'git' exited with code 1 before answering")

    turns = [
        {"tool_calls": [call("read_nte", path=str(note))]},
        {"tool_calls": [{"name": "read_note", "arguments": '{"path": "x",'}]},
        {"tool_calls": [call("read_note", path=str(note), max_lines="many")]},
        {"tool_calls": [call("read_note", path=str(note), colour="red")]},
        {"tool_calls": [call("explode")]},
        {"tool_calls": [call("guarded")]},
        {"tool_calls": [call("backend")]},
        {"tool_calls": [call("read_note", path=str(note), max_lines=1)]},
        {"content": "recovered"},
    ]
    result = await Agent(ScriptedModel({"*": turns}), [read_note, explode, guarded, backend]).run(
        "go"
    )

    assert result.status == "completed"
    results = tool_messages(result.messages)
    kinds = [r.error_type for r in results]
    assert kinds == [
        "unknown_tool",
        "invalid_json",
        "invalid_arguments",
        "invalid_arguments",
        "tool_error",
        "denied",
        "infrastructure",
        None,
    ]
    assert all(r.is_error for r in results[:-1]) and not results[-1].is_error
    assert "Did you mean: read_note?" in (results[0].content or "")
    assert "not valid JSON" in (results[1].content or "")
    assert "max_lines" in (results[2].content or "") and "integer" in (results[2].content or "")
    assert "colour: unexpected argument" in (results[3].content or "")
    assert "ValueError: the disk is on fire" in (results[4].content or "")
    assert "permissions.shell" in (results[5].content or "")
    assert "infrastructure" in (results[6].content or "")
    assert results[7].content == "line one"


async def test_a_tool_past_its_timeout_is_stopped_and_reported(tmp_path: Path) -> None:
    marker = tmp_path / "finished"

    @tool(timeout=0.3)
    async def slow_process() -> str:
        """Run a child process that takes too long."""
        code = f"import time, pathlib; time.sleep(5); pathlib.Path({str(marker)!r}).touch()"
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", code)
        try:
            await proc.wait()
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        return "finished"

    model = ScriptedModel({"*": [{"tool_calls": [call("slow_process")]}, {"content": "gave up"}]})
    result = await Agent(model, [slow_process]).run("go")

    (timed_out,) = tool_messages(result.messages)
    assert timed_out.error_type == "timeout"
    assert "timed out after 0.3 s" in (timed_out.content or "")
    assert result.output == "gave up"
    assert not marker.exists()


async def test_last_step_forces_an_answer_without_tools() -> None:
    @tool
    def ping() -> str:
        """Answer pong."""
        return "pong"

    model = ScriptedModel(
        {
            "*": [
                {"tool_calls": [call("ping")]},
                {"tool_calls": [call("ping")]},
                {"content": "stopping here"},
            ]
        }
    )
    result = await Agent(model, [ping], max_steps=3).run("go")

    assert result.status == "max_steps"
    assert result.output == "stopping here"
    assert [r.tool_choice for r in model.requests] == ["auto", "auto", "none"]
    assert [len(r.tools) for r in model.requests] == [1, 1, 1]  # disabled, not removed
    assert "last step" in (model.requests[2].messages[-1].content or "")
    model.assert_all_used()


async def test_repeated_identical_calls_get_a_note_then_end_the_run(tmp_path: Path) -> None:
    @tool
    def ping(host: str) -> str:
        """Check a host."""
        return f"{host} is up"

    same = {"tool_calls": [call("ping", host="db")]}
    model = ScriptedModel({"*": [same, same, same, same]})
    result = await Agent(model, [ping], max_steps=10).run("go")

    assert result.status == "loop_detected"
    notes = [
        m
        for m in result.messages
        if m.role == "user" and "same arguments 3 times" in (m.content or "")
    ]
    assert len(notes) == 1
    last = result.messages[-1]
    assert last.role == "tool" and last.error_type == "skipped"
    assert last.tool_call_id == result.messages[-2].tool_calls[0].id
    assert sum(1 for m in tool_messages(result.messages) if m.error_type is None) == 3


async def test_different_arguments_are_not_a_loop() -> None:
    @tool
    def ping(host: str) -> str:
        """Check a host."""
        return f"{host} is up"

    turns = [{"tool_calls": [call("ping", host=h)]} for h in "abcde"] + [{"content": "all up"}]
    result = await Agent(ScriptedModel({"*": turns}), [ping]).run("go")
    assert result.status == "completed"


async def test_budget_runs_out_with_one_wrap_up_call() -> None:
    @tool
    def fetch(page: int) -> str:
        """Fetch one page of a long report."""
        return f"page {page}: " + "figures " * 150

    # Two pages fit; the third request (about 400 tokens plus a 200-token reserve) does not,
    # but a short wrap-up answer still does.
    turns = [{"tool_calls": [call("fetch", page=i)]} for i in (1, 2)]
    turns.append({"content": "partial summary from the pages read"})
    model = ScriptedModel({"*": turns})
    budget = TokenBudget(850)
    result = await Agent(model, [fetch], budget=budget, max_output_tokens=200).run("summarize")

    assert result.status == "budget_exhausted"
    assert result.output == "partial summary from the pages read"
    wrap_up = model.requests[-1]
    assert wrap_up.tool_choice == "none" and [t.name for t in wrap_up.tools] == ["fetch"]
    assert "budget is nearly spent" in (wrap_up.messages[-1].content or "")
    assert budget.used == result.usage.total_tokens <= 850
    assert budget.reserved == 0
    model.assert_all_used()


async def test_budget_too_small_for_any_call_ends_without_calling() -> None:
    model = ScriptedModel({"*": [{"content": "never sent"}]})
    result = await Agent(model, max_tokens=50).run("a task")
    assert result.status == "budget_exhausted"
    assert model.requests == []
    assert result.usage.total_tokens == 0


async def test_cancellation_leaves_aborted_and_skipped_results(tmp_path: Path) -> None:
    started = asyncio.Event()

    @tool(exclusive=True)
    async def long_job() -> str:
        """Runs for a long time."""
        started.set()
        await asyncio.sleep(30)
        return "done"

    @tool
    def quick() -> str:
        """Returns at once."""
        return "quick"

    model = ScriptedModel({"*": [{"tool_calls": [call("quick"), call("long_job"), call("quick")]}]})
    trace_path = tmp_path / "run.jsonl"
    task = asyncio.create_task(Agent(model, [long_job, quick], trace=trace_path).run("go"))
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    conversation = rebuild_conversations(trace_path)["agent"]
    assistant = conversation[1]
    results = conversation[2:]
    assert [r.tool_call_id for r in results] == [c.id for c in assistant.tool_calls]
    assert [r.error_type for r in results] == [None, "aborted", "skipped"]
    end = [e for e in trace_lines(trace_path) if e["type"] == "run_end"]
    assert [e["status"] for e in end] == ["cancelled"]


async def test_time_limit_ends_the_run_as_cancelled_with_a_result() -> None:
    @tool
    async def wait() -> str:
        """Wait a long time."""
        await asyncio.sleep(30)
        return "done"

    model = ScriptedModel({"*": [{"content": "thinking", "tool_calls": [call("wait")]}]})
    result = await Agent(model, [wait], time_limit=0.2).run("go")

    assert result.status == "cancelled"
    assert "time limit" in (result.error or "")
    assert result.messages[-1].error_type == "aborted"
    assert result.output == "thinking"


async def test_model_failure_ends_the_run_as_error() -> None:
    model = ScriptedModel({"*": [{"tool_calls": [call("nothing")]}]})
    result = await Agent(model, name="worker").run("go")
    assert result.status == "error"
    assert "no turn left for agent 'worker'" in (result.error or "")


async def test_the_trace_rebuilds_every_message_the_model_saw(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-test-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", secret)

    @tool
    def leak() -> str:
        """Return something that happens to contain a key."""
        return f"config says key={secret}"

    model = ScriptedModel(
        {
            "*": [
                {"tool_calls": [call("leak"), call("read_note", path="missing.txt")]},
                {"content": "done"},
            ]
        }
    )
    trace_path = tmp_path / "trace.jsonl"
    with Trace(trace_path) as trace:
        result = await Agent(model, [leak, read_note], system="Be brief.", trace=trace).run("go")

    def masked(messages: list[Message]) -> list[Message]:
        return [
            m.model_copy(update={"content": m.content.replace(secret, "[REDACTED]")})
            if m.content
            else m
            for m in messages
        ]

    rebuilt = rebuild_conversations(trace_path)["agent"]
    assert rebuilt == masked(result.messages)
    for request in model.requests:
        assert rebuilt[: len(request.messages)] == masked(list(request.messages))
    text = trace_path.read_text()
    assert secret not in text
    events = [json.loads(line) for line in text.splitlines()]
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert {e["type"] for e in events} >= {
        "run_start",
        "message",
        "model_call",
        "tool_start",
        "tool_end",
        "run_end",
    }
    assert all({"seq", "ts", "agent", "type"} <= e.keys() for e in events)


async def test_a_one_step_agent_simply_answers() -> None:
    model = ScriptedModel({"*": [{"content": "42"}]})
    result = await Agent(model, [read_note], max_steps=1).run("What is six times seven?")
    assert (result.status, result.output) == ("completed", "42")
    assert model.requests[0].tool_choice == "none"
    assert [m.role for m in model.requests[0].messages] == ["user"]  # no last-step note


async def test_identical_calls_within_one_turn_are_not_a_loop() -> None:
    @tool
    def ping(host: str) -> str:
        """Check a host."""
        return f"{host} is up"

    four = {"tool_calls": [call("ping", host="db")] * 4}
    result = await Agent(ScriptedModel({"*": [four, {"content": "up"}]}), [ping]).run("go")
    assert result.status == "completed"
    assert [m.error_type for m in tool_messages(result.messages)] == [None] * 4


async def test_a_repeated_multi_call_turn_is_a_loop() -> None:
    @tool
    def look(key: str) -> str:
        """Look a key up."""
        return key

    pair = {"tool_calls": [call("look", key="a"), call("look", key="b")]}
    model = ScriptedModel({"*": [pair] * 4 + [{"content": "never"}]})
    result = await Agent(model, [look], max_steps=10).run("go")
    assert result.status == "loop_detected"
    assert any("look, look" in (m.content or "") for m in result.messages if m.role == "user")


async def test_a_model_that_breaks_unexpectedly_ends_the_run_as_error(tmp_path: Path) -> None:
    class BrokenModel:
        name = "broken"

        async def complete(self, request: object) -> object:
            raise RuntimeError("adapter bug")

    trace_path = tmp_path / "t.jsonl"
    result = await Agent(BrokenModel(), trace=trace_path).run("go")
    assert (result.status, result.error) == ("error", "RuntimeError: adapter bug")
    assert [e["status"] for e in trace_lines(trace_path) if e["type"] == "run_end"] == ["error"]


def test_two_tools_of_one_name_are_refused() -> None:
    @tool(name="fork")
    def my_fork() -> str:
        """Not the real fork."""
        return ""

    from orchestrator.errors import ConfigError
    from orchestrator.tasks import ForkExtension, SubagentRegistry

    model = ScriptedModel({"*": []})
    with pytest.raises(ConfigError, match="two tools are named 'fork'"):
        Agent(model, [my_fork], extensions=[ForkExtension(SubagentRegistry())])
