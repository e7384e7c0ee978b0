"""The request body of Anthropic Messages: turns, blocks, tools and options.

The system prompt goes in the top-level `system` field; assistant tool calls are `tool_use`
blocks and tool results are `tool_result` blocks in a user turn. Roles must alternate, so
consecutive messages of one role (several tool results, then a note from the loop) are merged
into one turn.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..messages import Message, ToolCall, ToolSpec
from .anthropic_cache import CacheTTL, mark_cache_breakpoints
from .base import ModelRequest, ToolChoice, WireOptions


class AnthropicOptions(WireOptions):
    """How to speak the Messages API to one server. Each can be passed to `resolve_model`."""

    tool_choice_none: bool = True
    """The server accepts `tool_choice: {"type": "none"}`. When False, a request that must not
    call tools sends no tools, and earlier tool calls and results are written as text."""
    prompt_cache: bool = True
    """Mark requests for Anthropic's prompt cache: `cache_control` breakpoints on the last
    tool, the system prompt and the latest turns (anthropic_cache.py). False sends none."""
    cache_ttl: CacheTTL = "5m"
    """How long a cached prefix lives: `5m` (writes bill 1.25x input) or `1h` (2x)."""


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
