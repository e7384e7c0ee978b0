"""Background forks: task graphs that run beside the agent that started them.

`fork(tasks, wait=false)` starts a graph and returns at once; the agent goes on with its own
turns. `Background` is what one run keeps of such graphs: each task's state, what its agent
has spent so far (a meter: an uncapped budget inside the run's, so it draws from the same
one), whether its result has reached the agent yet, and the spans of time the agent spent
waiting for them. A task's *overlap* is how long it ran while its agent did its own work: its
running time less the time the agent spent waiting (`wait_tasks`, or before its run ended).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from ..agent import TaskResult, TokenBudget
from .executor import TaskSpec
from .scheduler import GraphRun


@dataclass
class BackgroundTask:
    """One task of a background graph, as its agent sees it."""

    spec: TaskSpec
    path: str
    graph: GraphRun
    meter: TokenBudget
    ended: asyncio.Future[TaskResult]
    started_at: float | None = None
    delivered: bool = False

    @property
    def result(self) -> TaskResult | None:
        return self.ended.result() if self.ended.done() else None

    @property
    def state(self) -> str:
        """`waiting`, `running`, or how it ended."""
        result = self.result
        if result is not None:
            return result.status
        return "running" if self.started_at is not None else "waiting"


@dataclass
class Background:
    """A run's background graphs and their tasks, in the order they were started."""

    tasks: dict[str, BackgroundTask] = field(default_factory=dict)
    runners: list[asyncio.Task[list[TaskResult]]] = field(default_factory=list)
    waits: list[tuple[float, float | None]] = field(default_factory=list)

    def add(self, graph: GraphRun, spec: TaskSpec, meter: TokenBudget) -> None:
        future: asyncio.Future[TaskResult] = asyncio.get_running_loop().create_future()
        self.tasks[spec.id] = BackgroundTask(spec, graph.path_of(spec), graph, meter, future)

    def start(self, graph: GraphRun) -> None:
        """Record the graph (its `fork` event) and run it beside the agent."""
        graph.announce()
        self.runners.append(asyncio.create_task(graph.run(), name=f"background:{graph.parent}"))

    def ended(self, result: TaskResult) -> None:
        """A task's result is in (the graph's `on_result`)."""
        task = self.tasks.get(result.id)
        if task is not None and not task.ended.done():
            task.ended.set_result(result)

    def unfinished(self, ids: Sequence[str] | None = None) -> list[str]:
        chosen = self.tasks if ids is None else ids
        return [i for i in chosen if i in self.tasks and not self.tasks[i].ended.done()]

    def with_dependents(self, ids: Sequence[str]) -> list[str]:
        """`ids` and every unfinished task that waits on one of them, in the order given."""
        chosen = set(ids)
        grew = True
        while grew:
            grew = False
            for task_id in self.unfinished():
                depends = self.tasks[task_id].spec.depends_on
                if task_id not in chosen and chosen.intersection(depends):
                    chosen.add(task_id)
                    grew = True
        return [i for i in self.tasks if i in chosen]

    def undelivered(self) -> list[TaskResult]:
        """Results that are in and have not reached the agent, in the order given."""
        return [t.result for t in self.tasks.values() if t.result is not None and not t.delivered]

    def mark_delivered(self, results: Sequence[TaskResult]) -> None:
        for result in results:
            if result.id in self.tasks:
                self.tasks[result.id].delivered = True

    async def wait(self, ids: Sequence[str], seconds: float | None) -> None:
        """Wait until the tasks `ids` have ended, or `seconds` have passed (None: no limit); waiting
        (and being cancelled while waiting) never cancels them."""
        pending = [self.tasks[i].ended for i in self.unfinished(ids)]
        if pending:
            with self.waiting():
                await asyncio.wait(pending, timeout=seconds)

    async def cancel(self, ids: Sequence[str], reason: str) -> list[TaskResult]:
        """End the tasks `ids` that have not ended (with `reason`) and wait for their records."""
        unfinished = self.unfinished(ids)
        graphs: dict[int, GraphRun] = {}
        for task_id in unfinished:
            graph = self.tasks[task_id].graph
            graphs[id(graph)] = graph
        for graph in graphs.values():
            graph.cancel([i for i in unfinished if self.tasks[i].graph is graph], reason)
        if unfinished:
            await asyncio.wait([self.tasks[i].ended for i in unfinished])
        return [r for i in ids if i in self.tasks and (r := self.tasks[i].result) is not None]

    async def close(self) -> None:
        """Wait for the graphs' own tasks once every task has ended."""
        if self.runners:
            await asyncio.gather(*self.runners, return_exceptions=True)

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """The agent waits for its background tasks within the block."""
        index = len(self.waits)
        self.waits.append((time.time(), None))
        try:
            yield
        finally:
            self.waits[index] = (self.waits[index][0], time.time())

    def overlap(self, result: TaskResult) -> float | None:
        """Seconds the task ran while its agent did its own work; None if it never ran."""
        if result.started_at is None or result.ended_at is None:
            return None
        start, end = result.started_at, result.ended_at
        waited = 0.0
        for began, stopped in self.waits:
            waited += max(0.0, min(end, stopped or end) - max(start, began))
        return max(0.0, end - start - waited)
