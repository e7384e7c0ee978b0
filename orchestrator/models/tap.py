"""`TextTap`: one agent's answer, shown while the model writes it.

The tap wraps a model. Requests from the agent it follows get an `on_text` callback, so the
adapter hands over the reply's text as it arrives (a stream's fragments, or a whole reply at
once); requests from any other agent (its sub-agents share the model) pass through untouched.
After each of the agent's turns the sink hears how the turn ended, so it can tell an answer
from text written before tool calls.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

from .base import ChatModel, ModelRequest, ModelResponse


class TextSink(Protocol):
    """Where a tapped agent's text goes."""

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
