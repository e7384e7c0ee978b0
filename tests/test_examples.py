"""Every example job runs end to end through the real command line, offline."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from trace_lines import trace_lines

from orchestrator import rebuild_conversations

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run_example(tmp_path: Path, name: str, *extra: str) -> tuple[dict[str, Any], Path]:
    """Copy the examples to tmp_path (they write into their workspaces) and run one."""
    folder = tmp_path / "examples"
    shutil.copytree(EXAMPLES, folder, ignore=shutil.ignore_patterns("out"))
    trace = tmp_path / "trace.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "run", str(folder / f"{name}.yaml")]
        + ["--json", "--trace", str(trace), *extra],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), folder


def check_trace(trace: Path, script: Path) -> list[dict[str, Any]]:
    """Every scripted turn was used, and no tool call failed."""
    events = trace_lines(trace)
    turns = yaml.safe_load(script.read_text())
    calls: dict[str, int] = {}
    for event in events:
        if event["type"] == "model_call":
            calls[event["agent"]] = calls.get(event["agent"], 0) + 1
    assert calls == {agent: len(agent_turns) for agent, agent_turns in turns.items()}
    errors = [
        e["message"] for e in events if e["type"] == "message" and e["message"].get("is_error")
    ]
    assert errors == []
    return events


def tool_outputs(events: list[dict[str, Any]], name: str) -> list[str]:
    return [
        e["message"]["content"]
        for e in events
        if e["type"] == "message" and e["message"].get("name") == name
    ]


def test_quickstart(tmp_path: Path) -> None:
    result, folder = run_example(tmp_path, "quickstart")

    assert result["status"] == "completed"
    assert result["output"].startswith("Wrote out/brief.md")
    brief = (folder / "quickstart" / "out" / "brief.md").read_text()
    assert "## Open questions" in brief and "notes-2026-11-16.md:9" in brief
    events = check_trace(tmp_path / "trace.jsonl", folder / "quickstart.script.yaml")
    # The researchers really read the notes: the files skill returned the file's lines.
    read = tool_outputs(events, "files__read_file")
    assert any("Release 4.2 is moved from 10 to 17 November" in text for text in read)
    fork = next(e for e in events if e["type"] == "fork" and e["agent"] == "goal")
    assert [t["id"] for t in fork["tasks"]] == ["early", "late"]
    conversations = rebuild_conversations(tmp_path / "trace.jsonl")
    assert set(conversations) == {"goal", "goal/early", "goal/late"}
    assert result["usage"]["total_tokens"] == sum(
        e["usage"]["total_tokens"] for e in events if e["type"] == "model_call"
    )


@pytest.mark.slow
def test_code_review_fans_out_and_in(tmp_path: Path) -> None:
    result, folder = run_example(tmp_path, "code-review")

    assert result["status"] == "completed"
    assert [s["id"] for s in result["steps"]] == ["inventory", "pricing", "export", "synthesis"]
    review = (folder / "code-review" / "out" / "review.md").read_text()
    assert review.count("| src/") == 7
    events = check_trace(tmp_path / "trace.jsonl", folder / "code-review.script.yaml")
    starts = {e["agent"]: e["ts"] for e in events if e["type"] == "task_start"}
    ends = {e["agent"]: e["ts"] for e in events if e["type"] == "task_end"}
    assert starts["synthesis"] >= max(ends[r] for r in ("inventory", "pricing", "export"))
    assert starts["pricing"] < ends["inventory"]  # the reviewers overlapped
    grep = tool_outputs(events, "files__grep")
    assert any("report.py:12" in text for text in grep)
    synthesis_prompt = next(
        e["message"]["content"]
        for e in events
        if e["type"] == "message" and e["agent"] == "synthesis" and e["message"]["role"] == "user"
    )
    assert "src/inventory.py:6 (correctness)" in synthesis_prompt  # a dependency's output


@pytest.mark.slow
def test_sales_report_turns_csv_into_a_report(tmp_path: Path) -> None:
    result, folder = run_example(tmp_path, "sales-report")

    assert result["status"] == "completed"
    report = (folder / "sales-report" / "data" / "out" / "report.md").read_text()
    assert "| **Q3** | **61,364** |" in report
    events = check_trace(tmp_path / "trace.jsonl", folder / "sales-report.script.yaml")
    aggregates = "\n".join(tool_outputs(events, "data__aggregate"))
    # The figures the script reports are the ones the data skill computed from the CSV.
    for figure in ("2026-07 | 24973.0", "APAC | 2026-09 | 2419.0", "Enterprise | 29670.0 | 23"):
        assert figure in aggregates
    assert "sum 61364" in "\n".join(tool_outputs(events, "data__summarize"))


@pytest.mark.slow
def test_inputs_can_be_overridden(tmp_path: Path) -> None:
    result, _ = run_example(tmp_path, "sales-report", "--set", "focus_region=EMEA")
    events = trace_lines(tmp_path / "trace.jsonl")
    prompt = next(
        e["message"]["content"]
        for e in events
        if e["type"] == "message" and e["agent"] == "trends" and e["message"]["role"] == "user"
    )
    assert "Say how EMEA moved" in prompt
    assert result["status"] == "completed"


@pytest.mark.parametrize("name", ["quickstart", "code-review", "sales-report"])
def test_examples_validate(name: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "validate", str(EXAMPLES / f"{name}.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"ok: {name}")


EVALS = {
    # eval file: (variant, passed/runs as the table prints it), in the table's order
    "compaction": [
        ("reference", "3/3 100%"),
        ("window-5k-mask", "3/3 100%"),
        ("window-5k-summarize", "3/3 100%"),
    ],
    "skill-ab": [("with-skill", "4/4 100%"), ("without-skill", "2/4 50%")],
    "disclosure": [
        ("disclosure=progressive", "2/2 100%"),
        ("disclosure=eager", "2/2 100%"),
        ("disclosure=auto", "2/2 100%"),
    ],
}


@pytest.mark.parametrize("name", sorted(EVALS))
def test_every_example_eval_runs_offline(tmp_path: Path, name: str) -> None:
    found = [p.name.removesuffix(".eval.yaml") for p in (EXAMPLES / "evals").glob("*.eval.yaml")]
    assert sorted(found) == sorted(EVALS)
    path = EXAMPLES / "evals" / f"{name}.eval.yaml"
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "eval", str(path), "--out", str(tmp_path / "out")]
        + ["-q"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = done.stdout.splitlines()[2:]
    for (variant, passed), row in zip(EVALS[name], rows, strict=False):
        assert row.split()[0] == variant and passed in row, done.stdout
    # The runs worked in copies: the example's own workspace is left as it was.
    assert sorted(p.name for p in (EXAMPLES / "evals" / "word-count" / "work").iterdir()) == [
        ".gitkeep"
    ]


def test_the_compaction_example_asks_its_probes_of_what_each_run_really_held(
    tmp_path: Path,
) -> None:
    # The eval's Python entry, offline: the scripted model answers the probes (key `probe`).
    from orchestrator.eval import EvalOptions, load_eval, run_eval_sync
    from orchestrator.eval.probes import point, recorded_agents

    path = EXAMPLES / "evals" / "compaction.eval.yaml"
    result = run_eval_sync(load_eval(path), EvalOptions(out=tmp_path / "out"))
    lines = {line["variant"]: line for line in result.lines}
    assert list(lines) == ["reference", "window-5k-mask", "window-5k-summarize"]
    probes = yaml.safe_load(path.read_text())["probes"]
    expected = {"first-word-early": "KESTREL", "last-word": "SWIFT", "changed-file": "summary.md"}
    for variant, line in lines.items():
        assert line["passed"] and line["status"] == "completed", (variant, line["scores"])
        # Only the small window cut, and each of its runs more than once.
        assert (line["compactions"] >= 2) == (variant != "reference"), variant
        results = {r["id"]: r for r in line["probes"]["results"]}
        assert [r["passed"] for r in results.values()] == [True] * 3, (variant, results)
        # The scripted answers are ones a model could give: the conversation each probe is
        # asked of, rebuilt from the run's trace, stubs and all, still holds what it asks.
        agents = recorded_agents(Path(line["trace"]))
        for probe in probes:
            at = point(agents, "goal", probe.get("after", "end"))
            held = "\n".join(
                [m.content or "" for m in at.messages]
                + [c.arguments for m in at.messages for c in m.tool_calls]
            )
            assert expected[probe["id"]] in held, (variant, probe["id"], at.at)
    # In the small window, note 1 was cut before the end: the probe after call 2 is the one
    # that still finds it.
    end = point(recorded_agents(Path(lines["window-5k-mask"]["trace"])), "goal", "end")
    assert "KESTREL" not in "\n".join(m.content or "" for m in end.messages)
