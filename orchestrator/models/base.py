"""The model interface: one async method from a provider-neutral request to a response."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
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
    trace (an adapter reports waits for a concurrency slot and retries through it).
    """

    messages: Sequence[Message]
    tools: Sequence[ToolSpec] = ()
    tool_choice: ToolChoice = "auto"
    max_output_tokens: int = 4096
    agent: str = "agent"
    input_tokens: int | None = None
    on_event: Callable[..., None] | None = None

    def emit(self, type: str, **fields: Any) -> None:
        if self.on_event is not None:
            self.on_event(type, **fields)


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
