"""Trace events in the words of the OpenTelemetry GenAI semantic conventions.

Plain functions from event fields to span attributes, with no OpenTelemetry import, so they
can be read and tested alone; `spans.py` puts them on spans.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..events import ModelCall, RunStart, TokenCounts
from ..messages import Message

Attributes = dict[str, Any]
Mask = Callable[[str], str]


def provider_and_model(name: str | None) -> tuple[str, str]:
    """`openai:gpt-4o-mini` -> (`openai`, `gpt-4o-mini`); a name without a provider is both."""
    if not name:
        return "unknown", "unknown"
    provider, sep, model = name.partition(":")
    return (provider, model) if sep and model else (name, name)


def clean(attributes: Mapping[str, Any]) -> Attributes:
    """Attributes without the ones that have no value (OpenTelemetry refuses None)."""
    return {k: v for k, v in attributes.items() if v is not None}


def usage_attributes(usage: TokenCounts | None) -> Attributes:
    """Token counts: input (cached input included, as the budget counts it), output, cache
    (the cache counts when the event recorded them: `Usage.record()` leaves out zeros)."""
    if usage is None:
        return {}
    recorded = usage.model_fields_set
    return clean(
        {
            "gen_ai.usage.input_tokens": usage.input_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens,
            "gen_ai.usage.cache_read.input_tokens": usage.cache_read_tokens
            if "cache_read_tokens" in recorded
            else None,
            "gen_ai.usage.cache_creation.input_tokens": usage.cache_write_tokens
            if "cache_write_tokens" in recorded
            else None,
        }
    )


def chat_attributes(event: ModelCall) -> Attributes:
    """A `model_call` event as the attributes of its `chat` span."""
    provider, model = provider_and_model(event.model)
    finish = event.finish_reason
    return clean(
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": model,
            "gen_ai.response.model": event.response_model,
            "gen_ai.response.id": event.response_id,
            "gen_ai.response.finish_reasons": [finish] if finish else None,
            "gen_ai.agent.name": event.agent,
            "orchestrator.step": event.step,
            "orchestrator.tool_choice": event.tool_choice,
            "orchestrator.usage.reported": event.reported,
            "orchestrator.input_estimate": event.input_estimate,
            "orchestrator.cost": event.cost,
            **usage_attributes(event.usage),
        }
    )


def agent_attributes(event: RunStart, subagent: str | None) -> Attributes:
    """A `run_start` event as the attributes of its `invoke_agent` span."""
    provider, model = provider_and_model(event.model)
    return clean(
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": event.agent,
            "gen_ai.provider.name": provider,
            "gen_ai.request.model": model,
            "orchestrator.subagent": subagent,
            "orchestrator.agent.depth": event.depth,
            "orchestrator.agent.max_steps": event.max_steps,
        }
    )


def tool_attributes(agent: str, name: str | None, call_id: str | None) -> Attributes:
    """A tool call (started, or a result that never started) as `execute_tool` attributes."""
    return clean(
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
            "gen_ai.agent.name": agent,
        }
    )


def messages_json(messages: Iterable[Message], mask: Mask) -> str:
    """Trace messages as `gen_ai.input.messages` / `gen_ai.output.messages` JSON."""
    converted = [{"role": m.role, "parts": message_parts(m)} for m in messages]
    return mask(json.dumps(converted, ensure_ascii=False))


def message_parts(message: Message) -> list[dict[str, Any]]:
    """One message's parts: text, reasoning, tool calls, a tool's response."""
    parts: list[dict[str, Any]] = []
    if message.reasoning:
        parts.append({"type": "reasoning", "content": message.reasoning})
    if message.role == "tool":
        parts.append(
            {
                "type": "tool_call_response",
                "id": message.tool_call_id,
                "response": message.content or "",
            }
        )
        return parts
    if message.content:
        parts.append({"type": "text", "content": message.content})
    for call in message.tool_calls:
        parts.append(
            {
                "type": "tool_call",
                "id": call.id,
                "name": call.name,
                "arguments": _arguments(call.arguments),
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
