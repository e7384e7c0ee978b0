"""Messages API wire format: request bodies, whole replies, streamed events."""

from __future__ import annotations

import json
from typing import Any

import pytest

from orchestrator.errors import ModelError, RetryableModelError
from orchestrator.messages import Message, ToolCall, ToolSpec, Usage
from orchestrator.models import ForcedTool, ModelRequest
from orchestrator.models.anthropic import (
    AnthropicOptions,
    build_body,
    parse_message,
    parse_stream,
    to_turns,
)

ADD = ToolSpec(name="add", description="Add.", parameters={"type": "object", "properties": {}})
FIRST = ToolCall(id="toolu_1", name="add", arguments='{"a": 1}')
SECOND = ToolCall(id="toolu_2", name="add", arguments="{not json")
CONVERSATION = [
    Message.system("Be brief."),
    Message.user("Add twice."),
    Message.assistant("Adding.", [FIRST, SECOND]),
    Message.tool_result(FIRST, "1"),
    Message.tool_result(SECOND, "Arguments are not valid JSON.", error_type="invalid_json"),
    Message.user("[orchestrator] This is the last step."),
]


def event(name: str, **data: Any) -> str:
    return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n"


def start(**usage: int) -> str:
    message = {"id": "msg_1", "model": "claude-x", "content": [], "usage": usage}
    return event("message_start", message=message)


def test_turns_alternate_and_tool_results_merge_with_the_note_that_follows() -> None:
    system, turns = to_turns(CONVERSATION)
    assert system == "Be brief."
    assert turns == [
        {"role": "user", "content": [{"type": "text", "text": "Add twice."}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Adding."},
                {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 1}},
                # Arguments that were not a JSON object went back as an error already.
                {"type": "tool_use", "id": "toolu_2", "name": "add", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "1"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": "Arguments are not valid JSON.",
                    "is_error": True,
                },
                {"type": "text", "text": "[orchestrator] This is the last step."},
            ],
        },
    ]


def test_body_has_system_on_top_and_always_max_tokens() -> None:
    request = ModelRequest(messages=CONVERSATION, tools=[ADD], max_output_tokens=321)
    body = build_body("claude-x", request, AnthropicOptions(stream=False, prompt_cache=False))
    assert body["system"] == "Be brief."
    assert body["max_tokens"] == 321
    assert all(turn["role"] != "system" for turn in body["messages"])
    assert body["tools"] == [{"name": "add", "description": "Add.", "input_schema": ADD.parameters}]
    assert "stream" not in body


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", {"type": "auto"}),
        ("required", {"type": "any"}),
        ("none", {"type": "none"}),
        (ForcedTool("add"), {"type": "tool", "name": "add"}),
    ],
)
def test_tool_choice(choice: Any, wire: Any) -> None:
    request = ModelRequest(messages=CONVERSATION, tools=[ADD], tool_choice=choice)
    assert build_body("m", request, AnthropicOptions())["tool_choice"] == wire


def test_no_tools_but_tool_history_declares_placeholders_and_forbids_them() -> None:
    # The loop sends no tools when it forces an answer; the API rejects tool blocks without
    # tool definitions, so the tools the conversation used are declared and forbidden.
    body = build_body(
        "m", ModelRequest(messages=CONVERSATION, tool_choice="none"), AnthropicOptions()
    )
    assert [tool["name"] for tool in body["tools"]] == ["add"]
    assert body["tool_choice"] == {"type": "none"}
    assert body["messages"][1]["content"][1]["type"] == "tool_use"


def test_without_tool_choice_none_tools_are_left_out_and_history_becomes_text() -> None:
    request = ModelRequest(messages=CONVERSATION, tools=[ADD], tool_choice="none")
    body = build_body("m", request, AnthropicOptions(tool_choice_none=False))
    assert "tools" not in body and "tool_choice" not in body
    blocks = [block for turn in body["messages"] for block in turn["content"]]
    assert {block["type"] for block in blocks} == {"text"}
    assert blocks[2]["text"] == '[called tool add (call toolu_1) with arguments {"a": 1}]'
    assert blocks[5]["text"] == "[error of tool add (call toolu_2)]\nArguments are not valid JSON."


def test_a_plain_conversation_sends_no_tools() -> None:
    options = AnthropicOptions(prompt_cache=False)
    body = build_body("m", ModelRequest(messages=[Message.user("hi")]), options)
    assert body == {
        "model": "m",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "stream": True,
    }


def test_overloaded_error_event_is_retryable() -> None:
    body = start(input_tokens=5) + event(
        "error", error={"type": "overloaded_error", "message": "Overloaded"}
    )
    with pytest.raises(RetryableModelError, match=r"Overloaded \[overloaded_error\]") as caught:
        parse_stream(body)
    assert caught.value.status == 529


def test_invalid_request_error_event_is_not_retryable() -> None:
    body = event("error", error={"type": "invalid_request_error", "message": "bad"})
    with pytest.raises(ModelError) as caught:
        parse_stream(body)
    assert not isinstance(caught.value, RetryableModelError)
    assert caught.value.status == 400


def test_pings_unknown_events_and_thinking() -> None:
    body = (
        start(input_tokens=10, cache_read_input_tokens=90, output_tokens=1)
        + event("ping")
        + event("content_block_start", index=0, content_block={"type": "thinking", "thinking": ""})
        + event(
            "content_block_delta", index=0, delta={"type": "thinking_delta", "thinking": "Hmm."}
        )
        + event("content_block_delta", index=0, delta={"type": "signature_delta", "signature": "x"})
        + event("some_future_event", payload=1)
        + event("content_block_start", index=1, content_block={"type": "text", "text": ""})
        + event("content_block_delta", index=1, delta={"type": "text_delta", "text": "Done"})
        + event(
            "content_block_start",
            index=2,
            content_block={"type": "tool_use", "id": "t", "name": "now", "input": {}},
        )
        + event("message_delta", delta={"stop_reason": "tool_use"}, usage={"output_tokens": 12})
        + event("message_stop")
    )
    response = parse_stream(body)
    assert response.message == Message(
        role="assistant",
        content="Done",
        reasoning="Hmm.",
        tool_calls=(ToolCall(id="t", name="now", arguments="{}"),),
    )
    # Cached input counts as input: 10 + 90, and is kept apart as a cache read.
    assert response.usage == Usage(
        input_tokens=100, output_tokens=12, total_tokens=112, cache_read_tokens=90
    )


def test_a_stream_that_stops_early_is_retryable() -> None:
    body = start(input_tokens=1) + event(
        "content_block_start", index=0, content_block={"type": "text", "text": "Hel"}
    )
    with pytest.raises(RetryableModelError, match="ended before the reply was complete"):
        parse_stream(body)


def test_whole_message() -> None:
    data = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [
            {"type": "text", "text": "Adding."},
            {"type": "tool_use", "id": "toolu_9", "name": "add", "input": {"a": 2}},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 30, "output_tokens": 7},
    }
    response = parse_message(data)
    assert response.message == Message.assistant(
        "Adding.", [ToolCall(id="toolu_9", name="add", arguments='{"a": 2}')]
    )
    assert response.finish_reason == "tool_calls"
    assert response.usage == Usage(input_tokens=30, output_tokens=7, total_tokens=37)


def test_whole_error_body_is_raised() -> None:
    data = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    with pytest.raises(RetryableModelError):
        parse_message(data)
