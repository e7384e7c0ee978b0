"""What runs a task: the `TaskExecutor` interface, and a run on a remote executor.

The scheduler hands an executor a `TaskRequest` and gets a `TaskResult` back; an executor never
raises for a task's own failure. `LocalExecutor` (scheduler.py) runs each task as an agent loop
in this process; other executors (another process, a cluster) only have to keep the same
interface.
"""

from __future__ import annotations

import os
import socket
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Protocol

from ..agent import AgentLoop, TaskResult, TokenBudget, ToolContext
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
        self, origin: TaskOrigin, build: Callable[[TaskRequest], AgentLoop[Any]]
    ) -> TaskExecutor: ...

    async def __aenter__(self) -> RemoteSession: ...

    async def __aexit__(self, *exc: object) -> None: ...


# The executor of a fork's tasks, from the forking agent's context, the `context: fork` skill
# it runs (if any) and how the driver builds a task's agent (for the budget check).
RemoteForks = Callable[
    [ToolContext, SkillInfo | None, Callable[[TaskRequest], AgentLoop[Any]]], TaskExecutor
]
