"""The connection to a model server, kept apart from any wire format.

A `Connection` knows the base URL, the API key, the timeouts, the retry policy and the
concurrency limit; the adapters (`openai.py`, `anthropic.py`) only write request bodies and
read responses. Every Connection to one endpoint (base URL and key) shares one `Endpoint`:
one `httpx.AsyncClient` and one count of calls in flight, so the limit holds across all the
agents of a run, however many models were resolved (models resolved separately, a planner and
its sub-agents each resolving its own model string, still share one client and one limit, so
a wide fan-out does not trip the provider's rate limits; that needs state beyond any one
model, hence the process-wide table of endpoints, `shared_endpoint`).

Retried: HTTP 408, 409, 429, 500, 502, 503, 504, 529, and failures of the connection itself
(refused, reset, timed out, a stream cut off half-way). Never retried: anything else, such as
400, 401, 403, 404 and 422. A server's `x-should-retry` header overrides the status. The wait
is the server's own (`retry-after-ms`, then `Retry-After` as seconds or an HTTP date) when it
gives one, else the policy's backoff (`RetryPolicy`, settings.py).

Streamed replies arrive as server-sent events (`SSEDecoder`): OpenAI sends bare `data:`
lines, Anthropic names each event with an `event:` line. The decoder is fed one line at a
time so a recorded body and a live response go through the same code.

This module is the one boundary where httpx errors and HTTP error statuses become
`ModelError` / `RetryableModelError` (and `ContextWindowExceeded`, a refusal of a request too
long for the model's window, window.py), each naming the provider, the status and the server's
own message. The API key never appears in an error, an event or a log line.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import weakref
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any, Literal, TypeVar

import httpx

from ..errors import ContextWindowExceeded, ModelError, RetryableModelError
from ..events import ModelRetry, ModelWait
from ..security.secrets import MASK, mask_url_credentials
from .base import ModelRequest
from .settings import ConnectionSettings
from .window import context_refusal

T = TypeVar("T")
Reader = Callable[[httpx.Response], Awaitable[T]]
AuthStyle = Literal["bearer", "x-api-key"]

MIN_MASKED_KEY = 8  # shorter "keys" are placeholders (vLLM's "EMPTY"); masking them mangles text
MAX_ERROR_TEXT = 1000
PROBE_TIMEOUT = 5.0
MAX_PROBE_BYTES = 1_000_000
NO_RETRY_CODES = frozenset({"insufficient_quota"})
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})


class Connection:
    """Sends a request to one endpoint with retries, a timeout and the concurrency limit.

    `provider` names the server in errors and events. `auth` says how the key travels:
    `Authorization: Bearer` (OpenAI and compatible servers) or `x-api-key` (Anthropic).
    """

    def __init__(
        self,
        provider: str,
        settings: ConnectionSettings,
        *,
        auth: AuthStyle = "bearer",
        endpoint: Endpoint | None = None,
    ) -> None:
        self.provider = provider
        self.settings = settings
        self.auth = auth
        self.retry = settings.retry
        self._key = settings.api_key.get_secret_value() if settings.api_key else None
        self.endpoint = endpoint or shared_endpoint(settings.base_url, self._key)
        self._timeout = httpx.Timeout(settings.timeout, connect=settings.connect_timeout)

    @property
    def base_url(self) -> str:
        return self.settings.base_url

    async def post(
        self,
        path: str,
        body: Mapping[str, Any],
        request: ModelRequest,
        read: Reader[T],
        *,
        headers: Mapping[str, str] | None = None,
    ) -> T:
        """POST `body` as JSON and hand the response to `read`, retrying as the policy says.

        `read` consumes the whole body (a stream included) inside the attempt, so a stream
        that breaks half-way is retried from the start. Retries and waits for a place under
        the concurrency limit are reported through `request.emit`.
        """
        url = f"{self.base_url}{path}"
        try:
            async with asyncio.timeout(self.settings.deadline):
                return await self._attempts(url, body, request, read, headers or {})
        except TimeoutError:
            raise ModelError(
                self.mask(
                    f"{self.provider}: no complete reply from {url} within the call's deadline "
                    f"of {self.settings.deadline:g} s (the `deadline` setting)"
                ),
                provider=self.provider,
            ) from None

    async def get_json(self, url: str) -> Any:
        """GET `url` once (no retries, `PROBE_TIMEOUT` seconds in all) and read its JSON; None
        on any failure, a reply over `MAX_PROBE_BYTES` (read no further), or one that is not
        JSON. For asking a server about itself, never for a call."""
        client = self.endpoint.client()
        body = bytearray()
        try:
            async with asyncio.timeout(PROBE_TIMEOUT):
                request = client.build_request("GET", url, headers=self._headers({}))
                response = await client.send(request, stream=True)
                try:
                    if not response.is_success:
                        return None
                    async for chunk in response.aiter_bytes():
                        body.extend(chunk)
                        if len(body) > MAX_PROBE_BYTES:
                            return None
                finally:
                    await response.aclose()
        except (httpx.HTTPError, TimeoutError):
            return None
        try:
            return json.loads(body)
        except (ValueError, RecursionError):
            return None

    async def _attempts(
        self,
        url: str,
        body: Mapping[str, Any],
        request: ModelRequest,
        read: Reader[T],
        headers: Mapping[str, str],
    ) -> T:
        attempt = 0
        while True:
            attempt += 1
            try:
                async with self._slot(request):
                    return await self._attempt(url, body, read, headers)
            except ModelError as exc:
                exc.args = tuple(self.mask(str(arg)) for arg in exc.args)
                if not isinstance(exc, RetryableModelError):
                    raise
                delay = self._delay_or_give_up(exc, attempt)
                if request.recording:
                    request.emit(
                        ModelRetry(
                            agent=request.agent,
                            provider=self.provider,
                            # Not `attempt`: every event's own field, the run's attempt, keeps it.
                            request_attempt=attempt,
                            status=exc.status,
                            delay=round(delay, 3),
                            error=str(exc),
                        )
                    )
                await asyncio.sleep(delay)

    async def _attempt(
        self, url: str, body: Mapping[str, Any], read: Reader[T], headers: Mapping[str, str]
    ) -> T:
        client = self.endpoint.client()
        try:
            async with client.stream(
                "POST", url, json=body, headers=self._headers(headers), timeout=self._timeout
            ) as response:
                if not response.is_success:
                    await response.aread()
                    raise self._status_error(response)
                return await self._read(read, response)
        except httpx.TimeoutException as exc:
            raise RetryableModelError(self._timeout_text(exc, url), provider=self.provider) from exc
        except httpx.RequestError as exc:
            reason = str(exc) or type(exc).__name__
            raise RetryableModelError(
                f"{self.provider}: connection to {url} failed: {reason}", provider=self.provider
            ) from exc

    async def _read(self, read: Reader[T], response: httpx.Response) -> T:
        response.stream = _Capped(response.stream, self.settings.max_reply_bytes, self.provider)
        try:
            return await read(response)
        except (KeyError, TypeError, AttributeError, IndexError) as exc:
            # A reply of an unexpected shape: a clear error, not a crash deep in a parser.
            raise ModelError(
                f"{self.provider}: could not read the reply from {response.request.url} "
                f"({type(exc).__name__}: {exc})",
                provider=self.provider,
            ) from exc

    @asynccontextmanager
    async def _slot(self, request: ModelRequest) -> AsyncIterator[None]:
        gate = self.endpoint.gate()
        began = time.perf_counter()
        if await gate.enter(self.settings.max_concurrency) and request.recording:
            request.emit(
                ModelWait(
                    agent=request.agent,
                    provider=self.provider,
                    endpoint=self.base_url,
                    waited_ms=round((time.perf_counter() - began) * 1000, 3),
                    limit=self.settings.max_concurrency,
                )
            )
        try:
            yield
        finally:
            gate.leave()

    def _delay_or_give_up(self, exc: RetryableModelError, attempt: int) -> float:
        if attempt > self.retry.max_retries:
            raise ModelError(
                f"{exc} (gave up after {attempt} attempts)",
                provider=self.provider,
                status=exc.status,
            ) from exc
        if exc.retry_after is None:
            return self.retry.backoff(attempt)
        if exc.retry_after > self.retry.max_retry_after:
            raise ModelError(
                f"{exc} (the server asked to wait {exc.retry_after:g} s, more than "
                f"max_retry_after={self.retry.max_retry_after:g} s)",
                provider=self.provider,
                status=exc.status,
            ) from exc
        return exc.retry_after

    def _headers(self, extra: Mapping[str, str]) -> dict[str, str]:
        headers = {**self.settings.headers, **extra}
        if self._key and self.auth == "bearer":
            headers["authorization"] = f"Bearer {self._key}"
        elif self._key:
            headers["x-api-key"] = self._key
        return headers

    def _status_error(self, response: httpx.Response) -> ModelError:
        status = response.status_code
        message, code = server_message(response)
        text = f"{self.provider}: HTTP {status} from {response.request.url}: {message}"
        refusal = context_refusal(message, code, _json_or_none(response)) if status < 500 else None
        if refusal is not None:
            return ContextWindowExceeded(
                text,
                provider=self.provider,
                status=status,
                window=refusal.window,
                prompt_tokens=refusal.prompt_tokens,
            )
        if code not in NO_RETRY_CODES and should_retry(status, response.headers):
            return RetryableModelError(
                text,
                provider=self.provider,
                status=status,
                retry_after=retry_after(response.headers),
            )
        return ModelError(text, provider=self.provider, status=status)

    def _timeout_text(self, exc: httpx.TimeoutException, url: str) -> str:
        if isinstance(exc, httpx.ConnectTimeout):
            return f"{self.provider}: could not connect to {url} within {self._timeout.connect:g} s"
        return f"{self.provider}: {url} sent nothing for {self.settings.timeout:g} s (timed out)"

    def mask(self, text: str) -> str:
        """`text` with the API key and the credentials of any URL (the base URL's) blotted
        out."""
        if self._key and len(self._key) >= MIN_MASKED_KEY:
            text = text.replace(self._key, MASK)
        return mask_url_credentials(text)

    def __repr__(self) -> str:
        return f"Connection({self.provider!r}, {self.base_url!r})"


class _Capped(httpx.AsyncByteStream):
    """A response body that fails once it grows past `limit` bytes."""

    def __init__(self, stream: Any, limit: int, provider: str) -> None:
        self.stream = stream
        self.limit = limit
        self.provider = provider

    async def __aiter__(self) -> AsyncIterator[bytes]:
        total = 0
        async for chunk in self.stream:
            total += len(chunk)
            if total > self.limit:
                raise ModelError(
                    f"{self.provider}: the reply is larger than {self.limit:,} bytes "
                    "(the `max_reply_bytes` setting); it was not read further",
                    provider=self.provider,
                )
            yield chunk

    async def aclose(self) -> None:
        await self.stream.aclose()


def server_message(response: httpx.Response) -> tuple[str, str | None]:
    """The server's own words about an error, and its error code or type when it gave one.

    Reads OpenAI's and Anthropic's `{"error": {"message", "type"/"code"}}` and the common
    `{"message"}` / `{"detail"}` shapes of other servers; else the body's text.
    """
    try:
        data = response.json()
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and error.get("message"):
            code = error.get("code") or error.get("type")
            suffix = f" [{code}]" if isinstance(code, str) else ""
            return f"{error['message']}{suffix}", code if isinstance(code, str) else None
        for key in ("error", "message", "detail"):
            if isinstance(data.get(key), str | list):
                return str(data[key])[:MAX_ERROR_TEXT], None
    text = response.text.strip()[:MAX_ERROR_TEXT]
    return text or response.reason_phrase or "no message", None


def _json_or_none(response: httpx.Response) -> Any:
    try:
        return response.json()
    except (ValueError, RecursionError):
        return None


def stream_error(provider: str, message: str, status: int | None) -> ModelError:
    """An error a server reported inside a 200 stream; retryable unless its status says not."""
    text = f"{provider}: error in the stream: {message}"
    if status is None or status in RETRY_STATUSES:
        return RetryableModelError(text, provider=provider, status=status)
    return ModelError(text, provider=provider, status=status)


def bad_reply(provider: str, what: str) -> RetryableModelError:
    """A reply that ended early or could not be read: worth another attempt from the start."""
    return RetryableModelError(f"{provider}: {what}", provider=provider)


def is_event_stream(response: httpx.Response) -> bool:
    return str(response.headers.get("content-type", "")).startswith("text/event-stream")


async def read_json(response: httpx.Response, provider: str) -> Any:
    """The whole body as JSON."""
    await response.aread()
    try:
        return response.json()
    except (ValueError, RecursionError):
        raise bad_reply(provider, "the reply is not valid JSON") from None


# The endpoint: one client and one gate per base URL and key.


class _Gate:
    """Counts calls in flight; a call enters when fewer than its limit are in.

    Each caller brings its own limit, so two Connections to one endpoint with different
    settings still share one count. Leaving wakes every waiter to re-check: the counts are
    small and it leaves no wake-up lost to a waiter that was cancelled.
    """

    def __init__(self) -> None:
        self.active = 0
        self._waiters: list[asyncio.Future[None]] = []

    async def enter(self, limit: int) -> bool:
        """Take a place; True if the call had to wait for one."""
        waited = False
        while self.active >= limit:
            waited = True
            future = asyncio.get_running_loop().create_future()
            self._waiters.append(future)
            try:
                await future
            finally:
                if future in self._waiters:
                    self._waiters.remove(future)
        self.active += 1
        return waited

    def leave(self) -> None:
        self.active -= 1
        waiters, self._waiters = self._waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)


class _LoopState:
    def __init__(self) -> None:
        # No pool cap of httpx's own: the gate is the limit, and a second one would only
        # turn a wait into a PoolTimeout.
        self.client = httpx.AsyncClient(limits=httpx.Limits(max_connections=None))
        self.gate = _Gate()


class Endpoint:
    """What every Connection to one base URL and key shares: the HTTP client and the gate.

    An httpx client and asyncio primitives belong to one event loop, so there is one of each
    per running loop (each `asyncio.run`, each test); within a loop they are shared.
    """

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.stream_refused: set[str] = set()
        """Shapes of request this endpoint answered with an empty stream; sent whole from then."""
        self.windows: dict[str, int | None] = {}
        """The context window the server said each of its models has (None: it did not say)."""
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopState] = (
            weakref.WeakKeyDictionary()
        )

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        state = self._loops.get(loop)
        if state is None or state.client.is_closed:
            # A client's connections refer to their loop, so entries of finished loops
            # (an earlier `asyncio.run`) would never be collected unless dropped here.
            for finished in [other for other in self._loops if other.is_closed()]:
                del self._loops[finished]
            state = self._loops[loop] = _LoopState()
        return state

    def client(self) -> httpx.AsyncClient:
        return self._state().client

    def gate(self) -> _Gate:
        return self._state().gate

    async def aclose(self) -> None:
        """Close this loop's client; the next call opens a new one."""
        state = self._loops.pop(asyncio.get_running_loop(), None)
        if state is not None:
            await state.client.aclose()

    def __repr__(self) -> str:
        return f"Endpoint({self.base_url!r})"


_ENDPOINTS: dict[tuple[str, str], Endpoint] = {}


def shared_endpoint(base_url: str, api_key: str | None) -> Endpoint:
    """The process-wide Endpoint for this base URL and key (keys are kept only as hashes)."""
    key_id = hashlib.sha256(api_key.encode()).hexdigest()[:16] if api_key else ""
    return _ENDPOINTS.setdefault((base_url, key_id), Endpoint(base_url))


async def close_connections() -> None:
    """Close the HTTP clients the running event loop opened. Optional: call before the loop
    ends to release sockets at once rather than when they are collected."""
    for endpoint in list(_ENDPOINTS.values()):
        await endpoint.aclose()


# When to retry, and how long the server asked to wait.


def should_retry(status: int, headers: Mapping[str, str]) -> bool:
    """Whether an HTTP error status is worth another attempt."""
    override = headers.get("x-should-retry", "").lower()
    if override in ("true", "false"):
        return override == "true"
    return status in RETRY_STATUSES


def retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """The wait a server asked for, in seconds, or None if it asked for none we can read."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        seconds = _float(millis)
        if seconds is not None:
            return max(seconds / 1000, 0.0)
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _float(value)
    if seconds is not None:
        return max(seconds, 0.0)
    return _seconds_until(value, time.time() if now is None else now)


def _float(text: str) -> float | None:
    try:
        return float(text.strip())
    except ValueError:
        return None


def _seconds_until(http_date: str, now: float) -> float | None:
    try:
        moment = parsedate_to_datetime(http_date.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:  # "-0000" means UTC with no zone named
        moment = moment.replace(tzinfo=UTC)
    return max(moment.timestamp() - now, 0.0)


# Server-sent events.


@dataclass(frozen=True)
class ServerSentEvent:
    """One event: its name (`message` when the stream names none) and its data lines joined."""

    event: str
    data: str


class SSEDecoder:
    """Collects `event:` and `data:` fields until a blank line ends the event.

    Comment lines (`: keep-alive`) and other fields (`id:`, `retry:`) are ignored.
    """

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []

    def feed(self, line: str) -> ServerSentEvent | None:
        """Take one line (with or without its line ending); an event when one is complete."""
        line = line.rstrip("\r\n")
        if not line:
            return self.flush()
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            self._event = value
        elif field == "data":
            self._data.append(value)
        return None

    def flush(self) -> ServerSentEvent | None:
        """End the event in progress.

        Called at a blank line, and at the end of the body: some recorded streams lack the
        final blank line, and whether a stream is complete is decided by its own last event.
        """
        event = ServerSentEvent(self._event or "message", "\n".join(self._data))
        has_data = bool(self._data)
        self._event, self._data = "", []
        return event if has_data else None


def iter_events(text: str) -> Iterator[ServerSentEvent]:
    """The events of a whole recorded body."""
    decoder = SSEDecoder()
    for line in text.splitlines():
        if (event := decoder.feed(line)) is not None:
            yield event
    if (event := decoder.flush()) is not None:
        yield event


async def aiter_events(lines: AsyncIterable[str]) -> AsyncIterator[ServerSentEvent]:
    """The events of a live body, given its lines (httpx's `Response.aiter_lines()`)."""
    decoder = SSEDecoder()
    async for line in lines:
        if (event := decoder.feed(line)) is not None:
            yield event
    if (event := decoder.flush()) is not None:
        yield event
