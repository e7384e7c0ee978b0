"""A trace as a checkpoint: its events folded into what each node of the run got done.

`load_checkpoint(path)` reads a trace (every attempt of its run) and returns a `Checkpoint`:
per agent path, its conversation, how its latest run ended (or that it was cut off), its steps,
usage and loaded skills, and which tool calls started and ended; per task (a job step or a
forked task), its place in the graph and how it ended; every fork, with the tool call that made
it. `resume` (jobs/, tasks/, agent/restart.py) rebuilds the run from this alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..events import (
    Answer,
    BackgroundDelivered,
    Compact,
    ContextWindow,
    Fork,
    InputAnswered,
    InputRequest,
    InputRequested,
    JobEnd,
    JobStart,
    MessageEvent,
    ModelCall,
    Retry,
    RunEnd,
    RunStart,
    SkillLoaded,
    TaskEnd,
    TaskStart,
    ToolEnd,
    ToolStart,
    TraceEvent,
)
from ..messages import Message, Usage
from .asked import Asked
from .reader import TraceReader, apply_compaction

ENDED_TASK = (
    "completed",
    "error",
    "max_steps",
    "budget_exhausted",
    "loop_detected",
    "context_full",
    "output_invalid",
)
"""Task statuses that stand on resume: the task ran to an end and is not run again."""
RETRIED_TASK = ("error",)
"""Task statuses that `resume --retry-failed` runs again."""


@dataclass
class AgentRecord:
    """One agent path as its latest run left it."""

    path: str
    messages: list[Message] = field(default_factory=list)
    status: str | None = None
    """How the latest run ended; None when the trace stops before it did (cut off)."""
    output: str = ""
    data: Any = None
    """The run's validated structured answer, as JSON values (agent/output.py)."""
    validated: bool | None = None
    """For an agent given an output type, whether its answer validated; None without one."""
    error: str | None = None
    steps: int = 0
    calls: int = 0
    """Model calls of this path in the whole trace (every run and attempt)."""
    usage: Usage = field(default_factory=Usage)
    cost: float | None = None
    """US dollars of this path's priced calls; None when none was priced."""
    skills: list[str] = field(default_factory=list)
    started_calls: set[str] = field(default_factory=set)
    ended_calls: set[str] = field(default_factory=set)
    started_at: float | None = None
    ended_at: float | None = None
    open_call: str | None = None
    delivered: set[str] = field(default_factory=set)
    """Ids of background tasks whose results reached this agent."""
    compacted: dict[int, str] = field(default_factory=dict)
    asked_server: bool = False
    """The run asked the model's server for its context window (a `context_window` event)."""
    server_window: int | None = None
    """What the server said (None: it did not say); a resumed run uses it, not a new ask."""
    """What compactions cut from the conversation, by message index: the original text."""
    compactions: int = 0

    @property
    def resumable(self) -> bool:
        """Cut off, cancelled, or waiting for a person: its run goes on from its last
        complete turn."""
        return self.status is None or self.status in ("cancelled", "input_required")


@dataclass
class TaskRecord:
    """One node of a task graph: where it sits, and how it ended (if the trace says)."""

    path: str
    id: str
    caller: str
    agent: str | None = None
    depends_on: list[str] = field(default_factory=list)
    status: str | None = None
    reason: str | None = None
    started_at: float | None = None
    ended_at: float | None = None


@dataclass
class ForkRecord:
    """A task graph started by `caller`: the tool call that made it (None for a job's
    steps) and its tasks' paths in order."""

    caller: str
    call_id: str | None
    paths: list[str]
    background: bool = False
    """Started by `fork(..., wait=false)`: it ran beside its caller."""


@dataclass(frozen=True)
class AgentHistory:
    """What a resumed agent is handed to go on from: its path's `record` in the `checkpoint`
    (which also holds the forks it made and the tasks under it). `Checkpoint.history` gives
    it out, once per path; `AgentLoop.run(history=...)` takes it."""

    checkpoint: Checkpoint
    record: AgentRecord

    @property
    def path(self) -> str:
        return self.record.path

    def spent(self) -> tuple[int, float]:
        """Tokens and US dollars the path's whole subtree spent before, every attempt's."""
        checkpoint, path = self.checkpoint, self.record.path
        return checkpoint.subtree_usage(path).total_tokens, checkpoint.subtree_cost(path)


@dataclass
class Checkpoint:
    """Everything a trace tells of its run, by agent path and by task."""

    path: Path | None = None
    run_id: str | None = None
    attempts: int = 0
    last_seq: int = 0
    last_mac: str = ""
    """The signature of the last event, which the next attempt's first line chains to."""
    runs: set[str] = field(default_factory=set)
    """Every run id the trace's events name: one, unless the file was tampered with."""
    job: JobStart | None = None
    """The run's first `job_start`: spec, inputs, model."""
    job_end: JobEnd | None = None
    """The latest attempt's `job_end`, if it got that far."""
    agents: dict[str, AgentRecord] = field(default_factory=dict)
    tasks: dict[str, TaskRecord] = field(default_factory=dict)
    forks: list[ForkRecord] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    """Every model call of every attempt."""
    cost: float = 0.0
    """US dollars of every priced model call of every attempt."""
    skipped: int = 0
    """Lines of the file that were not events."""
    size: int | None = None
    """The file's size when it was read: a resume refuses a file that has grown since."""
    retrying: list[str] = field(default_factory=list)
    """The failed tasks the coming attempt runs again: its trace records them first (a
    `retry` event), so that the checkpoint of a later resume is this one."""
    asked: Asked = field(default_factory=Asked)
    """What the run asked a person and what was answered (`input_request`, `input_answer`)."""
    answering: list[Answer] = field(default_factory=list)
    """Answers the coming attempt records first (`resume --answer`), as `retrying` is."""
    _claimed: set[str] = field(default_factory=set)

    @property
    def finished(self) -> bool:
        """The run ended (completed, failed or out of budget); one cancelled or waiting for a
        person did not."""
        return self.job_end is not None and self.job_end.status not in (
            "cancelled",
            "input_required",
        )

    def open_requests(self) -> list[InputRequest]:
        """What the run still waits for a person to answer, in the order it was asked."""
        return self.asked.unanswered()

    def answer(self, answer: Answer, *, late: bool = False) -> None:
        """Give an open request its answer: the coming attempt records it first, and the
        waiting call gets it when the run resumes (`late`: after the request expired, the
        asker is told so instead)."""
        self.asked.answer(answer, late=late)
        self.answering.append(answer)

    def agent(self, path: str) -> AgentRecord:
        if path not in self.agents:
            self.agents[path] = AgentRecord(path)
        return self.agents[path]

    def __getstate__(self) -> dict[str, Any]:
        """A copy sent to another process (a Ray worker) gives out histories anew: which
        paths were claimed is this process's."""
        return {**self.__dict__, "_claimed": set()}

    def history(self, path: str) -> AgentHistory | None:
        """The history of a cut-off run at `path`, once: the agent that resumes it takes it.
        None when the path's run ended (or never started), or its history was given out."""
        if not self.left_off(path):
            return None
        self._claimed.add(path)
        return AgentHistory(self, self.agents[path])

    def left_off(self, path: str) -> bool:
        """Whether the run at `path` was cut off and its history not given out yet."""
        record = self.agents.get(path)
        return record is not None and record.resumable and path not in self._claimed

    def subtree_cost(self, path: str) -> float:
        """US dollars of the agent at `path` and every agent under it, over every attempt."""
        prefix = f"{path}/"
        return sum(
            a.cost or 0.0 for p, a in self.agents.items() if p == path or p.startswith(prefix)
        )

    def subtree_usage(self, path: str) -> Usage:
        """Tokens of the agent at `path` and every agent under it, over every attempt."""
        prefix = f"{path}/"
        return sum(
            (a.usage for p, a in self.agents.items() if p == path or p.startswith(prefix)),
            Usage(),
        )

    def calls_by_agent(self) -> dict[str, int]:
        return {path: a.calls for path, a in self.agents.items() if a.calls}

    def forks_of(self, caller: str) -> list[ForkRecord]:
        return [f for f in self.forks if f.caller == caller]

    def failed_tasks(self) -> list[str]:
        """The paths of the tasks (steps and forked tasks, at any depth) that ended failed."""
        return [path for path, task in self.tasks.items() if task.status in RETRIED_TASK]

    def reopen(self, paths: Iterable[str]) -> None:
        """Make the failed tasks at `paths` run again, and only what depends on them.

        A failed task's agent goes on from its last complete turn. Its siblings that used its
        result (its dependents) run again from the start. The agent that forked it goes on
        from that fork call, which is made again (its other tasks keep their results), and so
        on up to the job's step; the job steps that depend on a reopened step run again from
        the start.
        Everything else keeps its result, and every call's spend stays counted.
        """
        for path in dict.fromkeys(paths):
            if path in self.tasks:
                self._reopen(path)
                self.job_end = None

    def _reopen(self, path: str) -> None:
        task = self.tasks[path]
        task.status = task.reason = task.ended_at = None
        record = self.agents.get(path)
        if record is not None:
            record.status = None  # it goes on from its last complete turn
            last = record.messages[-1] if record.messages else None
            if last is not None and last.role == "assistant" and not last.tool_calls:
                record.messages.pop()  # it had answered (empty, say): the model is asked again
        for other in list(self.tasks.values()):
            if other.caller == task.caller and task.id in other.depends_on:
                self._forget(other.path)
        if task.caller != "job":
            self._reopen_fork_call(task)

    def _reopen_fork_call(self, task: TaskRecord) -> None:
        """The agent that forked `task` loses the fork call's result and every later turn."""
        caller = self.agents.get(task.caller)
        fork = next((f for f in self.forks if task.path in f.paths), None)
        if caller is None or fork is None or fork.call_id is None:
            return
        messages = caller.messages
        at = next(
            (i for i, m in enumerate(messages) if m.tool_call_id == fork.call_id),
            len(messages),
        )
        later = next(
            (i for i in range(at, len(messages)) if messages[i].role == "assistant"),
            len(messages),
        )
        dropped = [m for m in messages[later:] if m.role == "assistant"]
        del messages[later:]
        if at < len(messages):
            del messages[at]
        caller.ended_calls.discard(fork.call_id)
        caller.status = None
        later_calls = {call.id for m in dropped for call in m.tool_calls}
        for other in [f for f in self.forks if f.caller == task.caller]:
            if other.call_id in later_calls:
                for path in other.paths:
                    self._forget(path)
                    self.tasks.pop(path, None)
                self.forks.remove(other)
        if task.caller in self.tasks:
            self._reopen(task.caller)

    def _forget(self, path: str) -> None:
        """The task at `path` runs again from the start, with all it forked, and so does
        every task that used its result."""
        task = self.tasks.get(path)
        if task is None or (task.status is None and not self.agents.get(path)):
            return
        task.status = task.reason = task.ended_at = None
        prefix = f"{path}/"
        for agent_path, record in list(self.agents.items()):
            if agent_path == path or agent_path.startswith(prefix):
                self.agents[agent_path] = AgentRecord(
                    agent_path, calls=record.calls, usage=record.usage, cost=record.cost
                )
        for task_path in [p for p in self.tasks if p.startswith(prefix)]:
            del self.tasks[task_path]
        self.forks = [
            f for f in self.forks if not (f.caller == path or f.caller.startswith(prefix))
        ]
        for other in list(self.tasks.values()):
            if other.caller == task.caller and task.id in other.depends_on:
                self._forget(other.path)


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Fold the trace at `path` into a Checkpoint."""
    size = Path(path).stat().st_size
    reader = TraceReader(path)
    checkpoint = fold(reader)
    checkpoint.path, checkpoint.skipped, checkpoint.size = Path(path), reader.skipped, size
    return checkpoint


def fold(events: Iterable[TraceEvent]) -> Checkpoint:
    checkpoint = Checkpoint()
    for event in events:
        checkpoint.last_seq = max(checkpoint.last_seq, event.seq)
        checkpoint.attempts = max(checkpoint.attempts, event.attempt)
        checkpoint.run_id = checkpoint.run_id or event.run
        checkpoint.runs.add(str(event.run))
        checkpoint.last_mac = event.mac or ""
        _fold_one(checkpoint, event)
    return checkpoint


def _fold_one(c: Checkpoint, event: TraceEvent) -> None:  # noqa: C901 - one case per kind
    match event:
        case JobStart():
            c.job = c.job or event
            c.job_end = None
        case JobEnd():
            c.job_end = event
        case Fork():
            _fork(c, event)
        case TaskStart():
            task = c.tasks.get(event.agent)
            if task is not None:
                task.started_at = event.ts
        case TaskEnd():
            task = c.tasks.get(event.agent)
            if task is not None:
                task.status, task.reason, task.ended_at = event.status, event.reason, event.ts
        case RunStart():
            _run_start(c, event)
        case RunEnd():
            record = c.agent(event.agent)
            record.status, record.output = event.status or "error", event.output or ""
            record.data, record.validated = event.data, event.validated
            record.error, record.ended_at = event.error, event.ts
        case ModelCall():
            _model_call(c, event)
        case MessageEvent():
            c.agent(event.agent).messages.append(event.message)
        case ToolStart():
            record = c.agent(event.agent)
            record.started_calls.add(str(event.call_id))
            record.open_call = str(event.call_id)
        case ToolEnd():
            record = c.agent(event.agent)
            record.ended_calls.add(str(event.call_id))
            if record.open_call == str(event.call_id):
                record.open_call = None
        case SkillLoaded():
            skills = c.agent(event.agent).skills
            if event.skill not in skills:
                skills.append(event.skill)
        case Retry():
            c.reopen(event.paths)
        case BackgroundDelivered():
            c.agent(event.agent).delivered.update(event.ids)
        case Compact():
            record = c.agent(event.agent)
            for index, text in apply_compaction(record.messages, event).items():
                record.compacted.setdefault(index, text)  # a stub replaced again keeps its original
            record.compactions += 1
        case InputRequested() | InputAnswered():
            c.asked.take(event)
        case ContextWindow():
            record = c.agent(event.agent)
            record.asked_server = True
            tokens = event.tokens
            record.server_window = tokens if tokens is not None and tokens > 0 else None


def _fork(c: Checkpoint, event: Fork) -> None:
    caller = event.agent
    prefix = "" if caller == "job" else f"{caller}/"
    paths = []
    for task in event.tasks:
        path = task.path or f"{prefix}{task.id}"
        paths.append(path)
        known = c.tasks.get(path)
        record = TaskRecord(path, str(task.id), caller, task.agent)
        record.depends_on = list(task.depends_on)
        if known is not None:  # the same graph again, in a later attempt: keep how it ended
            record.status, record.reason = known.status, known.reason
            record.started_at, record.ended_at = known.started_at, known.ended_at
        c.tasks[path] = record
    call = c.agents[caller].open_call if caller in c.agents else None
    background = bool(event.background)
    again = any(f.caller == caller and f.paths == paths and f.background for f in c.forks)
    if not (background and again):  # a background fork started again on resume is the same
        c.forks.append(ForkRecord(caller, call, paths, background))


def _run_start(c: Checkpoint, event: RunStart) -> None:
    record = c.agent(event.agent)
    if event.resumed:
        del record.messages[event.kept if event.kept is not None else len(record.messages) :]
        record.status = None
        return
    calls = record.calls
    c.agents[record.path] = AgentRecord(record.path, calls=calls, started_at=event.ts)


def _model_call(c: Checkpoint, event: ModelCall) -> None:
    record = c.agent(event.agent)
    usage = Usage.model_validate(event.usage.model_dump())
    record.usage, c.usage = record.usage + usage, c.usage + usage
    cost = event.cost
    if cost is not None and cost >= 0:
        record.cost = (record.cost or 0.0) + float(cost)
        c.cost += float(cost)
    record.steps = event.step
    record.calls += 1
