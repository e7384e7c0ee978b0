"""The context window: requests fitted to it, conversations compacted before it is full, and
the errors that say what to set. Real tools read real files; real HTTP servers on 127.0.0.1
refuse what does not fit their window; only the model's decisions are scripted."""

from __future__ import annotations

import asyncio
import io
import json
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from provider_server import ProviderServer
from test_resume import cut
from trace_lines import trace_lines

from orchestrator import Agent, Message, TokenBudget, Trace, rebuild_conversations, tool
from orchestrator.agent.compaction import STUB_MARK, ContextFit
from orchestrator.cli.progress import PlainProgress
from orchestrator.jobs import fast_forward
from orchestrator.models import (
    KnownWindow,
    ModelSettings,
    ScriptedModel,
    context_refusal,
    context_window,
    known_window,
    resolve_model,
)
from orchestrator.report.collect import collect
from orchestrator.tasks import ForkExtension, SubagentDef, SubagentRegistry
from orchestrator.tokens import TokenCounter, default_counter
from orchestrator.trace import Event, load_checkpoint, read_trace

WINDOW = 4096
COUNTER = default_counter()


def write_notes(folder: Path, count: int, words: int = 300) -> list[Path]:
    folder.mkdir(exist_ok=True)
    paths = []
    for i in range(count):
        path = folder / f"note{i}.txt"
        path.write_text(f"note {i}: " + " ".join(f"w{i}x{j}" for j in range(words)))
        paths.append(path)
    return paths


def reader(folder: Path) -> Any:
    @tool
    def read_note(name: str) -> str:
        """Read one note.

        Args:
            name: the note's file name
        """
        return (folder / name).read_text()

    return read_note


def reads(count: int) -> list[dict[str, Any]]:
    return [
        {"tool_calls": [{"name": "read_note", "arguments": {"name": f"note{i}.txt"}}]}
        for i in range(count)
    ]


def requested(request: Any) -> int:
    """What one request holds at most: its prompt, as we count it, and the output it asks."""
    return int(COUNTER.count_request(request.messages, request.tools) + request.max_output_tokens)


def check_pairing(messages: Sequence[Message]) -> None:
    """Every tool call has exactly one result, right after its turn, in the model's order."""
    for index, message in enumerate(messages):
        if message.role == "tool":
            continue
        ids = [c.id for c in message.tool_calls]
        results = [m.tool_call_id for m in messages[index + 1 : index + 1 + len(ids)]]
        assert results == ids, f"turn {index}: calls {ids}, results {results}"
    asked = Counter(c.id for m in messages for c in m.tool_calls)
    answered = Counter(m.tool_call_id for m in messages if m.role == "tool")
    assert answered == asked


def compactions(events: list[Event], agent: str = "agent") -> list[Event]:
    return [e for e in events if e["type"] == "compact" and e["agent"] == agent]


async def test_a_long_run_in_a_small_window_never_asks_for_more_than_fits(tmp_path: Path) -> None:
    notes = write_notes(tmp_path / "notes", 40, words=100)
    model = ScriptedModel({"*": [*reads(40), {"content": "read them all"}]}, context_window=WINDOW)
    agent = Agent(
        model,
        [reader(tmp_path / "notes")],
        max_steps=50,
        max_output_tokens=2048,
        trace=tmp_path / "t.jsonl",
    )
    result = await agent.run("Read every note.")

    assert result.status == "completed" and result.output == "read them all"
    assert len(model.requests) == 41
    assert max(requested(r) for r in model.requests) <= WINDOW
    # Without compaction the last request would have held every note.
    whole = sum(COUNTER.count_text(p.read_text()) for p in notes)
    assert whole > 3 * WINDOW
    # The output asked for is cut to the room left when the prompt is large.
    assert {r.max_output_tokens for r in model.requests} > {2048}
    events = trace_lines(tmp_path / "t.jsonl")
    done = compactions(events)
    # Large steps, rarely: each compaction frees at least 40% of the window (from above 80%
    # to at most 40%), so the notes' tokens pay for every one of them.
    assert 3 <= len(done) <= whole / (0.4 * WINDOW)
    for event in done:
        assert event["window"] == WINDOW and event["window_source"] == "setting"
        # Down to 40% of the window, and a little more once what cannot be cut (the calls,
        # the stubs, the latest results) has grown.
        assert event["tokens_after"] <= 0.6 * WINDOW < 0.8 * WINDOW < event["tokens_before"]
    check_pairing(result.messages)
    stubs = [m for m in result.messages if m.role == "tool" and m.content.startswith(STUB_MARK)]
    replaced = [r for e in done for r in e["replaced"]]
    assert len(stubs) == len(replaced)
    # The trace alone rebuilds the compacted conversation the model last saw.
    assert rebuild_conversations(tmp_path / "t.jsonl")["agent"] == result.messages


async def test_the_budget_reserves_only_the_output_that_fits(tmp_path: Path) -> None:
    # A 4,096-token output allowance does not fit a 1,500-token budget; what fits the window
    # (1,500 less the prompt and the margin kept free) does, and that is all the request asks.
    model = ScriptedModel({"*": [{"content": "short"}]}, context_window=1500)
    agent = Agent(model, max_output_tokens=4096, budget=TokenBudget(1500))
    fits = 1500 - ContextFit(1500).margin
    # A fork's budget check before a task starts counts the same.
    assert agent.first_call_tokens("Say something short.") == fits
    result = await agent.run("Say something short.")
    assert result.status == "completed"
    (request,) = model.requests
    assert requested(request) == fits


async def test_a_stub_is_read_back_through_a_tool(tmp_path: Path) -> None:
    notes = write_notes(tmp_path / "notes", 8)
    turns = [
        *reads(8),
        {"tool_calls": [{"name": "read_compacted", "arguments": {"message": 2}}]},
        {"content": "found it again"},
    ]
    model = ScriptedModel({"*": turns}, context_window=WINDOW)
    agent = Agent(model, [reader(tmp_path / "notes")], trace=tmp_path / "t.jsonl")
    result = await agent.run("Read the notes, then the first one again.")

    assert result.status == "completed"
    assert "read_compacted" in [spec.name for spec in model.requests[0].tools]
    first = compactions(trace_lines(tmp_path / "t.jsonl"))[0]["replaced"][0]
    assert first["index"] == 2 and first["tool"] == "read_note"
    stub = result.messages[2].content
    assert stub.startswith(STUB_MARK) and "read_note" in stub and "message=2" in stub
    read_back = result.messages[-2]
    assert read_back.name == "read_compacted" and not read_back.is_error
    assert read_back.content == notes[0].read_text()


async def test_reading_back_a_long_result_comes_in_parts(tmp_path: Path) -> None:
    write_notes(tmp_path / "notes", 6, words=2500)
    turns = [
        *reads(6),
        {"tool_calls": [{"name": "read_compacted", "arguments": {"message": 2, "part": 2}}]},
        {"tool_calls": [{"name": "read_compacted", "arguments": {"message": 999}}]},
        {"content": "ok"},
    ]
    model = ScriptedModel({"*": turns}, context_window=16_384)
    result = await Agent(model, [reader(tmp_path / "notes")]).run("Read.")
    assert result.status == "completed"
    part, missing = result.messages[-4], result.messages[-2]
    text = (tmp_path / "notes" / "note0.txt").read_text()
    parts = -(-len(text) // 8_000)
    assert parts >= 3
    assert part.content == (
        f"{text[8_000:16_000]}\n[part 2 of {parts}; read_compacted(message=2, part=3) for the next]"
    )
    assert missing.is_error and "No compacted result 999" in missing.content


async def test_the_cached_prefix_breaks_only_at_the_compaction_request(tmp_path: Path) -> None:
    write_notes(tmp_path / "notes", 30)
    model = ScriptedModel({"*": [*reads(30), {"content": "done"}]}, context_window=WINDOW)
    agent = Agent(
        model,
        [reader(tmp_path / "notes")],
        system="You read notes.",
        max_steps=40,
        trace=tmp_path / "t.jsonl",
    )
    await agent.run("Read every note.")

    requests = model.requests
    assert all(r.tools is requests[0].tools for r in requests)  # one tools array throughout
    assert all(r.messages[0] == requests[0].messages[0] for r in requests)  # one system prompt
    broken = [
        number
        for number, (before, after) in enumerate(zip(requests, requests[1:], strict=False), 2)
        if list(after.messages[: len(before.messages)]) != list(before.messages)
    ]
    steps = [e["step"] for e in compactions(trace_lines(tmp_path / "t.jsonl"))]
    assert broken == steps and len(steps) >= 3


async def test_when_not_even_a_short_answer_fits_the_run_ends_as_context_full(
    tmp_path: Path,
) -> None:
    model = ScriptedModel({"*": [{"content": "never asked"}]}, context_window=1000)
    result = await Agent(model).run("word " * 1200)
    assert result.status == "context_full"
    assert model.requests == []  # nothing the provider would refuse was sent
    assert result.error is not None
    assert "the context window of 1,000 tokens (from its setting)" in result.error
    assert "context_window" in result.error and "max_output_tokens" in result.error


async def test_results_that_begin_like_a_stub_are_still_cut(tmp_path: Path) -> None:
    """Pages and files whose text begins with `[compacted]` (a hostile page, a file copied
    from a trace) are results like any other: a run of them compacts and completes instead of
    ending `context_full` with nothing left to cut."""
    notes = write_notes(tmp_path / "notes", 30, words=100)
    for path in notes:
        path.write_text(f"{STUB_MARK} {path.read_text()}")
    model = ScriptedModel({"*": [*reads(30), {"content": "read them all"}]}, context_window=WINDOW)
    agent = Agent(model, [reader(tmp_path / "notes")], max_steps=40, trace=tmp_path / "t.jsonl")

    result = await agent.run("Read every note.")

    assert result.status == "completed", result.error
    assert max(requested(r) for r in model.requests) <= WINDOW
    done = compactions(trace_lines(tmp_path / "t.jsonl"))
    assert done and all(event["replaced"] for event in done)
    stubs = [m for m in result.messages if m.compacted]
    assert len(stubs) == len({r["index"] for e in done for r in e["replaced"]})
    assert all("read_compacted(message=" in (m.content or "") for m in stubs)
    assert rebuild_conversations(tmp_path / "t.jsonl")["agent"] == result.messages


async def test_a_cancelled_run_after_compactions_keeps_every_call_paired(tmp_path: Path) -> None:
    write_notes(tmp_path / "notes", 12)

    @tool
    async def wait(seconds: float) -> str:
        """Wait."""
        await asyncio.sleep(seconds)
        return "waited"

    turns = [
        *reads(12),
        {
            "tool_calls": [
                {"name": "read_note", "arguments": {"name": "note0.txt"}},
                {"name": "wait", "arguments": {"seconds": 30}},
                {"name": "read_note", "arguments": {"name": "note1.txt"}},
            ]
        },
    ]
    model = ScriptedModel({"*": turns}, context_window=WINDOW)
    path = tmp_path / "t.jsonl"
    agent = Agent(model, [reader(tmp_path / "notes"), wait], trace=path, time_limit=1.5)
    result = await agent.run("Read, then wait.")

    assert result.status == "cancelled"
    assert len(compactions(trace_lines(path))) >= 2
    check_pairing(result.messages)
    # The calls ran side by side: the two reads ended, the wait was cut short.
    assert [m.error_type for m in result.messages[-3:]] == [None, "aborted", None]
    check_pairing(rebuild_conversations(path)["agent"])


async def test_a_compacted_run_resumes_as_it_was(tmp_path: Path) -> None:
    notes = write_notes(tmp_path / "notes", 16)
    turns = [
        *reads(16),
        {"tool_calls": [{"name": "read_compacted", "arguments": {"message": 4}}]},
        {"content": "all read"},
    ]
    path = tmp_path / "t.jsonl"
    whole_model = ScriptedModel({"*": turns}, context_window=WINDOW)
    with Trace(path) as trace:
        whole = await Agent(whole_model, [reader(tmp_path / "notes")], trace=trace).run("Read.")
    events = trace_lines(path)
    second = compactions(events)[1]
    # Killed while the tool call after the second compaction ran.
    cut_at = next(
        i for i, e in enumerate(events) if e["type"] == "tool_start" and e["seq"] > second["seq"]
    )
    (tmp_path / "cut").mkdir()
    cut_path = cut(path, cut_at + 1, tmp_path / "cut" / "t.jsonl")
    checkpoint = load_checkpoint(cut_path)
    model = ScriptedModel({"*": turns}, context_window=WINDOW)
    fast_forward(model, checkpoint)
    with Trace(cut_path, resume=checkpoint) as trace:
        agent = Agent(model, [reader(tmp_path / "notes")], trace=trace)
        resumed = await agent.run("Read.", history=trace.history(agent.name))

    assert resumed.status == "completed" and resumed.output == whole.output == "all read"
    # The first request after the resume is the one the whole run made at that step, stubs
    # and all, except the cut call's result: `aborted`, never silently run again.
    first = model.requests[0]
    same_step = whole_model.requests[len(whole_model.requests) - len(model.requests)]
    assert len(first.messages) == len(same_step.messages)
    differ = [
        i for i, (a, b) in enumerate(zip(first.messages, same_step.messages, strict=True)) if a != b
    ]
    assert len(differ) == 1 and first.messages[differ[0]].error_type == "aborted"
    assert sum(STUB_MARK in (m.content or "") for m in first.messages) >= 4
    # What the earlier attempt compacted is read back after the resume.
    assert resumed.messages[-2].name == "read_compacted"
    assert resumed.messages[-2].content == notes[1].read_text()
    check_pairing(resumed.messages)
    check_pairing(rebuild_conversations(cut_path)["agent"])
    assert rebuild_conversations(cut_path)["agent"] == resumed.messages


async def test_a_parents_compaction_never_touches_a_childs_conversation(tmp_path: Path) -> None:
    write_notes(tmp_path / "notes", 12)
    script = {
        "planner": [
            {"tool_calls": [{"name": "fork", "arguments": {"tasks": [{"id": "a", "task": "x"}]}}]},
            *reads(12),
            {"content": "planner done"},
        ],
        "planner/a": [*reads(1), {"content": "child done"}],
    }
    model = ScriptedModel(script, context_window=WINDOW)
    fork = ForkExtension(SubagentRegistry(), tools=[reader(tmp_path / "notes")])
    planner = Agent(
        model,
        [reader(tmp_path / "notes")],
        name="planner",
        extensions=[fork],
        max_steps=30,
        trace=tmp_path / "t.jsonl",
    )
    result = await planner.run("Fork, then read.")

    assert result.status == "completed"
    events = trace_lines(tmp_path / "t.jsonl")
    assert compactions(events, "planner") and not compactions(events, "planner/a")
    child = rebuild_conversations(tmp_path / "t.jsonl")["planner/a"]
    assert not any(STUB_MARK in (m.content or "") for m in child)
    assert result.children[0].run is not None
    assert result.children[0].run.messages == child
    # The child knows the window of its own model: its requests carry read_compacted too.
    child_requests = [r for r in model.requests if r.agent == "planner/a"]
    assert all("read_compacted" in [s.name for s in r.tools] for r in child_requests)


def too_long(window: int, scale: float, *, counts: bool = True) -> Any:
    """A server's refusal of a request that does not fit `window`, counting the prompt as a
    tokenizer that makes `scale` tokens of each of ours would, in vLLM's words (without its
    counts, unless `counts`)."""

    def refuse(body: Mapping[str, Any]) -> Any:
        messages = [Message.model_validate(_from_wire(m)) for m in body["messages"]]
        prompt = int(COUNTER.count_messages(messages) * scale) + 50 * len(body.get("tools", []))
        asked = int(body.get("max_tokens") or 0)
        if prompt + asked <= window:
            return None
        message = (
            f"This model's maximum context length is {window} tokens. However, you requested "
            f"{prompt + asked} tokens ({prompt} in the messages, {asked} in the completion). "
            "Please reduce the length of the messages or completion."
        )
        if not counts:
            message = f"This model's maximum context length is {window} tokens."
        return {"error": {"message": message, "type": "BadRequestError", "code": 400}}

    return refuse


def _from_wire(message: Mapping[str, Any]) -> dict[str, Any]:
    calls = [
        {"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
        for c in message.get("tool_calls") or []
    ]
    return {"role": message["role"], "content": message.get("content"), "tool_calls": calls}


async def test_a_refusal_that_names_the_window_teaches_it_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    write_notes(tmp_path / "notes", 14)
    script = {"*": [*reads(14), {"content": "read them all"}]}
    with ProviderServer(script, refuse=too_long(3000, scale=1.3)) as server:
        model = resolve_model("openai-compatible:small", base_url=server.openai_url, max_retries=0)
        assert context_window(model) is None  # nothing says it before the first refusal
        agent = Agent(
            model,
            [reader(tmp_path / "notes")],
            max_output_tokens=1024,
            trace=tmp_path / "t.jsonl",
        )
        result = await agent.run("Read every note.")
        bodies = server.bodies()

    assert result.status == "completed" and result.output == "read them all"
    events = trace_lines(tmp_path / "t.jsonl")
    refused = len(bodies) - len([e for e in events if e["type"] == "model_call"])
    assert 1 <= refused <= 2  # one to learn the window (and another, at most, its tokens)
    done = compactions(events)
    assert done and all(e["window"] == 3000 and e["window_source"] == "refusal" for e in done)
    assert done[-1]["scale"] >= 1.3
    check_pairing(result.messages)


async def test_a_window_that_counts_more_than_we_do_is_learned_from_its_refusals(
    tmp_path: Path,
) -> None:
    # The window is set, but the server's tokenizer counts 30% more than ours and its
    # refusals give no count: each refusal makes later requests count 15% more, compacted.
    write_notes(tmp_path / "notes", 14)
    script = {"*": [*reads(14), {"content": "read them all"}]}
    with ProviderServer(script, refuse=too_long(3000, scale=1.3, counts=False)) as server:
        model = resolve_model(
            "openai-compatible:small", base_url=server.openai_url, context_window=3000
        )
        path = tmp_path / "t.jsonl"
        agent = Agent(model, [reader(tmp_path / "notes")], max_output_tokens=1024, trace=path)
        result = await agent.run("Read every note.")
        bodies = server.bodies()

    assert result.status == "completed"
    events = trace_lines(path)
    refused = len(bodies) - len([e for e in events if e["type"] == "model_call"])
    assert 1 <= refused <= 3
    scales = [e.get("scale", 1.0) for e in compactions(events)]
    assert scales == sorted(scales) and scales[-1] >= 1.15
    check_pairing(result.messages)


async def test_a_refusal_that_names_no_window_says_what_to_set(tmp_path: Path) -> None:
    def refuse(body: Mapping[str, Any]) -> Any:
        return {"error": {"message": "Too many tokens.", "code": "context_length_exceeded"}}

    with ProviderServer({"*": [{"content": "never"}]}, refuse=refuse) as server:
        model = resolve_model("openai-compatible:small", base_url=server.openai_url)
        result = await Agent(model).run("hello")
        assert len(server.requests) == 1  # refused for length: not retried as it was
    assert result.status == "context_full"
    assert result.error is not None
    assert "HTTP 400" in result.error and "Too many tokens." in result.error
    assert "context window of openai-compatible:small is not known" in result.error
    assert "`context_window`" in result.error and "`max_output_tokens`" in result.error


@pytest.mark.parametrize(
    ("message", "code", "body", "window", "prompt"),
    [
        (  # OpenAI
            "This model's maximum context length is 128000 tokens. However, your messages "
            "resulted in 130512 tokens. Please reduce the length of the messages.",
            "context_length_exceeded",
            None,
            128000,
            130512,
        ),
        (  # vLLM and llama-cpp-python
            "This model's maximum context length is 8192 tokens. However, you requested 12288 "
            "tokens (8192 in the messages, 4096 in the completion). Please reduce the length "
            "of the messages or completion.",
            None,
            None,
            8192,
            8192,
        ),
        (  # Anthropic
            "prompt is too long: 210345 tokens > 200000 maximum",
            "invalid_request_error",
            None,
            200000,
            210345,
        ),
        (  # llama.cpp's server
            "the request exceeds the available context size, try increasing it",
            "exceed_context_size_error",
            {
                "error": {
                    "code": 400,
                    "n_prompt_tokens": 9000,
                    "n_ctx": 8192,
                    "type": "exceed_context_size_error",
                }
            },
            8192,
            9000,
        ),
        ("Too many tokens.", "context_length_exceeded", None, None, None),
    ],
)
def test_refusals_for_length_are_read_in_each_providers_words(
    message: str, code: str | None, body: Any, window: int | None, prompt: int | None
) -> None:
    refusal = context_refusal(message, code, body)
    assert refusal is not None
    assert (refusal.window, refusal.prompt_tokens) == (window, prompt)


def test_other_errors_are_not_refusals_for_length() -> None:
    assert context_refusal("Invalid value for 'temperature'", "invalid_request_error") is None


def test_the_window_comes_from_the_settings_or_the_table() -> None:
    settings = ModelSettings.model_validate(
        {"name": "openai-compatible:qwen3", "context_window": 8192, "compact_at": 0.7}
    )
    model = resolve_model(settings.name, base_url="http://127.0.0.1:9/v1", **settings.options())
    known = context_window(model)
    assert known is not None and (known.tokens, known.source) == (8192, "setting")
    assert Agent(model).compact_at == 0.7
    assert known_window("anthropic:claude-sonnet-4-5-20250929") == 200_000
    assert known_window("openai:gpt-4o-mini") == known_window("openai:gpt-4o") == 128_000
    assert known_window("openai-compatible:gpt-4o") is None  # a local server's own name
    with pytest.raises(ValueError, match="compact_at"):
        ModelSettings.model_validate({"name": "openai-compatible:x", "compact_at": 1.5})


async def test_the_live_view_and_the_report_show_every_compaction(tmp_path: Path) -> None:
    write_notes(tmp_path / "notes", 12)
    model = ScriptedModel({"*": [*reads(12), {"content": "done"}]}, context_window=WINDOW)
    path = tmp_path / "t.jsonl"
    await Agent(model, [reader(tmp_path / "notes")], trace=path).run("Read.")
    events = trace_lines(path)
    done = compactions(events)

    lines = io.StringIO()
    progress = PlainProgress(lines)
    for event in read_trace(path):
        progress(event)
    shown = [line for line in lines.getvalue().splitlines() if "compacted" in line]
    assert len(shown) == len(done)
    first = done[0]
    assert (
        f"agent: compacted {len(first['replaced'])} tool results, "
        f"{first['tokens_before']:,} -> {first['tokens_after']:,} tokens of a 4,096-token window"
    ) in shown[0]
    report = collect(read_trace(path))
    (run,) = report.agents.values()
    assert run.compactions == len(done)
    assert [b.kind for b in run.bars].count("compact") == len(done)


@pytest.mark.parametrize(
    ("pages", "window"),
    [
        ({"/v1/models": {"data": [{"id": "small", "max_model_len": 3000}]}}, 3000),  # vLLM
        ({"/props": {"default_generation_settings": {"n_ctx": 3000}}}, 3000),  # llama.cpp
        ({"/v1/models": {"data": [{"id": "small", "owned_by": "me"}]}}, None),  # says nothing
    ],
)
async def test_a_local_server_is_asked_for_its_window(
    tmp_path: Path, pages: dict[str, Any], window: int | None
) -> None:
    write_notes(tmp_path / "notes", 14)
    script = {"*": [*reads(14), {"content": "read them all"}]}
    with ProviderServer(script, refuse=too_long(3000, scale=1.0), pages=pages) as server:
        model = resolve_model("openai-compatible:small", base_url=server.openai_url)
        path = tmp_path / "t.jsonl"
        agent = Agent(model, [reader(tmp_path / "notes")], max_output_tokens=1024, trace=path)
        result = await agent.run("Read every note.")
        bodies = server.bodies()
        asked = list(server.gets)
        # Asked once per endpoint and model: a second agent does not ask again.
        await Agent(model, name="again", max_steps=1).run("Say hello.")
        assert server.gets == asked and asked

    assert result.status == "completed"
    events = trace_lines(path)
    refused = len(bodies) - len([e for e in events if e["type"] == "model_call"])
    done = compactions(events)
    if window is None:  # learned from the refusal instead
        assert refused >= 1 and done[0]["window_source"] == "refusal"
    else:
        assert refused == 0 and done and done[0]["window_source"] == "server"
        assert "read_compacted" in [t["function"]["name"] for t in bodies[0]["tools"]]


async def test_anthropics_refusal_teaches_a_window_below_the_tables(tmp_path: Path) -> None:
    write_notes(tmp_path / "notes", 4)
    script = {"*": [*reads(4), {"content": "read them all"}]}
    refusals: list[int] = []

    def refuse(body: Mapping[str, Any]) -> Any:
        if len(body["messages"]) < 8 or refusals:
            return None
        refusals.append(len(body["messages"]))
        message = "prompt is too long: 5200 tokens > 3000 maximum"
        return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}

    with ProviderServer(script, refuse=refuse) as server:
        model = resolve_model(
            "anthropic:claude-sonnet-4-5", base_url=server.url, api_key="sk-test-000000000"
        )
        assert context_window(model) == KnownWindow(200_000, "known model")
        path = tmp_path / "t.jsonl"
        result = await Agent(model, [reader(tmp_path / "notes")], trace=path).run("Read.")
        bodies = server.bodies()

    assert result.status == "completed" and refusals
    (done,) = compactions(trace_lines(path))
    assert (done["window"], done["window_source"]) == (3000, "refusal")
    # Sent again compacted, asking no more than the window leaves in the provider's measure.
    again = bodies[bodies.index(next(b for b in bodies if len(b["messages"]) == refusals[0])) + 1]
    assert again["max_tokens"] <= 3000 - 5200 * done["tokens_after"] / done["tokens_before"]
    check_pairing(result.messages)


async def test_the_model_keeps_notes_on_what_is_cut_one_set_at_a_time(tmp_path: Path) -> None:
    notes = write_notes(tmp_path / "notes", 16)
    script = {
        "agent": [*reads(16), {"content": "read them all"}],
        "*": [{"content": f"notes {n}: note{n} says w{n}x0"} for n in range(1, 20)],
    }
    model = ScriptedModel(script, context_window=WINDOW)
    path = tmp_path / "t.jsonl"
    budget = TokenBudget(1_000_000)
    agent = Agent(
        model, [reader(tmp_path / "notes")], trace=path, compaction="summarize", budget=budget
    )
    result = await agent.run("Read every note.")

    assert result.status == "completed"
    assert max(requested(r) for r in model.requests) <= WINDOW
    events = trace_lines(path)
    done = compactions(events)
    assert len(done) >= 3
    writers = [r for r in model.requests if r.agent != "agent"]
    assert [e["summary_agent"] for e in done] == [r.agent for r in writers]
    assert all(e["summary_agent"].startswith("agent/summary-") for e in done)
    # The writer read the results being cut, and the notes kept so far.
    first_cut = done[0]["replaced"][0]["index"]
    assert notes[(first_cut - 2) // 2].read_text() in writers[0].messages[-1].content
    assert "notes 1: note1" in writers[1].messages[-1].content
    # One set of notes at a time, in the newest stub; the ones before are plain stubs again.
    kept = [m for m in result.messages if "[kept across compactions]" in (m.content or "")]
    assert len(kept) == 1 and kept[0].content.endswith(
        f"notes {len(done)}: note{len(done)} says w{len(done)}x0"
    )
    check_pairing(result.messages)
    assert rebuild_conversations(path)["agent"] == result.messages
    # The notes were charged to the budget like any call, and count in the run's usage.
    calls = [e for e in events if e["type"] == "model_call"]
    assert budget.used == sum(e["usage"]["total_tokens"] for e in calls)
    assert result.total_usage.total_tokens == budget.used
    # What a resumed run could read back of a stub that once carried notes is the result it
    # replaced, not the notes.
    carried = done[0]["replaced"][-1]["index"]
    record = load_checkpoint(path).agents["agent"]
    assert record.compacted[carried] == notes[(carried - 2) // 2].read_text()


async def test_a_child_fits_the_window_of_its_own_model(tmp_path: Path) -> None:
    write_notes(tmp_path / "notes", 10)
    fork = {"name": "fork", "arguments": {"tasks": [{"id": "a", "agent": "reader", "task": "x"}]}}
    parent = ScriptedModel(
        {"planner": [{"tool_calls": [fork]}, *reads(10), {"content": "done"}]},
        context_window=WINDOW,
    )
    child = ScriptedModel(
        {"planner/a": [*reads(10), {"content": "child done"}]},
        context_window=2048,
        name="scripted:small",
    )
    definition = SubagentDef(name="reader", description="Reads notes.", model="small-model")
    extension = ForkExtension(
        SubagentRegistry([definition]),
        tools=[reader(tmp_path / "notes")],
        resolve=lambda settings: child,
    )
    path = tmp_path / "t.jsonl"
    planner = Agent(
        parent,
        [reader(tmp_path / "notes")],
        name="planner",
        extensions=[extension],
        max_steps=30,
        trace=path,
    )
    result = await planner.run("Fork a reader, then read.")

    assert result.status == "completed" and result.children[0].status == "completed"
    assert child.requests and max(requested(r) for r in child.requests) <= 2048
    assert max(requested(r) for r in parent.requests) <= WINDOW
    events = trace_lines(path)
    assert {e["window"] for e in compactions(events, "planner/a")} == {2048}
    assert {e["window"] for e in compactions(events, "planner")} == {WINDOW}


async def test_a_compacted_run_replays_from_its_trace(tmp_path: Path) -> None:
    write_notes(tmp_path / "notes", 14)
    script = {"*": [*reads(14), {"content": "read them all"}]}
    recorded = tmp_path / "recorded.jsonl"
    first = await Agent(
        ScriptedModel(script, context_window=WINDOW),
        [reader(tmp_path / "notes")],
        trace=recorded,
        compact_at=0.7,
    ).run("Read every note.")
    assert len(compactions(trace_lines(recorded))) >= 2

    replay = resolve_model(f"replay:{recorded}")
    assert (context_window(replay), Agent(replay).compact_at) == (
        KnownWindow(WINDOW, "setting"),
        0.7,
    )
    again = await Agent(replay, [reader(tmp_path / "notes")]).run("Read every note.")
    # Every request matched the recording, stubs and all (a departure fails the run).
    assert again.status == "completed" and again.messages == first.messages


async def test_a_resumed_run_keeps_the_window_its_server_gave_without_asking_again(
    tmp_path: Path,
) -> None:
    """The window a server said is in the trace; asked again on resume it could say nothing
    (down for a moment), and the tools array would change mid-run."""
    write_notes(tmp_path / "notes", 6)
    turns = [*reads(6), {"content": "read them all"}]
    pages = {"/props": {"default_generation_settings": {"n_ctx": 3000}}}
    path = tmp_path / "t.jsonl"
    with ProviderServer({"*": turns}, pages=pages) as server:
        model = resolve_model("openai-compatible:probed", base_url=server.openai_url)
        await Agent(model, [reader(tmp_path / "notes")], max_output_tokens=512, trace=path).run(
            "Read every note."
        )
    events = trace_lines(path)
    (said,) = [e for e in events if e["type"] == "context_window"]
    assert said["tokens"] == 3000
    cut_at = [i for i, e in enumerate(events) if e["type"] == "model_call"][2]
    (tmp_path / "cut").mkdir()
    cut_path = cut(path, cut_at + 1, tmp_path / "cut" / "t.jsonl")

    with ProviderServer({"*": turns[3:]}) as silent:  # its window pages are gone now
        model = resolve_model("openai-compatible:probed", base_url=silent.openai_url)
        checkpoint = load_checkpoint(cut_path)
        with Trace(cut_path, resume=checkpoint) as trace:
            agent = Agent(model, [reader(tmp_path / "notes")], max_output_tokens=512, trace=trace)
            resumed = await agent.run("Read every note.", history=trace.history(agent.name))
        bodies = silent.bodies()
        assert not silent.gets  # not asked again

    assert resumed.status == "completed"
    assert all("read_compacted" in [t["function"]["name"] for t in b["tools"]] for b in bodies)


async def test_a_window_probe_refuses_a_reply_past_its_limit() -> None:
    from orchestrator.models.http import MAX_PROBE_BYTES

    huge = {"default_generation_settings": {"n_ctx": 3000}, "pad": "x" * (2 * MAX_PROBE_BYTES)}
    small = {"default_generation_settings": {"n_ctx": 3000}}
    with ProviderServer({"*": []}, pages={"/props": huge}) as hostile:
        model = resolve_model("openai-compatible:big", base_url=hostile.openai_url)
        assert await model.server_window() is None  # a reply past the limit is not read
    with ProviderServer({"*": []}, pages={"/props": small}) as fine:
        model = resolve_model("openai-compatible:small", base_url=fine.openai_url)
        assert await model.server_window() == 3000


PROSE = (
    "the ledger shows that the invoice was booked twice in the same month and the clerk who "
    "checked it said the payment had not reached the supplier before the quarter closed so "
    "the balance carried forward is wrong by the amount of that second entry"
)


def write_prose(folder: Path, count: int, words: int) -> None:
    """Notes in plain English, where a server's tokenizer differs most from cl100k's."""
    folder.mkdir(exist_ok=True)
    vocabulary = PROSE.split(" ")
    for i in range(count):
        text = " ".join(vocabulary[(i * 7 + j) % len(vocabulary)] for j in range(words))
        (folder / f"note{i}.txt").write_text(f"note {i}: {text}")


def wire_text(body: Mapping[str, Any]) -> list[str]:
    """What a server's tokenizer reads of a Chat Completions body: each message (its role,
    text and tool calls) and each tool's schema as sent."""
    texts = [json.dumps(tool, separators=(",", ":")) for tool in body.get("tools") or []]
    for message in body["messages"]:
        calls = [
            c["function"]["name"] + c["function"]["arguments"]
            for c in message.get("tool_calls") or []
        ]
        texts.append("\n".join([message["role"], message.get("content") or "", *calls]))
    return texts


SERVER_COUNTS = {
    # A server whose tokens are shorter than cl100k's, with a chat template of its own.
    "characters/3": lambda text: math.ceil(len(text) / 3) + 4,
    "cl100k x 1.15": lambda text: math.ceil(COUNTER.count_text(text) * 1.15) + 4,
}


def counting_server(
    window: int, count: Callable[[str], int]
) -> tuple[Callable[[Mapping[str, Any]], int], Callable[[Mapping[str, Any]], Any]]:
    """A server's count of a request's prompt (`count` over each message and tool schema as
    sent), and its refusal of a request that does not fit `window` with the completion it
    asks for."""

    def prompt_tokens(body: Mapping[str, Any]) -> int:
        return sum(count(text) for text in wire_text(body))

    def refuse(body: Mapping[str, Any]) -> Any:
        asked = int(body.get("max_tokens") or 0)
        if prompt_tokens(body) + asked <= window:
            return None
        return {
            "error": {
                "message": f"This model's maximum context length is {window} tokens. However, "
                f"you requested {prompt_tokens(body) + asked} tokens.",
                "code": "context_length_exceeded",
            }
        }

    return prompt_tokens, refuse


@pytest.mark.parametrize("measure", list(SERVER_COUNTS))
async def test_a_declared_window_is_never_overshot_when_the_server_counts_more(
    tmp_path: Path, measure: str
) -> None:
    # The server counts every message, every tool schema and the completion asked for, in
    # tokens of its own that outnumber ours, and refuses what does not fit 8,000. The agent
    # fits each request to the window in the server's measure, learned from the prompt
    # tokens each reply reports: none is refused.
    window = 8000
    prompt_tokens, refuse = counting_server(window, SERVER_COUNTS[measure])

    write_prose(tmp_path / "notes", 40, words=250)
    script = {"*": [*reads(40), {"content": "read them all"}]}
    usage = lambda body: (prompt_tokens(body), 20)  # noqa: E731
    with ProviderServer(script, refuse=refuse, usage=usage) as server:
        model = resolve_model(
            "openai-compatible:small",
            base_url=server.openai_url,
            context_window=window,
            max_retries=0,
        )
        path = tmp_path / "t.jsonl"
        agent = Agent(
            model, [reader(tmp_path / "notes")], max_steps=60, max_output_tokens=2048, trace=path
        )
        result = await agent.run("Read every note.")
        bodies = server.bodies()

    assert result.status == "completed", result.error
    sizes = [prompt_tokens(b) + int(b["max_tokens"]) for b in bodies]
    refused = [size for size in sizes if size > window]
    assert refused == [], f"{len(refused)} of {len(bodies)} requests refused: {refused}"
    assert len(bodies) == 41 and compactions(trace_lines(path))
    # The calibration leaves no more than the margin unused at the fullest request.
    assert max(sizes) >= 0.9 * window
    check_pairing(result.messages)


def test_each_model_keeps_the_ratio_of_its_latest_reply_never_below_one() -> None:
    counter = TokenCounter()
    larger, smaller = ScriptedModel({"*": []}), ScriptedModel({"*": []})
    counter.calibrate(larger, 1000, 1200)
    counter.calibrate(smaller, 1000, 800)  # fewer than ours: ours is the safe count
    assert counter.prompt_ratio(larger) == 1.2 and counter.prompt_ratio(smaller) == 1.0
    counter.calibrate(larger, 2000, 2200)
    assert counter.prompt_ratio(larger) == 1.1
    assert counter.prompt_ratio(ScriptedModel({"*": []})) == 1.0  # another model: its own


def test_the_window_settings_can_be_tried_with_the_scripted_model(tmp_path: Path) -> None:
    """A spec or `--model-option` gives the scripted model a window to play, so context
    fitting can be tried offline; an option it cannot take is still a validate error."""
    from cli_process import orchestrator as run_cli

    (tmp_path / "s.json").write_text('{"*": [{"content": "ok"}]}')
    (tmp_path / "job.yaml").write_text(
        "name: w\nmodel: {name: scripted:s.json, context_window: 3000, compact_at: 0.5}\n"
        "goal: Go.\n"
    )
    done = run_cli("run", "job.yaml", "--trace", "a.jsonl", "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    start = next(e for e in trace_lines(tmp_path / "a.jsonl") if e["type"] == "run_start")
    assert start["model"] == "scripted"
    (tmp_path / "flag.yaml").write_text("name: f\nmodel: scripted:s.json\ngoal: Go.\n")
    args = ["run", "flag.yaml", "--model-option", "max_output_tokens=256", "--quiet"]
    assert run_cli(*args, cwd=tmp_path).returncode == 0
    bad = run_cli("validate", "flag.yaml", "--model-option", "stream=false", cwd=tmp_path)
    assert bad.returncode == 2 and "a scripted model takes only" in bad.stderr
    model = resolve_model(
        ModelSettings(name="scripted:" + str(tmp_path / "s.json")).updated(
            context_window=3000, compact_at=0.5
        )
    )
    window = context_window(model)
    assert window is not None and (window.tokens, window.source) == (3000, "setting")
    assert Agent(model).compact_at == 0.5


@pytest.mark.parametrize("measure", list(SERVER_COUNTS))
async def test_a_job_reading_25_files_in_8000_tokens_never_overshoots_nor_starves_its_answer(
    tmp_path: Path, measure: str
) -> None:
    # A planner loads the files skill and reads 25 files of about 700 tokens, one a turn, in a
    # declared 8,000-token window, from a server that counts in tokens of its own (and says
    # so in every reply) and refuses a request that does not fit. What compaction leaves is
    # mostly what it never cuts (the skill's instructions, the model's turns, stubs), whose
    # tokens compare to ours otherwise than a file's do: the request right after a compaction
    # must be counted in the server's measure all the same.
    from orchestrator import Orchestrator
    from orchestrator.security import Permissions

    window, wanted = 8000, 4096  # the window, and the agents' own answer allowance
    prompt_tokens, refuse = counting_server(window, SERVER_COUNTS[measure])

    files = tmp_path / "work"
    write_notes(files, 25, words=175)
    assert 650 <= COUNTER.count_text((files / "note0.txt").read_text()) <= 750
    reads_ = [
        {"tool_calls": [{"name": "files__read_file", "arguments": {"path": f"note{i}.txt"}}]}
        for i in range(25)
    ]
    load = {"tool_calls": [{"name": "load_skill", "arguments": {"name": "files"}}]}
    script = {"*": [load, *reads_, {"content": "read them all"}]}
    usage = lambda body: (prompt_tokens(body), 20)  # noqa: E731
    with ProviderServer(script, refuse=refuse, usage=usage) as server:
        model = resolve_model(
            "openai-compatible:small",
            base_url=server.openai_url,
            context_window=window,
            max_output_tokens=wanted,
            max_retries=0,
        )
        path = tmp_path / "t.jsonl"
        orchestrator = Orchestrator(
            model, permissions=Permissions(workspace=files), trace=path, max_steps=40
        )
        result = await orchestrator.run("Read every file in the workspace, one by one.")
        bodies = server.bodies()

    assert result.status == "completed", result.error
    events = trace_lines(path)
    # What each request really sent, in the server's measure, fits the window with the
    # answer allowance it asked for: none was refused, none sent twice.
    sizes = [prompt_tokens(b) + int(b["max_tokens"]) for b in bodies]
    assert max(sizes) <= window, [(i, s) for i, s in enumerate(sizes, 1) if s > window]
    calls = [e for e in events if e["type"] == "model_call"]
    assert len(bodies) == len(calls) == 27
    # Compaction comes at the threshold (80% of the window), before the answer allowance is
    # cut below what the threshold leaves: no request asks for less than that.
    done = compactions(events, "planner")
    assert len(done) >= 3, {e["agent"] for e in calls}
    floor = window - ContextFit(window).margin - int(0.8 * window)
    allowances = [int(b["max_tokens"]) for b in bodies]
    assert min(allowances) >= min(wanted, floor), allowances
    assert all(prompt_tokens(b) <= 0.8 * window for b in bodies)
    check_pairing(result.messages)
