"""Which failures are retried, and how long the waits are."""

from __future__ import annotations

from email.utils import formatdate

import pytest

from orchestrator.models.http import retry_after, should_retry
from orchestrator.models.settings import RetryPolicy


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504, 529])
def test_retried_statuses(status: int) -> None:
    assert should_retry(status, {})


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422, 501])
def test_statuses_never_retried(status: int) -> None:
    assert not should_retry(status, {})


def test_the_server_can_say_otherwise() -> None:
    assert not should_retry(503, {"x-should-retry": "false"})
    assert should_retry(400, {"x-should-retry": "true"})


def test_retry_after_forms() -> None:
    assert retry_after({"retry-after": "3"}) == 3.0
    assert retry_after({"retry-after": "0.25"}) == 0.25
    assert retry_after({"retry-after-ms": "40", "retry-after": "9"}) == 0.04
    assert retry_after({"retry-after": "-1"}) == 0.0
    assert retry_after({"retry-after": "soon"}) is None
    assert retry_after({}) is None


def test_retry_after_as_an_http_date() -> None:
    now = 1_800_000_000.0
    header = formatdate(now + 30, usegmt=True)
    assert retry_after({"retry-after": header}, now=now) == pytest.approx(30.0)
    assert retry_after({"retry-after": formatdate(now - 30, usegmt=True)}, now=now) == 0.0


def test_backoff_doubles_up_to_the_cap_with_at_most_a_quarter_of_jitter() -> None:
    policy = RetryPolicy(backoff_base=1.0, backoff_cap=5.0)
    for retry, full in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0), (9, 5.0)]:
        delays = [policy.backoff(retry) for _ in range(200)]
        assert all(0.75 * full <= d <= full for d in delays)
        assert len(set(delays)) > 1
