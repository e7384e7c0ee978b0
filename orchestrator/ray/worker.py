"""A Ray worker: an async actor hosting many agent loops at once (agents mostly wait).

A worker gets the run's `WorkerRecipe` once, when it starts, and builds each task's agent
itself from the request and the task's origin: live objects (models, connections, the skill
catalog, the trace) never cross the wire, only what rebuilds them (a job spec, model
settings, folders; see docs/ray.md). Its agents draw from the cluster budget through one
`LeasedBudget` and write to one `RelayTrace`. Forks that its agents make run here, in the same
worker, on the same budget and trace.
"""

from __future__ import annotations

import asyncio
import os
import socket
from pathlib import Path
from typing import Any

from ..agent import TaskResult
from ..skills.servers import server_scope
from ..tasks.executor import TaskOrigin, TaskRequest, counting_calls
from ..tasks.scheduler import run_agent_task
from ..trace import Checkpoint, NullTrace, Trace
from .budget import LeasedBudget
from .calls import ClusterCalls
from .recipe import WorkerRecipe
from .relay import Batch, RelayTrace


class TaskWorker:
    """Runs tasks as agent loops in this worker process, many at once."""

    def __init__(
        self,
        label: str,
        recipe: WorkerRecipe,
        host: Any,
        relay: Any,
        calls: Any,
        run_id: str,
        checkpoint: Checkpoint | None,
        cwd: str,
        lease_tokens: int,
    ) -> None:
        if Path(cwd).is_dir():  # on the driver's machine: relative paths mean what they did there
            os.chdir(cwd)
        self.name = f"{label}@{socket.gethostname()}:{os.getpid()}"
        self.recipe = recipe
        self.budget = LeasedBudget(host, self.name, lease_tokens=lease_tokens)
        # A run that records nothing has no relay: its agents get the null trace.
        self.trace: Trace = (
            RelayTrace(relay, self.name, run_id, checkpoint) if relay else NullTrace()
        )
        self.checkpoint = checkpoint
        """The run this one resumes: a task's agent cut off there goes on from its history."""
        self.calls = ClusterCalls(calls)
        """The run's count of tasks sent to remote agents, which every process shares."""
        self._flusher: asyncio.Task[None] | None = None
        self._running = 0

    def where(self) -> dict[str, Any]:
        """Which worker this is: its name (`label@host:pid`) and process id. The run's
        orchestrator is made now, before the first task waits for it."""
        self.recipe.orchestrator()
        return {"worker": self.name, "pid": os.getpid()}

    async def run(
        self, request: TaskRequest, origin: TaskOrigin
    ) -> tuple[TaskResult, Batch | None]:
        """Run one task to its end; its result comes back with the events not sent yet."""
        if isinstance(self.trace, RelayTrace) and self._flusher is None:
            self._flusher = asyncio.create_task(self.trace.keep_flushing())
        self._running += 1
        try:
            history = self.checkpoint.history(request.path) if self.checkpoint else None
            with counting_calls(self.calls):
                # The task's MCP servers (skills it starts with included) live in a pool of
                # its own, opened before its agent is built and closed, servers and all, at
                # its end.
                async with server_scope(self._environment()):
                    result = await run_agent_task(
                        request,
                        lambda: self.recipe.build(request, origin, self.budget, self.trace),
                        history=history,
                    )
        finally:
            self._running -= 1
            if not self._running:  # idle: what it holds of the budget goes back to the host
                self.budget.flush()
        return result, self.trace.take() if isinstance(self.trace, RelayTrace) else None

    def _environment(self) -> dict[str, str]:
        """The run's variables in this process: what its MCP servers' settings expand from."""
        return self.recipe.orchestrator().environ

    async def flush(self) -> None:
        """Report what this worker spent to the budget, give back the rest of its lease, and
        send the events not sent yet."""
        self.budget.flush()
        if isinstance(self.trace, RelayTrace):
            await self.trace.relay.push.remote(self.name, self.trace.take())
