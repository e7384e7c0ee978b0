"""The live view on a real pseudo-terminal (pexpect): each agent's sub-agent definition and
time, and a hint when a real server on 127.0.0.1 has taken the request and says nothing."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pexpect
import pytest
from trace_lines import typed

from orchestrator.cli.progress import ProgressState
from orchestrator.cli.rows import row_of

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def spawn(cwd: Path, *args: str, env: dict[str, str] | None = None) -> pexpect.spawn:
    return pexpect.spawn(
        sys.executable, ["-m", "orchestrator", "run", *args], cwd=str(cwd), encoding="utf-8",
        timeout=60, dimensions=(40, 140), env={**os.environ, **(env or {})},
    )  # fmt: skip


def shown(*words: str) -> str:
    """A pattern for `words` in a row, with any colours and spaces rich puts between them."""
    return r"(?:\x1b\[[\d;]*m|\s)*".join(words)


TOKENS = r"tokens [\d,]+"
TIME = r"\d+\.\ds"


def test_the_live_view_shows_each_tasks_definition_and_time(tmp_path: Path) -> None:
    shutil.copytree(EXAMPLES, tmp_path / "examples", ignore=shutil.ignore_patterns("out"))

    child = spawn(tmp_path, "examples/quickstart.yaml")
    child.expect(shown("goal", r"\(planner\)", "completed", "steps 5", TOKENS, TIME))
    child.expect(shown("early", r"\(researcher\)", "completed", "steps 3", TOKENS, TIME))
    child.expect(shown("late", r"\(researcher\)", "completed", "steps 3", TOKENS, TIME))
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before


@contextmanager
def silent_server() -> Iterator[tuple[int, list[socket.socket]]]:
    """A server on 127.0.0.1 that accepts every connection and never answers on it."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:  # closed: the test is over
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1], held
    finally:
        listener.close()
        for connection in held:
            connection.close()


JOB = """\
name: silent
model: {name: "openai:gpt-4o-mini", base_url: "http://127.0.0.1:{port}/v1", timeout: 600}
goal: Say hello.
"""


@pytest.mark.slow
def test_a_model_that_says_nothing_is_shown_as_waited_on(tmp_path: Path) -> None:
    with silent_server() as (port, held):
        (tmp_path / "job.yaml").write_text(JOB.replace("{port}", str(port)))
        child = spawn(
            tmp_path,
            "job.yaml",
            env={"OPENAI_API_KEY": "sk-test", "ORCHESTRATOR_SILENCE_SECONDS": "1"},
        )
        child.expect(shown("goal", r"\(planner\)", "running", "steps 0", "tokens 0", TIME))
        child.expect(shown(TIME, r"waiting on the model for [1-9]\d*s"))
        assert held, "the request reached the server"
        child.kill(signal.SIGINT)
        child.expect("interrupted; the trace is in")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 130


def test_no_hint_while_a_tool_runs_or_before_the_threshold() -> None:
    state = ProgressState()
    state.update(typed({"type": "fork", "agent": "job", "ts": 0.0, "tasks": [
        {"id": "goal", "path": "goal", "agent": "planner", "depends_on": []}]}))  # fmt: skip
    state.update(typed({"type": "run_start", "agent": "goal", "ts": 10.0}))
    goal = state.agents["goal"]
    assert row_of(goal, 19.0, silence_after=10).silent is None
    assert row_of(goal, 25.0, silence_after=10).silent == 15.0
    call = {"agent": "goal", "call_id": "c1", "name": "shell__run"}
    state.update(typed({"type": "tool_start", "ts": 26.0, **call}))
    assert row_of(goal, 90.0, silence_after=10).silent is None
    state.update(typed({"type": "tool_end", "ts": 91.0, "duration_ms": 65_000, **call}))
    row = row_of(goal, 95.0, silence_after=10)
    assert row.silent is None and row.definition == "planner" and row.seconds == 85.0


@pytest.mark.parametrize("ending", ["completed", "failed", "cancelled"])
@pytest.mark.slow
def test_the_last_line_on_stderr_is_the_report_command_however_the_run_ends(
    tmp_path: Path, ending: str
) -> None:
    trace = tmp_path / "t.jsonl"
    command = [sys.executable, "-m", "orchestrator", "run", "job.yaml", "--trace", str(trace)]
    if ending == "cancelled":
        with silent_server() as (port, held):
            (tmp_path / "job.yaml").write_text(JOB.replace("{port}", str(port)))
            process = subprocess.Popen(
                command,
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env={**os.environ, "OPENAI_API_KEY": "sk-test"},
            )
            deadline = time.monotonic() + 60
            while not held and time.monotonic() < deadline:
                time.sleep(0.05)
            assert held, "the request reached the server"
            process.send_signal(signal.SIGINT)
            _, stderr = process.communicate(timeout=60)
    else:
        (tmp_path / "job.yaml").write_text(
            "name: x\nmodel: scripted:script.yaml\nsteps:\n  - {id: a, task: A.}\n"
            "  - {id: b, task: B.}\n"
        )
        turns = "a: [{content: done}]\n" + ("b: [{content: done}]\n" * (ending == "completed"))
        (tmp_path / "script.yaml").write_text(turns)
        done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        stderr = done.stderr
        assert (f"job x: {ending}" in stderr) and (
            ("step b (general)" in stderr) == (ending == "failed")
        )
    assert stderr.splitlines()[-1] == f"report: orchestrator report {trace}", stderr
