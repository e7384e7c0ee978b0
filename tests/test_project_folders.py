"""A Claude Code project's `.claude/` folder works as a job's skills and sub-agents, unedited.

Real folders on disk, the CLI as a subprocess, the model scripted. A job that names no
`skills:` or `subagents:` searches its own folder; home folders only with `--user-skills`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from skill_factory import write_skill
from trace_lines import trace_lines

from orchestrator.jobs import job_folders, load_job
from orchestrator.planner import Orchestrator

# Claude Code's own sub-agent example, in the shape its documentation gives it.
CODE_REVIEWER = """\
---
name: code-reviewer
description: Expert code review specialist. Reviews code for quality, security and \
maintainability; use right after writing or changing code.
tools: Read, Grep, Glob, Bash
model: inherit
color: blue
---

You are a senior code reviewer. Read what changed, then report problems by priority.
"""

# A skill as Claude Code projects keep them: unquoted colon, Claude Code's own fields.
REVIEW_SKILL = """\
---
name: review-checklist
description: The team's review checklist. Use when: reviewing a change.
when_to_use: Before approving any pull request.
allowed-tools: Read Grep
---

# Review checklist

Check naming, error handling and tests, in that order.
"""

CODEX_AGENT = """\
name = "doc_writer"
description = "Writes short documentation from code."
developer_instructions = "Write the docs the task asks for."
"""


def claude_project(root: Path) -> Path:
    (root / ".claude" / "agents").mkdir(parents=True)
    (root / ".claude" / "agents" / "code-reviewer.md").write_text(CODE_REVIEWER)
    (root / ".claude" / "skills" / "review-checklist").mkdir(parents=True)
    (root / ".claude" / "skills" / "review-checklist" / "SKILL.md").write_text(REVIEW_SKILL)
    (root / ".codex" / "agents").mkdir(parents=True)
    (root / ".codex" / "agents" / "doc_writer.toml").write_text(CODEX_AGENT)
    (root / "app.py").write_text("def add(a, b):\n    return a - b\n")
    return root


JOB = """\
name: review
model: scripted:script.yaml
permissions: {workspace: .}  # the project is the model's to review
steps:
  - id: review
    agent: code-reviewer
    task: Review app.py.
  - id: docs
    agent: doc_writer
    task: "Document the review: {steps.review.output}"
    depends_on: [review]
"""


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "arguments": arguments}]}


def orchestrator(
    *args: str, cwd: Path, home: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home or cwd / "no-home")}
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


@pytest.mark.slow
def test_a_claude_code_project_runs_as_a_job_unchanged(tmp_path: Path) -> None:
    claude_project(tmp_path)
    (tmp_path / "job.yaml").write_text(JOB)
    script = {
        "review": [
            # Its tools are its own (files, shell, preloaded); Claude Code gives it no skills.
            call("load_skill", name="review-checklist"),
            call("files__read_file", path="app.py"),
            {"content": "add() subtracts: return a + b."},
        ],
        "docs": [
            call("load_skill", name="review-checklist"),
            {"content": "add(a, b) returns the sum (fixed)."},
        ],
    }
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(script))

    checked = orchestrator("validate", "job.yaml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    done = orchestrator("run", "job.yaml", "--trace", "run.jsonl", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "completed"
    assert [s["agent"] for s in result["steps"]] == ["code-reviewer", "doc_writer"]
    # The one warning: the skill's unquoted colon, read as Claude Code reads it.
    [warning] = [line for line in done.stderr.splitlines() if "warning" in line]
    assert "review-checklist" in warning and warning.endswith(
        "read again with its values quoted [yaml]"
    )
    events = list(trace_lines(tmp_path / "run.jsonl"))
    tools = {e["agent"]: e["tools"] for e in events if e["type"] == "run_start"}
    assert {"files__read_file", "files__grep", "shell__run"} <= set(tools["review"])
    assert "files__write_file" not in tools["review"]
    results = [
        e["message"]["content"]
        for e in events
        if e["type"] == "message" and e["message"]["role"] == "tool"
    ]
    assert "Unknown skill 'review-checklist'" in results[0]
    assert "return a - b" in results[1]
    assert "Check naming, error handling and tests" in results[2]


def test_the_cli_lists_the_working_folders_skills_and_agents(tmp_path: Path) -> None:
    claude_project(tmp_path)
    skills = orchestrator("skills", "list", "--no-builtin", cwd=tmp_path)
    assert skills.returncode == 0, skills.stderr
    assert "review-checklist  The team's review checklist. Use when: reviewing a change." in (
        skills.stdout
    )
    assert "Before approving any pull request." in skills.stdout
    agents = orchestrator("subagents", "list", "--no-builtin", cwd=tmp_path)
    assert agents.returncode == 0, agents.stderr
    assert "code-reviewer" in agents.stdout and "[claude]" in agents.stdout
    assert "doc_writer" in agents.stdout and "[codex]" in agents.stdout


@pytest.mark.slow
def test_home_folders_only_when_asked(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    write_skill(home / ".agents" / "skills", "personal", description="Mine alone.")
    (home / ".claude" / "agents").mkdir(parents=True)
    (home / ".claude" / "agents" / "helper.md").write_text(
        "---\nname: helper\ndescription: Helps.\ntools: Read\n---\nHelp.\n"
    )
    work.mkdir()
    plain = orchestrator("skills", "list", "--no-builtin", cwd=work, home=home)
    assert "personal" not in plain.stdout
    asked = orchestrator("skills", "list", "--no-builtin", "--user-skills", cwd=work, home=home)
    assert "personal" in asked.stdout
    agents = orchestrator("subagents", "list", "--user-skills", cwd=work, home=home)
    assert "helper" in agents.stdout
    (work / "job.yaml").write_text(
        "name: j\nmodel: scripted:s.yaml\nsteps:\n  - {id: a, agent: helper, task: Go.}\n"
    )
    (work / "s.yaml").write_text("a: [{content: ok}]\n")
    refused = orchestrator("validate", "job.yaml", cwd=work, home=home)
    assert refused.returncode == 2 and "helper" in refused.stderr
    allowed = orchestrator("validate", "job.yaml", "--user-skills", cwd=work, home=home)
    assert allowed.returncode == 0, allowed.stderr


def test_a_spec_that_names_its_folders_searches_nothing_else(tmp_path: Path) -> None:
    claude_project(tmp_path)
    (tmp_path / "job.yaml").write_text(
        "name: j\nmodel: scripted:s.yaml\nskills: []\nsubagents: []\ngoal: Go.\n"
    )
    (tmp_path / "s.yaml").write_text("goal: [{content: ok}]\n")
    job = load_job(tmp_path / "job.yaml")
    folders = job_folders(job)
    assert folders.skills == [] and folders.subagents == []
    orchestrator_ = Orchestrator.from_job(job)
    assert "review-checklist" not in orchestrator_.catalog


MARKER_TOOLS = """\
from pathlib import Path
Path({marker!r}).write_text("code ran")

from orchestrator import tool


@tool
def hello() -> str:
    \"\"\"Say hello.\"\"\"
    return "hello"
"""


def test_code_in_the_jobs_own_skills_is_refused_with_the_reason(tmp_path: Path) -> None:
    marker = tmp_path / "marker.txt"
    folder = write_skill(tmp_path / ".claude" / "skills", "notes", description="Notes.")
    (folder / "tools.py").write_text(MARKER_TOOLS.format(marker=str(marker)))
    (tmp_path / "job.yaml").write_text(
        "name: j\nmodel: scripted:s.yaml\npermissions: {workspace: .}\ngoal: Take notes.\n"
    )
    turns = [
        call("load_skill", name="notes"),
        # The user made the spec's folder the workspace; the skill folders a job would search
        # are read-only even where they do not exist yet: no skill for the next run.
        call("load_skill", name="files"),
        call("files__write_file", path="skills/evil/SKILL.md", content="---\nname: evil\n---\n"),
        call("files__write_file", path=".agents/skills/x/SKILL.md", content="x"),
        call("files__write_file", path=".codex/agents/x.toml", content="x"),
        call("files__write_file", path="fine.txt", content="ok"),
        {"content": "done"},
    ]
    (tmp_path / "s.yaml").write_text(yaml.safe_dump({"goal": turns}))
    done = orchestrator("run", "job.yaml", "--trace", "run.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert not marker.exists()
    assert "[tools-in-workspace]" in done.stderr
    assert "so its tools.py is not imported" in done.stderr
    results = [
        e["message"]
        for e in trace_lines(tmp_path / "run.jsonl")
        if e["type"] == "message" and e["message"]["role"] == "tool"
    ]
    assert "so its tools.py is not imported" in results[0]["content"]
    assert [r.get("error_type") for r in results[2:5]] == ["denied"] * 3
    assert not (tmp_path / "skills").exists() and not (tmp_path / ".agents").exists()
    assert (tmp_path / "fine.txt").read_text() == "ok"


def test_a_job_step_gives_its_agent_skills_the_model_may_not_choose(tmp_path: Path) -> None:
    write_skill(
        tmp_path / "skills",
        "release",
        description="Cuts a release.",
        extra="disable-model-invocation: true\n",
        body="Tag the release as vX.Y.Z.",
    )
    (tmp_path / "job.yaml").write_text(
        "name: j\nmodel: scripted:s.yaml\nsteps:\n"
        "  - {id: cut, task: Cut the release., skills: [release]}\n"
    )
    (tmp_path / "s.yaml").write_text("cut: [{content: tagged}]\n")
    done = orchestrator("run", "job.yaml", "--trace", "run.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    first = next(
        e for e in trace_lines(tmp_path / "run.jsonl")
        if e["type"] == "message" and e["agent"] == "cut"
    )  # fmt: skip
    assert "Tag the release as vX.Y.Z." in first["message"]["content"]
