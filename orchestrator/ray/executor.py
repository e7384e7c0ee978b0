"""`RayExecutor`: a run's tasks as Ray work, behind the same `TaskExecutor` interface.

    orch = Orchestrator("scripted:script.yaml", executor=RayExecutor(address="auto"))

A `RayExecutor` holds settings only. Each run opens a `RaySession` with it: the budget host
(budget.py), the trace relay and its pump (relay.py) and `workers` task workers (worker.py),
all gone when the run ends. A task goes to the least busy worker; `task_start` names it. The
driver's own agents (a planner run with `Orchestrator.run`) draw from the same host through a
lease of their own, and the driver's `TokenBudget` gets the run's total spend at the end.

A worker that dies while it runs a task (its process killed, its node lost): the task runs
again, once, from its start, on another worker (a new one if none is left), and the trace
says so (`task_retry`); if that one dies too, the task ends `error` with the reason. Either
way what the dead worker spent stays spent: the budget host charges it (relay.py counts it).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any

from ..agent import AgentLoop, RunResult, RunSettings, TaskResult, TokenBudget, ToolContext
from ..errors import ConfigError
from ..jobs import Job
from ..messages import Usage
from ..models import ChatModel
from ..planner import Orchestrator
from ..skills import SkillInfo
from ..tasks.executor import Placement, TaskExecutor, TaskOrigin, TaskRequest, counting_calls
from ..tasks.scheduler import LocalExecutor
from ..trace import AgentHistory, Trace
from ._ray import ray
from .budget import LEASE_TOKENS, Amount, LeasedBudget, start_host
from .calls import ClusterCalls, start_calls_host
from .events import TaskRetry
from .recipe import WorkerRecipe
from .relay import RelayPump, start_relay
from .worker import TaskWorker

MAX_TASKS_PER_WORKER = 1_000
_SESSIONS = itertools.count(1)


class RayExecutor:
    """Where a run's tasks go: a Ray cluster at `address` (`auto`: the running one; None:
    start one on this machine), on `workers` workers (default: one per CPU of the cluster),
    each running up to `max_tasks_per_worker` agents at once. `lease_tokens` is the block a
    worker takes from the budget at a time; `retries` how often a task whose worker died runs
    again. `init` are further `ray.init` options (not the dashboard: it stays off).
    """

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        *,
        workers: int | None = None,
        max_tasks_per_worker: int = MAX_TASKS_PER_WORKER,
        lease_tokens: int = LEASE_TOKENS,
        retries: int = 1,
        init: dict[str, Any] | None = None,
    ) -> None:
        self.address = address
        self.workers = workers
        self.max_tasks_per_worker = max_tasks_per_worker
        self.lease_tokens = lease_tokens
        self.retries = retries
        self.init = dict(init or {})

    def connect(self) -> None:
        """Join (or start) the cluster, unless this process already has."""
        if ray.is_initialized():
            return
        options = {"include_dashboard": False, "log_to_driver": False, **self.init}
        try:
            ray.init(address=self.address, **options)
        except ConnectionError as exc:
            raise ConfigError(f"cannot reach the Ray cluster at {self.address}: {exc}") from None

    def shared_budget(self, budget: TokenBudget) -> LeasedBudget:
        """`budget` on the cluster, for several runs to share (a batch's): give it to each
        run as its budget. Its `used` is this client's; `state()` has the budget's own."""
        self.connect()
        return LeasedBudget(start_host(budget), "shared", lease_tokens=self.lease_tokens)

    async def run_goal(
        self,
        orchestrator: Orchestrator,
        goal: str,
        trace: Trace,
        model: ChatModel | None,
        history: AgentHistory | None,
        settings: RunSettings[Any],
    ) -> RunResult:
        """A goal run on the cluster: the planner here, the tasks it forks on the workers,
        one budget across both; the run's own settings are the planner's (`time_limit`,
        `cancel`: stopping it stops its tasks)."""
        recipe = WorkerRecipe.of(orchestrator, None, trace.checkpoint)
        async with self.open(recipe, orchestrator.new_budget(), trace) as session:
            forks = orchestrator.fork.sending(
                partial(_remote_forks, session, orchestrator.model_key)
            )
            planner = orchestrator.planner(
                trace=trace, model=model, budget=session.budget, forks=forks
            )
            own = RunSettings[Any](**settings)
            own["history"] = history
            return await planner.run(goal, **own)

    def open_job(
        self, orchestrator: Orchestrator, job: Job, budget: TokenBudget, trace: Trace
    ) -> RaySession:
        """Start a job's run on the cluster: its workers build the steps' agents from the
        job and `orchestrator`'s recipe."""
        return self.open(WorkerRecipe.of(orchestrator, job, trace.checkpoint), budget, trace)

    def open(self, recipe: WorkerRecipe, budget: TokenBudget, trace: Trace) -> RaySession:
        """Start a run's actors: its budget on the cluster, its trace relay, its workers."""
        self.connect()
        try:
            ray.cloudpickle.dumps(recipe)
        except Exception as exc:
            raise ConfigError(
                f"this run cannot go to Ray workers: what rebuilds its agents does not pickle "
                f"({type(exc).__name__}: {exc}); give models as strings or settings, not objects"
            ) from None
        return RaySession(self, recipe, budget, trace)


class RaySession:
    """One run on the cluster: its actors, the driver's lease, the relay pump."""

    def __init__(
        self, settings: RayExecutor, recipe: WorkerRecipe, budget: TokenBudget, trace: Trace
    ) -> None:
        self.settings = settings
        self.recipe = recipe
        self.origin_budget = budget
        self.trace = trace
        # A budget already on the cluster (a batch's, `shared_budget`) is used as it is.
        self.shared = isinstance(budget, LeasedBudget)
        self.host = budget.host if isinstance(budget, LeasedBudget) else start_host(budget)
        client = f"driver-{next(_SESSIONS)}"
        self.budget = LeasedBudget(self.host, client, lease_tokens=settings.lease_tokens)
        # One count of the tasks sent to remote agents for the run's every process.
        self.calls_host = start_calls_host()
        self._counting = ExitStack()
        # Workers send their events to a relay only when the run records them.
        self.relay = start_relay() if trace.recording else None
        self.pump = RelayPump(self.relay, trace) if trace.recording else None
        self._pumping: asyncio.Task[None] | None = None
        self.workers: list[_Worker] = []
        self._count = 0
        self._placed: dict[str, _Worker] = {}
        wanted = settings.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        for _ in range(wanted):
            self._add_worker()

    async def __aenter__(self) -> RaySession:
        # While the session is open, the driver's own forks count in the run's shared count.
        self._counting.enter_context(counting_calls(ClusterCalls(self.calls_host)))
        if self.pump is not None:
            self._pumping = asyncio.create_task(self.pump.run())
        try:
            await asyncio.gather(*(w.ready() for w in self.workers))
        except BaseException as exc:
            # A worker that cannot make the run (a model it cannot resolve, a missing key):
            # every actor started for this run ends, and the reason is a clear error.
            try:
                await self.close()
            finally:
                self._counting.close()
            if isinstance(exc, Exception):
                raise ConfigError(
                    f"a Ray worker could not start the run: {_first_line(exc)}"
                ) from None
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self.close()
        finally:
            self._counting.close()  # in the context `__aenter__` set it in

    def executor(
        self, origin: TaskOrigin, build: Callable[[TaskRequest], AgentLoop]
    ) -> RayTaskExecutor:
        """The executor for tasks of `origin`; `build` builds their agents on the driver, for
        the budget check before a task starts (the task itself is built on its worker)."""
        return RayTaskExecutor(self, origin, LocalExecutor(build, self.budget))

    def placement(self, request: TaskRequest) -> Placement:
        worker = min(self._alive(), key=lambda w: w.busy)
        worker.busy += 1  # counted from now, so the next placement sees it
        self._placed[request.path] = worker
        return Placement("ray", worker.name)

    async def run_task(self, request: TaskRequest, origin: TaskOrigin) -> TaskResult:
        worker = self._placed.pop(request.path, None)
        if worker is None:
            self.placement(request)
            worker = self._placed.pop(request.path)
        deaths: list[str] = []
        while True:
            call = worker.actor.run.remote(request, origin)
            try:
                result: TaskResult
                result, batch = await call
            except ray.exceptions.RayActorError as exc:
                worker.busy -= 1
                deaths.append(f"worker {worker.name} died ({_first_line(exc)})")
                await self._bury(worker)
                if len(deaths) > self.settings.retries:
                    return await self._failed(request, deaths)
                worker = await self._retry_on(request, deaths[-1])
                continue
            except asyncio.CancelledError:
                worker.busy -= 1
                ray.cancel(call)  # the task's agent ends `cancelled` on its worker
                raise
            except BaseException:
                worker.busy -= 1  # any other failure (an error inside the worker's own code)
                raise
            worker.busy -= 1
            if self.pump is not None and batch is not None:
                await self.pump.accept(worker.name, batch)  # its events before its task_end
            return result

    async def _retry_on(self, request: TaskRequest, reason: str) -> _Worker:
        alive = self._alive(required=False) or [self._add_worker()]
        worker = min(alive, key=lambda w: w.busy)
        await worker.ready()
        worker.busy += 1
        self.trace.emit(
            TaskRetry, agent=request.path, id=request.spec.id, reason=reason, worker=worker.name
        )
        return worker

    async def _bury(self, worker: _Worker) -> None:
        """A dead worker: its unreported spend charged to the budget, its lease closed."""
        worker.alive = False
        spent = None
        if self.pump is not None:
            await self.pump.drain()
            self.pump.release(worker.name)
            spent = self.pump.spent_by_worker.get(worker.name, Amount())
        await self.host.forfeit.remote(worker.name, spent)

    async def _failed(self, request: TaskRequest, deaths: list[str]) -> TaskResult:
        usage = self.pump.usage_under(request.path) if self.pump else None
        return TaskResult(
            id=request.spec.id,
            agent=request.agent,
            path=request.path,
            status="error",
            reason="; then ".join(deaths),
            depends_on=request.spec.depends_on,
            ended_at=time.time(),
            usage=usage if usage is not None else Usage(),
        )

    async def close(self) -> None:
        """Every worker reports its spend, the last events are written, the actors end; the
        driver's budget counts what the run spent."""
        alive = [w for w in self.workers if w.alive]
        await asyncio.gather(*(w.actor.flush.remote() for w in alive), return_exceptions=True)
        self.budget.flush()
        if self._pumping is not None:
            self._pumping.cancel()
            await asyncio.gather(self._pumping, return_exceptions=True)
        await self._drain()
        owned = [w.actor for w in self.workers] + [self.relay, self.calls_host]
        if not self.shared:
            state = await self.host.state.remote()
            origin = self.origin_budget
            origin.record_spent(state["used"] - origin.used, state["spent"] - origin.spent)
            owned.append(self.host)
        for actor in owned:
            if actor is not None:
                ray.kill(actor)

    async def _drain(self) -> None:
        if self.pump is not None:
            await self.pump.drain()

    def _alive(self, *, required: bool = True) -> list[_Worker]:
        alive = [w for w in self.workers if w.alive]
        if not alive and required:
            alive = [self._add_worker()]
        return alive

    def _add_worker(self) -> _Worker:
        self._count += 1
        actor = (
            ray.remote(TaskWorker)
            .options(
                num_cpus=0,
                max_restarts=0,
                max_concurrency=self.settings.max_tasks_per_worker,
                scheduling_strategy="SPREAD",
            )
            .remote(
                f"w{self._count}",
                self.recipe,
                self.host,
                self.relay,
                self.calls_host,
                self.trace.run_id,
                self.trace.checkpoint,
                str(Path.cwd()),
                self.settings.lease_tokens,
            )
        )
        worker = _Worker(actor)
        self.workers.append(worker)
        return worker


class _Worker:
    """A worker as the driver sees it: its actor, its name once known, how busy it is."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor
        self.name = "starting"
        self.pid: int | None = None
        self.busy = 0
        self.alive = True

    async def ready(self) -> None:
        if self.pid is None:
            where = await self.actor.where.remote()
            self.name, self.pid = where["worker"], where["pid"]


class RayTaskExecutor(TaskExecutor):
    """Tasks of one origin on a session's workers (the `TaskExecutor` interface)."""

    name = "ray"

    def __init__(self, session: RaySession, origin: TaskOrigin, local: LocalExecutor) -> None:
        self.session = session
        self.origin = origin
        self.local = local

    def budget_refusal(self, request: TaskRequest) -> str | None:
        if self.session.budget.remaining is None:
            return None  # no limit: nothing to build here
        self.session.budget.flush()  # what the cluster has left now, not at the last call
        try:
            return self.local.budget_refusal(request)
        finally:
            self.local.forget(request)  # the agent runs on its worker: this one is not kept

    def placement(self, request: TaskRequest) -> Placement:
        return self.session.placement(request)

    async def run_task(self, request: TaskRequest) -> TaskResult:
        return await self.session.run_task(request, self.origin)

    async def resume_task(self, request: TaskRequest, history: AgentHistory) -> TaskResult:
        # The worker holds its own copy of the run's checkpoint: it hands the agent its history.
        return await self.session.run_task(request, self.origin)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def _remote_forks(
    session: RaySession,
    model_key: Callable[[ChatModel | None], str | None],
    ctx: ToolContext,
    running: SkillInfo | None,
    build: Callable[[TaskRequest], AgentLoop],
) -> RayTaskExecutor:
    """The executor for the tasks an agent here forks, on a Ray session (`RemoteForks`)."""
    origin = TaskOrigin(
        kind="fork",
        parent=ctx.agent,
        model=model_key(ctx.model),
        running=running.name if running is not None else None,
    )
    return session.executor(origin, build)
