"""Running a validated task graph: each task waits for its dependencies, then runs.

Ready tasks run concurrently up to `max_parallel`. A task whose dependency ended in any status
other than `completed` is skipped with the reason; independent tasks go on. Running one task is
behind the small `TaskExecutor` interface (executor.py), so tasks could run elsewhere.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

import networkx as nx

from ..agent import TaskResult
from ..trace import Trace
from .executor import TaskExecutor
from .graph import build_graph
from .slots import Slots
from .task import TaskRequest, TaskSpec

PromptBuilder = Callable[[TaskSpec, Sequence[TaskResult]], str]
Gate = Callable[[TaskRequest], str | None]


def task_graph(specs: Sequence[TaskSpec]) -> nx.DiGraph:
    """Validate the tasks as a DAG (unique ids, known dependencies, no cycles)."""
    return build_graph(((s.id, s.depends_on) for s in specs), noun="task")


class GraphRun:
    """One run of a task graph: schedules, records in the trace, collects results.

    Each task's agent path is `<parent>/<id>`, or just `<id>` when `parent` is empty (the
    steps of a job).
    """

    def __init__(
        self,
        specs: Sequence[TaskSpec],
        executor: TaskExecutor,
        *,
        parent: str,
        depth: int,
        agent_of: Callable[[TaskSpec], str],
        prompt_for: PromptBuilder,
        gate: Gate | None = None,
        max_parallel: int = 4,
        trace: Trace | None = None,
    ) -> None:
        self.specs = list(specs)
        self.executor = executor
        self.parent = parent
        self.depth = depth
        self.agent_of = agent_of
        self.prompt_for = prompt_for
        self.gate = gate
        self.trace = trace
        self._slots = Slots.for_graph(max_parallel)
        self._tasks: dict[str, asyncio.Task[TaskResult]] = {}

    async def run(self) -> list[TaskResult]:
        """Run every task; results come back in the order the tasks were given."""
        if self.trace is not None:
            self.trace.emit(
                "fork",
                self.parent or "job",
                tasks=[
                    {
                        "id": s.id,
                        "path": self._path(s),
                        "agent": self.agent_of(s),
                        "depends_on": s.depends_on,
                    }
                    for s in self.specs
                ],
            )
        async with asyncio.TaskGroup() as group:
            for spec in self.specs:
                self._tasks[spec.id] = group.create_task(self._run_node(spec))
        return [self._tasks[s.id].result() for s in self.specs]

    async def _run_node(self, spec: TaskSpec) -> TaskResult:
        dependencies = [await self._tasks[d] for d in spec.depends_on]
        failed = next((d for d in dependencies if d.status != "completed"), None)
        if failed is not None:
            reason = f"dependency {failed.id!r} ended {failed.status}"
            return self._skipped(spec, reason)
        async with self._slots.hold():
            request = TaskRequest(
                spec=spec,
                agent=self.agent_of(spec),
                path=self._path(spec),
                prompt=self.prompt_for(spec, dependencies),
                depth=self.depth,
            )
            try:
                refusal = self.gate(request) if self.gate else None
                if refusal is not None:
                    return self._skipped(spec, refusal)
                self._emit("task_start", request.path, id=spec.id, depends_on=spec.depends_on)
                result = await self.executor.run_task(request)
            except Exception as exc:
                # One task's failure must not cancel its siblings: it becomes its result.
                result = self._failed(request, exc)
            self._emit(
                "task_end",
                request.path,
                id=spec.id,
                status=result.status,
                reason=result.reason,
                usage=result.usage.model_dump(),
            )
            return result

    def _path(self, spec: TaskSpec) -> str:
        return f"{self.parent}/{spec.id}" if self.parent else spec.id

    def _failed(self, request: TaskRequest, exc: Exception) -> TaskResult:
        return TaskResult(
            id=request.spec.id,
            agent=request.agent,
            path=request.path,
            status="error",
            reason=f"{type(exc).__name__}: {exc}",
            depends_on=request.spec.depends_on,
            ended_at=time.time(),
        )

    def _skipped(self, spec: TaskSpec, reason: str) -> TaskResult:
        path = self._path(spec)
        self._emit("task_end", path, id=spec.id, status="skipped", reason=reason)
        return TaskResult(
            id=spec.id,
            agent=self.agent_of(spec),
            path=path,
            status="skipped",
            reason=reason,
            depends_on=spec.depends_on,
            ended_at=time.time(),
        )

    def _emit(self, type: str, agent: str, **fields: object) -> None:
        if self.trace is not None:
            self.trace.emit(type, agent, **fields)
