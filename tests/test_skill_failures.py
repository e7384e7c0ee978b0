"""Failures a skill author must see: a `tools.py` that does not import, an MCP server that does
not start. Each is a warning on stderr naming the skill and the error, an error in
`trace show`, and, when asked (`--fail-on-skill-error`, `fail_on_skill_error: true`), the end
of the run. Played through the real command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cli_process import orchestrator

from orchestrator import read_trace

BROKEN_TOOLS = "import nonexistent_module_for_this_test\n"


def skill(root: Path, name: str, *, tools: str | None = None, mcp: object = None) -> Path:
    folder = root / "skills" / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: A skill named {name}.\n---\nUse its tools.\n",
        encoding="utf-8",
    )
    if tools is not None:
        (folder / "tools.py").write_text(tools, encoding="utf-8")
    if mcp is not None:
        (folder / ".mcp.json").write_text(json.dumps(mcp), encoding="utf-8")
    return folder


def job(root: Path, skill_name: str, extra: str = "", *, steps: bool = False) -> Path:
    load = {"tool_calls": [{"name": "load_skill", "arguments": {"name": skill_name}}]}
    key = "only" if steps else "goal"
    script = {key: [load, {"content": "done"}]}
    (root / "script.yaml").write_text(json.dumps(script), encoding="utf-8")
    body = "steps:\n  - {id: only, task: do it}\n" if steps else "goal: do it\n"
    path = root / "job.yaml"
    path.write_text(f"name: t\nmodel: scripted:script.yaml\n{extra}{body}", encoding="utf-8")
    return path


def test_a_tools_py_that_fails_to_import_is_a_warning_and_a_trace_error(tmp_path: Path) -> None:
    skill(tmp_path, "broken", tools=BROKEN_TOOLS)
    job(tmp_path, "broken")

    done = orchestrator("run", "job.yaml", "--trace", "t.jsonl", cwd=tmp_path)

    assert done.returncode == 0, done.stderr  # the run goes on: the model reads the failure
    warning = [line for line in done.stderr.splitlines() if "skill 'broken'" in line]
    assert warning and warning[0].startswith("warning: "), done.stderr
    assert "nonexistent_module_for_this_test" in warning[0]
    assert "tools.py" in warning[0]
    # With --quiet too: a failure never goes unsaid.
    quiet = orchestrator("run", "job.yaml", "--quiet", cwd=tmp_path)
    assert "skill 'broken'" in quiet.stderr and "nonexistent_module" in quiet.stderr

    events = [e for e in read_trace(tmp_path / "t.jsonl") if e.type == "skill_failed"]
    assert [(e.agent, e.skill) for e in events] == [("goal", "broken")]  # type: ignore[union-attr]
    shown = orchestrator("trace", "show", "t.jsonl", cwd=tmp_path)
    errors = shown.stdout.split("error")[-1]
    assert "skill 'broken' failed" in shown.stdout, shown.stdout
    assert "nonexistent_module_for_this_test" in errors
    as_json = json.loads(orchestrator("trace", "show", "t.jsonl", "--json", cwd=tmp_path).stdout)
    assert any("skill 'broken' failed" in e for e in as_json["errors"])


def test_fail_on_skill_error_ends_the_run_from_the_flag_or_the_spec(tmp_path: Path) -> None:
    skill(tmp_path, "broken", tools=BROKEN_TOOLS)
    job(tmp_path, "broken")

    flagged = orchestrator("run", "job.yaml", "--fail-on-skill-error", cwd=tmp_path)

    assert flagged.returncode == 3, flagged.stderr
    assert flagged.stdout.strip() != "done"  # the model was not called again
    assert "goal (planner): error: skill 'broken' failed" in flagged.stderr, flagged.stderr
    assert "nonexistent_module_for_this_test" in flagged.stderr

    job(tmp_path, "broken", "fail_on_skill_error: true\n", steps=True)
    spec = orchestrator("run", "job.yaml", "--json", cwd=tmp_path)
    assert spec.returncode == 3, spec.stderr
    result = json.loads(spec.stdout)
    assert result["status"] == "failed"
    assert "skill 'broken' failed" in result["steps"][0]["reason"]


def test_a_preloaded_skill_that_fails_is_reported_and_fails_the_run_when_asked(
    tmp_path: Path,
) -> None:
    skill(tmp_path, "broken", tools=BROKEN_TOOLS)
    (tmp_path / "script.yaml").write_text(json.dumps({"only": [{"content": "done"}]}))
    spec = (
        "name: t\nmodel: scripted:script.yaml\nsteps:\n  - {id: only, task: x, skills: [broken]}\n"
    )
    (tmp_path / "job.yaml").write_text(spec, encoding="utf-8")

    done = orchestrator("run", "job.yaml", "--trace", "t.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "warning: " in done.stderr and "skill 'broken'" in done.stderr, done.stderr
    assert "skill 'broken' failed" in orchestrator("trace", "show", "t.jsonl", cwd=tmp_path).stdout

    # Asked to fail on it, the run is refused before it starts, as `validate` refuses it.
    failed = orchestrator("run", "job.yaml", "--fail-on-skill-error", cwd=tmp_path)
    refusal = "error: job.yaml: steps[0].skills: skill 'broken' failed to load, and fail_on"
    assert failed.returncode == 2 and refusal in failed.stderr, failed.stderr
    checked = orchestrator("validate", "job.yaml", "--fail-on-skill-error", cwd=tmp_path)
    assert checked.returncode == 2 and refusal in checked.stderr, checked.stderr


NO_SERVER = {"mcpServers": {"gone": {"command": "/nonexistent/mcp-server-for-this-test"}}}


def test_an_mcp_server_that_cannot_start_is_a_warning_and_a_trace_error(tmp_path: Path) -> None:
    skill(tmp_path, "remote", mcp=NO_SERVER)
    job(tmp_path, "remote")

    done = orchestrator("run", "job.yaml", "--trace", "t.jsonl", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    warning = [line for line in done.stderr.splitlines() if "skill 'remote'" in line]
    assert warning and warning[0].startswith("warning: "), done.stderr
    assert "'gone'" in warning[0] and "mcp-server-for-this-test" in warning[0]
    shown = orchestrator("trace", "show", "t.jsonl", cwd=tmp_path)
    assert "skill 'remote' failed" in shown.stdout and "'gone'" in shown.stdout, shown.stdout

    failed = orchestrator("run", "job.yaml", "--fail-on-skill-error", cwd=tmp_path)
    assert failed.returncode == 3 and "skill 'remote' failed" in failed.stderr, failed.stderr


def test_skills_show_connect_exits_non_zero_when_a_server_cannot_start(tmp_path: Path) -> None:
    skill(tmp_path, "remote", mcp=NO_SERVER)

    shown = orchestrator("skills", "show", "remote", "--connect", cwd=tmp_path)

    assert shown.returncode == 1, shown.stdout + shown.stderr
    assert "error: skill 'remote': MCP server 'gone'" in shown.stderr, shown.stderr
    assert "mcp-server-for-this-test" in shown.stderr
    # Without --connect nothing starts, so nothing fails.
    assert orchestrator("skills", "show", "remote", cwd=tmp_path).returncode == 0


def test_skills_show_connect_exits_zero_when_every_server_starts(tmp_path: Path) -> None:
    server = Path(__file__).parent / "mcp_server.py"
    live = {"mcpServers": {"echo": {"command": sys.executable, "args": [str(server), "stdio"]}}}
    skill(tmp_path, "remote", mcp=live)

    shown = orchestrator("skills", "show", "remote", "--connect", cwd=tmp_path)

    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "echo: connected" in shown.stdout
