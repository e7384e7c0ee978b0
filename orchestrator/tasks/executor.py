"""A task and what runs it: the task as plain serializable models, the `TaskExecutor`
interface, a run on a remote executor, and the executor of remote sub-agents.

`TaskSpec` is a task as the model (or the job spec) writes it; `TaskRequest` is everything an
executor needs to run it once its dependencies are done. Results are `TaskResult`
(agent/run_results.py). None of them holds a live object, so a task can run in another process.

The scheduler hands an executor a `TaskRequest` and gets a `TaskResult` back; an executor never
raises for a task's own failure. `LocalExecutor` (scheduler.py) runs each task as an agent loop
in this process; other executors (another process, a cluster) only have to keep the same
interface.

Sub-agents that run elsewhere: a definition with `remote` is an A2A agent (docs/a2a.md).
`with_remote_agents` wraps the executor of a fork (or of a job's steps): a task whose agent
is remote goes to the protocol that serves it (A2A, the optional `orchestrator.a2a`, found
through `REMOTE_AGENTS` the first time such a task runs: without the `[a2a]` extra the task
ends `error`, saying so); every other task goes to the executor it wraps. A remote agent's
`max_calls` caps the tasks one run sends it, its whole tree counted together; its
`time_limit` is kept by the A2A client.
"""

from __future__ import annotations

import os
import socket
import time
import warnings
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal, NamedTuple, Protocol, get_args

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from ..agent import AgentLoop, TaskResult, TaskStatus, TokenBudget, ToolContext
from ..models.base import OutputMode
from ..parts import MissingPart, Slot
from ..skills import SkillInfo
from .subagents import RemoteAgent, SubagentRegistry

if TYPE_CHECKING:
    from ..trace import AgentHistory

# --- A task, as plain models --------------------------------------------------------------


TASK_ID = r"^[A-Za-z0-9_-]{1,48}$"


class TaskSpec(BaseModel):
    """One task of a fork, as the model writes it."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=TASK_ID, description="A short unique id, e.g. 'load' or 'review-2'.")
    task: str = Field(min_length=1, description="What to do: a complete, self-contained brief.")
    agent: str | None = Field(
        default=None, description="Which sub-agent runs it; the general one if left out."
    )
    depends_on: list[str] = Field(
        default_factory=list, description="Ids of tasks whose results this one needs."
    )
    skills: list[str] | None = Field(
        default=None, description="Limit the task to these skills (within what its agent allows)."
    )
    # Sent in every fork tool's schema: kept to one short line, the null branch left out.
    output_schema: Annotated[
        dict[str, Any] | None,
        WithJsonSchema({"type": "object", "description": "JSON Schema its answer must follow."}),
    ] = None
    # How its answer is asked for, and how many invalid ones go back (agent/output.py): the
    # names say it, so no description is sent.
    output_mode: Annotated[
        OutputMode | None, WithJsonSchema({"enum": list(get_args(OutputMode))})
    ] = None
    output_retries: Annotated[int | None, Field(ge=0), WithJsonSchema({"type": "integer"})] = None


class TaskRequest(BaseModel):
    """Everything needed to run one task, once its dependencies are done."""

    spec: TaskSpec
    agent: str
    path: str
    prompt: str
    depth: int

    def ended(
        self, status: TaskStatus, reason: str, *, started_at: float | None = None
    ) -> TaskResult:
        """This task's result when it ended (or never started) without a run to report."""
        return TaskResult(
            id=self.spec.id,
            agent=self.agent,
            path=self.path,
            depends_on=self.spec.depends_on,
            status=status,
            reason=reason,
            started_at=started_at,
            ended_at=time.time(),
        )


class TaskOrigin(BaseModel):
    """Who started a task, as another process needs it to build the task's agent itself.

    `step`: a job step. `fork`: a task forked by the agent at `parent`, whose model is the run's
    own (`model` None) or the one with these settings (`model`, a `ModelSettings` as JSON),
    running the `context: fork` skill `running`, if any.
    """

    kind: Literal["step", "fork"] = "step"
    parent: str = "job"
    model: str | None = None
    running: str | None = None


# --- What runs a task ---------------------------------------------------------------------


class Placement(NamedTuple):
    """Where a task runs, as its `task_start` says: `local`, `ray` or `a2a`, and on what."""

    executor: str
    worker: str
    """This host and process (`host:pid`), a Ray worker's name, or a remote agent's URL."""


HERE = Placement("local", f"{socket.gethostname()}:{os.getpid()}")


class TaskExecutor(ABC):
    """Runs one task to its end and reports how it went (never raises for task failures).

    An executor of one's own subclasses it. It may also say where a task will run
    (`placement`: the fields its `task_start` gets, `executor` and `worker`) and refuse a task
    its budget cannot cover before it starts (`budget_refusal`).

    A resumed run wraps its executors in one restoring layer (`Restoring`, tasks/restore.py):
    it answers `ended_before` from the trace, and hands a task whose agent was cut off its
    history through `resume_task`.
    """

    @abstractmethod
    async def run_task(self, request: TaskRequest) -> TaskResult: ...

    async def resume_task(self, request: TaskRequest, history: AgentHistory) -> TaskResult:
        """Run `request`'s agent on from `history`, its cut-off run's. An executor whose
        agents cannot be handed a history runs the task anew, and warns."""
        warnings.warn(
            f"{type(self).__name__} cannot resume the agent at {request.path}: its task "
            "runs again from the start",
            stacklevel=2,
        )
        return await self.run_task(request)

    def ended_before(self, spec: TaskSpec, path: str, agent: str) -> TaskResult | None:
        """The result an earlier attempt of the run recorded for the task at `path`, when it
        ended there (it does not run again); None for a task to run."""
        return None

    def placement(self, request: TaskRequest) -> Placement:
        """Where `request` runs: this process, unless the executor says otherwise."""
        return HERE

    def budget_refusal(self, request: TaskRequest) -> str | None:
        """Why the budget cannot cover `request`, before it starts; None when it can."""
        return None


class RemoteSession(Protocol):
    """One run on a remote executor (a cluster, `orchestrator.ray`): the budget its agents
    draw from there, and the executor of its tasks of one origin."""

    # Read only: a session may hold a budget of its own kind (Ray's `LeasedBudget`).
    @property
    def budget(self) -> TokenBudget: ...

    def executor(
        self, origin: TaskOrigin, build: Callable[[TaskRequest], AgentLoop[Any, Any]]
    ) -> TaskExecutor: ...

    async def __aenter__(self) -> RemoteSession: ...

    async def __aexit__(self, *exc: object) -> None: ...


# The executor of a fork's tasks, from the forking agent's context, the `context: fork` skill
# it runs (if any) and how the driver builds a task's agent (for the budget check).
RemoteForks = Callable[
    [ToolContext, SkillInfo | None, Callable[[TaskRequest], AgentLoop[Any, Any]]], TaskExecutor
]


# --- Remote sub-agents: their tasks sent through their protocol ---------------------------


SendTask = Callable[[TaskRequest, RemoteAgent, ToolContext], Awaitable[TaskResult]]
"""Sends one task to a remote agent and waits for its result (the optional
`orchestrator.a2a`: `run_remote_task`)."""
REMOTE_AGENTS: Slot[SendTask] = Slot("remote agent protocol", "orchestrator.remote_agents")
"""Remote agents' protocols by name (`a2a`): the optional parts declare theirs
(orchestrator/parts.py)."""


@dataclass
class RemoteCalls:
    """How many tasks a run has sent each remote agent: one count for the run's whole tree,
    kept by the agent that forked first (`ctx.state_of(RemoteCalls)`) and lent to the
    sub-agents it runs (`counting_calls`), so that their forks count in it too. A run whose
    tasks go to other processes lends them one count kept where they all reach it (the
    Ray workers: ray/calls.py)."""

    sent: dict[str, int] = field(default_factory=dict)

    def count(self, agent: str) -> int:
        """How many tasks the run has sent `agent` (as last known, for the check before a
        task starts; `take` decides)."""
        return self.sent.get(agent, 0)

    async def take(self, agent: str, cap: int | None) -> bool:
        """Count one more task sent to `agent`, unless the run has sent it `cap` already."""
        return self.take_here(agent, cap)

    def take_here(self, agent: str, cap: int | None) -> bool:
        """`take`, on the count this object holds."""
        sent = self.sent.get(agent, 0)
        if cap is not None and sent >= cap:
            return False
        self.sent[agent] = sent + 1
        return True


_RUN_CALLS: ContextVar[RemoteCalls | None] = ContextVar("remote_calls", default=None)
"""The run's count, while one of its sub-agents runs (asyncio tasks inherit it)."""


@contextmanager
def counting_calls(calls: RemoteCalls) -> Iterator[None]:
    """While the block runs, the tasks it sends remote agents count in `calls`."""
    lent = _RUN_CALLS.set(calls)
    try:
        yield
    finally:
        _RUN_CALLS.reset(lent)


class RemoteAgentsExecutor(TaskExecutor):
    """Runs remote agents' tasks through their protocol, the others through `inner`."""

    def __init__(
        self, inner: TaskExecutor, subagents: SubagentRegistry, context: ToolContext
    ) -> None:
        self.inner = inner
        self.subagents = subagents
        self.context = context
        self.calls = _RUN_CALLS.get() or context.state_of(RemoteCalls)

    def remote_of(self, request: TaskRequest) -> RemoteAgent | None:
        definition = self.subagents.get(request.agent)
        return definition.remote if definition is not None else None

    def budget_refusal(self, request: TaskRequest) -> str | None:
        remote = self.remote_of(request)
        if remote is None:
            return self.inner.budget_refusal(request)
        remaining = self.context.budget.remaining if self.context.budget is not None else None
        if remaining is not None and remaining <= 0:
            return f"budget: no tokens left for remote agent {request.agent!r}"
        return self._over_cap(request.agent, remote)

    def _over_cap(self, agent: str, remote: RemoteAgent) -> str | None:
        sent = self.calls.count(agent)
        if remote.max_calls is not None and sent >= remote.max_calls:
            return _capped(agent, sent)
        return None

    def placement(self, request: TaskRequest) -> Placement:
        remote = self.remote_of(request)
        if remote is None:
            return self.inner.placement(request)
        return Placement("a2a", remote.url)

    async def resume_task(self, request: TaskRequest, history: AgentHistory) -> TaskResult:
        if self.remote_of(request) is not None:
            return await self.run_task(request)  # the protocol resumes its own (a2a/client.py)
        with counting_calls(self.calls):
            return await self.inner.resume_task(request, history)

    async def run_task(self, request: TaskRequest) -> TaskResult:
        remote = self.remote_of(request)
        if remote is None:
            with counting_calls(self.calls):
                return await self.inner.run_task(request)
        # Taken as the task starts: siblings that passed the gate together count here.
        if not await self.calls.take(request.agent, remote.max_calls):
            return request.ended("error", _capped(request.agent, self.calls.count(request.agent)))
        try:
            send = REMOTE_AGENTS.get("a2a")
        except MissingPart as exc:
            return request.ended(
                "error", f"remote agent {request.agent!r} cannot be reached: {exc}"
            )
        return await send(request, remote, self.context)


def _capped(agent: str, sent: int) -> str:
    return f"remote agent {agent!r} was sent {sent} tasks, its cap for one run (max_calls)"


def with_remote_agents(
    executor: TaskExecutor, subagents: SubagentRegistry, context: ToolContext
) -> TaskExecutor:
    """`executor`, or, when some definition is remote, one that sends those tasks there."""
    if not any(definition.remote is not None for definition in subagents):
        return executor
    return RemoteAgentsExecutor(executor, subagents, context)
