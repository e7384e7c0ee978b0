"""Trace events in the words of the OpenTelemetry GenAI semantic conventions.

Plain functions from event fields to span attributes, with no OpenTelemetry import, so they
can be read and tested alone; `spans.py` puts them on spans.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..events import Event
from ..trace.summary import number

Attributes = dict[str, Any]
Mask = Callable[[str], str]

# `Usage` fields for prompt caching, read when an event's usage has them.
CACHE_READ_KEYS = ("cache_read_tokens",)
CACHE_WRITE_KEYS = ("cache_write_tokens",)


def provider_and_model(name: str | None) -> tuple[str, str]:
    """`openai:gpt-4o-mini` -> (`openai`, `gpt-4o-mini`); a name without a provider is both."""
    if not name:
        return "unknown", "unknown"
    provider, sep, model = name.partition(":")
    return (provider, model) if sep and model else (name, name)


def clean(attributes: Mapping[str, Any]) -> Attributes:
    """Attributes without the ones that have no value (OpenTelemetry refuses None)."""
    return {k: v for k, v in attributes.items() if v is not None}


def usage_attributes(usage: Mapping[str, Any] | None) -> Attributes:
    """Token counts: input (cached input included, as the budget counts it), output, cache."""
    usage = usage or {}
    return clean(
        {
            "gen_ai.usage.input_tokens": usage.get("input_tokens"),
            "gen_ai.usage.output_tokens": usage.get("output_tokens"),
            "gen_ai.usage.cache_read.input_tokens": _first(usage, CACHE_READ_KEYS),
            "gen_ai.usage.cache_creation.input_tokens": _first(usage, CACHE_WRITE_KEYS),
        }
    )


def chat_attributes(event: Event) -> Attributes:
    """A `model_call` event as the attributes of its `chat` span."""
    provider, model = provider_and_model(event.get("model"))
    finish = event.get("finish_reason")
    return clean(
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": model,
            "gen_ai.response.model": event.get("response_model"),
            "gen_ai.response.id": event.get("response_id"),
            "gen_ai.response.finish_reasons": [finish] if finish else None,
            "gen_ai.agent.name": event["agent"],
            "orchestrator.step": event.get("step"),
            "orchestrator.tool_choice": event.get("tool_choice"),
            "orchestrator.usage.reported": event.get("reported"),
            "orchestrator.input_estimate": event.get("input_estimate"),
            "orchestrator.cost": number(event.get("cost")),
            **usage_attributes(event.get("usage")),
        }
    )


def agent_attributes(event: Event, subagent: str | None) -> Attributes:
    """A `run_start` event as the attributes of its `invoke_agent` span."""
    provider, model = provider_and_model(event.get("model"))
    return clean(
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": event["agent"],
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": model,
            "orchestrator.subagent": subagent,
            "orchestrator.agent.depth": event.get("depth"),
            "orchestrator.agent.max_steps": event.get("max_steps"),
        }
    )


def tool_attributes(event: Event) -> Attributes:
    """A `tool_start` event (or a tool result that never started) as `execute_tool` attributes."""
    return clean(
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": event.get("name"),
            "gen_ai.tool.call.id": event.get("call_id"),
            "gen_ai.tool.type": "function",
            "gen_ai.agent.name": event["agent"],
        }
    )


def messages_json(messages: Iterable[Mapping[str, Any]], mask: Mask) -> str:
    """Trace messages as `gen_ai.input.messages` / `gen_ai.output.messages` JSON."""
    converted = [{"role": m.get("role"), "parts": message_parts(m)} for m in messages]
    return mask(json.dumps(converted, ensure_ascii=False))


def message_parts(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One message's parts: text, reasoning, tool calls, a tool's response."""
    parts: list[dict[str, Any]] = []
    if message.get("reasoning"):
        parts.append({"type": "reasoning", "content": message["reasoning"]})
    if message.get("role") == "tool":
        parts.append(
            {
                "type": "tool_call_response",
                "id": message.get("tool_call_id"),
                "response": message.get("content") or "",
            }
        )
        return parts
    if message.get("content"):
        parts.append({"type": "text", "content": message["content"]})
    for call in message.get("tool_calls") or ():
        parts.append(
            {
                "type": "tool_call",
                "id": call.get("id"),
                "name": call.get("name"),
                "arguments": _arguments(call.get("arguments")),
            }
        )
    return parts


def _arguments(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return raw


def _first(usage: Mapping[str, Any], keys: Iterable[str]) -> int | None:
    for key in keys:
        value = usage.get(key)
        if isinstance(value, int):
            return value
    return None
