"""A readable summary of a finished (or interrupted) run, from its trace alone.

Used by `orchestrator trace show`: the DAG of agents with their statuses and dependencies,
tokens and steps per agent, the skills each loaded, and every error.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field

from .trace import Event


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
    kind, path = event["type"], event["agent"]
    if kind == "job_start":
        summary.job = event.get("name")
    elif kind == "job_end":
        summary.job_status = event.get("status")
    elif kind == "fork":
        prefix = "" if path == "job" else f"{path}/"
        for task in event["tasks"]:
            summary.agent(f"{prefix}{task['id']}").depends_on = list(task["depends_on"])
    elif kind == "run_start":
        agent = summary.agent(path)
        agent.status, agent.started = "running", event["ts"]
    elif kind == "model_call":
        agent = summary.agent(path)
        agent.steps = event["step"]
        agent.tokens += event["usage"]["total_tokens"]
    elif kind == "run_end":
        _fold_end(summary, summary.agent(path), event)
    elif kind == "task_end" and event["status"] == "skipped":
        agent = summary.agent(path)
        agent.status, agent.reason = "skipped", event.get("reason")
    elif kind == "message":
        _fold_message(summary, summary.agent(path), event["message"])


def _fold_end(summary: RunSummary, agent: AgentSummary, event: Event) -> None:
    agent.status, agent.ended = event["status"], event["ts"]
    if event.get("error"):
        agent.reason = event["error"]
        summary.errors.append(f"{agent.path}: run ended {event['status']}: {event['error']}")


def _fold_message(summary: RunSummary, agent: AgentSummary, message: dict) -> None:
    for call in message.get("tool_calls") or ():
        if call["name"] == "load_skill":
            name = _argument(call.get("arguments", ""), "name")
            if name and name not in agent.skills:
                agent.skills.append(name)
    if message.get("role") == "tool" and message.get("is_error"):
        first_line = (message.get("content") or "").strip().splitlines()[:1]
        text = first_line[0] if first_line else ""
        kind = message.get("error_type") or "error"
        summary.errors.append(f"{agent.path}: {message.get('name')} [{kind}] {text}")


def _argument(raw: str, key: str) -> str | None:
    try:
        value = json.loads(raw).get(key)
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


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
