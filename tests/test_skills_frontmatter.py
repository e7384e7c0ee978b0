"""SKILL.md parsing and the specification's rules: which break loading, which only warn."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.skills.frontmatter import (
    FrontmatterError,
    fatal,
    parse_yaml,
    read_frontmatter,
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
def test_malformed_names_are_fatal(name: str, rule: str) -> None:
    found = rules(f"name: {name}\ndescription: d\n", folder=name)
    assert found[rule] is True


def test_name_format_messages_say_what_is_wrong() -> None:
    data, _ = parse_yaml("name: Bad\ndescription: d\n")
    [problem] = [p for p in validate(data, "Bad") if p.rule == "name-format"]
    assert "lowercase" in problem.message
    data, _ = parse_yaml("name: a--b\ndescription: d\n")
    assert "consecutive hyphens" in validate(data, "a--b")[0].message


def test_missing_or_empty_name_and_description_are_fatal() -> None:
    assert rules("description: d\n") == {"name-missing": True}
    assert rules("name: ''\ndescription: d\n", folder="x") == {"name-missing": True}
    assert rules("name: my-skill\n") == {"description-missing": True}
    assert rules("name: my-skill\ndescription:\n") == {"description-missing": True}
    assert rules("name: my-skill\ndescription: [a, b]\n") == {"description-missing": True}


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
    ("text", "message"),
    [
        ("# no frontmatter\n", "must start with YAML frontmatter"),
        ("---\nname: x\ndescription: d\n", "not closed"),
        ("---\nname: x\ndescription: Use when: the user asks\n---\n", "invalid YAML"),
        ("---\n- a\n- b\n---\n", "must be a YAML mapping"),
        ("---\njust text\n---\n", "must be a YAML mapping"),
    ],
)
def test_unreadable_frontmatter_is_fatal(text: str, message: str) -> None:
    with pytest.raises(FrontmatterError) as caught:
        frontmatter, _, _ = split_skill_text(text)
        parse_yaml(frontmatter)
    assert message in str(caught.value)
    assert caught.value.problem.fatal


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
