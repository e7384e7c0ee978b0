"""The JSONL trace: ordering, flushing, listeners, redaction, rebuilding."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest
from trace_lines import trace_lines

from orchestrator import Agent, Message, Trace, read_trace, rebuild_conversations
from orchestrator.events import (
    EVENT_SCHEMA_VERSION,
    ContextWindow,
    MessageEvent,
    Note,
    PartEvent,
    SkillLoaded,
    TaskEnd,
    TokenCounts,
    ToolStart,
    TraceEvent,
)
from orchestrator.models import ScriptedModel
from orchestrator.security import secrets_from_environment
from orchestrator.trace import TraceExists, iter_trace
from orchestrator.trace.summary import summarize


def test_events_are_flushed_as_they_happen(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    trace = Trace(path, secrets=[])
    trace.emit(Note, agent="planner", text="kept")
    # Read before close: a crashed run still leaves every event written so far.
    (event,) = [json.loads(line) for line in path.read_text().splitlines()]
    assert event["type"] == "note" and event["agent"] == "planner" and event["seq"] == 1
    trace.close()


def test_listeners_see_every_event_and_no_file_is_needed() -> None:
    seen: list[TraceEvent] = []
    trace = Trace(listeners=[seen.append], secrets=[])
    trace.message("a", Message.user("hello"))
    assert isinstance(seen[0], MessageEvent) and seen[0].message == Message.user("hello")


def test_listeners_hear_the_very_event_recorded_and_the_writer_sets_its_envelope() -> None:
    seen: list[TraceEvent] = []
    trace = Trace(listeners=[seen.append], secrets=[])
    recorded = trace.emit(ToolStart, agent="a", call_id="c1", name="read")
    assert recorded is not None and seen == [recorded] and seen[0] is recorded
    assert (recorded.seq, recorded.run, recorded.attempt) == (1, trace.run_id, 1)
    assert recorded.ts > 0 and recorded.schema_version == EVENT_SCHEMA_VERSION  # its first


def test_an_event_that_does_not_validate_is_written_skipped_counted_and_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[TraceEvent] = []
    path = tmp_path / "t.jsonl"
    with Trace(path, listeners=[seen.append], secrets=[]) as trace:
        trace.emit(TaskEnd, agent="planner", id="a", status=5)  # type: ignore[arg-type]  # a slip
        trace.record_unread("custom", {"agent": "planner"}, "an event of an unknown kind")
        trace.emit(SkillLoaded, agent="planner", skill="notes")
    assert [event.type for event in seen] == ["skill_loaded"]
    assert trace.skipped == 2
    assert trace.problems == [
        "event 1: a task_end event whose 'status' is int, not text",
        "event 2: an event of an unknown kind",
    ]
    assert capsys.readouterr().err.count("orchestrator:") == 1  # said once, counted every time
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(e["seq"], e["type"]) for e in lines] == [
        (1, "task_end"),
        (2, "custom"),
        (3, "skill_loaded"),
    ]
    assert lines[0]["status"] == 5  # the file still has every line, as it was given


def test_a_part_s_event_no_one_declared_here_is_carried_through_with_its_fields(
    tmp_path: Path,
) -> None:
    class Pinged(PartEvent):  # an optional part's kind, not declared to this process
        type: Literal["pinged"] = "pinged"
        part: Literal["sonar"] = "sonar"
        depth_m: int

    path = tmp_path / "t.jsonl"
    with Trace(path, secrets=[]) as trace:
        trace.emit(Pinged, agent="a", depth_m=40, activity="pinging")
    (event,) = read_trace(path)
    assert isinstance(event, PartEvent) and not isinstance(event, Pinged)
    assert (event.type, event.part, event.activity) == ("pinged", "sonar", "pinging")
    assert event.model_extra == {"depth_m": 40}


def test_secrets_are_masked(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with Trace(path, secrets=["hunter2-secret-value"]) as trace:
        trace.emit(Note, agent="a", text="the password is hunter2-secret-value")
    assert "hunter2-secret-value" not in path.read_text()
    assert "[REDACTED]" in path.read_text()


def test_secret_names_are_recognised() -> None:
    env = {
        "OPENAI_API_KEY": "sk-abcdefghij",
        "GH_TOKEN": "ghp_1234567890",
        "HOME": "/root/secret-dir",
        "SHORT_KEY": "abc",
    }
    assert set(secrets_from_environment(env)) == {"sk-abcdefghij", "ghp_1234567890"}


def test_torn_last_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with Trace(path, secrets=[]) as trace:
        trace.emit(ContextWindow, agent="x", source="server")
    with path.open("a") as handle:
        handle.write('{"seq": 2, "ty')
    assert [e["seq"] for e in trace_lines(path)] == [1]


def test_repeated_runs_of_one_agent_are_kept_apart(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    model = ScriptedModel({"*": [{"content": "first"}, {"content": "second"}]})
    with Trace(path) as trace:  # one Trace shared on purpose: both runs are one run id
        agent = Agent(model, trace=trace)
        agent.run_sync("one")
        agent.run_sync("two")
    conversations = rebuild_conversations(path)
    assert [m.content for m in conversations["agent"]] == ["one", "first"]
    assert [m.content for m in conversations["agent#2"]] == ["two", "second"]


def test_secrets_with_json_escapes_are_masked(tmp_path: Path) -> None:
    secret = 'pa"ss\\word-123'
    path = tmp_path / "t.jsonl"
    with Trace(path, secrets=[secret]) as trace:
        trace.emit(Note, agent="a", text=f"the password is {secret}")
    text = path.read_text()
    assert "ss\\\\word" not in text and "[REDACTED]" in text
    assert json.loads(text)["text"] == "the password is [REDACTED]"


def test_only_whole_secret_words_make_a_name_secret() -> None:
    from orchestrator.security import is_secret_name

    secret = ["OPENAI_API_KEY", "GH_TOKEN", "AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "API_KEY"]
    plain = ["GIT_AUTHOR_NAME", "KEYBOARD_LAYOUT", "SSH_AUTH_SOCK", "HOME", "MONKEY"]
    assert [n for n in secret if is_secret_name(n)] == secret
    assert [n for n in plain if is_secret_name(n)] == []


def test_a_trace_that_holds_a_run_is_refused_and_a_run_id_is_in_every_event(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.jsonl"
    Agent(ScriptedModel({"*": [{"content": "one"}]}), trace=path).run_sync("go")
    events = trace_lines(path)
    assert len({e["run"] for e in events}) == 1 and {e["attempt"] for e in events} == {1}

    with pytest.raises(TraceExists, match="orchestrator resume"):
        Trace(path)
    # An agent made with a trace path never writes into a run it finds there: its run goes
    # to the next free name beside it, and the result says which.
    again = Agent(ScriptedModel({"*": [{"content": "two"}]}), trace=path).run_sync("again")
    assert again.trace == str(tmp_path / "t-2.jsonl")
    assert trace_lines(path) == events
    Trace(tmp_path / "empty.jsonl").close()  # a new (or empty) file is fine
    Trace(tmp_path / "empty.jsonl").close()


def torn(tmp_path: Path) -> Path:
    """A real trace, then what a crash and a stray writer leave: JSON that is not an event,
    garbage, and a last line cut inside a UTF-8 character."""
    path = tmp_path / "t.jsonl"
    Agent(ScriptedModel({"*": [{"content": "café"}]}), trace=path).run_sync("go")
    with path.open("ab") as handle:
        handle.write(b'{"hello": "not an event"}\n[1, 2, 3]\n\xff\xfe garbage \x00\n')
        cut = '{"seq": 9, "ts": 1, "agent": "agent", "type": "note", "text": "café"}'.encode()
        handle.write(cut[: cut.index("é".encode()) + 1])  # the first of é's two bytes
    return path


def test_torn_and_foreign_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    path = torn(tmp_path)

    events = read_trace(path)

    assert events.skipped == 4
    assert [e.type for e in events][-1] == "run_end"
    assert rebuild_conversations(path)["agent"][-1].content == "café"
    assert list(iter_trace(path)) == events


def test_a_summary_says_what_its_reader_skipped_once_it_has_read(tmp_path: Path) -> None:
    path = torn(tmp_path)
    lazy = iter_trace(path)  # counts as it goes: read after the events are folded
    summary = summarize(lazy, skips=lazy)
    assert summary.skipped_lines == 4 and len(summary.skipped) == 4
    assert summary.agents["agent"].status == "completed"
    assert summarize(list(read_trace(path))).skipped_lines == 0  # no reader, nothing said


def test_a_remote_agent_s_tokens_count_where_its_part_is_not_loaded(tmp_path: Path) -> None:
    from orchestrator.a2a.events import A2AEnd, A2AStatus

    path = tmp_path / "t.jsonl"
    usage = TokenCounts(input_tokens=30, output_tokens=12, total_tokens=42)
    with Trace(path, secrets=[]) as trace:
        trace.emit(A2AStatus, agent="goal/brief", state="working", activity="remote task working")
        trace.emit(A2AEnd, agent="goal/brief", status="completed", usage_reported=True, usage=usage)
    # A process that never loads A2A: the core reads its events as what any part's may say.
    script = (
        "import sys\n"
        "from orchestrator import read_trace\n"
        "from orchestrator.events import EVENT_KINDS, PartEvent\n"
        "from orchestrator.trace.summary import summarize\n"
        f"events = read_trace({str(path)!r})\n"
        "assert 'orchestrator.a2a' not in sys.modules and 'a2a_end' not in EVENT_KINDS\n"
        "assert [type(e).__name__ for e in events] == ['PartEvent', 'PartEvent']\n"
        "print(summarize(events).agents['goal/brief'].tokens, events.skipped)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["42", "0"]
