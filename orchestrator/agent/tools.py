"""Tools: `@tool` turns a plain function into something a model can call, and what a call gets.

The schema comes from the function itself: type hints through pydantic, the docstring's summary
as the description, and per-parameter text from a Google-style `Args:` section. A parameter
annotated `ToolContext` is injected by the loop and never shown to the model.

Also here, because every tool call goes through them:

- `ToolContext`, the typed context of one run that a tool may ask for: its permissions (parsed
  once, when the run starts), its guards and approval callback, its budget, trace and model,
  the results of the agents it started, and each extension's own typed state (`state_of`).
- Running blocking code (a sync tool, a skill's import) where it cannot hold up a run: each
  call runs in a daemon thread of its own (`run_in_thread`, `call_with_timeout`). Its caller
  can stop waiting (a timeout, a cancelled run) and go on at once: nothing joins the thread.
  A thread cannot be killed, so code that never returns keeps its thread until the process
  ends. Whatever the code raises is handed to the caller, `SystemExit` and
  `KeyboardInterrupt` included (as `ExitFromCode`), so a tool that calls `sys.exit()` fails
  that call and nothing else.
- `call_skill_tool`, one fixed tool through which a model calls the tools it was given later.
  Provider prompt caches key on an exact prefix, and the tools array comes first in it: a
  tool added to the array half-way through a run makes every later request miss the cache.
  So tools that join a run after its first request (a loaded skill's) are *callable, not
  advertised*: their schemas reach the model in the observation that gave them, and the
  model calls them by name, directly or through this dispatcher, which is in the tools array
  from the start. Its `arguments` is declared as JSON text, not an open object: servers that
  constrain a reply to the schemas (llama.cpp's grammars, strict modes) cannot bound an
  object of any shape. A dispatched call is unwrapped into the call it stands for (same call
  id) before anything else happens, so the inner tool's schema, timeout, guards, approval and
  trace events apply exactly as for a direct call.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import json
import re
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    Literal,
    TypeVar,
    cast,
    get_args,
    get_origin,
    get_type_hints,
    overload,
)

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo
from typing_extensions import ParamSpec as DefaultParamSpec
from typing_extensions import TypeVar as DefaultTypeVar

from ..errors import ConfigError, OrchestratorError
from ..events import Answer, InputRequest
from ..messages import ToolCall, ToolSpec
from ..security import Permissions
from ..trace import NullTrace, Trace
from .run_results import TaskResult

if TYPE_CHECKING:
    from ..models.base import ChatModel
    from .token_budget import TokenBudget

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_SECTION = re.compile(
    r"^\s*(Args|Arguments|Parameters|Returns|Yields|Raises|Examples?|Notes?):\s*$"
)
_ARG_LINE = re.compile(r"^\s*\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


T = TypeVar("T")


# Running blocking code in a daemon thread of its own.


class CallTimedOut(TimeoutError):
    """The code did not finish within its time; its thread was left behind."""


async def run_in_thread(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Await `fn(*args, **kwargs)` run in a daemon thread; cancelling stops only the wait.

    The code runs in a copy of the caller's context, so it sees the caller's context
    variables (a request id, a tenant) as an awaited coroutine would."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    future: asyncio.Future[T] = loop.create_future()

    def deliver(value: Any, error: BaseException | None) -> None:
        if future.done():
            return  # the caller stopped waiting
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def work() -> None:
        try:
            value = fn(*args, **kwargs)
        except BaseException as exc:  # handed to the caller, whatever it is
            _call_soon(loop, deliver, None, _as_error(exc))
        else:
            _call_soon(loop, deliver, value, None)

    threading.Thread(
        target=context.run, args=(work,), name=f"tool:{_name(fn)}", daemon=True
    ).start()
    return await future


def call_with_timeout(fn: Callable[[], T], timeout: float | None, *, what: str) -> T:
    """`fn()` in a daemon thread, waited for at most `timeout` seconds (None: for ever).

    Raises `CallTimedOut` naming `what` when it does not finish in time.
    """
    values: list[T] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            values.append(fn())
        except BaseException as exc:
            errors.append(_as_error(exc))

    thread = threading.Thread(target=work, name=f"call:{what}", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise CallTimedOut(f"{what} did not finish within {timeout:g} s")
    if errors:
        raise errors[0]
    return values[0]


class ExitFromCode(Exception):
    """Code called `sys.exit()` or raised `KeyboardInterrupt` where it should not."""


def _as_error(exc: BaseException) -> BaseException:
    """`SystemExit` and `KeyboardInterrupt` from called code become an ordinary error: they
    must not end the process or look like the user's Ctrl-C."""
    if isinstance(exc, SystemExit | KeyboardInterrupt):
        detail = f" ({exc})" if str(exc) else ""
        error = ExitFromCode(f"{type(exc).__name__}{detail}")
        error.__cause__ = exc
        return error
    return exc


def _call_soon(loop: asyncio.AbstractEventLoop, fn: Callable[..., None], *args: Any) -> None:
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:
        pass  # the loop has closed: nobody waits for this result any more


def _name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


_NONE: frozenset[str] = frozenset()


class Toolset:
    """The tools of one agent run, in the order they were added.

    Tools may be added while the run goes on (a loaded skill adds its own). A tool added with
    `advertise=False` can be called but is not in `specs`, the tools array every request
    sends: that array then stays the same from the first request to the last, and provider
    prompt caches keep the whole prefix (see `call_skill_tool`). Advertised tools added later are
    appended, so the schemas sent before keep their place.
    """

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        # Most tools are advertised: the few that are not are named here (until then, one
        # empty frozenset shared by every toolset, not a set of names made for each run).
        self._unadvertised: frozenset[str] = _NONE
        specs: list[ToolSpec] = []
        for item in tools:  # `add` each, the tools array made once (a toolset per run)
            if item.name not in self._tools:
                self._tools[item.name] = item
                specs.append(item.spec)
        self._specs: tuple[ToolSpec, ...] = tuple(specs)

    def add(self, item: Tool, *, advertise: bool = True) -> bool:
        """Add a tool; False if one of that name is already there (the first one stays)."""
        if item.name in self._tools:
            return False
        self._tools[item.name] = item
        if advertise:
            self._specs = (*self._specs, item.spec)
        else:
            self._unadvertised = self._unadvertised | {item.name}
        return True

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def advertised(self, name: str) -> bool:
        """Whether the tool is in the tools array the model is sent."""
        return name in self._tools and name not in self._unadvertised

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        return self._specs

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)


@dataclass(frozen=True)
class Refusal:
    """Why a call may not run: the text the model reads, and the result's error type."""

    text: str
    kind: str = "denied"


@dataclass(frozen=True)
class Preapproval:
    """An extension's word on a call the run's permissions put to a person (`ask`): granted,
    it runs without asking (an active skill's `allowed-tools`); refused, `reason` says why,
    and the call is put to a person as before."""

    granted: bool
    reason: str


@dataclass(frozen=True)
class ApprovalRequest:
    """A call waiting for a person's decision."""

    agent: str
    """The path of the agent making the call (`planner/review`)."""
    tool: str
    arguments: dict[str, Any]
    call_id: str
    rule: str
    """The permission that asks, e.g. "permissions.shell is 'ask'"."""


OnInput = Literal["wait", "deny", "fail"]
"""What a run does where a person must answer and none is live (agent/waiting.py): wait
(the run ends `input_required`, to be answered later), deny (the call is refused and the
model reads why), fail (the run ends `error`)."""
ON_INPUT: tuple[OnInput, ...] = get_args(OnInput)


class WaitingForInput(Exception):  # noqa: N818 - a state the run enters, not a failure
    """A call cannot go on without a person's answer to `requests`. `relayed`: they were
    asked by agents under the call (a fork's sub-agents) and are recorded already."""

    def __init__(self, requests: Sequence[InputRequest], *, relayed: bool = False) -> None:
        super().__init__("; ".join(f"{r.id}: {r.question}" for r in requests))
        self.requests = list(requests)
        self.relayed = relayed


class InputRefused(OrchestratorError):
    """A call needs a person's answer and the run's `on_input` is `fail`: the run ends."""


_Limits = tuple[tuple[asyncio.AbstractEventLoop, asyncio.Timeout], ...]
_TIME_LIMITS: contextvars.ContextVar[_Limits] = contextvars.ContextVar("time_limits", default=())
"""The time limits around the running code, each with its event loop: a run's, and its
callers' (a sub-agent's task copies its parent's context, so it holds theirs too; so does a
thread a sync tool runs in, whose own runs have a loop of their own)."""
_PAUSED: dict[asyncio.Timeout, tuple[float | None, float, int]] = {}
"""Time limits standing still while a person is asked: when each was due, since when it
stands still, and how many waits hold it (sibling sub-agents may ask at once). Only a
limit's own loop touches its entry."""


@asynccontextmanager
async def limit_time(seconds: float) -> AsyncIterator[asyncio.Timeout]:
    """`asyncio.timeout(seconds)` whose clock stands still while a person is asked inside it
    (`asking_a_person`): time spent waiting for a person never counts against a limit."""
    async with asyncio.timeout(seconds) as deadline:
        loop = asyncio.get_running_loop()
        token = _TIME_LIMITS.set((*_TIME_LIMITS.get(), (loop, deadline)))
        try:
            yield deadline
        finally:
            _TIME_LIMITS.reset(token)


@asynccontextmanager
async def asking_a_person() -> AsyncIterator[None]:
    """While a person is asked (an approval callback, a question), every time limit around
    the call on this event loop stands still; once answered, each is due as much later as
    the person took. The limits of another loop (a run in a thread under a sync tool) are
    left to that loop: its timers are not this loop's to move."""
    loop = asyncio.get_running_loop()
    held = [t for owner, t in _TIME_LIMITS.get() if owner is loop and not t.expired()]
    for limit in held:
        due, since, holds = _PAUSED.get(limit) or (limit.when(), loop.time(), 0)
        _PAUSED[limit] = (due, since, holds + 1)
        _reschedule(limit, None)
    try:
        yield
    finally:
        for limit in held:
            due, since, holds = _PAUSED.pop(limit)
            if holds > 1:
                _PAUSED[limit] = (due, since, holds - 1)
            elif due is not None:
                _reschedule(limit, due + loop.time() - since)


def _reschedule(limit: asyncio.Timeout, when: float | None) -> None:
    with contextlib.suppress(RuntimeError):  # its scope ended while the person was asked
        limit.reschedule(when)


Approver = Callable[[ApprovalRequest], bool | Awaitable[bool]]
Answerer = Callable[[InputRequest], Awaitable[Answer | None]]
"""A person live for a run's questions (a terminal): their answer, or None to leave the
request waiting (agent/waiting.py)."""
"""The approval callback: True approves the call; a sync one runs in a thread of its own."""

S = TypeVar("S")
Deps = DefaultTypeVar("Deps", default=None)
Params = DefaultParamSpec("Params", default=...)
Returns = DefaultTypeVar("Returns", default=Any)
"""The type of the caller's own object a run carries (`ToolContext[Deps].deps`); None when
a run is given none, so a bare `ToolContext` is `ToolContext[None]`."""


@dataclass
class ToolContext(Generic[Deps]):
    """What the loop hands a tool that asks for it (a parameter annotated `ToolContext`, or
    `ToolContext[MyDeps]`).

    `deps` is the caller's own object given to the run (`agent.run(task, deps=...)`): a
    database handle, a client, the user being served. Every agent of the run gets the same
    one: forked sub-agents at any depth, a job's steps, a skill's tools. `agent` is the
    calling agent's path; `toolset` is its run's tools (extensions add to it); `permissions`
    are the run's, parsed once when it starts. `budget`, `trace` and `model` are the run's
    own, for extensions that start agents of their own (a sub-agent draws from the same
    budget and writes to the same trace; a run given no trace has a `NullTrace`, which records
    nothing), and `children` collects the results of those
    agents for the run's result. `guards` check every call before it starts, `preapprovers`
    may spare a call marked `ask` its question, and `approve` is the run's approval callback
    (agent/turn_calls.py); sub-agents get the same. An extension
    keeps its per-run state in an object of its own class, `state_of(ThatClass)`.
    """

    agent: str
    toolset: Toolset = field(default_factory=lambda: Toolset())
    permissions: Permissions = field(default_factory=Permissions)
    budget: TokenBudget | None = None
    trace: Trace = field(default_factory=NullTrace)
    model: ChatModel | None = None
    depth: int = 0
    children: list[TaskResult] = field(default_factory=list)
    guards: list[Guard] = field(default_factory=list)
    preapprovers: list[Preapprover] = field(default_factory=list)
    approve: Approver | None = None
    answer: Answerer | None = None
    on_input: OnInput = "wait"
    deps: Deps = cast(Deps, None)
    call_id: str | None = None
    """The id of the call this context runs (None outside a call)."""
    _states: dict[type[object], object] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def state_of(self, kind: type[S]) -> S:
        """The run's state of one kind (an extension's own class), made by `kind()` on first
        use and shared by every tool of the run."""
        found = self._states.get(kind)
        if found is None:
            found = self._states[kind] = kind()
        return cast(S, found)

    def existing_state(self, kind: type[S]) -> S | None:
        """The run's state of one kind when something made it already, else None (nothing is
        made: a hook called on every run asks this, so a run that never used it keeps none)."""
        return cast(S | None, self._states.get(kind))

    def for_call(self, call_id: str) -> ToolContext[Deps]:
        """This context for running the call `call_id` (its state still the run's)."""
        scoped = self._copy()
        scoped.call_id = call_id
        return scoped

    def granting(self, permissions: Permissions) -> ToolContext[Deps]:
        """This context for one call run with `permissions` (its state still the run's)."""
        scoped = self._copy()
        scoped.permissions = permissions
        return scoped

    def _copy(self) -> ToolContext[Deps]:
        # A shallow copy made directly (a tool call's context, on the hot path): copy.copy
        # goes through __reduce_ex__ and costs four times as much.
        scoped = object.__new__(type(self))
        scoped.__dict__.update(self.__dict__)
        return scoped


Guard = Callable[[ToolCall, ToolContext], Refusal | None | Awaitable[Refusal | None]]
"""A check every call of a run passes before it starts; a Refusal stops it."""
Preapprover = Callable[[ToolCall, ToolContext], Preapproval | None]
"""Asked about a call the run's permissions mark `ask`; None: it has no word on it."""


class ArgumentsError(ValueError):
    """The model's arguments could not be used: not JSON, or not what the schema asks for."""

    def __init__(self, message: str, *, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


class Tool(Generic[Params, Returns]):
    """A callable tool: a function, its schema, and how it must be run. Generic in the
    function's parameters and return type, so calling a tool directly (`add(2, 3)`) is
    checked as a call of the function itself.

    A `resumable` tool is safe to call again when a run resumes: it has no effects outside the
    run (`load_skill`, `read_task_output`), or it resumes itself from the trace (`fork`). A
    resumed run calls it again where an earlier attempt was cut off in it, instead of
    answering `aborted`.

    A `pin` tool's results are never cut when the conversation is compacted to fit the
    context window (a skill's instructions from `load_skill`): mark only what the agent needs
    whole to the end of its run. `changes` names the argument holding the path of a file the
    tool writes (`path` for the files skill's `write_file`): each call that succeeds lists
    that file in the run's working record (agent/compaction.py).
    """

    deps_type: type | None
    """The class of the deps its `ToolContext[X]` parameter asks for (None: it asks for
    none, or for `None` or `Any`): a run of an agent with this tool and no deps, or deps of
    another class, is refused before it starts."""

    def __init__(
        self,
        fn: Callable[Params, Returns],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float | None = None,
        exclusive: bool = False,
        resumable: bool = False,
        pin: bool = False,
        changes: str | None = None,
    ) -> None:
        self.fn: Callable[..., Any] = fn
        self.name = name or fn.__name__
        if not TOOL_NAME.match(self.name):
            raise ConfigError(f"tool name {self.name!r} must match {TOOL_NAME.pattern}")
        summary, arg_docs = parse_docstring(inspect.getdoc(fn) or "")
        self.description = description or summary or self.name
        self.timeout = timeout
        self.exclusive = exclusive
        self.resumable = resumable
        self.pin = pin
        self.changes = changes
        self.is_async = inspect.iscoroutinefunction(fn)
        self.args_model, self.context_param, self.deps_type = _arguments_model(
            fn, self.name, arg_docs
        )
        if changes is not None and changes not in self.args_model.model_fields:
            raise ConfigError(
                f"tool {self.name!r}: changes={changes!r} names no argument of it "
                f"(its arguments: {', '.join(self.args_model.model_fields) or 'none'})"
            )
        self.spec = ToolSpec(
            name=self.name,
            description=self.description,
            parameters=_clean_schema(self.args_model.model_json_schema()),
        )

    def renamed(self, name: str) -> Tool:
        """The same tool under another name (skills prefix theirs with the skill name)."""
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone.name = name
        clone.spec = self.spec.model_copy(update={"name": name})
        return clone

    def __call__(self, *args: Params.args, **kwargs: Params.kwargs) -> Returns:
        """Call the function itself, as if it had not been made a tool (`@tool` leaves a
        function callable: a test, or other code, calls it directly)."""
        result: Returns = self.fn(*args, **kwargs)
        return result

    def rebound(self, fn: Callable[..., Any]) -> Tool:
        """The same tool (name, schema, settings) calling `fn`, a function of the same
        signature (another object's bound method, say), without building the schema again."""
        clone = object.__new__(Tool)
        clone.__dict__.update(self.__dict__)
        clone.fn = fn
        return clone

    def parse_arguments(self, raw: str) -> dict[str, Any]:
        """Validate the model's raw JSON arguments into keyword arguments for the function."""
        data = decode_arguments(raw)
        try:
            validated = self.args_model.model_validate(data)
        except ValidationError as exc:
            raise ArgumentsError(_describe_validation(exc), kind="invalid_arguments") from None
        return {name: getattr(validated, name) for name in type(validated).model_fields}

    async def invoke(self, kwargs: dict[str, Any], context: ToolContext) -> Any:
        """Run the function; sync functions run in a daemon thread of their own, so the event
        loop stays free and a call that never returns cannot hold up the run's end."""
        if self.context_param:
            kwargs = {**kwargs, self.context_param: context}
        if self.is_async:
            return await self.fn(**kwargs)
        return await run_in_thread(self.fn, **kwargs)

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"


@overload
def tool(fn: Callable[Params, Returns], /) -> Tool[Params, Returns]: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    exclusive: bool = False,
    resumable: bool = False,
    pin: bool = False,
    changes: str | None = None,
) -> Callable[[Callable[Params, Returns]], Tool[Params, Returns]]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    exclusive: bool = False,
    resumable: bool = False,
    pin: bool = False,
    changes: str | None = None,
) -> Tool[..., Any] | Callable[[Callable[..., Any]], Tool[..., Any]]:
    """Make a tool of a sync or async function: `@tool` or `@tool(name=..., timeout=...)`.

    `timeout` is in seconds; an `exclusive` tool runs alone, after the calls before it
    in the same turn have finished and before the ones after it start. A `resumable` tool is
    called again when a resumed run was cut off in it; a `pin` tool's results are never
    compacted, and `changes` names the argument holding the path of a file it writes (see
    `Tool`).
    """

    def wrap(f: Callable[..., Any]) -> Tool[..., Any]:
        return Tool(
            f,
            name=name,
            description=description,
            timeout=timeout,
            exclusive=exclusive,
            resumable=resumable,
            pin=pin,
            changes=changes,
        )

    return wrap(fn) if fn is not None else wrap


def as_tool(obj: Tool | Callable[..., object]) -> Tool:
    """Accept a Tool or a plain function wherever tools are given."""
    return obj if isinstance(obj, Tool) else Tool(obj)


def decode_arguments(raw: str) -> dict[str, Any]:
    """The model's raw arguments as a JSON object; ArgumentsError when they are not one."""
    try:
        data = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        raise ArgumentsError(
            f"Arguments are not valid JSON ({exc.msg} at position {exc.pos}). "
            "Send the arguments as one JSON object.",
            kind="invalid_json",
        ) from None
    except RecursionError:
        raise ArgumentsError(
            "Arguments are nested too deeply to read. Send a flatter JSON object.",
            kind="invalid_json",
        ) from None
    if not isinstance(data, dict):
        raise ArgumentsError(
            f"Arguments must be a JSON object, not {type(data).__name__}.", kind="invalid_json"
        )
    return data


def render_result(value: Any) -> str:
    """A tool's return value as the text the model reads."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(value, default=str, ensure_ascii=False)


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The summary paragraph and the `Args:` entries of a Google-style docstring."""
    summary: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    entry_indent: int | None = None
    for line in doc.splitlines():
        header = _SECTION.match(line)
        indent = len(line) - len(line.lstrip())
        if header:
            section, current, entry_indent = header.group(1), None, None
        elif section is None:
            if line.strip():
                summary.append(line.strip())
            elif summary:
                section = "body"
        elif section in ("Args", "Arguments", "Parameters") and line.strip():
            entry = _ARG_LINE.match(line)
            if entry and (entry_indent is None or indent <= entry_indent):
                entry_indent = indent
                current = entry.group(1)
                args[current] = entry.group(2).strip()
            elif current:
                args[current] = f"{args[current]} {line.strip()}".strip()
    return " ".join(summary), args


def _arguments_model(
    fn: Callable[..., Any], tool_name: str, arg_docs: dict[str, str]
) -> tuple[type[BaseModel], str | None, type | None]:
    """The model of the arguments the model gives, the name of the `ToolContext` parameter
    (if any) and the class of the deps it asks for (if any)."""
    hints = get_type_hints(fn, include_extras=True)
    fields: dict[str, Any] = {}
    context_param: str | None = None
    deps_type: type | None = None
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ConfigError(f"tool {tool_name!r}: *args and **kwargs cannot be described")
        annotation = hints.get(param.name, Any)
        if _is_context(annotation):
            context_param, deps_type = param.name, _declared_deps(annotation)
            continue
        default = ... if param.default is param.empty else param.default
        if isinstance(default, FieldInfo):
            info = default
            if info.description is None and param.name in arg_docs:
                info = FieldInfo.merge_field_infos(info, description=arg_docs[param.name])
        else:
            info = Field(default, description=arg_docs.get(param.name))
        fields[param.name] = (annotation, info)
    model = create_model(_model_name(tool_name), __config__=ConfigDict(extra="forbid"), **fields)
    return model, context_param, deps_type


def _declared_deps(annotation: Any) -> type | None:
    """X of a `ToolContext[X]` annotation (or `ToolContext[X] | None`), when X is a class a
    run's deps can be checked against: not None, `Any` or `object`."""
    for kind in (annotation, *get_args(annotation)):
        if get_origin(kind) is ToolContext:
            (declared,) = get_args(kind)
            if isinstance(declared, type) and declared not in (Any, object, type(None)):
                return declared
    return None


def _is_context(annotation: Any) -> bool:
    """`ToolContext` or `ToolContext[Deps]`, or either `| None` for a parameter with a
    default of None."""

    def is_context(kind: Any) -> bool:
        return kind is ToolContext or get_origin(kind) is ToolContext

    return is_context(annotation) or any(is_context(arg) for arg in get_args(annotation))


def _model_name(tool_name: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[_\-]+", tool_name)) or "Arguments"


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop pydantic's generated titles: they cost tokens and tell the model nothing."""

    def clean(node: Any, *, is_properties: bool = False) -> Any:
        if isinstance(node, dict):
            return {
                key: clean(
                    value, is_properties=key in ("properties", "$defs") and not is_properties
                )
                for key, value in node.items()
                if is_properties or key != "title"
            }
        if isinstance(node, list):
            return [clean(item) for item in node]
        return node

    cleaned: dict[str, Any] = clean(schema)
    return cleaned


def _describe_validation(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "(arguments)"
        problem = error["msg"]
        if error["type"] == "extra_forbidden":
            problem = "unexpected argument"
        problems.append(f"- {where}: {problem}")
    return "Arguments do not match the tool's schema:\n" + "\n".join(problems)


# The dispatcher: tools given after the first request, called through one fixed tool.

DISPATCH_TOOL = "call_skill_tool"


def call_skill_tool(tool: str, arguments: str = "{}") -> str:
    """Call a tool that a loaded skill gave you (its schema is in that skill's load_skill result).

    Args:
        tool: The tool's full name, e.g. pdf__extract_text.
        arguments: The tool's arguments as one JSON object.
    """
    raise RuntimeError("call_skill_tool is unwrapped by the tool batch and never runs itself")


_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "tool": {"type": "string", "description": "The tool's full name, e.g. pdf__extract_text."},
        "arguments": {
            "type": "string",
            "description": 'The tool\'s arguments as one JSON object, e.g. {"path": "a.txt"}.',
        },
    },
    "required": ["tool"],
}


def dispatcher() -> Tool:
    """The dispatcher tool, for an agent whose tools may grow during its run."""
    found = Tool(call_skill_tool)
    found.spec = found.spec.model_copy(update={"parameters": _PARAMETERS})
    return found


class Unwrapped:
    """A call as it will run: the inner call of a dispatched one, or the call itself; `error`
    says why a dispatched call cannot run (its result is then that error)."""

    __slots__ = ("call", "error")

    def __init__(self, call: ToolCall, error: str | None = None) -> None:
        self.call = call
        self.error = error


def unwrap(call: ToolCall, toolset: Toolset) -> Unwrapped:
    """The call a dispatcher call stands for; any other call as it is."""
    if call.name != DISPATCH_TOOL or DISPATCH_TOOL not in toolset:
        return Unwrapped(call)
    try:
        raw = json.loads(call.arguments) if call.arguments.strip() else {}
    except (ValueError, RecursionError):
        return Unwrapped(call, f"Invalid arguments for {DISPATCH_TOOL}: not valid JSON.")
    if not isinstance(raw, dict) or not isinstance(raw.get("tool"), str):
        return Unwrapped(call, f"{DISPATCH_TOOL} needs `tool`: the name of the tool to call.")
    name, arguments = raw["tool"], raw.get("arguments", {})
    if isinstance(arguments, str):  # some models send the arguments as JSON text
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError):
            return Unwrapped(call, f"Invalid arguments for {name}: not valid JSON.")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return Unwrapped(call, f"Invalid arguments for {name}: `arguments` must be an object.")
    inner = ToolCall(id=call.id, name=name, arguments=json.dumps(arguments))
    if name == DISPATCH_TOOL:
        return Unwrapped(inner, f"{DISPATCH_TOOL} cannot call itself.")
    if toolset.advertised(name):
        return Unwrapped(inner, f"{name} is one of your tools: call it directly.")
    return Unwrapped(inner)


def target(call: ToolCall, toolset: Toolset) -> Tool | None:
    """The tool a call will run (through the dispatcher or not), or None if there is none."""
    unwrapped = unwrap(call, toolset)
    return None if unwrapped.error else toolset.get(unwrapped.call.name)
