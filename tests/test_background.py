"""Background forks: `fork(..., wait=false)`, the agent's own work beside them, and the tools
that wait for them, show them and cancel them; their results reach the agent after its last
turn, under the same budget, slots, trace and resume as a blocking fork's."""

from __future__ import annotations

import html
import io
import json
import time
from pathlib import Path
from typing import Any

import pytest
from trace_lines import trace_lines
from trace_signing import resign

from orchestrator import Agent, Message, TokenBudget, Trace, rebuild_conversations, tool
from orchestrator.jobs import fast_forward
from orchestrator.models import ScriptedModel
from orchestrator.tasks import ForkExtension, ForkSettings, SubagentRegistry
from orchestrator.trace import Event, load_checkpoint, read_trace


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def background(*tasks: dict[str, Any]) -> dict[str, Any]:
    return call("fork", tasks=list(tasks), wait=False)


@tool
async def note(text: str) -> str:
    """Write down one finding of the agent's own work.

    Args:
        text: the finding
    """
    return f"noted: {text}"


def planner(
    model: ScriptedModel,
    *,
    budget: TokenBudget | None = None,
    trace: Trace | None = None,
    time_limit: float | None = None,
    **settings: Any,
) -> Agent:
    extension = ForkExtension(SubagentRegistry(), tools=[note], settings=ForkSettings(**settings))
    return Agent(
        model,
        [note],
        name="planner",
        extensions=[extension],
        budget=budget,
        trace=trace,
        time_limit=time_limit,
    )


def of_type(events: list[Event], kind: str, agent: str | None = None) -> list[Event]:
    return [e for e in events if e["type"] == kind and (agent is None or e["agent"] == agent)]


def tool_texts(messages: list[Message], name: str) -> list[str]:
    return [m.content or "" for m in messages if m.role == "tool" and m.name == name]


def notes_of(messages: list[Message]) -> list[str]:
    """What the orchestrator told the agent about its background tasks."""
    return [
        m.content or ""
        for m in messages
        if m.role == "user" and (m.content or "").startswith("[orchestrator] Background")
    ]


OWN_STEP = 0.15
RESEARCH = 0.6


def overlap_script(*, wait: bool) -> dict[str, list[dict[str, Any]]]:
    """A planner that starts a long research task, then does four steps of its own (and, in
    the background, collects the research before it answers)."""
    fork = call("fork", tasks=[{"id": "research", "task": "Research the market."}], wait=wait)
    own = [{**call("note", text=f"part {i}"), "latency": OWN_STEP} for i in range(1, 5)]
    collect = [] if wait else [call("wait_tasks")]
    return {
        "planner": [fork, *own, *collect, {"content": "Plan done, with the research."}],
        "planner/research": [{"content": "market grows 7%", "latency": RESEARCH}],
    }


async def timed_run(tmp_path: Path, *, wait: bool) -> tuple[float, list[Event], Any]:
    path = tmp_path / f"wait-{wait}.jsonl"
    model = ScriptedModel(overlap_script(wait=wait))
    with Trace(path) as trace:
        began = time.perf_counter()
        result = await planner(model, trace=trace).run("Plan the launch")
        wall = time.perf_counter() - began
    model.assert_all_used()
    return wall, trace_lines(path), result


async def test_a_background_fork_overlaps_the_agents_own_work(tmp_path: Path) -> None:
    blocking_wall, blocking_events, blocking = await timed_run(tmp_path, wait=True)
    wall, events, result = await timed_run(tmp_path, wait=False)

    assert result.status == blocking.status == "completed"
    assert result.output == "Plan done, with the research."
    # The blocking fork: every step of the planner's own comes after the research ended.
    (research_end,) = of_type(blocking_events, "task_end", "planner/research")
    own_calls = [
        e for e in of_type(blocking_events, "tool_start", "planner") if e["name"] == "note"
    ]
    assert all(e["seq"] > research_end["seq"] for e in own_calls)
    # In the background: the planner's own steps ran while the research did.
    (research_end,) = of_type(events, "task_end", "planner/research")
    own_calls = [e for e in of_type(events, "tool_start") if e["name"] == "note"]
    assert own_calls[0]["seq"] < research_end["seq"]
    assert research_end["background"] is True and research_end["overlap_s"] > 0
    # Its result reached the planner once, in the fork observation's shape: after its last
    # turn when it ended during the planner's steps, or as what wait_tasks returned.
    (arrived,) = notes_of(result.messages) or tool_texts(result.messages, "wait_tasks")
    arrived = arrived.removeprefix("[orchestrator] ")
    assert arrived.startswith("Background tasks ended: 1 task (1 completed).")
    assert "### research [completed] agent=general" in arrived and "market grows 7%" in arrived
    assert [c.id for c in result.children] == ["research"]
    assert result.usage_by_agent().keys() == {"planner", "planner/research"}
    # Same scripted latencies: the blocking fork adds the research to the planner's own
    # steps; in the background the longer of the two sets the pace.
    assert wall < blocking_wall
    assert rebuild_conversations(tmp_path / "wait-False.jsonl")["planner"] == result.messages


async def test_wait_status_and_cancel(tmp_path: Path) -> None:
    script = {
        "planner": [
            background(
                {"id": "quick", "task": "A quick look."},
                {"id": "slow", "task": "A long study."},
                {"id": "after", "task": "Build on the study.", "depends_on": ["slow"]},
            ),
            call("task_status"),
            call("wait_tasks", ids=["quick"], timeout_seconds=30),
            call("task_status", ids=["slow", "quick"]),
            call("cancel_tasks", ids=["slow"]),
            call("wait_tasks", ids=["nope"]),
            {"content": "Went with the quick look."},
        ],
        "planner/quick": [{"content": "quick answer", "latency": 0.2}],
        "planner/slow": [{"content": "never given", "latency": 30}],
    }
    path = tmp_path / "t.jsonl"
    model = ScriptedModel(script)
    with Trace(path) as trace:
        result = await planner(model, trace=trace).run("Decide")

    assert result.status == "completed"
    first, second = tool_texts(result.messages, "task_status")
    assert first.startswith("Background tasks: 3. Budget remaining:")
    assert "- quick [waiting] tokens=0" in first or "- quick [running]" in first
    assert "- after [waiting] tokens=0" in first
    (waited,) = tool_texts(result.messages, "wait_tasks")[:1]
    assert waited.startswith("Background tasks ended: 1 task (1 completed).")
    assert "### quick [completed]" in waited and "quick answer" in waited
    assert "- slow [running] tokens=0 (+" in second and "reserved for a call in flight)" in second
    assert "- quick [completed] tokens=" in second and "(result given to you)" in second
    (cancelled,) = tool_texts(result.messages, "cancel_tasks")
    # Cancelling the study ends what waits on it too, and says so in the same observation.
    assert cancelled.startswith("Cancelled: 2 tasks (1 cancelled, 1 skipped).")
    assert "### slow [cancelled]" in cancelled and "reason: cancelled by cancel_tasks" in cancelled
    assert "### after [skipped] agent=general\nreason: cancelled by cancel_tasks" in cancelled
    unknown = tool_texts(result.messages, "wait_tasks")[1]
    assert (
        "No background task 'nope'" in unknown and "Background tasks: quick, slow, after" in unknown
    )
    statuses = {c.id: (c.status, c.reason) for c in result.children}
    assert statuses == {
        "quick": ("completed", None),
        "slow": ("cancelled", "cancelled by cancel_tasks"),
        "after": ("skipped", "cancelled by cancel_tasks"),
    }
    assert not notes_of(result.messages)  # every result was given once, by a tool
    events = trace_lines(path)
    assert {e["agent"]: e["status"] for e in of_type(events, "task_end")} == {
        "planner/quick": "completed",
        "planner/slow": "cancelled",
        "planner/after": "skipped",
    }
    (ran,) = of_type(events, "run_end", "planner/slow")
    assert ran["status"] == "cancelled"
    assert of_type(events, "background_cancel")[0]["ids"] == ["slow", "after"]
    assert not of_type(events, "background_settle")  # nothing was left when it answered
    assert result.usage_by_agent().keys() == {"planner", "planner/quick", "planner/slow"}


@pytest.mark.parametrize("on_answer", ["wait", "cancel"])
async def test_an_answer_while_tasks_run_waits_for_them_or_cancels_them(
    tmp_path: Path, on_answer: str
) -> None:
    script = {
        "planner": [
            background({"id": "study", "task": "Study it."}),
            {"content": "An early answer.", "latency": 0.1},
            {"content": "The answer, with the study."},
        ],
        "planner/study": [{"content": "the study's finding", "latency": 0.3}],
    }
    path = tmp_path / "t.jsonl"
    model = ScriptedModel(script)
    with Trace(path) as trace:
        result = await planner(model, trace=trace, on_answer=on_answer).run("Go")

    events = trace_lines(path)
    (settle,) = of_type(events, "background_settle", "planner")
    assert settle["choice"] == on_answer and settle["ids"] == ["study"]
    (study_end,) = of_type(events, "task_end", "planner/study")
    (planner_end,) = of_type(events, "run_end", "planner")
    assert study_end["seq"] < planner_end["seq"]  # ended on the record before its parent
    assert result.status == "completed"
    if on_answer == "wait":
        assert result.output == "The answer, with the study."
        (told,) = notes_of(result.messages)
        assert "the study's finding" in told
        # The results came after the early answer: nothing was inserted before it.
        assert [m.content for m in result.messages[-3:] if m.role == "assistant"] == [
            "An early answer.",
            "The answer, with the study.",
        ]
        assert result.children[0].status == "completed"
        model.assert_all_used()
    else:
        assert result.output == "An early answer."
        assert settle["reason"] == "cancelled: the agent gave its final answer (on_answer: cancel)"
        assert study_end["status"] == "cancelled" and study_end["reason"] == settle["reason"]
        assert result.children[0].status == "cancelled"
        assert not notes_of(result.messages)


async def test_the_cache_prefix_stays_the_same_across_an_injected_result() -> None:
    script = {
        "planner": [
            background({"id": "scan", "task": "Scan the files."}),
            {**call("note", text="one"), "latency": 0.3},
            call("note", text="two"),
            {"content": "done"},
        ],
        "planner/scan": [{"content": "12 files", "latency": 0.05}],
    }
    model = ScriptedModel(script)
    result = await planner(model).run("Scan and note")

    requests = [r for r in model.requests if r.agent == "planner"]
    assert len(requests) == 4
    for before, after in zip(requests, requests[1:], strict=False):
        assert after.tools == before.tools
        assert after.messages[: len(before.messages)] == before.messages
    # The result joined after the last turn's tool results, as a message of its own.
    third = requests[2].messages
    injected = [
        i for i, m in enumerate(third) if m.role == "user" and "12 files" in (m.content or "")
    ]
    assert injected == [len(third) - 1]
    assert third[-2].role == "tool" and third[-2].name == "note"
    assert result.status == "completed"


async def test_background_tasks_never_overdraw_the_budget() -> None:
    """Six background diggers go on until the budget runs out, beside the planner's own
    steps; then the planner has none left either."""
    work = [
        {**call("note", text=f"dig {n}"), "content": "what I have so far", "latency": 0.01}
        for n in range(60)
    ]
    script = {
        "planner": [
            background(*({"id": f"t{i}", "task": f"Dig into part {i}."} for i in range(6))),
            *work[:2],
            call("wait_tasks"),
            {"content": "out of budget"},
        ],
        **{f"planner/t{i}": work for i in range(6)},
    }
    budget = TokenBudget(60_000)
    result = await planner(ScriptedModel(script), budget=budget, max_parallel=3).run("Dig")

    assert budget.used <= 60_000 and budget.reserved == 0
    assert result.total_usage.total_tokens == budget.used
    assert result.status == "budget_exhausted"
    ended = {c.id: c.status for c in result.children}
    assert len(ended) == 6
    assert "budget_exhausted" in ended.values()  # some ran out while they ran
    assert set(ended.values()) <= {"budget_exhausted", "skipped"}
    ran = [c for c in result.children if c.status != "skipped"]
    assert all(c.usage.total_tokens > 0 for c in ran)


async def test_background_tasks_share_the_trees_slots(tmp_path: Path) -> None:
    script = {
        "planner": [
            background(*({"id": f"t{i}", "task": f"Part {i}."} for i in range(3))),
            call("wait_tasks"),
            {"content": "done"},
        ],
        **{f"planner/t{i}": [{"content": "part done", "latency": 0.1}] for i in range(3)},
    }
    path = tmp_path / "t.jsonl"
    with Trace(path) as trace:
        result = await planner(ScriptedModel(script), trace=trace, max_parallel=1).run("Go")
    events = trace_lines(path)
    spans = sorted(
        (start["ts"], end["ts"])
        for start, end in zip(
            of_type(events, "run_start"), of_type(events, "run_end"), strict=False
        )
        if start["agent"] != "planner"
    )
    starts = {e["agent"]: e["ts"] for e in of_type(events, "task_start")}
    ends = {e["agent"]: e["ts"] for e in of_type(events, "task_end")}
    order = sorted(starts, key=starts.__getitem__)
    for earlier, later in zip(order, order[1:], strict=False):
        assert starts[later] >= ends[earlier]  # one slot: one task at a time
    assert len(spans) == 3 and [c.status for c in result.children] == ["completed"] * 3


async def test_a_time_limit_ends_background_tasks_with_a_complete_record(tmp_path: Path) -> None:
    script = {
        "planner": [
            background(
                {"id": "long", "task": "A long job."},
                {"id": "later", "task": "x", "depends_on": ["long"]},
            ),
            {**call("note", text="working"), "latency": 30},
        ],
        "planner/long": [{"content": "never", "latency": 30}],
    }
    path = tmp_path / "t.jsonl"
    with Trace(path) as trace:
        result = await planner(ScriptedModel(script), trace=trace, time_limit=0.3).run("Go")

    assert result.status == "cancelled" and "time limit" in (result.error or "")
    events = trace_lines(path)
    (settle,) = of_type(events, "background_settle")
    assert settle["choice"] == "cancel" and settle["ids"] == ["long", "later"]
    ends = {e["agent"]: e for e in of_type(events, "task_end")}
    assert ends["planner/long"]["status"] == "cancelled"
    assert ends["planner/later"]["status"] == "skipped"
    (long_run,) = of_type(events, "run_end", "planner/long")
    (planner_end,) = of_type(events, "run_end", "planner")
    assert long_run["status"] == "cancelled" and long_run["seq"] < planner_end["seq"]
    assert {c.id: c.status for c in result.children} == {"long": "cancelled", "later": "skipped"}
    # Every call of the planner has its result, the one cut short included.
    calls = [c.id for m in result.messages for c in m.tool_calls]
    answered = [m.tool_call_id for m in result.messages if m.role == "tool"]
    assert calls == answered


RESUME_SCRIPT = {
    "planner": [
        background(
            {"id": "fast", "task": "A quick check."},
            {"id": "slow", "task": "A study in two steps."},
        ),
        {**call("note", text="own work"), "latency": 0.3},
        call("wait_tasks"),
        {"content": "Both are in."},
    ],
    "planner/fast": [{"content": "check passed"}],
    "planner/slow": [
        {**call("note", text="half-way"), "latency": 0.1},
        {"content": "study done", "latency": 0.4},
    ],
}


def cut_after(trace: Path, test: Any, into: Path) -> Path:
    """The trace as a run killed right after the first event that passes `test` leaves it."""
    events = trace_lines(trace)
    keep = next(i for i, e in enumerate(events) if test(e)) + 1
    lines = trace.read_bytes().splitlines(keepends=True)
    into.write_bytes(b"".join(lines[:keep]))
    resign(into)
    return into


async def test_a_run_killed_with_tasks_in_flight_resumes_them(tmp_path: Path) -> None:
    whole_path = tmp_path / "whole.jsonl"
    with Trace(whole_path) as trace:
        whole = await planner(ScriptedModel(RESUME_SCRIPT), trace=trace).run("Check and study")
    assert whole.status == "completed"

    # Killed while `slow` was half-way (its first turn done), after `fast` had ended.
    cut_path = cut_after(
        whole_path,
        lambda e: e["type"] == "tool_end" and e["agent"] == "planner/slow",
        tmp_path / "cut.jsonl",
    )
    killed = trace_lines(cut_path)
    assert {e["agent"] for e in of_type(killed, "task_end")} == {"planner/fast"}
    assert not of_type(killed, "run_end", "planner")

    checkpoint = load_checkpoint(cut_path)
    model = ScriptedModel(RESUME_SCRIPT)
    fast_forward(model, checkpoint)
    with Trace(cut_path, resume=checkpoint) as trace:
        agent = planner(model, trace=trace)
        resumed = await agent.run("Check and study", history=trace.history(agent.name))

    assert resumed.status == "completed" and resumed.output == whole.output
    model.assert_all_used()
    later = [e for e in trace_lines(cut_path) if e["attempt"] == 2]
    # `fast` had ended: its result stands, its agent is not called again.
    (fast_end,) = of_type(later, "task_end", "planner/fast")
    assert fast_end["restored"] is True and fast_end["status"] == "completed"
    assert not of_type(later, "model_call", "planner/fast")
    # `slow` was in flight: it went on from its last complete turn.
    (slow_start,) = of_type(later, "run_start", "planner/slow")
    assert slow_start["resumed"] is True and slow_start["steps"] == 1
    assert [e["step"] for e in of_type(later, "model_call", "planner/slow")] == [2]
    assert {c.id: c.status for c in resumed.children} == {"fast": "completed", "slow": "completed"}
    assert {c.id: c.output for c in resumed.children} == {c.id: c.output for c in whole.children}
    # Each result reached the planner once, over both attempts.
    conversation = rebuild_conversations(cut_path)["planner"]
    text = "\n".join(m.content or "" for m in conversation)
    assert text.count("### fast [completed]") == 1 and text.count("### slow [completed]") == 1
    assert resumed.total_usage.total_tokens >= whole.total_usage.total_tokens - 1


async def test_trace_show_the_live_view_the_report_and_spans_show_background_tasks(
    tmp_path: Path,
) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from orchestrator.cli.progress import PlainProgress
    from orchestrator.report import render_report
    from orchestrator.telemetry import instrument
    from orchestrator.trace.summary import render, summarize

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    path = tmp_path / "t.jsonl"
    with instrument(provider), Trace(path) as trace:
        await planner(ScriptedModel(overlap_script(wait=False)), trace=trace).run("Plan")
    (research_end,) = of_type(trace_lines(path), "task_end", "planner/research")
    overlap = research_end["overlap_s"]
    assert overlap > 0

    events = read_trace(path)
    summary = summarize(events)
    research = summary.agents["planner/research"]
    assert research.background and research.overlap == overlap
    line = next(x for x in render(summary).splitlines() if x.strip().startswith("research"))
    assert line.startswith("  research  [completed]")  # under the planner
    assert f"background, overlapped its parent's work {overlap:.2f}s" in line
    agents = json.loads(json.dumps(summary.as_dict()))["agents"]
    shown = next(a for a in agents if a["path"] == "planner/research")
    assert shown["background"] is True and shown["overlap_seconds"] == overlap
    assert next(a for a in agents if a["path"] == "planner")["background"] is False

    stream = io.StringIO()
    progress = PlainProgress(stream=stream)
    for event in events:
        progress(event)
    assert (
        f"planner/research: completed (background, overlapped its parent's work {overlap:.1f}s)"
        in stream.getvalue()
    )
    assert progress.state.agents["planner/research"].background

    page = html.unescape(render_report(events))
    assert "background, overlapped its parent's work" in page

    spans = {s.name: s for s in exporter.get_finished_spans()}
    fork_span = spans["fork planner"]
    agent_span = spans["invoke_agent planner/research"]
    planner_span = spans["invoke_agent planner"]
    assert fork_span.attributes["orchestrator.fork.background"] is True
    assert fork_span.parent.span_id == planner_span.context.span_id
    assert agent_span.parent.span_id == fork_span.context.span_id
    assert agent_span.attributes["orchestrator.task.overlap_s"] == overlap
    assert agent_span.end_time <= fork_span.end_time <= planner_span.end_time


JOB = """\
name: launch
model: scripted:script.yaml
skills: []
subagents: []
budget: {max_tokens: 100000, max_parallel: 4}
steps:
  - id: research
    task: Research the market.
  - id: plan
    planner: true
    task: Draft the launch plan.
  - id: combine
    depends_on: [research, plan]
    task: |
      Combine the plan with the research.
      Research: {steps.research.output}
      Plan: {steps.plan.output}
output: combine
"""
JOB_SCRIPT = """\
research: [{content: market grows 7%, latency: 0.5}]
plan:
  - tool_calls:
      - {name: fork, arguments: {wait: false, tasks: [{id: costs, task: Estimate the costs.}]}}
  - {content: plan drafted, latency: 0.5}
  - tool_calls: [{name: wait_tasks, arguments: {}}]
  - content: plan drafted, costs included
plan/costs: [{content: costs 2M, latency: 0.2}]
combine: [{content: plan with research}]
"""


async def test_in_a_job_spec_depends_on_already_runs_a_step_in_the_background(
    tmp_path: Path,
) -> None:
    """A step that no later step waits for yet runs beside the others; the step that lists it
    in `depends_on` collects its output. A planner step may also fork in the background
    itself, and collects what it started before it ends."""
    from orchestrator import Orchestrator, load_job

    (tmp_path / "job.yaml").write_text(JOB)
    (tmp_path / "script.yaml").write_text(JOB_SCRIPT)
    job = load_job(tmp_path / "job.yaml")
    path = tmp_path / "run.jsonl"
    result = await Orchestrator.from_job(job).run_job(job, trace=path)

    assert result.status == "completed" and result.output == "plan with research"
    events = trace_lines(path)
    starts = {e["agent"]: e["ts"] for e in of_type(events, "task_start")}
    ends = {e["agent"]: e["ts"] for e in of_type(events, "task_end")}
    # `research` ran while the planner step worked (and its own background task ran).
    assert starts["plan"] < ends["research"] and starts["research"] < ends["plan"]
    assert starts["combine"] >= max(ends["research"], ends["plan"])
    (combine,) = [r for r in events if r["type"] == "message" and r["agent"] == "combine"][1:2]
    assert "Research: market grows 7%" in combine["message"]["content"]
    assert "Plan: plan drafted, costs included" in combine["message"]["content"]
    (costs_end,) = of_type(events, "task_end", "plan/costs")
    assert costs_end["background"] is True and ends["plan/costs"] < ends["plan"]


KILL_JOB = """\
name: background-kill
model: scripted:script.yaml
skills: []
subagents: []
budget: {max_tokens: 200000}
goal: Check and study.
"""
KILL_SCRIPT = """\
goal:
  - tool_calls:
      - name: fork
        arguments:
          wait: false
          tasks: [{id: fast, task: A quick check.}, {id: slow, task: A study.}]
  - {tool_calls: [{name: task_status, arguments: {}}], latency: 0.5}
  - tool_calls: [{name: wait_tasks, arguments: {}}]
  - content: Both are in.
goal/fast: [{content: check passed}]
goal/slow:
  - {tool_calls: [{name: read_task_output, arguments: {id: notes}}], latency: 0.2}
  - {content: study done, latency: 3}
"""


@pytest.mark.slow
def test_a_run_killed_with_sigkill_during_a_background_fork_resumes(tmp_path: Path) -> None:
    """`orchestrator run` in its own process, killed with SIGKILL while `slow` is in its
    second model call, then `orchestrator resume`."""
    import signal
    import subprocess
    import sys

    from cli_process import orchestrator

    (tmp_path / "job.yaml").write_text(KILL_JOB)
    (tmp_path / "script.yaml").write_text(KILL_SCRIPT)
    trace = tmp_path / "t.jsonl"
    command = [sys.executable, "-m", "orchestrator", "run", "job.yaml", "--trace", str(trace)]
    process = subprocess.Popen(
        [*command, "--quiet"], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 60
    try:
        while not (trace.exists() and of_type(trace_lines(trace), "tool_end", "goal/slow")):
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            assert time.monotonic() < deadline, "the run never reached the kill point"
            time.sleep(0.02)
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(30)
    killed = trace_lines(trace)
    assert not of_type(killed, "run_end", "goal") and not of_type(killed, "task_end", "goal/slow")
    assert [e["status"] for e in of_type(killed, "task_end", "goal/fast")] == ["completed"]

    done = orchestrator("resume", trace, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["status"] == "completed" and report["output"] == "Both are in."
    later = [e for e in trace_lines(trace) if e["attempt"] == 2]
    (fast_end,) = of_type(later, "task_end", "goal/fast")
    assert fast_end["restored"] is True and not of_type(later, "model_call", "goal/fast")
    (slow_start,) = of_type(later, "run_start", "goal/slow")
    assert slow_start["resumed"] is True and slow_start["steps"] == 1
    (slow_end,) = of_type(later, "task_end", "goal/slow")
    assert slow_end["status"] == "completed" and slow_end["background"] is True
    conversation = rebuild_conversations(trace)["goal"]
    text = "\n".join(m.content or "" for m in conversation)
    assert text.count("### fast [completed]") == 1 and text.count("### slow [completed]") == 1
    calls = [c.id for m in conversation for c in m.tool_calls]
    assert calls == [m.tool_call_id for m in conversation if m.role == "tool"]


CTRL_C_SCRIPT = """\
goal:
  - tool_calls:
      - name: fork
        arguments:
          wait: false
          tasks:
            - {id: long, task: A long study.}
            - {id: later, task: Then this., depends_on: [long]}
  - {tool_calls: [{name: task_status, arguments: {}}], latency: 30}
goal/long: [{content: never, latency: 30}]
"""


@pytest.mark.slow
def test_ctrl_c_ends_background_tasks_with_a_complete_record(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys

    (tmp_path / "job.yaml").write_text(KILL_JOB)
    (tmp_path / "script.yaml").write_text(CTRL_C_SCRIPT)
    trace = tmp_path / "t.jsonl"
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "run", "job.yaml", "--trace", str(trace)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    deadline = time.monotonic() + 30
    while not (trace.exists() and of_type(trace_lines(trace), "run_start", "goal/long")):
        assert time.monotonic() < deadline, "the background task never started"
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)

    assert process.returncode == 130, stderr
    events = trace_lines(trace)
    (settle,) = of_type(events, "background_settle", "goal")
    assert settle["choice"] == "cancel" and settle["ids"] == ["long", "later"]
    ends = {e["agent"]: e for e in of_type(events, "task_end")}
    assert ends["goal/long"]["status"] == "cancelled"
    assert ends["goal/later"]["status"] == "skipped"
    runs = [(e["agent"], e["status"]) for e in of_type(events, "run_end")]
    assert runs == [("goal/long", "cancelled"), ("goal", "cancelled")]
    conversation = rebuild_conversations(trace)["goal"]
    calls = [c.id for m in conversation for c in m.tool_calls]
    assert calls == [m.tool_call_id for m in conversation if m.role == "tool"]


async def test_the_orchestrator_says_what_becomes_of_tasks_running_at_an_answer() -> None:
    from orchestrator import Orchestrator

    script = {
        "planner": [
            background({"id": "study", "task": "Study it."}),
            {"content": "Answered without the study.", "latency": 0.1},
        ],
        "planner/study": [{"content": "never", "latency": 30}],
    }
    orch = Orchestrator(ScriptedModel(script), builtin=False, on_background_answer="cancel")
    result = await orch.run("Go")
    assert result.status == "completed" and result.output == "Answered without the study."
    (study,) = result.children
    assert study.status == "cancelled"
    assert study.reason == "cancelled: the agent gave its final answer (on_answer: cancel)"


async def test_an_answer_on_the_last_step_cancels_tasks_it_could_not_take_results_from(
    tmp_path: Path,
) -> None:
    script = {
        "planner": [
            background({"id": "study", "task": "Study it."}),
            {"content": "The answer, without the study.", "latency": 0.05},
        ],
        "planner/study": [{"content": "the study's finding", "latency": 0.5}],
    }
    path = tmp_path / "t.jsonl"
    extension = ForkExtension(SubagentRegistry(), tools=[note])
    agent = Agent(
        ScriptedModel(script), [note], name="planner", extensions=[extension], max_steps=2
    )
    with Trace(path) as trace:
        agent.trace = trace
        result = await agent.run("Go")

    events = trace_lines(path)
    (settle,) = of_type(events, "background_settle", "planner")
    # No step was left to hand the results over in: waiting would have spent the budget on
    # results nobody reads, and the record would say they were given.
    assert settle["choice"] == "cancel"
    assert not of_type(events, "background_delivered")
    assert result.status == "max_steps" and result.output == "The answer, without the study."
    assert result.children[0].status == "cancelled"


async def test_the_background_tools_before_any_background_fork_say_there_is_none() -> None:
    """Before a background fork, `wait_tasks`, `task_status` and `cancel_tasks` answer with an
    error that says how to start one; a blocking fork in between changes nothing, and an
    answer after it waits for nothing."""
    model = ScriptedModel(
        {
            "planner": [
                call("wait_tasks"),
                call("fork", tasks=[{"id": "quick", "task": "Say hi."}]),
                call("task_status"),
                call("cancel_tasks", ids=["quick"]),
                {"content": "done"},
            ],
            "planner/quick": [{"content": "hi"}],
        }
    )
    result = await planner(model).run("Go")
    model.assert_all_used()
    assert result.status == "completed"
    answers = [m for m in result.messages if m.role == "tool" and m.name != "fork"]
    assert [m.name for m in answers] == ["wait_tasks", "task_status", "cancel_tasks"]
    for answer in answers:
        assert answer.is_error, answer
        assert "No background tasks in this run: fork(..., wait=false) starts some." in (
            answer.content or ""
        )
    assert notes_of(result.messages) == []
