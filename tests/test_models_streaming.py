"""Streams a server cannot serve, text shown as it arrives, and the options every adapter sends.

Against the test server on 127.0.0.1, with the two faults llama-cpp-python's server showed the
interop tier: a 200 stream with no event (then a hang-up on a keep-alive connection), and a
stream ended with `[DONE]` before its finish reason.
"""

from __future__ import annotations

from typing import Any

import pytest
from provider_server import Fault, ProviderServer
from trace_lines import into

from orchestrator import Agent, Trace
from orchestrator.errors import ModelError
from orchestrator.messages import Message, ToolSpec
from orchestrator.models import (
    ChatModel,
    ModelRequest,
    ModelResponse,
    TextTap,
    UnusableStreamError,
    output_cap,
)
from orchestrator.trace import Event

KEY = "sk-test-streaming-0123456789"
PROVIDERS = ["openai", "anthropic"]
HELLO = {"*": [{"content": "Hello there, friend."}]}
ADD = ToolSpec(name="add", description="Add.", parameters={"type": "object", "properties": {}})


async def run(model: ChatModel) -> tuple[Any, list[Event]]:
    events: list[Event] = []
    with Trace(None, listeners=[into(events)], secrets=[]) as trace:
        result = await Agent(model, trace=trace).run("Say hello.")
    return result, events


def of_type(events: list[Event], kind: str) -> list[Event]:
    return [e for e in events if e["type"] == kind]


def request(*, tools: bool = False, **fields: Any) -> ModelRequest:
    return ModelRequest(messages=[Message.user("Hi.")], tools=[ADD] if tools else (), **fields)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_empty_stream_is_asked_again_whole_and_not_retried(provider: str) -> None:
    with ProviderServer({"*": [{"content": "one"}, {"content": "two"}]}) as server:
        server.fail(Fault("empty"))
        model = server.adapter(provider, KEY)
        result, events = await run(model)
        again = await model.complete(request())  # the same shape: whole from the start

    assert result.status == "completed" and result.output == "one"
    assert again.message.content == "two"
    assert [bool(b.get("stream")) for b in server.bodies()] == [True, False, False]
    (fallback,) = of_type(events, "model_stream_fallback")
    assert fallback["request"] == "no tools" and fallback["agent"] == "agent"
    assert "closed the stream without sending any event" in fallback["error"]
    assert (
        "stream: false" in fallback["error"] and "--model-option stream=false" in fallback["error"]
    )
    # The server hung up the keep-alive connection: it was not used again, so nothing failed.
    assert of_type(events, "model_retry") == []


async def test_only_the_shape_that_failed_is_sent_whole() -> None:
    with ProviderServer({"*": [{"content": "a"}, {"content": "b"}, {"content": "c"}]}) as server:
        server.fail(Fault("empty"))
        model = server.adapter("openai", KEY)
        await model.complete(request(tools=True))  # tools + auto: empty, then whole
        await model.complete(request(tools=True, tool_choice="none"))
        await model.complete(request(tools=True))

    assert [bool(b.get("stream")) for b in server.bodies()] == [True, False, True, False]


async def test_a_stream_ended_before_its_finish_reason_is_asked_again_whole() -> None:
    with ProviderServer(HELLO) as server:
        server.fail(Fault("done", after=3))
        result, events = await run(server.adapter("openai", KEY))

    assert result.output == "Hello there, friend."  # not the fragment before [DONE]
    (fallback,) = of_type(events, "model_stream_fallback")
    assert "ended the stream before the reply was complete" in fallback["error"]
    assert "--interrupt_requests False" in fallback["error"]
    assert of_type(events, "model_retry") == []


async def test_without_the_fallback_the_error_names_the_setting() -> None:
    with ProviderServer(HELLO) as server:
        server.fail(Fault("empty"))
        model = server.adapter("openai", KEY, stream_fallback=False)
        with pytest.raises(UnusableStreamError) as caught:
            await model.complete(request())

    assert len(server.requests) == 1  # not retried: the same request would get the same
    assert isinstance(caught.value, ModelError)
    assert "stream: false" in str(caught.value)


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("stream", [True, False])
async def test_text_arrives_as_the_model_writes_it(provider: str, stream: bool) -> None:
    seen: list[str] = []
    with ProviderServer(HELLO) as server:
        model = server.adapter(provider, KEY, stream=stream)
        reply = await model.complete(request(on_text=seen.append))

    assert "".join(seen) == reply.message.content == "Hello there, friend."
    assert len(seen) == (5 if stream else 1)  # the test server streams four characters a piece


async def test_a_whole_reply_that_calls_tools_shows_no_text() -> None:
    turn = {"content": "Let me add.", "tool_calls": [{"name": "add", "arguments": {}}]}
    seen: list[str] = []
    with ProviderServer({"*": [turn]}) as server:
        model = server.adapter("openai", KEY, stream=False)
        await model.complete(request(tools=True, on_text=seen.append))

    assert seen == []


class Sink:
    def __init__(self) -> None:
        self.fragments: list[str] = []
        self.turns: list[ModelResponse] = []

    def text(self, fragment: str) -> None:
        self.fragments.append(fragment)

    def turn_end(self, response: ModelResponse) -> None:
        self.turns.append(response)


async def test_a_tap_follows_one_agent_only() -> None:
    sink = Sink()
    with ProviderServer({"*": [{"content": "mine"}, {"content": "theirs"}]}) as server:
        tapped = TextTap(server.adapter("openai", KEY), sink, "planner")
        await tapped.complete(request(agent="planner"))
        await tapped.complete(request(agent="planner/child"))

    assert "".join(sink.fragments) == "mine"
    assert [t.message.content for t in sink.turns] == ["mine"]
    assert tapped.name == "openai:test-model" and tapped.options.stream


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_temperature_and_the_output_cap_are_sent(provider: str) -> None:
    with ProviderServer({"*": [{"content": "a"}, {"content": "b"}]}) as server:
        model = server.adapter(provider, KEY, temperature=0, max_output_tokens=300)
        await model.complete(request(max_output_tokens=4096))
        await model.complete(request(max_output_tokens=100))

    field = "max_completion_tokens" if provider == "openai" else "max_tokens"
    assert [b[field] for b in server.bodies()] == [300, 100]  # never more than reserved
    assert [b["temperature"] for b in server.bodies()] == [0, 0]
    assert output_cap(model) == 300


async def test_an_assistant_turn_with_tool_calls_sends_text_content() -> None:
    turns = [{"tool_calls": [{"name": "add", "arguments": {}}]}, {"content": "done"}]
    with ProviderServer({"*": turns}) as server:

        def add() -> int:
            """Add."""
            return 1

        result = await Agent(server.adapter("openai", KEY), [add]).run("Add.")

    assert result.status == "completed"
    assistant = server.bodies()[1]["messages"][1]
    assert assistant["role"] == "assistant" and assistant["content"] == ""
