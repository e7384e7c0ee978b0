"""`skills check` against the reference validator's own test cases.

Ported from agentskills/agentskills `skills-ref/tests/test_validator.py` (Apache-2.0), commit
69ef37e9424c0a7ea9dd2293b559e43ec8176379: each of its 21 tests is one case here, with the
same folder and SKILL.md. The reference returns a list of messages (empty: valid); the check
returns problems with rule ids. A case agrees when the verdicts are the same and, for an
invalid skill, the check names the rule behind the reference's message. All 21 agree.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.skills.check import check_folder, check_folders

# (the reference test, folder, frontmatter or None for no SKILL.md, rule expected or None)
# fmt: off
CASES: list[tuple[str, str, str | None, str | None]] = [
    ("test_valid_skill", "my-skill", "name: my-skill\ndescription: A test skill\n", None),
    ("test_missing_skill_md", "my-skill", None, "skill-file"),
    ("test_invalid_name_uppercase", "MySkill", "name: MySkill\ndescription: A test skill\n",
     "name-format"),
    ("test_name_too_long", "a" * 70, f"name: {'a' * 70}\ndescription: A test skill\n",
     "name-length"),
    ("test_name_leading_hyphen", "-my-skill", "name: -my-skill\ndescription: A test skill\n",
     "name-format"),
    ("test_name_consecutive_hyphens", "my--skill",
     "name: my--skill\ndescription: A test skill\n", "name-format"),
    ("test_name_invalid_characters", "my_skill", "name: my_skill\ndescription: A test skill\n",
     "name-format"),
    ("test_name_directory_mismatch", "wrong-name",
     "name: correct-name\ndescription: A test skill\n", "name-folder"),
    ("test_unexpected_fields", "my-skill",
     "name: my-skill\ndescription: A test skill\nunknown_field: should not be here\n",
     "unknown-field"),
    ("test_valid_with_all_fields", "my-skill",
     "name: my-skill\ndescription: A test skill\nlicense: MIT\nmetadata:\n  author: Test\n", None),
    ("test_allowed_tools_accepted", "my-skill",
     "name: my-skill\ndescription: A test skill\nallowed-tools: Bash(jq:*) Bash(git:*)\n", None),
    ("test_i18n_chinese_name", "技能", "name: 技能\ndescription: A skill with Chinese name\n",
     None),
    ("test_i18n_russian_name_with_hyphens", "мой-навык",
     "name: мой-навык\ndescription: A skill with Russian name\n", None),
    ("test_i18n_russian_lowercase_valid", "навык",
     "name: навык\ndescription: A skill with Russian lowercase name\n", None),
    ("test_i18n_russian_uppercase_rejected", "НАВЫК",
     "name: НАВЫК\ndescription: A skill with Russian uppercase name\n", "name-format"),
    ("test_description_too_long", "my-skill",
     f"name: my-skill\ndescription: {'x' * 1100}\n", "description-length"),
    ("test_valid_compatibility", "my-skill",
     "name: my-skill\ndescription: A test skill\ncompatibility: Requires Python 3.11+\n", None),
    ("test_compatibility_too_long", "my-skill",
     f"name: my-skill\ndescription: A test skill\ncompatibility: {'x' * 550}\n", "compatibility"),
    # Folder in the composed form, name in the decomposed one: equal after NFKC.
    ("test_nfkc_normalization", "café", "name: cafe\u0301\ndescription: A test skill\n", None),
]
# fmt: on


@pytest.mark.parametrize(
    ("case", "folder", "frontmatter", "rule"), CASES, ids=[c[0] for c in CASES]
)
def test_check_agrees_with_the_reference_validator(
    tmp_path: Path, case: str, folder: str, frontmatter: str | None, rule: str | None
) -> None:
    skill = tmp_path / folder
    skill.mkdir()
    if frontmatter is not None:
        (skill / "SKILL.md").write_text(f"---\n{frontmatter}---\nBody\n", encoding="utf-8")
    report = check_folder(skill)
    rules = [p.rule for p in report.problems]
    if rule is None:
        assert rules == [], f"{case}: {report.problems}"
    else:
        assert rule in rules, f"{case}: {report.problems}"


def test_a_path_that_does_not_exist_or_is_a_file_fails(tmp_path: Path) -> None:
    # The reference's test_nonexistent_path and test_not_a_directory.
    [missing] = check_folders([tmp_path / "nonexistent"])
    assert not missing.ok and "no such folder" in missing.problems[0].message
    file = tmp_path / "file.txt"
    file.write_text("test")
    [not_folder] = check_folders([file])
    assert not not_folder.ok and "not a folder" in not_folder.problems[0].message


def test_all_21_reference_cases_are_ported() -> None:
    assert len(CASES) + 2 == 21


def test_the_check_command_agrees_on_names_in_other_scripts(tmp_path: Path) -> None:
    for folder, name in (("技能", "技能"), ("мой-навык", "мой-навык"), ("café", "cafe\u0301")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: d\n---\nBody\n", encoding="utf-8"
        )
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "skills", "check", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 folders checked: 3 valid" in done.stdout
