"""The model interface: one async method from a provider-neutral request to a response.

Also `TextTap`, the one wrapper around a model: one agent's answer, shown while the model
writes it. Requests from the agent it follows get an `on_text` callback, so the adapter hands
over the reply's text as it arrives (a stream's fragments, or a whole reply at once); requests
from any other agent (its sub-agents share the model) pass through untouched. After each of
the agent's turns the sink (a `TextSink`: users pass their own as `stream=`) hears how the
turn ended, so it can tell an answer from text written before tool calls.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, runtime_checkable

from ..messages import Message, ToolSpec, Usage


@dataclass(frozen=True)
class ForcedTool:
    """A tool choice that makes the model call this one tool."""

    name: str


ToolChoice = Literal["auto", "none", "required"] | ForcedTool


@dataclass
class ModelRequest:
    """Everything one model call needs.

    `agent` is the calling agent's path (`planner/summarize`); the scripted model keys its
    replies by it and real providers ignore it. `input_tokens` is the loop's own count of this
    request, for adapters that report no usage. `emit` records an event in the calling agent's
    trace (an adapter reports waits for a concurrency slot and retries through it). `text`
    hands the reply's text to `on_text` as it arrives: a stream's fragments one by one, or a
    whole reply's text at once when it calls no tools (set by `TextTap`, for showing an answer
    while it is written).
    """

    messages: Sequence[Message]
    tools: Sequence[ToolSpec] = ()
    tool_choice: ToolChoice = "auto"
    max_output_tokens: int = 4096
    agent: str = "agent"
    input_tokens: int | None = None
    on_event: Callable[..., None] | None = None
    on_text: Callable[[str], None] | None = None

    def emit(self, type: str, **fields: Any) -> None:
        if self.on_event is not None:
            self.on_event(type, **fields)

    def text(self, fragment: str | None) -> None:
        if self.on_text is not None and fragment:
            self.on_text(fragment)


def output_cap(model: object) -> int | None:
    """The `max_output_tokens` a model was configured with, if any."""
    options = getattr(model, "options", None)
    cap = getattr(options, "max_output_tokens", None)
    return cap if isinstance(cap, int) else None


@dataclass
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


class TextTap:
    """A ChatModel that shows the text of agent `agent`'s replies to `sink` as they arrive."""

    def __init__(self, model: ChatModel, sink: TextSink, agent: str) -> None:
        self.inner = model
        self.sink = sink
        self.agent = agent
        self.name = model.name

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if request.agent != self.agent:
            return await self.inner.complete(request)
        response = await self.inner.complete(replace(request, on_text=self.sink.text))
        self.sink.turn_end(response)
        return response

    def __getattr__(self, name: str) -> Any:
        # The wrapped model's own attributes (`options`, `connection`, ...) stay visible.
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return f"TextTap({self.inner!r}, agent={self.agent!r})"
