"""The model interface: one async method from a provider-neutral request to a response."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

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


class WireOptions(BaseModel):
    """Options every HTTP adapter shares. Each can be passed to `resolve_model`."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    stream: bool = True
    """Stream the reply (server-sent events); False waits for the whole reply."""
    stream_fallback: bool = True
    """When a server cannot serve a request as a stream (it closes the stream before its first
    event, or ends it before the reply), send the request once more without streaming, and
    send requests of that shape to that server whole from then on; the trace records a
    `model_stream_fallback` event. False: fail at once, naming the `stream` setting."""
    temperature: float | None = Field(None, ge=0)
    """Sampling temperature sent with every request; None sends none (the server's default)."""
    max_output_tokens: int | None = Field(None, ge=1)
    """The most tokens one reply may have. The agents of a job or a planner reserve this much
    of the budget per call (4096 by default); a request never asks for more than its agent
    reserved."""
    extra_body: dict[str, Any] = Field(default_factory=dict)
    """Fields added to every request body as they are: `seed`, `top_p`, `metadata`, ..."""

    def output_tokens(self, reserved: int) -> int:
        """The output cap to send: what the agent reserved, lowered to `max_output_tokens`."""
        return min(reserved, self.max_output_tokens or reserved)

    def sampling(self) -> dict[str, Any]:
        """The sampling fields every body carries when they are set."""
        return {} if self.temperature is None else {"temperature": self.temperature}


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
