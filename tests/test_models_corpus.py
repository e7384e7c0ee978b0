"""Every recorded stream in shared/corpus parses, and assembles to what the file says.

The expected values were read from the files themselves (see their SOURCE.md): the text the
deltas spell out, each tool call's id, name and arguments, the finish reason and the usage.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.messages import ToolCall, Usage
from orchestrator.models import anthropic, openai

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
pytestmark = pytest.mark.skipif(
    not CORPUS.is_dir(),
    reason=f"the shared corpus is not checked out beside the repository (looked in {CORPUS})",
)

WEATHER_61 = '{"city":"San Francisco","temperature":61,"units":"f"}'
OPENAI_TEXT = {
    "content_logprobs.sse": ("Foo!", "stop", (9, 2, 11)),
    "json_schema_content_stop.sse": (WEATHER_61, "stop", (79, 14, 93)),
    "max_tokens_length.sse": ('{"', "length", (79, 1, 80)),
    # n=3: only choice 0 is kept (choice 1 says 61 degrees, choice 2 says 59).
    "n3_multiple_choices.sse": (WEATHER_61.replace("61", "65"), "stop", (79, 42, 121)),
    "text_plain_stop.sse": (
        "I'm unable to provide real-time weather updates. To get the current weather in San "
        "Francisco, I recommend checking a reliable weather website or a weather app.",
        "stop",
        (14, 30, 44),
    ),
    # Refusals arrive in `delta.refusal`; with no other content they become the answer.
    "refusal_stop.sse": ("I'm sorry, I can't assist with that request.", "stop", (79, 11, 90)),
    "refusal_logprobs.sse": (
        "I'm very sorry, but I can't assist with that.",
        "stop",
        (79, 12, 91),
    ),
}
OPENAI_TOOLS = {
    "tool_call_non_strict.sse": (
        [
            ToolCall(
                id="call_4XzlGBLtUe9dy3GVNV4jhq7h",
                name="get_weather",
                arguments='{"city":"New York City"}',
            )
        ],
        (44, 16, 60),
    ),
    "tool_call_single_strict.sse": (
        [
            ToolCall(
                id="call_c91SqDXlYFuETYv8mUHzz6pp",
                name="GetWeatherArgs",
                arguments='{"city":"Edinburgh","country":"UK","units":"c"}',
            )
        ],
        (76, 24, 100),
    ),
    "tool_call_single_strict_2.sse": (
        [
            ToolCall(
                id="call_CTf1nWJLqSeRgDqaCG27xZ74",
                name="get_weather",
                arguments='{"city":"San Francisco","state":"CA"}',
            )
        ],
        (48, 19, 67),
    ),
    "tool_calls_parallel_two.sse": (
        [
            ToolCall(
                id="call_JMW1whyEaYG438VE1OIflxA2",
                name="GetWeatherArgs",
                arguments='{"city": "Edinburgh", "country": "GB", "units": "c"}',
            ),
            ToolCall(
                id="call_DNYTawLBoN8fj3KN6qU9N1Ou",
                name="get_stock_price",
                arguments='{"ticker": "AAPL", "exchange": "NASDAQ"}',
            ),
        ],
        (149, 60, 209),
    ),
}


def read(folder: str, name: str) -> str:
    return (CORPUS / folder / name).read_text(encoding="utf-8")


def usage(counts: tuple[int, int, int]) -> Usage:
    return Usage(input_tokens=counts[0], output_tokens=counts[1], total_tokens=counts[2])


def test_every_openai_file_is_covered() -> None:
    names = {p.name for p in (CORPUS / "openai-sse").glob("*.sse")}
    assert names == {*OPENAI_TEXT, *OPENAI_TOOLS, "json_object_long_content.sse"}


@pytest.mark.parametrize("name", sorted(OPENAI_TEXT))
def test_openai_text_streams(name: str) -> None:
    content, finish, counts = OPENAI_TEXT[name]
    response = openai.parse_stream(read("openai-sse", name))
    assert response.message.content == content
    assert response.message.tool_calls == ()
    assert response.message.reasoning is None
    assert response.finish_reason == finish
    assert response.usage == usage(counts)
    assert response.extra["model"] == "gpt-4o-2024-08-06"


def test_openai_refusal_is_kept_apart_too() -> None:
    response = openai.parse_stream(read("openai-sse", "refusal_stop.sse"))
    assert response.extra["refusal"] == "I'm sorry, I can't assist with that request."


@pytest.mark.parametrize("name", sorted(OPENAI_TOOLS))
def test_openai_tool_call_streams(name: str) -> None:
    calls, counts = OPENAI_TOOLS[name]
    response = openai.parse_stream(read("openai-sse", name))
    assert list(response.message.tool_calls) == calls
    assert response.message.content is None
    assert response.finish_reason == "tool_calls"
    assert response.usage == usage(counts)
    for call in response.message.tool_calls:
        assert isinstance(json.loads(call.arguments), dict)


def test_openai_long_json_content_of_181_chunks() -> None:
    response = openai.parse_stream(read("openai-sse", "json_object_long_content.sse"))
    content = response.message.content or ""
    assert len(content) == 608
    data = json.loads(content)
    assert data["location"] == "San Francisco, CA"
    assert data["weather"]["temperature"] == "18°C"
    assert [day["day"] for day in data["forecast"]] == ["Monday", "Tuesday", "Wednesday"]
    assert response.finish_reason == "stop"
    assert response.usage == usage((19, 177, 196))


def test_every_anthropic_file_is_covered() -> None:
    names = {p.name for p in (CORPUS / "anthropic-sse").glob("*.sse")}
    assert names == {
        "basic_response.sse",
        "compaction_response.sse",
        "fallback_credit_response.sse",
        "fallback_response.sse",
        "incomplete_partial_json_response.sse",
        "refusal_response.sse",
        "tool_use_response.sse",
    }


@pytest.mark.parametrize(
    ("name", "model", "counts"),
    [
        # `ping` between the deltas, and no blank line after the last event.
        ("basic_response.sse", "claude-3-opus-latest", (11, 6, 17)),
        # Block types this adapter does not know (compaction, fallback) are skipped.
        ("compaction_response.sse", "claude-opus-4-7", (30, 8, 38)),
        ("fallback_response.sse", "claude-opus-4-7", (25, 8, 33)),
        ("fallback_credit_response.sse", "claude-sonnet-4-5", (25, 8, 33)),
    ],
)
def test_anthropic_text_streams(name: str, model: str, counts: tuple[int, int, int]) -> None:
    response = anthropic.parse_stream(read("anthropic-sse", name))
    assert response.message.content == "Hello there!"
    assert response.message.tool_calls == ()
    assert response.finish_reason == "stop"
    assert response.extra["stop_reason"] == "end_turn"
    assert response.extra["model"] == model
    assert response.usage == usage(counts)


def test_anthropic_tool_use_stream() -> None:
    response = anthropic.parse_stream(read("anthropic-sse", "tool_use_response.sse"))
    assert response.message.content == "I'll check the current weather in Paris for you."
    assert response.message.tool_calls == (
        ToolCall(
            id="toolu_01NRLabsLyVHZPKxbKvkfSMn",
            name="get_weather",
            arguments='{"location": "Paris"}',
        ),
    )
    assert response.finish_reason == "tool_calls"
    # 377 input tokens, with cache_creation and cache_read both 0; 65 output (cumulative).
    assert response.usage == usage((377, 65, 442))
    assert response.extra["id"] == "msg_019Q1hrJbZG26Fb9BQhrkHEr"


def test_anthropic_tool_use_cut_off_by_max_tokens_keeps_the_raw_arguments() -> None:
    response = anthropic.parse_stream(read("anthropic-sse", "incomplete_partial_json_response.sse"))
    assert response.message.content == (
        "I'll create a comprehensive tax guide for someone with multiple W2s and save it in a "
        "file called taxes.txt. Let me do that for you now."
    )
    [call] = response.message.tool_calls
    assert (call.id, call.name) == ("toolu_01EKqbqmZrGRXy18eN7m9kvY", "make_file")
    assert call.arguments == (
        '{"filename": "taxes.txt", "lines_of_text": [\n'
        '"# COMPREHENSIVE TAX GUIDE FOR INDIVIDUALS WITH MULTIPLE W-2s",\n"",\n'
        '"## INTRODUCTION",\n"",\n"Filing taxes'
    )
    with pytest.raises(json.JSONDecodeError):
        json.loads(call.arguments)  # the loop turns this into an error observation
    assert response.finish_reason == "length"
    assert response.extra["stop_reason"] == "max_tokens"
    assert response.usage == usage((450, 124, 574))


def test_anthropic_refusal_stream() -> None:
    response = anthropic.parse_stream(read("anthropic-sse", "refusal_response.sse"))
    assert response.message.content == "This request was refused due to policy."
    assert response.message.tool_calls == ()
    assert response.finish_reason == "refusal"
    assert response.extra["refusal"] == "This request was refused due to policy."
    assert response.usage == usage((20, 0, 20))
