"""What the HTTP adapters share: sending a request streamed or whole, and falling back.

An adapter (`openai.py`, `anthropic.py`) says how to write a body, how to read a whole reply
and how to assemble a streamed one; `HTTPChatModel.complete` does the rest. A stream that
closes before its first event, or that the server ends (`[DONE]`) before the reply is
complete, is not a broken connection to retry as it was: the server cannot serve that request
as a stream. llama-cpp-python's server does both: it sends nothing when tools are offered with
`tool_choice: auto`, and it cuts a stream short whenever another request is waiting. The
adapter then asks once more without streaming and records `model_stream_fallback` in the
trace; later requests of the same shape (tools or not, and the tool choice) to that endpoint
are sent whole from the start, while other shapes still stream. With `stream_fallback=False`
it fails at once with an error that names the setting to change. The connection that carried
such a stream is closed, not reused: the server may hang up on it while saying `keep-alive`.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import httpx

from ..errors import ModelError
from ..events import ModelStreamFallback
from .base import Model, ModelRequest, ModelResponse
from .http import Connection, ServerSentEvent, aiter_events, is_event_stream, read_json
from .settings import WireOptions

Options = TypeVar("Options", bound=WireOptions)

STREAM_SETTING = (
    "turn streaming off for this model: `stream: false` in its model settings (a job spec's "
    "`model: {name: ..., stream: false}`), `--model-option stream=false` on the command line, "
    "or `stream=False` in Python"
)


class UnusableStreamError(ModelError):
    """A 200 stream that closed before its first event, or was ended before the reply was."""


def cut_short(provider: str) -> UnusableStreamError:
    """The server ended a stream (`[DONE]`) before the reply's end (no finish reason)."""
    return UnusableStreamError(
        f"{provider}: the server ended the stream before the reply was complete (no finish "
        "reason); some servers cut a stream short when another request arrives (llama-cpp-"
        f"python's server unless started with --interrupt_requests False): {STREAM_SETTING}",
        provider=provider,
    )


class Assembler(Protocol):
    """Rebuilds one reply from its stream events: one per wire format (`ChunkAssembler` in
    openai.py, `EventAssembler` in anthropic.py), and a new wire format brings its own."""

    def feed(self, event: ServerSentEvent) -> bool: ...

    def response(self) -> ModelResponse: ...


class HTTPChatModel(Model, Generic[Options]):
    """A ChatModel over a Connection; subclasses supply the wire format and its options.

    `path` is the request path under the base URL, `headers` go with every request.
    """

    path: ClassVar[str]
    headers: ClassVar[Mapping[str, str]] = {}
    options: Options

    def __init__(
        self, model: str, connection: Connection, options: Options, *, name: str | None
    ) -> None:
        self.model = model
        self.connection = connection
        self.options = options
        self.name = name or f"{connection.provider}:{model}"

    def build_body(self, request: ModelRequest, options: Options) -> dict[str, Any]:
        raise NotImplementedError

    def parse_whole(self, data: Any) -> ModelResponse:
        raise NotImplementedError

    def assembler(self, request: ModelRequest) -> Assembler:
        raise NotImplementedError

    async def complete(self, request: ModelRequest) -> ModelResponse:
        options = self.options
        refused = self.connection.endpoint.stream_refused
        shape = request_shape(request)
        if options.stream and shape in refused:
            options = options.model_copy(update={"stream": False})
        try:
            return await self._send(request, options)
        except UnusableStreamError as exc:
            if not (options.stream and options.stream_fallback):
                raise
            refused.add(shape)
            if request.recording:
                request.emit(
                    ModelStreamFallback(
                        agent=request.agent,
                        provider=self.provider,
                        endpoint=self.connection.base_url,
                        request=shape,
                        error=str(exc),
                    )
                )
            return await self._send(request, options.model_copy(update={"stream": False}))

    async def _send(self, request: ModelRequest, options: Options) -> ModelResponse:
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
        try:
            if events == 0:
                raise UnusableStreamError(
                    f"{self.provider}: {response.request.url} answered {response.status_code} "
                    "and closed the stream without sending any event; this server cannot "
                    f"stream this request: {STREAM_SETTING}",
                    provider=self.provider,
                )
            return assembler.response()
        except UnusableStreamError:
            await _hang_up(response)
            raise

    @property
    def provider(self) -> str:
        return self.connection.provider

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {self.connection.base_url!r})"


def request_shape(request: ModelRequest) -> str:
    """What a server may or may not stream: whether tools are offered, and the tool choice."""
    if not request.tools:
        return "no tools"
    choice = request.tool_choice
    return f"tools, tool_choice {choice if isinstance(choice, str) else 'forced'}"


async def _hang_up(response: httpx.Response) -> None:
    """Close the connection under `response`, so the pool does not hand it out again."""
    stream = response.extensions.get("network_stream")
    close = getattr(stream, "aclose", None)
    if close is not None:
        await close()
