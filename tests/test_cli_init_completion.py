"""`orchestrator init` scaffolds a job that runs at once, offline, and passes its own eval
(from either template); `orchestrator completion` prints scripts that a real bash completes
commands, actions and flags with."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_process import orchestrator
from trace_lines import trace_lines


def test_init_makes_a_job_that_runs_offline(tmp_path: Path) -> None:
    made = orchestrator("init", "my-job", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    folder = tmp_path / "my-job"
    for name in ("job.yaml", "job.script.yaml", "subagents/summarizer.md", "work/notes.md"):
        assert (folder / name).is_file()
        assert f"created {Path('my-job') / name}" in made.stdout
    assert (folder / "skills/word-count/tools.py").is_file()

    done = orchestrator("run", "my-job/job.yaml", "--json", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    summary = (folder / "work/out/summary.md").read_text()
    notes = (folder / "work/notes.md").read_text()
    assert f"({len(notes.split())} words)" in summary
    events = trace_lines(next((tmp_path / ".orchestrator/runs").glob("*.jsonl")))
    tools = [e["name"] for e in events if e["type"] == "tool_end" and "error_type" not in e]
    assert "word-count__count_words" in tools and "fork" in tools
    assert not [e for e in events if e["type"] == "tool_end" and "error_type" in e]
    counted = next(
        e["message"]["content"]
        for e in events
        if e["type"] == "message" and e["message"].get("name") == "word-count__count_words"
    )
    assert counted.startswith(f"{len(notes.split())} words")


def test_the_steps_template_runs_three_steps_the_second_using_the_firsts_fields(
    tmp_path: Path,
) -> None:
    made = orchestrator("init", "steps-job", "--template", "steps", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    folder = tmp_path / "steps-job"
    assert not (folder / "subagents").exists()
    assert orchestrator("validate", "steps-job/job.yaml", cwd=tmp_path).stdout == (
        "ok: steps-job (3 steps)\n"
    )

    done = orchestrator("run", "steps-job/job.yaml", "--json", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    notes = (folder / "work/notes.md").read_text()
    counts = {"words": len(notes.split()), "lines": len(notes.splitlines())}
    steps = json.loads(done.stdout)["steps"]
    assert [(s["id"], s["status"]) for s in steps] == [
        ("measure", "completed"),
        ("summarize", "completed"),
        ("report", "completed"),
    ]
    assert steps[0]["data"] == counts
    report = (folder / "work/out/report.md").read_text()
    assert f"({counts['words']} words, {counts['lines']} lines)" in report
    events = trace_lines(next((tmp_path / ".orchestrator/runs").glob("*.jsonl")))
    (task,) = [
        e["message"]["content"]
        for e in events
        if e["type"] == "message" and e["agent"] == "summarize" and e["message"]["role"] == "user"
    ]
    assert f"It has {counts['words']} words on {counts['lines']} lines" in task
    assert not [e for e in events if e["type"] == "tool_end" and "error_type" in e]


@pytest.mark.parametrize("template", ["goal", "steps"])
def test_each_template_passes_its_own_eval_and_the_eval_can_fail(
    template: str, tmp_path: Path
) -> None:
    assert orchestrator("init", "job", "--template", template, cwd=tmp_path).returncode == 0

    passed = orchestrator("eval", "job/job.eval.yaml", "--json", cwd=tmp_path)

    assert passed.returncode == 0, passed.stderr
    (variant,) = json.loads(passed.stdout)["variants"]
    assert (variant["passed"], variant["runs"]) == (1, 1)

    eval_file = tmp_path / "job/job.eval.yaml"
    eval_file.write_text(eval_file.read_text().replace("{words: 35}", "{words: 36}"))
    failed = orchestrator("eval", "job/job.eval.yaml", "--min-pass", "1", cwd=tmp_path)
    assert failed.returncode == 1, failed.stderr
    assert "0/1" in failed.stdout


def test_init_refuses_to_overwrite_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "subagents").mkdir()
    (tmp_path / "subagents" / "summarizer.md").write_text("mine")

    refused = orchestrator("init", cwd=tmp_path)

    assert refused.returncode == 2
    assert "not overwriting subagents/summarizer.md" in refused.stderr
    assert (tmp_path / "subagents" / "summarizer.md").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["subagents"]


def _complete(script: Path, line: str) -> list[str]:
    """What bash offers for the last word of `line` (a space at the end: a new word)."""
    words = line.split(" ")
    program = (
        f"source {script}\n"
        f"COMP_WORDS=({' '.join(repr(w) for w in words)})\n"
        f"COMP_CWORD={len(words) - 1}\n"
        "_orchestrator\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
        "complete -p orchestrator\n"
    )
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", program],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    *offered, registered = done.stdout.splitlines()
    assert registered.endswith("-F _orchestrator orchestrator")
    return offered


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_bash_script_completes_commands_actions_and_flags(tmp_path: Path) -> None:
    done = orchestrator("completion", "bash", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    script = tmp_path / "orchestrator.bash"
    script.write_text(done.stdout)

    assert _complete(script, "orchestrator r") == ["run", "run-batch", "resume", "report"]
    assert "--model" in _complete(script, "orchestrator run job.yaml --")
    assert _complete(script, "orchestrator run job.yaml --mo") == ["--model", "--model-option"]
    assert _complete(script, "orchestrator skills ") == ["list", "show", "check", "-h", "--help"]
    assert "--json" in _complete(script, "orchestrator subagents list --")
    assert _complete(script, "orchestrator completion ") == ["bash", "zsh", "-h", "--help"]
    assert _complete(script, "orchestrator -") == ["-h", "--help", "-V", "--version"]


@pytest.mark.slow
def test_the_zsh_script_loads_the_same_completion_through_bashcompinit(tmp_path: Path) -> None:
    zsh = orchestrator("completion", "zsh", cwd=tmp_path).stdout
    bash = orchestrator("completion", "bash", cwd=tmp_path).stdout
    assert zsh.startswith("#compdef orchestrator\n") and "bashcompinit" in zsh
    assert zsh.endswith(bash)
    if shutil.which("zsh"):  # a real zsh, where there is one
        env = {**os.environ, "ZDOTDIR": str(tmp_path)}
        (tmp_path / "c.zsh").write_text(zsh)
        loaded = subprocess.run(
            ["zsh", "-f", "-c", f"source {tmp_path / 'c.zsh'} && complete -p orchestrator"],
            capture_output=True,
            text=True,
            env=env,
            timeout=30,
        )
        assert loaded.returncode == 0, loaded.stderr


def test_completion_needs_a_known_shell(tmp_path: Path) -> None:
    done = orchestrator("completion", "fish", cwd=tmp_path)
    assert done.returncode == 2 and "invalid choice: 'fish'" in done.stderr
