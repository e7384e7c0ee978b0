"""When to retry a failed model call, and how long to wait first.

Retried: HTTP 408, 409, 429, 500, 502, 503, 504, 529, and failures of the connection itself
(refused, reset, timed out, a stream cut off half-way). Never retried: anything else, such as
400, 401, 403, 404 and 422. A server's `x-should-retry` header overrides the status.

The wait is the server's own (`retry-after-ms`, then `Retry-After` as seconds or an HTTP
date) when it gives one, else exponential backoff with jitter, capped.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC
from email.utils import parsedate_to_datetime

RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
JITTER = 0.25


@dataclass(frozen=True)
class RetryPolicy:
    """How many times to retry and how long to wait between attempts.

    `max_retries` counts retries, so a call makes at most `max_retries + 1` attempts. The
    backoff before retry n (1-based) is `min(backoff_base * 2**(n-1), backoff_cap)`, less up
    to 25% jitter. A server that asks for a longer wait than `max_retry_after` seconds is not
    retried at all: waiting that long inside one agent step is worse than failing clearly.
    """

    max_retries: int = 3
    backoff_base: float = 0.5
    backoff_cap: float = 8.0
    max_retry_after: float = 120.0

    def backoff(self, retry: int) -> float:
        """Seconds to wait before retry number `retry` (1-based) when the server named none."""
        delay = min(self.backoff_base * 2 ** (retry - 1), self.backoff_cap)
        return delay * (1 - JITTER * random.random())


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
