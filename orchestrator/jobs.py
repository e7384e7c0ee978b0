"""Running a job spec: its steps as a DAG of agent loops under one budget and one trace.

    job = load_job("review.yaml", inputs={"region": "APAC"})
    result = Orchestrator.from_job(job).run_job_sync(job)

Each step runs as soon as the steps it depends on have completed (up to `max_parallel` at a
time); its task is the spec's template with `{inputs.x}` and `{steps.id.output}` filled in. A
step whose dependency did not complete is skipped. A planner step gets the skill index and
`fork`; any other step runs its sub-agent definition.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from .budget import TokenBudget
from .dag import GraphRun, TaskRequest, TaskSpec, budget_refusal, run_agent_task
from .loop import Agent
from .messages import Usage
from .results import TaskResult
from .spec import Job
from .spec import load_job as load_spec
from .subagents import SubagentRegistry, builtin_subagent_folders
from .tools import ToolContext
from .trace import Trace

if TYPE_CHECKING:
    from .planner import Orchestrator

JobStatus = Literal["completed", "failed", "budget_exhausted", "cancelled"]


class JobResult(BaseModel):
    """How a job ended: its output, every step's result, and what it cost."""

    name: str
    status: JobStatus
    output: str = ""
    output_step: str
    usage: Usage = Field(default_factory=Usage)
    steps: list[TaskResult] = Field(default_factory=list)
    trace: str | None = None

    def step(self, step_id: str) -> TaskResult:
        for result in self.steps:
            if result.id == step_id:
                return result
        raise KeyError(step_id)

    def usage_by_agent(self) -> dict[str, Usage]:
        totals: dict[str, Usage] = {}
        for step in self.steps:
            for agent, usage in step.usage_by_agent().items():
                totals[agent] = totals[agent] + usage if agent in totals else usage
        return totals


def load_job(
    path: str | Path,
    *,
    model: str | None = None,
    inputs: Mapping[str, str] | None = None,
    trace: str | Path | None = None,
    builtin: bool = True,
) -> Job:
    """Read and validate a job spec, checking its agents against the sub-agents it can see.

    Raises `SpecError` (a `ConfigError`) naming the file and every problem.
    """
    overrides = {"model": model, "inputs": inputs, "trace": trace}
    job = load_spec(path, **overrides)
    registry = SubagentRegistry(folders=[*job.subagents, *builtin_subagent_folders(builtin)])
    return load_spec(path, known_agents=registry.names, **overrides)


def job_status(results: list[TaskResult]) -> JobStatus:
    """completed if every step completed; otherwise why not, most telling reason first."""
    statuses = {r.status for r in results}
    if statuses == {"completed"}:
        return "completed"
    if "cancelled" in statuses:
        return "cancelled"
    if "budget_exhausted" in statuses or any(
        (r.reason or "").startswith("budget:") for r in results
    ):
        return "budget_exhausted"
    return "failed"


class JobRunner:
    """Runs one job's steps with an orchestrator's model, catalogs and permissions."""

    def __init__(self, orchestrator: Orchestrator, job: Job, trace: Trace | None) -> None:
        self.orchestrator = orchestrator
        self.job = job
        self.trace = trace
        self.budget = TokenBudget(orchestrator.max_tokens)
        self.outputs: dict[str, str] = {}
        self._agents: dict[str, Agent] = {}
        self.context = ToolContext(
            agent="job",
            permissions=orchestrator.permissions,
            budget=self.budget,
            trace=trace,
            model=orchestrator.model,
        )

    async def run(self) -> JobResult:
        specs = [
            TaskSpec(id=s.id, task=s.task, agent=s.agent_name, depends_on=s.depends_on)
            for s in self.job.plan
        ]
        if self.trace is not None:
            self.trace.emit("job_start", "job", name=self.job.name, steps=len(specs))
        graph = GraphRun(
            specs,
            self,
            parent="",
            depth=1,
            agent_of=lambda spec: spec.agent or "general",
            prompt_for=lambda spec, _deps: self.job.render_task(spec.id, self.outputs),
            gate=self._budget_refusal,
            max_parallel=self.job.budget.max_parallel,
            trace=self.trace,
        )
        results = await graph.run()
        output_step = self.job.output_step
        result = JobResult(
            name=self.job.name,
            status=job_status(results),
            output=next((r.output for r in results if r.id == output_step), ""),
            output_step=output_step,
            usage=sum((r.usage for r in results), Usage()),
            steps=results,
            trace=str(self.trace.path) if self.trace and self.trace.path else None,
        )
        if self.trace is not None:
            self.trace.emit("job_end", "job", status=result.status, usage=result.usage.model_dump())
        return result

    async def run_task(self, request: TaskRequest) -> TaskResult:
        """Run one step (the executor interface of GraphRun)."""
        result = await run_agent_task(request, lambda: self._agent_for(request))
        if result.status == "completed":
            self.outputs[request.spec.id] = result.output
        return result

    def _agent_for(self, request: TaskRequest) -> Agent:
        """The step's agent, built once for the budget check and the run alike."""
        if request.path not in self._agents:
            self._agents[request.path] = self._build(request)
        return self._agents[request.path]

    def _build(self, request: TaskRequest) -> Agent:
        if request.agent == "planner":
            return self.orchestrator.planner(
                name=request.path, budget=self.budget, trace=self.trace
            )
        return self.orchestrator.fork.build_agent(request, self.context)

    def _budget_refusal(self, request: TaskRequest) -> str | None:
        return budget_refusal(self.budget, self._agent_for(request), request.prompt)
