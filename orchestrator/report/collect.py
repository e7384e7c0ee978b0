"""Folding a trace's events into a `RunReport`.

Works on any trace: finished, failed, cancelled, cut off by a crash (agents without `run_end`
are `unfinished`, their open tool calls end at the last event), and resumed runs (each attempt
after the first goes on with the same agent runs; tool calls an attempt left open end with its
last event, as `interrupted`). Events are taken in file order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..trace import Event
from .model import AgentRun, Bar, ErrorItem, RunReport, Task

Handler = Callable[["Collector", Event], None]


class Collector:
    """The report being built, and the runs and tool calls still open."""

    def __init__(self, source: str = "") -> None:
        self.report = RunReport(source=source)
        self.current: dict[str, str] = {}  # path -> key of its latest run
        self.open_tools: dict[tuple[str, str], Bar] = {}  # (run key, call id) -> bar

    def add(self, event: Event) -> None:
        self.report.run_id = self.report.run_id or event.get("run")
        attempt = event.get("attempt")
        if isinstance(attempt, int) and attempt > self.report.attempts:
            self._next_attempt(attempt)
        ts = event.get("ts")
        if isinstance(ts, int | float):
            report = self.report
            report.first_ts = ts if report.first_ts is None else min(report.first_ts, ts)
            report.last_ts = ts if report.last_ts is None else max(report.last_ts, ts)
        handler = HANDLERS.get(event.get("type", ""))
        if handler is not None and "agent" in event:
            handler(self, event)

    def _next_attempt(self, attempt: int) -> None:
        """A resumed run's next attempt begins: what the last one left open ended with it."""
        for bar in self.open_tools.values():
            bar.end, bar.error = self.report.last_ts, bar.error or "interrupted"
        self.open_tools = {}
        self.report.attempts = attempt

    def run(self, event: Event) -> AgentRun | None:
        key = self.current.get(event["agent"])
        return self.report.agents.get(key) if key else None

    def finish(self) -> RunReport:
        """Close what the trace left open, and return the report."""
        last = self.report.last_ts
        for agent in self.report.agents.values():
            if agent.status == "running":
                agent.status = "unfinished"
                agent.reason = agent.reason or "the trace ends before this run did"
        for bar in self.open_tools.values():
            bar.end, bar.error = last, bar.error or "unfinished"
        self.open_tools = {}
        return self.report


def collect(events: Iterable[Event], *, source: str = "") -> RunReport:
    """Fold `events` (in file order) into a report."""
    collector = Collector(source)
    for event in events:
        collector.add(event)
    return collector.finish()


def _job_start(c: Collector, event: Event) -> None:
    c.report.job = event.get("name") or c.report.job
    c.report.job_runs += 1
    c.report.job_status = None


def _job_end(c: Collector, event: Event) -> None:
    c.report.job_status = event.get("status")


def _fork(c: Collector, event: Event) -> None:
    caller = event["agent"]
    prefix = "" if caller == "job" else f"{caller}/"
    for task in event.get("tasks") or []:
        path = task.get("path") or f"{prefix}{task['id']}"
        known = c.report.tasks.get(path)  # the same graph again, in a later attempt
        c.report.tasks[path] = Task(
            path=path,
            id=str(task.get("id")),
            caller=caller,
            subagent=task.get("agent"),
            depends_on=[f"{prefix}{d}" for d in task.get("depends_on") or []],
            status=known.status if known else None,
            reason=known.reason if known else None,
            background=bool(event.get("background")),
            overlap=known.overlap if known else None,
        )


def _task_end(c: Collector, event: Event) -> None:
    task = c.report.tasks.get(event["agent"])
    if task is None:
        return
    task.status, task.reason = event.get("status"), event.get("reason")
    overlap = _number(event.get("overlap_s"))
    task.overlap = overlap if overlap is not None else task.overlap
    ran = c.run(event)
    if event.get("status") == "error" and (ran is None or ran.status != "error"):
        _error(c, event, "task", "could not start", event.get("reason") or "")


def _run_start(c: Collector, event: Event) -> None:
    path = event["agent"]
    resumed = c.run(event) if event.get("resumed") else None
    if resumed is not None:  # the run goes on, in a later attempt, from its kept messages
        resumed.status, resumed.reason, resumed.ended = "running", None, None
        kept = event.get("kept")
        if isinstance(kept, int):
            del resumed.messages[kept:]
        return
    key, count = path, 1
    while key in c.report.agents:
        count += 1
        key = f"{path}#{count}"
    task = c.report.tasks.get(path)
    c.current[path] = key
    c.report.agents[key] = AgentRun(
        key=key,
        path=path,
        subagent=task.subagent if task else None,
        model=event.get("model"),
        started=event.get("ts"),
    )


def _run_end(c: Collector, event: Event) -> None:
    agent = c.run(event)
    if agent is None:
        return
    agent.status, agent.ended = event.get("status") or "completed", event.get("ts")
    agent.steps = event.get("steps") or agent.steps
    agent.data = event.get("data")
    cost = _number(event.get("cost"))
    if cost is not None and agent.cost is None:
        agent.cost = cost
    if event.get("error"):
        agent.reason = event["error"]
        _error(c, event, agent.status, "run", event["error"])
    elif agent.status != "completed":
        agent.reason = f"ended {agent.status}"


def _model_call(c: Collector, event: Event) -> None:
    agent = c.run(event)
    if agent is None:
        return
    usage: dict[str, Any] = event.get("usage") or {}
    used_in, used_out = usage.get("input_tokens") or 0, usage.get("output_tokens") or 0
    agent.input_tokens += used_in
    agent.output_tokens += used_out
    if isinstance(usage.get("cache_read_tokens"), int):
        agent.cache_read_tokens = (agent.cache_read_tokens or 0) + usage["cache_read_tokens"]
    cost = _number(event.get("cost"))
    if cost is not None:
        agent.cost = (agent.cost or 0.0) + cost
    agent.steps = event.get("step") or agent.steps + 1
    end = event["ts"]
    start = end - float(event.get("duration_ms") or 0) / 1000
    label = f"model call {agent.steps} ({event.get('finish_reason') or 'no finish reason'})"
    agent.bars.append(Bar("model", label, start, end, tokens=used_in + used_out))


def _model_error(c: Collector, event: Event) -> None:
    """A model call that failed or was cancelled: a bar as long as it waited, marked."""
    agent = c.run(event)
    if agent is None:
        return
    end = event["ts"]
    start = end - float(_number(event.get("duration_ms")) or 0) / 1000
    what = "cancelled" if event.get("cancelled") else "failed"
    label = f"model call {agent.steps + 1} ({what})"
    agent.bars.append(Bar("model", label, start, end, error=str(event.get("error") or what)))


def _compact(c: Collector, event: Event) -> None:
    agent = c.run(event)
    if agent is None:
        return
    agent.compactions += 1
    replaced = event.get("replaced")
    count = len(replaced) if isinstance(replaced, list) else 0
    before, after = _number(event.get("tokens_before")), _number(event.get("tokens_after"))
    label = f"compaction: {count} tool results cut"
    if before is not None and after is not None:
        label += f", {before:,.0f} -> {after:,.0f} tokens"
    agent.bars.append(Bar("compact", label, event["ts"], event["ts"]))


def _note(c: Collector, event: Event) -> None:
    """The agent kept its working record: a mark on its timeline, the note as its label."""
    agent = c.run(event)
    if agent is None:
        return
    files = event.get("files")
    changed = f" (files changed: {', '.join(map(str, files))})" if files else ""
    label = f"note: {event.get('text')}{changed}"
    agent.bars.append(Bar("compact", label, event["ts"], event["ts"]))


def _tool_start(c: Collector, event: Event) -> None:
    agent = c.run(event)
    if agent is not None:
        bar = Bar("tool", str(event.get("name")), event["ts"])
        agent.bars.append(bar)
        c.open_tools[(agent.key, str(event.get("call_id")))] = bar


def _tool_end(c: Collector, event: Event) -> None:
    agent = c.run(event)
    bar = c.open_tools.pop((agent.key, str(event.get("call_id"))), None) if agent else None
    if bar is not None:
        bar.end, bar.error = event["ts"], event.get("error_type")


def _message(c: Collector, event: Event) -> None:
    agent = c.run(event)
    message = event.get("message") or {}
    if agent is None:
        return
    agent.messages.append(message)
    if message.get("role") != "tool":
        return
    bar = c.open_tools.pop((agent.key, str(message.get("tool_call_id"))), None)
    if bar is not None:  # a call cut short: its result (aborted) ends it
        bar.end, bar.error = event["ts"], message.get("error_type") or "aborted"
    if message.get("is_error"):
        lines = (message.get("content") or "").strip().splitlines()
        kind = message.get("error_type") or "error"
        _error(c, event, kind, str(message.get("name")), lines[0] if lines else "")


def _skill_loaded(c: Collector, event: Event) -> None:
    agent = c.run(event)
    if agent is not None and event.get("skill") not in agent.skills:
        agent.skills.append(str(event.get("skill")))


def _error(c: Collector, event: Event, kind: str, where: str, text: str) -> None:
    agent: str = event["agent"]
    key = c.current.get(agent, agent)
    c.report.errors.append(ErrorItem(key, kind, where, text, event.get("ts") or 0.0))


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


HANDLERS: dict[str, Handler] = {
    "job_start": _job_start,
    "job_end": _job_end,
    "fork": _fork,
    "task_end": _task_end,
    "run_start": _run_start,
    "run_end": _run_end,
    "model_call": _model_call,
    "model_error": _model_error,
    "tool_start": _tool_start,
    "tool_end": _tool_end,
    "message": _message,
    "skill_loaded": _skill_loaded,
    "compact": _compact,
    "note": _note,
}
