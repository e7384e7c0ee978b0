"""Sub-agent definitions: lenient loading, strict checking, the shipped ones."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.errors import ConfigError
from orchestrator.tasks.subagents import (
    GENERAL,
    SubagentRegistry,
    check_subagent_folder,
    parse_subagent,
)

REPO = Path(__file__).resolve().parents[1]


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


GOOD = """---
name: analyst
description: Crunches numbers.
skills: [data, files]
model: scripted:script.yaml
max_steps: 7
max_tokens: 5000
---
You are an analyst.
"""


def test_a_definition_is_parsed_with_its_body_as_system_prompt(tmp_path: Path) -> None:
    agent = parse_subagent(write(tmp_path, "analyst.md", GOOD))
    assert (agent.name, agent.max_steps, agent.max_tokens) == ("analyst", 7, 5000)
    assert agent.skills == ["data", "files"]
    assert agent.system == "You are an analyst."
    assert agent.allows_skill("data") and not agent.allows_skill("shell")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("no frontmatter here", "no YAML frontmatter"),
        ("---\nfoo: [unclosed\n---\nbody", "not valid YAML"),
        ("---\n- a list\n---\nbody", "must be a mapping"),
        ("---\nname: a\n---\n", "description: Field required"),
        ("---\nname: a\ndescription: d\nmax_steps: 0\n---\nbody", "max_steps"),
    ],
)
def test_bad_definitions_name_the_file_and_rule(tmp_path: Path, text: str, problem: str) -> None:
    path = write(tmp_path, "bad.md", text)
    with pytest.raises(ConfigError) as caught:
        parse_subagent(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert problem in str(caught.value)


def test_what_can_be_made_up_for_loads_with_a_warning(tmp_path: Path) -> None:
    no_name = write(tmp_path, "fallback.md", "---\ndescription: no name\n---\nbody")
    bad_name = write(tmp_path, "x.md", "---\nname: Bad_Name\ndescription: d\n---\nbody")
    extra = write(tmp_path, "a.md", "---\nname: a\ndescription: d\ncolour: red\n---\nbody")
    prose = write(tmp_path, "p.md", "---\nname: p\n---\n# P\n\nReviews prose.\n")
    assert parse_subagent(no_name).name == "fallback"
    assert parse_subagent(bad_name).name == "bad-name"
    assert parse_subagent(extra).metadata == {"colour": "red"}
    assert parse_subagent(prose).description == "Reviews prose."
    registry = SubagentRegistry(folders=[tmp_path])
    warnings = [str(w) for w in registry.warnings]
    assert any(
        "x.md: name 'Bad_Name' breaks the naming rules; loaded as 'bad-name'" in w for w in warnings
    )
    assert not any("a.md" in w for w in warnings)
    problems = [str(p) for p in check_subagent_folder(tmp_path)]
    assert any("a.md: colour: unknown field" in p for p in problems)


def test_loading_is_lenient_and_the_first_folder_wins(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    write(first, "analyst.md", GOOD)
    write(first, "broken.md", "no frontmatter")
    write(second, "analyst.md", GOOD.replace("Crunches numbers.", "Shadowed."))
    write(second, "writer.md", "---\nname: writer\ndescription: Writes.\n---\nWrite.")
    registry = SubagentRegistry(folders=[first, second, tmp_path / "missing"])

    assert registry.names == ["analyst", "writer", GENERAL]
    analyst = registry.get("analyst")
    assert analyst is not None and analyst.description == "Crunches numbers."
    warnings = [str(w) for w in registry.warnings]
    assert any("broken.md: left out: no YAML frontmatter" in w for w in warnings)
    assert any("already defined by" in w and "second" in w for w in warnings)
    assert any("missing: not a folder" in w for w in warnings)
    assert "- writer: Writes." in registry.index()


def test_the_strict_check_reports_every_problem(tmp_path: Path) -> None:
    write(tmp_path, "analyst.md", GOOD)
    write(tmp_path, "other-name.md", GOOD)
    write(tmp_path, "empty.md", "---\nname: empty\ndescription: Nothing inside.\n---\n")
    write(tmp_path, "broken.md", "---\nfoo: [\n---\n")
    problems = [str(p) for p in check_subagent_folder(tmp_path)]
    assert any("broken.md: " in p and "not valid YAML" in p for p in problems)
    assert any("empty.md: the body (the system prompt) is empty" in p for p in problems)
    assert any("other-name.md: name 'analyst' differs from the file name" in p for p in problems)
    assert any("other-name.md: name 'analyst' also defined in" in p for p in problems)
    assert check_subagent_folder(REPO / "subagents") == []


def test_shipped_subagents_load() -> None:
    registry = SubagentRegistry(folders=[REPO / "subagents"])
    assert registry.warnings == []
    assert {"general", "researcher", "reviewer", "writer"} <= set(registry.names)


@pytest.mark.slow
def test_the_check_command_exits_non_zero_on_problems(tmp_path: Path) -> None:
    write(tmp_path, "broken.md", "no frontmatter")
    bad = subprocess.run(
        [sys.executable, "-m", "orchestrator", "subagents", "check", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 1
    assert "broken.md: no YAML frontmatter" in bad.stdout
    good = subprocess.run(
        [sys.executable, "-m", "orchestrator", "subagents", "check", str(REPO / "subagents")],
        capture_output=True,
        text=True,
    )
    assert good.returncode == 0, good.stdout + good.stderr
    listing = subprocess.run(
        [sys.executable, "-m", "orchestrator", "subagents", "list", "--subagents", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert listing.returncode == 0
    assert "researcher" in listing.stdout and "left out" in listing.stderr
