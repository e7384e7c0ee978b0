"""A task graph: validated into a DAG, then run, each task waiting for its dependencies.

`build_graph` validates `(id, depends_on)` pairs into a networkx DAG, for the job spec's
`steps` and the `fork` meta-tool alike. Edges point from a dependency to the task that needs
it. Every problem is found in one pass and reported together (`GraphError`), each tied to the
position it came from so callers can name it in their own terms (`steps[1].depends_on[0]`,
`tasks[2].id`).

Ready tasks run concurrently up to `max_parallel`. A task whose dependency ended in any status
other than `completed` is skipped with the reason; independent tasks go on. Running one task is
behind the small `TaskExecutor` interface (executor.py), so tasks could run elsewhere; by default
`LocalExecutor` runs each as an agent loop in this process.

Every task gets a `task_end`, also when the graph is cancelled (Ctrl-C, a time limit): a task
that was running ends `cancelled` with what it had done, one that had not started is skipped.
Each result is handed to `on_result` as soon as its task ends. `cancel(ids, reason)` ends some
tasks of a running graph (a running one `cancelled`, a waiting one skipped) and lets the rest
go on; a `background` graph says so in its `fork` event and its `task_end`s, `on_start` lets
its owner follow each task, and `overlap` says how long one ran beside its caller's work. In a
resumed run, a task its executor says ran to an end in an earlier attempt (`ended_before`, the
restoring layer of restore.py) is not run again: its recorded result stands, and its
`task_end` says `restored`.

A task cancelled while it runs (the scheduler cancels its graph) returns its result with
status `cancelled`, its partial run and usage attached, rather than raising: the scheduler
records it, and re-raises the cancellation once every task of the graph has ended.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import networkx as nx

from ..agent import AgentLoop, RunCancelled, TaskResult, TokenBudget
from ..errors import ConfigError
from ..events import Fork, ForkTask, TaskEnd, TaskStart, TokenCounts
from ..messages import suggest
from ..trace import Trace
from .executor import TaskExecutor, TaskRequest, TaskSpec

if TYPE_CHECKING:
    from ..trace import AgentHistory

PromptBuilder = Callable[[TaskSpec, Sequence[TaskResult]], str]
Gate = Callable[[TaskRequest], str | None]
NOT_STARTED = "the run was cancelled before this task started"


# --- The graph: validated into a networkx DAG ------------------------------------------


@dataclass(frozen=True)
class GraphProblem:
    """One problem, at item `index` (and at `dependency`, a position in its depends_on)."""

    index: int
    dependency: int | None
    message: str

    def path(self, items: str) -> str:
        """Where the problem is, e.g. `steps[1].depends_on[0]` for `items="steps"`."""
        if self.dependency is None:
            return f"{items}[{self.index}].id"
        return f"{items}[{self.index}].depends_on[{self.dependency}]"


class GraphError(ConfigError):
    """The tasks do not form a valid DAG; `problems` lists every reason."""

    def __init__(self, problems: Sequence[GraphProblem]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(p.message for p in self.problems))


def build_graph(
    items: Iterable[tuple[str, Sequence[str]]], *, noun: str = "task"
) -> nx.DiGraph[str]:
    """Validate `(id, depends_on)` pairs and return their DAG, or raise GraphError.

    Nodes keep their position in `items` as the `index` attribute. `noun` names the items in
    messages ("step", "task").
    """
    pairs = [(node, list(deps)) for node, deps in items]
    problems = _duplicates(pairs, noun)
    first: dict[str, int] = {}
    for index, (node, _) in enumerate(pairs):
        first.setdefault(node, index)
    graph: nx.DiGraph[str] = nx.DiGraph()
    graph.add_nodes_from((node, {"index": index}) for node, index in first.items())
    for index, (node, deps) in enumerate(pairs):
        for position, dep in enumerate(deps):
            problem = _check_dependency(node, dep, first, noun)
            if problem:
                problems.append(GraphProblem(index, position, problem))
            else:
                graph.add_edge(dep, node)
    problems.extend(_cycles(graph, pairs, noun))
    if problems:
        raise GraphError(sorted(problems, key=_position))
    return graph


def _duplicates(pairs: list[tuple[str, list[str]]], noun: str) -> list[GraphProblem]:
    seen: set[str] = set()
    problems = []
    for index, (node, _) in enumerate(pairs):
        if node in seen:
            message = f"duplicate {noun} id {node!r}; ids must be unique"
            problems.append(GraphProblem(index, None, message))
        seen.add(node)
    return problems


def _check_dependency(node: str, dep: str, known: dict[str, int], noun: str) -> str | None:
    if dep == node:
        return f"{noun} {node!r} depends on itself"
    if dep not in known:
        return f"{noun} {node!r} depends on unknown {noun} {dep!r}{suggest(dep, known)}"
    return None


def _cycles(
    graph: nx.DiGraph[str], pairs: list[tuple[str, list[str]]], noun: str
) -> list[GraphProblem]:
    """One named cycle per strongly connected group, read in `depends on` direction."""
    if not graph.number_of_edges():  # no task depends on another (a plain fan-out)
        return []
    problems = []
    index_of = nx.get_node_attributes(graph, "index")
    depends_on = graph.reverse(copy=False)
    groups = [g for g in nx.strongly_connected_components(graph) if len(g) > 1]
    for group in sorted(groups, key=lambda g: min(index_of[n] for n in g)):
        start = min(group, key=index_of.__getitem__)
        deps = pairs[index_of[start]][1]
        position = next(i for i, dep in enumerate(deps) if dep in group)
        cycle = [start, *nx.shortest_path(depends_on.subgraph(group), deps[position], start)]
        message = f"dependency cycle: {' -> '.join(cycle)} (each {noun} depends on the next)"
        problems.append(GraphProblem(index_of[start], position, message))
    return problems


def _position(problem: GraphProblem) -> tuple[int, int]:
    return problem.index, -1 if problem.dependency is None else problem.dependency


def task_graph(specs: Sequence[TaskSpec]) -> nx.DiGraph[str]:
    """Validate the tasks as a DAG (unique ids, known dependencies, no cycles)."""
    return build_graph(((s.id, s.depends_on) for s in specs), noun="task")


def check_tasks(specs: Sequence[TaskSpec]) -> None:
    """Raise GraphError as `task_graph` does, without building the graph of tasks none of
    which depends on another (a plain fan-out: only their ids can clash)."""
    if any(s.depends_on for s in specs):
        task_graph(specs)
        return
    problems = _duplicates([(s.id, []) for s in specs], "task")
    if problems:
        raise GraphError(problems)


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
        trace: Trace,
        on_result: Callable[[TaskResult], None] | None = None,
        output_users: Mapping[str, Sequence[str]] | None = None,
        slots: Slots | None = None,
        background: bool = False,
        overlap: Callable[[TaskResult], float | None] | None = None,
        on_start: Callable[[TaskSpec], None] | None = None,
    ) -> None:
        self.specs = list(specs)
        # Which tasks use each task's answer: by default, those that depend on it.
        self.output_users = output_users if output_users is not None else _dependents(specs)
        self.executor = executor
        self.parent = parent
        self.depth = depth
        self.agent_of = agent_of
        self.prompt_for = prompt_for
        self.gate = gate
        self.trace = trace
        self.on_result = on_result
        self.background = background
        self.overlap = overlap
        self.on_start = on_start
        self._slots = slots or Slots.for_graph(max_parallel)
        self._tasks: dict[str, asyncio.Task[TaskResult]] = {}
        self._cancelled: dict[str, str] = {}
        self._announced = False

    def announce(self) -> None:
        """Record the graph (its `fork` event), once; `run` does it if no one did before."""
        if self._announced:
            return
        self._announced = True
        if not self.trace.recording:  # its tasks' records are made for a record only
            return
        self.trace.emit(
            Fork,
            agent=self.parent or "job",
            background=True if self.background else None,
            tasks=[
                ForkTask(
                    id=s.id, path=self.path_of(s), agent=self.agent_of(s), depends_on=s.depends_on
                )
                for s in self.specs
            ],
        )

    async def run(self) -> list[TaskResult]:
        """Run every task; results come back in the order the tasks were given."""
        self.announce()
        async with asyncio.TaskGroup() as group:
            for spec in self.specs:
                self._tasks[spec.id] = group.create_task(self._run_node(spec))
        return [self._tasks[s.id].result() for s in self.specs]

    def cancel(self, ids: Sequence[str], reason: str) -> None:
        """End the tasks `ids` that have not ended, giving `reason`; the others go on."""
        for task_id in ids:
            self._cancelled.setdefault(task_id, reason)
            task = self._tasks.get(task_id)
            if task is not None and not task.done():
                task.cancel()

    async def _run_node(self, spec: TaskSpec) -> TaskResult:
        restored = self.executor.ended_before(spec, self.path_of(spec), self.agent_of(spec))
        if restored is not None:
            return self._ended(restored, restored=True)
        try:
            if spec.id in self._cancelled:
                return self._skipped(spec, self._cancelled[spec.id])
            # Shielded: cancelling this task alone (`cancel`) must not cancel what it waits for.
            dependencies = [await asyncio.shield(self._tasks[d]) for d in spec.depends_on]
            failed = next((d for d in dependencies if d.status != "completed"), None)
            if failed is not None:
                return self._skipped(spec, f"dependency {failed.id!r} ended {failed.status}")
            async with self._slots.hold():
                return await self._start(spec, dependencies)
        except asyncio.CancelledError:
            # The graph is being cancelled: the task ends on the record, then the graph
            # re-raises the cancellation (the TaskGroup does) once every task has ended.
            return self._skipped(spec, self._cancelled.get(spec.id, NOT_STARTED))

    async def _start(self, spec: TaskSpec, dependencies: Sequence[TaskResult]) -> TaskResult:
        request = TaskRequest(
            spec=spec,
            agent=self.agent_of(spec),
            path=self.path_of(spec),
            prompt=self.prompt_for(spec, dependencies),
            depth=self.depth,
        )
        try:
            refusal = self.gate(request) if self.gate else None
            if refusal is not None:
                return self._skipped(spec, refusal)
            where = self.executor.placement(request)
            self.trace.emit(
                TaskStart,
                agent=request.path,
                id=spec.id,
                depends_on=spec.depends_on,
                executor=where.executor,
                worker=where.worker,
            )
            if self.on_start is not None:
                self.on_start(spec)
            result = self._unless_empty(await self.executor.run_task(request))
            if result.status == "cancelled" and spec.id in self._cancelled:
                result = result.model_copy(update={"reason": self._cancelled[spec.id]})
        except asyncio.CancelledError:
            reason = self._cancelled.get(spec.id, "the run was cancelled")
            result = request.ended("cancelled", reason)
        except Exception as exc:
            # One task's failure must not cancel its siblings: it becomes its result.
            result = request.ended("error", f"{type(exc).__name__}: {exc}")
        return self._ended(result)

    def _ended(self, result: TaskResult, *, restored: bool = False) -> TaskResult:
        """Record a task's end and hand its result on."""
        if self.trace.recording:  # its record is made for a record only
            self._record_end(result, restored)
        if self.on_result is not None:
            self.on_result(result)
        return result

    def _record_end(self, result: TaskResult, restored: bool) -> None:
        self.trace.emit(
            TaskEnd,
            agent=result.path,
            id=result.id,
            status=result.status,
            reason=result.reason,
            usage=TokenCounts.of(result.usage),
            restored=True if restored else None,
            steps=result.steps if restored else None,
            background=True if self.background and not restored else None,
            overlap_s=None if restored else self._overlap(result),
        )

    def _overlap(self, result: TaskResult) -> float | None:
        """Seconds a background task ran beside its caller's own work, for its `task_end`."""
        overlap = self.overlap(result) if self.overlap is not None else None
        return None if overlap is None else round(overlap, 3)

    def _unless_empty(self, result: TaskResult) -> TaskResult:
        """A task that completed with an empty answer fails when a later task uses it."""
        users = self.output_users.get(result.id, ())
        if not (result.empty_answer and users):
            return result
        names = ", ".join(repr(user) for user in users)
        reason = f"its answer was empty, and {names} {'uses' if len(users) == 1 else 'use'} it"
        return result.model_copy(update={"status": "error", "reason": reason})

    def path_of(self, spec: TaskSpec) -> str:
        return f"{self.parent}/{spec.id}" if self.parent else spec.id

    def _skipped(self, spec: TaskSpec, reason: str) -> TaskResult:
        path = self.path_of(spec)
        result = TaskResult(
            id=spec.id,
            agent=self.agent_of(spec),
            path=path,
            status="skipped",
            reason=reason,
            depends_on=spec.depends_on,
            ended_at=time.time(),
        )
        self.trace.emit(
            TaskEnd,
            agent=path,
            id=spec.id,
            status="skipped",
            reason=reason,
            background=True if self.background else None,
            overlap_s=self._overlap(result),
        )
        if self.on_result is not None:
            self.on_result(result)
        return result


def _dependents(specs: Sequence[TaskSpec]) -> dict[str, list[str]]:
    users: dict[str, list[str]] = {}
    for spec in specs:
        for dependency in spec.depends_on:
            users.setdefault(dependency, []).append(spec.id)
    return users


# --- Slots: how many agents of the tree work at once ---------------------------------------


class Slots:
    """A pool of `limit` slots for agents that run at once."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self._free = asyncio.Semaphore(self.limit)
        self.busy = 0
        self.peak = 0

    @classmethod
    def for_graph(cls, limit: int) -> Slots:
        """The pool of the task this is called in, or a new one of `limit` slots."""
        holding = _HOLDING.get()
        return holding.slots if holding is not None else cls(limit)

    def hold(self) -> _Holding:
        """Take a slot for the block (`async with slots.hold()`); what runs inside knows it
        holds one."""
        return _Holding(self)

    async def _take(self) -> None:
        await self._free.acquire()
        self.busy += 1
        self.peak = max(self.peak, self.busy)

    def _give(self) -> None:
        self.busy -= 1
        self._free.release()


class _Holding:
    """A slot held for a block (`Slots.hold`), known to what runs inside it (`_HOLDING`).
    A context manager of its own, not a generator: each running agent of a fan-out has one."""

    __slots__ = ("held", "slots", "_token")

    def __init__(self, slots: Slots) -> None:
        self.slots = slots
        self.held = True
        self._token: Token[_Holding | None] | None = None

    async def __aenter__(self) -> None:
        await self.slots._take()
        self._token = _HOLDING.set(self)

    async def __aexit__(self, *exc: object) -> None:
        if self._token is not None:
            _HOLDING.reset(self._token)
        if self.held:  # not when cancelled while taking a lent slot back
            self.slots._give()


_HOLDING: ContextVar[_Holding | None] = ContextVar("orchestrator_slot", default=None)


@asynccontextmanager
async def lend() -> AsyncIterator[None]:
    """Within the block, the slot the current task holds (if any) is free for others."""
    holding = _HOLDING.get()
    if holding is None or not holding.held:
        yield
        return
    holding.held = False
    holding.slots._give()
    try:
        yield
    finally:
        await holding.slots._take()
        holding.held = True


async def run_agent_task(
    request: TaskRequest,
    build: Callable[[], AgentLoop[Any, Any]],
    deps: object = None,
    history: AgentHistory | None = None,
) -> TaskResult:
    """Build the task's agent, run it on the task's prompt (with the run's `deps`; on from
    `history`, its cut-off run's, when it has one), and report how it went.

    A task that cannot even start (its agent's model cannot be resolved, say) ends `error`;
    one cancelled while it runs ends `cancelled`, with what its agent had done.
    """
    started_at = time.time()  # the result is made once the task ends: nothing held meanwhile
    try:
        agent = build()
        run = await agent.run(request.prompt, deps=deps, history=history)
    except (ConfigError, OSError) as exc:
        return request.ended("error", str(exc), started_at=started_at)
    except RunCancelled as cancelled:
        run = cancelled.result
    reason = run.error or (None if run.status == "completed" else f"ended {run.status}")
    return TaskResult(
        id=request.spec.id,
        agent=request.agent,
        path=request.path,
        depends_on=request.spec.depends_on,
        started_at=started_at,
        status=run.status,
        output=run.text,
        reason=reason,
        usage=run.total_usage,
        cost=run.total_cost,
        steps=run.steps,
        ended_at=time.time(),
        run=run,
    )


def budget_refusal(
    budget: TokenBudget | None, agent: AgentLoop[Any, Any], prompt: str
) -> str | None:
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
        build: Callable[[TaskRequest], AgentLoop[Any, Any]],
        budget: TokenBudget | None,
        deps: object = None,
    ) -> None:
        self.build = build
        self.budget = budget
        self.deps = deps
        self._agents: dict[str, AgentLoop[Any, Any]] = {}

    def agent_for(self, request: TaskRequest) -> AgentLoop[Any, Any]:
        if request.path not in self._agents:
            self._agents[request.path] = self.build(request)
        return self._agents[request.path]

    def budget_refusal(self, request: TaskRequest) -> str | None:
        return budget_refusal(self.budget, self.agent_for(request), request.prompt)

    def forget(self, request: TaskRequest) -> None:
        """Drop the agent built for `request` (it will not run here)."""
        self._agents.pop(request.path, None)

    def run_task(self, request: TaskRequest) -> Coroutine[Any, Any, TaskResult]:
        # The task's own coroutine, not one that awaits it: one frame less per sub-agent.
        return run_agent_task(request, lambda: self.agent_for(request), self.deps)

    async def resume_task(self, request: TaskRequest, history: AgentHistory) -> TaskResult:
        return await run_agent_task(request, lambda: self.agent_for(request), self.deps, history)
