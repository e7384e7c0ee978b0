"""What a Ray worker builds a run's agents from: `WorkerRecipe`.

Live objects stay where they are made: a model holds a connection, a catalog the tool code
it imported, a trace a file. What crosses to a worker is the run's `RunRecipe` (its
settings resolved once on the driver: the skills its scan found, the sub-agent definitions,
permissions, limits, aliases; planner.py), the job being run, the orchestrator's class, and
the trace's checkpoint when the run resumes. A worker makes the orchestrator from the
recipe once (no folder scanned, no check made again), then builds each task's agent as the
driver would: a job step as `Orchestrator.step_agent` does, a forked task with `build_agent`
on the parent's model (its settings travel in the task's `TaskOrigin`).

What a person answers through (`approve`, `answer`) does not cross (nobody answers on a
worker): there, calls the permissions mark `ask` and questions are settled by the run's
`on_input`. Models passed as objects must pickle; a scripted model does, and so does a string,
which each worker resolves itself (a scripted model's script is read there).
"""

from __future__ import annotations

from typing import Any

from ..agent import AgentLoop, TokenBudget, ToolContext
from ..jobs import Job, fast_forward
from ..models import ModelSettings
from ..planner import Orchestrator, RunRecipe
from ..tasks import TaskOrigin, TaskRequest
from ..trace import Checkpoint, Trace


class WorkerRecipe:
    """How a worker makes the run's orchestrator and builds its tasks' agents: the run's
    recipe, the orchestrator's class (a subclass's choices, such as how it resolves models,
    hold on the workers too), the job being run (None for a goal) and the checkpoint."""

    def __init__(
        self,
        recipe: RunRecipe,
        job: Job | None = None,
        checkpoint: Checkpoint | None = None,
        kind: type[Orchestrator] = Orchestrator,
    ) -> None:
        self.recipe = recipe
        self.job = job
        self.checkpoint = checkpoint
        self.kind = kind
        self._made: Orchestrator | None = None

    @classmethod
    def of(
        cls, orchestrator: Orchestrator, job: Job | None, checkpoint: Checkpoint | None
    ) -> WorkerRecipe:
        """What a worker makes `orchestrator` again from, to run `job` (a goal: None)."""
        return cls(orchestrator.recipe, job, checkpoint, type(orchestrator))

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_made": None}

    def orchestrator(self) -> Orchestrator:
        """The run's orchestrator, made here once (forks local to this worker, no prompts)."""
        if self._made is None:
            self._made = self.kind.made_from(self.recipe)
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
