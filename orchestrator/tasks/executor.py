"""Running one task: the `TaskExecutor` interface and the local executor behind it.

The scheduler hands an executor a `TaskRequest` and gets a `TaskResult` back; an executor never
raises for a task's own failure. `LocalExecutor` runs each task as an agent loop in this
process; other executors (another process, a cluster) only have to keep the same interface.

A task cancelled while it runs (the scheduler cancels its graph) returns its result with
status `cancelled`, its partial run and usage attached, rather than raising: the scheduler
records it, and re-raises the cancellation once every task of the graph has ended.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Protocol

from ..agent import AgentLoop, TaskResult, TokenBudget, ToolContext
from ..errors import ConfigError
from ..skills import SkillInfo
from .task import TaskOrigin, TaskRequest

HERE = {"executor": "local", "worker": f"{socket.gethostname()}:{os.getpid()}"}


class TaskExecutor(ABC):
    """Runs one task to its end and reports how it went (never raises for task failures).

    An executor of one's own subclasses it. It may also say where a task will run
    (`placement`: the fields its `task_start` gets, `executor` and `worker`) and refuse a task
    its budget cannot cover before it starts (`budget_refusal`).
    """

    @abstractmethod
    async def run_task(self, request: TaskRequest) -> TaskResult: ...

    def placement(self, request: TaskRequest) -> dict[str, object]:
        """Where `request` runs: this process, unless the executor says otherwise."""
        return dict(HERE)

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
        self, origin: TaskOrigin, build: Callable[[TaskRequest], AgentLoop]
    ) -> TaskExecutor: ...

    async def __aenter__(self) -> RemoteSession: ...

    async def __aexit__(self, *exc: object) -> None: ...


# The executor of a fork's tasks, from the forking agent's context, the `context: fork` skill
# it runs (if any) and how the driver builds a task's agent (for the budget check).
RemoteForks = Callable[
    [ToolContext, SkillInfo | None, Callable[[TaskRequest], AgentLoop]], TaskExecutor
]


async def run_agent_task(
    request: TaskRequest, build: Callable[[], AgentLoop], deps: object = None
) -> TaskResult:
    """Build the task's agent, run it on the task's prompt (with the run's `deps`), and
    report how it went.

    A task that cannot even start (its agent's model cannot be resolved, say) ends `error`;
    one cancelled while it runs ends `cancelled`, with what its agent had done.
    """
    base = TaskResult(
        id=request.spec.id,
        agent=request.agent,
        path=request.path,
        depends_on=request.spec.depends_on,
        status="error",
        started_at=time.time(),
    )
    try:
        agent = build()
        run = await agent.run(request.prompt, deps=deps)
    except (ConfigError, OSError) as exc:
        return base.model_copy(update={"reason": str(exc), "ended_at": time.time()})
    except asyncio.CancelledError:
        if agent.last_result is None:
            raise
        run = agent.last_result
    reason = run.error or (None if run.status == "completed" else f"ended {run.status}")
    return TaskResult(
        id=base.id,
        agent=base.agent,
        path=base.path,
        depends_on=base.depends_on,
        started_at=base.started_at,
        status=run.status,
        output=run.output,
        reason=reason,
        usage=run.total_usage,
        cost=run.total_cost,
        steps=run.steps,
        ended_at=time.time(),
        run=run,
    )


def budget_refusal(budget: TokenBudget | None, agent: AgentLoop, prompt: str) -> str | None:
    """Why a task cannot start within what is left of the budget, or None if it can."""
    remaining = budget.remaining if budget is not None else None
    if remaining is None:
        return None
    needed = agent.first_call_tokens(prompt)
    if remaining < needed:
        return f"budget: {remaining} tokens left, the first call needs {needed}"
    return None


class LocalExecutor(TaskExecutor):
    """Runs tasks as agent loops in this process; `build` makes a task's agent, and each
    runs with `deps`, the caller's object of the run that started them (`ToolContext.deps`).

    Each task's agent is built once, for the budget check before it starts and the run alike.
    """

    def __init__(
        self,
        build: Callable[[TaskRequest], AgentLoop],
        budget: TokenBudget | None,
        deps: object = None,
    ) -> None:
        self.build = build
        self.budget = budget
        self.deps = deps
        self._agents: dict[str, AgentLoop] = {}

    def agent_for(self, request: TaskRequest) -> AgentLoop:
        if request.path not in self._agents:
            self._agents[request.path] = self.build(request)
        return self._agents[request.path]

    def budget_refusal(self, request: TaskRequest) -> str | None:
        return budget_refusal(self.budget, self.agent_for(request), request.prompt)

    def forget(self, request: TaskRequest) -> None:
        """Drop the agent built for `request` (it will not run here)."""
        self._agents.pop(request.path, None)

    async def run_task(self, request: TaskRequest) -> TaskResult:
        return await run_agent_task(request, lambda: self.agent_for(request), self.deps)
