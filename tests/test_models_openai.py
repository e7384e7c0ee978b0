"""Chat Completions wire format: request bodies, whole replies, streamed chunks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from orchestrator.errors import ModelError, RetryableModelError
from orchestrator.messages import Message, ToolCall, ToolSpec, Usage
from orchestrator.models import ForcedTool, ModelRequest
from orchestrator.models.openai import (
    ChunkAssembler,
    OpenAIOptions,
    build_body,
    parse_completion,
    parse_stream,
)

ADD = ToolSpec(
    name="add",
    description="Add two numbers.",
    parameters={"type": "object", "properties": {"a": {"type": "integer"}}},
)
CALL = ToolCall(id="call_1", name="add", arguments='{"a": 1}')
CONVERSATION = [
    Message.system("Be brief."),
    Message.user("Add."),
    Message.assistant(None, [CALL]),
    Message.tool_result(CALL, "boom", error_type="tool_error"),
    Message.user("[orchestrator] note"),
]


def sse(*chunks: Any, done: bool = True) -> str:
    lines = [f"data: {json.dumps(c)}\n\n" for c in chunks]
    return "".join(lines) + ("data: [DONE]\n\n" if done else "")


def delta(finish: str | None = None, **fields: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": fields, "finish_reason": finish}]}


def test_body_maps_every_role() -> None:
    body = build_body("m", ModelRequest(messages=CONVERSATION, tools=[ADD]), OpenAIOptions())
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Add."},
        {
            "role": "assistant",
            "content": "",  # a string: stricter servers reject null
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a": 1}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "boom"},
        {"role": "user", "content": "[orchestrator] note"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "add",
                "description": "Add two numbers.",
                "parameters": ADD.parameters,
            },
        }
    ]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 4096


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        (ForcedTool("add"), {"type": "function", "function": {"name": "add"}}),
    ],
)
def test_tool_choice(choice: Any, wire: Any) -> None:
    request = ModelRequest(messages=CONVERSATION, tools=[ADD], tool_choice=choice)
    assert build_body("m", request, OpenAIOptions())["tool_choice"] == wire


def test_without_tools_no_tool_choice_is_sent() -> None:
    body = build_body("m", ModelRequest(messages=CONVERSATION, tool_choice="none"), OpenAIOptions())
    assert "tools" not in body and "tool_choice" not in body


def test_options_shape_the_body() -> None:
    options = OpenAIOptions(
        stream=False,
        max_tokens_field="max_completion_tokens",
        extra_body={"temperature": 0.2},
    )
    request = ModelRequest(messages=[Message.user("hi")], max_output_tokens=99)
    body = build_body("gpt", request, options)
    assert body == {
        "model": "gpt",
        "messages": [{"role": "user", "content": "hi"}],
        "max_completion_tokens": 99,
        "temperature": 0.2,
    }


def test_reasoning_goes_back_only_when_asked() -> None:
    said = Message(role="assistant", content="4", reasoning="2+2")
    request = ModelRequest(messages=[Message.user("2+2?"), said])
    assert "reasoning_content" not in build_body("m", request, OpenAIOptions())["messages"][1]
    sent = build_body("m", request, OpenAIOptions(send_reasoning=True))["messages"][1]
    assert sent["reasoning_content"] == "2+2"


def test_interleaved_fragments_of_two_calls_are_assembled_by_index() -> None:
    body = sse(
        delta(role="assistant", content=None),
        delta(tool_calls=[{"index": 0, "id": "a", "function": {"name": "add", "arguments": ""}}]),
        delta(
            tool_calls=[{"index": 1, "id": "b", "function": {"name": "mul", "arguments": '{"x'}}]
        ),
        delta(tool_calls=[{"index": 0, "function": {"arguments": '{"a": '}}]),
        delta(tool_calls=[{"index": 1, "function": {"arguments": '": 2}'}}]),
        delta(tool_calls=[{"index": 0, "function": {"arguments": "1}"}}]),
        delta("tool_calls"),
    )
    response = parse_stream(body)
    assert response.message.tool_calls == (
        ToolCall(id="a", name="add", arguments='{"a": 1}'),
        ToolCall(id="b", name="mul", arguments='{"x": 2}'),
    )
    assert response.finish_reason == "tool_calls"
    assert response.usage is None  # no usage chunk: the loop's estimate stands


def test_invalid_json_arguments_are_kept_raw() -> None:
    body = sse(
        delta(
            tool_calls=[{"index": 0, "id": "a", "function": {"name": "add", "arguments": "{oops"}}]
        ),
        delta("tool_calls"),
    )
    assert parse_stream(body).message.tool_calls[0].arguments == "{oops"


def test_calls_without_index_or_id() -> None:
    body = sse(
        delta(tool_calls=[{"id": "a", "function": {"name": "add", "arguments": "{}"}}]),
        delta(tool_calls=[{"id": "b", "function": {"name": "mul", "arguments": "{"}}]),
        delta(tool_calls=[{"function": {"arguments": "}"}}]),
        delta(tool_calls=[{"index": 2, "function": {"name": "neg"}}]),
        delta("tool_calls"),
    )
    calls = parse_stream(body).message.tool_calls
    assert [(c.name, c.arguments) for c in calls] == [("add", "{}"), ("mul", "{}"), ("neg", "{}")]
    assert calls[2].id.startswith("call_2_")


def test_reasoning_is_kept_apart_from_the_answer() -> None:
    body = sse(
        delta(role="assistant", content=""),
        delta(reasoning_content="Two and "),
        delta(reasoning_content="two."),
        delta(content="4"),
        delta("stop"),
        {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}},
    )
    response = parse_stream(body)
    assert response.message.content == "4"
    assert response.message.reasoning == "Two and two."
    assert response.usage == Usage(input_tokens=5, output_tokens=3, total_tokens=8)


def test_a_stream_that_stops_early_is_retryable() -> None:
    with pytest.raises(RetryableModelError, match="ended before the reply was complete"):
        parse_stream(sse(delta(content="Hel"), done=False))


def test_a_stream_without_done_but_finished_is_accepted() -> None:
    assert parse_stream(sse(delta(content="Hi"), delta("stop"), done=False)).message.content == "Hi"


def test_malformed_event_is_retryable() -> None:
    with pytest.raises(RetryableModelError, match="malformed stream event"):
        parse_stream('data: {"choices": [\n\n')


def test_error_inside_a_stream() -> None:
    with pytest.raises(RetryableModelError, match="Overloaded"):
        parse_stream(
            sse(delta(content="a"), {"error": {"message": "Overloaded", "type": "server_error"}})
        )
    with pytest.raises(ModelError, match="bad input") as caught:
        parse_stream(sse({"error": {"message": "bad input", "code": 400}}))
    assert not isinstance(caught.value, RetryableModelError)


def test_only_the_first_choice_is_kept() -> None:
    assembler = ChunkAssembler()
    assembler.feed_chunk({"choices": [{"index": 1, "delta": {"content": "other"}}]})
    assembler.feed_chunk(
        {"choices": [{"index": 0, "delta": {"content": "mine"}, "finish_reason": "stop"}]}
    )
    assert assembler.response().message.content == "mine"


def test_whole_completion() -> None:
    data = {
        "id": "chatcmpl-1",
        "model": "deepseek-reasoner",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": "Let me add.",
                    "reasoning_content": "Use the tool.",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "add", "arguments": {"a": 1}},
                        },
                        {
                            "id": "c2",
                            "type": "function",
                            "function": {"name": "add", "arguments": "{bad"},
                        },
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14},
    }
    response = parse_completion(data)
    assert response.message == Message(
        role="assistant",
        content="Let me add.",
        reasoning="Use the tool.",
        tool_calls=(
            ToolCall(id="c1", name="add", arguments='{"a": 1}'),
            ToolCall(id="c2", name="add", arguments="{bad"),
        ),
    )
    assert response.usage == Usage(input_tokens=10, output_tokens=4, total_tokens=14)
    assert response.finish_reason == "tool_calls"
    assert response.extra == {"id": "chatcmpl-1", "model": "deepseek-reasoner"}


def test_whole_completion_without_choices_is_retryable() -> None:
    with pytest.raises(RetryableModelError, match="no choices"):
        parse_completion({"choices": []})
