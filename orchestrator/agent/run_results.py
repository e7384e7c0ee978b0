"""What runs return: `RunResult` for an agent run, `TaskResult` for one task of a fork.

Both are plain pydantic models (serializable, no live objects), so a task could run in another
process or on another machine and send its result back.

An answer has three faces. `RunResult.output` is the answer as the agent's output type made it
(a `RunResult[City]` holds a `City`; a run without an output type, its text); `text` is the
answer as text, always (for a typed run, the validated value's JSON); `data` the validated
value as JSON values, for what reads JSON (templating, eval, result files). A result read back
from JSON (a trace, a results file) has no Python type to rebuild: its `output` is `data`.
A `TaskResult` is what a parent reads of its child: its `output` is the child's text (what
the parent's observation shows), its `data` the same JSON values, and `run.output` the typed
value.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeGuard, cast, get_args

from pydantic import BaseModel, Field, PrivateAttr, computed_field
from typing_extensions import TypeVar

from ..errors import ModelError, NoOutput, RetryableModelError
from ..events import InputRequest
from ..messages import Message, Usage

Status = Literal[
    "completed",
    "max_steps",
    "budget_exhausted",
    "loop_detected",
    "context_full",
    "output_invalid",
    "cancelled",
    "input_required",
    "error",
]
TaskStatus = Status | Literal["skipped"]
OutputT = TypeVar("OutputT", default=str)
"""What a run's `output` is: its agent's output type; `str` for an agent without one."""
STATUSES: frozenset[str] = frozenset(get_args(Status))
TASK_STATUSES: frozenset[str] = STATUSES | {"skipped"}


def is_status(value: object) -> TypeGuard[Status]:
    """Whether `value` (read from a trace, say) is a run's status."""
    return value in STATUSES


def is_task_status(value: object) -> TypeGuard[TaskStatus]:
    """Whether `value` (read from a trace, say) is a task's status."""
    return value in TASK_STATUSES


class ErrorDetail(BaseModel):
    """What ended a run as `error`, for a program to act on (`RunResult.error_detail`)."""

    type: str = Field(description="The error's class name, e.g. `RetryableModelError`.")
    message: str
    provider: str | None = Field(
        default=None, description="The provider whose call failed, when a model call did."
    )
    status: int | None = Field(default=None, description="The HTTP status, when a reply had one.")
    retryable: bool = Field(
        default=False,
        description="A later attempt may succeed (a 429, a 5xx, a timeout, a dropped "
        "connection), though the connection's own retries were spent: the caller may run "
        "again later. False for a refusal that will not change (a 400, a bad key).",
    )
    retry_after: float | None = Field(
        default=None, description="Seconds the provider asked to wait before trying again."
    )

    @classmethod
    def of(cls, error: BaseException, message: str | None = None) -> ErrorDetail:
        """The detail of `error`; `message` replaces its text (the run's `error`)."""
        text = message if message is not None else str(error) or type(error).__name__
        if not isinstance(error, ModelError):
            return cls(type=type(error).__name__, message=text)
        # A retryable failure the connection gave up on after its own retries is raised as a
        # plain ModelError caused by it: another attempt later may still succeed.
        cause = error.__cause__
        retrying = (
            error
            if isinstance(error, RetryableModelError)
            else cause
            if isinstance(cause, RetryableModelError)
            else None
        )
        return cls(
            type=type(error).__name__,
            message=text,
            provider=error.provider or None,
            status=error.status,
            retryable=retrying is not None,
            retry_after=retrying.retry_after if retrying is not None else None,
        )


class RunResult(BaseModel, Generic[OutputT]):
    """How one agent run ended, what it said, and what it cost.

    `output` is the answer: for an agent given `output_type=T`, the validated `T` (pydantic's
    `TypeAdapter(T)` made it); for one without, the final text. `text` is the answer as text
    and `data` its JSON values (module docstring)."""

    agent: str
    status: Status
    text: str = Field(
        default="",
        description="The answer as text: the model's final text, or a typed run's validated "
        "answer as JSON (its raw answer when none validated).",
    )
    validated: bool | None = Field(
        default=None,
        description="For an agent given an output type (agent/output.py), whether its answer "
        "validated: True, `output` is the value; False, reading `output` raises NoOutput. "
        "None for an agent without one (`output` is the text).",
    )
    data: Any = Field(
        default=None,
        description="A typed run's validated answer as JSON values; None without an output "
        "type, and when no answer validated.",
    )
    messages: list[Message] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    cost: float | None = Field(
        default=None, description="US dollars this agent's calls cost; None when unpriced."
    )
    steps: int = 0
    error: str | None = None
    error_detail: ErrorDetail | None = Field(
        default=None,
        description="A run that ended `error`: what failed, as fields (type, provider, HTTP "
        "status, whether another attempt may help).",
    )
    trace: str | None = Field(
        default=None, description="The trace file this run wrote to, when it wrote to one."
    )
    children: list[TaskResult] = Field(default_factory=list)
    waiting: list[InputRequest] = Field(
        default_factory=list,
        description="A run that ended `input_required`: what it waits for a person to "
        "answer (agent/waiting.py); resumed with the answers, it goes on.",
    )
    refused: dict[str, str] = Field(
        default_factory=dict,
        description="What the run's safety rules refused every time it was tried: a tool's "
        "name (or `load_skill:NAME` for a skill), with the reason last given. A run can "
        "complete with entries here: the work they stood for was not done.",
    )
    # The validated value itself, in a box (a valid answer may be None): set by the run that
    # made it, not by JSON, which has no Python type to rebuild.
    _value: tuple[Any] | None = PrivateAttr(default=None)

    def with_output(self, value: object) -> RunResult[Any]:
        """A copy of this typed run's result whose answer validated as `value` (the loop
        makes it as the run ends: the value is not read back from JSON)."""
        answered: RunResult[Any] = self.model_copy(update={"validated": True})
        answered._value = (value,)
        return answered

    @property
    def output(self) -> OutputT:
        """The answer: the validated `T` of a typed run (read back from JSON: its JSON values,
        `data`), or the text of a run without an output type.

        Raises NoOutput, naming the status, for a typed run that ended without a valid answer
        (`text` holds what the model wrote)."""
        if self._value is not None:
            return cast(OutputT, self._value[0])
        if self.validated is None:
            return cast(OutputT, self.text)
        if self.validated:
            return cast(OutputT, self.data)
        why = f": {self.error}" if self.error else ""
        raise NoOutput(
            f"the run of {self.agent!r} ended {self.status} without a valid answer{why} "
            "(its text is in .text)"
        )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def empty_answer(self) -> bool:
        """Completed with a final answer that is empty or only whitespace: the run ended
        cleanly and said nothing, which is rarely what was wanted."""
        return self.status == "completed" and not self.text.strip()

    def refused_by_agent(self) -> dict[str, dict[str, str]]:
        """`refused` of this agent and of every descendant that has any, by agent path."""
        found = {self.agent: dict(self.refused)} if self.refused else {}
        for child in self.children:
            if child.run is not None:
                found.update(child.run.refused_by_agent())
        return found

    def cost_by_agent(self) -> dict[str, float]:
        """Cost of this agent and every descendant that has one, keyed by agent path."""
        costs = {self.agent: self.cost} if self.cost is not None else {}
        for child in self.children:
            if child.run is not None:
                for agent, cost in child.run.cost_by_agent().items():
                    costs[agent] = costs.get(agent, 0.0) + cost
        return costs

    @property
    def total_cost(self) -> float | None:
        """US dollars of the whole tree; None when no call of it had a price."""
        costs = self.cost_by_agent()
        return sum(costs.values()) if costs else None

    def usage_by_agent(self) -> dict[str, Usage]:
        """Usage of this agent and every descendant, keyed by agent path."""
        totals = {self.agent: self.usage}
        for child in self.children:
            _add_usage(totals, child.usage_by_agent())
        return totals

    @property
    def total_usage(self) -> Usage:
        return sum(self.usage_by_agent().values(), Usage())

    def __repr__(self) -> str:
        text = self.text if len(self.text) <= 60 else f"{self.text[:57]}..."
        return (
            f"RunResult(agent={self.agent!r}, status={self.status!r}, text={text!r}, "
            f"steps={self.steps}, messages={len(self.messages)}, "
            f"tokens={self.usage.total_tokens}, children={len(self.children)})"
        )


if TYPE_CHECKING:
    AnyRunResult = RunResult[Any]
else:
    # The bare class at run time: pydantic holds any run's result as it is, where a field of
    # `RunResult[Any]` would revalidate it into a copy without its validated value.
    AnyRunResult = RunResult


class TaskResult(BaseModel):
    """One task of a fork: how it ended and, if it ran, its agent's whole result."""

    id: str
    agent: str = Field(description="The sub-agent definition that ran it.")
    path: str = Field(description="The agent path in the trace, e.g. planner/load.")
    status: TaskStatus
    output: str = Field(
        default="",
        description="The task's answer as text: what its parent's observation shows (a typed "
        "answer's JSON; its value is `run.output`).",
    )
    reason: str | None = Field(default=None, description="Why it was skipped or failed.")
    depends_on: list[str] = Field(default_factory=list)
    usage: Usage = Field(
        default_factory=Usage, description="Tokens of the task's agent and every agent it forked."
    )
    cost: float | None = Field(
        default=None, description="US dollars of the task's tree; None when unpriced."
    )
    steps: int = 0
    started_at: float | None = None
    ended_at: float | None = None
    run: AnyRunResult | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def empty_answer(self) -> bool:
        """Completed with an empty (or whitespace-only) answer."""
        return self.status == "completed" and not self.output.strip()

    @property
    def data(self) -> Any:
        """The task's validated structured answer as JSON values (`RunResult.data`), when its
        agent had an output type and the answer validated; None otherwise."""
        return self.run.data if self.run is not None else None

    def usage_by_agent(self) -> dict[str, Usage]:
        return self.run.usage_by_agent() if self.run else {}


def refusals(messages: Sequence[Message]) -> dict[str, str]:
    """What was refused each time it was tried (tool results of type `denied`), by tool name
    (`load_skill:NAME` for a skill), with the last reason; tried at least once, never let."""
    if not any(message.error_type == "denied" for message in messages):
        return {}  # most runs: nothing refused, and the calls need no names
    names: dict[str | None, str] = {}
    for message in messages:
        for call in message.tool_calls:
            names[call.id] = _refusal_key(call.name, call.arguments)
    denied: dict[str, str] = {}
    allowed: set[str] = set()
    for message in messages:
        if message.role != "tool" or message.tool_call_id not in names:
            continue
        key = names[message.tool_call_id]
        if message.error_type == "denied":
            lines = (message.content or "").strip().splitlines()
            denied[key] = lines[0][:300] if lines else "refused"
        elif message.error_type not in ("skipped", "aborted", "input_required"):
            allowed.add(key)
    return {key: reason for key, reason in denied.items() if key not in allowed}


def _refusal_key(tool: str, arguments: str) -> str:
    if tool != "load_skill":
        return tool
    try:
        name = json.loads(arguments).get("name")
    except (ValueError, AttributeError):
        return tool
    return f"load_skill:{name}" if isinstance(name, str) else tool


def _add_usage(totals: dict[str, Usage], more: dict[str, Usage]) -> None:
    for agent, usage in more.items():
        totals[agent] = totals[agent] + usage if agent in totals else usage


RunResult.model_rebuild()
