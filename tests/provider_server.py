"""A real HTTP server on 127.0.0.1 that speaks OpenAI Chat Completions and Anthropic Messages.

Replies come from a ScriptedModel, so a test writes the model's turns in the usual script
format; the server encodes each reply in the wire format asked for (`/v1/chat/completions` or
`/v1/messages`), whole or streamed, splitting text and tool arguments into small fragments
(the fragments of parallel tool calls interleave). Faults queued with `fail(...)` make the
next requests fail in chosen ways: an HTTP error status, a slow answer, a stream that drops
the connection, ends early, carries a malformed line or an error event, sends no event at
all, or is ended with `[DONE]` before its end (both as llama-cpp-python's server does); or
pause a stream half-way until the test lets it go on.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from orchestrator.messages import Message
from orchestrator.models import (
    ChatModel,
    ForcedTool,
    ModelRequest,
    ScriptedModel,
    ToolChoice,
    resolve_model,
)
from orchestrator.models.anthropic import ERROR_STATUS

FaultKind = Literal[
    "status", "json", "slow", "drop", "cut", "malformed", "error_event", "empty", "done", "pause"
]
ANTHROPIC_ERROR_TYPE = {status: kind for kind, status in ERROR_STATUS.items()}
PIECE = 4  # characters per streamed fragment


@dataclass
class Fault:
    """What goes wrong with one request.

    `status`: answer with `status`, `headers` and `payload`, or an error body in the
    provider's format (after `delay` seconds).
    `json`: answer 200 with `payload` as a JSON body, whatever was asked for.
    `slow`: wait `delay` seconds before answering. `drop`: close the connection after `after`
    events. `cut`: end the stream cleanly after `after` events, without its final event.
    `malformed`: send a line that is not JSON after `after` events. `error_event`: send the
    provider's in-stream error (`message`, `status` deciding its type) after `after` events.
    `empty`: answer a streamed request 200 with no event, then hang up although the headers
    said keep-alive. `done`: send `[DONE]` after `after` events (no finish reason), then hang
    up. `pause`: before event `after`, wait until `release` is set.
    """

    kind: FaultKind
    status: int = 500
    headers: dict[str, str] = field(default_factory=dict)
    message: str = "injected failure"
    after: int = 2
    delay: float = 0.0
    payload: Any = None
    release: threading.Event | None = None


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    received: float = 0.0
    answered: float | None = None
    """When the request came in and when its answer was sent (`time.monotonic()`)."""


class ProviderServer:
    """Serves scripted replies on 127.0.0.1 at a free port. Use as a context manager.

    `usage` is the (input, output) token count reported with every reply, or None to report
    none, or a function of the request body that gives it (a server that counts each
    prompt). `api_key`, when set, is the only key accepted. `latency` delays every reply.
    `route`, when given, names the script's agent a request body is for (the wire carries no
    agent name): several agents of one run then follow their own turns. `refuse`, when given,
    reads each request body and returns an error payload to answer it with (HTTP 400), or
    None to answer it as usual: a server with a context window of its own. `pages` are
    answered to GET requests by path (`/v1/models`, `/props`), as JSON; other paths get 404.
    """

    def __init__(
        self,
        script: Mapping[str, Sequence[Mapping[str, Any]]] | ScriptedModel,
        *,
        usage: tuple[Any, ...] | Callable[[Mapping[str, Any]], tuple[Any, ...]] | None = (100, 20),
        api_key: str | None = None,
        latency: float = 0.0,
        route: Callable[[Mapping[str, Any]], str] | None = None,
        refuse: Callable[[Mapping[str, Any]], Any] | None = None,
        pages: Mapping[str, Any] | None = None,
    ) -> None:
        self.pages = dict(pages or {})
        self.gets: list[str] = []
        self.route = route
        self.refuse = refuse
        self.model = script if isinstance(script, ScriptedModel) else ScriptedModel(script)
        self.usage = usage
        self.api_key = api_key
        self.latency = latency
        self.faults: list[Fault] = []
        self.agent_faults: dict[str, list[Fault]] = {}
        self.requests: list[Recorded] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._replay: Message | None = None
        self._lock = threading.Lock()
        self._httpd = _HTTPServer(self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def openai_url(self) -> str:
        return f"{self.url}/v1"

    def adapter(self, provider: str, api_key: str, **options: Any) -> ChatModel:
        """A real adapter for `provider` pointed at this server, with tiny retry delays."""
        base_url = self.openai_url if provider == "openai" else self.url
        settings = {"api_key": api_key, "backoff_base": 0.01, "backoff_cap": 0.05, **options}
        return resolve_model(f"{provider}:test-model", base_url=base_url, **settings)

    def fail(self, *faults: Fault, agent: str | None = None) -> None:
        """Make the next requests fail, one fault per request, in order; with `agent`, the
        next requests that `route` gives to that agent."""
        if agent is None:
            self.faults.extend(faults)
        else:
            self.agent_faults.setdefault(agent, []).extend(faults)

    def bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests]

    def __enter__(self) -> ProviderServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _begin(
        self, path: str, headers: Mapping[str, str], body: dict[str, Any]
    ) -> tuple[Recorded, Fault | None]:
        with self._lock:
            self.requests.append(Recorded(path, dict(headers), body, time.monotonic()))
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            if self.route is not None and (mine := self.agent_faults.get(self.route(body))):
                return self.requests[-1], mine.pop(0)
            return self.requests[-1], (self.faults.pop(0) if self.faults else None)

    def _end(self, recorded: Recorded) -> None:
        with self._lock:
            self.in_flight -= 1
            recorded.answered = time.monotonic()

    def timing(self) -> list[tuple[float, float]]:
        """(received, answered) of every request, in order; unanswered ones end now."""
        now = time.monotonic()
        return [(r.received, r.answered or now) for r in self.requests]

    def _reply(self, body: Mapping[str, Any], wire: str) -> Message:
        agent = self.route(body) if self.route is not None else "agent"
        request = ModelRequest(messages=(), tool_choice=_tool_choice(body, wire), agent=agent)
        with self._lock:
            if self._replay is not None:
                message, self._replay = self._replay, None
                return message
            return asyncio.run(self.model.complete(request)).message

    def _failed_mid_stream(self, message: Message) -> None:
        """The client never got this reply whole: give it again to the next request."""
        with self._lock:
            self._replay = message


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, provider: ProviderServer) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.provider = provider

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up (a timeout test) leaves a broken pipe behind


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer
    _ended = True
    _recorded: Recorded

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        provider = self.server.provider
        provider.gets.append(self.path)
        if self.path in provider.pages:
            self._json(200, provider.pages[self.path])
        else:
            self._json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        wire = {"/v1/chat/completions": "openai", "/v1/messages": "anthropic"}.get(self.path)
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
        if wire is None:
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        provider = self.server.provider
        headers = {k.lower(): v for k, v in self.headers.items()}
        self._recorded, fault = provider._begin(self.path, headers, body)
        self._ended = False
        try:
            self._answer(provider, wire, body, fault)
        finally:
            self._end_request()

    def _end_request(self) -> None:
        # Called just before a response's last bytes go out: once the client has them it may
        # send its next request at once, and that must not count as overlapping this one.
        if not self._ended:
            self._ended = True
            self.server.provider._end(self._recorded)

    def _answer(
        self, provider: ProviderServer, wire: str, body: dict[str, Any], fault: Fault | None
    ) -> None:
        presented = self.headers.get("x-api-key") or self.headers.get("authorization", "")
        if provider.api_key and presented.removeprefix("Bearer ") != provider.api_key:
            message = f"Incorrect API key provided: {presented.removeprefix('Bearer ')}"
            self._json(401, error_body(wire, 401, message))
            return
        refusal = provider.refuse(body) if provider.refuse is not None else None
        if refusal is not None:
            self._json(400, refusal)
            return
        if fault is not None and fault.kind == "status":
            time.sleep(fault.delay)
            payload = fault.payload or error_body(wire, fault.status, fault.message)
            self._json(fault.status, payload, fault.headers)
            return
        if fault is not None and fault.kind == "json":
            self._json(200, fault.payload)
            return
        time.sleep(provider.latency + (fault.delay if fault is not None else 0.0))
        if fault is not None and fault.kind == "empty" and body.get("stream"):
            self._hang_up_empty()
            return
        message = provider._reply(body, wire)
        model = str(body.get("model", "test-model"))
        usage = provider.usage(body) if callable(provider.usage) else provider.usage
        if not body.get("stream"):
            encode = openai_whole if wire == "openai" else anthropic_whole
            self._json(200, encode(message, usage, model))
            return
        if wire == "openai":
            included = body.get("stream_options", {}).get("include_usage")
            frames = openai_frames(message, usage if included else None, model)
        else:
            frames = anthropic_frames(message, usage, model)
        if fault is not None and fault.kind not in ("slow", "pause"):
            provider._failed_mid_stream(message)
        self._stream(wire, frames, fault)

    def _json(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self._end_request()
        self.wfile.write(data)

    def _stream(self, wire: str, frames: list[str], fault: Fault | None) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for index, frame in enumerate(frames):
            if fault is not None and index == fault.after and self._inject(wire, fault):
                return
            self._chunk(frame)
        self._end_request()
        self._chunk("")

    def _inject(self, wire: str, fault: Fault) -> bool:
        """Do what `fault` says before the next frame; True when the response is over."""
        if fault.kind == "pause" and fault.release is not None:
            fault.release.wait(timeout=60)
        elif fault.kind in ("drop", "done"):
            if fault.kind == "done":  # as llama-cpp-python ends a stream another request cut
                self._chunk("data: [DONE]\n\n")
            self._end_request()
            self._hang_up()
            return True
        elif fault.kind == "malformed":
            self._chunk('data: {"choices": [{"index": 0, "delta": {"content": "x\n\n')
        elif fault.kind == "error_event":
            self._chunk(error_frame(wire, fault.status, fault.message))
        if fault.kind in ("cut", "error_event"):
            self._end_request()
            self._chunk("")
            return True
        return False

    def _hang_up_empty(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "keep-alive")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self._end_request()
        self._chunk("")
        self._hang_up()

    def _hang_up(self) -> None:
        self.wfile.flush()
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    def _chunk(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


def _tool_choice(body: Mapping[str, Any], wire: str) -> ToolChoice:
    choice = body.get("tool_choice")
    if not body.get("tools") or choice is None:
        return "none" if not body.get("tools") else "auto"
    if wire == "openai":
        return ForcedTool(choice["function"]["name"]) if isinstance(choice, dict) else choice
    kinds: dict[str, ToolChoice] = {"auto": "auto", "any": "required", "none": "none"}
    return kinds.get(choice["type"]) or ForcedTool(choice["name"])


def pieces(text: str) -> list[str]:
    return [text[i : i + PIECE] for i in range(0, len(text), PIECE)]


def error_body(wire: str, status: int, message: str) -> dict[str, Any]:
    if wire == "openai":
        return {"error": {"message": message, "type": "server_error", "param": None, "code": None}}
    kind = ANTHROPIC_ERROR_TYPE.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


def error_frame(wire: str, status: int, message: str) -> str:
    if wire == "openai":
        return f"data: {json.dumps({'error': {'message': message, 'type': 'server_error'}})}\n\n"
    kind = ANTHROPIC_ERROR_TYPE.get(status, "api_error")
    return _event("error", {"type": "error", "error": {"type": kind, "message": message}})


def openai_whole(message: Message, usage: tuple[Any, ...] | None, model: str) -> dict[str, Any]:
    wire: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.reasoning:
        wire["reasoning_content"] = message.reasoning
    if message.tool_calls:
        wire["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    finish = "tool_calls" if message.tool_calls else "stop"
    reply: dict[str, Any] = {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": wire, "finish_reason": finish}],
    }
    if usage is not None:
        reply["usage"] = _openai_usage(usage)
    return reply


def openai_frames(message: Message, usage: tuple[Any, ...] | None, model: str) -> list[str]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        data = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "model": model}
        return f"data: {json.dumps({**data, 'choices': [choice]})}\n\n"

    frames = [chunk({"role": "assistant", "content": None if message.tool_calls else ""})]
    frames += [chunk({"reasoning_content": p}) for p in pieces(message.reasoning or "")]
    frames += [chunk({"content": p}) for p in pieces(message.content or "")]
    frames += [chunk({"tool_calls": [f]}) for f in _interleaved_fragments(message)]
    frames.append(chunk({}, "tool_calls" if message.tool_calls else "stop"))
    if usage is not None:
        data = {"id": "chatcmpl-test", "model": model, "choices": [], "usage": _openai_usage(usage)}
        frames.append(f"data: {json.dumps(data)}\n\n")
    return [*frames, "data: [DONE]\n\n"]


def _interleaved_fragments(message: Message) -> Iterator[dict[str, Any]]:
    """Each call's header fragment in turn, then argument fragments round-robin."""
    for index, call in enumerate(message.tool_calls):
        function = {"name": call.name, "arguments": ""}
        yield {"index": index, "id": call.id, "type": "function", "function": function}
    queues = [pieces(call.arguments) for call in message.tool_calls]
    while any(queues):
        for index, queue in enumerate(queues):
            if queue:
                yield {"index": index, "function": {"arguments": queue.pop(0)}}


def _openai_usage(usage: tuple[Any, ...]) -> dict[str, Any]:
    # A test may play a provider that sends nonsense: then the total is nonsense too.
    numbers = all(isinstance(n, int) for n in usage[:2])
    total = usage[0] + usage[1] if numbers else usage[0]
    counts = {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": total}
    return {**counts, **usage_extra(usage)}


def usage_extra(usage: tuple[Any, ...]) -> dict[str, Any]:
    """More usage fields (cache counts) a test gives as the third item of `usage`."""
    return dict(usage[2]) if len(usage) > 2 else {}


def anthropic_whole(message: Message, usage: tuple[Any, ...] | None, model: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if message.content:
        content.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        tool_input = json.loads(call.arguments)
        content.append({"type": "tool_use", "id": call.id, "name": call.name, "input": tool_input})
    reply: dict[str, Any] = {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if message.tool_calls else "end_turn",
        "stop_sequence": None,
    }
    if usage is not None:
        reply["usage"] = {"input_tokens": usage[0], "output_tokens": usage[1], **usage_extra(usage)}
    return reply


def anthropic_frames(message: Message, usage: tuple[Any, ...] | None, model: str) -> list[str]:
    start: dict[str, Any] = {"id": "msg_test", "type": "message", "role": "assistant"}
    start |= {"model": model, "content": [], "stop_reason": None}
    if usage is not None:
        start["usage"] = {"input_tokens": usage[0], "output_tokens": 1, **usage_extra(usage)}
    frames = [_event("message_start", {"type": "message_start", "message": start})]
    blocks = []
    if message.content:
        blocks.append(({"type": "text", "text": ""}, "text_delta", "text", message.content))
    for call in message.tool_calls:
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        blocks.append((block, "input_json_delta", "partial_json", call.arguments))
    for index, (block, delta_type, key, text) in enumerate(blocks):
        frames.append(_event("content_block_start", {"index": index, "content_block": block}))
        if index == 0:
            frames.append(_event("ping", {"type": "ping"}))
        for piece in ([""] if delta_type == "input_json_delta" else []) + pieces(text):
            delta = {"type": delta_type, key: piece}
            frames.append(_event("content_block_delta", {"index": index, "delta": delta}))
        frames.append(_event("content_block_stop", {"index": index}))
    stop = "tool_use" if message.tool_calls else "end_turn"
    end: dict[str, Any] = {"delta": {"stop_reason": stop, "stop_sequence": None}}
    if usage is not None:
        end["usage"] = {"output_tokens": usage[1]}
    frames.append(_event("message_delta", end))
    return [*frames, _event("message_stop", {})]


def _event(name: str, data: dict[str, Any]) -> str:
    return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n"
