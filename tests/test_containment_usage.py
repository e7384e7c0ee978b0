"""Untrusted numbers: a provider that reports negative, absurd or non-numeric usage cannot switch
the budget off or crash the run. A real HTTP server on 127.0.0.1 plays the lying provider."""

from __future__ import annotations

from typing import Any

import pytest
from provider_server import ProviderServer
from trace_lines import into

from orchestrator import Agent, TokenBudget, Trace, tool
from orchestrator.trace import Event

KEY = "sk-test-usage-0123456789"
FLAVOURS = [("openai", True), ("openai", False), ("anthropic", True), ("anthropic", False)]
IDS = ["openai-stream", "openai-whole", "anthropic-stream", "anthropic-whole"]


@tool
def ping() -> str:
    """Answer pong."""
    return "pong"


SCRIPT = {
    "agent": [
        {"tool_calls": [{"name": "ping", "arguments": {}}]},
        {"tool_calls": [{"name": "ping", "arguments": {}}]},
        {"content": "done"},
    ]
}


async def run(
    provider: str, stream: bool, usage: Any, budget: TokenBudget
) -> tuple[Any, list[Event]]:
    events: list[Event] = []
    with ProviderServer(SCRIPT, usage=usage) as server:
        model = server.adapter(provider, KEY, stream=stream, max_retries=0)
        agent = Agent(model, [ping], budget=budget, trace=Trace(listeners=[into(events)]))
        result = await agent.run("go")
    return result, [e for e in events if e["type"] == "model_call"]


@pytest.mark.parametrize(("provider", "stream"), FLAVOURS, ids=IDS)
async def test_negative_usage_is_replaced_by_our_count(provider: str, stream: bool) -> None:
    budget = TokenBudget(100_000)
    result, calls = await run(provider, stream, (-50_000, -10), budget)

    assert result.status == "completed"
    assert budget.used > 0
    assert budget.used == sum(c["usage"]["total_tokens"] for c in calls)
    assert all(c["usage"]["input_tokens"] > 0 for c in calls)
    assert all(c["usage_doubt"] == "the provider reported negative token counts" for c in calls)
    assert all(c["reported"] is False for c in calls)
    assert "-50000" in str(calls[0]["usage_raw"])


@pytest.mark.parametrize(("provider", "stream"), FLAVOURS, ids=IDS)
async def test_usage_that_is_not_a_number_is_replaced_by_our_count(
    provider: str, stream: bool
) -> None:
    budget = TokenBudget(100_000)
    result, calls = await run(provider, stream, ("lots", [1]), budget)

    assert result.status == "completed"
    assert budget.used == sum(c["usage"]["total_tokens"] for c in calls) > 0
    assert all(c["usage_doubt"] == "the provider's usage has no usable numbers" for c in calls)
    assert "lots" in str(calls[0]["usage_raw"])


@pytest.mark.parametrize(("provider", "stream"), FLAVOURS, ids=IDS)
async def test_absurd_usage_ends_the_run_and_charges_only_the_reservation(
    provider: str, stream: bool
) -> None:
    budget = TokenBudget(10_000_000)
    result, calls = await run(provider, stream, (5_000_000, 1), budget)

    assert result.status == "error"
    assert "reported 5,000,001 tokens for a call that could use at most about" in (
        result.error or ""
    )
    (only,) = calls
    assert budget.used == only["usage"]["total_tokens"] < 10_000
    assert budget.reserved == 0
    # The lying call's reply was not acted on: no tool ran, no call is left unanswered.
    assert [m.role for m in result.messages] == ["user"]


@pytest.mark.parametrize(("provider", "stream"), FLAVOURS, ids=IDS)
async def test_impossible_usage_is_clamped_to_the_reservation(provider: str, stream: bool) -> None:
    budget = TokenBudget(10_000_000)
    result, calls = await run(provider, stream, (60_000, 1), budget)

    assert result.status == "completed"
    assert all("60,001 tokens for a call that could use at most" in c["usage_doubt"] for c in calls)
    assert all(c["usage"]["total_tokens"] < 10_000 for c in calls)
    assert budget.used == sum(c["usage"]["total_tokens"] for c in calls)
