"""A readable summary of a finished (or interrupted) run, from its trace alone.

Used by `orchestrator trace show`: the DAG of agents with their statuses and dependencies,
tokens and steps per agent, the skills each loaded, and every error.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from .writer import Event


@dataclass
class AgentSummary:
    """One agent of the run, as the trace tells it."""

    path: str
    status: str = "not started"
    steps: int = 0
    tokens: int = 0
    depends_on: list[str] = field(default_factory=list)
    reason: str | None = None
    started: float | None = None
    ended: float | None = None
    skills: list[str] = field(default_factory=list)

    @property
    def seconds(self) -> float | None:
        if self.started is None or self.ended is None:
            return None
        return self.ended - self.started


@dataclass
class RunSummary:
    """Everything `trace show` prints."""

    job: str | None = None
    job_status: str | None = None
    agents: dict[str, AgentSummary] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def agent(self, path: str) -> AgentSummary:
        if path not in self.agents:
            self.agents[path] = AgentSummary(path)
        return self.agents[path]

    @property
    def total_tokens(self) -> int:
        return sum(a.tokens for a in self.agents.values())


def summarize(events: Iterable[Event]) -> RunSummary:
    """Fold a trace's events into a summary."""
    summary = RunSummary()
    for event in events:
        _fold(summary, event)
    return summary


def _fold(summary: RunSummary, event: Event) -> None:
    handler = _HANDLERS.get(event["type"])
    if handler is not None:
        handler(summary, event)


def _job_start(summary: RunSummary, event: Event) -> None:
    summary.job = event.get("name")


def _job_end(summary: RunSummary, event: Event) -> None:
    summary.job_status = event.get("status")


def _fork(summary: RunSummary, event: Event) -> None:
    for task in event["tasks"]:
        summary.agent(task["path"]).depends_on = list(task["depends_on"])


def _run_start(summary: RunSummary, event: Event) -> None:
    agent = summary.agent(event["agent"])
    agent.status, agent.started = "running", event["ts"]


def _model_call(summary: RunSummary, event: Event) -> None:
    agent = summary.agent(event["agent"])
    agent.steps = event["step"]
    agent.tokens += event["usage"]["total_tokens"]


def _task_end(summary: RunSummary, event: Event) -> None:
    if event["status"] == "skipped":
        agent = summary.agent(event["agent"])
        agent.status, agent.reason = "skipped", event.get("reason")


def _skill_loaded(summary: RunSummary, event: Event) -> None:
    summary.agent(event["agent"]).skills.append(event["skill"])


def _message(summary: RunSummary, event: Event) -> None:
    message = event["message"]
    if message.get("role") == "tool" and message.get("is_error"):
        first_line = (message.get("content") or "").strip().splitlines()[:1]
        text = first_line[0] if first_line else ""
        kind = message.get("error_type") or "error"
        summary.errors.append(f"{event['agent']}: {message.get('name')} [{kind}] {text}")


def _run_end(summary: RunSummary, event: Event) -> None:
    agent = summary.agent(event["agent"])
    agent.status, agent.ended = event["status"], event["ts"]
    if event.get("error"):
        agent.reason = event["error"]
        summary.errors.append(f"{agent.path}: run ended {event['status']}: {event['error']}")


_HANDLERS: dict[str, Callable[[RunSummary, Event], None]] = {
    "job_start": _job_start,
    "job_end": _job_end,
    "fork": _fork,
    "run_start": _run_start,
    "model_call": _model_call,
    "task_end": _task_end,
    "skill_loaded": _skill_loaded,
    "message": _message,
    "run_end": _run_end,
}


def render(summary: RunSummary) -> str:
    """The summary as plain text."""
    lines = []
    if summary.job:
        lines.append(f"job {summary.job}: {summary.job_status or 'did not finish'}")
    lines.append(f"{len(summary.agents)} agents, {summary.total_tokens:,} tokens")
    lines.append("")
    for path, agent in summary.agents.items():
        depth = path.count("/")
        line = f"{'  ' * depth}{path.rsplit('/', 1)[-1]}  [{agent.status}]"
        if agent.status != "skipped":
            line += f"  steps {agent.steps}  tokens {agent.tokens:,}"
        if agent.seconds is not None:
            line += f"  {agent.seconds:.2f}s"
        if agent.depends_on:
            line += f"  after {', '.join(agent.depends_on)}"
        if agent.skills:
            line += f"  skills: {', '.join(agent.skills)}"
        if agent.reason:
            line += f"  ({agent.reason})"
        lines.append(line)
    lines.append("")
    if summary.errors:
        lines.append(f"{len(summary.errors)} errors:")
        lines.extend(f"  {error}" for error in summary.errors)
    else:
        lines.append("no errors")
    return "\n".join(lines)
