"""Tools of the `http` skill: GET and POST over HTTP(S), only to hosts the run allows.

Every request, redirects included, must go to a host on the allow-list in the run's
permissions (`Permissions(network=[...])`). Response bodies are capped; binary bodies are
described, not shown.
"""

from __future__ import annotations

from typing import Any

import httpx

from orchestrator import ToolContext, ToolError, tool
from orchestrator.security import Permissions

DEFAULT_TIMEOUT = 30.0
MAX_TIMEOUT = 120.0
MAX_REDIRECTS = 5
MAX_BODY_CHARS = 20_000
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
    permissions = Permissions.coerce(ctx.permissions)
    target = _checked_url(url, permissions)
    seconds = max(1.0, min(timeout_seconds, MAX_TIMEOUT))
    try:
        async with httpx.AsyncClient(timeout=seconds, follow_redirects=False) as client:
            request = client.build_request(method, target, headers=headers, **content)
            response = await client.send(request)
            for _ in range(MAX_REDIRECTS):
                if response.next_request is None:
                    break
                _checked_url(response.next_request.url, permissions)
                response = await client.send(response.next_request)
            else:
                if response.next_request is not None:
                    raise ToolError(f"more than {MAX_REDIRECTS} redirects; stopped.")
    except httpx.HTTPError as exc:
        raise ToolError(f"{method} {target} failed: {type(exc).__name__}: {exc}") from None
    return render_response(response)


def render_response(response: httpx.Response) -> str:
    """Status line, a few useful headers, and the body (capped)."""
    kind = response.headers.get("content-type", "")
    lines = [f"HTTP {response.status_code} {response.reason_phrase}", f"URL: {response.url}"]
    if kind:
        lines.append(f"Content-Type: {kind}")
    body = response.content
    if body and kind and not any(t in kind for t in TEXT_TYPES):
        lines.append(f"\n[binary body of {len(body)} bytes, not shown]")
        return "\n".join(lines)
    text = response.text
    if len(text) > MAX_BODY_CHARS:
        cut = len(text) - MAX_BODY_CHARS
        text = f"{text[:MAX_BODY_CHARS]}\n[... {cut} more characters of the body left out]"
    return "\n".join(lines) + "\n\n" + text


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
        timeout_seconds: Seconds to wait for the response (1-120).
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
        timeout_seconds: Seconds to wait for the response (1-120).
    """
    if json_body is not None and text_body is not None:
        raise ToolError("give json_body or text_body, not both.")
    content: dict[str, Any] = {}
    if json_body is not None:
        content["json"] = json_body
    elif text_body is not None:
        content["content"] = text_body.encode("utf-8")
    return await _request("POST", url, ctx, headers, timeout_seconds, **content)
