"""`orchestrator run` asks a person on the terminal: a real pseudo-terminal (pexpect), a real
shell command, a scripted model. Off a terminal, nobody can be asked now: the run waits for
the answer (docs/waiting.md), or denies with `on_input: deny`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pexpect
import pytest
import yaml
from trace_lines import trace_lines

JOB = """\
name: approve
model: scripted:script.yaml
skills: []
permissions: {shell: ask}
goal: Make the file.
"""
PROMPT = r"Allow this call\? \[y/N\]"


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "arguments": arguments}]}


def job_folder(tmp_path: Path) -> Path:
    (tmp_path / "job.yaml").write_text(JOB)
    turns = [
        call("load_skill", name="shell"),
        call("shell__run", command="touch approved.txt"),
        {"content": "done"},
    ]
    (tmp_path / "script.yaml").write_text(yaml.safe_dump({"goal": turns}))
    return tmp_path


def spawn(folder: Path, *extra: str) -> pexpect.spawn:
    args = ["-m", "orchestrator", "run", "job.yaml", "--trace", "run.jsonl", *extra]
    return pexpect.spawn(
        sys.executable, args, cwd=str(folder), encoding="utf-8", timeout=60,
        dimensions=(40, 120),
    )  # fmt: skip


def decisions(folder: Path) -> list[tuple[str, str]]:
    return [
        (e["decision"], e["by"])
        for e in trace_lines(folder / "run.jsonl")
        if e["type"] == "approval"
    ]


@pytest.mark.parametrize("quiet", [True, False], ids=["quiet", "live-view"])
def test_yes_on_the_terminal_runs_the_call(tmp_path: Path, quiet: bool) -> None:
    folder = job_folder(tmp_path)
    child = spawn(folder, *(["--quiet"] if quiet else []))
    child.expect("Approval needed: agent goal wants to call shell__run")
    child.expect("permissions.shell is 'ask'")
    child.expect('"command": "touch approved.txt"')
    child.expect(PROMPT)
    child.sendline("y")
    child.expect("-> allowed")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    assert (folder / "work" / "approved.txt").exists()
    assert decisions(folder) == [("approved", "person")]


def test_no_on_the_terminal_denies_and_the_model_is_told(tmp_path: Path) -> None:
    folder = job_folder(tmp_path)
    child = spawn(folder, "--quiet")
    child.expect(PROMPT)
    child.sendline("n")
    child.expect("-> denied")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert not (folder / "work" / "approved.txt").exists()
    assert decisions(folder) == [("denied", "person")]
    [denied] = [
        e["message"]["content"]
        for e in trace_lines(folder / "run.jsonl")
        if e["type"] == "message" and e["message"].get("error_type") == "denied"
    ]
    assert "a person denied it" in denied


def run_off_a_terminal(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=folder,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_off_a_terminal_the_call_waits_and_a_new_process_answers_it(tmp_path: Path) -> None:
    folder = job_folder(tmp_path)
    done = run_off_a_terminal(folder, "run", "job.yaml", "--trace", "run.jsonl")
    assert done.returncode == 5, done.stderr  # EXIT_WAITING
    assert "Allow this call" not in done.stderr
    assert "waiting: " in done.stderr and "shell__run" in done.stderr
    assert "answer: orchestrator resume " in done.stderr
    assert not (folder / "work" / "approved.txt").exists()
    assert decisions(folder) == []  # asked, not decided

    answered = run_off_a_terminal(folder, "resume", "run.jsonl", "--answer", "yes")
    assert answered.returncode == 0, answered.stderr
    assert (folder / "work" / "approved.txt").exists()
    assert decisions(folder) == [("approved", "person")]


def test_off_a_terminal_with_on_input_deny_the_call_is_denied_and_says_why(
    tmp_path: Path,
) -> None:
    folder = job_folder(tmp_path)
    (folder / "job.yaml").write_text(JOB + "on_input: deny\n")
    done = run_off_a_terminal(folder, "run", "job.yaml", "--trace", "run.jsonl")
    assert done.returncode == 0, done.stderr
    assert "Allow this call" not in done.stderr
    assert not (folder / "work" / "approved.txt").exists()
    assert decisions(folder) == [("denied", "nobody")]


QUESTION_JOB = """\
name: asks
model: scripted:script.yaml
skills: []
questions: true
goal: Pick a city.
"""


def question_folder(tmp_path: Path) -> Path:
    (tmp_path / "job.yaml").write_text(QUESTION_JOB)
    turns = [
        {"tool_calls": [{"name": "ask_user", "arguments": {"question": "Which city?",
                                                           "choices": ["Paris", "Rome"]}}]},
        {"content": "done"},
    ]  # fmt: skip
    (tmp_path / "script.yaml").write_text(yaml.safe_dump({"goal": turns}))
    return tmp_path


def answers(folder: Path) -> list[Any]:
    return [
        e["message"]["content"]
        for e in trace_lines(folder / "run.jsonl")
        if e["type"] == "message" and e["message"].get("name") == "ask_user"
    ]


def test_a_question_is_asked_on_the_terminal_and_a_wrong_answer_asked_again(
    tmp_path: Path,
) -> None:
    folder = question_folder(tmp_path)
    child = spawn(folder, "--quiet")
    child.expect(
        'agent goal asks \\(question; answer one of: 1. Paris, 2. Rome\\): "Which city\\?"'
    )
    child.expect(r"Answer \(empty: later\): ")
    child.sendline("Lisbon")
    child.expect("takes one of")
    child.expect(r"Answer \(empty: later\): ")
    child.sendline("2")
    child.expect("-> answered")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    assert answers(folder) == ["Rome"]


def test_an_empty_answer_on_the_terminal_leaves_the_question_waiting(tmp_path: Path) -> None:
    folder = question_folder(tmp_path)
    child = spawn(folder, "--quiet")
    child.expect(r"Answer \(empty: later\): ")
    child.sendline("")
    child.expect("-> left waiting")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 5, child.before
    done = run_off_a_terminal(folder, "resume", "run.jsonl", "--answer", "Paris")
    assert done.returncode == 0, done.stderr
    assert answers(folder)[-1] == "Paris"
