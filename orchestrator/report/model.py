"""What the report shows, as plain data folded from a trace (`collect.py` does the folding)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from ..trace.asked import Asked


@dataclass
class Bar:
    """One model call, tool call or compaction on the timeline."""

    kind: Literal["model", "tool", "compact"]
    label: str
    start: float
    end: float | None = None
    error: str | None = None
    tokens: int | None = None


@dataclass
class AgentRun:
    """One run of one agent. A run resumed in a later attempt goes on as the same run; a path
    that ran again in the same trace gets another run, keyed `path#2`, as
    `rebuild_conversations` keys it."""

    key: str
    path: str
    subagent: str | None = None
    model: str | None = None
    status: str = "running"
    reason: str | None = None
    started: float | None = None
    ended: float | None = None
    steps: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int | None = None
    cost: float | None = None
    skills: list[str] = field(default_factory=list)
    """The skills it loaded, those it started with loaded (`preloaded`) first."""
    preloaded: list[str] = field(default_factory=list)
    """The skills it started with loaded (its task, step or definition named them)."""
    compactions: int = 0
    """How many times its conversation was compacted to fit its model's context window."""
    bars: list[Bar] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    data: Any = None
    """The validated structured answer its run ended with (JSON values), if any."""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def depth(self) -> int:
        return self.path.count("/")

    @property
    def parent_path(self) -> str | None:
        parent = self.path.rpartition("/")[0]
        return parent or None


@dataclass
class Task:
    """A node of the task graph: a job step or a forked task, as its `fork` event gave it."""

    path: str
    id: str
    caller: str
    subagent: str | None = None
    depends_on: list[str] = field(default_factory=list)  # paths
    status: str | None = None  # from `task_end`, for a task that never ran (skipped)
    reason: str | None = None
    background: bool = False  # started by `fork(..., wait=false)`, beside its caller
    overlap: float | None = None  # seconds it ran while its caller did its own work


@dataclass
class ErrorItem:
    """Something that went wrong: a tool call's error result, a run that failed, a task that
    could not start."""

    agent: str  # the run's key
    kind: str
    where: str
    text: str
    ts: float


@dataclass
class RunReport:
    """A whole trace, ready to draw."""

    source: str = ""
    job: str | None = None
    job_status: str | None = None
    job_runs: int = 0
    run_id: str | None = None
    attempts: int = 1
    """How many attempts the run took: 1, or more once it was resumed (docs/resume.md)."""
    agents: dict[str, AgentRun] = field(default_factory=dict)
    tasks: dict[str, Task] = field(default_factory=dict)
    errors: list[ErrorItem] = field(default_factory=list)
    asked: Asked = field(default_factory=Asked)
    """What the run asked a person and what was answered (docs/waiting.md)."""
    sandboxes: list[str] = field(default_factory=list)
    """Where the run's commands ran, as its agents' `run_start` recorded it (each distinct
    one, in order); empty when it allowed none."""
    first_ts: float | None = None
    last_ts: float | None = None

    @property
    def duration(self) -> float:
        if self.first_ts is None or self.last_ts is None:
            return 0.0
        return self.last_ts - self.first_ts

    @property
    def total_tokens(self) -> int:
        return sum(a.total_tokens for a in self.agents.values())

    @property
    def total_cost(self) -> float | None:
        costs = [a.cost for a in self.agents.values() if a.cost is not None]
        return sum(costs) if costs else None

    @property
    def status(self) -> str:
        """The job's status, or for a run without one (no job, or it never ended) what its
        agents say."""
        if self.job_status:
            return self.job_status
        statuses = {a.status for a in self.agents.values()}
        if "cancelled" in statuses:
            return "cancelled"
        if "running" in statuses or "unfinished" in statuses or self.job:
            return "unfinished"
        roots = [a for a in self.agents.values() if a.parent_path is None]
        return roots[-1].status if roots else "unfinished"

    def latest_runs(self) -> dict[str, AgentRun]:
        """Each path's last run in the trace."""
        return {agent.path: agent for agent in self.agents.values()}

    def tree(self) -> list[AgentRun]:
        """Every run, parents before their sub-agents (depth first, in order of appearance)."""
        runs = self.latest_runs()
        children: dict[str | None, list[AgentRun]] = {}
        for agent in self.agents.values():
            parent = runs.get(agent.parent_path) if agent.parent_path else None
            children.setdefault(parent.key if parent else None, []).append(agent)
        ordered: list[AgentRun] = []
        stack = list(reversed(children.get(None, [])))
        while stack:
            agent = stack.pop()
            ordered.append(agent)
            stack.extend(reversed(children.get(agent.key, [])))
        return ordered

    def subtree_tokens(self) -> dict[str, int]:
        """Each run's tokens together with its sub-agents' (by run key)."""
        runs = self.latest_runs()
        totals = {key: agent.total_tokens for key, agent in self.agents.items()}
        for agent in sorted(self.agents.values(), key=lambda a: -a.depth):
            parent = runs.get(agent.parent_path) if agent.parent_path else None
            if parent is not None and parent.key != agent.key:
                totals[parent.key] += totals[agent.key]
        return totals
