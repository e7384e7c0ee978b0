"""OpenAI Chat Completions: the wire format of OpenAI and of the servers that copy it
(DeepSeek, vLLM, Ollama, llama.cpp's server, LM Studio, OpenRouter).

`build_body` writes a request, `parse_completion` reads a whole reply, and `ChunkAssembler`
rebuilds a streamed reply from its chunks. `OpenAIChatModel` sends them over a Connection
(http.py), which owns everything about reaching the server; its options are `OpenAIOptions`
(settings.py).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..messages import Message, ToolCall, ToolSpec, Usage
from .adapter import HTTPChatModel, cut_short
from .base import (
    DEFAULT_OUTPUT_MODES,
    ModelRequest,
    ModelResponse,
    OutputMode,
    OutputSchema,
    ToolChoice,
    usage_count,
)
from .http import Connection, ServerSentEvent, bad_reply, iter_events, stream_error
from .settings import PRESETS, OpenAIOptions
from .window import models_window, props_window

PATH = "/chat/completions"


def build_body(model: str, request: ModelRequest, options: OpenAIOptions) -> dict[str, Any]:
    """The JSON body of one request. Without tools, no `tool_choice` is sent either. An output
    schema goes as `response_format`, which OpenAI, vLLM, Ollama and llama.cpp's servers
    (through a grammar) all enforce: `json_schema`, or `json_object` with the schema beside
    it where the server takes only that (`OpenAIOptions.output_format`)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [_wire_message(m, options.send_reasoning) for m in request.messages],
        options.max_tokens_field: options.output_tokens(request.max_output_tokens),
        **options.sampling(),
    }
    if request.tools:
        body["tools"] = [_wire_tool(spec) for spec in request.tools]
        body["tool_choice"] = _wire_choice(request.tool_choice)
    if request.output_schema is not None:
        body["response_format"] = _wire_format(request.output_schema, options)
    if options.stream:
        body["stream"] = True
        if options.include_usage:
            body["stream_options"] = {"include_usage": True}
    return {**body, **options.extra_body}


def _wire_message(message: Message, send_reasoning: bool) -> dict[str, Any]:
    if message.role == "tool":
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id,
            "content": message.content or "",
        }
    if message.role != "assistant":
        return {"role": message.role, "content": message.content or ""}
    # Always a string: `null` beside tool calls is valid for OpenAI, but servers with a
    # stricter request model (llama-cpp-python's) reject it, and "" means the same.
    wire: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
    if message.tool_calls:
        wire["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments},
            }
            for call in message.tool_calls
        ]
    if send_reasoning and message.reasoning:
        wire["reasoning_content"] = message.reasoning
    return wire


def _wire_tool(spec: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        },
    }


def _wire_format(output: OutputSchema, options: OpenAIOptions) -> dict[str, Any]:
    if options.output_format == "json_object":
        return {"type": "json_object", "schema": output.schema}
    schema: dict[str, Any] = {"name": output.name, "schema": output.schema, "strict": output.strict}
    if output.description:
        schema["description"] = output.description
    return {"type": "json_schema", "json_schema": schema}


def _wire_choice(choice: ToolChoice) -> str | dict[str, Any]:
    if isinstance(choice, str):
        return choice
    return {"type": "function", "function": {"name": choice.name}}


def parse_completion(data: Any, provider: str = "openai") -> ModelResponse:
    """A whole (non-streamed) `chat.completion` as a response."""
    if isinstance(data, dict) and data.get("error"):
        raise _error(provider, data["error"])
    choices = data.get("choices") if isinstance(data, dict) else None
    if not choices or not isinstance(choices[0], dict):
        raise bad_reply(provider, "the reply has no choices")
    choice = choices[0]
    message = choice.get("message") or {}
    calls = [
        _tool_call(raw.get("id"), (raw.get("function") or {}).get("name"), _arguments(raw), i)
        for i, raw in enumerate(message.get("tool_calls") or ())
    ]
    return _response(
        content=_text(message.get("content")),
        reasoning=_reasoning(message),
        refusal=message.get("refusal"),
        calls=calls,
        finish_reason=choice.get("finish_reason"),
        usage=data.get("usage"),
        meta={key: data[key] for key in ("id", "model") if key in data},
    )


@dataclass
class _PartialCall:
    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ChunkAssembler:
    """Rebuilds one reply from its `chat.completion.chunk` events.

    Only choice 0 is kept (a request never asks for more). Tool calls are assembled by their
    `index`, so several calls whose fragments interleave come out whole and in order; their
    arguments stay the raw text the model wrote. Feed events until `feed` returns True
    (`[DONE]`), then take `response()`.
    """

    def __init__(
        self, provider: str = "openai", on_text: Callable[[str | None], None] | None = None
    ) -> None:
        self.provider = provider
        self.on_text = on_text
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.refusal: list[str] = []
        self.calls: dict[int, _PartialCall] = {}
        self.finish_reason: str | None = None
        self.usage: Mapping[str, Any] | None = None
        self.meta: dict[str, Any] = {}
        self.done = False

    def feed(self, event: ServerSentEvent) -> bool:
        """Take one event; True once the stream says it is done."""
        data = event.data.strip()
        if data.startswith("[DONE]"):
            self.done = True
            return True
        try:
            chunk = json.loads(data)
        except (ValueError, RecursionError):
            raise bad_reply(self.provider, f"malformed stream event: {data[:200]!r}") from None
        self.feed_chunk(chunk)
        return False

    def feed_chunk(self, chunk: Any) -> None:
        if not isinstance(chunk, dict):
            raise bad_reply(self.provider, f"malformed stream chunk: {str(chunk)[:200]!r}")
        if chunk.get("error"):
            raise _error(self.provider, chunk["error"])
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for key in ("id", "model"):
            if key in chunk:
                self.meta.setdefault(key, chunk[key])
        for choice in chunk.get("choices") or ():
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self._feed_choice(choice)

    def _feed_choice(self, choice: Mapping[str, Any]) -> None:
        delta = choice.get("delta") or {}
        text = _text(delta.get("content"))
        _add(self.content, text)
        if self.on_text is not None:
            self.on_text(text)
        _add(self.reasoning, _reasoning(delta))
        _add(self.refusal, delta.get("refusal"))
        for fragment in delta.get("tool_calls") or ():
            self._feed_call(fragment)
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]

    def _feed_call(self, fragment: Mapping[str, Any]) -> None:
        index = fragment.get("index")
        if not isinstance(index, int):
            index = self._index_of(fragment.get("id"))
        call = self.calls.setdefault(index, _PartialCall())
        call.id = call.id or fragment.get("id")
        function = fragment.get("function") or {}
        if function.get("name") and not call.name:
            call.name = function["name"]
        _add(call.arguments, function.get("arguments"))

    def _index_of(self, call_id: str | None) -> int:
        # For servers that leave `index` out: a fragment with a new id starts a new call.
        if call_id and all(call.id != call_id for call in self.calls.values()):
            return len(self.calls)
        return max(self.calls, default=0)

    def response(self) -> ModelResponse:
        """The assembled reply; a stream that stopped before its end is an error to retry, one
        that the server ended (`[DONE]`) before a finish reason is one to ask for whole."""
        if self.finish_reason is None:
            if self.done:
                raise cut_short(self.provider)
            raise bad_reply(self.provider, "the stream ended before the reply was complete")
        calls = [
            _tool_call(call.id, call.name, "".join(call.arguments), index)
            for index, call in sorted(self.calls.items())
        ]
        return _response(
            content="".join(self.content),
            reasoning="".join(self.reasoning),
            refusal="".join(self.refusal),
            calls=calls,
            finish_reason=self.finish_reason,
            usage=self.usage,
            meta=self.meta,
        )


def parse_stream(body: str, provider: str = "openai") -> ModelResponse:
    """A whole recorded stream (a `text/event-stream` body) as a response."""
    assembler = ChunkAssembler(provider)
    for event in iter_events(body):
        if assembler.feed(event):
            break
    return assembler.response()


class OpenAIChatModel(HTTPChatModel[OpenAIOptions]):
    """A ChatModel for any server that speaks Chat Completions."""

    path = PATH

    def __init__(
        self,
        model: str,
        connection: Connection,
        options: OpenAIOptions | None = None,
        *,
        name: str | None = None,
    ) -> None:
        super().__init__(model, connection, options or OpenAIOptions(), name=name)

    def build_body(self, request: ModelRequest, options: OpenAIOptions) -> dict[str, Any]:
        return build_body(self.model, request, options)

    def parse_whole(self, data: Any) -> ModelResponse:
        return parse_completion(data, self.provider)

    def assembler(self, request: ModelRequest) -> ChunkAssembler:
        return ChunkAssembler(self.provider, request.text)

    @property
    def output_modes(self) -> tuple[OutputMode, ...]:
        """Its provider's (settings.py: `PRESETS`): native (`response_format` with a JSON
        schema) first where the server enforces it, OpenAI and the local servers (vLLM,
        llama.cpp, Ollama, LM Studio); a final-answer tool first elsewhere (DeepSeek knows only
        `json_object`)."""
        preset = PRESETS.get(self.provider)
        return preset.output_modes if preset is not None else DEFAULT_OUTPUT_MODES

    @property
    def asks_server_window(self) -> bool:
        """Only local servers are asked (`openai-compatible:`)."""
        return self.provider == "openai-compatible"

    async def server_window(self) -> int | None:
        """The context window the server says this model has, asked once per endpoint and
        model (window.py); None when it does not say: vLLM's `/v1/models` (`max_model_len`),
        llama.cpp's `/props` (`n_ctx`)."""
        if not self.asks_server_window:
            return None
        windows = self.connection.endpoint.windows
        if self.model not in windows:
            base = self.connection.base_url
            listing = await self.connection.get_json(f"{base}/models")
            window = models_window(listing, self.model)
            if window is None:
                root = base.removesuffix("/v1")
                window = props_window(await self.connection.get_json(f"{root}/props"))
            windows[self.model] = window
        return windows[self.model]


def _response(
    *,
    content: str | None,
    reasoning: str | None,
    refusal: str | None,
    calls: Sequence[ToolCall],
    finish_reason: str | None,
    usage: Any,
    meta: Mapping[str, Any],
) -> ModelResponse:
    extra = dict(meta)
    if refusal:
        extra["refusal"] = refusal
    message = Message(
        role="assistant",
        # A refusal is the answer the user should see when there is no other.
        content=content or refusal or None,
        tool_calls=tuple(calls),
        reasoning=reasoning or None,
    )
    return ModelResponse(
        message=message,
        usage=_usage(usage),
        finish_reason=finish_reason,
        extra=extra,
        raw_usage=usage,
    )


def _tool_call(call_id: Any, name: Any, arguments: str, index: int) -> ToolCall:
    return ToolCall(
        id=call_id if isinstance(call_id, str) and call_id else _new_call_id(index),
        name=name if isinstance(name, str) else "",
        arguments=arguments or "{}",
    )


def _new_call_id(index: int) -> str:
    # Some local servers send no ids; results are matched to calls by id, so invent one.
    return f"call_{index}_{uuid.uuid4().hex[:12]}"


def _arguments(raw: Mapping[str, Any]) -> str:
    arguments = (raw.get("function") or {}).get("arguments")
    if arguments is None or isinstance(arguments, str):
        return arguments or ""
    return json.dumps(arguments)  # a few servers send an object instead of its JSON text


def _usage(raw: Any) -> Usage | None:
    if not isinstance(raw, Mapping):
        return None
    prompt = usage_count(raw.get("prompt_tokens"))
    completion = usage_count(raw.get("completion_tokens"))
    if prompt is None or completion is None:
        return None
    usage = Usage.of(prompt, completion, cache_read=min(prompt, _cached_prompt_tokens(raw)))
    total = usage_count(raw.get("total_tokens"))
    return usage.model_copy(update={"total_tokens": total}) if total is not None else usage


def _cached_prompt_tokens(raw: Mapping[str, Any]) -> int:
    """Prompt tokens served from the provider's cache: OpenAI's
    `prompt_tokens_details.cached_tokens`, or DeepSeek's `prompt_cache_hit_tokens`."""
    details = raw.get("prompt_tokens_details")
    cached = usage_count(details.get("cached_tokens")) if isinstance(details, Mapping) else None
    if cached is None:
        cached = usage_count(raw.get("prompt_cache_hit_tokens"))
    return max(0, cached or 0)


def _reasoning(part: Mapping[str, Any]) -> str | None:
    """Reasoning text: `reasoning_content` (DeepSeek, vLLM) or `reasoning` (Ollama, OpenRouter)."""
    for key in ("reasoning_content", "reasoning"):
        value = part.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _text(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):  # content given as parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict)) or None
    return str(content)


def _add(parts: list[str], value: Any) -> None:
    if isinstance(value, str) and value:
        parts.append(value)


def _error(provider: str, error: Any) -> Exception:
    if not isinstance(error, Mapping):
        return stream_error(provider, str(error), None)
    message = str(error.get("message") or "an error occurred during streaming")
    code = error.get("code")
    kind = code if isinstance(code, str) else error.get("type")
    status = code if isinstance(code, int) else None
    return stream_error(provider, f"{message} [{kind}]" if kind else message, status)
