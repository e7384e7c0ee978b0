"""The agent loop.

One step: count the request, reserve it on the budget, call the model, append the assistant
message, and run its tool calls, appending one result per call. A message without tool calls
is the final answer. The invariants (DESIGN.md) are kept here and in `batch.py`: results for
every call in model order, failures as observations, a hard step cap with a forced last answer,
a repeat detector, a budget wrap-up, and a consistent record on cancellation. The model call
and what it is charged are `model_call.py`; a turn's tool calls, `turn_calls.py`; a run that
goes on from its trace, `restart.py`; keeping the conversation inside the model's context
window, `compaction.py`.

Repeat detection: a turn repeats the one before when it makes the same calls with the same
arguments, in the same order. At `REPEAT_WARN_AT` repeats in a row the agent gets a note; one
more ends its run as `loop_detected`.

An agent given an output type has each final answer checked (`output.py`): one that does not
validate goes back to the model, and with no try left the run ends as `output_invalid`.

`AgentLoop` knows nothing of skills or forks: those are extensions (`extension.py`) that add a
section to the system prompt and tools, from the layers above.

What one run is given (`RunSettings`: the same for `run`, `run_sync` and `iter`) and how it is
stopped from outside (`CancelHandle`, `RunCancelled`) are here too, with the loop they drive.
"""

from __future__ import annotations

import asyncio
import json
import threading
import warnings
from collections.abc import Callable, Coroutine, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, AsyncExitStack, contextmanager
from dataclasses import dataclass, field
from functools import lru_cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from typing_extensions import TypedDict, Unpack

from ..errors import (
    ConfigError,
    ContextWindowExceeded,
    ModelError,
    RunHalted,
    SafetyWarning,
    UntrustedUsage,
)
from ..events import (
    Compact,
    ContextWindow,
    InputRequest,
    RunEnd,
    RunStart,
    RunStartFields,
    TokenCounts,
    TraceEvent,
)
from ..messages import Message, ToolCall, Transcript, Usage
from ..models.base import ChatModel, Model, ModelResponse, OutputMode, ToolChoice, unwrap
from ..models.resolve import resolve_model
from ..models.window import compaction_threshold, context_window
from ..security import Permissions
from ..security.permissions import UNCONFINED_WARNING
from ..tokens import TokenCounter, default_counter
from ..trace import Trace, TraceBusy, TraceExists, open_trace
from .compaction import (
    COMPACTION_STRATEGIES,
    DEFAULT_COMPACT_AT,
    MAX_REFUSALS,
    MIN_ANSWER_TOKENS,
    NOTE,
    NOTE_CHARS,
    READ_COMPACTED,
    SUMMARY_SYSTEM,
    SUMMARY_TOKENS,
    CompactedResults,
    Compaction,
    CompactionPlan,
    CompactionStrategy,
    ContextFit,
    WorkingRecord,
    carried_block,
    check_compact_at,
    compact,
    compaction_request,
    cuttable,
    never_cut,
    restore_record,
    summary_task,
    with_carried,
    without_summary,
)
from .extension import Extension, assemble
from .model_call import call_model, run_prefixes
from .run_results import ErrorDetail, OutputT, RunResult, Status, TaskResult, refusals
from .token_budget import TokenBudget
from .tools import (
    ON_INPUT,
    Answerer,
    Approver,
    Deps,
    OnInput,
    Tool,
    ToolContext,
    Toolset,
    limit_time,
)
from .turn_calls import ToolBatch

if TYPE_CHECKING:
    from ..trace import AgentHistory
    from .output import OutputSpec, StructuredOutput, Verdict
    from .restart import CutTurn, Restart
    from .run_events import AgentRun

T = TypeVar("T")

DEFAULT_MAX_STEPS = 20
"""The most model calls an agent makes unless told otherwise: the same for `Agent`,
`Orchestrator`, a job's budget and a forked task."""
DEFAULT_OUTPUT_RETRIES = 2
"""How many answers that fail the output type go back to the model before the run ends as
`output_invalid`, unless told otherwise: the same for `Agent`, a job, a sub-agent definition
and a forked task."""
MIN_WRAP_UP_OUTPUT = 64
WRAP_UP_NOTE = (
    "[orchestrator] The token budget is nearly spent. Give your best final answer now from "
    "what you have; no more tool calls are possible."
)
FORCED_ANSWER_NOTE = (
    "[orchestrator] This is the last step. Give your final answer now; no more tool calls are "
    "possible."
)
FINAL_TOOL_WRAP_UP_NOTE = (
    "[orchestrator] The token budget is nearly spent. Call {tool} now with your best answer "
    "from what you have; no other tool calls are possible."
)
FINAL_TOOL_LAST_STEP_NOTE = (
    "[orchestrator] This is the last step. Call {tool} now with your final answer; no other "
    "tool calls are possible."
)
NO_ROOM_TO_ANSWER = "no room was left for a last answer"
CANCELLED = "cancelled through its cancel handle"
LEFT_EARLY = "cancelled: its events' consumer left before the run ended"
INTERRUPTED = "cancelled: a trace listener raised KeyboardInterrupt or SystemExit"
REPEAT_WARN_AT = 3
REPEAT_NOTE = (
    "[orchestrator] You have called {name} with the same arguments {count} times in a row and "
    "got the same kind of answer. Do something different, or give your final answer. Calling "
    "it again the same way ends the run."
)


ModelLike = ChatModel | str
"""What an agent accepts as its model: a ChatModel, or a model string (`openai:gpt-4o-mini`)."""


# What one run is given, and how it is stopped from outside.
#
# `RunSettings` is the one set of per-run settings that `run`, `run_sync` and `iter` take, as
# keywords or as a dict built ahead and spread (`agent.run(task, **settings)`); generic in the
# agent's deps, so a type checker checks `deps` against the agent's `deps_type`.
#
# `CancelHandle` is a run's cancel button: `cancel()` (from any thread) ends each run given it
# `cancelled`, each returning its own `RunResult`. A run whose awaiting task is cancelled
# (asyncio's `task.cancel()`) ends with the same complete record and raises `RunCancelled`, a
# `CancelledError` carrying that result. `RunStop` tells the two apart inside the run, as
# `asyncio.timeout` tells its own cancellation from one from outside: the task's cancellations
# are counted (`Task.cancelling`), and one the run asked for itself is taken back
# (`Task.uncancel`).


class RunSettings(TypedDict, Generic[Deps], total=False):
    """The settings of one run, the same for `run`, `run_sync` and `iter` (every key may be
    left out; None means the agent's own)."""

    deps: Deps
    """The caller's own object, `ctx.deps` in every tool of the run (forks' included); of
    the agent's `deps_type`."""
    trace: Trace | str | Path | None
    """This run's trace: a Trace, or a path (one that holds a run is refused)."""
    permissions: Permissions | None
    """What the run's tools may do, in place of the agent's."""
    max_tokens: int | None
    """The run's token cap, in place of the agent's."""
    max_cost: float | None
    """The run's spend cap in US dollars."""
    time_limit: float | None
    """Seconds after which the run ends `cancelled`, in place of the agent's."""
    history: AgentHistory | None
    """What a cut-off run of this agent recorded, to go on from (docs/resume.md)."""
    cancel: CancelHandle | None
    """A cancel handle: its `cancel()` ends the run `cancelled`, and the run returns."""
    on_input: OnInput | None
    """Where a person must answer and none is live: `wait` (the run ends `input_required`),
    `deny` or `fail`, in place of the agent's (agent/waiting.py)."""


class CancelHandle:
    """Ends the runs it is given to (`cancel=handle`): `cancel()` stops each, which ends
    `cancelled` with a complete record (started calls answered `aborted`, the others
    `skipped`) and returns its `RunResult`. Thread-safe; a run given a handle already
    cancelled ends at once, before its first model call."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cancelled = False
        self._stops: list[Callable[[], None]] = []

    @property
    def cancelled(self) -> bool:
        """Whether `cancel()` was called."""
        return self._cancelled

    def cancel(self) -> None:
        """Stop every run given this handle, now and later."""
        with self._lock:
            if self._cancelled:
                return
            self._cancelled = True
            stops = list(self._stops)
        for stop in stops:
            stop()

    @contextmanager
    def watching(self, stop: Callable[[], None]) -> Iterator[None]:
        """Within the block, `cancel()` calls `stop` (at once, if it was called before)."""
        with self._lock:
            self._stops.append(stop)
            cancelled = self._cancelled
        if cancelled:
            stop()
        try:
            yield
        finally:
            with self._lock:
                self._stops.remove(stop)

    def __repr__(self) -> str:
        return f"CancelHandle(cancelled={self._cancelled})"


class RunCancelled(asyncio.CancelledError):
    """The task awaiting a run was cancelled: the run ended `cancelled` with a complete
    record, and `result` is its `RunResult` (what it spent, its messages, its trace).

    A `CancelledError`, so asyncio treats it as the cancellation it is (and `except
    Exception` does not catch it); the first await of a task that ran the run raises this
    same object (asyncio raises a plain `CancelledError` to later awaits of the task).
    """

    def __init__(self, result: RunResult[Any], *args: object) -> None:
        super().__init__(*args)
        self.result = result


class RunStop:
    """Stops one run's task from outside it (a cancel handle, an interrupt), so that the run
    ends `cancelled` and returns, instead of raising. Made in the run's task; `stop` may be
    called from any thread, and acts once, while the run is `active`."""

    __slots__ = ("_cancelling", "_loop", "_task", "active", "reason")

    def __init__(self) -> None:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a run is stopped in the task that runs it")
        self._task = task
        self._loop = asyncio.get_running_loop()
        self._cancelling = task.cancelling()
        self.active = True
        self.reason: str | None = None
        """Why the run was stopped, once it was: its result's `error`."""

    def stop(self, reason: str) -> None:
        try:
            self._loop.call_soon_threadsafe(self._fire, reason)
        except RuntimeError:
            pass  # the loop has closed: the run has ended

    def _fire(self, reason: str) -> None:
        if self.active and self.reason is None:
            self.reason = reason
            self._task.cancel()

    def caused(self) -> bool:
        """Asked once, when the run was cancelled: whether this stop did it alone (its
        cancellation is then taken back), not the task's awaiter."""
        self.active = False
        return self.reason is not None and self._task.uncancel() <= self._cancelling


@dataclass(slots=True)
class RepeatDetector:
    """Counts turns in a row that repeat the previous turn's calls exactly."""

    last_turn: tuple[tuple[str, object], ...] | None = None
    count: int = 0

    def too_often(self, calls: Sequence[ToolCall]) -> bool:
        """Record a turn; True once the repeats go past the warning."""
        turn = tuple((call.name, _arguments_value(call.arguments)) for call in calls)
        self.count = self.count + 1 if turn == self.last_turn else 1
        self.last_turn = turn
        return self.count > REPEAT_WARN_AT

    def note(self) -> str:
        """The warning the agent reads at `REPEAT_WARN_AT` repeats."""
        name = ", ".join(name for name, _ in self.last_turn or ())
        return REPEAT_NOTE.format(name=name, count=self.count)


def _arguments_value(arguments: str) -> object:
    """Arguments as a comparable value: parsed JSON, or the raw text if it is not JSON."""
    try:
        return json.loads(arguments)
    except (ValueError, RecursionError):
        return arguments


class SummaryRecord(TypedDict, total=False):
    """What a `compact` event says of the summary it carried, or did not."""

    summary_agent: str
    summary_tokens: int
    summary_cut_to: int
    summary_error: str
    summary_dropped: str


@dataclass(slots=True)
class RunState:
    """Everything one run of an agent keeps while it goes: what the agent was built with
    stays on the agent; what one run was given (`run`'s deps, trace, permissions, limits) is
    here, in its context and budget."""

    transcript: Transcript
    context: ToolContext[Any]  # the caller's deps, of whatever type the caller gave
    budget: TokenBudget
    steps: int = 0
    usage: Usage = field(default_factory=Usage)
    cost: float | None = None  # US dollars, when the model has a price
    repeats: RepeatDetector = field(default_factory=RepeatDetector)
    batch: ToolBatch | None = None
    result: RunResult[Any] | None = None
    on_event: Callable[[TraceEvent], object] | None = None  # model adapters' events
    resume: CutTurn | None = None  # a resumed run's unfinished last turn
    fit: ContextFit = field(default_factory=lambda: ContextFit(None))
    asked_server: bool = False  # the server was asked for its window (in this attempt or before)
    stop: RunStop | None = None  # what stops it from outside (a cancel handle, an interrupt)
    deadline: asyncio.Timeout | None = None  # its time limit, when it has one
    time_limit: float | None = None
    sent_back: str | None = None  # why the last answer did not validate, while it is retried
    waiting: list[InputRequest] = field(default_factory=list)  # what a person must answer
    input_refused: str | None = None  # a call needed a person, and on_input is `fail`

    def cancelled_because(self) -> str | None:
        """Why the run was cancelled, when it was by its own handle, interrupt or time limit
        (None: its awaiting task was cancelled)."""
        if self.stop is not None and self.stop.reason is not None:
            return self.stop.reason
        if self.deadline is not None and self.deadline.expired():
            return f"time limit of {self.time_limit:g} s reached"
        return None


class AgentOptions(TypedDict, total=False):
    """What an agent is built with besides its model, tools, output type and deps type: the
    keywords of `AgentLoop` (and `Agent`), each described in `AgentLoop`'s Args, with the
    defaults its signature gives. Written once, here, for every overload of both."""

    system: str | None
    name: str
    max_steps: int
    max_tokens: int | None
    budget: TokenBudget | None
    trace: Trace | str | Path | None
    max_output_tokens: int
    tool_concurrency: int
    tool_timeout: float | None
    permissions: Permissions | None
    extensions: Iterable[Extension]
    counter: TokenCounter | None
    depth: int
    time_limit: float | None
    approve: Approver | None
    answer: Answerer | None
    on_input: OnInput
    questions: bool
    compact_at: float | None
    compaction: CompactionStrategy
    note: bool
    note_chars: int
    output_mode: OutputMode | None
    output_retries: int


class AgentLoop(Generic[Deps, OutputT]):
    """A function-calling agent loop. `await agent.run(task)` or `agent.run_sync(task)`.

    Generic in its deps and its output: `AgentLoop(model, deps_type=Shop, output_type=City)`
    is an `AgentLoop[Shop, City]`, whose runs take `deps=Shop(...)` and give a
    `RunResult[City]`.

    Args:
        model: A ChatModel, or a model string such as `openai:gpt-4o-mini`.
        tools: `@tool` functions (plain functions are made tools too).
        system: The system prompt; extensions add their sections after it.
        name: The agent's path in traces (`planner/summarize`).
        max_steps: A hard cap on model calls; the last one is made with tools disabled.
        max_tokens: This agent's token cap; with a shared `budget`, a cap inside it.
        budget: A `TokenBudget` shared with other agents (a run's one budget).
        trace: A path or a Trace. A trace opened to resume a run makes a run at a path cut
            off there go on from its last complete turn (agent/restart.py). A path is where
            each run writes: one that already holds a run (an earlier run of this agent, or
            one going on) makes the run write beside it under the next free numbered name
            (`agent.jsonl`, `agent-2.jsonl`, ...); `RunResult.trace` says which.
        max_output_tokens: The output allowance each call reserves and asks for.
        tool_concurrency: How many calls of one turn run at once.
        tool_timeout: Seconds a tool call may take, unless its tool sets its own.
        permissions: What the tools may do (`Permissions`; a dict of its fields is parsed
            into one). Parsed once, here: every tool reads `ctx.permissions`.
        extensions: Add system-prompt sections and tools (the skills and fork extensions of
            the layers above), and may guard calls.
        counter: The token counter (the offline default).
        depth: How deep in the fork tree this agent runs (0: the top).
        time_limit: Seconds after which a run ends as `cancelled`, its record complete.
        approve: Asked before calls the permissions mark `ask` (agent/turn_calls.py).
        answer: Asked the run's questions (`ask_user`) while a person is there (a
            terminal); None from it leaves the question waiting (agent/waiting.py).
        on_input: Where a person must answer and none is live (no `approve` for a call marked
            `ask`, the agent's own question): `wait` ends the run `input_required`, its
            requests in `RunResult.waiting`, to be resumed with the answers; `deny` refuses
            the call (the model reads why); `fail` ends the run `error` (agent/waiting.py).
        questions: Give the agent the `ask_user` tool: a question to the user, whose answer
            is the call's result (the run may wait for it).
        compact_at: The share of the model's context window past which the conversation is
            compacted (agent/compaction.py; by default the model's `compact_at` setting, else
            0.8); used only when the window is known.
        compaction: How the conversation is compacted: `mask` (tool results become stubs,
            oldest first) or `summarize` (the same, and at each compaction a one-step agent
            writes a structured summary of what is cut: one more call, on the budget, under
            its own path `<name>/summary-<step>`). An extension may compact its own way
            (`Extension.compact`).
        note: Give the agent the `note` tool: a working record it keeps (decisions, dead
            ends, files changed, open questions), carried through every compaction with the
            files the run's tools changed.
        note_chars: The most characters the note may hold.
        output_type: What the final answer must be (agent/output.py): a Python type (a
            pydantic model, a dataclass, a TypedDict, a scalar, a union), a JSON Schema dict,
            or an `OutputSpec`. The result's `output` is the validated value: an
            `AgentLoop(model, output_type=City)` runs to a `RunResult[City]` (a JSON Schema
            gives JSON values, typed `Any`); without one, `output` is the text.
        output_mode: How the model is asked for it: `tool`, `native` or `prompted` (by
            default the model's own choice: `Model.output_modes`).
        output_retries: How many answers that do not validate go back to the model before
            the run ends as `output_invalid`.
        deps_type: The type of the caller's object every run must be given (`deps`,
            `ToolContext.deps`): a run without one is refused before it starts, and a type
            checker checks the `deps` given. Without it the agent takes no deps (`None`),
            unless its type says otherwise (`agent: AgentLoop[Shop] = AgentLoop(model)`).

    `run`, `run_sync` and `iter` take the same per-run settings (`RunSettings`, as keywords):
    `deps`, and in place of what the agent was built with for that run only, `trace`,
    `permissions`, `max_tokens`, `time_limit`; a money cap `max_cost`, the `history` of a
    cut-off run, and a `cancel` handle. The agent keeps nothing of a run, so one agent may
    serve many runs, at the same time too.
    """

    @overload
    def __init__(
        self,
        model: ModelLike,
        tools: Iterable[Tool | Callable[..., object]] = (),
        *,
        output_type: type[OutputT] | OutputSpec[OutputT] | None = None,
        deps_type: type[Deps] | None = None,
        **options: Unpack[AgentOptions],
    ) -> None: ...
    @overload
    def __init__(
        self: AgentLoop[Deps, Any],
        model: ModelLike,
        tools: Iterable[Tool | Callable[..., object]] = (),
        *,
        output_type: object,
        deps_type: type[Deps] | None = None,
        **options: Unpack[AgentOptions],
    ) -> None: ...
    def __init__(
        self,
        model: ModelLike,
        tools: Iterable[Tool | Callable[..., object]] = (),
        *,
        system: str | None = None,
        name: str = "agent",
        max_steps: int = DEFAULT_MAX_STEPS,
        max_tokens: int | None = None,
        budget: TokenBudget | None = None,
        trace: Trace | str | Path | None = None,
        max_output_tokens: int = 4096,
        tool_concurrency: int = 8,
        tool_timeout: float | None = None,
        permissions: Permissions | None = None,
        extensions: Iterable[Extension] = (),
        counter: TokenCounter | None = None,
        depth: int = 0,
        time_limit: float | None = None,
        approve: Approver | None = None,
        answer: Answerer | None = None,
        on_input: OnInput = "wait",
        questions: bool = False,
        compact_at: float | None = None,
        compaction: CompactionStrategy = "mask",
        note: bool = False,
        note_chars: int = NOTE_CHARS,
        output_type: object = None,
        output_mode: OutputMode | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
        deps_type: type[Deps] | None = None,
    ) -> None:
        if max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        if compaction not in COMPACTION_STRATEGIES:
            raise ValueError(
                f"compaction must be one of {', '.join(COMPACTION_STRATEGIES)}, got "
                f"{compaction!r} (a compactor of one's own is an extension: Extension.compact)"
            )
        if note_chars < 1:
            raise ValueError(f"note_chars must be at least 1, got {note_chars}")
        if on_input not in ON_INPUT:
            raise ValueError(f"on_input must be one of {', '.join(ON_INPUT)}, got {on_input!r}")
        if note:
            tools = [*tools, NOTE]
        if questions:
            from .waiting import ASK_USER  # loaded by an agent that may ask the user

            tools = [*tools, ASK_USER]
        self.model = resolve_model(model)
        self.output: StructuredOutput[Any] | None = None
        if output_type is not None or output_mode is not None:
            from .output import structured_output  # loaded by an agent given an output type

            self.output = structured_output(output_type, output_mode, self.model, output_retries)
        # The final-answer tool and the schema's prompt section join like an extension's.
        self.extensions = [*extensions, *([self.output] if self.output is not None else [])]
        self.tools, self.system = assemble(tools, system, self.extensions)
        self.name = name
        self.max_steps = max_steps
        self.max_tokens = max_tokens
        self.budget = budget
        self.trace = trace
        self.max_output_tokens = max_output_tokens
        self.tool_concurrency = tool_concurrency
        self.tool_timeout = tool_timeout
        self.permissions = Permissions.coerce(permissions)
        self.counter = counter or default_counter()
        self.depth = depth
        self.time_limit = time_limit
        self.approve = approve
        self.answer = answer
        self.on_input: OnInput = on_input
        self.compact_at = compact_at or compaction_threshold(self.model) or DEFAULT_COMPACT_AT
        check_compact_at(self.compact_at)
        self.window = context_window(self.model)
        self.compaction: CompactionStrategy = compaction
        self.note_chars = note_chars
        self.deps_type = deps_type
        # Who asks for deps of which class: checked against each run's deps (`_refuse`). Only
        # those that ask are named (the names are for an error message).
        self._deps_wanted = [
            *([(f"the agent {name!r} declares", deps_type)] if deps_type is not None else []),
            *(
                (f"its tool {t.name!r} asks for", t.deps_type)
                for t in self.tools
                if t.deps_type is not None
            ),
        ]

    def run_sync(self, task: str, **settings: Unpack[RunSettings[Deps]]) -> RunResult[OutputT]:
        """`run` from synchronous code."""
        return run_sync(self.run(task, **settings))

    def run(
        self, task: str, **settings: Unpack[RunSettings[Deps]]
    ) -> Coroutine[Any, Any, RunResult[OutputT]]:
        """Run until a final answer or a stop condition: `await agent.run(task)`. (It returns
        the run's own coroutine, not one that awaits it: one frame less for each sub-agent of
        a wide fork.)

        The settings (`RunSettings`) are this run's: `deps` is handed to every tool of the run
        as `ctx.deps` (forked sub-agents' included), required when the agent declares a
        `deps_type`; `trace`, `permissions`, `max_tokens` and `time_limit` replace the agent's
        for this run only; `max_cost` caps its spend in US dollars. `history` resumes a run
        that was cut off: what `trace.history(path)` gives for this agent's path, the trace it
        recorded opened to resume (docs/resume.md); the run goes on from its last complete
        turn (agent/restart.py).

        A run stopped from outside ends `cancelled` with its record complete (started calls
        answered `aborted`, the others `skipped`): past its time limit, or through its `cancel`
        handle, it returns that result (`error` says which); when the task awaiting it is
        cancelled, it raises `RunCancelled`, a `CancelledError` carrying the result. A trace
        listener that raises `KeyboardInterrupt` or `SystemExit` stops the run the same way,
        and once its record is complete the top run raises that exception.
        """
        return self._run(task, settings)

    def iter(self, task: str, **settings: Unpack[RunSettings[Deps]]) -> AgentRun[OutputT]:
        """The run's typed events as they happen, every agent of its tree included, and its
        result at the end (agent/run_events.py); the settings are `run`'s:

            async with agent.iter(task, deps=shop) as run:
                async for event in run:
                    ...
            result = run.result

        Leaving the `async with` early (a `break`, an error, the consumer cancelled) ends the
        run `cancelled`, its record complete, and its result is `run.result` all the same.
        """
        from .run_events import AgentRun  # loaded by a run whose events are iterated

        self._refuse(settings)
        stop = CancelHandle()
        return AgentRun(partial(self._run, task, settings, stop_handle=stop), stop.cancel)

    def _refuse(self, settings: RunSettings[Deps]) -> None:
        """Refuse, before anything starts, a run its settings cannot make: a history of
        another agent, no deps (or deps of another type) for an agent that declares them."""
        history = settings.get("history")
        if history is not None and history.path != self.name:
            raise ValueError(
                f"the history of {history.path!r} cannot resume the agent {self.name!r}"
            )
        deps = settings.get("deps")
        for who, wanted in self._deps_wanted:
            kind = wanted.__qualname__ if isinstance(wanted, type) else repr(wanted)
            if deps is None:
                raise ConfigError(
                    f"{who} deps of type {kind} and the run of {self.name!r} was given none: "
                    f"give them to the run, run(task, deps={kind}(...))"
                )
            try:
                wrong = not isinstance(deps, wanted)
            except TypeError:  # a type isinstance cannot check (a generic alias, a protocol)
                wrong = False
            if wrong:
                raise ConfigError(
                    f"{who} deps of type {kind} and the run of {self.name!r} was given a "
                    f"{type(deps).__qualname__}"
                )

    async def _run(
        self,
        task: str,
        settings: RunSettings[Deps],
        *,
        attach: Callable[[Trace], AbstractContextManager[object]] | None = None,
        stop_handle: CancelHandle | None = None,
    ) -> RunResult[OutputT]:
        """One run with its settings; `attach` listens to its trace (`iter`: a trace in
        memory when the run has none), `stop_handle` stops it as its own `cancel` does."""
        self._refuse(settings)
        limit = settings.get("time_limit")
        limit = limit if limit is not None else self.time_limit
        handles = [
            (handle, why)
            for handle, why in ((settings.get("cancel"), CANCELLED), (stop_handle, LEFT_EARLY))
            if handle is not None
        ]
        async with AsyncExitStack() as scopes:
            scopes.enter_context(run_prefixes())  # this run's tree waits only for itself
            for extension in self.extensions:  # what extensions hold for the run
                await scopes.enter_async_context(extension.run_scope())
            # Before a trace is opened: a refused run leaves no file.
            run_permissions = self._run_permissions(settings.get("permissions"))
            sandbox = _sandbox_at_start(run_permissions)
            opened, own_trace = self._open_trace(settings.get("trace"), heard=attach is not None)
            if own_trace:
                scopes.callback(opened.close)
            if attach is not None:
                scopes.enter_context(attach(opened))
            if opened.path is not None:
                # The run's trace is its checkpoint: read-only to its agents' file tools.
                run_permissions = run_permissions.protecting([opened.path])
            state = self._start(
                task,
                opened,
                deps=settings.get("deps"),
                permissions=run_permissions,
                max_tokens=settings.get("max_tokens"),
                max_cost=settings.get("max_cost"),
                history=settings.get("history"),
                sandbox=sandbox,
                on_input=settings.get("on_input"),
            )
            state.stop = stop = self._stopper(opened, handles, scopes)
            state.time_limit = limit
            try:
                if any(handle.cancelled for handle, _ in handles):  # before it began
                    self._record_cancelled(state, next(w for h, w in handles if h.cancelled))
                    assert state.result is not None
                    return state.result
                if limit is None:  # no timer to hold (a sub-agent without a limit of its own)
                    result = await self._loop(state)
                else:
                    async with limit_time(limit) as state.deadline:
                        result = await self._loop(state)
            except TimeoutError:
                if state.result is None:
                    raise
                result = state.result
            except asyncio.CancelledError as cancelled:
                if state.result is None:
                    raise
                if stop is None or not stop.caused():
                    if isinstance(cancelled, RunCancelled):
                        raise
                    raise RunCancelled(state.result, *cancelled.args) from cancelled
                result = state.result
            finally:
                if stop is not None:
                    stop.active = False
            if opened.interrupted is not None and self.depth == 0:
                raise opened.interrupted
            return result

    def _stopper(
        self, trace: Trace, handles: list[tuple[CancelHandle, str]], scopes: AsyncExitStack
    ) -> RunStop | None:
        """What stops the run from outside, for as long as `scopes` lasts: its handles, and
        an interrupt from a listener of its trace. None for a sub-agent given no handle: its
        parent's cancellation stops it."""
        if not handles and self.depth > 0:
            return None
        stop = RunStop()
        for handle, why in handles:
            scopes.enter_context(handle.watching(partial(stop.stop, why)))
        scopes.enter_context(trace.on_interrupt(partial(stop.stop, INTERRUPTED)))
        return stop

    def _open_trace(self, trace: Trace | str | Path | None, *, heard: bool) -> tuple[Trace, bool]:
        """The run's trace (its own, else the agent's) and whether the run opened it. A path
        the agent was built with is shared by its runs: each writes a file of its own there.
        A run whose events are `heard` and that records none gets a trace in memory."""
        if isinstance(trace, Trace | str | Path) or not isinstance(self.trace, str | Path):
            opened, own = open_trace(trace, default=self.trace)
        else:
            opened, own = _free_trace(Path(self.trace)), True
        if heard and not opened.recording:
            return Trace(), True
        return opened, own

    async def _loop(self, state: RunState) -> RunResult[Any]:
        try:
            await self._ask_window(state)
            if state.resume is not None:
                await self._finish_turn(state)
            while state.result is None:
                await self.step(state)
        except ContextWindowExceeded as exc:
            text = self._teach(state, exc)
            await self._end_early(state, "context_full", text, ErrorDetail.of(exc, text))
        except (ModelError, RunHalted) as exc:
            await self._end_early(state, "error", str(exc), ErrorDetail.of(exc))
        except Exception as exc:
            # A model adapter (or extension) of the user's own failed in a way it should not:
            # the run still ends with a result and a complete record.
            text = f"{type(exc).__name__}: {exc}"
            await self._end_early(state, "error", text, ErrorDetail.of(exc, text))
        except asyncio.CancelledError:
            try:
                await self._settle(state, answered=False)
            finally:
                self._record_cancelled(state)
            raise
        assert state.result is not None  # every way out of the loop above sets it
        return state.result

    async def step(self, state: RunState) -> None:
        """One model call and the tool calls it asked for; sets `state.result` when done."""
        for extension in self.extensions:
            extension.before_call(state.context)
        for extension in self.extensions:  # work beside the run that ended: after the last turn
            for arrival in extension.arrived(state.context):
                self._append(state, arrival)
        last_step = state.steps + 1 >= self.max_steps
        forced = last_step and self.max_steps > 1  # a one-step agent just answers
        if forced:
            self._append(state, Message.user(self._notes()[0]))
        choice: ToolChoice = "auto"
        if last_step:  # tools off, or only the final-answer tool
            choice = self.output.last_choice() if self.output is not None else "none"
        response = await self.call_model(state, choice)
        if response is None:
            await self._wrap_up(state)
            return
        message = response.message
        self._append(state, message)
        if not message.tool_calls:
            await self._answer(state, message, forced=forced, last_step=last_step)
        elif self.output is not None and self.output.answers_by_tool(message.tool_calls):
            await self._answer_by_tool(
                state, message.tool_calls, forced=forced, last_step=last_step
            )
        elif last_step:
            self._refuse_calls(state, message.tool_calls, "the step limit was reached")
            await self._settle(state, answered=False)
            self._finish(state, "max_steps", message.content or "")
        elif state.repeats.too_often(message.tool_calls):
            self._refuse_calls(state, message.tool_calls, "the same call was repeated again")
            await self._settle(state, answered=False)
            self._finish(state, "loop_detected", message.content or "")
        else:
            await self.run_tools(state, message.tool_calls)
            if (state.waiting or state.input_refused) and await self._waits(state):
                return
            if state.repeats.count == REPEAT_WARN_AT:
                self._append(state, Message.user(state.repeats.note()))

    async def call_model(
        self,
        state: RunState,
        tool_choice: ToolChoice,
        *,
        max_output_tokens: int | None = None,
    ) -> ModelResponse | None:
        """One model call (model_call.py), fitted to the context window and added to the run's
        spend; None when the budget cannot cover it. A provider that refuses the request as too
        long teaches the window (or its own counts): the request is compacted and sent again,
        up to `MAX_REFUSALS` times."""
        wanted = max_output_tokens or self.max_output_tokens
        for tries in range(MAX_REFUSALS + 1):
            output, counted = await self._fit(state, wanted, refused=tries > 0)
            sent, specs = state.transcript.view(), state.context.toolset.specs
            try:
                # Tools stay in the request even when disabled: the prompt prefix stays the
                # same (and provider caches warm), and Anthropic rejects tool blocks in a
                # request without tools.
                call = await call_model(
                    self.model,
                    sent,
                    specs,
                    counter=self.counter,
                    budget=state.budget,
                    tool_choice=tool_choice,
                    max_output_tokens=output,
                    agent=self.name,
                    step=state.steps + 1,
                    trace=state.context.trace,
                    input_tokens=counted,
                    on_event=state.on_event,
                    output_schema=self.output.request_schema if self.output else None,
                )
                break
            except ContextWindowExceeded as refusal:
                if tries == MAX_REFUSALS or not state.fit.learn(refusal, counted, output):
                    raise
        if call is None:
            return None
        fit = state.fit
        if call.prompt_tokens is not None and fit.window is not None:
            tools, reported = self.counter.count_tools(specs), call.prompt_tokens
            fit.measure.take(sent, tools, counted, reported, self.counter, fit.compactions)
        state.steps += 1
        state.usage = state.usage + call.usage
        if call.cost is not None:
            state.cost = (state.cost or 0.0) + call.cost
        if call.untrusted is not None:
            raise UntrustedUsage(call.untrusted, provider=self.model.name)
        return call.response

    async def _ask_window(self, state: RunState) -> None:
        """A window neither the settings nor the table know: ask the server, if it says. What
        it said is in the trace (`context_window`): a resumed run takes that, not a new ask."""
        model = self.model
        if state.fit.window is not None or state.asked_server:
            return
        if not (isinstance(model, Model) and model.asks_server_window):
            return
        answer = await model.server_window()
        window = answer if isinstance(answer, int) and answer > 0 else None
        state.asked_server = True
        state.context.trace.emit(ContextWindow, agent=self.name, tokens=window, source="server")
        self._use_server_window(state, window)

    @staticmethod
    def _use_server_window(state: RunState, window: int | None) -> None:
        if window is not None:
            state.fit.window, state.fit.source = window, "server"
            state.context.toolset.add(READ_COMPACTED)  # before the first request: advertised

    async def _fit(self, state: RunState, wanted: int, *, refused: bool = False) -> tuple[int, int]:
        """The output to ask for, within the window, compacting first when the conversation
        has grown past the threshold (or the provider has just `refused` it); and the
        request's counted tokens. Raises ContextWindowExceeded when not even a minimal answer
        fits."""
        counted = self.counter.count_request(state.transcript.view(), state.context.toolset.specs)
        fit = state.fit
        if fit.window is None:
            return wanted, counted
        fit.calibrated = self.counter.prompt_ratio(unwrap(self.model))
        # What one part read back may hold: what a compaction leaves (half the threshold).
        compacted = state.context.state_of(CompactedResults)
        compacted.part_tokens = int(fit.compact_at * fit.window / 2 / fit.ratio)
        compacted.counter = self.counter
        prompt = self._prompt(state, state.transcript.view(), counted)
        # Compaction first, at the threshold: the answer allowance is cut below what the
        # threshold leaves only when what is never cut takes more.
        if refused or fit.needs_compaction(prompt):
            await self._compact(state, counted)
            counted = self.counter.count_request(
                state.transcript.view(), state.context.toolset.specs
            )
            prompt = self._prompt(state, state.transcript.view(), counted)
        room = fit.window - fit.margin - prompt
        if room < MIN_ANSWER_TOKENS:
            kept = never_cut(state.transcript, self.counter)
            what = ", ".join(f"{kind} {fit.provider_tokens(n):,}" for kind, n in kept.items())
            raise ContextWindowExceeded(
                f"the conversation needs about {prompt:,} tokens of "
                f"{fit.describe()} of {self.model.name}, which leaves no room for an answer "
                f"(at least {MIN_ANSWER_TOKENS} tokens), even with every tool result compacted; "
                f"what is never cut takes about {fit.provider_tokens(sum(kept.values())):,} "
                f"tokens of it ({what})",
                provider=self.model.name,
                window=fit.window,
                prompt_tokens=prompt,
            )
        return min(wanted, room), counted

    def _prompt(self, state: RunState, messages: Sequence[Message], counted: int) -> int:
        """A request of `messages` (`counted` tokens of ours, the agent's tools included) in
        the provider's measure."""
        tools = self.counter.count_tools(state.context.toolset.specs)
        return state.fit.prompt(messages, tools, counted, self.counter)

    async def _compact(self, state: RunState, counted: int) -> None:
        """Replace older tool results with stubs (compaction.py): as an extension's compactor
        plans it, else by the agent's strategy (`mask`, or `summarize` with the model's
        summary of what is cut). The newest stub carries the working record and the summary;
        recorded as a `compact` event, and the conversation goes on in a new transcript.
        `counted` is the request's count (ours)."""
        fit = state.fit
        assert fit.window is not None
        record = state.context.state_of(WorkingRecord).render()
        # What the cut frees, in the provider's tokens: as its replies measured the results
        # that may go (a file's text may cost it less than the turns and stubs that stay).
        candidates = cuttable(state.transcript, needed=1)
        per_token = fit.measure.cost_of(state.transcript, candidates, self.counter) or fit.ratio
        tools = self.counter.count_tools(state.context.toolset.specs)
        measured = fit.measured(state.transcript.view(), tools, self.counter)
        excess = fit.excess(counted, measured, per_token)
        needed = fit.needed(counted, measured, per_token)
        plan, strategy = await self._plan(state, excess, needed, record)
        chosen = list(plan.cut) if plan is not None else None
        done = compact(state.transcript, self.counter, excess=excess, needed=needed, chosen=chosen)
        # The summary is kept only while there is room for it: what is never cut comes first,
        # and a run that could go on without the summary must not end for its sake.
        no_room = "no room for an answer with it in the request"
        event: SummaryRecord = {}
        if not done.replaced:
            messages = state.transcript.view()
            fits = self._answer_fits(state, messages)
            dropped = None if fits else without_summary(messages, self.counter)
            if dropped is None:
                return
            done, event["summary_dropped"] = dropped, no_room
        else:
            summary = plan.summary if plan is not None else None
            if plan is None and self.compaction == "summarize":
                summary, event = await self._summarize(state, done)
            carried = with_carried(done, carried_block(record, summary), self.counter)
            if summary and not self._answer_fits(state, carried.messages):
                carried = with_carried(done, carried_block(record, None), self.counter)
                event["summary_dropped"] = no_room
            done = carried
        state.transcript = Transcript(done.messages)
        state.context.state_of(CompactedResults).originals.update(done.originals)
        state.context.toolset.add(READ_COMPACTED, advertise=False)  # no-op when advertised
        fit.compactions += 1
        after = self.counter.count_request(state.transcript.view(), state.context.toolset.specs)
        state.context.trace.emit(
            Compact,
            agent=self.name,
            step=state.steps + 1,
            strategy=strategy,
            window=fit.window,
            window_source=fit.source,
            compact_at=fit.compact_at,
            tokens_before=counted,
            tokens_after=after,
            scale=round(fit.ratio, 4) if fit.ratio != 1.0 else None,
            replaced=[r.record() for r in done.replaced],
            **event,
        )

    def _answer_fits(self, state: RunState, messages: Sequence[Message]) -> bool:
        """Whether a request of `messages` leaves room in the window for a minimal answer."""
        counted = self.counter.count_request(messages, state.context.toolset.specs)
        room = state.fit.room(self._prompt(state, messages, counted))
        return room is None or room >= MIN_ANSWER_TOKENS

    async def _plan(
        self, state: RunState, excess: int, needed: int, record: str
    ) -> tuple[CompactionPlan | None, str]:
        """An extension's compaction plan and its name, or None and the agent's strategy."""
        fit = state.fit
        assert fit.window is not None
        request = compaction_request(
            state.transcript,
            self.counter,
            excess=excess,
            needed=needed,
            window=fit.window,
            record=record,
        )
        for extension in self.extensions:
            plan = await extension.compact(state.context, request)
            if plan is not None:
                return plan, type(extension).__name__
        return None, self.compaction

    async def _summarize(self, state: RunState, done: Compaction) -> tuple[str, SummaryRecord]:
        """The model's summary of what `done` cuts, written by a one-step agent of its own on
        the run's budget and trace (its own line among the run's children); its text ("" when
        it wrote none) and what the event says."""
        fit = state.fit
        assert fit.window is not None
        limit = int(fit.compact_at * fit.window / 2 / fit.ratio)
        writer = AgentLoop(
            self.model,
            system=SUMMARY_SYSTEM,
            name=f"{self.name}/summary-{state.steps + 1}",
            max_steps=1,
            budget=state.budget,
            trace=state.context.trace,
            max_output_tokens=SUMMARY_TOKENS,
            counter=self.counter,
            depth=self.depth + 1,
        )
        result = await writer.run(summary_task(state.transcript, done, self.counter, limit))
        state.context.children.append(
            TaskResult(
                id=writer.name.rpartition("/")[2],
                agent="summary",
                path=writer.name,
                status=result.status,
                output=result.text,
                usage=result.total_usage,
                cost=result.total_cost,
                steps=result.steps,
                run=result,
            )
        )
        summary = result.text.strip() if result.status == "completed" else ""
        # Bounded whatever the model wrote (a provider may ignore the output cap): the summary
        # rides in every request from now on, and must not grow from one cut to the next.
        summary, cut = self.counter.truncate(summary, SUMMARY_TOKENS)
        event: SummaryRecord = {
            "summary_agent": writer.name,
            "summary_tokens": result.total_usage.total_tokens,
        }
        if cut:
            event["summary_cut_to"] = SUMMARY_TOKENS
        if not summary:
            event["summary_error"] = result.error or f"no summary ({result.status})"
        return summary, event

    def _teach(self, state: RunState, exc: ContextWindowExceeded) -> str:
        """What a run that no longer fits its window says: the window when known, and what
        to change."""
        if state.fit.window is None:
            return (
                f"{exc}; the context window of {self.model.name} is not known here: set "
                "`context_window` in the model's settings (and a smaller `max_output_tokens`), "
                "or give the job less to read"
            )
        window = state.fit.describe()
        where = "" if window in str(exc) else f" ({window} of {self.model.name})"
        return (
            f"{exc}{where}; use a model with a larger window (`context_window` in its "
            "settings), a smaller `max_output_tokens`, or give the job less to read"
        )

    async def run_tools(
        self, state: RunState, calls: Sequence[ToolCall], known: Sequence[Message | None] = ()
    ) -> None:
        """Run one turn's calls, appending each result in the model's order as soon as the
        calls before it have theirs; `known` gives some calls their result in advance."""
        state.batch = ToolBatch(
            calls,
            state.context,
            concurrency=self.tool_concurrency,
            default_timeout=self.tool_timeout,
            on_result=partial(self._append, state),
            known=known,
        )
        await state.batch.run()
        state.waiting.extend(state.batch.waiting)
        state.input_refused = state.input_refused or state.batch.input_refused
        state.batch = None

    async def _end_early(
        self, state: RunState, status: Status, error: str, detail: ErrorDetail
    ) -> None:
        """End a run cut short (an error, a full window): the work beside it is settled, and
        the run gets its end on the record whatever settling raises."""
        if state.sent_back is not None:  # say what the answer being retried got wrong
            error = f"{error} (while its answer was sent back because {state.sent_back})"
        try:
            await self._settle(state, answered=False)
        except Exception as exc:
            error = f"{error} (then settling its background work failed: {exc!r})"
        finally:
            self._finish(state, status, _last_answer(state.transcript), error=error, detail=detail)

    async def _settle(self, state: RunState, *, answered: bool) -> bool:
        """Before the run ends, extensions settle the work going on beside it. True when what
        came in went to the agent (after an answer, with a step left), which answers again.
        With no step left there is no turn to take results in: the work is cancelled."""
        answered = answered and state.steps < self.max_steps
        arrived = [
            m for e in self.extensions for m in await e.settle(state.context, answered=answered)
        ]
        if not (answered and arrived):
            return False
        for message in arrived:
            self._append(state, message)
        return True

    async def _finish_turn(self, state: RunState) -> None:
        """A resumed run: give the cut turn its missing results (or end with its answer)."""
        cut, state.resume = state.resume, None
        if cut is not None and cut.calls:
            await self.run_tools(state, cut.calls, cut.known)
            if await self._waits(state):
                return
        if cut is not None and cut.final is not None:
            last_step = state.steps >= self.max_steps
            await self._answer(state, cut.final, forced=False, last_step=last_step)

    async def _waits(self, state: RunState) -> bool:
        """After a turn: end the run if a call needs a person's answer (`input_required`,
        to be resumed with it) or needed one the run could not wait for (`error`)."""
        if state.input_refused is not None:
            error = state.input_refused
            await self._end_early(
                state, "error", error, ErrorDetail(type="InputRefused", message=error)
            )
            return True
        if not state.waiting:
            return False
        await self._settle(state, answered=False)
        ids = ", ".join(r.id for r in state.waiting)
        self._finish(
            state,
            "input_required",
            _last_answer(state.transcript),
            error=f"waiting for a person's answer to {ids}",
        )
        return True

    async def _answer(
        self, state: RunState, message: Message, *, forced: bool, last_step: bool
    ) -> None:
        """A reply without tool calls: the final answer, checked against the output type when
        the agent has one."""
        if await self._settle(state, answered=True):
            return  # results of work beside the run came in: the agent answers again
        status: Status = "max_steps" if forced else "completed"
        if self.output is None:
            self._finish(state, status, message.content or "")
            return
        text = message.content or ""
        verdict = await self.output.check_text(state.context, text, can_retry=not last_step)
        self._take(state, verdict, status)

    async def _answer_by_tool(
        self, state: RunState, calls: Sequence[ToolCall], *, forced: bool, last_step: bool
    ) -> None:
        """A turn that calls the final-answer tool (agent/output.py): a valid answer ends the
        run and skips the turn's other calls; an invalid one is the call's error result, and
        the other calls run."""
        assert self.output is not None
        verdict = await self.output.check_calls(state.context, calls, can_retry=not last_step)
        if verdict.retry:
            await self.run_tools(state, calls, verdict.results)
            return
        for result in verdict.results:
            if result is not None:
                self._append(state, result)
        if await self._settle(state, answered=verdict.valid):
            return
        self._take(state, verdict, "max_steps" if forced else "completed")

    def _take(self, state: RunState, verdict: Verdict, status: Status) -> None:
        """End with a checked answer's value; or tell the model what to fix, and go on; or,
        with no try left, end as `output_invalid` with the last error and the raw answer."""
        if verdict.valid:
            self._finish(state, status, verdict.output, answer=verdict)
        elif verdict.retry:
            state.sent_back = verdict.error
            if verdict.note is not None:
                self._append(state, verdict.note)
        else:
            self._finish(state, "output_invalid", verdict.output, error=verdict.error)

    async def _wrap_up(self, state: RunState) -> None:
        """The budget cannot cover another call: one last one, if it fits, with tools disabled
        (or, in tool mode, only the final-answer tool allowed). An agent given an output type
        keeps a valid answer as its output; without one, `error` says why."""
        self._append(state, Message.user(self._notes()[1]))
        remaining = state.budget.remaining
        needed = self.counter.count_request(state.transcript.view(), state.context.toolset.specs)
        room = self.max_output_tokens if remaining is None else remaining - needed
        text = ""
        verdict: Verdict | None = None
        if room >= MIN_WRAP_UP_OUTPUT:
            choice = self.output.last_choice() if self.output is not None else "none"
            response = await self.call_model(
                state, choice, max_output_tokens=min(room, self.max_output_tokens)
            )
            if response is not None:
                self._append(state, response.message)
                verdict = await self._last_verdict(state, response.message)
                text = response.message.content or ""
        await self._settle(state, answered=False)
        if verdict is not None and verdict.valid:
            self._finish(state, "budget_exhausted", verdict.output, answer=verdict)
            return
        error = None
        if self.output is not None:
            why = verdict.error if verdict is not None else NO_ROOM_TO_ANSWER
            error = f"the token budget ran out before a valid answer: {why}"
        self._finish(state, "budget_exhausted", text or _last_answer(state.transcript), error=error)

    async def _last_verdict(self, state: RunState, message: Message) -> Verdict | None:
        """The wrap-up's reply judged as a final answer, with no try after it (None: the agent
        has no output type); its calls get their results."""
        if self.output is not None and self.output.answers_by_tool(message.tool_calls):
            verdict = await self.output.check_calls(
                state.context, message.tool_calls, can_retry=False
            )
            for result in verdict.results:
                if result is not None:
                    self._append(state, result)
            return verdict
        self._refuse_calls(state, message.tool_calls, "the budget is spent")
        if self.output is None:
            return None
        return await self.output.check_text(state.context, message.content or "", can_retry=False)

    def _notes(self) -> tuple[str, str]:
        """The last-step and wrap-up notes; in tool mode they say to call the final tool."""
        final = self.output.tool if self.output is not None else None
        if final is None:
            return FORCED_ANSWER_NOTE, WRAP_UP_NOTE
        return (
            FINAL_TOOL_LAST_STEP_NOTE.format(tool=final.name),
            FINAL_TOOL_WRAP_UP_NOTE.format(tool=final.name),
        )

    def _refuse_calls(self, state: RunState, calls: Sequence[ToolCall], reason: str) -> None:
        for call in calls:
            self._append(
                state, Message.tool_result(call, f"Skipped: {reason}.", error_type="skipped")
            )

    def _record_cancelled(self, state: RunState, why: str | None = None) -> None:
        if state.batch is not None:
            for result in state.batch.finish_cancelled():
                self._append(state, result)
            state.batch = None
        error = why or state.cancelled_because()
        self._finish(state, "cancelled", _last_answer(state.transcript), error=error)

    def first_call_tokens(self, task: str) -> int:
        """What the first model call of a run of `task` would reserve: input plus output (no
        more output than the model's window leaves, when it is known)."""
        messages = [Message.system(self.system)] if self.system else []
        messages.append(Message.user(task))
        specs = [t.spec for t in self.tools]
        if self.window is not None:
            specs.append(READ_COMPACTED.spec)
        counted = self.counter.count_request(messages, specs)
        output = self.max_output_tokens
        if self.window is not None:
            fit = ContextFit(
                self.window.tokens, calibrated=self.counter.prompt_ratio(unwrap(self.model))
            )
            output = max(0, min(output, fit.room(fit.provider_tokens(counted)) or 0))
        return counted + output

    def _start(
        self,
        task: str,
        trace: Trace,
        *,
        deps: object = None,
        permissions: Permissions,
        max_tokens: int | None = None,
        max_cost: float | None = None,
        history: AgentHistory | None = None,
        sandbox: str | None = None,
        on_input: OnInput | None = None,
    ) -> RunState:
        """A new run's state (or a resumed one's, from its `history`) with the run's
        permissions; `sandbox`: where its commands run (recorded at its start); the other
        keywords are `run`'s, None for the agent's own."""
        max_tokens = max_tokens if max_tokens is not None else self.max_tokens
        budget = self._run_budget(max_tokens, max_cost)
        context: ToolContext[Any] = ToolContext(  # not ToolContext[Any](): no __orig_class__
            agent=self.name,
            toolset=Toolset(self.tools),
            permissions=permissions,
            budget=budget,
            trace=trace,
            model=self.model,
            depth=self.depth,
            guards=[extension.guard for extension in self.extensions],
            preapprovers=[extension.preapproval for extension in self.extensions],
            approve=self.approve,
            answer=self.answer,
            on_input=on_input or self.on_input,
            deps=deps,
        )
        window = self.window
        fit = ContextFit(
            window.tokens if window else None,
            window.source if window else None,
            compact_at=self.compact_at,
        )
        state = RunState(transcript=Transcript(), context=context, budget=budget, fit=fit)
        # Read back what a compaction cut: in the tools array from the first request when the
        # window is known (the array never changes), else callable by name once one happens.
        if window is not None:
            context.toolset.add(READ_COMPACTED)
        if self.note_chars != NOTE_CHARS:  # else the record, made on its first use, has it
            context.state_of(WorkingRecord).limit = self.note_chars
        restart = None
        if history is not None:
            # Resuming is loaded only by a run that resumes (agent/restart.py).
            from .restart import restart_from

            restart = restart_from(
                history,
                context,
                extensions=self.extensions,
                notes={*self._notes(), FORCED_ANSWER_NOTE, WRAP_UP_NOTE},
                shared_budget=budget is self.budget,
            )
            state.transcript.extend(restart.messages)
            state.steps, state.usage, state.cost = restart.steps, restart.usage, restart.cost
            state.resume = restart.cut
            context.state_of(CompactedResults).originals.update(restart.compacted)
            if restart.server_window is not None and state.fit.window is None:
                state.asked_server = True
                self._use_server_window(state, restart.server_window[0])
            if restart.compacted:
                context.toolset.add(READ_COMPACTED, advertise=False)
            restore_record(context.state_of(WorkingRecord), restart.messages, context.toolset)
            for message in restart.messages:
                if message.role == "assistant" and message.tool_calls:
                    state.repeats.too_often(message.tool_calls)
        elif self.depth == 0 and trace.left_off(self.name):
            # Sub-agents get theirs from the restoring layer; the caller hands the top one's.
            warnings.warn(
                f"the agent {self.name!r} starts over on a trace opened to resume its run, "
                f"which was cut off: hand it its history to go on "
                f"(run(..., history=trace.history({self.name!r})), docs/resume.md)",
                stacklevel=3,
            )
        # A model adapter's own events (retries, fallbacks) go into the run's trace.
        if trace.recording:
            state.on_event = trace.record
            self._record_start(state, restart, max_tokens, sandbox)
        if not state.transcript:  # a new run (or one cut off before it had begun)
            if self.system:
                self._append(state, _system_message(self.system))
            self._append(state, Message.user(task))
        return state

    def _record_start(
        self,
        state: RunState,
        restart: Restart | None,
        max_tokens: int | None,
        sandbox: str | None,
    ) -> None:
        """The run's `run_start` event (its fields are made for a record only)."""
        added: RunStartFields = {}
        for extension in self.extensions:
            added.update(extension.start_record())
        if restart is not None:
            added.update(restart.started())
        state.context.trace.emit(
            RunStart,
            agent=self.name,
            model=self.model.name,
            tools=state.context.toolset.names,
            max_steps=self.max_steps,
            max_tokens=max_tokens,
            budget_remaining=state.budget.remaining,
            depth=self.depth,
            sandbox=sandbox,
            **added,
        )

    def _run_budget(self, max_tokens: int | None, max_cost: float | None) -> TokenBudget:
        if self.budget is None:
            return TokenBudget(max_tokens, max_cost=max_cost)
        if max_tokens is None and max_cost is None:
            return self.budget
        return self.budget.scoped(max_tokens, max_cost)

    def _run_permissions(self, given: Permissions | None) -> Permissions:
        """The agent's permissions, or those given to one run as each extension keeps them
        (the skills extension: its folders read-only)."""
        if given is None:
            return self.permissions
        permissions = Permissions.coerce(given)
        for extension in self.extensions:
            permissions = extension.run_permissions(permissions)
        return permissions

    def _append(self, state: RunState, message: Message) -> None:
        state.transcript.append(message)
        state.context.trace.message(self.name, message)

    def _finish(
        self,
        state: RunState,
        status: Status,
        output: str,
        *,
        error: str | None = None,
        detail: ErrorDetail | None = None,
        answer: Verdict | None = None,
    ) -> None:
        """End the run with `output`, its text; `answer`: the valid answer of a typed run.
        Work beside it that waits for a person keeps a run that would complete waiting."""
        beside = [r for e in self.extensions for r in e.waiting(state.context)]
        if beside:
            state.waiting.extend(r for r in beside if r not in state.waiting)
            if status == "completed":
                status = "input_required"
                ids = ", ".join(r.id for r in state.waiting)
                error = error or f"work beside it waits for a person's answer to {ids}"
        trace = state.context.trace
        result: RunResult[Any] = RunResult(
            agent=self.name,
            status=status,
            text=output,
            validated=(answer is not None) if self.output is not None else None,
            data=json.loads(output) if answer is not None else None,
            messages=list(state.transcript),
            usage=state.usage,
            cost=state.cost,
            steps=state.steps,
            error=error,
            error_detail=detail,
            trace=str(trace.path) if trace.path is not None else None,
            children=list(state.context.children),
            waiting=list(state.waiting),
            refused={
                **{k: v for e in self.extensions for k, v in e.refused().items()},
                **refusals(state.transcript),
            },
        )
        state.result = result.with_output(answer.value) if answer is not None else result
        if not trace.recording:  # the event's fields are made for a record only
            return
        trace.emit(
            RunEnd,
            agent=self.name,
            status=status,
            output=output,
            validated=result.validated,
            # The validated answer's JSON values: what a result read back gives as output.
            data=result.data,
            steps=state.steps,
            usage=TokenCounts.of(state.usage),
            cost=round(state.cost, 8) if state.cost is not None else None,
            error=error,
            refused=state.result.refused or None,
            empty_answer=True if state.result.empty_answer else None,
            waiting=[r.id for r in state.waiting] or None,
        )

    def __repr__(self) -> str:
        kind = type(self).__name__
        return f"{kind}({self.name!r}, model={self.model.name!r}, tools={len(self.tools)})"


def _free_trace(path: Path) -> Trace:
    """A new trace at `path`, or, when that holds a run (or one is writing it), beside it at
    the first free numbered name: `agent.jsonl`, `agent-2.jsonl`, `agent-3.jsonl`, ..."""
    number = 1
    while True:
        name = path if number == 1 else path.with_name(f"{path.stem}-{number}{path.suffix}")
        try:
            return Trace(name)
        except (TraceExists, TraceBusy):
            number += 1


@lru_cache(maxsize=16)  # a fan-out's siblings need one entry; few prompts run at once
def _system_message(text: str) -> Message:
    """The system message of `text`: one (frozen) object for every run that starts with it,
    as the sibling sub-agents of a fork do, not one each."""
    return Message.system(text)


def _last_answer(transcript: Transcript) -> str:
    for message in reversed(transcript):
        if message.role == "assistant" and message.content:
            return message.content
    return ""


def _sandbox_at_start(permissions: Permissions) -> str | None:
    """The sandbox that confines a run's commands (None where it allows none); a run whose
    sandbox cannot run is refused here, before anything starts."""
    if not permissions.allows_commands():
        return None
    from ..security.sandbox import sandbox_at_start  # loaded where commands run

    sandbox = sandbox_at_start(permissions)
    if sandbox == "none":  # the warnings registry says it once per process
        warnings.warn(UNCONFINED_WARNING, SafetyWarning, stacklevel=3)
    return sandbox


def run_sync(work: Coroutine[Any, Any, T]) -> T:
    """Run `work` to its end from synchronous code; refused inside a running event loop
    (`await` it there): every `*_sync` method of the package is this around its async twin."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(work)
    work.close()
    raise RuntimeError(
        "a *_sync method was called inside a running event loop: await the async one instead"
    )
