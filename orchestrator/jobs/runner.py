"""Running a job spec: its steps as a DAG of agent loops under one budget and one trace.

    job = load_job("review.yaml", inputs={"region": "APAC"})
    result = Orchestrator.from_job(job).run_job_sync()

Each step runs as soon as the steps it depends on have completed (up to `max_parallel` at a
time); its task is the spec's template with `{inputs.x}` and `{steps.id.output}` filled in. A
step whose dependency did not complete is skipped. A planner step gets the skill index and
`fork`; any other step runs its sub-agent definition. A step with a `model` of its own runs on
it (its sub-agents inherit it); with a `stream`, the output step's text is shown to it as the
model writes it.

The runner builds no agent itself: `Orchestrator.run_job` hands it how (`build`). With a Ray
executor (`executor: ray`, docs/ray.md) the steps run on the cluster's workers, which build
each step's agent from the job themselves; the budget is the cluster's, the trace still this
one.

A job cancelled half-way (Ctrl-C) still records its `job_end`, status `cancelled`. On a trace
opened to resume the job's run, the budget starts with everything the run spent before, the
steps that had ended keep their results and the ones cut off go on from where they were: its
steps' executor is wrapped in the restoring layer (tasks/restore.py, docs/resume.md).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from pathlib import Path
from typing import Any, Literal, TypeGuard, get_args

from pydantic import BaseModel, Field

from ..agent import AgentLoop, TaskResult, TokenBudget, ToolContext
from ..agent.model_call import run_prefixes
from ..events import InputRequest, JobEnd, JobStart, TokenCounts
from ..messages import Usage
from ..security.inventory import reads
from ..tasks import (
    GraphRun,
    LocalExecutor,
    RemoteSession,
    SubagentRegistry,
    TaskOrigin,
    TaskRequest,
    TaskSpec,
)
from ..tasks.executor import TaskExecutor, with_remote_agents
from ..trace import Trace
from .outputs import WorkspaceRecord
from .spec import Job

JobStatus = Literal["completed", "failed", "budget_exhausted", "cancelled", "input_required"]


def is_job_status(value: object) -> TypeGuard[JobStatus]:
    """Whether `value` (read from a trace, say) is a job's status."""
    return value in get_args(JobStatus)


class JobResult(BaseModel):
    """How a job ended: its output, every step's result, and what it cost."""

    name: str
    status: JobStatus
    output: str = ""
    data: Any = None
    """The output step's validated structured answer (as JSON values), when it has an
    `output_schema`; None otherwise."""
    output_step: str
    usage: Usage = Field(default_factory=Usage)
    steps: list[TaskResult] = Field(default_factory=list)
    trace: str | None = None
    files: list[str] = Field(default_factory=list)
    """The files the run created or changed in its workspace (absolute paths)."""

    @property
    def cost(self) -> float | None:
        """US dollars of every step's tree; None when no call had a price."""
        costs = [step.cost for step in self.steps if step.cost is not None]
        return sum(costs) if costs else None

    def refused_by_agent(self) -> dict[str, dict[str, str]]:
        """What the safety rules refused every time it was tried, by agent path (every
        step's tree): a run that completed with entries here did not do all it tried."""
        found: dict[str, dict[str, str]] = {}
        for step in self.steps:
            if step.run is not None:
                found.update(step.run.refused_by_agent())
        return found

    @property
    def waiting(self) -> list[InputRequest]:
        """What a job that ended `input_required` waits for a person to answer, every
        step's tree's (`resume --answer`, docs/waiting.md)."""
        return [r for step in self.steps if step.run is not None for r in step.run.waiting]

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


def job_status(results: list[TaskResult]) -> JobStatus:
    """completed if every step completed; otherwise why not, most telling reason first."""
    statuses = {r.status for r in results}
    if statuses == {"completed"}:
        return "completed"
    if "cancelled" in statuses:
        return "cancelled"
    if "input_required" in statuses:
        return "input_required"
    if "budget_exhausted" in statuses or any(
        (r.reason or "").startswith("budget:") for r in results
    ):
        return "budget_exhausted"
    return "failed"


class JobCancelled(asyncio.CancelledError):
    """The task awaiting a job was cancelled: the job ended `cancelled` with its record
    complete (every step's end, the `job_end`), and `result` is its JobResult."""

    def __init__(self, result: JobResult, *args: object) -> None:
        super().__init__(*args)
        self.result = result


class JobRunner:
    """Runs one job's steps on `budget`, each step's agent made by `build` from the context
    `context` gives for the budget the step draws from (the job's permissions, budget and
    trace). `shared_budget`: the budget is also other jobs' (a batch's), and counts their
    spend itself. `remote` opens the job's run on a cluster (`orchestrator.ray`), whose
    workers then run the steps; None runs them here."""

    def __init__(
        self,
        job: Job,
        trace: Trace,
        *,
        build: Callable[[TaskRequest, ToolContext], AgentLoop[Any, Any]],
        context: Callable[[TokenBudget], ToolContext],
        budget: TokenBudget,
        shared_budget: bool = False,
        remote: Callable[[TokenBudget], RemoteSession] | None = None,
        user_skills: bool = False,
        servers: bool = True,
        workspace: WorkspaceRecord | None = None,
        subagents: SubagentRegistry | None = None,
    ) -> None:
        self.job = job
        self.subagents = subagents
        self.trace = trace
        self.build = build
        self.make_context = context
        self.remote = remote
        self.user_skills = user_skills
        self.servers = servers
        """Some skill of the run may declare MCP servers: the job holds one pool of them (the
        orchestrator says False when none does, and the pool's code is not loaded)."""
        self.workspace = workspace
        self.budget = budget
        self.restoring = trace.checkpoint
        """The checkpoint of the run this one resumes (the trace was opened to resume it)."""
        if not shared_budget and self.restoring is not None:
            self.budget.record_spent(self.restoring.usage.total_tokens, self.restoring.cost)
        self.outputs: dict[str, str] = {}
        self.data: dict[str, Any] = {}
        """Steps' structured answers as JSON values, for `{steps.ID.output.FIELD}`."""
        self.ended: list[TaskResult] = []
        self._use(self.budget)

    def _use(self, budget: TokenBudget) -> None:
        self.context = self.make_context(budget)
        self.executor: TaskExecutor = self._routed(
            LocalExecutor(self._build, budget, self.context.deps)
        )

    def _routed(self, executor: TaskExecutor) -> TaskExecutor:
        """`executor`, with the steps whose agent is remote (A2A) sent there, and, in a run
        that resumes, the steps restored from the trace (tasks/restore.py)."""
        if self.subagents is not None:
            executor = with_remote_agents(executor, self.subagents, self.context)
        if self.restoring is not None:
            from ..tasks.restore import Restoring  # loaded by a run that resumes

            executor = Restoring(executor, self.restoring)
        return executor

    async def run(self) -> JobResult:
        """Run the job's steps here, or on the cluster `remote` opens. Its steps share one
        prompt-prefix hold (agent/model_call.py), as the agents of one run do."""
        with run_prefixes():
            if self.remote is None:
                return await self._run()
            async with self.remote(self.budget) as session:
                self._use(session.budget)
                self.executor = self._routed(session.executor(TaskOrigin(kind="step"), self._build))
                return await self._run()

    async def _run(self) -> JobResult:
        specs = [
            TaskSpec(
                id=s.id, task=s.task, agent=s.agent_name, depends_on=s.depends_on, skills=s.skills
            )
            for s in self.job.plan
        ]
        if self.trace.recording:  # the job's record hashes its spec file: for a record only
            resumed = self.restoring is not None
            self.trace.record(job_record(self.job, user_skills=self.user_skills, resumed=resumed))
        graph = GraphRun(
            specs,
            self.executor,
            parent="",
            depth=1,
            agent_of=lambda spec: spec.agent or "general",
            prompt_for=lambda spec, _deps: self.job.render_task(spec.id, self.outputs, self.data),
            gate=lambda request: self.executor.budget_refusal(request),
            max_parallel=self.job.budget.max_parallel,
            trace=self.trace,
            on_result=self._step_ended,
            output_users=self.job.output_users(),
        )
        try:
            async with self._server_scope():
                results = await graph.run()
        except asyncio.CancelledError as cancelled:
            ended = self._end(self._result(self.ended, status="cancelled"))
            raise JobCancelled(ended, *cancelled.args) from cancelled
        return self._end(self._result(results))

    def _server_scope(self) -> AbstractAsyncContextManager[object]:
        """One MCP server pool for every step of the job, `${VAR}` from the job's environment;
        nothing when no skill declares servers."""
        if not self.servers:
            return nullcontext()
        from ..skills.servers import server_scope  # loaded by a run with MCP servers

        return server_scope(self.job.environment())

    def _result(self, results: list[TaskResult], status: JobStatus | None = None) -> JobResult:
        output_step = self.job.output_step
        last = next((r for r in results if r.id == output_step), None)
        return JobResult(
            name=self.job.name,
            status=status or job_status(results),
            output=last.output if last is not None else "",
            data=last.data if last is not None else None,
            output_step=output_step,
            usage=sum((r.usage for r in results), Usage()),
            steps=results,
            trace=str(self.trace.path) if self.trace.path is not None else None,
        )

    def _end(self, result: JobResult) -> JobResult:
        left = self.workspace.finish() if self.workspace is not None else None
        result.files = left.files if left is not None else []
        self.trace.emit(
            JobEnd,
            agent="job",
            status=result.status,
            usage=TokenCounts.of(result.usage),
            outputs=left.outputs if left is not None else None,
            written=left.written if left is not None else None,
        )
        return result

    def _step_ended(self, result: TaskResult) -> None:
        self.ended.append(result)
        if result.status == "completed":
            self.outputs[result.id] = result.output
            if result.data is not None:
                self.data[result.id] = result.data

    def _build(self, request: TaskRequest) -> AgentLoop[Any, Any]:
        return self.build(request, self.context)


# --- What `job_start` records of a job, so that `resume` can load it again ----------------


@reads("job spec")
def spec_digest(path: str | Path) -> str:
    """The sha256 of a spec file's bytes, in hex."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def job_record(job: Job, *, user_skills: bool = False, resumed: bool = False) -> JobStart:
    """The job's `job_start`: what `resume` takes from it (spec, spec_sha256, inputs, model,
    model_options, permissions, disclosure, user_skills and fail_on_skill_error when set,
    output_step). No key is among them: settings name the variable that holds one
    (`api_key_env`), never its value."""
    source = job.source
    spec = str(Path(source).resolve()) if source is not None else None
    digest = job.spec_sha256
    if digest is None and source is not None and Path(source).is_file():
        digest = spec_digest(source)  # a job validated from data its caller read
    return JobStart(
        agent="job",
        name=job.name,
        steps=len(job.plan),
        spec=spec,
        spec_sha256=digest,
        inputs={name: value for name, value in job.inputs.items() if value is not None},
        model=job.model.name,
        model_options=job.model.options(),
        permissions=permissions_record(job),
        disclosure=job.disclosure,
        user_skills=True if user_skills else None,
        fail_on_skill_error=True if job.fail_on_skill_error else None,
        output_step=job.output_step,
        resumed=True if resumed else None,
    )


def permissions_record(job: Job) -> dict[str, Any]:
    """The job's permissions as its spec (and the flags) gave them, as JSON values."""
    return job.permissions.model_dump(mode="json")
