"""Tools of the `http` skill: GET and POST over HTTP(S), only to hosts the run allows.

Every request, redirects included, must go to a host on the allow-list in the run's
permissions (`Permissions(network=[...])`). One deadline covers the whole call (redirects
and body included), and a body is read as it streams, no further than its cap, so neither a
server that trickles bytes nor one that sends gigabytes can hold the run or fill its memory.
Binary bodies are described, not shown.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from orchestrator import ToolContext, ToolError, tool
from orchestrator.security import Permissions

DEFAULT_TIMEOUT = 30.0
MAX_TIMEOUT = 120.0
MAX_REDIRECTS = 5
MAX_BODY_CHARS = 20_000
MAX_BODY_BYTES = 256_000  # read no more of a body than this: memory stays bounded
DEFAULT_PORTS = {"http": 80, "https": 443}
TEXT_TYPES = ("text/", "json", "xml", "javascript", "yaml", "csv", "x-www-form-urlencoded")


def _checked_url(url: str | httpx.URL, permissions: Permissions) -> httpx.URL:
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise ToolError(f"{str(url)!r} is not a valid URL: {exc}") from None
    if parsed.scheme not in DEFAULT_PORTS or not parsed.host:
        raise ToolError(f"{str(url)!r} must be an absolute http:// or https:// URL.")
    permissions.require_host(parsed.host, parsed.port or DEFAULT_PORTS[parsed.scheme])
    return parsed


async def _request(
    method: str,
    url: str,
    ctx: ToolContext,
    headers: dict[str, str] | None,
    timeout_seconds: float,
    **content: Any,
) -> str:
    permissions = ctx.permissions
    target = _checked_url(url, permissions)
    seconds = max(1.0, min(timeout_seconds, MAX_TIMEOUT))
    try:
        # One deadline for the whole call: a server that trickles bytes cannot hold it.
        async with (
            asyncio.timeout(seconds),
            httpx.AsyncClient(timeout=seconds, follow_redirects=False) as client,
        ):
            request = client.build_request(method, target, headers=headers, **content)
            response = await _follow(client, request, permissions)
            try:
                body, complete = await _read_capped(response)
            finally:
                await response.aclose()
    except TimeoutError:
        raise ToolError(
            f"{method} {target} did not finish within {seconds:g} s (the whole call, "
            "redirects and body included); stopped."
        ) from None
    except httpx.HTTPError as exc:
        raise ToolError(f"{method} {target} failed: {type(exc).__name__}: {exc}") from None
    return render_response(response, body, complete)


async def _follow(
    client: httpx.AsyncClient, request: httpx.Request, permissions: Permissions
) -> httpx.Response:
    """Send `request`, following redirects to allowed hosts only; the body is not read yet."""
    response = await client.send(request, stream=True)
    for _ in range(MAX_REDIRECTS):
        if response.next_request is None:
            return response
        await response.aclose()
        _checked_url(response.next_request.url, permissions)
        response = await client.send(response.next_request, stream=True)
    if response.next_request is not None:
        await response.aclose()
        raise ToolError(f"more than {MAX_REDIRECTS} redirects; stopped.")
    return response


async def _read_capped(response: httpx.Response) -> tuple[bytes, bool]:
    """At most MAX_BODY_BYTES of the body, read as it streams; and whether that was all."""
    kept = bytearray()
    async for chunk in response.aiter_bytes():
        kept += chunk
        if len(kept) > MAX_BODY_BYTES:
            return bytes(kept[:MAX_BODY_BYTES]), False
    return bytes(kept), True


def render_response(response: httpx.Response, body: bytes, complete: bool = True) -> str:
    """Status line, a few useful headers, and the body (capped)."""
    kind = response.headers.get("content-type", "")
    lines = [f"HTTP {response.status_code} {response.reason_phrase}", f"URL: {response.url}"]
    if kind:
        lines.append(f"Content-Type: {kind}")
    if body and kind and not any(t in kind for t in TEXT_TYPES):
        lines.append(f"\n[binary body of {_size(response, body, complete)}, not shown]")
        return "\n".join(lines)
    text = body.decode(response.encoding or "utf-8", errors="replace")
    if not complete:
        size = _size(response, body, complete)
        text = f"{text[:MAX_BODY_CHARS]}\n[... the body ({size}) goes on; only its start is shown]"
    elif len(text) > MAX_BODY_CHARS:
        cut = len(text) - MAX_BODY_CHARS
        text = f"{text[:MAX_BODY_CHARS]}\n[... {cut} more characters of the body left out]"
    return "\n".join(lines) + "\n\n" + text


def _size(response: httpx.Response, body: bytes, complete: bool) -> str:
    if complete:
        return f"{len(body):,} bytes"
    length = response.headers.get("content-length", "")
    return f"{int(length):,} bytes" if length.isdigit() else f"over {len(body):,} bytes"


@tool
async def get(
    url: str,
    ctx: ToolContext,
    headers: dict[str, str] | None = None,
    timeout_seconds: float = DEFAULT_TIMEOUT,
) -> str:
    """Send an HTTP GET request; returns the status, the content type and the body.

    Args:
        url: An absolute http:// or https:// URL whose host the run allows.
        headers: Extra request headers.
        timeout_seconds: Seconds the whole request may take, body included (1-120).
    """
    return await _request("GET", url, ctx, headers, timeout_seconds)


@tool
async def post(
    url: str,
    ctx: ToolContext,
    json_body: Any = None,
    text_body: str | None = None,
    headers: dict[str, str] | None = None,
    timeout_seconds: float = DEFAULT_TIMEOUT,
) -> str:
    """Send an HTTP POST request with a JSON or a text body; returns status, type and body.

    Args:
        url: An absolute http:// or https:// URL whose host the run allows.
        json_body: A JSON value to send as application/json.
        text_body: Raw text to send instead (set a Content-Type header if it matters).
        headers: Extra request headers.
        timeout_seconds: Seconds the whole request may take, body included (1-120).
    """
    if json_body is not None and text_body is not None:
        raise ToolError("give json_body or text_body, not both.")
    content: dict[str, Any] = {}
    if json_body is not None:
        content["json"] = json_body
    elif text_body is not None:
        content["content"] = text_body.encode("utf-8")
    return await _request("POST", url, ctx, headers, timeout_seconds, **content)
