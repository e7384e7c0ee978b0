"""Whole agent runs against a real HTTP server, with both providers, streamed and not."""

from __future__ import annotations

import json
from typing import Any

import pytest
from provider_server import ProviderServer
from trace_lines import into

from orchestrator import Agent, Message, Trace, tool
from orchestrator.errors import ToolError
from orchestrator.messages import Usage
from orchestrator.models import ChatModel
from orchestrator.trace import Event

KEY = "sk-test-agent-0123456789"
FLAVOURS = [("openai", True), ("openai", False), ("anthropic", True), ("anthropic", False)]
IDS = ["openai-stream", "openai-whole", "anthropic-stream", "anthropic-whole"]


def without_cache_marks(value: Any) -> Any:
    """A wire body without Anthropic's `cache_control` breakpoints (tested on their own)."""
    if isinstance(value, dict):
        return {k: without_cache_marks(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [without_cache_marks(v) for v in value]
    return value


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


@tool
def divide(a: int, b: int) -> float:
    """Divide a by b."""
    if b == 0:
        raise ToolError("cannot divide by zero")
    return a / b


def model_for(provider: str, server: ProviderServer, **options: Any) -> ChatModel:
    return server.adapter(provider, KEY, **options)


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


def tool_results(messages: list[Message]) -> list[Message]:
    return [m for m in messages if m.role == "tool"]


async def run(model: ChatModel, task: str, **options: Any) -> tuple[Any, list[Event]]:
    events: list[Event] = []
    trace = Trace(listeners=[into(events)], secrets=[])
    agent = Agent(model, tools=[add, multiply, divide], trace=trace, **options)
    return await agent.run(task), events


@pytest.mark.parametrize(("provider", "stream"), FLAVOURS, ids=IDS)
async def test_parallel_tool_calls(provider: str, stream: bool) -> None:
    script = {
        "*": [
            {
                "content": "Both at once.",
                "tool_calls": [call("add", a=2, b=3), call("multiply", a=4, b=5)],
            },
            {"content": "2+3=5 and 4*5=20."},
        ]
    }
    with ProviderServer(script) as server:
        result, _ = await run(model_for(provider, server, stream=stream), "Compute.")
    assert result.status == "completed"
    assert result.output == "2+3=5 and 4*5=20."
    assistant = result.messages[1]
    assert assistant.content == "Both at once."
    assert [(c.name, json.loads(c.arguments)) for c in assistant.tool_calls] == [
        ("add", {"a": 2, "b": 3}),
        ("multiply", {"a": 4, "b": 5}),
    ]
    results = tool_results(result.messages)
    assert [(m.tool_call_id, m.content) for m in results] == [
        (assistant.tool_calls[0].id, "5"),
        (assistant.tool_calls[1].id, "20"),
    ]
    second = without_cache_marks(server.bodies()[1])
    if provider == "openai":
        assert second["messages"][-2:] == [
            {"role": "tool", "tool_call_id": assistant.tool_calls[0].id, "content": "5"},
            {"role": "tool", "tool_call_id": assistant.tool_calls[1].id, "content": "20"},
        ]
    else:
        assert second["messages"][-1] == {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": assistant.tool_calls[0].id, "content": "5"},
                {"type": "tool_result", "tool_use_id": assistant.tool_calls[1].id, "content": "20"},
            ],
        }
    # The server reported 100 in / 20 out per call; those numbers, not the estimate, count.
    assert result.usage == Usage(input_tokens=200, output_tokens=40, total_tokens=240)


@pytest.mark.parametrize(("provider", "stream"), FLAVOURS, ids=IDS)
async def test_tool_errors_go_back_to_the_model(provider: str, stream: bool) -> None:
    script = {
        "*": [
            {"tool_calls": [call("divide", a=1, b=0), call("subtract", a=1, b=1)]},
            {"content": "I cannot divide by zero."},
        ]
    }
    with ProviderServer(script) as server:
        result, _ = await run(model_for(provider, server, stream=stream), "Divide.")
    assert result.status == "completed"
    assert result.output == "I cannot divide by zero."
    results = tool_results(result.messages)
    assert [(m.error_type, m.content) for m in results] == [
        ("tool_error", "cannot divide by zero"),
        ("unknown_tool", "Unknown tool 'subtract'. Available: add, multiply, divide."),
    ]
    second = without_cache_marks(server.bodies()[1])
    if provider == "anthropic":
        blocks = second["messages"][-1]["content"]
        assert [(b["type"], b.get("is_error"), b["content"]) for b in blocks] == [
            ("tool_result", True, "cannot divide by zero"),
            ("tool_result", True, "Unknown tool 'subtract'. Available: add, multiply, divide."),
        ]
    else:
        assert [m["content"] for m in second["messages"][-2:]] == [
            "cannot divide by zero",
            "Unknown tool 'subtract'. Available: add, multiply, divide.",
        ]


@pytest.mark.parametrize(
    ("provider", "stream"),
    [("openai", True), ("openai", False), ("anthropic", True)],
    ids=["openai-stream", "openai-whole", "anthropic-stream"],
)
async def test_arguments_that_are_not_json_become_an_error_observation(
    provider: str, stream: bool
) -> None:
    script = {
        "*": [{"tool_calls": [{"name": "add", "arguments": '{"a": 1, "b":'}]}, {"content": "Oops."}]
    }
    with ProviderServer(script) as server:
        result, _ = await run(model_for(provider, server, stream=stream), "Add.")
    assert result.status == "completed"
    assert result.messages[1].tool_calls[0].arguments == '{"a": 1, "b":'
    [observation] = tool_results(result.messages)
    assert observation.error_type == "invalid_json"
    assert observation.content is not None
    assert observation.content.startswith("Arguments are not valid JSON")


@pytest.mark.parametrize(("provider", "stream"), FLAVOURS, ids=IDS)
async def test_without_reported_usage_the_loops_estimate_stands(
    provider: str, stream: bool
) -> None:
    script = {"*": [{"tool_calls": [call("add", a=1, b=1)]}, {"content": "2"}]}
    with ProviderServer(script, usage=None) as server:
        result, events = await run(model_for(provider, server, stream=stream), "Add.")
    assert result.status == "completed"
    calls = [e for e in events if e["type"] == "model_call"]
    assert [e["reported"] for e in calls] == [False, False]
    assert result.usage.input_tokens == sum(e["input_estimate"] for e in calls) > 0
    assert result.usage.total_tokens == sum(e["usage"]["total_tokens"] for e in calls)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_the_forced_last_step_sends_no_callable_tools(provider: str) -> None:
    script = {"*": [{"tool_calls": [call("add", a=1, b=1)]}, {"content": "It is 2."}]}
    with ProviderServer(script) as server:
        result, _ = await run(model_for(provider, server), "Add.", max_steps=2)
    assert (result.status, result.output) == ("max_steps", "It is 2.")
    last = server.bodies()[1]
    # The tools stay declared (same prompt prefix) but may not be called.
    assert [_tool_name(t) for t in last["tools"]] == ["add", "multiply", "divide"]
    if provider == "openai":
        assert last["tool_choice"] == "none"
    else:
        assert last["tool_choice"] == {"type": "none"}
        roles = [turn["role"] for turn in last["messages"]]
        assert roles == ["user", "assistant", "user"]


def _tool_name(tool: dict) -> str:
    return tool["function"]["name"] if "function" in tool else tool["name"]


async def test_agent_takes_an_anthropic_model_string(monkeypatch: pytest.MonkeyPatch) -> None:
    with ProviderServer({"*": [{"content": "Hello."}]}) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        result = await Agent(model="anthropic:claude-sonnet-4-5", system="Be kind.").run("Hi")
    assert (result.status, result.output) == ("completed", "Hello.")
    [recorded] = server.requests
    assert recorded.headers["x-api-key"] == KEY
    assert recorded.headers["anthropic-version"] == "2023-06-01"
    assert recorded.body["model"] == "claude-sonnet-4-5"
    assert recorded.body["system"] == [
        {"type": "text", "text": "Be kind.", "cache_control": {"type": "ephemeral"}}
    ]
