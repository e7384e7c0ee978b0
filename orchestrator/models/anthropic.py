"""Anthropic Messages: the wire format of `api.anthropic.com/v1/messages`.

`build_body` writes a request, `parse_message` reads a whole reply, and `EventAssembler`
rebuilds a streamed one from its events. `AnthropicModel` sends them over a Connection
(http.py), which owns everything about reaching the server; its options are
`AnthropicOptions` (settings.py).

The request. The system prompt goes in the top-level `system` field; assistant tool calls are
`tool_use` blocks and tool results are `tool_result` blocks in a user turn. Roles must
alternate, so consecutive messages of one role (several tool results, then a note from the
loop) are merged into one turn.

Prompt-cache breakpoints. Anthropic caches nothing unless a request marks where cached
prefixes end (`cache_control` on a block, at most four per request); it then reads the
longest prefix a previous request wrote, checking each breakpoint and up to 20 blocks before
it. The prefix runs in the order tools, system, messages. Four breakpoints, each for a reason:

- the last tool: agents with the same tools share it even when their system prompts differ;
- the system prompt: sibling sub-agents of one definition share tools and system;
- the end of the latest turn: this request writes its whole prefix for the next one;
- the end of the turn two before it (the previous request's last turn): the next request reads
  what the previous one wrote even when a turn added more than 20 blocks (many tool results).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..messages import Message, ToolCall, ToolSpec, Usage
from .adapter import HTTPChatModel
from .base import ModelRequest, ModelResponse, OutputMode, ToolChoice, usage_count
from .http import Connection, ServerSentEvent, bad_reply, iter_events, stream_error
from .settings import PRESETS, AnthropicOptions, CacheTTL

__all__ = [
    "AnthropicModel",
    "AnthropicOptions",
    "EventAssembler",
    "build_body",
    "mark_cache_breakpoints",
    "parse_message",
    "parse_stream",
    "to_turns",
]

PATH = "/v1/messages"
API_VERSION = "2023-06-01"
MAX_BREAKPOINTS = 4
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


# The request.


def build_body(model: str, request: ModelRequest, options: AnthropicOptions) -> dict[str, Any]:
    """The JSON body of one request; `max_tokens` is always sent (the API requires it)."""
    tools, choice = _tool_setup(request, options)
    system, turns = to_turns(request.messages, tools_as_text=not tools)
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": options.output_tokens(request.max_output_tokens),
        "messages": turns,
        **options.sampling(),
    }
    if system:
        body["system"] = system
    if tools:
        body["tools"] = tools
        body["tool_choice"] = choice
    if request.output_schema is not None:
        # Structured outputs (generally available for Claude 4.5 models and later): the reply's
        # text follows the schema. Older models answer 400, which names the field.
        format = {"type": "json_schema", "schema": request.output_schema.schema}
        body["output_config"] = {"format": format}
    if options.stream:
        body["stream"] = True
    if options.prompt_cache:
        body = mark_cache_breakpoints(body, options.cache_ttl)
    return {**body, **options.extra_body}


def _tool_setup(
    request: ModelRequest, options: AnthropicOptions
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    if request.tool_choice == "none" and not options.tool_choice_none:
        return [], None
    if request.tools:
        return [_wire_tool(spec) for spec in request.tools], _wire_choice(request.tool_choice)
    if options.tool_choice_none and _uses_tools(request.messages):
        # The API rejects tool_use/tool_result blocks in a request that defines no tools, so
        # a request without tools declares the ones the conversation used, and forbids them.
        return _placeholder_tools(request.messages), {"type": "none"}
    return [], None


def to_turns(
    messages: Sequence[Message], *, tools_as_text: bool = False
) -> tuple[str | None, list[dict[str, Any]]]:
    """The `system` text and the alternating user/assistant turns of a conversation."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            if message.content:
                system.append(message.content)
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message, tools_as_text)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return "\n\n".join(system) or None, turns


def _blocks(message: Message, tools_as_text: bool) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [_text_result(message) if tools_as_text else _result_block(message)]
    blocks = []
    if message.content and message.content.strip():  # the API rejects blank text blocks
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append(_text_call(call) if tools_as_text else _call_block(call))
    return blocks


def _call_block(call: ToolCall) -> dict[str, Any]:
    try:
        arguments = json.loads(call.arguments) if call.arguments.strip() else {}
    except (ValueError, RecursionError):
        arguments = None
    # `input` must be an object; arguments that were not one went back to the model as an
    # error result already, so an empty object stands in for them here.
    return {
        "type": "tool_use",
        "id": call.id,
        "name": call.name,
        "input": arguments if isinstance(arguments, dict) else {},
    }


def _result_block(message: Message) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id}
    if message.content:
        block["content"] = message.content
    if message.is_error:
        block["is_error"] = True
    return block


def _text_call(call: ToolCall) -> dict[str, Any]:
    text = f"[called tool {call.name} (call {call.id}) with arguments {call.arguments}]"
    return {"type": "text", "text": text}


def _text_result(message: Message) -> dict[str, Any]:
    status = "error" if message.is_error else "result"
    header = f"[{status} of tool {message.name} (call {message.tool_call_id})]"
    return {"type": "text", "text": f"{header}\n{message.content or ''}"}


def _uses_tools(messages: Sequence[Message]) -> bool:
    return any(m.role == "tool" or m.tool_calls for m in messages)


def _placeholder_tools(messages: Sequence[Message]) -> list[dict[str, Any]]:
    called = [c.name for m in messages for c in m.tool_calls]
    answered = [m.name for m in messages if m.role == "tool" and m.name]
    names = dict.fromkeys(called + answered)
    return [
        {"name": name, "description": "Not available now.", "input_schema": {"type": "object"}}
        for name in names or ["unavailable"]
    ]


def _wire_tool(spec: ToolSpec) -> dict[str, Any]:
    return {"name": spec.name, "description": spec.description, "input_schema": spec.parameters}


def _wire_choice(choice: ToolChoice) -> dict[str, Any]:
    if choice == "required":
        return {"type": "any"}
    if isinstance(choice, str):
        return {"type": choice}
    return {"type": "tool", "name": choice.name}


# Prompt-cache breakpoints.


def mark_cache_breakpoints(body: dict[str, Any], ttl: CacheTTL = "5m") -> dict[str, Any]:
    """`body` with `cache_control` breakpoints added (a new dict; `body` is not changed)."""
    marker: dict[str, Any] = (
        {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}
    )
    marked = dict(body)
    places = 0
    tools = marked.get("tools")
    if tools:
        marked["tools"] = [*tools[:-1], {**tools[-1], "cache_control": marker}]
        places += 1
    system = marked.get("system")
    if isinstance(system, str) and system:
        marked["system"] = [{"type": "text", "text": system, "cache_control": marker}]
        places += 1
    turns = list(marked.get("messages") or [])
    for index in _turns_to_mark(turns)[: MAX_BREAKPOINTS - places]:
        blocks = list(turns[index]["content"])
        blocks[-1] = {**blocks[-1], "cache_control": marker}
        turns[index] = {**turns[index], "content": blocks}
    marked["messages"] = turns
    return marked


def _turns_to_mark(turns: list[dict[str, Any]]) -> list[int]:
    """The latest turn and the one two before it (the previous request's last), newest first."""
    marked = [i for i in (len(turns) - 1, len(turns) - 3) if i >= 0]
    return [i for i in marked if isinstance(turns[i].get("content"), list) and turns[i]["content"]]


# The reply.


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


class AnthropicModel(HTTPChatModel[AnthropicOptions]):
    """A ChatModel for the Anthropic Messages API."""

    path = PATH
    headers = {"anthropic-version": API_VERSION}

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

    @property
    def output_modes(self) -> tuple[OutputMode, ...]:
        """Its preset's (settings.py: `PRESETS`): a final-answer tool by default, as every
        Claude model with tools has it; native (`output_config.format`) only on Claude 4.5
        models and later."""
        return PRESETS["anthropic"].output_modes

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
