"""The connection to a model server, kept apart from any wire format.

A `Connection` knows the base URL, the API key, the timeouts, the retry policy and the
concurrency limit; the adapters (`openai.py`, `anthropic.py`) only write request bodies and
read responses. Every Connection to one endpoint (base URL and key) shares one `Endpoint`
(`endpoint.py`): one `httpx.AsyncClient` and one count of calls in flight, so the limit holds
across all the agents of a run, however many models were resolved.

This module is the one boundary where httpx errors and HTTP error statuses become
`ModelError` / `RetryableModelError`, each naming the provider, the status and the server's
own message. The API key never appears in an error, an event or a log line.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Literal, TypeVar

import httpx
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from ..errors import ModelError, RetryableModelError
from ..security.secrets import MASK, mask_url_credentials
from .base import ModelRequest
from .endpoint import Endpoint, shared_endpoint
from .retry import RETRY_STATUSES, RetryPolicy, retry_after, should_retry

T = TypeVar("T")
Reader = Callable[[httpx.Response], Awaitable[T]]
AuthStyle = Literal["bearer", "x-api-key"]

MIN_MASKED_KEY = 8  # shorter "keys" are placeholders (vLLM's "EMPTY"); masking them mangles text
MAX_ERROR_TEXT = 1000
NO_RETRY_CODES = frozenset({"insufficient_quota"})


class ConnectionSettings(BaseModel):
    """Where a model server is and how to talk to it. Every field can be passed to
    `resolve_model` as a keyword argument."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    base_url: str
    """The server's base URL, e.g. `https://api.openai.com/v1` or `http://localhost:11434/v1`."""
    api_key: SecretStr | None = None
    """The API key; None sends no credentials (local servers)."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Extra HTTP headers sent with every request."""
    timeout: float = Field(600.0, gt=0)
    """Seconds the server may stay silent: before a non-streamed reply begins, or between two
    chunks of a streamed one."""
    deadline: float = Field(1800.0, gt=0)
    """Seconds one whole call may take, retries and waits included: a server that trickles a
    byte at a time, or a stream that never ends, fails the call here."""
    max_reply_bytes: int = Field(32_000_000, ge=1)
    """The largest reply read, in bytes; a bigger one fails the call."""
    connect_timeout: float = Field(10.0, gt=0)
    """Seconds to wait for a connection to open."""
    max_concurrency: int = Field(8, ge=1)
    """Most calls in flight at once to this endpoint, across every agent of the process."""
    max_retries: int = Field(3, ge=0)
    """Retries after a failure that is worth retrying (429, 5xx, 529, connection errors)."""
    backoff_base: float = Field(0.5, ge=0)
    """Seconds before the first retry when the server asks for no particular wait; doubles
    with each retry."""
    backoff_cap: float = Field(8.0, ge=0)
    """The longest backoff between two attempts, in seconds."""
    max_retry_after: float = Field(120.0, ge=0)
    """The longest `Retry-After` honoured, in seconds; a server asking for more is not retried."""

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return http_url(value)

    @property
    def retry(self) -> RetryPolicy:
        return RetryPolicy(
            max_retries=self.max_retries,
            backoff_base=self.backoff_base,
            backoff_cap=self.backoff_cap,
            max_retry_after=self.max_retry_after,
        )


def http_url(value: str) -> str:
    """A base URL, checked to be http(s) and without a trailing slash."""
    if not value.startswith(("http://", "https://")):
        raise ValueError(f"must start with http:// or https://, got {value!r}")
    return value.rstrip("/")


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
                request.emit(
                    "model_retry",
                    provider=self.provider,
                    attempt=attempt,
                    status=exc.status,
                    delay=round(delay, 3),
                    error=str(exc),
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
        if await gate.enter(self.settings.max_concurrency):
            request.emit(
                "model_wait",
                provider=self.provider,
                endpoint=self.base_url,
                waited_ms=round((time.perf_counter() - began) * 1000, 3),
                limit=self.settings.max_concurrency,
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
    except ValueError:
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
    return response.headers.get("content-type", "").startswith("text/event-stream")


async def read_json(response: httpx.Response, provider: str) -> Any:
    """The whole body as JSON."""
    await response.aread()
    try:
        return response.json()
    except (ValueError, RecursionError):
        raise bad_reply(provider, "the reply is not valid JSON") from None
