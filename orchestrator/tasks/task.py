"""A task of a fork or a job step, as plain serializable models: what to run and how it ended.

`TaskSpec` is a task as the model (or the job spec) writes it; `TaskRequest` is everything an
executor needs to run it once its dependencies are done. Results are `TaskResult`
(agent/run_results.py). None of them holds a live object, so a task can run in another process.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from ..models.base import OutputMode

TASK_ID = r"^[A-Za-z0-9_-]{1,48}$"


class TaskSpec(BaseModel):
    """One task of a fork, as the model writes it."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=TASK_ID, description="A short unique id, e.g. 'load' or 'review-2'.")
    task: str = Field(min_length=1, description="What to do: a complete, self-contained brief.")
    agent: str | None = Field(
        default=None, description="Which sub-agent runs it; the general one if left out."
    )
    depends_on: list[str] = Field(
        default_factory=list, description="Ids of tasks whose results this one needs."
    )
    skills: list[str] | None = Field(
        default=None, description="Limit the task to these skills (within what its agent allows)."
    )
    # Sent in every fork tool's schema: kept to one short line, the null branch left out.
    output_schema: Annotated[
        dict[str, Any] | None,
        WithJsonSchema({"type": "object", "description": "JSON Schema its answer must follow."}),
    ] = None
    # How its answer is asked for, and how many invalid ones go back (agent/output.py): the
    # names say it, so no description is sent.
    output_mode: Annotated[
        OutputMode | None, WithJsonSchema({"enum": list(get_args(OutputMode))})
    ] = None
    output_retries: Annotated[int | None, Field(ge=0), WithJsonSchema({"type": "integer"})] = None


class TaskRequest(BaseModel):
    """Everything needed to run one task, once its dependencies are done."""

    spec: TaskSpec
    agent: str
    path: str
    prompt: str
    depth: int


class TaskOrigin(BaseModel):
    """Who started a task, as another process needs it to build the task's agent itself.

    `step`: a job step. `fork`: a task forked by the agent at `parent`, whose model is the run's
    own (`model` None) or the one with these settings (`model`, a `ModelSettings` as JSON),
    running the `context: fork` skill `running`, if any.
    """

    kind: Literal["step", "fork"] = "step"
    parent: str = "job"
    model: str | None = None
    running: str | None = None
