"""Cache usage as providers report it, cost in money, and budgets in money."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_process import orchestrator
from provider_server import ProviderServer
from trace_lines import trace_lines, typed

from orchestrator import Agent, Orchestrator, read_trace, tool
from orchestrator.agent import TokenBudget
from orchestrator.errors import ConfigError
from orchestrator.messages import Usage
from orchestrator.models import ScriptedModel
from orchestrator.models.anthropic import mark_cache_breakpoints
from orchestrator.models.prices import Price, PriceTable, load_prices, parse_prices
from orchestrator.trace.summary import render, summarize

SONNET = Price(input=3, output=15, cached_input=0.3, cache_write=3.75)


@tool
def lookup(n: int) -> str:
    """Look a number up.

    Args:
        n: The number.
    """
    return f"entry {n}"


def test_a_calls_cost_prices_each_kind_of_input_apart() -> None:
    usage = Usage.of(1_000_000 + 2_000_000 + 400_000, 100_000, cache_read=2_000_000)
    usage = usage.model_copy(update={"cache_write_tokens": 400_000})
    # 1M uncached at $3, 2M read at $0.30, 0.4M written at $3.75, 0.1M out at $15.
    assert SONNET.cost(usage) == pytest.approx(3 + 0.6 + 1.5 + 1.5)
    assert Price(input=1, output=2).cost(usage) == pytest.approx(3.4 + 0.2)  # no discount known


def test_the_table_knows_common_models_and_never_guesses() -> None:
    table = PriceTable()
    assert table.get("anthropic:claude-sonnet-4-5-20250929") == table.get(
        "anthropic:claude-sonnet-4-5"
    )
    assert table.get("openai:gpt-4o-mini") is not None
    assert table.get("openai-compatible:qwen3") is None
    assert table.get("scripted") is None
    mine = table.over({"openai-compatible:qwen3": Price(input=0, output=0)})
    assert mine.get("openai-compatible:qwen3") == Price(input=0, output=0)


def test_price_files_and_spec_entries_are_checked(tmp_path: Path) -> None:
    good = tmp_path / "prices.yaml"
    good.write_text("openai-compatible:qwen3: {input: 0.1, output: 0.2}\n")
    assert load_prices(good)["openai-compatible:qwen3"].output == 0.2
    with pytest.raises(ConfigError, match="provider:model"):
        parse_prices({" ": {"input": 1, "output": 1}})
    with pytest.raises(ConfigError, match="qwen:x: input"):
        parse_prices({"qwen:x": {"input": -1, "output": 1}})
    with pytest.raises(ConfigError, match="not valid YAML"):
        bad = tmp_path / "bad.yaml"
        bad.write_text("a: [\n")
        load_prices(bad)


@pytest.mark.parametrize(
    ("provider", "extra", "read", "written"),
    [
        ("anthropic", {"cache_read_input_tokens": 900, "cache_creation_input_tokens": 50}, 900, 50),
        ("openai", {"prompt_tokens_details": {"cached_tokens": 768}}, 768, 0),
        ("openai", {"prompt_cache_hit_tokens": 640, "prompt_cache_miss_tokens": 360}, 640, 0),
    ],
    ids=["anthropic", "openai", "deepseek"],
)
def test_cache_usage_reaches_the_trace_and_trace_show(
    tmp_path: Path, provider: str, extra: dict[str, Any], read: int, written: int
) -> None:
    fresh = 50 if provider == "anthropic" else 1000  # Anthropic counts cached input apart
    script = {"*": [{"tool_calls": [{"name": "lookup", "arguments": {"n": 1}}]}, {"content": "ok"}]}
    trace = tmp_path / "trace.jsonl"
    with ProviderServer(script, usage=(fresh, 20, extra)) as server:
        model = server.adapter(provider, "key")
        model.price = SONNET
        result = Agent(model, [lookup], trace=trace).run_sync("go")
    assert result.status == "completed"
    expected = Usage.of(1000, 20, cache_read=read, cache_write=written)
    assert result.usage == expected + expected
    calls = [e for e in trace_lines(trace) if e["type"] == "model_call"]
    assert calls[0]["usage"]["cache_read_tokens"] == read
    assert calls[0]["cost"] == pytest.approx(SONNET.cost(expected))
    assert result.cost == pytest.approx(2 * SONNET.cost(expected))
    shown = render(summarize(read_trace(trace)))
    assert f"{2 * read:,} cached" in shown
    assert "$" in shown


def test_an_unpriced_model_shows_tokens_only(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    model = ScriptedModel({"*": [{"content": "ok"}]})
    result = Agent(model, trace=trace).run_sync("go")
    assert result.cost is None and result.total_cost is None
    call = next(e for e in trace_lines(trace) if e["type"] == "model_call")
    assert "cost" not in call
    assert "$" not in render(summarize(read_trace(trace)))


def test_a_money_budget_stops_the_tree_like_a_token_budget() -> None:
    # Each call reserves the most it could cost (its output allowance alone is 4096 tokens at
    # $15/M, $0.061) and spends far less: a $0.066 cap covers a few calls, then refuses.
    turns = [{"tool_calls": [{"name": "lookup", "arguments": {"n": i}}]} for i in range(20)]
    model = ScriptedModel({"*": turns})
    model.price = Price(input=3, output=15)
    budget = TokenBudget(max_cost=0.066)
    result = Agent(model, [lookup], budget=budget, max_steps=50).run_sync("go")
    assert result.status == "budget_exhausted"
    assert 0 < budget.spent <= 0.066
    assert budget.reserved_cost == pytest.approx(0.0)
    assert 1 <= result.steps < 10


def test_a_money_cap_refuses_a_model_without_a_price() -> None:
    with pytest.raises(ConfigError, match="has no price"):
        Orchestrator(ScriptedModel({"*": [{"content": "ok"}]}), max_cost=1.0)
    budget = TokenBudget(max_cost=1.0)
    result = Agent(ScriptedModel({"*": [{"content": "ok"}]}), budget=budget).run_sync("go")
    assert result.status == "error" and "has no price" in (result.error or "")


@pytest.mark.slow
def test_a_job_spec_caps_money_and_prices_its_model(tmp_path: Path) -> None:
    script = tmp_path / "script.yaml"
    script.write_text("'*':\n  - content: done\n")
    spec = tmp_path / "job.yaml"
    spec.write_text(
        f"name: priced\nmodel: scripted:{script}\ngoal: say done\n"
        "budget: {max_cost_usd: 0.5}\n"
        "prices:\n  scripted: {input: 1, output: 2}\n"
    )
    done = orchestrator("run", str(spec), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["cost"] > 0
    assert f"${report['cost']:.4f}" in done.stderr  # the summary line says what it cost
    spec.write_text(spec.read_text().replace("prices:\n  scripted: {input: 1, output: 2}\n", ""))
    refused = orchestrator("run", str(spec), cwd=tmp_path)
    assert refused.returncode != 0
    assert "has no price" in refused.stderr


def test_breakpoints_are_at_most_four_and_carry_the_ttl() -> None:
    body = {
        "tools": [{"name": "a"}, {"name": "b"}],
        "system": "You help.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": f"turn {i}"}]} for i in range(6)
        ],
    }
    marked = mark_cache_breakpoints(body, "1h")
    marks = json.dumps(marked).count('"cache_control"')
    assert marks == 4
    assert marked["tools"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert marked["system"][0]["text"] == "You help."
    assert "cache_control" in marked["messages"][5]["content"][-1]
    assert "cache_control" in marked["messages"][3]["content"][-1]
    assert body["tools"][-1] == {"name": "b"}  # the body itself is left as it was


@pytest.mark.slow
def test_a_resumed_job_counts_what_earlier_attempts_cost(tmp_path: Path) -> None:
    from orchestrator.trace import load_checkpoint

    script = tmp_path / "script.yaml"
    script.write_text("'*':\n  - content: first\n")
    spec = tmp_path / "job.yaml"
    trace = tmp_path / "trace.jsonl"
    spec.write_text(
        f"name: priced\nmodel: scripted:{script}\ntrace: {trace}\n"
        "steps:\n  - {id: one, task: say first}\n"
        "prices:\n  scripted: {input: 1, output: 2}\n"
    )
    done = orchestrator("run", str(spec), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    cost = json.loads(done.stdout)["cost"]
    checkpoint = load_checkpoint(trace)
    assert checkpoint.cost == pytest.approx(cost)
    assert checkpoint.subtree_cost("one") == pytest.approx(cost)
    budget = TokenBudget(max_cost=1.0)
    budget.record_spent(checkpoint.usage.total_tokens, checkpoint.cost)
    assert budget.remaining_cost == pytest.approx(1.0 - cost)


def test_the_live_view_shows_cached_input_and_cost() -> None:
    from orchestrator.cli.progress import ProgressState
    from orchestrator.cli.rows import row_of

    state = ProgressState()
    state.update(typed({"type": "run_start", "agent": "planner", "ts": 1.0}))
    usage = {"input_tokens": 1000, "output_tokens": 20, "total_tokens": 1020}
    cached = {**usage, "cache_read_tokens": 900}
    call = {"type": "model_call", "agent": "planner", "ts": 2.0, "step": 1, "usage": cached}
    state.update(typed({**call, "cost": 0.003}))
    texts = [cell.text for cell in row_of(state.agents["planner"], now=3.0).cells()]
    assert "cached 900" in texts and "$0.0030" in texts
    state.update(typed({"type": "run_start", "agent": "free", "ts": 1.0}))
    state.update(typed({**call, "agent": "free", "usage": usage}))
    texts = [cell.text for cell in row_of(state.agents["free"], now=3.0).cells()]
    assert not any(t.startswith(("$", "cached")) for t in texts)


def test_one_hour_cache_writes_are_priced_at_twice_the_input() -> None:
    from orchestrator.models import price_of, resolve_model

    five = resolve_model("anthropic:claude-sonnet-4-6", api_key="k")
    hour = resolve_model("anthropic:claude-sonnet-4-6", api_key="k", cache_ttl="1h")
    assert price_of(five).cache_write == 3.75
    assert price_of(hour).cache_write == 6.0


def test_a_price_file_nested_too_deeply_is_an_error_naming_it(tmp_path: Path) -> None:
    levels = 100_000
    (tmp_path / "prices.json").write_text('{"a:b": ' + "[" * levels + "]" * levels + "}")
    (tmp_path / "script.yaml").write_text("'*': [{content: hi}]\n")
    (tmp_path / "job.yaml").write_text(
        "name: deep\nmodel: scripted:script.yaml\nprices: prices.json\ngoal: Hi.\n"
    )
    done = orchestrator("run", "job.yaml", "--quiet", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "prices.json" in done.stderr and "nested too deeply" in done.stderr
    assert "Traceback" not in done.stderr


def test_an_agents_unpriced_model_under_a_money_cap_is_told_a_way_the_agent_offers() -> None:
    """The error names what an `Agent` can do (`PricedModel`), and doing it works."""
    from orchestrator import Agent
    from orchestrator.models import Price, PricedModel, ScriptedModel

    script = {"*": [{"content": "done"}]}
    refused = Agent(ScriptedModel(script)).run_sync("Go.", max_cost=1.0)
    assert refused.status == "error"
    assert "PricedModel(model, Price(input=..., output=...))" in (refused.error or "")
    priced = Agent(PricedModel(ScriptedModel(script), Price(input=1.0, output=2.0)))
    result = priced.run_sync("Go.", max_cost=1.0)
    assert result.status == "completed" and result.cost is not None and result.cost > 0
