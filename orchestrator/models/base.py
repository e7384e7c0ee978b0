"""The model interface: one async method from a provider-neutral request to a response.

`ChatModel` is what a user plugs in: a name and `complete`. `Model` is the base class of the
package's own models (and of any that want more than a name): it declares, with defaults, what
an agent reads of a model besides its answers: its settings (context window, compaction
threshold, output cap), its own price, and how to ask its server for the window.

Also `TextTap`, the one wrapper around a model: one agent's answer, shown while the model
writes it. Requests from the agent it follows get an `on_text` callback, so the adapter hands
over the reply's text as it arrives (a stream's fragments, or a whole reply at once); requests
from any other agent (its sub-agents share the model) pass through untouched. After each of
the agent's turns the sink (a `TextSink`: users pass their own as `stream=`) hears how the
turn ended, so it can tell an answer from text written before tool calls.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, runtime_checkable

from ..events import TraceEvent
from ..messages import Message, ToolSpec, Usage
from .prices import STANDARD_PRICES, Price, PriceTable, unpriced
from .settings import AnthropicOptions, WireOptions
from .settings import OutputMode as OutputMode  # defined beside the presets that name it


@dataclass(frozen=True)
class ForcedTool:
    """A tool choice that makes the model call this one tool."""

    name: str


ToolChoice = Literal["auto", "none", "required"] | ForcedTool


@dataclass(frozen=True)
class OutputSchema:
    """The JSON Schema a reply's text must follow: the provider's native structured output.

    `schema` is always an object schema. `strict` asks the provider to enforce it exactly; it
    is False when the schema could not be made to fit a strict mode's rules (the agent warned
    when it was built).
    """

    name: str
    schema: dict[str, Any]
    strict: bool = True
    description: str | None = None


@dataclass(slots=True)
class ModelRequest:
    """Everything one model call needs.

    `agent` is the calling agent's path (`planner/summarize`) and `run` the id of the run it
    belongs to (its trace's `run_id`; "" for a call made outside any run): the scripted model
    keeps its place in the script per run and agent, so concurrent runs of one agent never take
    each other's turns; real providers ignore both. `input_tokens` is the loop's own count of this
    request, for adapters that report no usage. `emit` records an event in the calling agent's
    trace (an adapter reports waits for a concurrency slot and retries through it). `text`
    hands the reply's text to `on_text` as it arrives: a stream's fragments one by one, or a
    whole reply's text at once when it calls no tools (set by `TextTap`, for showing an answer
    while it is written). `output_schema`, when set, asks for a reply whose text is JSON that
    follows it (the `native` output mode); an adapter sends it in its provider's form.
    """

    messages: Sequence[Message]
    tools: Sequence[ToolSpec] = ()
    tool_choice: ToolChoice = "auto"
    max_output_tokens: int = 4096
    agent: str = "agent"
    run: str = ""
    input_tokens: int | None = None
    on_event: Callable[[TraceEvent], object] | None = None
    on_text: Callable[[str], None] | None = None
    output_schema: OutputSchema | None = None

    @property
    def recording(self) -> bool:
        """Whether an event emitted here is recorded: test it before making one."""
        return self.on_event is not None

    def emit(self, event: TraceEvent) -> None:
        """Record `event` (made with this request's `agent`) in the calling agent's trace."""
        if self.on_event is not None:
            self.on_event(event)

    def text(self, fragment: str | None) -> None:
        if self.on_text is not None and fragment:
            self.on_text(fragment)


@dataclass(slots=True)
class ModelResponse:
    """The assistant message and what the call cost; `usage` is None when the provider sent none
    (or nothing usable). `raw_usage` is the provider's usage object as it came, for the record."""

    message: Message
    usage: Usage | None = None
    finish_reason: str | None = None
    extra: dict[str, object] = field(default_factory=dict)
    raw_usage: Any = None


def usage_count(value: Any) -> int | None:
    """A token count as a provider sent it: an integer (or a float with no fraction), else
    None. Usage is read from outside and may be anything."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    return None


@runtime_checkable
class ChatModel(Protocol):
    """Any model: scripted, OpenAI-compatible, Anthropic. `name` is its model string."""

    name: str

    async def complete(self, request: ModelRequest) -> ModelResponse: ...


class TextSink(Protocol):
    """Where a tapped agent's text goes (the `stream=` of `Orchestrator.run` and the job runner)."""

    def text(self, fragment: str) -> None:
        """A piece of the reply being written."""

    def turn_end(self, response: ModelResponse) -> None:
        """The reply is whole; it may have called tools."""


class Model(ABC):
    """A model with settings: every model of the package is one.

    `options` are the settings an agent reads (`context_window`, `compact_at`,
    `max_output_tokens`; an HTTP adapter's also go on the wire); `price` is the model's own
    price, which a run's price table does not override. Both are the model's own, set by
    whoever made it.
    """

    name: str
    options: WireOptions = WireOptions()
    price: Price | None = None

    @abstractmethod
    async def complete(self, request: ModelRequest) -> ModelResponse: ...

    @property
    def asks_server_window(self) -> bool:
        """Whether `server_window` asks the model's server (a run then records the answer,
        and a resumed run takes it from there instead of asking again)."""
        return False

    async def server_window(self) -> int | None:
        """The context window the model's server says it serves; None when it does not say
        (asked once per run, when neither a setting nor the table of known models knows it)."""
        return None

    def unwrapped(self) -> ChatModel:
        """The model itself, under any wrapper (a `TextTap` shows a model's text)."""
        return self

    @property
    def output_modes(self) -> tuple[OutputMode, ...]:
        """The ways this model can be asked for a structured answer, its default first
        (agent/output.py). Native output only where the adapter sends `output_schema`."""
        return DEFAULT_OUTPUT_MODES


DEFAULT_OUTPUT_MODES: tuple[OutputMode, ...] = ("tool", "prompted")
NO_OPTIONS = WireOptions()


def options_of(model: ChatModel) -> WireOptions:
    """The settings of `model`: a `Model`'s own; none for a ChatModel that is only a name
    and `complete`."""
    return model.options if isinstance(model, Model) else NO_OPTIONS


def output_modes_of(model: ChatModel) -> tuple[OutputMode, ...]:
    """How `model` can be asked for a structured answer, its default first; a ChatModel that
    is only a name and `complete` gets a tool or the prompt, never a schema it may not send."""
    return model.output_modes if isinstance(model, Model) else DEFAULT_OUTPUT_MODES


def unsupported_mode(model: str, mode: OutputMode, allowed: Sequence[OutputMode]) -> str | None:
    """Why `model` (which can give the `allowed` modes) cannot be asked for `mode`; None
    when it can."""
    if mode in allowed:
        return None
    ways = " or ".join(repr(m) for m in allowed)
    return f"{model} cannot give {mode} structured output; use output_mode {ways}"


def unwrap(model: ChatModel) -> ChatModel:
    """`model` under any wrapper of the package."""
    return model.unwrapped() if isinstance(model, Model) else model


def price_of(model: ChatModel, table: PriceTable = STANDARD_PRICES) -> Price | None:
    """A model's price: its own when it has one, else the table's for its name."""
    options = options_of(model)
    if isinstance(model, Model) and model.price is not None:
        return model.price
    found = table.get(model.name)
    if found is not None and isinstance(options, AnthropicOptions) and options.cache_ttl == "1h":
        # Anthropic bills one-hour cache writes at twice the input price, not 1.25x.
        return found.model_copy(update={"cache_write": 2 * found.input})
    return found


def priced_by(table: PriceTable, *, required: bool = False) -> Callable[[ChatModel], ChatModel]:
    """How a run prepares each model it builds (`ResolvedModels(prepare=...)`): its price
    from `table` set on it, a model's own price kept; `required` (a money cap): a model with
    none is refused."""

    def prepare(model: ChatModel) -> ChatModel:
        price = price_of(model, table)
        if price is None and required:
            raise unpriced(model.name)
        if isinstance(model, Model) and model.price is None:
            model.price = price
        return model

    return prepare


def output_cap(model: ChatModel) -> int | None:
    """The `max_output_tokens` a model was configured with, if any."""
    return options_of(model).max_output_tokens


class ModelWrapper(Model):
    """A model around another (`inner`): the same name, settings, price and answers, unless a
    subclass says otherwise."""

    def __init__(self, model: ChatModel) -> None:
        self.inner = model
        self.name = model.name
        self.options = options_of(model)
        self.price = model.price if isinstance(model, Model) else None

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self.inner.complete(request)

    @property
    def asks_server_window(self) -> bool:
        return isinstance(self.inner, Model) and self.inner.asks_server_window

    async def server_window(self) -> int | None:
        return await self.inner.server_window() if isinstance(self.inner, Model) else None

    def unwrapped(self) -> ChatModel:
        return unwrap(self.inner)

    @property
    def output_modes(self) -> tuple[OutputMode, ...]:
        return output_modes_of(self.inner)


class PricedModel(ModelWrapper):
    """A model priced by a run's price table, the object it wraps left as it was: two runs
    sharing one model object are each charged at their own prices."""

    def __init__(self, model: ChatModel, price: Price) -> None:
        super().__init__(model)
        self.price = price

    def __repr__(self) -> str:
        return f"PricedModel({self.inner!r})"


class TextTap(ModelWrapper):
    """A ChatModel that shows the text of agent `agent`'s replies to `sink` as they arrive."""

    def __init__(self, model: ChatModel, sink: TextSink, agent: str) -> None:
        super().__init__(model)
        self.sink = sink
        self.agent = agent

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if request.agent != self.agent:
            return await self.inner.complete(request)
        response = await self.inner.complete(replace(request, on_text=self.sink.text))
        self.sink.turn_end(response)
        return response

    def __repr__(self) -> str:
        return f"TextTap({self.inner!r}, agent={self.agent!r})"
