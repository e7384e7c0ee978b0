"""Sub-agents that run elsewhere: a definition with `remote` is an A2A agent (docs/a2a.md).

`with_remote_agents` wraps the executor of a fork (or of a job's steps): a task whose agent
is remote goes to the protocol that serves it (A2A, the optional `orchestrator.a2a`, found
through `REMOTE_AGENTS` the first time such a task runs: without the `[a2a]` extra the task
ends `error`, saying so); every other task goes to the executor it wraps. A remote agent's
`max_calls` caps the tasks one run sends it, its whole tree counted together; its
`time_limit` is kept by the A2A client.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field

from ..agent import TaskResult, ToolContext
from ..parts import MissingPart, Slot
from .executor import TaskExecutor
from .subagents import RemoteAgent, SubagentRegistry
from .task import TaskRequest

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
    sub-agents it runs (`_RUN_CALLS`), so that their forks count in it too."""

    sent: dict[str, int] = field(default_factory=dict)


_RUN_CALLS: ContextVar[RemoteCalls | None] = ContextVar("remote_calls", default=None)
"""The run's count, while one of its sub-agents runs (asyncio tasks inherit it)."""


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
        sent = self.calls.sent.get(agent, 0)
        if remote.max_calls is not None and sent >= remote.max_calls:
            return f"remote agent {agent!r} was sent {sent} tasks, its cap for one run (max_calls)"
        return None

    def placement(self, request: TaskRequest) -> dict[str, object]:
        remote = self.remote_of(request)
        if remote is None:
            return self.inner.placement(request)
        return {"executor": "a2a", "worker": remote.url}

    async def run_task(self, request: TaskRequest) -> TaskResult:
        remote = self.remote_of(request)
        if remote is None:
            lent = _RUN_CALLS.set(self.calls)
            try:
                return await self.inner.run_task(request)
            finally:
                _RUN_CALLS.reset(lent)
        # Checked again as the task starts: siblings that passed the gate together count here.
        refusal = self._over_cap(request.agent, remote)
        if refusal is not None:
            return self._refused(request, refusal)
        sent = self.calls.sent
        sent[request.agent] = sent.get(request.agent, 0) + 1
        try:
            send = REMOTE_AGENTS.get("a2a")
        except MissingPart as exc:
            return self._refused(
                request, f"remote agent {request.agent!r} cannot be reached: {exc}"
            )
        return await send(request, remote, self.context)

    def _refused(self, request: TaskRequest, reason: str) -> TaskResult:
        return TaskResult(
            id=request.spec.id,
            agent=request.agent,
            path=request.path,
            depends_on=request.spec.depends_on,
            status="error",
            reason=reason,
        )


def with_remote_agents(
    executor: TaskExecutor, subagents: SubagentRegistry, context: ToolContext
) -> TaskExecutor:
    """`executor`, or, when some definition is remote, one that sends those tasks there."""
    if not any(definition.remote is not None for definition in subagents):
        return executor
    return RemoteAgentsExecutor(executor, subagents, context)
