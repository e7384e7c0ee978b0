"""`orchestrator resume --retry-failed`: a job that died half-way because its provider was down
runs again only what failed and what depends on it; everything that completed keeps its
result and its spend. The provider is a real server on 127.0.0.1 that fails the first time."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from cli_process import orchestrator
from provider_server import Fault, ProviderServer
from trace_lines import trace_lines

from orchestrator.jobs import ResumeError, prepare_resume

AGENTS = ["load", "side", "analyse", "research", "report", "a", "b"]

SPEC = """\
name: retry
model: {{name: "openai-compatible:m", base_url: "{url}", max_retries: 0, stream: false}}
budget: {{max_parallel: 2}}
steps:
  - {{id: load, task: "[load] Load the figures."}}
  - {{id: side, task: "[side] Tidy the notes."}}
  - {{id: analyse, task: "[analyse] Analyse them.", depends_on: [load]}}
  - {{id: research, planner: true, task: "[research] Look into both sources."}}
  - id: report
    depends_on: [analyse, research]
    task: "[report] Write it up: {{steps.analyse.output}} / {{steps.research.output}}"
"""

FORK = {
    "name": "fork",
    "arguments": {
        "tasks": [{"id": "a", "task": "[a] Read A."}, {"id": "b", "task": "[b] Read B."}]
    },
}
SCRIPT: dict[str, list[dict[str, Any]]] = {
    "load": [{"content": "loaded 12 rows"}],
    "side": [{"content": "notes tidied"}],
    "analyse": [{"content": "rows trend up"}],
    "research": [
        {"tool_calls": [FORK]},
        {"content": "A says yes; B could not be read"},
        {"content": "A and B both say yes"},
    ],
    "a": [{"content": "A: yes"}],
    "b": [{"content": "B: yes"}],
    "report": [{"content": "Report: rows trend up, and A and B agree."}],
}


def route(body: Mapping[str, Any]) -> str:
    """The agent a request is for: the marker in its first user turn."""
    first = next(m for m in body["messages"] if m["role"] == "user")
    text = json.dumps(first["content"])
    return next(name for name in AGENTS if f"[{name}]" in text)


def calls(server: ProviderServer, since: int = 0) -> Counter[str]:
    return Counter(route(r.body) for r in server.requests[since:])


def test_retry_failed_runs_again_only_what_failed_and_what_depends_on_it(
    tmp_path: Path,
) -> None:
    with ProviderServer(SCRIPT, route=route) as server:
        (tmp_path / "job.yaml").write_text(SPEC.format(url=server.openai_url))
        # The provider is down for one step and for one forked sub-agent, once each.
        server.fail(Fault("status", status=503), agent="analyse")
        server.fail(Fault("status", status=503), agent="b")

        first = orchestrator("run", "job.yaml", "--json", "--quiet", cwd=tmp_path)
        assert first.returncode == 3, first.stderr
        before = json.loads(first.stdout)
        steps = {s["id"]: s for s in before["steps"]}
        assert steps["analyse"]["status"] == "error"
        assert steps["report"]["status"] == "skipped"
        assert steps["research"]["status"] == "completed"
        first_calls = len(server.requests)

        again = orchestrator("resume", "--retry-failed", "last", "--json", cwd=tmp_path)

        assert again.returncode == 0, again.stderr
        assert "retrying: analyse, research/b" in again.stderr
        after = json.loads(again.stdout)
        steps = {s["id"]: s for s in after["steps"]}
        assert {s["status"] for s in steps.values()} == {"completed"}
        assert after["output"] == "Report: rows trend up, and A and B agree."
        assert steps["research"]["output"] == "A and B both say yes"
        # Only the failed ones, the planner that forked one of them (from its fork call on),
        # and the step that used their outputs called the model again.
        assert calls(server, first_calls) == Counter(
            {"analyse": 1, "b": 1, "research": 1, "report": 1}
        )
        assert steps["load"]["output"] == "loaded 12 rows"
        assert steps["side"]["output"] == "notes tidied"

    (trace,) = (tmp_path / ".orchestrator" / "runs").glob("*.jsonl")
    events = trace_lines(trace)
    (retry,) = [e for e in events if e["type"] == "retry"]
    assert retry["paths"] == ["analyse", "research/b"] and retry["attempt"] == 2
    # The spend of the first attempt stays counted: the job's tokens cover both attempts.
    spent = sum(e["usage"]["total_tokens"] for e in events if e["type"] == "model_call")
    assert after["usage"]["total_tokens"] == spent
    # The research planner's conversation holds one answer to its fork call: the new one.
    research = [
        e["message"]
        for e in events
        if e["type"] == "message" and e["agent"] == "research" and e["attempt"] == 2
    ]
    fork_results = [m for m in research if m["role"] == "tool"]
    assert len(fork_results) == 1 and "B: yes" in fork_results[0]["content"]

    # A later plain resume folds the same checkpoint: the run is finished, nothing runs.
    done = orchestrator("resume", "last", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["output"] == after["output"]
    assert "had already finished (completed)" in done.stderr


def test_retry_failed_with_nothing_failed_says_so(tmp_path: Path) -> None:
    script = {"load": [{"content": "loaded"}]}
    with ProviderServer(script, route=lambda body: "load") as server:
        spec = f"""\
name: fine
model: {{name: "openai-compatible:m", base_url: "{server.openai_url}", stream: false}}
steps:
  - {{id: load, task: "Load."}}
"""
        (tmp_path / "job.yaml").write_text(spec)
        assert orchestrator("run", "job.yaml", "--quiet", cwd=tmp_path).returncode == 0

    (trace,) = (tmp_path / ".orchestrator" / "runs").glob("*.jsonl")
    with pytest.raises(ResumeError, match="has no failed step or sub-agent to retry"):
        prepare_resume(trace, retry_failed=True)
    refused = orchestrator("resume", "--retry-failed", "last", cwd=tmp_path)
    assert refused.returncode == 2
    assert "no failed step or sub-agent to retry (it ended completed)" in refused.stderr


def test_retry_failed_asks_the_model_again_for_an_empty_answer_a_later_step_needed(
    tmp_path: Path,
) -> None:
    (tmp_path / "script.yaml").write_text(
        "gather:\n  - content: ''\n  - content: 'twelve rows'\nwrite:\n  - content: 'Done.'\n"
    )
    (tmp_path / "job.yaml").write_text(
        "name: empty\nmodel: scripted:script.yaml\nsteps:\n"
        "  - {id: gather, task: Gather.}\n"
        "  - {id: write, task: 'Write: {steps.gather.output}', depends_on: [gather]}\n"
    )
    first = orchestrator("run", "job.yaml", "--json", "--quiet", cwd=tmp_path)
    assert first.returncode == 3
    assert json.loads(first.stdout)["steps"][0]["reason"].startswith("its answer was empty")

    again = orchestrator("resume", "--retry-failed", "last", "--json", cwd=tmp_path)

    assert again.returncode == 0, again.stderr
    result = json.loads(again.stdout)
    assert [s["output"] for s in result["steps"]] == ["twelve rows", "Done."]


def test_plain_resume_of_a_failed_run_points_to_retry_failed(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(
        "name: x\nmodel: scripted:script.yaml\nsteps:\n  - {id: a, task: A.}\n"
        "  - {id: b, task: B.}\n"
    )
    (tmp_path / "script.yaml").write_text("a: [{content: done}]\n")  # b has no turn: it fails
    assert orchestrator("run", "job.yaml", "--quiet", cwd=tmp_path).returncode == 3
    resumed = orchestrator("resume", "last", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "had already finished (failed)" in resumed.stderr
    assert "to run its failed steps again: orchestrator resume --retry-failed" in resumed.stderr


def test_trace_show_after_a_retry_gives_no_old_reason_to_a_step_that_now_completed(
    tmp_path: Path,
) -> None:
    (tmp_path / "job.yaml").write_text(
        "name: x\nmodel: scripted:script.yaml\nsteps:\n  - {id: a, task: A.}\n"
        "  - {id: b, task: B.}\n"
    )
    (tmp_path / "script.yaml").write_text("a: [{content: done}]\n")  # b has no turn: it fails
    assert orchestrator("run", "job.yaml", "--quiet", cwd=tmp_path).returncode == 3
    (tmp_path / "script.yaml").write_text("a: [{content: done}]\nb: [{content: done}]\n")
    retried = orchestrator("resume", "--retry-failed", "last", "--force", cwd=tmp_path)
    assert retried.returncode == 0, retried.stderr
    shown = orchestrator("trace", "show", "last", cwd=tmp_path)
    (line,) = [s for s in shown.stdout.splitlines() if s.strip().startswith("b ")]
    assert "completed" in line and "no turn left" not in line, shown.stdout
