"""What a Ray worker builds a run's agents from: `WorkerRecipe`.

Live objects stay where they are made: a model holds a connection, a catalog holds imported
tool code, a trace holds a file. What crosses to a worker is how to make them again: the
factory of the run's orchestrator (`Orchestrator` or `Orchestrator.from_job`) with its
arguments (a job spec, model strings or settings, folders, permissions, limits), the job, and
the trace's checkpoint when the run resumes. A worker makes the orchestrator once, then builds
each task's agent as the driver would: a job step as `step_agent` does, a forked task with
`build_agent` on the parent's model (its settings travel in the task's `TaskOrigin`).

A callback for `ask` permissions does not cross (nobody answers on a worker): on a worker
such calls are denied. Models passed as objects must pickle; a scripted model does, and so
does a string, which each worker resolves itself (a scripted model's script is read there).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from ..agent import AgentLoop, RunResult, TokenBudget, ToolContext
from ..models import ChatModel, ModelSettings
from ..skills import SkillInfo
from ..tasks import TaskOrigin, TaskRequest, ray_executor
from ..trace import Checkpoint, Trace
from .resume import fast_forward
from .runner import StepAgents, step_agent, step_context
from .spec import Executor, Job

# What a run keeps to itself: the approval callback, where it runs, its open trace.
LOCAL_ONLY = frozenset({"approve", "executor", "trace"})
# How to make an orchestrator again: a factory, its arguments and keywords.
Remake = tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class WorkerRecipe:
    """How a worker makes the run's orchestrator and builds its tasks' agents."""

    def __init__(
        self,
        make: Callable[..., StepAgents],
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        job: Job | None = None,
        checkpoint: Checkpoint | None = None,
    ) -> None:
        self.make = make
        self.args = args
        self.kwargs = {k: v for k, v in kwargs.items() if k not in LOCAL_ONLY}
        self.job = job
        self.checkpoint = checkpoint
        self._made: StepAgents | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_made": None}

    def orchestrator(self) -> StepAgents:
        """The run's orchestrator, made here once (forks local to this worker, no prompts)."""
        if self._made is None:
            self._made = self.make(*self.args, **self.kwargs, executor=None)
            if self.checkpoint is not None:
                fast_forward(self._made.model, self.checkpoint)
        return self._made

    def build(
        self,
        request: TaskRequest,
        origin: TaskOrigin,
        budget: TokenBudget,
        trace: Trace | None,
    ) -> AgentLoop:
        made = self.orchestrator()
        if origin.kind == "step":
            if self.job is None:
                raise ValueError("a job step, but this run has no job")
            return step_agent(made, self.job, request, step_context(made, budget, trace))
        model = made.model
        if origin.model is not None:
            model = made.resolve(ModelSettings.model_validate_json(origin.model))
        context = ToolContext(
            agent=origin.parent,
            permissions=made.permissions,
            budget=budget,
            trace=trace,
            model=model,
            depth=request.depth - 1,
        )
        skills = made.fork.skills
        running = skills.get(origin.running) if origin.running and skills is not None else None
        return made.fork.build_agent(request, context, running=running)


def job_executor(job: Job) -> Any:
    """The executor a job spec asks for: None (here), or a Ray executor."""
    spec: Executor = job.executor
    if spec.type == "local":
        return None
    return ray_executor(spec.address, workers=spec.workers)


def remote_forks(
    session: Any,
    model_key: Any,
    ctx: ToolContext,
    running: SkillInfo | None,
    build: Any,
) -> Any:
    """The executor for the tasks an agent here forks, on a Ray session (`RemoteForks`)."""
    origin = TaskOrigin(
        kind="fork",
        parent=ctx.agent,
        model=model_key(ctx.model),
        running=running.name if running is not None else None,
    )
    return session.executor(origin, build)


def recipe_for(orchestrator: Any, job: Job | None, checkpoint: Checkpoint | None) -> WorkerRecipe:
    """What a Ray worker makes `orchestrator` again from (its `remake`), to run `job`."""
    make, args, kwargs = orchestrator.remake
    return WorkerRecipe(make, args, kwargs, job, checkpoint)


async def run_remote(
    orchestrator: Any, goal: str, trace: Trace | None, model: ChatModel | None
) -> RunResult:
    """A goal run on `orchestrator.executor`: the planner here, the tasks it forks on the
    cluster's workers, one budget across both."""
    checkpoint = trace.checkpoint if trace is not None else None
    recipe = recipe_for(orchestrator, None, checkpoint)
    budget = orchestrator.new_budget()
    async with orchestrator.executor.open(recipe, budget, trace) as session:
        orchestrator.fork.remote = partial(remote_forks, session, orchestrator.model_key)
        try:
            planner = orchestrator.planner(trace=trace, model=model, budget=session.budget)
            return await planner.run(goal)
        finally:
            orchestrator.fork.remote = None
