"""Anthropic Messages: the wire format of `api.anthropic.com/v1/messages`.

The request body is built in `anthropic_request.py`. Here: `EventAssembler` rebuilds a
streamed reply, `parse_message` a whole one, and `AnthropicModel` sends requests over a
Connection, which owns everything about reaching the server.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..messages import Message, ToolCall, Usage
from .adapter import HTTPChatModel
from .anthropic_request import AnthropicOptions, build_body, to_turns
from .base import ModelRequest, ModelResponse, usage_count
from .http import Connection, bad_reply, stream_error
from .sse import ServerSentEvent, iter_events

__all__ = ["AnthropicModel", "AnthropicOptions", "EventAssembler", "build_body", "to_turns"]

PATH = "/v1/messages"
API_VERSION = "2023-06-01"
FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
}
ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
DELTA_TEXT = {
    "text_delta": "text",
    "input_json_delta": "partial_json",
    "thinking_delta": "thinking",
}
DELTA_BLOCK = {"text_delta": "text", "input_json_delta": "tool_use", "thinking_delta": "thinking"}
USAGE_INPUT_KEYS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def parse_message(data: Any, provider: str = "anthropic") -> ModelResponse:
    """A whole (non-streamed) Messages reply as a response."""
    if not isinstance(data, dict) or not isinstance(data.get("content"), list):
        if isinstance(data, dict) and data.get("type") == "error":
            raise _error(provider, data.get("error"))
        raise bad_reply(provider, "the reply has no content")
    assembler = EventAssembler(provider)
    assembler.start(data)
    for index, block in enumerate(data["content"]):
        if isinstance(block, dict):
            assembler.add_block(index, block)
    assembler.finish(data)
    return assembler.response()


@dataclass
class _Block:
    type: str
    parts: list[str] = field(default_factory=list)
    id: str = ""
    name: str = ""
    input: Any = None


class EventAssembler:
    """Rebuilds one reply from its stream events.

    Text deltas, `input_json_delta` fragments (a tool call's arguments, kept as raw text even
    when cut off unfinished) and thinking deltas are collected per content block; `ping` and
    event types it does not know are ignored; an `error` event is raised (retryable when the
    server is overloaded or failing). Feed events until `feed` returns True (`message_stop`),
    then take `response()`.
    """

    def __init__(
        self, provider: str = "anthropic", on_text: Callable[[str | None], None] | None = None
    ) -> None:
        self.provider = provider
        self.on_text = on_text
        self.blocks: dict[int, _Block] = {}
        self.stop_reason: str | None = None
        self.usage: dict[str, Any] = {}
        self.meta: dict[str, Any] = {}
        self.done = False

    def feed(self, event: ServerSentEvent) -> bool:
        """Take one event; True once the stream says it is done."""
        try:
            data = json.loads(event.data)
        except (ValueError, RecursionError):
            raise bad_reply(
                self.provider, f"malformed stream event: {event.data[:200]!r}"
            ) from None
        if not isinstance(data, dict):
            raise bad_reply(self.provider, f"malformed stream event: {event.data[:200]!r}")
        kind = data.get("type") or event.event
        if kind == "message_start":
            self.start(data.get("message") or {})
        elif kind == "content_block_start":
            self.add_block(data.get("index", len(self.blocks)), data.get("content_block") or {})
        elif kind == "content_block_delta":
            self._delta(data.get("index", 0), data.get("delta") or {})
        elif kind == "message_delta":
            self._message_delta(data)
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            raise _error(self.provider, data.get("error"))
        return self.done

    def start(self, message: Mapping[str, Any]) -> None:
        self.meta.update({key: message[key] for key in ("id", "model") if key in message})
        self._add_usage(message.get("usage"))

    def add_block(self, index: int, block: Mapping[str, Any]) -> None:
        text = block.get("text") or block.get("thinking")
        self.blocks[index] = _Block(
            type=str(block.get("type", "")),
            parts=[text] if isinstance(text, str) and text else [],
            id=str(block.get("id", "")),
            name=str(block.get("name", "")),
            input=block.get("input"),
        )

    def _delta(self, index: int, delta: Mapping[str, Any]) -> None:
        kind = delta.get("type", "")
        if kind not in DELTA_TEXT:  # signature_delta, citations_delta, ...: nothing to keep
            return
        block = self.blocks.setdefault(index, _Block(type=DELTA_BLOCK[kind]))
        piece = delta.get(DELTA_TEXT[kind])
        if isinstance(piece, str) and piece:
            block.parts.append(piece)
            if kind == "text_delta" and self.on_text is not None:
                self.on_text(piece)

    def finish(self, message: Mapping[str, Any]) -> None:
        """End with a whole message's stop reason (a reply that was not streamed)."""
        self._message_delta({"delta": message})
        self.done = True

    def _message_delta(self, data: Mapping[str, Any]) -> None:
        delta = data.get("delta") or {}
        self.stop_reason = delta.get("stop_reason") or self.stop_reason
        details = delta.get("stop_details")
        if isinstance(details, Mapping) and isinstance(details.get("explanation"), str):
            self.meta["refusal"] = details["explanation"]
        self._add_usage(data.get("usage"))

    def _add_usage(self, usage: Any) -> None:
        # Counts in message_delta are cumulative, so a later value replaces an earlier one.
        if isinstance(usage, Mapping):
            self.usage.update(usage)

    def response(self) -> ModelResponse:
        """The assembled reply; a stream that stopped before its end is an error to retry."""
        if not self.done and self.stop_reason is None:
            raise bad_reply(self.provider, "the stream ended before the reply was complete")
        ordered = [self.blocks[i] for i in sorted(self.blocks)]
        text = "".join("".join(b.parts) for b in ordered if b.type == "text")
        thinking = "".join("".join(b.parts) for b in ordered if b.type == "thinking")
        calls = [_tool_call(b) for b in ordered if b.type == "tool_use"]
        message = Message(
            role="assistant",
            # A refusal's explanation is the answer the user should see when there is no other.
            content=text or self.meta.get("refusal") or None,
            tool_calls=tuple(calls),
            reasoning=thinking or None,
        )
        extra = {**self.meta, "stop_reason": self.stop_reason}
        return ModelResponse(
            message=message,
            usage=self._usage(),
            finish_reason=FINISH_REASONS.get(self.stop_reason or "", self.stop_reason),
            extra=extra,
            raw_usage=dict(self.usage) or None,
        )

    def _usage(self) -> Usage | None:
        # Anthropic counts cached input apart from `input_tokens`; the budget wants it all.
        keys = (*USAGE_INPUT_KEYS, "output_tokens")
        counts = [usage_count(self.usage.get(key) or 0) for key in keys]
        if not {"input_tokens", "output_tokens"} <= self.usage.keys() or None in counts:
            return None
        fresh, written, read, output = (count or 0 for count in counts)
        cached = {"cache_read": max(0, read), "cache_write": max(0, written)}
        return Usage.of(fresh + written + read, output, **cached)


def _tool_call(block: _Block) -> ToolCall:
    arguments = "".join(block.parts)
    if not arguments:
        arguments = json.dumps(block.input) if isinstance(block.input, dict) else "{}"
    return ToolCall(id=block.id, name=block.name, arguments=arguments)


def parse_stream(body: str, provider: str = "anthropic") -> ModelResponse:
    """A whole recorded stream (a `text/event-stream` body) as a response."""
    assembler = EventAssembler(provider)
    for event in iter_events(body):
        if assembler.feed(event):
            break
    return assembler.response()


class AnthropicModel(HTTPChatModel):
    """A ChatModel for the Anthropic Messages API."""

    path = PATH
    headers = {"anthropic-version": API_VERSION}
    options: AnthropicOptions

    def __init__(
        self,
        model: str,
        connection: Connection,
        options: AnthropicOptions | None = None,
        *,
        name: str | None = None,
    ) -> None:
        super().__init__(model, connection, options or AnthropicOptions(), name=name)

    def build_body(self, request: ModelRequest, options: AnthropicOptions) -> dict[str, Any]:
        return build_body(self.model, request, options)

    def parse_whole(self, data: Any) -> ModelResponse:
        return parse_message(data, self.provider)

    def assembler(self, request: ModelRequest) -> EventAssembler:
        return EventAssembler(self.provider, request.text)


def _error(provider: str, error: Any) -> Exception:
    if not isinstance(error, Mapping):
        return stream_error(provider, str(error), None)
    kind = str(error.get("type", ""))
    message = str(error.get("message") or "an error occurred during streaming")
    return stream_error(
        provider, f"{message} [{kind}]" if kind else message, ERROR_STATUS.get(kind)
    )
