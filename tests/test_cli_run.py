"""`orchestrator run` and `orchestrator trace show` as a user runs them: real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_process import orchestrator
from trace_lines import trace_lines

from orchestrator import read_trace, rebuild_conversations
from orchestrator.cli.progress import ProgressState

JOB = """\
name: {name}
model: scripted:script.yaml
budget: {budget}
permissions: {permissions}
steps:
{steps}
"""


def make_job(
    folder: Path,
    script: str,
    steps: str,
    *,
    name: str = "t",
    budget: str = "{max_steps: 5}",
    permissions: str = "{workspace: .}",
) -> Path:
    (folder / "script.yaml").write_text(script)
    job = folder / "job.yaml"
    job.write_text(JOB.format(name=name, budget=budget, permissions=permissions, steps=steps))
    return job


TWO_STEPS = """\
  - {id: first, task: "Say hello."}
  - {id: second, depends_on: [first], task: "Repeat: {steps.first.output}"}
"""


def test_output_on_stdout_progress_on_stderr_and_a_default_trace(tmp_path: Path) -> None:
    script = "first: [{content: hello}]\nsecond: [{content: hello again}]\n"
    make_job(tmp_path, script, TWO_STEPS)

    done = orchestrator("run", "job.yaml", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert done.stdout == "hello again\n"
    assert "first: running" in done.stderr and "second: completed (steps 1" in done.stderr
    (trace,) = (tmp_path / ".orchestrator" / "runs").glob("*-t.jsonl")
    assert f"trace: {Path('.orchestrator/runs') / trace.name}" in done.stderr
    assert rebuild_conversations(trace)["second"][-2].content == "Repeat: hello"


def test_json_result(tmp_path: Path) -> None:
    script = "first: [{content: hello}]\nsecond: [{content: hello again}]\n"
    make_job(tmp_path, script, TWO_STEPS)

    done = orchestrator("run", "job.yaml", "--json", "--quiet", "--trace", "t.jsonl", cwd=tmp_path)

    assert done.returncode == 0 and done.stderr == ""
    result = json.loads(done.stdout)
    assert result["status"] == "completed" and result["output"] == "hello again"
    assert [s["status"] for s in result["steps"]] == ["completed", "completed"]
    assert Path(result["trace"]) == tmp_path / "t.jsonl"
    assert result["usage"]["total_tokens"] == sum(
        s["usage"]["total_tokens"] for s in result["steps"]
    )


def test_a_bad_spec_exits_2_and_runs_nothing(tmp_path: Path) -> None:
    make_job(tmp_path, "'*': []\n", "  - {id: a, task: x, depends_on: [b]}\n")
    done = orchestrator("run", "job.yaml", "--trace", "t.jsonl", cwd=tmp_path)
    assert done.returncode == 2
    assert "job.yaml" in done.stderr and "steps[0].depends_on[0]" in done.stderr
    assert not (tmp_path / "t.jsonl").exists()


def test_a_failed_step_exits_3_and_skips_its_dependents(tmp_path: Path) -> None:
    make_job(tmp_path, "second: [{content: never}]\n", TWO_STEPS)
    done = orchestrator("run", "job.yaml", "--json", "--quiet", cwd=tmp_path)
    assert done.returncode == 3
    result = json.loads(done.stdout)
    assert result["status"] == "failed"
    first, second = result["steps"]
    assert first["status"] == "error" and "no turn left" in first["reason"]
    assert second == {**second, "status": "skipped", "reason": "dependency 'first' ended error"}


def test_budget_exhausted_exits_4(tmp_path: Path) -> None:
    make_job(tmp_path, "'*': [{content: hi}]\n", TWO_STEPS, budget="{max_tokens: 100}")
    done = orchestrator("run", "job.yaml", "--json", "--quiet", cwd=tmp_path)
    assert done.returncode == 4
    assert json.loads(done.stdout)["status"] == "budget_exhausted"


def test_ctrl_c_cancels_cleanly_and_leaves_a_complete_trace(tmp_path: Path) -> None:
    script = """\
slow:
  - tool_calls: [{name: load_skill, arguments: {name: shell}}]
  - tool_calls: [{name: shell__run, arguments: {command: "sleep 30"}}]
"""
    steps = "  - {id: slow, task: Wait.}\n  - {id: after, depends_on: [slow], task: x}\n"
    make_job(tmp_path, script, steps, permissions="{workspace: ., shell: true}")
    trace = tmp_path / "t.jsonl"
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "run", "job.yaml", "--trace", str(trace)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if trace.exists() and any(
            e["type"] == "tool_start" and e["name"] == "shell__run" for e in trace_lines(trace)
        ):
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)

    assert process.returncode == 130, stderr
    assert "interrupted" in stderr
    conversation = rebuild_conversations(trace)["slow"]
    assert conversation[-1].role == "tool" and conversation[-1].error_type == "aborted"
    ends = [e for e in trace_lines(trace) if e["type"] == "run_end"]
    assert [(e["agent"], e["status"]) for e in ends] == [("slow", "cancelled")]


@pytest.mark.slow
def test_trace_show_summarizes_a_run(tmp_path: Path) -> None:
    script = """\
first:
  - tool_calls: [{name: load_skill, arguments: {name: files}}]
  - tool_calls: [{name: files__read_file, arguments: {path: missing.txt}}]
  - content: hello
second: [{content: hello again}]
"""
    make_job(tmp_path, script, TWO_STEPS)
    orchestrator("run", "job.yaml", "--quiet", "--trace", "t.jsonl", cwd=tmp_path)

    done = orchestrator("trace", "show", "t.jsonl", cwd=tmp_path)

    assert done.returncode == 0
    lines = done.stdout.splitlines()
    assert lines[0] == "job t: completed"
    first = next(line for line in lines if line.startswith("first"))
    assert "[completed]" in first and "steps 3" in first and "skills: files" in first
    second = next(line for line in lines if line.startswith("second"))
    assert "after first" in second
    assert "1 error:" in done.stdout and "first: files__read_file [tool_error]" in done.stdout
    missing = orchestrator("trace", "show", "nope.jsonl", cwd=tmp_path)
    assert missing.returncode == 2 and "no trace at nope.jsonl" in missing.stderr


@pytest.mark.slow
def test_every_run_gets_a_trace_and_a_run_id_of_its_own(tmp_path: Path) -> None:
    script = "first: [{content: hello}, {content: hello}]\n"
    make_job(tmp_path, script, "  - {id: first, task: Say hello.}\n")
    command = [sys.executable, "-m", "orchestrator", "run", "job.yaml", "--quiet"]
    # Two runs started in the same second used to share a default trace name, and a file.
    both = [subprocess.Popen(command, cwd=tmp_path) for _ in range(2)]
    assert [process.wait(120) for process in both] == [0, 0]

    traces = sorted((tmp_path / ".orchestrator" / "runs").glob("*.jsonl"))
    assert len(traces) == 2
    ids = []
    for trace in traces:
        events = trace_lines(trace)
        (run_id,) = {e["run"] for e in events}
        assert trace.name.startswith(run_id)
        assert [e["type"] for e in events].count("job_start") == 1
        ids.append(run_id)
    assert ids[0] != ids[1]


@pytest.mark.slow
def test_a_trace_that_holds_a_run_is_never_appended_to(tmp_path: Path) -> None:
    make_job(
        tmp_path, "first: [{content: hello}, {content: again}]\n", "  - {id: first, task: x}\n"
    )
    assert orchestrator("run", "job.yaml", "--trace", "t.jsonl", cwd=tmp_path).returncode == 0
    before = (tmp_path / "t.jsonl").read_bytes()

    again = orchestrator("run", "job.yaml", "--trace", "t.jsonl", cwd=tmp_path)

    assert again.returncode == 2 and again.stdout == ""
    assert "already holds a run" in again.stderr
    assert "orchestrator resume" in again.stderr and "new path" in again.stderr
    assert (tmp_path / "t.jsonl").read_bytes() == before


INTERRUPTED = """\
fan:
  - tool_calls:
      - {name: fork, arguments: {tasks: [{id: quick, task: Quick.}, {id: slow, task: Slow.}]}}
  - content: combined
fan/quick: [{content: fine}]
fan/slow:
  - tool_calls: [{name: load_skill, arguments: {name: shell}}]
  - tool_calls: [{name: shell__run, arguments: {command: "sleep 30"}}]
  - content: slow done
after: [{content: after done}]
"""


@pytest.mark.slow
def test_ctrl_c_leaves_every_task_ended_and_the_job_cancelled(tmp_path: Path) -> None:
    steps = (
        "  - {id: fan, planner: true, task: Split.}\n  - {id: after, depends_on: [fan], task: x}\n"
    )
    make_job(tmp_path, INTERRUPTED, steps, permissions="{workspace: ., shell: true}")
    trace = tmp_path / "t.jsonl"
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "run", "job.yaml", "--trace", str(trace)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (
        trace.exists() and any(e.get("name") == "shell__run" for e in trace_lines(trace))
    ):
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    assert f"orchestrator resume {trace}" in stderr

    events = trace_lines(trace)
    tasks = {t["path"] for e in events if e["type"] == "fork" for t in e["tasks"]}
    ends = {e["agent"]: (e["status"], e.get("reason")) for e in events if e["type"] == "task_end"}
    assert set(ends) == tasks == {"fan", "after", "fan/quick", "fan/slow"}
    assert ends["after"][0] == "skipped" and "cancelled" in (ends["after"][1] or "")
    assert [(e["status"]) for e in events if e["type"] == "job_end"] == ["cancelled"]
    state = ProgressState()
    for event in read_trace(trace):
        state.update(event)
    assert {a.path: a.status for a in state.agents.values()} == {
        "fan": "cancelled",
        "after": "skipped",
        "fan/quick": "completed",
        "fan/slow": "cancelled",
    }
    shown = orchestrator("trace", "show", "t.jsonl", cwd=tmp_path).stdout.splitlines()
    assert shown[0] == "job t: cancelled"
    assert any(line.startswith("after  [skipped]") for line in shown)
    assert any(line.startswith("  slow  [cancelled]") for line in shown)

    # Ctrl-C, then resume: what had ended keeps its result; the job goes on to its end.
    resumed = orchestrator("resume", "t.jsonl", "--quiet", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == "after done\n"
    model_calls = [e["agent"] for e in trace_lines(trace) if e["type"] == "model_call"]
    assert model_calls.count("fan/quick") == 1 and model_calls.count("fan") == 2
