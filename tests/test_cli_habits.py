"""Command-line habits, as a user meets them in real processes: short flags, a spec on standard
input, "did you mean" for typos, the help listing, counted nouns, and `--version` without the
library behind it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_process import orchestrator

from orchestrator.cli import COMMANDS, build_parser

SCRIPT = "hello: [{content: hi from the script}]\n"
OTHER = "hello: [{content: hi from the other script}]\n"
JOB = "name: t\nmodel: scripted:script.yaml\nsteps:\n  - {id: hello, task: Say hello.}\n"


def job_folder(folder: Path) -> Path:
    (folder / "script.yaml").write_text(SCRIPT)
    (folder / "other.yaml").write_text(OTHER)
    (folder / "job.yaml").write_text(JOB)
    return folder / "job.yaml"


def test_short_flags_for_model_quiet_and_version(tmp_path: Path) -> None:
    job_folder(tmp_path)

    done = orchestrator("run", "job.yaml", "-q", "-m", "scripted:other.yaml", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert done.stdout == "hi from the other script\n"
    assert done.stderr == ""
    version = orchestrator("-V", cwd=tmp_path)
    assert version.returncode == 0
    assert version.stdout.startswith("orchestrator ") and version.stdout.strip()[-1].isdigit()


@pytest.mark.slow
def test_a_spec_from_standard_input_resolves_paths_from_the_working_folder(
    tmp_path: Path,
) -> None:
    (tmp_path / "script.yaml").write_text(SCRIPT)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "script.yaml").write_text(OTHER)

    done = orchestrator("run", "-", "--quiet", cwd=tmp_path, stdin=JOB)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hi from the script\n"

    moved = orchestrator("run", "-", "--quiet", cwd=elsewhere, stdin=JOB)
    assert moved.stdout == "hi from the other script\n"

    broken = orchestrator("validate", "-", cwd=tmp_path, stdin="name: [\n")
    assert broken.returncode == 2
    assert broken.stderr.startswith("error: <stdin>: line 2")


@pytest.mark.slow
def test_a_mistyped_flag_gets_the_closest_ones(tmp_path: Path) -> None:
    job_folder(tmp_path)

    typo = orchestrator("run", "job.yaml", "--sett", "x=1", cwd=tmp_path)

    assert typo.returncode == 2
    assert "unrecognized arguments: --sett x=1 (did you mean --set?)" in typo.stderr
    # A prefix is not taken for the flag it starts: `--mod` is refused, not read as --model.
    prefix = orchestrator("run", "job.yaml", "--mod", "scripted:other.yaml", cwd=tmp_path)
    assert prefix.returncode == 2 and "(did you mean --model?)" in prefix.stderr
    command = orchestrator("rnu", "job.yaml", cwd=tmp_path)
    assert command.returncode == 2 and "(did you mean run?)" in command.stderr


def with_imports(*args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """`python -m orchestrator ARGS`, and the modules it imported (`-X importtime`)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "orchestrator", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done, {line.split("|")[-1].strip() for line in done.stderr.splitlines()}


def test_help_lists_every_command_in_order_with_its_line() -> None:
    shown, imported = with_imports("--help")

    listed = [line.split()[0] for line in shown.stdout.splitlines() if line.startswith("    ")]
    assert listed == [command.name for command in COMMANDS]
    for command in COMMANDS:
        line = rf"^    {command.name} +{re.escape(command.help)}$"
        assert re.search(line, shown.stdout, re.MULTILINE), command
    # No command's module and nothing heavy behind it was imported to print the help.
    assert {"pydantic", "httpx", "rich", "orchestrator.planner", "orchestrator.cli.run"}.isdisjoint(
        imported
    )
    assert "orchestrator.cli" in imported


def test_the_help_table_says_what_each_module_registers() -> None:
    full = build_parser()
    (commands,) = [a for a in full._actions if a.dest == "command"]
    helps = {choice.dest: choice.help for choice in commands._choices_actions}
    assert helps == {command.name: command.help for command in COMMANDS}


def test_version_imports_nothing_heavy() -> None:
    done, imported = with_imports("--version")
    assert done.stdout.startswith("orchestrator ")
    heavy = {"pydantic", "httpx", "networkx", "tiktoken", "rich", "yaml", "orchestrator.agent"}
    assert heavy.isdisjoint(imported), heavy & imported


DEFINITION = (
    "---\nname: {name}\ndescription: Does {name} things.\nskills: [files]\n---\nBe {name}.\n"
)


@pytest.mark.slow
def test_subagents_check_show_and_list_as_json(tmp_path: Path) -> None:
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.mkdir()
    bad.mkdir()
    (good / "alpha.md").write_text(DEFINITION.format(name="alpha"))
    (bad / "broken.md").write_text("no frontmatter")

    both = orchestrator("subagents", "check", good, bad, cwd=tmp_path)
    assert both.returncode == 1
    assert "broken.md: no YAML frontmatter" in both.stdout
    assert "2 folders checked: 1 problem" in both.stderr
    one = orchestrator("subagents", "check", good, cwd=tmp_path)
    assert one.returncode == 0 and "(1 folder checked)" in one.stdout

    listing = orchestrator(
        "subagents", "list", "--subagents", good, "--no-builtin", "--json", cwd=tmp_path
    )
    (alpha,) = [agent for agent in json.loads(listing.stdout) if agent["name"] == "alpha"]
    assert alpha["name"] == "alpha" and alpha["skills"] == ["files"]
    assert alpha["path"] == str(good / "alpha.md") and alpha["system"] == "Be alpha."

    shown = orchestrator("subagents", "show", "alpha", "--subagents", good, cwd=tmp_path)
    assert shown.returncode == 0
    assert "description: Does alpha things." in shown.stdout and "skills: files" in shown.stdout
    assert shown.stdout.rstrip().endswith("Be alpha.")
    missing = orchestrator("subagents", "show", "alhpa", "--subagents", good, cwd=tmp_path)
    assert missing.returncode == 1 and "(did you mean 'alpha'?)" in missing.stderr


@pytest.mark.slow
def test_counts_in_messages_agree_with_their_nouns(tmp_path: Path) -> None:
    job_folder(tmp_path)
    valid = orchestrator("validate", "job.yaml", cwd=tmp_path)
    assert valid.stdout == "ok: t (1 step)\n"
    skills = orchestrator("skills", "list", "--skills", tmp_path, "--no-builtin", cwd=tmp_path)
    assert "0 skills from:" in skills.stdout or "No skills found." in skills.stdout
