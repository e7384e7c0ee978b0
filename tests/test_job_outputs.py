"""What a run leaves in its workspace: the next run does not see it in listings (so it costs
what the first did), the command line names the files written as paths the user can open,
and says when no real model was called."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from cli_process import orchestrator
from trace_lines import trace_lines

from orchestrator import load_job, rebuild_conversations
from orchestrator.cli.run import offline_note

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def copy_examples(tmp_path: Path) -> Path:
    folder = tmp_path / "examples"
    shutil.copytree(EXAMPLES, folder, ignore=shutil.ignore_patterns("out"))
    return folder


def run_json(cwd: Path, *args: str) -> dict[str, Any]:
    """`run ARGS --json` in `cwd`; its trace's path made absolute."""
    done = orchestrator("run", *args, "--json", cwd=cwd)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    return {**result, "trace": str(cwd / result["trace"])}


def listings(trace: str, tool: str = "files__list_dir") -> list[str]:
    return [
        m.content
        for messages in rebuild_conversations(trace).values()
        for m in messages
        if m.role == "tool" and m.name == tool
    ]


@pytest.mark.slow
def test_a_second_quickstart_run_costs_what_the_first_did(tmp_path: Path) -> None:
    copy_examples(tmp_path)

    first = run_json(tmp_path, "examples/quickstart.yaml")
    second = run_json(tmp_path, "examples/quickstart.yaml")

    assert (tmp_path / "examples/quickstart/out/brief.md").is_file()
    assert second["usage"] == first["usage"]
    assert listings(second["trace"]) == listings(first["trace"])
    assert "out/" not in listings(second["trace"])[0]
    (job_end,) = [e for e in trace_lines(second["trace"]) if e["type"] == "job_end"]
    assert job_end["outputs"] == ["out"] and job_end["written"] == ["out/brief.md"]
    assert second["files"] == [str(tmp_path / "examples/quickstart/out/brief.md")]


JOB = """\
name: w
model: scripted:script.yaml
permissions: {workspace: .}
steps:
  - {id: look, task: Look around., skills: [files]}
"""
SCRIPT = """\
look:
  - tool_calls:
      - {name: files__list_dir, arguments: {path: "."}}
      - {name: files__glob, arguments: {pattern: "**/*.md"}}
      - {name: files__grep, arguments: {pattern: brief, include: "*.md"}}
      - {name: files__list_dir, arguments: {path: "out"}}
      - {name: files__read_file, arguments: {path: out/brief.md}}
  - tool_calls:
      - {name: files__write_file, arguments: {path: out/brief.md, content: "a brief"}}
  - content: done
"""


@pytest.mark.slow
def test_listings_leave_out_earlier_outputs_and_traces_but_not_new_files(
    tmp_path: Path,
) -> None:
    (tmp_path / "job.yaml").write_text(JOB)
    (tmp_path / "script.yaml").write_text(SCRIPT)
    (tmp_path / "notes.md").write_text("notes about the brief\n")

    first = run_json(tmp_path, "job.yaml")
    (tmp_path / "later.md").write_text("the user's brief, added after the first run\n")
    second = run_json(tmp_path, "job.yaml")

    one, two = listings(first["trace"]), listings(second["trace"])
    # The first run's own trace folder (.orchestrator/runs/, in the workspace) is never listed.
    files = sorted(p for p in tmp_path.iterdir() if p.is_file())
    shown = [f"{p.name} ({p.stat().st_size} bytes)" for p in files]
    assert one[0] == "\n".join(name for name in shown if not name.startswith("later.md"))
    assert two[0] == "\n".join(shown)
    glob, grep = listings(second["trace"], "files__glob"), listings(second["trace"], "files__grep")
    assert glob == ["later.md\nnotes.md"]
    assert grep == [
        "later.md:1: the user's brief, added after the first run\nnotes.md:1: notes about the brief"
    ]
    # Named by its own path, an earlier output is still there to list and read.
    assert two[1] == "brief.md (7 bytes)"
    assert listings(second["trace"], "files__read_file")[0].startswith("a brief")


def test_the_command_line_names_files_from_here_and_says_it_ran_offline(
    tmp_path: Path,
) -> None:
    copy_examples(tmp_path)

    done = orchestrator("run", "examples/quickstart.yaml", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert "\nwrote examples/quickstart/out/brief.md\n" in done.stderr
    summary = re.search(
        r"job quickstart: completed in ([\d.]+)s, ([\d,]+) tokens; (.*)", done.stderr
    )
    assert summary is not None, done.stderr
    assert summary[3] == "offline, scripted model (examples/quickstart.script.yaml)"
    trace = re.search(r"trace: (\S+)", done.stderr)[1]
    events = trace_lines(tmp_path / trace)
    # The time shown is the command's, which holds the job's own (from its first to last event).
    assert float(summary[1]) >= round(events[-1]["ts"] - events[0]["ts"], 1)


def test_offline_only_when_every_model_of_the_job_answers_from_a_file(tmp_path: Path) -> None:
    (tmp_path / "script.yaml").write_text("a: [{content: ok}]\n")
    spec = tmp_path / "job.yaml"
    spec.write_text(JOB.replace("skills: [files]}", "skills: [files]}\n  - {id: b, task: Go.}"))
    assert offline_note(load_job(spec)) == f"offline, scripted model ({tmp_path / 'script.yaml'})"
    spec.write_text(JOB.replace("skills: [files]}", "skills: [files], model: openai:gpt-4o-mini}"))
    assert offline_note(load_job(spec)) is None


@pytest.mark.slow
def test_a_spec_may_unlist_paths_of_its_own(tmp_path: Path) -> None:
    job = tmp_path / "job"
    job.mkdir()
    (job / "job.yaml").write_text(JOB.replace("{workspace: .}", "{workspace: ., unlisted: [old]}"))
    (job / "script.yaml").write_text(SCRIPT)
    (job / "old").mkdir()
    (job / "old" / "draft.md").write_text("an old brief\n")

    result = run_json(tmp_path, "job/job.yaml")  # run from elsewhere: paths are the spec's

    assert "old/" not in listings(result["trace"])[0]
    assert listings(result["trace"], "files__glob") == ["No file matches '**/*.md'."]
