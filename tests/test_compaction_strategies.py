"""Compaction that keeps what matters: a long job behind a real HTTP server that refuses what
does not fit its window, compacted 10 times and more by each strategy (`mask`, `summarize`,
a compactor of one's own), keeps in every request the system prompt, the task with what the
job pins, the loaded skill's instructions and the agent's working record (an early decision,
a failed approach, a changed file); every call stays paired, and a compacted run resumes.
Real skills, files, server and trace; only the model's decisions are scripted."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from provider_server import ProviderServer
from test_context_window import PROSE, check_pairing, wire_text
from test_resume import cut
from trace_lines import trace_lines

from orchestrator import (
    Agent,
    Orchestrator,
    ToolContext,
    read_trace,
    rebuild_conversations,
    run_job_sync,
    tool,
)
from orchestrator.agent import CompactionPlan, CompactionRequest, Extension
from orchestrator.agent.compaction import SUMMARY_SYSTEM, SUMMARY_TOKENS
from orchestrator.jobs import fast_forward, load_job
from orchestrator.models import ScriptedModel, resolve_model
from orchestrator.report import render_report
from orchestrator.tokens import default_counter
from orchestrator.trace import load_checkpoint
from orchestrator.trace.summary import render, summarize

COUNTER = default_counter()
WINDOW = 8192
NOTES = 64
DECISION = "Decision: the report is CSV, one row per note (JSON was rejected: too verbose)."
DEAD_END = "Dead end: splitting the notes with a regex broke on quoted commas; do not retry."
CHANGED = "out/report.csv"
SKILL_LINE = "Find before you read: `glob` for names, `grep` for contents"
PINNED_LINE = "Never rename a note file: other teams link to them."
PINNED_WORDS = 2_500  # a pinned file that leaves too little room for a summary too
SUMMARY = "Decisions: CSV. Dead ends: regex. Artifacts: out/report.csv. Next step: read on."


def prose(words: int) -> str:
    vocabulary = PROSE.split(" ")
    return " ".join(vocabulary[j % len(vocabulary)] for j in range(words))


def server_tokens(body: Mapping[str, Any]) -> int:
    """The server's count of a prompt: cl100k and 15% more, plus its chat template."""
    return sum(math.ceil(COUNTER.count_text(text) * 1.15) + 4 for text in wire_text(body))


def refuse(body: Mapping[str, Any]) -> Any:
    """A server with a window of its own: it refuses a request it cannot hold."""
    asked = int(body.get("max_tokens") or 0)
    if server_tokens(body) + asked <= WINDOW:
        return None
    return {
        "error": {
            "message": f"This model's maximum context length is {WINDOW} tokens. However, you "
            f"requested {server_tokens(body) + asked} tokens.",
            "code": "context_length_exceeded",
        }
    }


def route(body: Mapping[str, Any]) -> str:
    first = body["messages"][0].get("content") or ""
    return "summary" if first == SUMMARY_SYSTEM else "long"


def turns(reads: int = NOTES) -> list[dict[str, Any]]:
    """The agent loads the files skill, keeps a note of a decision and a dead end, writes the
    report, then reads every note and answers."""
    calls = [
        {"name": "load_skill", "arguments": {"name": "files"}},
        {"name": "note", "arguments": {"text": f"{DECISION}\n{DEAD_END}"}},
        {"name": "files__write_file", "arguments": {"path": CHANGED, "content": "note,words\n"}},
        *(
            {"name": "files__read_file", "arguments": {"path": f"notes/note{i}.txt"}}
            for i in range(reads)
        ),
    ]
    return [*({"tool_calls": [c]} for c in calls), {"content": "all notes read"}]


def write_workspace(folder: Path) -> None:
    notes = folder / "work" / "notes"
    notes.mkdir(parents=True)
    words = PROSE.split(" ")
    for i in range(NOTES):
        text = " ".join(words[(i * 7 + j) % len(words)] for j in range(450))
        (notes / f"note{i}.txt").write_text(f"note {i}: {text}")
    (folder / "rules.md").write_text(f"House rules.\n{PINNED_LINE}\n")


def write_job(folder: Path, url: str, compaction: str) -> Path:
    spec = folder / "job.yaml"
    spec.write_text(
        f"""\
name: long
model: {{name: "openai-compatible:small", base_url: "{url}", context_window: {WINDOW},
        max_output_tokens: 512, max_retries: 0}}
compaction: {compaction}
note: true
pinned: [rules.md]
budget: {{max_steps: {NOTES + 10}}}
steps:
  - {{id: long, task: "Read every note in notes/ and write the report."}}
"""
    )
    return spec


def text_of(body: Mapping[str, Any]) -> str:
    return "\n".join(m.get("content") or "" for m in body["messages"])


def check_wire_pairing(body: Mapping[str, Any]) -> None:
    """Every call of the request has its one result, right after its turn, in order."""
    messages = body["messages"]
    for index, message in enumerate(messages):
        ids = [c["id"] for c in message.get("tool_calls") or []]
        following = messages[index + 1 : index + 1 + len(ids)]
        assert [m.get("tool_call_id") for m in following] == ids


def check_every_request(bodies: Sequence[Mapping[str, Any]]) -> None:
    """What is never cut is in every request of the agent, from when it came in."""
    mine = [b for b in bodies if route(b) == "long"]
    assert mine
    for number, body in enumerate(mine):
        assert server_tokens(body) + int(body["max_tokens"]) <= WINDOW, number
        check_wire_pairing(body)
        text = text_of(body)
        assert PINNED_LINE in text  # the pinned file, in the task
        if number >= 1:  # after load_skill
            assert text.count(SKILL_LINE) == 1, number
        if number >= 2:  # after the note
            assert DECISION in text and DEAD_END in text, number
        if number >= 3:  # after the write
            assert f"Files this run changed: {CHANGED}" in text or CHANGED in text, number


class LargestFirst(Extension):
    """A compactor of one's own: the largest results first, with a summary of its own."""

    def __init__(self) -> None:
        self.requests: list[CompactionRequest] = []

    async def compact(
        self, context: ToolContext, request: CompactionRequest
    ) -> CompactionPlan | None:
        self.requests.append(request)
        cut, freed = [], 0
        for index in sorted(request.candidates, key=lambda i: -request.tokens[i]):
            if freed >= request.excess:
                break
            cut.append(index)
            freed += request.tokens[index]
        return CompactionPlan(cut, summary=f"custom summary {len(self.requests)}")


async def run_job_on(folder: Path, server: ProviderServer, compaction: str) -> Any:
    job = load_job(write_job(folder, server.openai_url, compaction))
    return await Orchestrator.from_job(job).run_job(trace=folder / "t.jsonl")


@pytest.mark.parametrize("strategy", ["mask", "summarize", "custom"])
async def test_a_long_job_keeps_what_matters_through_many_cuts(
    tmp_path: Path, strategy: str
) -> None:
    write_workspace(tmp_path)
    script = {"long": turns(), "summary": [{"content": SUMMARY}] * 80}
    usage = lambda body: (server_tokens(body), 20)  # noqa: E731
    with ProviderServer(script, refuse=refuse, usage=usage, route=route) as server:
        if strategy == "custom":
            compactor = LargestFirst()
            model = resolve_model(
                "openai-compatible:small",
                base_url=server.openai_url,
                context_window=WINDOW,
                max_retries=0,
            )
            agent = Agent(
                model,
                name="long",
                skills=[],
                extensions=[compactor],
                note=True,
                max_steps=NOTES + 10,
                max_output_tokens=512,
                permissions={"workspace": str(tmp_path / "work")},
                trace=tmp_path / "t.jsonl",
            )
            task = f"Read every note.\n\nPinned:\n{(tmp_path / 'rules.md').read_text()}"
            result = await agent.run(task)
            status, error = result.status, result.error
        else:
            done = await run_job_on(tmp_path, server, strategy)
            status, error = done.status, done.steps[0].reason if done.steps else None
        bodies = server.bodies()

    assert status == "completed", error
    assert (tmp_path / "work" / CHANGED).exists()
    check_every_request(bodies)
    events = trace_lines(tmp_path / "t.jsonl")
    cuts = [e for e in events if e["type"] == "compact" and e["agent"] == "long"]
    assert len(cuts) >= 10
    name = {"custom": "LargestFirst"}.get(strategy, strategy)
    assert {e["strategy"] for e in cuts} == {name}
    conversation = rebuild_conversations(tmp_path / "t.jsonl")["long"]
    check_pairing(conversation)
    # Nothing pinned was ever cut: the skill's instructions and the task stay whole.
    loaded = next(m for m in conversation if m.name == "load_skill")
    assert loaded.pinned and SKILL_LINE in (loaded.content or "")
    cut_tools = {r["tool"] for e in cuts for r in e["replaced"]}
    assert "load_skill" not in cut_tools
    # The note is in the trace, as its own event, and the file the run changed in one more.
    noted = [e for e in events if e["type"] == "note"]
    assert [(e.get("text"), e.get("changed")) for e in noted] == [
        (f"{DECISION}\n{DEAD_END}", None),
        (None, CHANGED),
    ]
    # `trace show` and the report show it, with the file the run changed.
    shown = render(summarize(read_trace(tmp_path / "t.jsonl")))
    assert f"compacted {len(cuts)} times" in shown
    assert "note: " in shown and "Decision: the report is CSV" in shown and CHANGED in shown
    assert "note: Decision: the report is CSV" in render_report(read_trace(tmp_path / "t.jsonl"))
    carried = [m for m in conversation if "[kept across compactions]" in (m.content or "")]
    assert len(carried) == 1  # one carried block at a time
    if strategy == "summarize":
        writers = [b for b in bodies if route(b) == "summary"]
        assert len(writers) == len(cuts)
        assert all(e["summary_agent"].startswith("long/summary-") for e in cuts)
        assert all(e["summary_tokens"] > 0 and "summary_error" not in e for e in cuts)
        assert SUMMARY in (carried[0].content or "")
    if strategy == "custom":
        assert f"custom summary {len(cuts)}" in (carried[0].content or "")
    figures = {
        "strategy": strategy,
        "requests": len(bodies),
        "cuts": len(cuts),
        "input_tokens": sum(server_tokens(b) for b in bodies),
        "fullest": max(server_tokens(b) + int(b["max_tokens"]) for b in bodies),
    }
    figures["after"] = [e["tokens_after"] for e in cuts[:3] + cuts[-3:]]
    print(f"\nFIGURES {figures}")


async def test_a_summary_longer_than_a_summary_may_be_is_cut_and_said(tmp_path: Path) -> None:
    """A summarizer that ignores its output cap (each summary longer than the last) must not
    make the summary grow from cut to cut: the carried summary is cut to `SUMMARY_TOKENS`."""
    write_workspace(tmp_path)
    long_summaries = [
        {"content": f"Decisions: CSV. {prose(SUMMARY_TOKENS + 200 * n)}"} for n in range(1, 81)
    ]
    script = {"long": turns(30), "summary": long_summaries}
    usage = lambda body: (server_tokens(body), 20)  # noqa: E731
    with ProviderServer(script, refuse=refuse, usage=usage, route=route) as server:
        done = await run_job_on(tmp_path, server, "summarize")
        bodies = server.bodies()

    assert done.status == "completed", done.steps[0].reason
    check_every_request(bodies)
    cuts = [e for e in trace_lines(tmp_path / "t.jsonl") if e["type"] == "compact"]
    assert cuts and all(e["summary_cut_to"] == SUMMARY_TOKENS for e in cuts)
    heading = "Summary of the results compacted so far:"
    carried = [
        (m.get("content") or "").split(heading, 1)[1]
        for b in bodies
        if route(b) == "long"
        for m in b["messages"]
        if heading in (m.get("content") or "")
    ]
    assert carried and all(COUNTER.count_text(c) <= SUMMARY_TOKENS + 10 for c in carried)


async def test_a_summary_with_no_room_left_is_dropped_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    """A window mostly taken by what is never cut: with the summary carried, no answer would
    fit, so the summary is dropped (said in the `compact` event) and the run ends as `mask`
    would, never `context_full` for the summary's sake."""
    write_workspace(tmp_path)
    rules = f"House rules.\n{PINNED_LINE}\n{prose(PINNED_WORDS)}\n"
    (tmp_path / "rules.md").write_text(rules)
    summary = f"Decisions: CSV. {prose(SUMMARY_TOKENS - 40)}"
    script = {"long": turns(12), "summary": [{"content": summary}] * 40}
    usage = lambda body: (server_tokens(body), 20)  # noqa: E731
    with ProviderServer(script, refuse=refuse, usage=usage, route=route) as server:
        done = await run_job_on(tmp_path, server, "summarize")
        bodies = server.bodies()

    assert done.status == "completed", done.steps[0].reason
    check_every_request(bodies)
    cuts = [e for e in trace_lines(tmp_path / "t.jsonl") if e["type"] == "compact"]
    dropped = [e for e in cuts if "summary_dropped" in e]
    assert dropped and all(e["summary_agent"].startswith("long/summary-") for e in dropped)


async def test_a_compacted_job_resumes_with_its_record(tmp_path: Path) -> None:
    write_workspace(tmp_path)
    script = {"long": turns(40), "summary": []}
    usage = lambda body: (server_tokens(body), 20)  # noqa: E731
    with ProviderServer(script, refuse=refuse, usage=usage, route=route) as server:
        whole = await run_job_on(tmp_path, server, "mask")
        assert whole.status == "completed"
        path = tmp_path / "t.jsonl"
        events = trace_lines(path)
        cuts = [e for e in events if e["type"] == "compact"]
        assert len(cuts) >= 4
        # Killed while the call after the fourth compaction ran.
        starts = [i for i, e in enumerate(events) if e["type"] == "tool_start"]
        at = next(i for i in starts if events[i]["seq"] > cuts[3]["seq"])
        cut_path = cut(path, at + 1, tmp_path / "cut.jsonl")
        model = ScriptedModel(script)
        fast_forward(model, load_checkpoint(cut_path))
        server.model = model
        sent = len(server.bodies())
        resumed = await Orchestrator.resume(cut_path)
        after = server.bodies()[sent:]

    assert resumed.status == "completed", resumed.steps[0].reason
    assert after
    # The record came back from the trace: it is in every request after the resume.
    check_every_request(after)
    conversation = rebuild_conversations(cut_path)["long"]
    check_pairing(conversation)
    assert len([e for e in trace_lines(cut_path) if e["type"] == "compact"]) > 4


async def test_pinned_content_larger_than_the_window_ends_the_run_saying_so(
    tmp_path: Path,
) -> None:
    write_workspace(tmp_path)
    (tmp_path / "rules.md").write_text(PINNED_LINE + " " + PROSE * 200)
    with ProviderServer({"long": turns(2)}, refuse=refuse, route=route) as server:
        done = await run_job_on(tmp_path, server, "mask")
        sent = server.bodies()

    assert sent == []  # no request the server would refuse
    (step,) = done.steps
    assert step.status == "context_full"
    assert "what is never cut" in (step.reason or "")
    assert "task and user messages" in (step.reason or ""), step.reason


def note_reader(folder: Path) -> Any:
    @tool
    def read_note(name: str) -> str:
        """Read one note.

        Args:
            name: the note's file name
        """
        return (folder / name).read_text()

    return read_note


async def test_a_read_back_part_is_never_cut_before_the_model_reads_it(tmp_path: Path) -> None:
    # A result five times the size of what a compaction leaves (half the threshold) comes
    # back in parts that each fit beside the rest: none is cut before the model reads it.
    folder = tmp_path / "notes"
    folder.mkdir()
    words = PROSE.split(" ")
    long = " ".join(words[j % len(words)] for j in range(5000))
    (folder / "long.txt").write_text(long)
    calls = [
        {"tool_calls": [{"name": "read_note", "arguments": {"name": "long.txt"}}]},
        *(
            {"tool_calls": [{"name": "read_compacted", "arguments": {"message": 2, "part": p}}]}
            for p in range(1, 13)
        ),
        {"content": "read"},
    ]
    model = ScriptedModel({"*": calls}, context_window=2048)
    agent = Agent(model, [note_reader(folder)], max_output_tokens=256, max_steps=20)
    result = await agent.run("Read the long note.")

    assert result.status == "completed", result.error
    seen = []
    for request in model.requests[2:]:
        answer = request.messages[-1]
        assert answer.name == "read_compacted"
        if answer.is_error:  # asked past the last part
            assert "part(s)" in (answer.content or "")
            continue
        assert not (answer.content or "").startswith("[compacted]"), "cut before it was read"
        seen.append((answer.content or "").split("\n[part ")[0])
    assert len(seen) > 1 and "".join(seen) == long


async def test_a_window_too_small_for_one_part_says_so(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    for name in ("a.txt", "b.txt"):
        (folder / name).write_text(prose(300))
    calls = [
        {"tool_calls": [{"name": "read_note", "arguments": {"name": "a.txt"}}]},
        {"tool_calls": [{"name": "read_note", "arguments": {"name": "b.txt"}}]},
        {"tool_calls": [{"name": "read_compacted", "arguments": {"message": 2}}]},
        {"content": "done"},
    ]
    model = ScriptedModel({"*": calls}, context_window=1000)
    agent = Agent(model, [note_reader(folder)], max_output_tokens=256, compact_at=0.1)
    result = await agent.run("Read.")

    answer = result.messages[-2]
    assert answer.name == "read_compacted" and answer.is_error, answer.content
    assert "cannot be read back here" in (answer.content or "")
    assert "larger window" in (answer.content or "")


async def test_a_compactor_may_not_cut_what_is_pinned(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    for i in range(6):
        (folder / f"{i}.txt").write_text(prose(400))

    @tool(pin=True)
    def rules() -> str:
        """The rules."""
        return PINNED_LINE + " " + prose(200)

    class Greedy(Extension):
        async def compact(
            self, context: ToolContext, request: CompactionRequest
        ) -> CompactionPlan | None:
            pinned = [i for i, m in enumerate(request.messages) if m.pinned]
            return CompactionPlan([*request.candidates, *pinned])

    calls = [
        {"tool_calls": [{"name": "rules", "arguments": {}}]},
        *(
            {"tool_calls": [{"name": "read_note", "arguments": {"name": f"{i}.txt"}}]}
            for i in range(6)
        ),
        {"content": "done"},
    ]
    model = ScriptedModel({"*": calls}, context_window=2048)
    agent = Agent(model, [rules, note_reader(folder)], extensions=[Greedy()], max_output_tokens=256)
    result = await agent.run("Read.")

    assert result.status == "error"
    assert "may cut only the request's candidates" in (result.error or "")


def test_bad_settings_are_refused_naming_the_field(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="compaction must be one of mask, summarize"):
        Agent(ScriptedModel({"*": []}), compaction="squash")  # type: ignore[arg-type]
    # A job copied with a bad value (model_copy does not validate) is refused when it is run.
    write_workspace(tmp_path)
    job = load_job(write_job(tmp_path, "http://127.0.0.1:9/v1", "mask"))
    with pytest.raises(ValueError, match="compaction must be one of mask, summarize"):
        Orchestrator.from_job(job.model_copy(update={"compaction": "squash"}))
    with pytest.raises(ValueError, match="note_chars must be at least 1"):
        Agent(ScriptedModel({"*": []}), note=True, note_chars=0)
    with pytest.raises(Exception, match="changes='file' names no argument"):

        @tool(changes="file")
        def write(path: str) -> str:
            """Write."""
            return path


def test_a_definition_chooses_its_strategy_and_a_step_overrides_it(tmp_path: Path) -> None:
    write_workspace(tmp_path)
    (tmp_path / "subagents").mkdir()
    (tmp_path / "subagents" / "reader.md").write_text(
        "---\nname: reader\ndescription: Reads notes.\ncompaction: summarize\nnote: true\n---\n"
        "You read notes.\n"
    )
    reads = [
        {"tool_calls": [{"name": "files__read_file", "arguments": {"path": f"notes/note{i}.txt"}}]}
        for i in range(12)
    ]
    load = {"tool_calls": [{"name": "load_skill", "arguments": {"name": "files"}}]}
    script = {
        "a": [load, *reads, {"content": "a done"}],
        "b": [load, *reads, {"content": "b done"}],
        "*": [{"content": SUMMARY}] * 20,
    }
    (tmp_path / "s.yaml").write_text(json.dumps(script))
    (tmp_path / "job.yaml").write_text(
        """\
name: choose
model: {name: "scripted:s.yaml", context_window: 4096}
budget: {max_steps: 20}
steps:
  - {id: a, agent: reader, task: Read the notes.}
  - {id: b, agent: reader, compaction: mask, note: false, task: Read the notes.}
"""
    )
    done = run_job_sync(load_job(tmp_path / "job.yaml"), trace=tmp_path / "t.jsonl")

    assert done.status == "completed", [s.reason for s in done.steps]
    events = trace_lines(tmp_path / "t.jsonl")
    strategies = {e["agent"]: e["strategy"] for e in events if e["type"] == "compact"}
    assert strategies == {"a": "summarize", "b": "mask"}
    tools = {e["agent"]: e["tools"] for e in events if e["type"] == "run_start"}
    assert "note" in tools["a"] and "note" not in tools["b"]


async def _write_files(folder: Path, count: int) -> tuple[Any, ScriptedModel, Path]:
    """An agent that keeps a note writes `count` files, one call each."""
    work = folder / "work"
    work.mkdir(parents=True)
    writes = [
        {
            "name": "files__write_file",
            "arguments": {"path": f"out/part{i // 50}/item-{i:04d}.txt", "content": f"{i}\n"},
        }
        for i in range(count)
    ]
    calls = [
        {"name": "load_skill", "arguments": {"name": "files"}},
        {"name": "note", "arguments": {"text": DECISION}},
        *writes,
        {"name": "note", "arguments": {"text": f"{DECISION}\nAll items written."}},
    ]
    script = [*({"tool_calls": [c]} for c in calls), {"content": "done"}]
    model = ScriptedModel({"*": script}, context_window=200_000)
    trace = folder / "t.jsonl"
    agent = Agent(
        model, name="writer", skills=[], note=True, max_steps=count + 10,
        permissions={"workspace": str(work)}, trace=trace,
    )  # fmt: skip
    return await agent.run("Write every item."), model, trace


async def test_the_working_record_of_many_changed_files_stays_small(tmp_path: Path) -> None:
    """Each change is recorded once, the list keeps the newest files and counts the rest, and
    the trace grows with the number of writes, not with its square."""
    sizes = {}
    for count in (200, 400):
        result, model, trace = await _write_files(tmp_path / str(count), count)
        assert result.status == "completed", result.error
        notes = [e for e in trace_lines(trace) if e["type"] == "note"]
        sizes[count] = sum(len(json.dumps(e)) for e in notes)
    assert sizes[400] < 2.2 * sizes[200]
    assert [e.get("changed") for e in notes[1:-1]] == [
        f"out/part{i // 50}/item-{i:04d}.txt" for i in range(400)
    ]
    # The record the model reads: the newest 50 files by name, the 350 before them counted.
    last = model.requests[-1].messages[-1].content or ""
    assert "item-0399.txt" in last and "item-0350.txt" in last and "item-0349.txt" not in last
    assert "(and 350 changed earlier, not listed)" in last
    assert notes[-1]["files_changed"] == 400 and len(notes[-1]["files"]) == 50
    shown = render(summarize(read_trace(trace)))
    assert "item-0399.txt" in shown and "and 350 earlier" in shown
