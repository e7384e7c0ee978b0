"""What a real job's wire requests would get from the providers' prompt caches.

A planner loads a skill and calls its tool, then forks three sub-agents that each use the skill's
tool four times; every request goes over HTTP to a local server speaking the provider's wire
format, and the providers' published cache rules (bench/cache_rules.py) are applied to the
request bodies as they were sent, with when each was answered.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from provider_server import ProviderServer
from skill_factory import write_skill

from bench.cache_rules import (
    ANTHROPIC_MIN_PREFIX,
    OPENAI_MIN_PREFIX,
    OPENAI_STEP,
    anthropic_blocks,
    anthropic_ceiling,
    anthropic_tally,
    openai_ceiling,
    openai_tally,
)
from orchestrator import Orchestrator

REGIONS = ("north", "south", "east")
LEDGER_TOOLS = '''
from orchestrator import tool

@tool
def lookup(account: str, month: str, include_pending: bool = False) -> str:
    """Look up an account's ledger for one month: balance, entries and open items.

    Args:
        account: The account id, e.g. ACC-1042.
        month: The month, as YYYY-MM.
        include_pending: Also list entries that are not booked yet.
    """
    lines = [f"Ledger {account} for {month}: opening balance 12,480.00 EUR."]
    for day in range(1, 3):
        lines.append(f"{month}-{day:02d}  entry {day:03d}  invoice INV-{day * 37:05d}  "
                     f"{day * 113.25:,.2f} EUR  booked by clerk {day % 4}")
    lines.append("Closing balance 14,102.75 EUR; 2 open items; last reconciled 2026-10-31.")
    return "\\n".join(lines)
'''
LEDGER_BODY = """# Ledger

Reconcile an account month by month. For each month, call `ledger__lookup` with the account
and the month, compare the closing balance with the next month's opening balance, and list
every difference with the entries that explain it. Report open items separately, with their
invoice numbers. Amounts are in EUR; keep two decimals. Never guess an entry that the ledger
does not show: say that it is missing instead.
"""
MONTHS = ("2026-07", "2026-08", "2026-09", "2026-10")
RECONCILER = """---
name: reconciler
description: Reconciles one ledger account over several months and reports every difference.
skills: [ledger]
---
You are a reconciliation clerk working for a finance team. A planner gave you one account and
a period; reconcile that account and nothing else.

How to work:
- Look up every month of the period with the ledger skill's tool, in order, one month per call.
- For each month, check that the opening balance equals the previous month's closing balance,
  and that the entries add up to the difference between opening and closing balance.
- When a check fails, find the entries that explain the difference: entries booked twice,
  entries booked in the wrong month, reversed signs, missing invoices. Name each one with its
  date, entry number, invoice number and amount.
- Keep open items apart from differences: an open item is an invoice that is booked but not
  paid, and it is not an error.
- Amounts are in EUR with two decimals. Never round, never estimate, never invent an entry
  that the ledger does not show; when something is missing, say exactly what is missing.

How to answer:
- Start with one line: the account, the period, and whether it reconciles.
- Then a table of months: opening balance, closing balance, total of entries, difference.
- Then the differences, one line each, with the entries that explain them.
- Then the open items, one line each.
- Finish with what a person should check by hand, if anything.

The planner sees only your final answer, not your tool calls: make it complete on its own.
"""


def lookup_calls(region: str) -> list[dict[str, Any]]:
    return [
        {"tool_calls": [{"name": "ledger__lookup", "arguments": {"account": region, "month": m}}]}
        for m in MONTHS
    ]


def job_script(definition: bool) -> dict[str, list[dict[str, Any]]]:
    tasks: list[dict[str, Any]] = [
        {"id": region, "task": f"[{region}] Reconcile the {region} account.", "skills": ["ledger"]}
        for region in REGIONS
    ]
    if definition:
        tasks = [{**task, "agent": "reconciler"} for task in tasks]
    dispatched = {"tool": "ledger__lookup", "arguments": {"account": "HQ", "month": "2026-10"}}
    planner = [
        {"tool_calls": [{"name": "load_skill", "arguments": {"name": "ledger"}}]},
        {"tool_calls": [{"name": "call_skill_tool", "arguments": dispatched}]},
        {"tool_calls": [{"name": "fork", "arguments": {"tasks": tasks}}]},
        {"content": "All three regions reconcile; the open items are listed per region."},
    ]
    script = {"planner": planner}
    for region in REGIONS:
        script[region] = [*lookup_calls(region), {"content": f"{region}: reconciled."}]
    return script


def tool_name(tool: Mapping[str, Any]) -> str:
    """A tool's name in either wire format (OpenAI nests it under `function`)."""
    return str(tool.get("function", tool)["name"])


def route(body: Mapping[str, Any]) -> str:
    """Which agent a request is for: the sub-agent whose task marker its first turn holds."""
    turns = [m for m in body["messages"] if m["role"] == "user"]
    first = json.dumps(turns[0]) if turns else ""
    return next((region for region in REGIONS if f"[{region}]" in first), "planner")


def run_job(
    tmp_path: Path, provider: str, *, definition: bool = True, **options: Any
) -> ProviderServer:
    """Run the job; its sub-agents run the `reconciler` definition when `definition`."""
    write_skill(
        tmp_path / "skills",
        "ledger",
        description="Reconcile ledger accounts month by month.",
        body=LEDGER_BODY,
        tools=LEDGER_TOOLS,
    )
    (tmp_path / "agents").mkdir(exist_ok=True)
    (tmp_path / "agents" / "reconciler.md").write_text(RECONCILER, encoding="utf-8")
    server = ProviderServer(job_script(definition), route=route)
    with server:
        model = server.adapter(provider, "test-key", **options)
        orchestrator = Orchestrator(
            model, skills=[tmp_path / "skills"], subagents=[tmp_path / "agents"], max_parallel=3
        )
        result = orchestrator.run_sync("Reconcile the three regional accounts for Q3.")
    assert result.status == "completed", result.error
    return server


RULES = {
    "anthropic": (anthropic_tally, anthropic_ceiling),
    "openai": (openai_tally, openai_ceiling),
}
STEPS = {"anthropic": (ANTHROPIC_MIN_PREFIX, 1), "openai": (OPENAI_MIN_PREFIX, OPENAI_STEP)}


def servable(shared: int, provider: str) -> int:
    """What a provider's cache can serve of a prefix shared with an earlier request: nothing
    under its minimum, then all of it (Anthropic) or whole 128-token steps (OpenAI)."""
    least, step = STEPS[provider]
    return 0 if shared < least else least + (shared - least) // step * step


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize("definition", [True, False], ids=["reconciler", "general"])
def test_a_planner_and_three_sub_agents_are_served_from_the_cache(
    tmp_path: Path, provider: str, definition: bool
) -> None:
    server = run_job(tmp_path, provider, definition=definition)
    bodies = server.bodies()
    assert len(bodies) == 4 + 3 * 5
    rules, ceiling = RULES[provider]
    tally, most = rules(bodies, server.timing()), ceiling(bodies)
    # Each request's new turns can never come from a cache: the job's shape sets the ceiling
    # (87% here). Anthropic serves all of it: every shared prefix ends at a breakpoint and
    # reaches its 1,024-token minimum, the first sub-agent's too (the planner's tools array,
    # fork's list of sub-agents in it: about 1,230 tokens). OpenAI serves each prefix in
    # 128-token steps, which costs about 64 tokens a request, 3% of requests of about 2,000:
    # 96-98% of the ceiling as the requests' lengths fall against the steps (the temporary
    # folder's name in the prompts moves them).
    assert most.read_share > 0.8
    assert tally.read_share >= most.read_share * (0.98 if provider == "anthropic" else 0.95)
    # A sub-agent's tools array begins with the planner's whole array, in its order (its
    # preloaded skill's tool comes after): the first sub-agent's first request shares the
    # planner's tools (not only its first three tools' 333), over 1,024 tokens, and both
    # providers serve them.
    names = [[tool_name(t) for t in body["tools"]] for body in bodies]
    assert all(tools[: len(names[0])] == names[0] for tools in names)
    first_sub_agent = next(i for i, body in enumerate(bodies) if route(body) != "planner")
    shared = most.per_request[first_sub_agent][1]
    assert shared >= ANTHROPIC_MIN_PREFIX
    assert tally.per_request[first_sub_agent][1] == servable(shared, provider) >= 1024
    # Request by request, the cache serves all that its rules allow of what the request shares
    # with an earlier one, however the lengths fall: a sibling sent before the request that
    # warms its prefix was answered, or breakpoints that miss the shared prefix, show here.
    # (A prefix that changes lowers the ceiling too: the checks below catch that.)
    reads = [read for _, read, _ in tally.per_request]
    assert reads == [servable(shared, provider) for _, shared, _ in most.per_request]
    # Each agent's tools and system prompt are the same from its first request to its last.
    by_agent: dict[str, list[dict[str, Any]]] = {}
    for body in bodies:
        by_agent.setdefault(route(body), []).append(body)
    assert len(by_agent) == 4
    # The three sub-agents run one definition: their first requests differ only in the task.
    siblings = [agent_bodies[0] for name, agent_bodies in by_agent.items() if name != "planner"]
    prefixes = {json.dumps([b["tools"], b.get("system") or b["messages"][0]]) for b in siblings}
    assert len(prefixes) == 1
    for agent_bodies in by_agent.values():
        assert len({json.dumps(b["tools"]) for b in agent_bodies}) == 1
        firsts = [b.get("system") or b["messages"][0] for b in agent_bodies]
        assert len({json.dumps(first) for first in firsts}) == 1
        if provider == "openai":  # and each request starts with the whole one before it
            for before, after in zip(agent_bodies, agent_bodies[1:], strict=False):
                assert after["messages"][: len(before["messages"])] == before["messages"]
    if provider == "anthropic":
        assert all(sum(b.breakpoint for b in anthropic_blocks(x)) <= 4 for x in bodies)


def test_appending_loaded_tools_breaks_the_prefix_that_the_dispatcher_keeps() -> None:
    # The rules themselves: a request whose tools array grew reads nothing of the last one's.
    tools = [{"name": f"t{i}", "description": "x " * 300, "input_schema": {}} for i in range(4)]
    first = {"tools": tools[:3], "system": "s", "messages": [{"role": "user", "content": "go"}]}
    grown = {**first, "tools": tools}
    marked = [
        {**first, "tools": [*tools[:2], {**tools[2], "cache_control": {"type": "ephemeral"}}]},
        {**grown, "tools": [*tools[:3], {**tools[3], "cache_control": {"type": "ephemeral"}}]},
    ]
    assert anthropic_tally(marked).read_tokens == 0
    openai = [{"tools": b["tools"], "messages": b["messages"]} for b in (grown, first)]
    assert openai_tally(openai).read_tokens == 0
    (_, _, _), (size, read, _) = openai_tally([openai[0], openai[0]]).per_request
    assert read == 1024 + (size - 1024) // 128 * 128  # the same prompt again: whole steps


def test_without_breakpoints_anthropic_caches_nothing(tmp_path: Path) -> None:
    server = run_job(tmp_path, "anthropic", prompt_cache=False)
    assert anthropic_tally(server.bodies(), server.timing()).read_tokens == 0


def test_the_cost_benchmark_prices_each_way_of_giving_tools() -> None:
    from bench.cache_cost import WAYS, smoke

    rows = smoke()
    assert [row["way"] for row in rows] == [*WAYS, "forked"]
    by_way = {row["way"]: row for row in rows}
    # Eager schemas cost more in every request, however well they cache.
    for provider in ("anthropic", "openai"):
        eager = by_way["eager"][provider]["effective_input_tokens"]
        assert eager > by_way["ours"][provider]["effective_input_tokens"]
    assert by_way["ours"]["anthropic"]["read_share"] > 0.5
    # The job really forked: Anthropic serves all the ceiling allows, OpenAI all but its steps.
    forked = by_way["forked"]
    assert forked["requests"] == 20
    assert forked["anthropic"]["of_ceiling"] >= 0.98
    assert forked["openai"]["of_ceiling"] >= 0.95


async def test_siblings_wait_for_the_first_request_of_their_shared_prefix() -> None:
    import asyncio

    from orchestrator import Agent
    from orchestrator.agent.model_call import run_prefixes

    system = "You reconcile ledgers. " * 400  # well over the least a provider caches
    with ProviderServer({"*": [{"content": "done"}] * 6}, latency=0.2) as server, run_prefixes():
        # Three agents of one run's tree (as a fork's sub-agents are): one hold for them all.
        model = server.adapter("openai", "key")
        agents = [Agent(model, system=system, name=f"sibling{i}") for i in range(3)]
        results = await asyncio.gather(*(a.run(f"task {i}") for i, a in enumerate(agents)))
        first_answered = server.requests[0].answered
        assert first_answered is not None
        assert all(r.received >= first_answered for r in server.requests[1:])
        assert server.max_in_flight == 2  # the two that waited then went together
        short = [Agent(model, system="Be brief.", name=f"short{i}") for i in range(3)]
        await asyncio.gather(*(a.run("go") for a in short))
    assert [r.status for r in results] == ["completed"] * 3
    assert server.max_in_flight == 3  # nothing to cache: nobody waited


async def test_a_failed_first_request_releases_its_siblings_and_warms_nothing() -> None:
    import asyncio

    from orchestrator.agent import model_call as warmup
    from orchestrator.messages import Message
    from orchestrator.models import ModelRequest

    class Failing:
        name = "failing:model"

        def __init__(self) -> None:
            self.calls = 0

        async def complete(self, request: ModelRequest) -> None:
            self.calls += 1
            await asyncio.sleep(0.05)
            raise RuntimeError("the provider fell over")

    request = ModelRequest(messages=[Message.system("x" * 5000), Message.user("go")])
    model = Failing()

    async def call() -> None:
        async with warmup.warm_prefix(model, request):  # type: ignore[arg-type]
            await model.complete(request)

    with warmup.run_prefixes():
        outcomes = await asyncio.gather(call(), call(), return_exceptions=True)
        key = warmup.prefix_key(model, request)  # type: ignore[arg-type]
        prefixes = warmup._RUN_PREFIXES.get()
    assert all(isinstance(o, RuntimeError) for o in outcomes)
    assert prefixes is not None
    assert key not in prefixes.answered and key not in prefixes.first


async def test_a_request_cancelled_as_its_prefix_warms_is_cancelled() -> None:
    # The cancellation arrives in the very step in which the first request's answer releases
    # the request waiting on its prefix (a background task's `cancel_tasks` at that moment).
    # It must end the waiting request, not be lost while the request goes on to the model.
    import asyncio

    from orchestrator.agent import model_call as warmup
    from orchestrator.messages import Message
    from orchestrator.models import ModelRequest, ScriptedModel

    model = ScriptedModel({"*": []}, name="scripted:warm-cancel")
    request = ModelRequest(messages=[Message.system("y" * 5000), Message.user("go")])
    answer = asyncio.Event()
    sent: list[str] = []

    async def waiting() -> None:
        async with warmup.warm_prefix(model, request):
            sent.append("waiting")

    async def first() -> None:
        async with warmup.warm_prefix(model, request):
            await answer.wait()
        # No await between the prefix's release (on leaving the block) and the cancellation.
        held.cancel()

    with warmup.run_prefixes():  # both requests are of one run (tasks copy the scope)
        opened = asyncio.create_task(first())
        await asyncio.sleep(0)
        held = asyncio.create_task(waiting())
    await asyncio.sleep(0)
    answer.set()
    await opened
    with pytest.raises(asyncio.CancelledError):
        await held
    assert held.cancelled() and sent == []
