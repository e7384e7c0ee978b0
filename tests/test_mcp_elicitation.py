"""An MCP server that asks while handling a call (elicitation): the run waits for a person,
and the answer given on resume, from another process, reaches the server. Real servers
written with the official SDK (tests/asking_mcp_server.py, in both protocol eras; the hostile
one), real `orchestrator` processes; only the model's decisions are scripted."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_process import orchestrator
from mcp_helpers import mcp_skill
from trace_lines import trace_lines

from orchestrator import Orchestrator
from orchestrator.events import Answer
from orchestrator.trace import load_checkpoint

pytest.importorskip("mcp")

pytestmark = pytest.mark.slow  # real MCP servers

ASKING_SERVER = str(Path(__file__).with_name("asking_mcp_server.py"))
HOSTILE_SERVER = str(Path(__file__).with_name("hostile_mcp_server.py"))
EXIT_WAITING = 5
NAME = '{"name": "Ada"}'


def asking_job(
    folder: Path, tool: str, *, era: str = "modern", server: dict[str, Any] | None = None
) -> Path:
    """A job whose skill `asking` has the asking server (or `server`); its goal calls `tool`."""
    args = [ASKING_SERVER, "stdio", *(["legacy"] if era == "legacy" else [])]
    declared = {"command": sys.executable, "args": args, **(server or {})}
    mcp_skill(folder / "skills", "asking", {"asking": declared}, description="Greets people.")
    spec = {"name": "greets", "model": "scripted:script.json", "skills": ["skills"]}
    (folder / "job.yaml").write_text(yaml.safe_dump({**spec, "goal": "Greet the user."}))
    script = {
        "goal": [
            {"tool_calls": [{"name": "load_skill", "arguments": {"name": "asking"}}]},
            {"tool_calls": [{"name": f"asking__{tool}", "arguments": {}}]},
            {"content": "done"},
        ]
    }
    (folder / "script.json").write_text(json.dumps(script))
    return folder


def run(folder: Path, *args: str) -> Any:
    return orchestrator("run", "job.yaml", "--trace", "run.jsonl", *args, cwd=folder, stdin="")


def resume(folder: Path, *answers: str) -> Any:
    given = [part for answer in answers for part in ("--answer", answer)]
    return orchestrator("resume", "run.jsonl", *given, cwd=folder, stdin="")


def waiting(folder: Path) -> list[str]:
    return [r.id for r in load_checkpoint(folder / "run.jsonl").open_requests()]


def results(folder: Path, tool: str) -> list[tuple[int, str]]:
    """Each recorded result of `tool`, with the attempt that got it."""
    return [
        (e["attempt"], e["message"]["content"])
        for e in trace_lines(folder / "run.jsonl")
        if e["type"] == "message" and e["message"].get("name") == tool
    ]


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_a_servers_question_waits_and_the_answer_from_a_new_process_reaches_it(
    tmp_path: Path, era: str
) -> None:
    folder = asking_job(tmp_path, "greet", era=era)
    shown = orchestrator("skills", "show", "asking", "--connect", "--skills", "skills", cwd=folder)
    protocol = "2025-11-25" if era == "legacy" else "2026-07-28"
    assert f"connected, protocol {protocol}" in shown.stdout, shown.stdout + shown.stderr

    first = run(folder)
    assert first.returncode == EXIT_WAITING, first.stderr
    [asked] = waiting(folder)
    assert (
        f"{asked}  MCP server 'asking' asks (elicitation; answer JSON (a form)): "
        '"What is your name?"' in first.stderr
    )
    [request] = load_checkpoint(folder / "run.jsonl").open_requests()
    assert request.kind == "elicitation" and request.form == "schema"
    assert request.input_schema is not None and "name" in request.input_schema["properties"]
    assert request.expires_at is not None  # the server's answerWithin (600 s) from then

    second = resume(folder, f"{asked}={NAME}")
    assert second.returncode == 0, second.stderr
    assert results(folder, "asking__greet") == [
        (1, f"Waiting for a person's answer ({asked}): the run goes on once it is given."),
        (2, "hello Ada"),
    ]
    ended = [e for e in trace_lines(folder / "run.jsonl") if e["type"] == "job_end"]
    assert ended[-1]["status"] == "completed"


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_each_question_of_a_call_waits_in_turn_and_earlier_answers_are_given_again(
    tmp_path: Path, era: str
) -> None:
    """The second question depends on the first answer: each resume makes the call again,
    the server asks again from the start, and gets every answer given so far."""
    folder = asking_job(tmp_path, "visit", era=era)
    assert run(folder).returncode == EXIT_WAITING
    [name] = waiting(folder)
    again = resume(folder, f"{name}={NAME}")
    assert again.returncode == EXIT_WAITING, again.stderr
    [city] = waiting(folder)
    assert city != name and '"Where to, Ada?"' in again.stderr
    done = resume(folder, f"{city}=" + '{"city": "Oslo"}')
    assert done.returncode == 0, done.stderr
    assert results(folder, "asking__visit")[-1] == (3, "Ada goes to Oslo")


def test_questions_a_server_asks_at_once_wait_together_and_are_answered_together(
    tmp_path: Path,
) -> None:
    folder = asking_job(tmp_path, "introduce")
    first = run(folder)
    assert first.returncode == EXIT_WAITING, first.stderr
    name, home = waiting(folder)
    assert '"What is your name?"' in first.stderr
    assert '"Which city do you live in?"' in first.stderr
    done = resume(folder, f"{name}={NAME}", f"{home}=" + '{"city": "Oslo"}')
    assert done.returncode == 0, done.stderr
    assert results(folder, "asking__introduce")[-1] == (2, "Ada from Oslo")


def test_a_declined_answer_reaches_the_server_as_declined(tmp_path: Path) -> None:
    folder = asking_job(tmp_path, "greet")
    assert run(folder).returncode == EXIT_WAITING
    [asked] = waiting(folder)
    result = Orchestrator.resume_sync(
        folder / "run.jsonl", answers={asked: Answer(id=asked, action="decline")}
    )
    assert result.status == "completed", result.error
    assert results(folder, "asking__greet")[-1] == (2, "hello (declined)")
    shown = orchestrator("trace", "show", "run.jsonl", cwd=folder)
    assert f'{asked}  goal (elicitation) "What is your name?": declined' in shown.stdout


def test_an_answer_that_does_not_fit_the_servers_form_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    folder = asking_job(tmp_path, "greet")
    assert run(folder).returncode == EXIT_WAITING
    [asked] = waiting(folder)
    before = (folder / "run.jsonl").read_bytes()
    for wrong, why in [('{"nom": "Ada"}', "'name' is a required property"), ("Ada", "JSON")]:
        done = resume(folder, f"{asked}={wrong}")
        assert done.returncode == 2, done.stderr
        assert why in done.stderr and asked in done.stderr
    assert (folder / "run.jsonl").read_bytes() == before  # nothing ran, nothing appended


def test_an_answer_given_after_the_question_expired_is_reported_late_and_not_sent(
    tmp_path: Path,
) -> None:
    folder = asking_job(tmp_path, "greet", server={"answerWithin": 0.001})
    assert run(folder).returncode == EXIT_WAITING
    [asked] = waiting(folder)
    done = resume(folder, f"{asked}={NAME}")
    assert done.returncode == 0, done.stderr
    assert f"warning: the answer to {asked} comes too late" in done.stderr
    assert "MCP server 'asking' expired at" in done.stderr
    [(attempt, text)] = results(folder, "asking__greet")[1:]
    assert attempt == 2 and "came after the question had expired, so it was not sent" in text
    assert text.endswith("hello (cancelled)")  # the server heard `cancel`, never Ada
    answered = [e for e in trace_lines(folder / "run.jsonl") if e["type"] == "input_answer"]
    assert [(a["answer"]["value"], a.get("late")) for a in answered] == [({"name": "Ada"}, True)]
    shown = orchestrator("trace", "show", "run.jsonl", cwd=folder)
    assert 'answered {"name": "Ada"} too late (the request had expired' in shown.stdout


def test_on_input_deny_declines_the_question_and_the_agent_reads_why(tmp_path: Path) -> None:
    folder = asking_job(tmp_path, "greet")
    done = run(folder, "--on-input", "deny")
    assert done.returncode == 0, done.stderr
    [(_, text)] = results(folder, "asking__greet")
    assert "declined by the run's policy (on_input: deny)" in text
    assert text.endswith("hello (declined)")
    kinds = [e["type"] for e in trace_lines(folder / "run.jsonl")]
    assert "input_request" in kinds and "input_answer" in kinds


def test_on_input_fail_ends_the_run_naming_the_servers_question(tmp_path: Path) -> None:
    folder = asking_job(tmp_path, "greet")
    done = run(folder, "--on-input", "fail", "--json")
    assert done.returncode != 0
    assert json.loads(done.stdout)["status"] == "failed"
    assert "MCP server 'asking' asks a person" in done.stdout
    assert "What is your name?" in done.stdout


# --- A hostile server's questions ----------------------------------------------------------


def hostile_job(folder: Path, *tools: str) -> Path:
    mcp_skill(
        folder / "skills", "evil", {"evil": {"command": sys.executable, "args": [HOSTILE_SERVER]}}
    )
    spec = {"name": "evil", "model": "scripted:script.json", "skills": ["skills"], "goal": "Go."}
    (folder / "job.yaml").write_text(yaml.safe_dump(spec))
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "load_skill", "arguments": {"name": "evil"}}]}
    ]
    turns += [{"tool_calls": [{"name": f"evil__{tool}", "arguments": {}}]} for tool in tools]
    (folder / "script.json").write_text(json.dumps({"goal": [*turns, {"content": "done"}]}))
    return folder


def test_a_form_too_deep_or_too_large_is_declined_without_asking_anyone(tmp_path: Path) -> None:
    folder = hostile_job(tmp_path, "deep_form", "wide_form")
    done = run(folder)
    assert done.returncode == 0, done.stderr  # nothing waits, nothing hangs
    [(_, deep)] = results(folder, "evil__deep_form")
    assert "with a form that cannot be used (its requestedSchema is nested more than" in deep
    assert deep.endswith("answered: decline")
    [(_, wide)] = results(folder, "evil__wide_form")
    assert "characters of JSON; at most 64,000 are read" in wide
    assert wide.endswith("answered: decline")
    assert not [e for e in trace_lines(folder / "run.jsonl") if e["type"] == "input_request"]


def test_a_question_written_to_fool_the_person_is_shown_escaped_on_one_line(
    tmp_path: Path,
) -> None:
    folder = hostile_job(tmp_path, "loud_form")
    done = run(folder)
    assert done.returncode == EXIT_WAITING, done.stderr
    [line] = [x for x in done.stderr.splitlines() if x.startswith("waiting:")]
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr
    assert '"Name?\\u001b[2J\\u0007\\nanswer: orchestrator resume run.jsonl --answer yes"' in line
    shown = orchestrator("trace", "show", "run.jsonl", cwd=folder)
    assert "\x1b" not in shown.stdout and "Name?\\u001b[2J" in shown.stdout
