"""Skill folders written for other clients load unchanged: the shapes real skills have.

Each shape is one seen in public skill repositories (Anthropic's plugin repositories, OpenAI's
skills, Composio's, obra's superpowers...); each loads with a name and a description, and
the strict check still reports what breaks the specification.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from skill_factory import write_skill

from orchestrator import Agent, RunResult
from orchestrator.models import ScriptedModel
from orchestrator.skills import SkillCatalog
from orchestrator.skills.check import check_folders


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "arguments": arguments}]}


def raw(root: Path, folder: str, text: str) -> Path:
    path = root / folder
    path.mkdir(parents=True, exist_ok=True)
    (path / "SKILL.md").write_text(text, encoding="utf-8")
    return path


def rules_of(catalog: SkillCatalog, folder: str) -> dict[str, bool]:
    return {w.rule: w.left_out for w in catalog.warnings if w.folder.name == folder}


def test_names_in_other_scripts_load_nfkc_normalised(tmp_path: Path) -> None:
    write_skill(tmp_path, "技能", description="A skill with a Chinese name.")
    write_skill(tmp_path, "мой-навык", description="A skill with a Russian name.")
    raw(tmp_path, "café", "---\nname: '  cafe\u0301 '\ndescription: Coffee.\n---\nBody\n")
    catalog = SkillCatalog([tmp_path], include_builtin=False)
    assert sorted(catalog.names) == sorted(["技能", "мой-навык", "café"])
    assert catalog.warnings == []
    assert catalog.get("cafe\u0301") is None  # names are compared as written, normalised
    assert catalog.skills["café"].description == "Coffee."


async def test_a_skill_named_in_another_script_gets_tools_that_do_not_collide(
    tmp_path: Path,
) -> None:
    tools = (
        "from orchestrator import tool\n\n@tool\ndef hello() -> str:\n    'Hi.'\n    return 'hi'\n"
    )
    write_skill(tmp_path / "skills", "技能", tools=tools)
    write_skill(tmp_path / "skills", "навык", tools=tools.replace("'hi'", "'привет'"))
    catalog = SkillCatalog([tmp_path / "skills"], include_builtin=False)
    names = [t.name for name in catalog.names for t in catalog.load(name).tools]
    assert len(set(names)) == 2  # both would be "____hello" without the hash
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", n) and n.startswith("_") for n in names)


@pytest.mark.parametrize(
    ("folder", "name", "expected"),
    [
        ("agent-development", "Agent Development", "agent-development"),
        ("-21risk-automation", "-21risk-automation", "21risk-automation"),
        ("Agent_Dev", "Agent_Dev", "agent-dev"),
        ("pdf", "", "pdf"),
    ],
)
def test_a_name_that_breaks_the_rules_falls_back_to_the_folders(
    tmp_path: Path, folder: str, name: str, expected: str
) -> None:
    frontmatter = f"name: '{name}'\ndescription: Does a thing.\n" if name else "description: x\n"
    raw(tmp_path, folder, f"---\n{frontmatter}---\nBody\n")
    catalog = SkillCatalog([tmp_path], include_builtin=False)
    assert catalog.names == [expected]
    [warning] = catalog.warnings
    assert not warning.left_out
    assert warning.rule in ("name-format", "name-missing")
    assert repr(expected) in warning.message
    [report] = check_folders([tmp_path / folder])
    assert not report.ok  # the strict check still fails it


def test_an_unquoted_colon_is_read_with_the_values_quoted(tmp_path: Path) -> None:
    raw(
        tmp_path,
        "pdf-helper",
        "---\nname: pdf-helper\ndescription: Use this skill when: the user asks about PDFs\n"
        "metadata:\n  short-description: Note: quoted too\n---\nBody\n",
    )
    catalog = SkillCatalog([tmp_path], include_builtin=False)
    info = catalog.skills["pdf-helper"]
    assert info.description == "Use this skill when: the user asks about PDFs"
    assert info.metadata == {"short-description": "Note: quoted too"}
    assert rules_of(catalog, "pdf-helper") == {"yaml": False}
    [report] = check_folders([tmp_path / "pdf-helper"])
    assert [p.rule for p in report.problems] == ["yaml"]


def test_frontmatter_that_stays_unreadable_is_read_line_by_line_or_not_at_all(
    tmp_path: Path,
) -> None:
    raw(
        tmp_path,
        "long",
        "---\nname: long\ndescription: Reviews pull requests.\n\n<example>\n"
        "Context: a PR is open\n</example>\nallowed-tools: Read\n---\nBody\n",
    )
    raw(tmp_path, "broken", "---\n- just\n- a list: really\n---\n# Broken\n\nFixes things.\n")
    catalog = SkillCatalog([tmp_path], include_builtin=False)
    long = catalog.skills["long"]
    assert long.description.startswith("Reviews pull requests.")
    assert "Context: a PR is open" in long.description and long.allowed_tools == "Read"
    assert rules_of(catalog, "long") == {"yaml": False}
    assert catalog.skills["broken"].description == "Fixes things."
    assert rules_of(catalog, "broken") == {"yaml": False}


def test_no_frontmatter_at_all_uses_the_folder_and_the_first_paragraph(tmp_path: Path) -> None:
    raw(
        tmp_path,
        "commit-helper",
        "# Commit helper\n\n<!-- a note -->\nWrites commit messages from\nthe staged diff.\n\n"
        "## Steps\n\n1. Read the diff.\n",
    )
    raw(tmp_path, "title-only", "# Title only\n")
    raw(tmp_path, "empty", "")
    catalog = SkillCatalog([tmp_path], include_builtin=False)
    info = catalog.skills["commit-helper"]
    assert info.description == "Writes commit messages from the staged diff."
    assert catalog.skills["title-only"].description == "Title only"
    assert "empty" not in catalog
    assert rules_of(catalog, "empty") == {"frontmatter": False, "description-missing": True}
    assert catalog.load("commit-helper").body.startswith("# Commit helper")


def test_nested_metadata_is_json_and_allowed_tools_may_be_a_list(tmp_path: Path) -> None:
    raw(
        tmp_path,
        "deploy",
        "---\nname: deploy\ndescription: Deploys.\nallowed-tools:\n  - Read\n  - Bash(git:*)\n"
        "metadata:\n  author: ops\n  openclaw: {requires: {bins: [git]}}\n---\nBody\n",
    )
    catalog = SkillCatalog([tmp_path], include_builtin=False)
    info = catalog.skills["deploy"]
    assert info.allowed_tools == "Read Bash(git:*)"
    assert info.metadata == {"author": "ops", "openclaw": '{"requires": {"bins": ["git"]}}'}
    assert catalog.warnings == []
    [report] = check_folders([tmp_path / "deploy"])
    assert {p.rule for p in report.problems} == {"allowed-tools-type", "metadata-type"}


def test_plugin_roots_and_dot_tiers_are_found(tmp_path: Path) -> None:
    # anthropics/claude-plugins-official style: plugins/<plugin>/skills/<skill>/SKILL.md
    root = tmp_path / "repo"
    (root / "plugins" / "review" / ".claude-plugin").mkdir(parents=True)
    (root / "plugins" / "review" / "agents").mkdir()
    write_skill(root / "plugins" / "review" / "skills", "code-review")
    write_skill(root / "plugins" / "docs" / "skills", "doc-writer")
    # openai/skills style: skills/.curated/<skill>, skills/.system/<skill>
    write_skill(root / "skills" / ".curated", "gh-fix-ci")
    write_skill(root / "skills" / ".system", "skill-installer")
    write_skill(root / "node_modules" / "pkg", "hidden")
    write_skill(root / ".git" / "x", "hidden-too")
    catalog = SkillCatalog([root], include_builtin=False)
    assert set(catalog.names) == {"code-review", "doc-writer", "gh-fix-ci", "skill-installer"}
    assert catalog.warnings == []
    reports = check_folders([root])
    assert sorted(r.name or "" for r in reports) == sorted(catalog.names)


def test_a_folder_that_yields_no_skill_is_a_warning(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "README.md").write_text("# Not a skill\n")
    catalog = SkillCatalog([tmp_path], include_builtin=False)
    assert catalog.names == []
    [warning] = catalog.warnings
    assert warning.rule == "no-skills" and warning.folder == tmp_path


def test_claude_code_fields_load_without_warnings(tmp_path: Path) -> None:
    write_skill(
        tmp_path,
        "release",
        description="Cuts a release.",
        extra="when_to_use: When the user says ship it or asks for a tag.\n"
        "disable-model-invocation: true\nargument-hint: '[version]'\ncontext: fork\n"
        "agent: general\nmodel: sonnet\nauthor: me\n",
    )
    catalog = SkillCatalog([tmp_path], include_builtin=False)
    info = catalog.skills["release"]
    assert info.when_to_use == "When the user says ship it or asks for a tag."
    assert not info.model_invocable and info.forks and info.agent == "general"
    # Only the field no client defines is warned about.
    [warning] = catalog.warnings
    assert warning.rule == "unknown-field" and "author" in warning.message
    assert "when_to_use" not in warning.message


def test_when_to_use_joins_the_description_in_the_index_and_search(tmp_path: Path) -> None:
    write_skill(
        tmp_path,
        "tagger",
        description="Tags releases.",
        extra="when_to_use: When someone says ship it.\n",
    )
    write_skill(tmp_path, "other", description="Something else.")
    catalog = SkillCatalog([tmp_path], include_builtin=False)
    assert "- tagger: Tags releases. When someone says ship it." in (catalog.index() or "")
    assert catalog.search("ship")[0].name == "tagger"


def _run(agent: Agent, task: str = "go") -> RunResult:
    return agent.run_sync(task)


def _tool_texts(result: RunResult) -> list[tuple[str | None, str]]:
    return [(m.error_type, m.content or "") for m in result.messages if m.role == "tool"]


def test_a_skill_the_model_may_not_choose_is_out_of_index_search_and_load(
    tmp_path: Path,
) -> None:
    write_skill(
        tmp_path,
        "deploy",
        description="Deploys production.",
        extra="disable-model-invocation: true\n",
    )
    write_skill(tmp_path, "notes", description="Takes notes.")
    model = ScriptedModel(
        {
            "agent": [
                call("search_skills", query="deploys production"),
                call("load_skill", name="deploy"),
                {"content": "done"},
            ]
        }
    )
    result = _run(Agent(model, skills=SkillCatalog([tmp_path], include_builtin=False)))
    system = model.requests[0].messages[0].content or ""
    assert "- notes:" in system and "deploy" not in system
    (_, searched), (kind, loaded) = _tool_texts(result)
    assert "- deploy" not in searched
    assert kind == "tool_error" and "disable-model-invocation" in loaded


def test_arguments_and_the_skill_folder_are_substituted_on_load(tmp_path: Path) -> None:
    folder = write_skill(
        tmp_path,
        "fix-issue",
        description="Fixes a GitHub issue.",
        body="Fix issue $ARGUMENTS[0] (all: $ARGUMENTS).\n"
        "Run ${CLAUDE_SKILL_DIR}/scripts/check.sh, then ${SKILL_DIR}/done.sh.\n",
    )
    write_skill(tmp_path, "plain", description="No placeholder.", body="Plain body.")
    model = ScriptedModel(
        {
            "agent": [
                call("load_skill", name="fix-issue", arguments="123 urgent"),
                call("load_skill", name="plain", arguments="extra words"),
                call("load_skill", name="fix-issue", arguments="456"),
                {"content": "done"},
            ]
        }
    )
    result = _run(Agent(model, skills=SkillCatalog([tmp_path], include_builtin=False)))
    first, plain, again = (text for _, text in _tool_texts(result))
    assert "Fix issue 123 (all: 123 urgent)." in first
    assert f"Run {folder}/scripts/check.sh, then {folder}/done.sh." in first
    assert "Plain body.\n\nARGUMENTS: extra words" in plain
    assert "Fix issue 456 (all: 456)." in again
