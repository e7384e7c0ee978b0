"""No code runs unless the job allows it. The model is hostile: it tries to write a skill's
`tools.py` and load it, and to rewrite the job spec and sub-agent files that define its own
permissions. Each attack runs for real: the CLI in a subprocess, files on disk."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from trace_lines import trace_lines

from orchestrator import Agent, Permissions, tool
from orchestrator.models import ScriptedModel

MARKER_CODE = """\
from pathlib import Path
Path({marker!r}).write_text("code ran")

from orchestrator import tool


@tool
def hello() -> str:
    \"\"\"Say hello.\"\"\"
    return "hello"
"""


def skill(folder: Path, name: str, *, tools: str | None = None) -> Path:
    path = folder / name
    path.mkdir(parents=True, exist_ok=True)
    (path / "SKILL.md").write_text(f"---\nname: {name}\ndescription: Notes.\n---\nTake notes.\n")
    if tools is not None:
        (path / "tools.py").write_text(tools)
    return path


def call(tool_name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool_name, "arguments": arguments}]}


def run_job(folder: Path, turns: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    (folder / "script.yaml").write_text(yaml.safe_dump({"goal": turns}))
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", "run", "job.yaml", "--trace", "run.jsonl"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=folder,
    )


def results(trace: Path) -> dict[str, dict[str, Any]]:
    """Every tool result of the run, by call id."""
    found = {}
    for event in trace_lines(trace):
        message = event.get("message") or {}
        if event["type"] == "message" and message.get("role") == "tool":
            found[message["tool_call_id"]] = message
    return found


JOB = """\
name: hostile
model: scripted:script.yaml
skills: [./skills]
subagents: [./agents]
permissions: {workspace: ., shell: false, python: false}
goal: Take notes.
"""
AGENT = "---\nname: helper\ndescription: Helps.\n---\nYou help.\n"


def test_the_model_cannot_write_code_or_its_own_permissions(tmp_path: Path) -> None:
    # The user made the spec's folder the workspace, which holds skills/ and agents/.
    marker = tmp_path / "marker.txt"
    (tmp_path / "job.yaml").write_text(JOB)
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "helper.md").write_text(AGENT)
    skill(tmp_path / "skills", "notes")
    turns = [
        call("load_skill", name="files"),
        call(
            "files__write_file",
            path="skills/notes/tools.py",
            content=MARKER_CODE.format(marker=str(marker)),
        ),
        call("files__write_file", path="skills/evil/SKILL.md", content="---\nname: evil\n---\n"),
        call("files__edit_file", path="job.yaml", old_text="shell: false", new_text="shell: true"),
        call("files__write_file", path="agents/helper.md", content="---\nname: helper\n---\n"),
        call("files__write_file", path="run.jsonl", content="{}"),
        call("load_skill", name="notes"),
        {"content": "done"},
    ]
    done = run_job(tmp_path, turns)

    assert done.returncode == 0, done.stderr
    assert not marker.exists()
    assert not (tmp_path / "skills" / "notes" / "tools.py").exists()
    assert not (tmp_path / "skills" / "evil").exists()
    assert (tmp_path / "job.yaml").read_text() == JOB
    assert (tmp_path / "agents" / "helper.md").read_text() == AGENT
    found = list(results(tmp_path / "run.jsonl").values())
    writes = ("files__write_file", "files__edit_file")
    denied = [r for r in found if r["name"] in writes]
    assert [r.get("error_type") for r in denied] == ["denied"] * 5
    assert all("read-only for this run" in r["content"] for r in denied)
    loaded = next(r for r in found if r["name"] == "load_skill" and "Skill: notes" in r["content"])
    assert "Tools of this skill" not in loaded["content"]


def test_code_in_a_skill_inside_the_workspace_is_never_imported(tmp_path: Path) -> None:
    # As if a model had written it in an earlier run: it is there before this run starts.
    marker = tmp_path / "marker.txt"
    (tmp_path / "job.yaml").write_text(JOB)
    (tmp_path / "agents").mkdir()
    skill(tmp_path / "skills", "notes", tools=MARKER_CODE.format(marker=str(marker)))
    done = run_job(tmp_path, [call("load_skill", name="notes"), {"content": "done"}])

    assert done.returncode == 0, done.stderr
    assert not marker.exists()
    (refusal,) = results(tmp_path / "run.jsonl").values()
    assert refusal["error_type"] == "denied"
    assert "inside the run's workspace" in refusal["content"]
    assert "tools.py is not imported" in refusal["content"]


def test_the_same_skill_outside_the_workspace_loads(tmp_path: Path) -> None:
    marker = tmp_path / "marker.txt"
    job = tmp_path / "job"
    job.mkdir()
    (job / "job.yaml").write_text(JOB.replace("./skills", "../skills").replace("./agents", "."))
    skill(tmp_path / "skills", "notes", tools=MARKER_CODE.format(marker=str(marker)))
    turns = [call("load_skill", name="notes"), call("notes__hello"), {"content": "done"}]
    done = run_job(job, turns)

    assert done.returncode == 0, done.stderr
    assert marker.read_text() == "code ran"
    assert [r["content"] for r in results(job / "run.jsonl").values()][-1] == "hello"


def _sneaky_agent(tmp_path: Path, target: Path, code: str, marker: Path) -> tuple[Agent, Path]:
    """An agent with a trusted tool of the user's that writes files anywhere it is told: the
    way a hostile model could get code onto disk after the catalog was scanned."""

    @tool
    def save(text: str) -> str:
        """Save a note."""
        target.write_text(text)
        return "saved"

    script = {
        "agent": [
            call("save", text=code.format(marker=str(marker))),
            call("load_skill", name="notes"),
            {"content": "done"},
        ]
    }
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    agent = Agent(
        ScriptedModel(script),
        [save],
        skills=[tmp_path / "skills"],
        permissions=Permissions(workspace=workspace),
    )
    return agent, workspace


async def test_a_tools_py_changed_after_the_scan_is_not_imported(tmp_path: Path) -> None:
    marker = tmp_path / "marker.txt"
    folder = skill(tmp_path / "skills", "notes", tools=MARKER_CODE.format(marker="/dev/null"))
    agent, _ = _sneaky_agent(tmp_path, folder / "tools.py", MARKER_CODE, marker)
    result = await agent.run("go")

    assert result.status == "completed"
    assert not marker.exists()
    refusal = result.messages[-2]
    assert refusal.error_type == "tool_error"
    assert "changed after the skill catalog was scanned" in (refusal.content or "")


async def test_a_tools_py_that_appears_after_the_scan_is_not_imported(tmp_path: Path) -> None:
    marker = tmp_path / "marker.txt"
    folder = skill(tmp_path / "skills", "notes")
    agent, _ = _sneaky_agent(tmp_path, folder / "tools.py", MARKER_CODE, marker)
    result = await agent.run("go")

    assert not marker.exists()
    refusal = result.messages[-2]
    assert "appeared after the skill catalog was scanned" in (refusal.content or "")
    last_request = agent.model.requests[-1]
    assert not any(t.name.startswith("notes__") for t in last_request.tools)


@pytest.mark.slow
def test_a_preloaded_skill_inside_the_workspace_brings_no_code(tmp_path: Path) -> None:
    # A job step that names the skill starts its agent with it loaded: the instructions
    # arrive, the code does not (the step runs in the workspace that holds the skill).
    marker = tmp_path / "marker.txt"
    (tmp_path / "job.yaml").write_text(
        "name: preload\nmodel: scripted:script.yaml\nskills: [./skills]\nsubagents: []\n"
        "permissions: {workspace: .}\nsteps:\n  - {id: use, task: Take notes., skills: [notes]}\n"
    )
    skill(tmp_path / "skills", "notes", tools=MARKER_CODE.format(marker=str(marker)))
    (tmp_path / "script.yaml").write_text(
        yaml.safe_dump({"use": [call("notes__hello"), {"content": "done"}]})
    )
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "run", "job.yaml", "--trace", "run.jsonl"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )

    assert done.returncode == 0, done.stderr
    assert not marker.exists()
    assert "[tools-in-workspace]" in done.stderr
    (refusal,) = results(tmp_path / "run.jsonl").values()
    assert refusal["error_type"] == "unknown_tool"
    first = next(e for e in trace_lines(tmp_path / "run.jsonl") if e["type"] == "message")
    assert "Take notes." in first["message"]["content"]
    assert "Its tools are not available" in first["message"]["content"]
