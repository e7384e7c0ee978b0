"""`orchestrator skills ...` run as a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from skill_factory import ANTHROPIC_SKILLS, write_skill


def orchestrator(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_list_shows_user_skills_first_then_builtins(tmp_path: Path) -> None:
    write_skill(tmp_path / "mine", "alpha", description="First of mine.")
    done = orchestrator("skills", "list", "--skills", tmp_path / "mine", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    names = [line.split()[0] for line in done.stdout.splitlines() if line and " " in line]
    assert names[:6] == ["alpha", "data", "files", "http", "python", "shell"]
    assert "First of mine." in done.stdout


def test_list_as_json_and_without_builtins(tmp_path: Path) -> None:
    write_skill(tmp_path, "alpha", tools="from orchestrator import tool\n")
    done = orchestrator(
        "skills", "list", "--skills", tmp_path, "--no-builtin", "--json", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [
        {
            "name": "alpha",
            "source": str(tmp_path / "alpha"),
            "description": "A skill for tests.",
            "tools": True,
        }
    ]


def test_list_reports_warnings_on_stderr_once(tmp_path: Path) -> None:
    write_skill(tmp_path, "unclosed")
    (tmp_path / "unclosed" / "SKILL.md").write_text("---\nname: unclosed\n")
    done = orchestrator("skills", "list", "--skills", tmp_path, "--no-builtin", cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout.strip() == "No skills found."
    assert done.stderr.count("warning:") == 1
    assert "[frontmatter]; skill left out" in done.stderr


def test_show_prints_fields_tools_files_and_body(tmp_path: Path) -> None:
    done = orchestrator("skills", "show", "files", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("name: files\ndescription: Read, write and edit")
    assert "  - files__edit_file: Replace one exact, unique piece of text" in done.stdout
    assert "files: SKILL.md, tools.py" in done.stdout
    assert "# Files" in done.stdout


def test_show_an_unknown_skill_suggests_names(tmp_path: Path) -> None:
    done = orchestrator("skills", "show", "fils", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("Unknown skill 'fils'. Did you mean: files")


def test_show_a_skill_whose_tools_fail(tmp_path: Path) -> None:
    write_skill(tmp_path, "broken", tools="1 / 0\n")
    done = orchestrator("skills", "show", "broken", "--skills", tmp_path, cwd=tmp_path)
    assert done.returncode == 1
    assert "ZeroDivisionError" in done.stderr


def test_check_passes_the_builtin_skills() -> None:
    root = Path(__file__).resolve().parents[1]
    done = orchestrator("skills", "check", "skills", cwd=root)
    assert done.returncode == 0, done.stdout
    assert "5 folders checked: 5 valid, 0 with problems" in done.stdout
    assert "ok    skills/files (files, 6 tools)" in done.stdout


def test_check_reports_every_problem_and_fails(tmp_path: Path) -> None:
    write_skill(tmp_path, "good")
    write_skill(
        tmp_path,
        "messy",
        frontmatter=(
            f"name: Messy-Skill\ndescription: {'d' * 1100}\nauthor: me\n"
            f"compatibility: {'c' * 600}\nmetadata: [1]\n"
        ),
        tools="import not_a_real_module\n",
    )
    (tmp_path / "empty").mkdir()
    (tmp_path / "unparsable").mkdir()
    (tmp_path / "unparsable" / "SKILL.md").write_text("---\nname: [unclosed\n---\n")
    done = orchestrator("skills", "check", tmp_path, cwd=tmp_path)
    assert done.returncode == 1
    out = done.stdout
    assert f"ok    {tmp_path / 'good'} (good)" in out
    assert f"FAIL  {tmp_path / 'messy'}" in out
    for rule in (
        "unknown-field",
        "name-format",
        "name-folder",
        "description-length",
        "compatibility",
        "metadata-type",
        "tools-import",
    ):
        assert f"[{rule}]" in out
    assert "has no SKILL.md [skill-file]" in out
    assert "invalid YAML in SKILL.md, line 3" in out
    assert "4 folders checked: 1 valid, 3 with problems" in out


def test_check_a_single_skill_folder(tmp_path: Path) -> None:
    folder = write_skill(tmp_path, "solo")
    done = orchestrator("skills", "check", folder, cwd=tmp_path)
    assert done.returncode == 0
    assert "1 folder checked: 1 valid" in done.stdout


def test_check_is_strict_about_the_corpus(tmp_path: Path) -> None:
    if not ANTHROPIC_SKILLS.is_dir():
        pytest.skip(f"the shared corpus is not beside the repository ({ANTHROPIC_SKILLS})")
    done = orchestrator("skills", "check", ANTHROPIC_SKILLS, cwd=tmp_path)
    assert done.returncode == 1
    assert "12 folders checked: 11 valid, 1 with problems" in done.stdout
    assert "description is 1068 characters; at most 1024 allowed" in done.stdout


def test_skills_without_a_command_prints_help(tmp_path: Path) -> None:
    done = orchestrator("skills", cwd=tmp_path)
    assert done.returncode == 2
    assert "list" in done.stderr and "check" in done.stderr
