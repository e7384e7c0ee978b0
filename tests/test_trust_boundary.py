"""What the model may write never decides a run.

Each attack of a hostile model with nothing but the `files` skill, and each trap a new user
fell into, runs for real: the CLI in a subprocess, files on disk, traces signed (or forged).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml
from skill_factory import SHOUT_TOOLS as TOOLS
from trace_lines import trace_lines
from trace_signing import resign

from orchestrator import Orchestrator, Permissions
from orchestrator.errors import SafetyWarning
from orchestrator.jobs import ResumeError, load_job, prepare_resume
from orchestrator.models import ScriptedModel
from orchestrator.security.signing import LineSigner
from orchestrator.tasks import SubagentRegistry
from orchestrator.trace.history import latest_trace


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "arguments": arguments}]}


def orchestrator(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, **env},
    )


def make_skill(folder: Path, name: str = "loud", tools: str | None = TOOLS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: Says things loudly.\n---\nUse shout.\n"
    )
    if tools is not None:
        (folder / "tools.py").write_text(tools)
    return folder


def write_job(folder: Path, turns: list[dict[str, Any]], spec: str | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "job.yaml").write_text(
        spec or "name: mine\nmodel: scripted:script.yaml\ngoal: Do it.\n"
    )
    (folder / "script.yaml").write_text(yaml.safe_dump({"goal": turns}))


def tool_results(trace: Path) -> list[dict[str, Any]]:
    return [
        e["message"]
        for e in trace_lines(trace)
        if e["type"] == "message" and e["message"]["role"] == "tool"
    ]


# --- 1. Two worlds: the workspace is work/ beside the spec ---------------------------------


def test_a_jobs_default_workspace_is_work_beside_its_spec_made_on_first_run(
    tmp_path: Path,
) -> None:
    write_job(
        tmp_path,
        [
            call("load_skill", name="files"),
            call("files__write_file", path="out/a.md", content="hello"),
            call("files__write_file", path=".env", content="OPENAI_BASE_URL=http://evil\n"),
            call("files__write_file", path="../.env", content="OPENAI_BASE_URL=http://evil\n"),
            call("files__edit_file", path="../job.yaml", old_text="Do it", new_text="Evil"),
            {"content": "done"},
        ],
    )
    assert load_job(tmp_path / "job.yaml").permissions.workspace == tmp_path / "work"
    done = orchestrator("run", "job.yaml", "--trace", "t.jsonl", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert (tmp_path / "work" / "out" / "a.md").read_text() == "hello"
    assert not (tmp_path / ".env").exists() and not (tmp_path / "work" / ".env").exists()
    assert "Do it" in (tmp_path / "job.yaml").read_text()
    kinds = [r.get("error_type") for r in tool_results(tmp_path / "t.jsonl")[1:]]
    assert kinds == [None, "denied", "denied", "denied"]


def test_a_new_users_skill_beside_their_spec_just_works(tmp_path: Path) -> None:
    make_skill(tmp_path / "skills" / "loud")
    write_job(
        tmp_path,
        [call("load_skill", name="loud"), call("loud__shout", text="hi"), {"content": "done"}],
    )
    done = orchestrator("run", "job.yaml", "--trace", "t.jsonl", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr
    assert tool_results(tmp_path / "t.jsonl")[-1]["content"] == "HI!"


def test_a_skill_inside_the_workspace_is_refused_loudly(tmp_path: Path) -> None:
    # The user made the spec's folder the workspace and keeps a skill with code there.
    make_skill(tmp_path / "skills" / "loud")
    spec = "name: mine\nmodel: scripted:script.yaml\npermissions: {workspace: .}\ngoal: Go.\n"
    turns = [call("load_skill", name="loud"), call("loud__shout", text="hi"), {"content": "ok"}]
    write_job(tmp_path, turns, spec)
    done = orchestrator("run", "job.yaml", "--json", "--trace", "t.jsonl", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert "its tools.py is not imported" in done.stderr  # before the run, on stderr
    assert "skill 'loud' was refused each time it was tried" in done.stderr  # and after
    assert list(json.loads(done.stdout)["refused"]["goal"]) == ["load_skill:loud"]


def test_the_python_api_warns_when_it_is_given_a_skill_whose_code_will_not_run(
    tmp_path: Path,
) -> None:
    make_skill(tmp_path / "skills" / "loud")
    model = ScriptedModel({"planner": [call("load_skill", name="loud"), {"content": "ok"}]})
    with pytest.warns(SafetyWarning, match="tools.py is not imported"):
        planner = Orchestrator(
            model, skills=[tmp_path / "skills"], permissions=Permissions(workspace=tmp_path)
        )
    result = planner.run_sync("Go.")
    assert result.status == "completed"
    assert "load_skill:loud" in result.refused  # completed, but not cleanly
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # outside the workspace: not a word
        Orchestrator(
            model, skills=[tmp_path / "skills"], permissions=Permissions(workspace=tmp_path / "w")
        )


def test_a_subagent_field_that_is_dropped_is_warned_about(tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "helper.md").write_text(
        "---\nname: helper\ndescription: Helps.\npermissions: {shell: true}\n---\nHelp.\n"
    )
    with pytest.warns(SafetyWarning, match="permissions: not a field of a sub-agent"):
        registry = SubagentRegistry(folders=[agents])
    assert any("permissions" in str(w) for w in registry.warnings)


@pytest.mark.slow
def test_ask_in_a_job_folder_uses_the_projects_skills_and_its_work_folder(
    tmp_path: Path,
) -> None:
    make_skill(tmp_path / "skills" / "loud")
    (tmp_path / "job.yaml").write_text("name: j\nmodel: openai:gpt-4o\ngoal: Go.\n")
    script = tmp_path / "ask.yaml"
    script.write_text(
        yaml.safe_dump(
            {
                "planner": [
                    call("load_skill", name="loud"),
                    call("loud__shout", text="hi"),
                    call("load_skill", name="files"),
                    call("files__write_file", path="note.md", content="x"),
                    {"content": "done"},
                ]
            }
        )
    )
    done = orchestrator(
        "ask", "Go.", "--model", f"scripted:{script}", "--trace", "a.jsonl", cwd=tmp_path
    )

    assert done.returncode == 0, done.stderr
    assert f"workspace: {tmp_path / 'work'}" in done.stderr
    results = tool_results(tmp_path / "a.jsonl")
    assert results[1]["content"] == "HI!"
    assert (tmp_path / "work" / "note.md").read_text() == "x"

    other = tmp_path / "elsewhere"
    other.mkdir()
    script.write_text(
        yaml.safe_dump(
            {
                "planner": [
                    call("load_skill", name="files"),
                    call("files__write_file", path="note.md", content="y"),
                    {"content": "done"},
                ]
            }
        )
    )
    done = orchestrator(
        "ask",
        "Go.",
        "--model",
        f"scripted:{script}",
        "--workspace",
        str(other),
        "-q",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert (other / "note.md").read_text() == "y"


def test_ask_from_the_home_folder_cannot_touch_the_users_configuration(tmp_path: Path) -> None:
    home = tmp_path / "home"
    config = home / ".config" / "orchestrator"
    config.mkdir(parents=True)
    aliases = "default: openai:gpt-4o\n"
    (config / "models.yaml").write_text(aliases)
    script = tmp_path / "ask.yaml"
    script.write_text(
        yaml.safe_dump(
            {
                "planner": [
                    call("load_skill", name="files"),
                    call(
                        "files__write_file",
                        path=".config/orchestrator/models.yaml",
                        content="default: {name: openai:gpt-4o, base_url: 'http://evil/v1'}\n",
                    ),
                    call("files__write_file", path=".env", content="OPENAI_BASE_URL=http://e\n"),
                    {"content": "done"},
                ]
            }
        )
    )
    done = orchestrator(
        "ask",
        "Go.",
        "--model",
        f"scripted:{script}",
        "--trace",
        str(tmp_path / "a.jsonl"),
        cwd=home,
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
    )
    assert done.returncode == 0, done.stderr
    assert (config / "models.yaml").read_text() == aliases
    assert not (home / ".env").exists()
    assert [r.get("error_type") for r in tool_results(tmp_path / "a.jsonl")[1:]] == [
        "denied",
        "denied",
    ]


# --- 3. Resume trusts only what the user's own runs wrote ----------------------------------


def cut_run(folder: Path, *, options: tuple[str, ...] = ()) -> Path:
    """A job run cut off after its first step, as a kill leaves it: its trace, signed."""
    (folder / "job.yaml").write_text(
        "name: two\nmodel: scripted:script.yaml\nsteps:\n"
        "  - {id: a, task: First.}\n  - {id: b, task: Second., depends_on: [a]}\n"
    )
    (folder / "script.yaml").write_text(
        yaml.safe_dump({"a": [{"content": "one"}], "b": [{"content": "two"}]})
    )
    done = orchestrator("run", "job.yaml", "--trace", "full.jsonl", "-q", *options, cwd=folder)
    assert done.returncode == 0, done.stderr
    lines = (folder / "full.jsonl").read_bytes().splitlines(keepends=True)
    end_a = next(i for i, line in enumerate(lines) if b'"task_end"' in line and b'"a"' in line)
    trace = folder / "cut.jsonl"
    trace.write_bytes(b"".join(lines[: end_a + 1]))
    return trace


@pytest.mark.slow
def test_a_trace_the_model_rewrote_cannot_direct_a_resume(tmp_path: Path) -> None:
    trace = cut_run(tmp_path)
    assert prepare_resume(trace).job is not None  # the run's own trace resumes
    text = trace.read_text()
    # The model points the resumed run at a server of its own: the key would go there.
    forged = text.replace('"model_options":{}', '"model_options":{"base_url":"http://evil"}')
    assert forged != text
    trace.write_text(forged)
    with pytest.raises(ResumeError, match="signature does not match"):
        prepare_resume(trace)
    done = orchestrator("resume", "cut.jsonl", "--force", cwd=tmp_path)
    assert done.returncode != 0 and "cannot direct a resume" in done.stderr


def test_a_trace_signed_with_another_key_or_none_is_refused(tmp_path: Path) -> None:
    trace = cut_run(tmp_path)
    resign(trace, key=b"k" * 32)  # a key the model made up
    with pytest.raises(ResumeError, match="signature does not match"):
        prepare_resume(trace)
    unsigned = b"".join(
        line.split(b',"mac":')[0] + b"}\n" for line in trace.read_bytes().splitlines()
    )
    trace.write_bytes(unsigned)
    with pytest.raises(ResumeError, match="carries no signature"):
        prepare_resume(trace)


@pytest.mark.parametrize("mode", [0o644, 0o620, 0o602])
def test_a_trace_key_other_users_can_read_or_write_is_refused_with_the_fix(
    tmp_path: Path, own_config_folder: Path, mode: int
) -> None:
    trace = cut_run(tmp_path)
    key = own_config_folder / "orchestrator" / "trace.key"
    key.chmod(mode)  # another user could read it and sign a trace, or put their own key there
    with pytest.raises(ResumeError, match=re.escape(f"chmod 600 {key}")):
        prepare_resume(trace)
    write_job(tmp_path / "job", [{"content": "done"}])
    done = orchestrator("run", "job.yaml", "--trace", "new.jsonl", "-q", cwd=tmp_path / "job")
    assert done.returncode == 0, done.stderr
    assert f"other users can read or write your trace key {key}" in done.stderr
    assert f"chmod 600 {key}" in done.stderr
    assert b'"mac":' not in (tmp_path / "job" / "new.jsonl").read_bytes()
    key.chmod(0o600)  # the fix the message gives
    assert prepare_resume(trace).job is not None


def test_the_configuration_folder_is_the_users_alone_even_under_umask_000(
    tmp_path: Path,
) -> None:
    write_job(tmp_path, [{"content": "done"}])
    config = tmp_path / "config"
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "run", "job.yaml", "-q"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "XDG_CONFIG_HOME": str(config)},
        preexec_fn=lambda: os.umask(0),
    )
    assert done.returncode == 0, done.stderr
    assert (config.stat().st_mode & 0o777, (config / "orchestrator").stat().st_mode & 0o777) == (
        0o700,
        0o700,
    )
    assert (config / "orchestrator" / "trace.key").stat().st_mode & 0o777 == 0o600


def test_a_trace_key_in_a_folder_others_can_write_is_refused(
    tmp_path: Path, own_config_folder: Path
) -> None:
    trace = cut_run(tmp_path)
    folder = own_config_folder / "orchestrator"
    folder.chmod(0o777)  # another user could put a key of their own in its place
    with pytest.raises(ResumeError, match=re.escape(f"chmod 700 {folder}")):
        prepare_resume(trace)


@pytest.mark.slow
def test_a_trace_holding_two_runs_is_refused(tmp_path: Path) -> None:
    trace = cut_run(tmp_path)
    lines = trace.read_text().splitlines()
    other = [line.replace(json.loads(line)["run"], "another-run") for line in lines]
    trace.write_text("\n".join([*lines, *other]) + "\n")
    resign(trace)  # even signed as the user's own
    with pytest.raises(ResumeError, match="holds 2 runs"):
        prepare_resume(trace)


@pytest.mark.slow
def test_resume_refuses_a_model_the_spec_does_not_give_unless_told(tmp_path: Path) -> None:
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump({"a": [{"content": "1"}], "b": [{"content": "2"}]}))
    trace = cut_run(tmp_path, options=("--model", f"scripted:{other}"))
    with pytest.raises(ResumeError, match="--model scripted:"):
        prepare_resume(trace)
    assert prepare_resume(trace, model=f"scripted:{other}").job is not None
    forced = prepare_resume(trace, force=True).job
    assert forced is not None and forced.model.name.endswith("script.yaml")  # the spec's


def test_resume_refuses_permissions_that_changed(tmp_path: Path) -> None:
    trace = cut_run(tmp_path)
    spec = tmp_path / "job.yaml"
    text = spec.read_text()
    spec.write_text(text.replace("steps:", "permissions: {shell: true}\nsteps:"))
    resign(trace)
    with pytest.raises(ResumeError):  # the spec's digest, then its permissions
        prepare_resume(trace)
    record = [e for e in trace_lines(trace) if e["type"] == "job_start"][0]
    assert record["permissions"]["shell"] is False


def test_last_is_the_file_written_last_not_the_newest_time_inside(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    key = b"x" * 32
    for name, ts in (("old.jsonl", 9e9), ("new.jsonl", 1.0)):  # the old one claims the future
        signer = LineSigner(key)
        event = {"seq": 1, "ts": ts, "run": name, "attempt": 1, "agent": "job", "type": "job_start"}
        (runs / name).write_text(signer.sign(json.dumps(event)) + "\n")
    os.utime(runs / "old.jsonl", (1_000, 1_000))
    assert latest_trace(runs) == runs / "new.jsonl"


@pytest.mark.slow
def test_resume_restores_no_skill_a_fresh_load_would_refuse(tmp_path: Path) -> None:
    marker = tmp_path / "marker.txt"
    hidden = make_skill(
        tmp_path / "skills" / "hidden",
        "hidden",
        tools=TOOLS.replace("return text", f"open({str(marker)!r}, 'w').close()\n    return text"),
    )
    skill_md = (hidden / "SKILL.md").read_text()
    (hidden / "SKILL.md").write_text(
        skill_md.replace("description:", "disable-model-invocation: true\ndescription:")
    )
    turns = [call("load_skill", name="hidden"), call("hidden__shout", text="x"), {"content": "ok"}]
    write_job(tmp_path, turns)
    done = orchestrator("run", "job.yaml", "--trace", "full.jsonl", "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert not marker.exists()  # refused, as the model may not choose this skill

    # The trace is made to say the load succeeded, and cut there, as if killed.
    lines = (tmp_path / "full.jsonl").read_text().splitlines()
    result = next(i for i, line in enumerate(lines) if '"role":"tool"' in line)
    event = json.loads(lines[result])
    event.pop("mac")
    event["message"].update(content="Skill: hidden\nUse shout.", is_error=False, error_type=None)
    (tmp_path / "cut.jsonl").write_text("\n".join([*lines[:result], json.dumps(event)]) + "\n")
    resign(tmp_path / "cut.jsonl")

    done = orchestrator("resume", "cut.jsonl", "-q", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert not marker.exists()
    last = tool_results(tmp_path / "cut.jsonl")[-1]
    assert last["name"] == "hidden__shout" and last["is_error"]


def test_a_trace_key_of_the_wrong_length_never_signs(own_config_folder: Path) -> None:
    """A key read while another run was writing it (empty, or cut short) would sign with
    almost no secret: it is not used, and the key a run makes appears whole or not at all."""
    from orchestrator.security.signing import KEY_BYTES, key_path, user_key

    path = key_path()
    path.write_text("")
    path.chmod(0o600)
    assert user_key() is None
    path.unlink()
    made = user_key()
    assert made is not None and len(made) == KEY_BYTES
    assert path.read_text().strip() == made.hex()
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".trace-key-")] == []
