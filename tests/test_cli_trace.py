"""`orchestrator trace show|list` as a user runs them: real runs, real files."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from test_cli_run import make_job, orchestrator
from trace_lines import trace_lines

FORKS = """\
a:
  - tool_calls: [{name: fork, arguments: {tasks: [{id: x, task: X.}, {id: a1, task: A1.}]}}]
  - content: a done
a/x: [{content: ax}]
a/a1: [{content: a1}]
b:
  - tool_calls: [{name: fork, arguments: {tasks: [{id: x, task: X.}, {id: b1, task: B1.}]}}]
  - content: b done
b/x: [{content: bx}]
b/b1: [{content: b1}]
"""


@pytest.mark.slow
def test_trace_show_nests_each_fork_under_the_agent_that_made_it(tmp_path: Path) -> None:
    steps = "  - {id: a, planner: true, task: A.}\n  - {id: b, planner: true, task: B.}\n"
    make_job(tmp_path, FORKS, steps)
    assert orchestrator("run", "job.yaml", "--trace", "t.jsonl", cwd=tmp_path).returncode == 0

    shown = orchestrator("trace", "show", "t.jsonl", cwd=tmp_path)

    rows = [line for line in shown.stdout.splitlines() if "[completed]" in line]
    names = [line.split("  [")[0] for line in rows]
    # `x` is the name of a task of both forks: those rows show the full path.
    assert names == ["a", "  a/x", "  a1", "b", "  b/x", "  b1"]
    assert shown.stdout.splitlines()[1].startswith("run ") and "(1 attempt)" in shown.stdout


@pytest.mark.slow
def test_trace_show_counts_unreadable_lines(tmp_path: Path) -> None:
    make_job(tmp_path, "a: [{content: hi}]\n", "  - {id: a, task: x}\n")
    orchestrator("run", "job.yaml", "--quiet", "--trace", "t.jsonl", cwd=tmp_path)
    with (tmp_path / "t.jsonl").open("ab") as handle:
        handle.write(b'{"not": "an event"}\n\xff garbage\n{"seq": 99, "type": "message", "ag')

    shown = orchestrator("trace", "show", "t.jsonl", cwd=tmp_path)

    assert shown.returncode == 0, shown.stderr
    assert "3 unreadable lines skipped" in shown.stdout
    assert "a  [completed]" in shown.stdout


@pytest.mark.slow
def test_trace_list_and_show_last(tmp_path: Path) -> None:
    make_job(tmp_path, "a: [{content: hi}]\n", "  - {id: a, task: x}\n", name="good")
    assert orchestrator("run", "job.yaml", "--quiet", cwd=tmp_path).returncode == 0
    time.sleep(0.01)
    make_job(tmp_path, "a: []\n", "  - {id: a, task: x}\n", name="bad")
    assert orchestrator("run", "job.yaml", "--quiet", cwd=tmp_path).returncode == 3

    listed = orchestrator("trace", "list", cwd=tmp_path)

    assert listed.returncode == 0, listed.stderr
    header, newest, oldest = listed.stdout.splitlines()
    assert header.split() == ["RUN", "NAME", "STATUS", "TOKENS", "COST", "STARTED", "TRACE"]
    assert newest.split()[1:3] == ["bad", "failed"] and oldest.split()[1:3] == ["good", "completed"]
    runs = [
        json.loads(line)
        for line in orchestrator("trace", "list", "--json", cwd=tmp_path).stdout.splitlines()
    ]
    assert [r["job"] for r in runs] == ["bad", "good"]
    good = runs[1]
    events = trace_lines(tmp_path / good["trace"])
    assert good["run"] == events[0]["run"] and good["attempts"] == 1
    assert good["tokens"] == sum(
        e["usage"]["total_tokens"] for e in events if e["type"] == "model_call"
    )
    assert good["cost"] is None and Path(good["trace"]).name.startswith(good["run"])

    last = orchestrator("trace", "show", "last", cwd=tmp_path)
    assert last.returncode == 0 and "job bad: failed" in last.stdout
    assert f"trace: {runs[0]['trace']}" in last.stdout
    empty = orchestrator("trace", "list", "--dir", "nowhere", cwd=tmp_path)
    assert empty.returncode == 0 and "no runs in nowhere" in empty.stderr


def test_a_trace_line_nested_too_deeply_is_skipped_and_counted(tmp_path: Path) -> None:
    make_job(tmp_path, "a: [{content: hi}]\n", "  - {id: a, task: x}\n", name="deep")
    assert orchestrator("run", "job.yaml", "--quiet", cwd=tmp_path).returncode == 0
    (trace,) = (tmp_path / ".orchestrator" / "runs").glob("*.jsonl")
    levels = 100_000
    with trace.open("ab") as handle:
        handle.write(b'{"type": "message", "x": ' + b"[" * levels + b"]" * levels + b"}\n")
    shown = orchestrator("trace", "show", "last", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "1 unreadable line skipped" in shown.stdout and "a  [completed]" in shown.stdout
    listed = orchestrator("trace", "list", cwd=tmp_path)
    assert listed.returncode == 0 and "deep" in listed.stdout, listed.stderr
    report = orchestrator("report", "last", "-o", "page.html", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert "Traceback" not in shown.stderr + listed.stderr + report.stderr
