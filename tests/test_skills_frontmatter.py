"""SKILL.md parsing and the specification's rules: what they report, what is fatal."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.skills.skill_md import (
    FrontmatterError,
    fatal,
    parse_forgiving,
    parse_yaml,
    quote_colon_values,
    read_frontmatter,
    slug,
    split_skill_text,
    to_info,
    validate,
)


def rules(frontmatter: str, folder: str = "my-skill") -> dict[str, bool]:
    """rule -> fatal, for every problem of a frontmatter text."""
    data, problems = parse_yaml(frontmatter)
    return {p.rule: p.fatal for p in problems + validate(data, folder)}


def test_a_minimal_skill_breaks_no_rule() -> None:
    assert rules("name: my-skill\ndescription: Does things.\n") == {}


def test_every_optional_field_of_the_specification_is_accepted() -> None:
    text = (
        "name: my-skill\ndescription: Does things.\nlicense: Apache-2.0\n"
        "compatibility: Requires git\nallowed-tools: Bash(git:*) Read\n"
        'metadata:\n  author: me\n  version: "1.0"\n  keywords: a, b\n'
    )
    assert rules(text) == {}


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("My-Skill", "name-format"),
        ("-my-skill", "name-format"),
        ("my-skill-", "name-format"),
        ("my--skill", "name-format"),
        ("my_skill", "name-format"),
        ("my skill", "name-format"),
        ("skill✓", "name-format"),
    ],
)
def test_malformed_names_are_reported(name: str, rule: str) -> None:
    # Not fatal: a lenient load falls back to the folder's name (test_skills_compat.py).
    found = rules(f"name: {name}\ndescription: d\n", folder=name)
    assert found[rule] is False


def test_name_format_messages_say_what_is_wrong() -> None:
    data, _ = parse_yaml("name: Bad\ndescription: d\n")
    [problem] = [p for p in validate(data, "Bad") if p.rule == "name-format"]
    assert "lowercase" in problem.message
    data, _ = parse_yaml("name: a--b\ndescription: d\n")
    assert "consecutive hyphens" in validate(data, "a--b")[0].message


def test_missing_or_empty_name_and_description_are_reported() -> None:
    # Not fatal by themselves: a lenient load finds the folder's name and the first paragraph.
    assert rules("description: d\n") == {"name-missing": False}
    assert rules("name: ''\ndescription: d\n", folder="x") == {"name-missing": False}
    assert rules("name: my-skill\n") == {"description-missing": False}
    assert rules("name: my-skill\ndescription:\n") == {"description-missing": False}
    assert rules("name: my-skill\ndescription: [a, b]\n") == {"description-missing": False}


def test_names_in_other_scripts_and_nfkc_are_names() -> None:
    assert rules("name: 技能\ndescription: d\n", folder="技能") == {}
    assert rules("name: мой-навык\ndescription: d\n", folder="мой-навык") == {}
    assert rules("name: ' cafe\u0301 '\ndescription: d\n", folder="café") == {}
    assert rules("name: НАВЫК\ndescription: d\n", folder="НАВЫК") == {"name-format": False}


def test_a_slug_fits_the_naming_rules() -> None:
    assert slug("Agent Development") == "agent-development"
    assert slug("-21risk-automation") == "21risk-automation"
    assert slug("My__Skill--v2!") == "my-skill-v2"
    assert slug("Мой Навык") == "мой-навык"
    assert slug("!!!") == ""


def test_understandable_breaches_are_warnings() -> None:
    long_name = "a" * 65
    assert rules(f"name: {long_name}\ndescription: d\n", folder=long_name) == {"name-length": False}
    assert rules("name: other\ndescription: d\n") == {"name-folder": False}
    assert rules(f"name: my-skill\ndescription: {'x' * 1025}\n") == {"description-length": False}
    assert rules(f"name: my-skill\ndescription: {'x' * 1024}\n") == {}


def test_optional_fields_are_checked() -> None:
    base = "name: my-skill\ndescription: d\n"
    assert rules(base + "version: 2\n") == {"unknown-field": False}
    assert rules(base + "license: [a]\n") == {"license-type": False}
    assert rules(base + "allowed-tools: [Read, Bash]\n") == {"allowed-tools-type": False}
    assert rules(base + f"compatibility: {'c' * 501}\n") == {"compatibility": False}
    assert rules(base + "compatibility: ''\n") == {"compatibility": False}
    assert rules(base + "metadata: just text\n") == {"metadata-type": False}
    assert rules(base + "metadata:\n  keywords: [a, b]\n") == {"metadata-type": False}


def test_unknown_fields_are_named() -> None:
    data, _ = parse_yaml("name: my-skill\ndescription: d\nauthor: me\ntags: x\n")
    [problem] = validate(data, "my-skill")
    assert "author, tags" in problem.message


def test_scalars_stay_strings_as_in_the_reference_validator() -> None:
    data, _ = parse_yaml("name: yes\ndescription: 123\nmetadata:\n  version: 1.0\n  on: no\n")
    assert data == {"name": "yes", "description": "123", "metadata": {"version": "1.0", "on": "no"}}


def test_duplicate_keys_are_a_warning() -> None:
    assert rules("name: my-skill\ndescription: a\ndescription: b\n") == {
        "yaml-duplicate-key": False
    }


@pytest.mark.parametrize(
    ("text", "message", "is_fatal"),
    [
        ("---\nname: x\ndescription: d\n", "not closed", True),
        ("---\nname: x\ndescription: Use when: the user asks\n---\n", "invalid YAML", False),
        ("---\n- a\n- b\n---\n", "must be a YAML mapping", False),
        ("---\njust text\n---\n", "must be a YAML mapping", False),
    ],
)
def test_unreadable_frontmatter_is_an_error(text: str, message: str, is_fatal: bool) -> None:
    # Only an unclosed frontmatter leaves a skill out; a lenient load works around the others.
    with pytest.raises(FrontmatterError) as caught:
        frontmatter, _, _ = split_skill_text(text)
        parse_yaml(frontmatter or "")
    assert message in str(caught.value)
    assert caught.value.problem.fatal is is_fatal


def test_no_frontmatter_is_a_problem_and_the_whole_text_is_the_body() -> None:
    frontmatter, body, problems = split_skill_text("# Title\n\nSome text.\n")
    assert frontmatter is None
    assert body == "# Title\n\nSome text."
    assert [p.rule for p in problems] == ["frontmatter"]
    assert not fatal(problems)


def test_an_unquoted_colon_is_read_again_with_the_values_quoted() -> None:
    text = (
        "name: x\ndescription: Use when: the user asks\n  about PDFs: all of them\n"
        "metadata:\n  short: Note: indented too\n  fine: plain\nlicense: 'kept: as is'\n"
    )
    data, problems = parse_forgiving(text)
    assert data == {
        "name": "x",
        "description": "Use when: the user asks about PDFs: all of them",
        "metadata": {"short": "Note: indented too", "fine": "plain"},
        "license": "kept: as is",
    }
    assert [p.rule for p in problems] == ["yaml"]
    assert "read again with its values quoted" in problems[0].message
    assert quote_colon_values("name: x\n") == "name: x\n"
    with pytest.raises(FrontmatterError):
        parse_forgiving("name: [unclosed\n")


def test_delimiters_are_whole_lines_only() -> None:
    text = "---\nname: x\ndescription: a --- b\n---\nbody --- here\n---\nmore\n"
    frontmatter, body, _ = split_skill_text(text)
    data, _ = parse_yaml(frontmatter)
    assert data["description"] == "a --- b"
    assert body == "body --- here\n---\nmore"


def test_crlf_files_and_a_byte_order_mark_are_read() -> None:
    frontmatter, body, problems = split_skill_text(
        "\ufeff---\r\nname: x\r\ndescription: d\r\n---\r\nBody\r\n"
    )
    assert parse_yaml(frontmatter)[0] == {"name": "x", "description": "d"}
    assert body == "Body"
    assert [p.rule for p in problems] == ["bom"]
    assert not fatal(problems)


def test_a_block_scalar_description_keeps_its_lines() -> None:
    data, _ = parse_yaml("name: x\ndescription: |-\n  line one\n  line two\n")
    assert data["description"] == "line one\nline two"


def test_scanning_reads_only_the_frontmatter(tmp_path: Path) -> None:
    skill = tmp_path / "SKILL.md"
    # The body is not UTF-8: reading it would fail, so a scan must stop at the closing line.
    skill.write_bytes(b"---\nname: x\ndescription: d\n---\n" + b"\xff\xfe" * 50_000)
    text, problems = read_frontmatter(skill)
    assert parse_yaml(text)[0] == {"name": "x", "description": "d"}
    assert problems == []


def test_a_frontmatter_without_end_within_the_limit_is_not_closed(tmp_path: Path) -> None:
    skill = tmp_path / "SKILL.md"
    skill.write_text("---\nname: x\n" + "description: d\n" * 10_000, encoding="utf-8")
    with pytest.raises(FrontmatterError, match="not closed"):
        read_frontmatter(skill)


def test_a_frontmatter_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    skill = tmp_path / "SKILL.md"
    skill.write_bytes(b"---\nname: x\ndescription: caf\xe9\n---\n")
    with pytest.raises(FrontmatterError, match="UTF-8"):
        read_frontmatter(skill)


def test_to_info_normalises_what_it_can(tmp_path: Path) -> None:
    data, _ = parse_yaml(
        "name: my-skill\ndescription: '  Does things.  '\nallowed-tools: [Read, Bash]\n"
        "metadata:\n  keywords: csv, data tables , ,stats\n  n: '1'\n"
    )
    info = to_info(data, tmp_path / "my-skill" / "SKILL.md")
    assert info.description == "Does things."
    assert info.allowed_tools == "Read Bash"
    assert info.keywords == ("csv", "data tables", "stats")
    assert info.metadata["n"] == "1"
    assert info.folder == tmp_path / "my-skill"


def test_nested_metadata_is_kept_as_json_never_as_python_text(tmp_path: Path) -> None:
    data, _ = parse_yaml(
        "name: x\ndescription: d\nmetadata:\n  author: me\n  nested: {a: 1, b: [x, y]}\n"
        "  tags: [one, two]\n"
    )
    info = to_info(data, tmp_path / "x" / "SKILL.md")
    assert info.metadata == {
        "author": "me",
        "nested": '{"a": "1", "b": ["x", "y"]}',
        "tags": '["one", "two"]',
    }


def test_a_description_over_unindented_lines_is_read_line_by_line() -> None:
    # Claude Code plugin agents: a description whose <example> lines start at column 0.
    text = (
        "name: agent-creator\ndescription: Use this agent when asked to create an agent.\n\n"
        '<example>\nContext: the user wants a reviewer\nuser: "Make one"\n</example>\n'
        'model: sonnet\ntools: ["Write", Read]\nskills:\n  - one\n  - two\n'
    )
    keys = ("name", "description", "model", "tools", "skills")
    data, problems = parse_forgiving(text, keys)
    assert data["name"] == "agent-creator"
    assert data["description"].startswith("Use this agent when asked to create an agent.")
    assert "Context: the user wants a reviewer" in data["description"]
    assert data["model"] == "sonnet"
    assert data["tools"] == ["Write", "Read"]
    assert data["skills"] == ["one", "two"]
    assert "read line by line instead" in problems[0].message
    with pytest.raises(FrontmatterError):
        parse_forgiving(text)  # no known keys: nothing to read line by line
