"""Folding a trace's events into a `RunReport`.

Works on any trace: finished, failed, cancelled, cut off by a crash (agents without `run_end`
are `unfinished`, their open tool calls end at the last event), and resumed runs (each attempt
after the first goes on with the same agent runs; tool calls an attempt left open end with its
last event, as `interrupted`). Events are taken in file order.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..events import (
    Compact,
    Fork,
    InputAnswered,
    InputRequested,
    JobEnd,
    JobStart,
    MessageEvent,
    ModelCall,
    ModelError,
    Note,
    RunEnd,
    RunStart,
    SkillLoaded,
    TaskEnd,
    ToolEnd,
    ToolStart,
    TraceEvent,
)
from .model import AgentRun, Bar, ErrorItem, RunReport, Task


class Collector:
    """The report being built, and the runs and tool calls still open."""

    def __init__(self, source: str = "") -> None:
        self.report = RunReport(source=source)
        self.current: dict[str, str] = {}  # path -> key of its latest run
        self.open_tools: dict[tuple[str, str], Bar] = {}  # (run key, call id) -> bar

    def add(self, event: TraceEvent) -> None:  # noqa: C901 - one case per kind
        self.report.run_id = self.report.run_id or event.run
        if event.attempt > self.report.attempts:
            self._next_attempt(event.attempt)
        if event.ts is not None:
            report, ts = self.report, event.ts
            report.first_ts = ts if report.first_ts is None else min(report.first_ts, ts)
            report.last_ts = ts if report.last_ts is None else max(report.last_ts, ts)
        match event:
            case JobStart():
                _job_start(self, event)
            case JobEnd():
                self.report.job_status = event.status
            case Fork():
                _fork(self, event)
            case TaskEnd():
                _task_end(self, event)
            case RunStart():
                _run_start(self, event)
            case RunEnd():
                _run_end(self, event)
            case ModelCall():
                _model_call(self, event)
            case ModelError():
                _model_error(self, event)
            case ToolStart():
                _tool_start(self, event)
            case ToolEnd():
                _tool_end(self, event)
            case MessageEvent():
                _message(self, event)
            case SkillLoaded():
                _skill_loaded(self, event)
            case Compact():
                _compact(self, event)
            case Note():
                _note(self, event)
            case InputRequested() | InputAnswered():
                self.report.asked.take(event)

    def _next_attempt(self, attempt: int) -> None:
        """A resumed run's next attempt begins: what the last one left open ended with it."""
        for bar in self.open_tools.values():
            bar.end, bar.error = self.report.last_ts, bar.error or "interrupted"
        self.open_tools = {}
        self.report.attempts = attempt

    def run(self, event: TraceEvent) -> AgentRun | None:
        key = self.current.get(event.agent)
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


def collect(events: Iterable[TraceEvent], *, source: str = "") -> RunReport:
    """Fold `events` (in file order) into a report."""
    collector = Collector(source)
    for event in events:
        collector.add(event)
    return collector.finish()


def _job_start(c: Collector, event: JobStart) -> None:
    c.report.job = event.name or c.report.job
    c.report.job_runs += 1
    c.report.job_status = None


def _fork(c: Collector, event: Fork) -> None:
    caller = event.agent
    prefix = "" if caller == "job" else f"{caller}/"
    for task in event.tasks:
        path = task.path or f"{prefix}{task.id}"
        known = c.report.tasks.get(path)  # the same graph again, in a later attempt
        c.report.tasks[path] = Task(
            path=path,
            id=str(task.id),
            caller=caller,
            subagent=task.agent,
            depends_on=[f"{prefix}{d}" for d in task.depends_on],
            status=known.status if known else None,
            reason=known.reason if known else None,
            background=bool(event.background),
            overlap=known.overlap if known else None,
        )


def _task_end(c: Collector, event: TaskEnd) -> None:
    task = c.report.tasks.get(event.agent)
    if task is None:
        return
    task.status, task.reason = event.status, event.reason
    overlap = event.overlap_s
    task.overlap = float(overlap) if overlap is not None else task.overlap
    ran = c.run(event)
    if event.status == "error" and (ran is None or ran.status != "error"):
        _error(c, event, "task", "could not start", event.reason or "")


def _run_start(c: Collector, event: RunStart) -> None:
    path = event.agent
    if event.sandbox is not None and event.sandbox not in c.report.sandboxes:
        c.report.sandboxes.append(event.sandbox)
    resumed = c.run(event) if event.resumed else None
    if resumed is not None:  # the run goes on, in a later attempt, from its kept messages
        resumed.status, resumed.reason, resumed.ended = "running", None, None
        if event.kept is not None:
            del resumed.messages[event.kept :]
        return
    key, count = path, 1
    while key in c.report.agents:
        count += 1
        key = f"{path}#{count}"
    task = c.report.tasks.get(path)
    c.current[path] = key
    preloaded = list(event.preloaded or [])
    c.report.agents[key] = AgentRun(
        key=key,
        path=path,
        subagent=task.subagent if task else None,
        model=event.model,
        started=event.ts,
        skills=list(preloaded),
        preloaded=preloaded,
    )


def _run_end(c: Collector, event: RunEnd) -> None:
    agent = c.run(event)
    if agent is None:
        return
    agent.status, agent.ended = event.status or "completed", event.ts
    agent.steps = event.steps or agent.steps
    agent.data = event.data
    if event.cost is not None and agent.cost is None:
        agent.cost = float(event.cost)
    if event.error:
        agent.reason = event.error
        if agent.status != "input_required":  # waiting for a person is no error
            _error(c, event, agent.status, "run", event.error)
    elif agent.status != "completed":
        agent.reason = f"ended {agent.status}"


def _model_call(c: Collector, event: ModelCall) -> None:
    agent = c.run(event)
    if agent is None:
        return
    usage = event.usage
    used_in, used_out = usage.input_tokens, usage.output_tokens
    agent.input_tokens += used_in
    agent.output_tokens += used_out
    if "cache_read_tokens" in usage.model_fields_set:  # recorded only when some were
        agent.cache_read_tokens = (agent.cache_read_tokens or 0) + usage.cache_read_tokens
    if event.cost is not None:
        agent.cost = (agent.cost or 0.0) + event.cost
    agent.steps = event.step or agent.steps + 1
    end = event.ts
    start = end - float(event.duration_ms or 0) / 1000
    label = f"model call {agent.steps} ({event.finish_reason or 'no finish reason'})"
    agent.bars.append(Bar("model", label, start, end, tokens=used_in + used_out))


def _model_error(c: Collector, event: ModelError) -> None:
    """A model call that failed or was cancelled: a bar as long as it waited, marked."""
    agent = c.run(event)
    if agent is None:
        return
    end = event.ts
    start = end - float(event.duration_ms or 0) / 1000
    what = "cancelled" if event.cancelled else "failed"
    label = f"model call {agent.steps + 1} ({what})"
    agent.bars.append(Bar("model", label, start, end, error=event.error or what))


def _compact(c: Collector, event: Compact) -> None:
    agent = c.run(event)
    if agent is None:
        return
    agent.compactions += 1
    if event.ts is None:
        return
    count = len(event.replaced or [])
    before, after = event.tokens_before, event.tokens_after
    label = f"compaction: {count} tool results cut"
    if before is not None and after is not None:
        label += f", {before:,.0f} -> {after:,.0f} tokens"
    agent.bars.append(Bar("compact", label, event.ts, event.ts))


def _note(c: Collector, event: Note) -> None:
    """The agent kept its working record: a mark on its timeline, the note as its label."""
    agent = c.run(event)
    if agent is None or event.ts is None:
        return
    if event.text is None:
        label = f"changed: {event.changed}" if event.changed else "note"
    else:
        changed = f" (files changed: {', '.join(event.files)})" if event.files else ""
        label = f"note: {event.text}{changed}"
    agent.bars.append(Bar("compact", label, event.ts, event.ts))


def _tool_start(c: Collector, event: ToolStart) -> None:
    agent = c.run(event)
    if agent is not None:
        bar = Bar("tool", str(event.name), event.ts)
        agent.bars.append(bar)
        c.open_tools[(agent.key, str(event.call_id))] = bar


def _tool_end(c: Collector, event: ToolEnd) -> None:
    agent = c.run(event)
    bar = c.open_tools.pop((agent.key, str(event.call_id)), None) if agent else None
    if bar is not None:
        bar.end, bar.error = event.ts, event.error_type


def _message(c: Collector, event: MessageEvent) -> None:
    agent = c.run(event)
    if agent is None:
        return
    message = event.message
    agent.messages.append(message.to_dict())
    if message.role != "tool":
        return
    bar = c.open_tools.pop((agent.key, str(message.tool_call_id)), None)
    if bar is not None:  # a call cut short: its result (aborted) ends it
        bar.end, bar.error = event.ts, message.error_type or "aborted"
    if message.is_error and message.error_type != "input_required":
        lines = (message.content or "").strip().splitlines()
        kind = message.error_type or "error"
        _error(c, event, kind, str(message.name), lines[0] if lines else "")


def _skill_loaded(c: Collector, event: SkillLoaded) -> None:
    agent = c.run(event)
    if agent is not None and event.skill not in agent.skills:
        agent.skills.append(event.skill)


def _error(c: Collector, event: TraceEvent, kind: str, where: str, text: str) -> None:
    key = c.current.get(event.agent, event.agent)
    c.report.errors.append(ErrorItem(key, kind, where, text, event.ts or 0.0))
