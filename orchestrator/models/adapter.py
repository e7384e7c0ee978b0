"""What the HTTP adapters share: sending a request streamed or whole, and falling back.

An adapter (`openai.py`, `anthropic.py`) says how to write a body, how to read a whole reply
and how to assemble a streamed one; `HTTPChatModel.complete` does the rest. A stream that
closes before its first event is not a broken stream to retry as it was: some servers answer
200 and send nothing when they cannot stream a request (llama-cpp-python's server, when tools
are offered with `tool_choice: auto`). The adapter then asks once more without streaming,
records `model_stream_fallback` in the trace, and stops streaming to that endpoint; with
`stream_fallback=False` it fails at once with an error that names the setting to change.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any, ClassVar, Protocol

import httpx

from ..errors import ModelError
from .base import ModelRequest, ModelResponse, WireOptions
from .http import Connection, is_event_stream, read_json
from .sse import ServerSentEvent, aiter_events

STREAM_SETTING = (
    "turn streaming off for this model: `stream: false` in its model settings (a job spec's "
    "`model: {name: ..., stream: false}`), `--model-option stream=false` on the command line, "
    "or `stream=False` in Python"
)


class EmptyStreamError(ModelError):
    """A 200 reply whose stream closed before its first event."""


class Assembler(Protocol):
    """Rebuilds one reply from its stream events (`ChunkAssembler`, `EventAssembler`)."""

    def feed(self, event: ServerSentEvent) -> bool: ...

    def response(self) -> ModelResponse: ...


class HTTPChatModel:
    """A ChatModel over a Connection; subclasses supply the wire format.

    `path` is the request path under the base URL, `headers` go with every request.
    """

    path: ClassVar[str]
    headers: ClassVar[Mapping[str, str]] = {}
    options: WireOptions

    def __init__(
        self, model: str, connection: Connection, options: WireOptions, *, name: str | None
    ) -> None:
        self.model = model
        self.connection = connection
        self.options = options
        self.name = name or f"{connection.provider}:{model}"

    def build_body(self, request: ModelRequest, options: Any) -> dict[str, Any]:
        raise NotImplementedError

    def parse_whole(self, data: Any) -> ModelResponse:
        raise NotImplementedError

    def assembler(self, request: ModelRequest) -> Assembler:
        raise NotImplementedError

    async def complete(self, request: ModelRequest) -> ModelResponse:
        options = self.options
        endpoint = self.connection.endpoint
        if options.stream and endpoint.stream_refused:
            options = options.model_copy(update={"stream": False})
        try:
            return await self._send(request, options)
        except EmptyStreamError as exc:
            if not (options.stream and options.stream_fallback):
                raise
            endpoint.stream_refused = True
            request.emit(
                "model_stream_fallback",
                provider=self.provider,
                endpoint=self.connection.base_url,
                error=str(exc),
            )
            return await self._send(request, options.model_copy(update={"stream": False}))

    async def _send(self, request: ModelRequest, options: WireOptions) -> ModelResponse:
        body = self.build_body(request, options)
        read = self._read_stream if options.stream else self._read_whole
        return await self.connection.post(
            self.path, body, request, partial(read, request), headers=self.headers
        )

    async def _read_whole(self, request: ModelRequest, response: httpx.Response) -> ModelResponse:
        reply = self.parse_whole(await read_json(response, self.provider))
        if not reply.message.tool_calls:  # known to be an answer: text before calls is not
            request.text(reply.message.content)
        return reply

    async def _read_stream(self, request: ModelRequest, response: httpx.Response) -> ModelResponse:
        if not is_event_stream(response):  # a server that ignores `stream` sends JSON
            return await self._read_whole(request, response)
        assembler = self.assembler(request)
        events = 0
        async for event in aiter_events(response.aiter_lines()):
            events += 1
            if assembler.feed(event):
                break
        if events == 0:
            raise EmptyStreamError(
                f"{self.provider}: {response.request.url} answered {response.status_code} and "
                "closed the stream without sending any event; this server cannot stream this "
                f"request: {STREAM_SETTING}",
                provider=self.provider,
            )
        return assembler.response()

    @property
    def provider(self) -> str:
        return self.connection.provider

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self.connection.base_url!r})"
