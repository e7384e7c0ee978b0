"""A readable summary of a finished (or interrupted) run, from its trace alone.

Used by `orchestrator trace show`: the run's id and attempts, the DAG of agents (each nested
under the agent that forked it, with its full path where the short name is ambiguous) with
their statuses and dependencies, tokens (with the input served from and written to the
provider's prompt cache), cost when the calls were priced, and steps per agent over every
attempt, the skills each loaded, and every error.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..events import (
    FILES_LISTED,
    BackgroundSettle,
    Compact,
    Fork,
    InputAnswered,
    InputRequested,
    JobEnd,
    JobStart,
    MessageEvent,
    ModelCall,
    Note,
    PartEvent,
    RunEnd,
    RunStart,
    SkillFailed,
    SkillLoaded,
    TaskEnd,
    TokenCounts,
    TraceEvent,
)
from ..messages import plural
from ..security.permissions import sandbox_line
from .asked import Asked

WAITED = "input_required"
"""A call's result, and a run's end, while it waits for a person: not an error."""


def number(value: object) -> float | None:
    """A cost or count read from a trace as a number, or None (never a guess)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


DATA_SHOWN = 200
"""How many characters of an agent's structured answer the summary shows."""
SKIPPED_SHOWN = 5
"""How many skipped lines the summary names (the CLI names them all on stderr)."""


@dataclass
class AgentSummary:
    """One agent of the run, as the trace tells it."""

    path: str
    status: str = "not started"
    steps: int = 0
    tokens: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost: float | None = None
    depends_on: list[str] = field(default_factory=list)
    reason: str | None = None
    started: float | None = None
    ended: float | None = None
    skills: list[str] = field(default_factory=list)
    preloaded: list[str] = field(default_factory=list)
    """The skills the agent started with loaded (its task or definition named them)."""
    restored: bool = False
    background: bool = False
    """Started by `fork(..., wait=false)`: it ran beside the agent that started it."""
    overlap: float | None = None
    """Seconds a background task ran while that agent did its own work."""
    settled: list[str] = field(default_factory=list)
    """What became of this agent's background tasks when its run ended."""
    data: Any = None
    """The validated structured answer its run ended with (JSON values), if any."""
    compactions: int = 0
    """How many times its conversation was compacted to fit its model's window."""
    note: str | None = None
    """Its working record, as its latest `note` call left it."""
    note_files: list[str] = field(default_factory=list)
    """The newest files its run changed (those its working record lists)."""
    files_changed: int = 0
    """How many files its run changed, listed or not."""

    def noted(self, event: Note) -> None:
        """Take in a `note` event: the note a `note` call left, or one more file changed."""
        if event.text is not None:
            self.note = event.text
            self.note_files = list(event.files)
        elif self.note is None:  # a change before any note: the record so far is empty
            self.note = ""
        if event.changed is not None and event.changed not in self.note_files:
            self.note_files = [*self.note_files, event.changed][-FILES_LISTED:]
        self.files_changed = max(self.files_changed, event.files_changed or 0, len(self.note_files))

    @property
    def seconds(self) -> float | None:
        if self.started is None or self.ended is None:
            return None
        return self.ended - self.started

    @property
    def parent(self) -> str | None:
        return self.path.rpartition("/")[0] or None


@dataclass
class RunSummary:
    """Everything `trace show` prints."""

    run_id: str | None = None
    attempts: int = 0
    job: str | None = None
    job_status: str | None = None
    agents: dict[str, AgentSummary] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    error_attempts: list[int] = field(default_factory=list)
    skipped_lines: int = 0
    skipped: list[str] = field(default_factory=list)
    """Why lines were skipped, by line number (the first few; see `reader.MAX_PROBLEMS`)."""
    asked: Asked = field(default_factory=Asked)
    """What the run asked a person and what was answered."""
    sandboxes: list[str] = field(default_factory=list)
    """Where the run's commands ran, as its agents' `run_start` recorded it (each distinct
    one); empty when it allowed none."""

    def error(self, event: TraceEvent, text: str) -> None:
        self.errors.append(text)
        self.error_attempts.append(event.attempt)

    def agent(self, path: str) -> AgentSummary:
        if path not in self.agents:
            self.agents[path] = AgentSummary(path)
        return self.agents[path]

    @property
    def total_tokens(self) -> int:
        return sum(a.tokens for a in self.agents.values())

    @property
    def total_cost(self) -> float | None:
        costs = [a.cost for a in self.agents.values() if a.cost is not None]
        return sum(costs) if costs else None

    def as_dict(self) -> dict[str, object]:
        """The summary as JSON-ready data (`trace show --json`)."""
        agents = [
            {
                "path": a.path,
                "status": a.status,
                "steps": a.steps,
                "tokens": a.tokens,
                "cache_read_tokens": a.cache_read,
                "cache_write_tokens": a.cache_write,
                "cost": a.cost,
                "seconds": a.seconds,
                "depends_on": a.depends_on,
                "skills": a.skills,
                "preloaded": a.preloaded,
                "reason": a.reason,
                "background": a.background,
                "overlap_seconds": a.overlap,
                "settled": a.settled,
                "data": a.data,
                "compactions": a.compactions,
                "note": a.note,
                "note_files": a.note_files,
                "files_changed": a.files_changed,
            }
            for a in self.tree()
        ]
        return {
            "run": self.run_id,
            "attempts": self.attempts,
            "job": self.job,
            "job_status": self.job_status,
            "tokens": self.total_tokens,
            "cache_read_tokens": sum(a.cache_read for a in self.agents.values()),
            "cache_write_tokens": sum(a.cache_write for a in self.agents.values()),
            "cost": self.total_cost,
            "sandbox": self.sandboxes,
            "agents": agents,
            "errors": self.errors,
            "requests": [
                {
                    **r.shown(),
                    "answer": a.model_dump(mode="json")
                    if (a := self.asked.answers.get(r.id))
                    else None,
                    **({"late": True} if r.id in self.asked.late else {}),
                }
                for r in self.asked.requests.values()
            ],
        }

    def tree(self) -> list[AgentSummary]:
        """Every agent, each under the agent that forked it, in order of appearance."""
        children: dict[str | None, list[AgentSummary]] = {}
        for agent in self.agents.values():
            parent = agent.parent if agent.parent in self.agents else None
            children.setdefault(parent, []).append(agent)
        ordered: list[AgentSummary] = []
        stack = list(reversed(children.get(None, [])))
        while stack:
            agent = stack.pop()
            ordered.append(agent)
            stack.extend(reversed(children.get(agent.path, [])))
        return ordered


class Skips(Protocol):
    """What a trace's reader skipped, once it has read: `TraceEvents` (`read_trace`) and
    `TraceReader` (`iter_trace`) in trace/reader.py."""

    @property
    def skipped(self) -> int: ...

    @property
    def problems(self) -> list[str]: ...


def summarize(
    events: Iterable[TraceEvent], *, live: bool = False, skips: Skips | None = None
) -> RunSummary:
    """Fold a trace's events into a summary; `skips`, the reader of `events`, says what it
    skipped (read once the events are folded: a lazy reader counts as it goes). Agents still
    running when the trace ends are `unfinished`, unless the run is `live` (still being
    written)."""
    summary = RunSummary()
    for event in events:
        summary.run_id = summary.run_id or event.run
        summary.attempts = max(summary.attempts, event.attempt)
        _fold(summary, event)
    if skips is not None:
        summary.skipped_lines = skips.skipped
        summary.skipped = list(skips.problems)
    if not live:
        for agent in summary.agents.values():
            if agent.status == "running":
                agent.status = "unfinished"
    return summary


def _fold(summary: RunSummary, event: TraceEvent) -> None:  # noqa: C901 - one case per kind
    match event:
        case JobStart():
            summary.job, summary.job_status = event.name, None
        case JobEnd():
            summary.job_status = event.status
        case Fork():
            for task in event.tasks:
                agent = summary.agent(task.path)
                agent.depends_on = list(task.depends_on)
                agent.background = agent.background or bool(event.background)
        case RunStart():
            agent = summary.agent(event.agent)
            agent.status = "running"
            if not event.resumed or agent.started is None:
                agent.started = event.ts
            if event.preloaded is not None:
                agent.preloaded = list(event.preloaded)
            if event.sandbox is not None and event.sandbox not in summary.sandboxes:
                summary.sandboxes.append(event.sandbox)
        case ModelCall():
            _model_call(summary, event)
        case PartEvent(usage=TokenCounts() as usage):
            # Tokens spent elsewhere for the agent (a remote agent's report of its task).
            summary.agent(event.agent).tokens += usage.total_tokens
        case TaskEnd():
            agent = summary.agent(event.agent)
            agent.restored = agent.restored or bool(event.restored)
            agent.overlap = event.overlap_s if event.overlap_s is not None else agent.overlap
            # A task that waited goes on in a later attempt (a remote agent's has no run_end).
            if event.status == "skipped" or agent.status in ("not started", "running", WAITED):
                agent.status, agent.reason = event.status, event.reason
        case SkillLoaded():
            skills = summary.agent(event.agent).skills
            if event.skill not in skills:
                skills.append(event.skill)
        case SkillFailed():
            summary.error(event, f"{event.agent}: skill {event.skill!r} failed: {event.error}")
        case MessageEvent():
            message = event.message
            if message.role == "tool" and message.is_error and message.error_type != WAITED:
                first_line = (message.content or "").strip().splitlines()[:1]
                text = first_line[0] if first_line else ""
                kind = message.error_type or "error"
                summary.error(event, f"{event.agent}: {message.name} [{kind}] {text}")
        case RunEnd():
            agent = summary.agent(event.agent)
            agent.status, agent.ended = event.status, event.ts
            agent.data = event.data
            agent.reason = event.error or None  # an earlier attempt's reason is not this one's
            if event.error and event.status != WAITED:
                summary.error(event, f"{agent.path}: run ended {event.status}: {event.error}")
        case InputRequested() | InputAnswered():
            summary.asked.take(event)
        case Compact():
            summary.agent(event.agent).compactions += 1
        case Note():
            summary.agent(event.agent).noted(event)
        case BackgroundSettle():
            verb = "waited for" if event.choice == "wait" else "cancelled"
            summary.agent(event.agent).settled.append(f"{verb} {', '.join(event.ids)}")


def _model_call(summary: RunSummary, event: ModelCall) -> None:
    agent = summary.agent(event.agent)
    agent.steps = event.step
    agent.tokens += event.usage.total_tokens
    agent.cache_read += event.usage.cache_read_tokens
    agent.cache_write += event.usage.cache_write_tokens
    if event.cost is not None:
        agent.cost = (agent.cost or 0.0) + event.cost


def render(summary: RunSummary) -> str:
    """The summary as plain text."""
    lines = []
    if summary.job:
        lines.append(f"job {summary.job}: {summary.job_status or 'did not finish'}")
    if summary.run_id:
        attempts = plural(max(1, summary.attempts), "attempt")
        attempts += ", resumed" if summary.attempts > 1 else ""
        lines.append(f"run {summary.run_id} ({attempts})")
    read = sum(a.cache_read for a in summary.agents.values())
    written = sum(a.cache_write for a in summary.agents.values())
    lines.append(
        f"{plural(len(summary.agents), 'agent')}, {plural(summary.total_tokens, 'token')}"
        + _cache_text(read, written)
        + (f", {_dollars(summary.total_cost)}" if summary.total_cost is not None else "")
    )
    if summary.sandboxes:
        lines.append(sandbox_line(summary.sandboxes))
    if summary.skipped_lines:
        lines.append(f"{plural(summary.skipped_lines, 'unreadable line')} skipped")
        lines.extend(f"  skipped {problem}" for problem in summary.skipped[:SKIPPED_SHOWN])
    lines.append("")
    names = [a.path.rsplit("/", 1)[-1] for a in summary.agents.values()]
    for agent in summary.tree():
        lines.append(_line(agent, ambiguous=names.count(agent.path.rsplit("/", 1)[-1]) > 1))
    lines.append("")
    if summary.asked.requests:
        lines.extend(_request_lines(summary))
        lines.append("")
    if summary.errors:
        lines.append(f"{plural(len(summary.errors), 'error')}:")
        for error, attempt in zip(summary.errors, summary.error_attempts, strict=False):
            where = f"[attempt {attempt}] " if summary.attempts > 1 else ""
            lines.append(f"  {where}{error}")
    else:
        lines.append("no errors")
    return "\n".join(lines)


def _request_lines(summary: RunSummary) -> list[str]:
    """What the run asked a person, each with its answer or `waiting`. A question's text is
    a model's or a remote's: it is quoted, as data."""
    asked = summary.asked
    waiting = len(asked.unanswered())
    lines = [f"{plural(len(asked.requests), 'request')} to a person ({waiting} waiting):"]
    for request in asked.requests.values():
        answer = asked.answers.get(request.id)
        if answer is None:
            given = "waiting"
        elif answer.action != "accept":
            given = {"decline": "declined", "cancel": "cancelled"}[answer.action]
        else:
            given = f"answered {json.dumps(answer.value)[:80]}"
        if request.id in asked.late:
            given += " too late (the request had expired; the asker was not given it)"
        question = json.dumps(request.question)[:200]
        lines.append(f"  {request.id}  {request.agent} ({request.kind}) {question}: {given}")
    return lines


def _line(agent: AgentSummary, *, ambiguous: bool) -> str:
    depth = agent.path.count("/")
    name = agent.path if ambiguous else agent.path.rsplit("/", 1)[-1]
    line = f"{'  ' * depth}{name}  [{agent.status}]"
    if agent.status != "skipped":
        line += f"  steps {agent.steps}  tokens {agent.tokens:,}"
        line += _cache_text(agent.cache_read, agent.cache_write)
        if agent.cost is not None:
            line += f"  {_dollars(agent.cost)}"
    if agent.seconds is not None:
        line += f"  {agent.seconds:.2f}s"
    if agent.depends_on:
        line += f"  after {', '.join(agent.depends_on)}"
    if agent.preloaded:
        line += f"  preloaded: {', '.join(agent.preloaded)}"
    if agent.background:
        overlap = f", overlapped its parent's work {agent.overlap:.2f}s" if agent.overlap else ""
        line += f"  background{overlap}"
    if agent.settled:
        line += f"  at its end {'; '.join(agent.settled)} (background)"
    if agent.skills:
        line += f"  skills: {', '.join(agent.skills)}"
    if agent.restored:
        line += "  (kept from an earlier attempt)"
    if agent.reason:
        line += f"  ({agent.reason})"
    if agent.compactions:
        line += f"  compacted {plural(agent.compactions, 'time')}"
    if agent.note is not None:
        # As JSON, like the data: the note is the model's text, and may not break the line.
        shown = json.dumps(agent.note)
        shown = shown if len(shown) <= DATA_SHOWN else shown[: DATA_SHOWN - 3] + "..."
        files = ""
        if agent.note_files:
            earlier = agent.files_changed - len(agent.note_files)
            more = f", and {earlier:,} earlier" if earlier > 0 else ""
            files = f" (files changed: {json.dumps(agent.note_files)}{more})"
        line += f"\n{'  ' * (depth + 1)}note: {shown}{files}"
    if agent.data is not None:
        # ASCII JSON: a trace is read as untrusted, and no character of it may break the line.
        shown = json.dumps(agent.data)
        shown = shown if len(shown) <= DATA_SHOWN else shown[: DATA_SHOWN - 3] + "..."
        line += f"\n{'  ' * (depth + 1)}data: {shown}"
    return line


def _cache_text(read: int, written: int) -> str:
    if not (read or written):
        return ""
    parts = [f"{read:,} cached"] + ([f"{written:,} written to cache"] if written else [])
    return f" ({', '.join(parts)})"


def _dollars(cost: float) -> str:
    return f"${cost:.4f}" if cost < 100 else f"${cost:,.2f}"
