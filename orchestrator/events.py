"""The events of a run: one typed model per kind, and the union every reader parses into.

A trace is one JSON object per line, one event each (trace/writer.py writes them). Every event
has `seq`, `ts`, `run`, `attempt`, `agent` and `type` (`EventBase`); `type` names its kind,
and the kind's model below says what else it carries. `parse_event` turns one line's object
into its model, or None when the line is no event of a known kind and shape (from a newer
version of the format, or damaged): readers skip and count those. This module is the
reference of the trace format (docs/trace.md lists the kinds).

Extra fields are allowed on every kind (`extra="allow"`, kept in `model_extra`): a field a
newer version adds, or one an executor adds (a Ray worker's `worker`), neither makes an older
reader skip the event nor is lost to a reader that wants it. What a kind declares is checked
strictly (no text read as a number, no number as true/false), so a reader can trust it.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal, Self, TypedDict, TypeGuard, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    TypeAdapter,
    ValidationError,
    field_serializer,
)

from .messages import Message, ToolSpec, Usage

EVENT_SCHEMA_VERSION = 2
"""The version of the trace format; the first event each attempt writes carries it (`schema`)."""

MAX_PROBLEMS = 20
"""How many skipped lines (or events) a reader names in its `problems`; the rest are counted."""

Event = dict[str, Any]
"""An event as its line holds it, raw: what `as_line()` gives, and a reader of the file sees."""

Number = int | float


def is_event(value: object) -> TypeGuard[Event]:
    """True for a dict with an integer `seq` and text `type` and `agent`: an event."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("seq"), int)
        and not isinstance(value.get("seq"), bool)
        and isinstance(value.get("type"), str)
        and isinstance(value.get("agent"), str)
    )


def new_run_id() -> str:
    """A run id, unique across runs started in the same second: `20260514-153012-4f9a2c`."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


_CONFIG = ConfigDict(
    strict=True, extra="allow", use_attribute_docstrings=True, populate_by_name=True
)


class _Part(BaseModel):
    model_config = _CONFIG


class TokenCounts(_Part):
    """Tokens as an event records them (`Usage.record()`): the cache counts only when some."""

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cache_read_tokens: int = 0
    """Input tokens the provider's prompt cache served."""
    cache_write_tokens: int = 0
    """Input tokens the provider wrote to its prompt cache."""

    @classmethod
    def of(cls, usage: Usage) -> Self:
        """The counts of `usage`, as a line holds them: the cache counts only when some."""
        return cls.model_validate(usage.record())


class CallUsage(TokenCounts):
    """A model call's tokens: the three counts are always there."""

    input_tokens: int
    output_tokens: int
    total_tokens: int


class ForkTask(_Part):
    """One task of a `fork` event's graph."""

    id: str | int
    path: str
    """The task's agent path: the caller's path plus `/id` (a job's steps: just `id`)."""
    agent: str | None = None
    """The sub-agent (definition) that runs it."""
    depends_on: list[str]


class CompactedResult(_Part):
    """One tool result a compaction replaced by its stub."""

    index: int
    """Its index in the conversation."""
    call_id: str | None = None
    tool: str | None = None
    tokens: int | None = None
    """Our count of the result it replaced."""
    stub: str


InputKind = Literal["approval", "question", "remote", "elicitation"]
"""Who waits for a person: a call the permissions mark `ask`, the agent's own question
(`ask_user`), a remote agent's input-required, an MCP server's elicitation."""
InputForm = Literal["yes_no", "choice", "text", "schema"]
"""What an answer must be: yes or no, one of `choices`, free text, or JSON valid against a
JSON Schema (an MCP server's form)."""
AnswerAction = Literal["accept", "decline", "cancel"]
"""What the person did with a request: answered it, declined it, or dismissed it."""


class InputRequest(_Part):
    """What a run waits for a person to answer (agent/waiting.py). Its text comes from a
    model, a remote agent or a server: it is data shown to the person, never instructions."""

    id: str
    """Short and stable: the same call asks under the same id in every attempt."""
    agent: str
    """The path of the agent whose call waits (`planner/review`)."""
    call_id: str
    """The waiting tool call: on resume the answer becomes its result."""
    kind: InputKind
    question: str
    form: InputForm = "text"
    choices: list[str] | None = None
    """For the `choice` form: the answers it takes."""
    input_schema: dict[str, JsonValue] | None = None
    """For the `schema` form: the JSON Schema an answer must be valid against."""
    source: str
    """Who asks, for the person: `agent planner`, `remote agent 'billing'`, `MCP server 'db'`."""
    tool: str | None = None
    """For an approval: the tool the call would run."""
    state: JsonValue = None
    """What the waiting tool needs to go on when answered (a remote task's id, a server's
    request state); never shown as the question."""
    expires_at: float | None = None
    """Unix time after which an answer comes too late (the asker's own expiry)."""

    def shown(self) -> dict[str, JsonValue]:
        """The request as a result shows it (`run --json`, a batch's line, `trace list`):
        without what the waiting tool keeps to go on (`state`)."""
        return self.model_dump(mode="json", exclude_none=True, exclude={"state"})


class Answer(_Part):
    """A person's answer to one `InputRequest`, checked against its form."""

    id: str
    """The request it answers."""
    value: JsonValue = None
    """True/False for `yes_no`; the choice; the text; the JSON for `schema`."""
    action: AnswerAction = "accept"
    by: str = "person"
    """Who answered: `person`, or the policy (`policy: deny`)."""


_LINE: dict[str, Any] = {"by_alias": True, "exclude_unset": True, "exclude_none": True}


class EventBase(BaseModel):
    """What every event has. Its fields are read as attributes; `as_line()` gives the line
    it was (a dict of JSON values)."""

    model_config = _CONFIG

    seq: int = 0
    """1, 2, 3, ... in the order events were recorded, across all agents and attempts. The
    trace sets it, with `ts`, `run` and `attempt`, when it records the event: whoever makes
    an event gives its `agent` and its kind's own fields."""
    ts: float | None = None
    """Unix time in seconds."""
    run: str | None = None
    """The run's id: the same in every event of a trace."""
    attempt: int = 1
    """1; 2, 3, ... for the events a resumed run appended."""
    agent: str
    """The agent's path (`planner/summarize`); `job` for a job's own events."""
    mac: str | None = None
    """The line's signature, chained to the line before it (security/signing.py)."""
    schema_version: int | None = Field(default=None, alias="schema")
    """`EVENT_SCHEMA_VERSION` of the writer, on the first event each attempt writes."""

    def as_line(self) -> Event:
        """The event as its line has it: the fields it was given that are not null, as JSON
        values (a value JSON has no form for, as its text)."""
        return self.model_dump(mode="json", fallback=str, **_LINE)

    def as_json(self) -> str:
        """The event's line: `as_line()` as JSON text."""
        return self.model_dump_json(fallback=str, **_LINE)


# --- An agent's run ------------------------------------------------------------------------


class RunStart(EventBase):
    """An agent's run begins."""

    type: Literal["run_start"] = "run_start"
    ts: float = 0.0
    model: str | None = None
    """The agent's model string."""
    tools: list[str] | None = None
    """The names of its tools array."""
    max_steps: int | None = None
    max_tokens: int | None = None
    budget_remaining: Number | None = None
    depth: int | None = None
    preloaded: list[str] | None = None
    """The skills it starts with loaded, when any."""
    resumed: bool | None = None
    """A run resumed from an earlier attempt: it goes on in the same conversation."""
    kept: int | None = None
    """For a resumed run, how many of its recorded messages it goes on from."""
    steps: int | None = None
    """For a resumed run, its steps so far."""
    usage: TokenCounts | None = None
    """For a resumed run, its tokens so far."""
    task: str | None = None
    sandbox: str | None = None
    """Where the run's commands run, when it allows any: `bubblewrap (...)`, `container`,
    or `none` (unconfined)."""
    output: dict[str, str] | None = None
    """The typed answer it is asked for: its `mode` and `name`."""


class RunStartFields(TypedDict, total=False):
    """What an agent's extensions and a resumed run add to its `run_start`."""

    preloaded: list[str]
    output: dict[str, str]
    resumed: bool
    kept: int
    steps: int
    usage: TokenCounts


class RunEnd(EventBase):
    """An agent's run ended."""

    type: Literal["run_end"] = "run_end"
    ts: float = 0.0
    status: str
    """`completed`, `max_steps`, `budget_exhausted`, `loop_detected`, `cancelled`, `error`..."""
    output: str | None = None
    steps: int | None = None
    usage: TokenCounts | None = None
    cost: Number | None = None
    """US dollars, when its model has a price."""
    error: str | None = None
    refused: dict[str, str] | None = None
    """What the run's safety rules refused every time it was tried."""
    empty_answer: bool | None = None
    """It completed with an empty answer."""
    data: JsonValue = None
    """Its validated structured answer (JSON values), when it was asked for one."""
    validated: bool | None = None
    """For an agent given an output type, whether its answer validated (`data`); absent
    for one without."""
    waiting: list[str] | None = None
    """For a run that ended `input_required`: the requests it waits on (their ids)."""


class MessageEvent(EventBase):
    """A message joins the agent's conversation (system, user, assistant, tool)."""

    type: Literal["message"] = "message"
    ts: float = 0.0
    message: Message
    """The whole message (its fields at their defaults left out of the line)."""

    @field_serializer("message")
    def _message_line(self, message: Message) -> dict[str, Any]:
        return message.model_dump(mode="json", exclude_defaults=True)


class ModelCall(EventBase):
    """A model call returned."""

    type: Literal["model_call"] = "model_call"
    ts: float = 0.0
    step: int
    model: str | None = None
    """The agent's model string."""
    response_model: str | None = None
    """The model the provider said answered, when it did."""
    response_id: str | None = None
    """The provider's id of the response, when it gave one."""
    tool_choice: str | None = None
    tools: list[str] | None = None
    """The names in the request's tools array, in order."""
    tools_digest: str | None = None
    """A digest of the tools' schemas: a replay tells a changed array or schema by it."""
    tool_specs: list[ToolSpec] | None = None
    """The tools array as sent (names, descriptions, schemas), on the first call of the
    trace that sends it; later calls with the same `tools_digest` leave it out."""
    input_estimate: int | None = None
    """Our count of the request."""
    usage: CallUsage
    """What the call was charged."""
    reported: bool | None = None
    """True if the provider's usage was taken as it came."""
    finish_reason: str | None = None
    duration_ms: Number | None = None
    budget_remaining: Number | None = None
    budget_remaining_usd: Number | None = None
    max_output_tokens: int | None = None
    """The answer allowance the call asked for."""
    allowance_cut_from: int | None = None
    """The allowance the agent would have asked for, when the token budget had less left (the
    call asked for what was left, down to the model's floor)."""
    cost: Number | None = None
    """US dollars, when the model has a price."""
    usage_doubt: str | None = None
    """Why the provider's usage was not believed."""
    usage_raw: JsonValue = None
    """What the provider sent as usage, when it was not believed."""


class ModelError(EventBase):
    """A model call failed (after its retries) or was cancelled."""

    type: Literal["model_error"] = "model_error"
    ts: float = 0.0
    step: int
    model: str
    error: str
    cancelled: bool | None = None
    duration_ms: Number
    """How long it waited."""


class ModelRetry(EventBase):
    """A model adapter retries a request (docs/models.md)."""

    type: Literal["model_retry"] = "model_retry"
    provider: str | None = None
    request_attempt: int | None = None
    """Which try of the request failed, from 1 (`attempt` is the run's, as on every event)."""
    status: int | None = None
    """The HTTP status that asked for the retry (absent: the connection failed)."""
    delay: Number | None = None
    """Seconds before the retry."""
    error: str | None = None


class ModelWait(EventBase):
    """A model call waited for one of its endpoint's concurrency slots."""

    type: Literal["model_wait"] = "model_wait"
    provider: str | None = None
    endpoint: str | None = None
    waited_ms: Number | None = None
    limit: int | None = None


class ModelStreamFallback(EventBase):
    """A streamed request the server could not serve is asked for again whole."""

    type: Literal["model_stream_fallback"] = "model_stream_fallback"
    provider: str | None = None
    endpoint: str | None = None
    request: str | None = None
    """The request's shape: whether tools were offered, and the tool choice."""
    error: str | None = None


class ToolStart(EventBase):
    """A tool call starts running."""

    type: Literal["tool_start"] = "tool_start"
    ts: float = 0.0
    call_id: str
    name: str
    via: str | None = None
    """`call_skill_tool` when the model called it through the dispatcher."""
    args: dict[str, JsonValue] | None = None


class ToolEnd(EventBase):
    """A tool call finished (or failed)."""

    type: Literal["tool_end"] = "tool_end"
    ts: float = 0.0
    call_id: str
    name: str
    error_type: str | None = None
    """The kind of failure; absent on success."""
    duration_ms: Number


class Approval(EventBase):
    """A tool call was admitted or refused by the permissions or a person."""

    type: Literal["approval"] = "approval"
    call_id: str
    name: str
    decision: str
    by: str
    rule: str | None = None
    reason: str | None = None


class InputRequested(EventBase):
    """A call of the run waits for a person's answer (agent/waiting.py)."""

    type: Literal["input_request"] = "input_request"
    request: InputRequest


class InputAnswered(EventBase):
    """An answer given to a waiting request, recorded first in the attempt that uses it."""

    type: Literal["input_answer"] = "input_answer"
    answer: Answer
    late: bool | None = None
    """It came after the request's expiry: the asker is told so, not given the value."""


class Compact(EventBase):
    """The conversation was compacted to fit the model's context window."""

    type: Literal["compact"] = "compact"
    step: int | None = None
    """The model call it was made for."""
    window: int | None = None
    window_source: str | None = None
    """`setting`, `known model`, `server` or `refusal`."""
    compact_at: Number | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None
    scale: Number | None = None
    """The provider's tokens per token of ours, once a refusal taught it."""
    strategy: str | None = None
    """`mask`, `summarize`, or the class name of the extension that compacted its own way."""
    replaced: list[CompactedResult] | None = None
    summary_agent: str | None = None
    """The path of the one-step agent that wrote the summary of what was cut."""
    summary_tokens: int | None = None
    """What writing the summary cost (its own line among the run's children)."""
    summary_error: str | None = None
    summary_cut_to: int | None = None
    """The summary was longer than a summary may be (the model ignored its output cap) and
    was cut to this many tokens."""
    summary_dropped: str | None = None
    """Why the summary was not carried (no room for an answer with it): the run went on
    without it, as `mask` would."""


FILES_LISTED = 50
"""The files an agent's working record lists by name, the newest; the older ones are only
counted, so the record and its events stay small however many files a run changes."""


class Note(EventBase):
    """The agent kept its working record with the `note` tool (`text`), or its run changed a
    file (`changed`)."""

    type: Literal["note"] = "note"
    text: str | None = None
    """The whole note, as it now stands; absent on a file change's event."""
    files: list[str] = Field(default_factory=list)
    """On a `note` call's event, the files the record lists: the newest the run's tools had
    changed by then (at most `FILES_LISTED`)."""
    changed: str | None = None
    """On a file change's event, the one file the run's tools changed."""
    files_changed: int | None = None
    """How many files the run's tools had changed by then, listed or not."""


class ContextWindow(EventBase):
    """The model's server was asked for its context window."""

    type: Literal["context_window"] = "context_window"
    tokens: int | None = None
    """What it said; absent when it did not say."""
    source: str


class SkillLoaded(EventBase):
    """`load_skill` added a skill to the agent (not on a repeat load)."""

    type: Literal["skill_loaded"] = "skill_loaded"
    skill: str
    tools: list[str] | None = None
    """The tool names it added."""


class SkillFailed(EventBase):
    """A skill's code failed when an agent loaded (or preloaded) it: its `tools.py` did not
    import, or one of its MCP servers did not start. The run goes on without those tools,
    unless it was asked to fail on that (`fail_on_skill_error`)."""

    type: Literal["skill_failed"] = "skill_failed"
    skill: str
    error: str
    """What failed, and why."""


# --- Task graphs ---------------------------------------------------------------------------


class Fork(EventBase):
    """A task graph is about to run: a `fork` call (agent: the caller) or a job's steps."""

    type: Literal["fork"] = "fork"
    tasks: list[ForkTask]
    """Its tasks in the order given."""
    background: bool | None = None
    """Started by `fork(..., wait=false)`."""


class TaskStart(EventBase):
    """A task starts, its dependencies done (agent: the task's path)."""

    type: Literal["task_start"] = "task_start"
    id: str
    depends_on: list[str]
    executor: str
    """`local`, `ray` or `a2a`."""
    worker: str


class TaskEnd(EventBase):
    """A task ended, or was skipped without starting (agent: the task's path)."""

    type: Literal["task_end"] = "task_end"
    id: str
    status: str
    reason: str | None = None
    usage: TokenCounts | None = None
    """The task's whole subtree, when it ran."""
    restored: bool | None = None
    """Kept by a resumed run from an earlier attempt."""
    steps: int | None = None
    background: bool | None = None
    overlap_s: Number | None = None
    """Seconds a background task ran while its caller did its own work."""


class BackgroundDelivered(EventBase):
    """Results of background tasks reached the agent that started them."""

    type: Literal["background_delivered"] = "background_delivered"
    ids: list[str]
    via: str | None = None
    """`turn`, `wait_tasks`, `cancel_tasks` or `answer`."""


class BackgroundCancel(EventBase):
    """`cancel_tasks` ends background tasks."""

    type: Literal["background_cancel"] = "background_cancel"
    ids: list[str]


class BackgroundSettle(EventBase):
    """An agent's run is about to end with background tasks still running."""

    type: Literal["background_settle"] = "background_settle"
    choice: str
    """`wait` or `cancel`."""
    ids: list[str]
    reason: str | None = None


# --- A job -----------------------------------------------------------------------------------


class JobStart(EventBase):
    """A job run (or attempt) begins (agent: `job`)."""

    type: Literal["job_start"] = "job_start"
    name: str
    steps: int
    spec: str | None = None
    """The spec file."""
    spec_sha256: str | None = None
    inputs: dict[str, JsonValue] | None = None
    model: JsonValue = None
    """The model's name (a mapping with a `name` in older traces)."""
    model_options: dict[str, JsonValue] | None = None
    permissions: dict[str, JsonValue] | None = None
    disclosure: str | None = None
    user_skills: bool | None = None
    fail_on_skill_error: bool | None = None
    output_step: str | None = None
    resumed: bool | None = None


class JobEnd(EventBase):
    """A job run (or attempt) ends, also when cancelled (agent: `job`)."""

    type: Literal["job_end"] = "job_end"
    status: str
    usage: TokenCounts | None = None
    cost: Number | None = None
    error: str | None = None
    outputs: list[str] | None = None
    """Paths the run and earlier runs of the job created in the workspace."""
    written: list[str] | None = None
    """Files this run created or changed."""


class Retry(EventBase):
    """`resume --retry-failed`: the failed tasks this attempt runs again (agent: `job`)."""

    type: Literal["retry"] = "retry"
    paths: list[str]


# --- Events of optional parts ---------------------------------------------------------------


class PartEvent(EventBase):
    """An event of an optional part of the package (A2A, say): the part declares its kinds as
    subclasses, each with its own `type` and `part`, and registers them (`declare_part_kinds`)
    where they are made. A reader of the core carries such an event through without knowing
    its kind: read from a file where the part is not loaded, it is a `PartEvent` that keeps
    every field of its line. What any part's event may say to the core's readers is declared
    here: the tokens spent elsewhere for its agent, and what its agent is doing."""

    type: str
    part: str
    """The part that declared the kind: `a2a`."""
    usage: TokenCounts | None = None
    """Tokens spent elsewhere on the agent's behalf (what a remote agent reported): counted
    into the agent's own."""
    activity: str | None = None
    """What the agent is doing now, in words, for a live view; `""`: it stopped."""
    note: str | None = None
    """One line about it (a remote task's last message), for a live view."""


_PART_KINDS: dict[str, type[PartEvent]] = {}


def declare_part_kinds(*kinds: type[PartEvent]) -> None:
    """Make `kinds` known to every reader of this process: a line of one of them is read as
    its own model. A kind the core has, or another part declared, is refused."""
    for kind in kinds:
        name = kind.model_fields["type"].default
        if not isinstance(name, str) or name in EVENT_KINDS:
            raise ValueError(f"{kind.__name__}: a part's event kind needs a type of its own")
        known = _PART_KINDS.setdefault(name, kind)
        if known is not kind:
            raise ValueError(f"event kind {name!r} is declared by {known.__name__} already")


# --- The trace itself ------------------------------------------------------------------------


class ListenerError(EventBase):
    """A listener of the trace raised; the run went on without it for that event."""

    type: Literal["listener_error"] = "listener_error"
    listener: str
    """What the listener is (its repr)."""
    error: str


CoreEvent = Annotated[
    RunStart
    | RunEnd
    | MessageEvent
    | ModelCall
    | ModelError
    | ModelRetry
    | ModelWait
    | ModelStreamFallback
    | ToolStart
    | ToolEnd
    | Approval
    | InputRequested
    | InputAnswered
    | Compact
    | Note
    | ContextWindow
    | SkillLoaded
    | SkillFailed
    | Fork
    | TaskStart
    | TaskEnd
    | BackgroundDelivered
    | BackgroundCancel
    | BackgroundSettle
    | JobStart
    | JobEnd
    | Retry
    | ListenerError,
    Field(discriminator="type"),
]
"""Every event of the core, told apart by `type`."""

TraceEvent = CoreEvent | PartEvent
"""Every event a run writes: the core's kinds, and those of the optional parts (A2A...)."""

Listener = Callable[[TraceEvent], None]
"""What hears a Trace's events as they happen: the very object recorded, typed."""

_ADAPTER: TypeAdapter[CoreEvent] = TypeAdapter(CoreEvent)

EVENT_KINDS: frozenset[str] = frozenset(
    kind
    for model in get_args(get_args(CoreEvent)[0])
    for kind in get_args(model.model_fields["type"].annotation)
)
"""The `type` of every kind of the core's events."""


def parse_event(data: Mapping[str, Any]) -> TraceEvent | None:
    """The typed event `data` is, or None when it is no event of a known kind and shape."""
    return event_or_problem(data)[0]


def event_or_problem(data: Mapping[str, Any]) -> tuple[TraceEvent | None, str | None]:
    """The typed event `data` is, or None and what is wrong with it (for a reader to say).
    A part's event is read as its declared kind, or, where that part is not loaded, as a
    `PartEvent` keeping its fields."""
    if not is_event(data):
        return None, "not an event"
    kind = data["type"]
    if kind in EVENT_KINDS:
        try:
            return _ADAPTER.validate_python(data), None
        except ValidationError as error:  # its location begins with the kind's tag
            return None, problem_in(kind, error, first=1)
    model = _PART_KINDS.get(kind, PartEvent if isinstance(data.get("part"), str) else None)
    if model is None:
        return None, f"an event of an unknown kind {kind!r}"
    try:
        return model.model_validate(data), None
    except ValidationError as error:
        return None, problem_in(kind, error, first=0)


_WANTED = {
    "string_type": "text",
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "true/false",
    "dict_type": "an object",
    "model_type": "an object",
    "list_type": "a list",
    "literal_error": "one of its known values",
}


def problem_in(kind: str, error: ValidationError, first: int = 0) -> str:
    """What is wrong with an event of `kind`, in words; `first` is where the field's name
    begins in the error's location (after a union's tag: 1)."""
    wrong = error.errors(include_url=False)[0]
    where = [str(part) for part in wrong["loc"][first:]]
    name = where[0] if len(where) == 1 else ".".join(where)
    if wrong["type"] == "missing":
        return f"a {kind} event without {name!r}"
    given = wrong["input"]
    wanted = _WANTED.get(wrong["type"])
    if wanted is not None:
        return f"a {kind} event whose {name!r} is {type(given).__name__}, not {wanted}"
    return f"a {kind} event whose {name!r} is wrong: {wrong['msg']}"
