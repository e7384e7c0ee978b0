"""A `tools/call` result as the text the model reads.

Text content is the observation; images, audio and resources are described (type, MIME type,
size, URI) rather than pasted; `structuredContent` is kept as JSON text when the content does
not already say the same. Results are read as plain mappings in the wire's camelCase
(`isError`, `structuredContent`, `mimeType`), so the SDK's objects (dumped by alias) and
recorded JSON-RPC results go through the same code; the snake_case names of the SDK's
models (`is_error`, `structured_content`) are read too.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Observation:
    """What a call came to: the text for the model, and whether the server said it failed."""

    text: str
    is_error: bool


def as_mapping(result: object) -> Mapping[str, Any]:
    """An SDK result object (a pydantic model) or a mapping, as a wire-shaped mapping."""
    if isinstance(result, Mapping):
        return result
    dump = getattr(result, "model_dump", None)
    if callable(dump):
        dumped: Mapping[str, Any] = dump(by_alias=True, mode="json", exclude_none=True)
        return dumped
    raise TypeError(f"not a tool result: {type(result).__name__}")


def _field(data: Mapping[str, Any], camel: str, snake: str) -> Any:
    return data.get(camel, data.get(snake))


def convert(result: object) -> Observation:
    """The observation of one `tools/call` result."""
    data = as_mapping(result)
    parts = [describe(block) for block in data.get("content") or []]
    texts = [p for p in parts if p]
    structured = _field(data, "structuredContent", "structured_content")
    if structured is not None:
        rendered = json.dumps(structured, ensure_ascii=False, sort_keys=True)
        if not any(_same_json(t, structured) for t in texts):
            texts.append(rendered if not texts else f"structuredContent: {rendered}")
    is_error = bool(_field(data, "isError", "is_error"))
    text = "\n".join(texts)
    if not text:
        text = "(the tool reported an error and no detail)" if is_error else "(no output)"
    return Observation(text=text, is_error=is_error)


def _same_json(text: str, value: Any) -> bool:
    """Whether a text block already says what the structured content does (servers built on
    the SDK wrap a plain return value as `{"result": value}` beside its text)."""
    if isinstance(value, dict) and len(value) == 1 and "result" in value:
        inner = value["result"]
        if isinstance(inner, str) and inner == text:
            return True
        value = inner
    try:
        return bool(json.loads(text) == value)
    except (ValueError, RecursionError):
        return False


def describe(block: Any) -> str:
    """One content block: text as is, anything else described in a line."""
    data = as_mapping(block)
    kind = data.get("type")
    if kind == "text":
        return str(data.get("text", ""))
    if kind in ("image", "audio"):
        mime = _field(data, "mimeType", "mime_type") or "unknown type"
        return f"[{kind}: {mime}, {_decoded_size(data.get('data'))}]"
    if kind == "resource_link":
        size = data.get("size")
        extra = f", {size} bytes" if isinstance(size, int) else ""
        mime = _field(data, "mimeType", "mime_type")
        kind_text = f", {mime}" if mime else ""
        return f"[resource link: {data.get('uri')} ({data.get('name', '')}{kind_text}{extra})]"
    if kind == "resource":
        return _resource(data.get("resource") or {})
    return f"[{kind or 'unknown'} content]"


def _resource(resource: Mapping[str, Any]) -> str:
    uri = resource.get("uri")
    mime = _field(resource, "mimeType", "mime_type") or "unknown type"
    if isinstance(resource.get("text"), str):
        return f"[resource {uri} ({mime})]\n{resource['text']}"
    return f"[resource {uri}: {mime}, {_decoded_size(resource.get('blob'))}]"


def _decoded_size(data: object) -> str:
    if not isinstance(data, str):
        return "no data"
    try:
        return f"{len(base64.b64decode(data, validate=False))} bytes"
    except (binascii.Error, ValueError):
        return f"{len(data)} characters of base64"
