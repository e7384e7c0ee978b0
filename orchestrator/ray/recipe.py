"""What a Ray worker builds a run's agents from: `WorkerRecipe`.

Live objects stay where they are made: a model holds a connection, a catalog holds imported
tool code, a trace holds a file. What crosses to a worker is how to make them again: the
factory of the run's orchestrator (`Orchestrator` or `Orchestrator.from_job`) with its
arguments (a job spec, model strings or settings, folders, permissions, limits), the job, and
the trace's checkpoint when the run resumes. A worker makes the orchestrator once, then builds
each task's agent as the driver would: a job step as `Orchestrator.step_agent` does, a forked
task with `build_agent` on the parent's model (its settings travel in the task's `TaskOrigin`).

A callback for `ask` permissions does not cross (nobody answers on a worker): on a worker
such calls are denied. Models passed as objects must pickle; a scripted model does, and so
does a string, which each worker resolves itself (a scripted model's script is read there).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..agent import AgentLoop, TokenBudget, ToolContext
from ..jobs import Job, fast_forward
from ..models import ModelSettings
from ..planner import Orchestrator
from ..tasks import TaskOrigin, TaskRequest
from ..trace import Checkpoint, Trace

# What a run keeps to itself: the approval callback, where it runs, its open trace.
LOCAL_ONLY = frozenset({"approve", "executor", "trace"})


class WorkerRecipe:
    """How a worker makes the run's orchestrator and builds its tasks' agents."""

    def __init__(
        self,
        make: Callable[..., Orchestrator],
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
        self._made: Orchestrator | None = None

    @classmethod
    def of(
        cls, orchestrator: Orchestrator, job: Job | None, checkpoint: Checkpoint | None
    ) -> WorkerRecipe:
        """What a worker makes `orchestrator` again from (its `remake`), to run `job`."""
        make, args, kwargs = orchestrator.remake
        return cls(make, args, kwargs, job, checkpoint)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_made": None}

    def orchestrator(self) -> Orchestrator:
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
        trace: Trace,
    ) -> AgentLoop[Any, Any]:
        made = self.orchestrator()
        if origin.kind == "step":
            if self.job is None:
                raise ValueError("a job step, but this run has no job")
            return made.step_agent(self.job, request, made.step_context(budget, trace))
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
            on_input=made.on_input,
        )
        skills = made.fork.skills
        running = skills.get(origin.running) if origin.running and skills is not None else None
        return made.fork.build_agent(request, context, running=running)
