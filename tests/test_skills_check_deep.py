"""`orchestrator skills check` looks as deep as a run would: each warning and each failure
played by a folder crafted for it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_process import orchestrator
from skill_factory import ANTHROPIC_SKILLS, synthetic_skills, write_skill

from orchestrator.skills import check_folders
from orchestrator.skills.check import FolderReport


def only(reports: list[FolderReport]) -> FolderReport:
    assert len(reports) == 1, reports
    return reports[0]


def rules(problems: list[object]) -> list[str]:
    return [p.rule for p in problems]  # type: ignore[attr-defined]


UNTYPED_TOOLS = '''
from typing import Any

from orchestrator import tool

@tool
def fetch(url, retries: int = 2, extra: Any = None) -> str:
    """Fetch a page.

    Args:
        url: The page.
        retries: How often to try again.
        extra: Anything.
    """
    return url
'''


def test_untyped_tool_parameters_are_warnings(tmp_path: Path) -> None:
    write_skill(tmp_path, "fetcher", tools=UNTYPED_TOOLS)
    report = only(check_folders([tmp_path / "fetcher"]))
    assert report.ok, report.problems
    untyped = [w.message for w in report.warnings if w.rule == "tool-untyped"]
    assert untyped == [
        "tools.py: fetcher__fetch: parameters url, extra have no type; the model is told "
        "they take any JSON value"
    ]


def test_mcp_command_not_on_path_is_a_warning(tmp_path: Path) -> None:
    folder = write_skill(tmp_path, "gitty")
    (folder / "local-server").write_text("#!/bin/sh\n")
    servers = {
        "git": {"command": "mcp-server-that-is-not-installed", "args": []},
        "local": {"command": "./local-server"},
        "missing-local": {"command": "./nowhere/server"},
        "shell": {"command": "sh"},
        "later": {"command": "${SERVER_BIN:-sh}"},
    }
    (folder / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    report = only(check_folders([folder]))
    assert report.ok, report.problems
    found = [w.message for w in report.warnings if w.rule == "mcp-command"]
    assert found == [
        f"{folder / '.mcp.json'}: server 'git': command 'mcp-server-that-is-not-installed' "
        "is not found on PATH",
        f"{folder / '.mcp.json'}: server 'missing-local': command './nowhere/server' is not "
        f"found in {folder}",
    ]


def test_links_to_missing_files_are_warnings(tmp_path: Path) -> None:
    body = (
        "# Use\n\nSee [the API](references/api.md), [forms](./forms.md#fields),\n"
        "[missing](references/gone.md), [outside](../other/notes.md),\n"
        "[web](https://example.com/x.md), [mail](mailto:a@b.c), [here](#use)\n"
        "and ![a chart](assets/chart.png).\n\n"
        "```markdown\n[an example in code](not/checked.md)\n```\n"
    )
    folder = write_skill(tmp_path, "linked", body=body)
    (folder / "references").mkdir()
    (folder / "references" / "api.md").write_text("api")
    (folder / "forms.md").write_text("forms")
    report = only(check_folders([folder]))
    assert report.ok, report.problems
    found = [w.message for w in report.warnings if w.rule == "link"]
    assert found == [
        "SKILL.md line 8: the link to references/gone.md leads to no file",
        "SKILL.md line 8: the link to ../other/notes.md leads out of the skill's folder "
        "(read_skill_file cannot read it)",
        "SKILL.md line 10: the link to assets/chart.png leads to no file",
    ]


def test_allowed_tools_entries_that_name_no_tool_are_warnings(tmp_path: Path) -> None:
    write_skill(
        tmp_path,
        "limited",
        extra="allowed-tools: Read Bash(git:*) WebSearch files__reed_file data nosuch__run\n",
    )
    report = only(check_folders([tmp_path / "limited"]))
    assert report.ok, report.problems
    found = [w.message for w in report.warnings if w.rule == "allowed-tools"]
    assert found == [
        "allowed-tools: 'WebSearch' names no tool here (another client's?); it allows nothing",
        "allowed-tools: 'files__reed_file' names no tool: skill 'files' has no tool 'reed_file' "
        "(it has edit_file, glob, grep, list_dir, read_file, write_file)",
        "allowed-tools: 'nosuch__run' names no tool: there is no skill 'nosuch'",
    ]


def test_tool_names_shortened_to_a_hash_are_warnings(tmp_path: Path) -> None:
    name = "a-skill-with-a-rather-long-name-for-its-folder"
    tools = (
        "from orchestrator import tool\n\n"
        "@tool\ndef summarize_the_quarterly_numbers(text: str) -> str:\n"
        '    """Summarize."""\n    return text\n\n'
        "@tool\ndef ok(text: str) -> str:\n"
        '    """Fine."""\n    return text\n'
    )
    write_skill(tmp_path, name, tools=tools)
    report = only(check_folders([tmp_path / name]))
    assert report.ok, report.problems
    found = [w.message for w in report.warnings if w.rule == "tool-name"]
    assert len(found) == 1
    long = report.tools[0]
    assert len(long) == 64
    assert found[0] == (
        f"tools.py: {name}__summarize_the_quarterly_numbers is sent as {long} (provider tool "
        "names are at most 64 characters of a-z, A-Z, 0-9, _ and -); shorten the skill's or "
        "the tool's name"
    )


def test_claude_code_fields_are_not_failures(tmp_path: Path) -> None:
    extra = (
        "when_to_use: When the user asks for it.\n"
        "disable-model-invocation: true\n"
        "argument-hint: '[file]'\n"
    )
    write_skill(tmp_path, "claude-style", extra=extra)
    report = only(check_folders([tmp_path / "claude-style"]))
    assert report.ok, report.problems
    assert [w.message for w in report.warnings if w.rule == "client-field"] == [
        "fields of Claude Code, not of the Agent Skills specification (understood here; other "
        "clients may refuse them): argument-hint, disable-model-invocation, when_to_use"
    ]
    write_skill(tmp_path, "mixed", extra="when_to_use: Now.\nauthor: me\n")
    report = only(check_folders([tmp_path / "mixed"]))
    assert rules(report.problems) == ["unknown-field"]
    assert "author" in report.problems[0].message
    assert "when_to_use" not in report.problems[0].message


def test_a_yaml_error_names_skill_md_and_the_line_of_the_file(tmp_path: Path) -> None:
    write_skill(tmp_path, "colon", frontmatter="name: colon\nlicense: MIT\ndescription: [open\n")
    report = only(check_folders([tmp_path / "colon"]))
    assert rules(report.problems) == ["yaml"]
    message = report.problems[0].message
    assert message.startswith("invalid YAML in SKILL.md, line 5")  # the '---' is line 1
    assert "invalid YAML: " not in message


def test_an_unescaped_quote_gets_the_right_hint(tmp_path: Path) -> None:
    frontmatter = 'name: quoted\ndescription: "Use "quotes" here"\n'
    write_skill(tmp_path, "quoted", frontmatter=frontmatter)
    report = only(check_folders([tmp_path / "quoted"]))
    assert rules(report.problems) == ["yaml"]
    message = report.problems[0].message
    assert "indentation" not in message
    assert message.startswith("invalid YAML in SKILL.md, line 3, column 20: ")
    assert message.endswith(
        '; line 3 (description: "Use "quotes" here") ends its quoted value at the quote before '
        'column 20, and more text follows; inside double quotes write a quote as \\", inside '
        "single quotes as '', or leave the value unquoted"
    )


def test_single_quoted_value_with_an_apostrophe(tmp_path: Path) -> None:
    write_skill(tmp_path, "apos", frontmatter="name: apos\ndescription: 'it's fine'\n")
    message = only(check_folders([tmp_path / "apos"])).problems[0].message
    assert message.startswith("invalid YAML in SKILL.md, line 3, column 18: ")
    assert (
        "; line 3 (description: 'it's fine') ends its quoted value at the quote before "
        "column 18, and more text follows" in message
    )


def test_the_corpus_warns_without_failing_more(tmp_path: Path) -> None:
    if not ANTHROPIC_SKILLS.is_dir():
        pytest.skip(f"the shared corpus is not beside the repository ({ANTHROPIC_SKILLS})")
    copy = tmp_path / "corpus"
    shutil.copytree(ANTHROPIC_SKILLS, copy)
    reports = {r.folder.name: r for r in check_folders([copy])}
    assert [name for name, r in reports.items() if not r.ok] == ["claude-api"]  # too long
    # The corpus holds each SKILL.md alone: mcp-builder's links to its references dangle.
    links = {w.message for r in reports.values() for w in r.warnings if w.rule == "link"}
    targets = {m.split("the link to ")[1].split(" ")[0] for m in links}
    assert targets == {
        "./reference/mcp_best_practices.md",
        "./reference/node_mcp_server.md",
        "./reference/python_mcp_server.md",
        "./reference/evaluation.md",
    }
    for target in targets:  # with the files in place, the links hold
        (copy / "mcp-builder" / target).parent.mkdir(exist_ok=True)
        (copy / "mcp-builder" / target).write_text("reference")
    again = only(check_folders([copy / "mcp-builder"]))
    assert not [w for w in again.warnings if w.rule == "link"]


def test_warnings_fail_the_check_only_with_strict(tmp_path: Path) -> None:
    write_skill(tmp_path, "fetcher", tools=UNTYPED_TOOLS)
    done = orchestrator("skills", "check", tmp_path / "fetcher", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warn  " in done.stdout and "[tool-untyped]" in done.stdout
    assert "1 folder checked: 1 valid, 0 with problems, 1 with warnings" in done.stdout
    strict = orchestrator("skills", "check", "--strict", tmp_path / "fetcher", cwd=tmp_path)
    assert strict.returncode == 1
    assert "--strict: warnings fail the check" in strict.stdout


def test_a_skill_past_the_index_cap_is_named_by_check(tmp_path: Path) -> None:
    synthetic_skills(tmp_path / "many", 60)
    reports = check_folders([tmp_path / "many"])
    capped = [r.name for r in reports if "index-cap" in rules(r.warnings)]
    assert capped and capped[0] != "skill-0000"  # the first skills fit, the last do not
    assert capped[-1] == "skill-0059"
    message = next(w.message for w in reports[-1].warnings if w.rule == "index-cap")
    assert message.startswith("left out of the skill index by its cap of 2,000 tokens (")
    assert message.endswith("skills listed): the model finds it only through search_skills")
    roomy = check_folders([tmp_path / "many"], index_tokens=50_000)
    assert not [r for r in roomy if "index-cap" in rules(r.warnings)]


def test_a_skill_past_the_index_cap_is_named_on_run_stderr(tmp_path: Path) -> None:
    synthetic_skills(tmp_path / "skills", 60)
    (tmp_path / "s.yaml").write_text('"*":\n  - content: done\n')
    (tmp_path / "job.yaml").write_text("name: j\nmodel: scripted:s.yaml\ngoal: Go.\n")
    done = orchestrator("run", "job.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stderr.splitlines() if "the skill index lists" in x)
    assert "of 65 skills under its cap of 2,000 tokens" in line  # 60 and the 5 built-ins
    assert "search_skills: " in line and "skill-0059" in line


def test_a_skill_named_as_a_built_in_one_is_a_warning(tmp_path: Path) -> None:
    """As `skills list` says it: a run that searches this folder gets it in the built-in's
    place. The built-in skills themselves are not warned about."""
    write_skill(tmp_path, "files", description="My own file tools.")
    report = only(check_folders([tmp_path / "files"]))
    assert report.ok, report.problems
    assert rules(report.warnings) == ["shadows-builtin"]
    assert "shadows the built-in skill" in report.warnings[0].message
    from orchestrator.skills import builtin_skills_folder

    shipped = builtin_skills_folder()
    assert shipped is not None
    assert "shadows-builtin" not in rules(only(check_folders([shipped / "files"])).warnings)
