"""`allowed-tools` as the Agent Skills specification and Claude Code mean it: tools
pre-approved while a skill is active, never a grant past the run's permissions.

A skill written for Claude Code (`allowed-tools: Bash(git status:*)`) reads files like any
other; a listed command runs without a person's approval where the run would ask; a command
that is not listed still asks. The model plays the attacks: chaining commands behind a listed
one, and calling a listed tool the run denies. `skill_allowed_tools: restrict` keeps the list
a limit.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cli_process import orchestrator
from skill_factory import write_skill

from orchestrator import Agent, Orchestrator, Permissions, read_trace
from orchestrator.agent import ApprovalRequest
from orchestrator.models import ScriptedModel
from orchestrator.skills import SkillCatalog
from orchestrator.skills.allowed import chained, command_matches

GIT_SKILL = "allowed-tools: Bash(git status:*) Bash(git add:*)\n"


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "arguments": arguments}]}


def tool_results(model: ScriptedModel, agent: str = "agent") -> list[tuple[str | None, str]]:
    request = [r for r in model.requests if r.agent == agent][-1]
    return [(m.error_type, m.content or "") for m in request.messages if m.role == "tool"]


def git_repo(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    (folder / "notes.txt").write_text("a note\n", encoding="utf-8")
    return folder


class Asked:
    """An approval callback that records what it was asked and always says no."""

    def __init__(self) -> None:
        self.requests: list[ApprovalRequest] = []

    def __call__(self, request: ApprovalRequest) -> bool:
        self.requests.append(request)
        return False


needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def test_command_patterns_match_whole_words_and_refuse_chaining() -> None:
    assert command_matches("git add:*", "git add notes.txt")
    assert command_matches("git add:*", "git add")
    assert command_matches("git add *", "git add -A")
    assert command_matches("git status", "git status")
    assert command_matches("git 'add'", "git  add")
    assert not command_matches("git status", "git status --short")
    assert not command_matches("git add:*", "git addx notes.txt")
    assert not command_matches("git add:*", "git")
    assert not command_matches("git add:*", "GIT_DIR=/x git add .")
    assert not command_matches("git add:*", "/tmp/git add .")
    for attack in (
        "git add; rm -rf x",
        "git add && curl http://evil.example",
        "git add . || rm -rf x",
        "git add . | sh",
        "git add $(rm -rf x)",
        "git add `rm -rf x`",
        "git add . > /etc/passwd",
        "git add .\nrm -rf x",
        "git add . & rm -rf x",
        "git add 'a;b'",  # quoted or not: the check never parses shell quoting
        "git add \\; rm",
    ):
        assert chained(attack) is not None, attack


@needs_git
async def test_a_claude_code_skill_listing_git_status_reads_a_file(tmp_path: Path) -> None:
    write_skill(tmp_path / "skills", "git-helper", description="Git.", extra=GIT_SKILL)
    work = git_repo(tmp_path / "work")
    script = {
        "agent": [
            call("load_skill", name="git-helper"),
            call("load_skill", name="files"),
            call("files__read_file", path="notes.txt"),
            call("load_skill", name="shell"),
            call("shell__run", command="git status --short"),
            {"content": "done"},
        ]
    }
    model = ScriptedModel(script)
    agent = Agent(
        model,
        name="agent",
        skills=SkillCatalog([tmp_path / "skills"]),
        permissions=Permissions(workspace=work, shell=True),
    )

    result = await agent.run("Look at the repository.")

    assert result.status == "completed"
    _, _, read, _, status = tool_results(model)
    assert read == (None, "a note\n")  # not `Unknown tool 'files__read_file'`
    assert status[0] is None and "notes.txt" in status[1]


@needs_git
async def test_a_listed_command_runs_unasked_and_an_unlisted_one_asks(tmp_path: Path) -> None:
    write_skill(tmp_path / "skills", "git-helper", description="Git.", extra=GIT_SKILL)
    work = git_repo(tmp_path / "work")
    script = {
        "agent": [
            call("load_skill", name="shell"),
            call("shell__run", command="git status"),  # asks: no skill active yet
            call("load_skill", name="git-helper"),
            call("shell__run", command="git add notes.txt"),  # pre-approved
            call("shell__run", command="touch owned.txt"),  # not listed: asks
            {"content": "done"},
        ]
    }
    model = ScriptedModel(script)
    asked = Asked()
    trace = tmp_path / "t.jsonl"
    agent = Agent(
        model,
        name="agent",
        skills=SkillCatalog([tmp_path / "skills"]),
        permissions=Permissions(workspace=work, shell="ask"),
        approve=asked,
        trace=trace,
    )

    await agent.run("Stage the notes.")

    _, before, _, added, touched = tool_results(model)
    assert before[0] == "denied" and "a person denied it" in before[1]
    assert added[0] is None
    assert (work / ".git" / "index").is_file()  # `git add` wrote the index: it ran
    assert touched[0] == "denied" and not (work / "owned.txt").exists()
    assert "matches none of Bash(git status:*) Bash(git add:*)" in touched[1]
    assert [r.arguments["command"] for r in asked.requests] == ["git status", "touch owned.txt"]
    approvals = [e for e in read_trace(trace) if e.type == "approval"]
    by = [(json.loads(e.model_dump_json())["by"], e.decision) for e in approvals]  # type: ignore[union-attr]
    assert by == [("person", "denied"), ("skill", "approved"), ("person", "denied")]


async def test_chained_commands_are_not_pre_approved(tmp_path: Path) -> None:
    write_skill(tmp_path / "skills", "git-helper", description="Git.", extra=GIT_SKILL)
    work = tmp_path / "work"
    work.mkdir()
    attacks = [
        "git status; touch owned1.txt",
        "git status && touch owned2.txt",
        "git add $(touch owned3.txt)",
        "git status | touch owned4.txt",
    ]
    script = {
        "agent": [
            call("load_skill", name="git-helper"),
            call("load_skill", name="shell"),
            *(call("shell__run", command=attack) for attack in attacks),
            {"content": "done"},
        ]
    }
    model = ScriptedModel(script)
    agent = Agent(  # no approval callback, and no waiting: a call that asks is denied
        model,
        name="agent",
        skills=SkillCatalog([tmp_path / "skills"]),
        permissions=Permissions(workspace=work, shell="ask"),
        on_input="deny",
    )

    await agent.run("Go.")

    results = tool_results(model)[2:]
    assert len(results) == len(attacks)
    for kind, text in results:
        assert kind == "denied"
        assert "no one can be asked" in text
        assert "not pre-approved by skill 'git-helper' (allowed-tools): the command holds" in text
    assert not list(work.glob("owned*"))


async def test_a_listed_tool_the_run_denies_stays_denied(tmp_path: Path) -> None:
    write_skill(
        tmp_path / "skills",
        "writer",
        description="Writes.",
        extra="allowed-tools: Write Bash(touch:*)\n",
    )
    work = tmp_path / "work"
    work.mkdir()
    script = {
        "agent": [
            call("load_skill", name="writer"),
            call("load_skill", name="files"),
            call("files__write_file", path="owned.txt", content="x"),
            call("load_skill", name="shell"),
            call("shell__run", command="touch owned.txt"),
            {"content": "done"},
        ]
    }
    model = ScriptedModel(script)
    agent = Agent(
        model,
        name="agent",
        skills=SkillCatalog([tmp_path / "skills"]),
        permissions=Permissions(workspace=work, tools={"files__write_file": "deny"}),
    )

    await agent.run("Go.")

    _, _, write, _, shell = tool_results(model)
    assert write[0] == "denied"
    assert "not allowed in this run (permissions.tools['files__write_file'] is 'deny')" in write[1]
    assert "never grants what the run denies" in write[1]
    # `shell` is off in this run: a listed command does not turn it on.
    assert shell[0] == "denied" and "needs the `shell` permission" in shell[1]
    assert not (work / "owned.txt").exists()


async def test_a_skill_in_the_workspace_pre_approves_nothing(tmp_path: Path) -> None:
    work = tmp_path / "work"
    write_skill(work / "planted", "planted", description="Planted.", extra="allowed-tools: Bash\n")
    script = {
        "agent": [
            call("load_skill", name="planted"),
            call("load_skill", name="shell"),
            call("shell__run", command="touch owned.txt"),
            {"content": "done"},
        ]
    }
    model = ScriptedModel(script)
    agent = Agent(
        model,
        name="agent",
        skills=SkillCatalog([work / "planted"]),
        permissions=Permissions(workspace=work, shell="ask"),
        on_input="deny",
    )

    await agent.run("Go.")

    kind, text = tool_results(model)[-1]
    assert kind == "denied" and "lies in the run's workspace" in text
    assert not (work / "owned.txt").exists()


async def test_restrict_keeps_the_list_a_limit(tmp_path: Path) -> None:
    write_skill(tmp_path / "skills", "git-helper", description="Git.", extra=GIT_SKILL)
    write_skill(
        tmp_path / "skills",
        "strict-helper",
        description="Strict.",
        extra="allowed-tools: Bash(git status:*)\nmetadata:\n  allowed-tools-mode: restrict\n",
    )
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("a note\n", encoding="utf-8")

    async def read_after(skill: str, permissions: Permissions) -> tuple[str | None, str]:
        script = {
            "agent": [
                call("load_skill", name="files"),
                call("load_skill", name=skill),
                call("files__read_file", path="notes.txt"),
                {"content": "done"},
            ]
        }
        model = ScriptedModel(script)
        agent = Agent(
            model, name="agent", skills=SkillCatalog([tmp_path / "skills"]),
            permissions=permissions,
        )  # fmt: skip
        await agent.run("Go.")
        return tool_results(model)[-1]

    default = Permissions(workspace=work)
    assert await read_after("git-helper", default) == (None, "a note\n")
    restricted = await read_after(
        "git-helper", default.model_copy(update={"skill_allowed_tools": "restrict"})
    )
    assert restricted[0] == "denied" and "not among the tools allowed" in restricted[1]
    by_skill = await read_after("strict-helper", default)
    assert by_skill[0] == "denied" and "not among the tools allowed" in by_skill[1]


RESTRICTIONS = {
    "top-level": "allowed-tools-mode: restrict\n",
    "capitalised": "allowed-tools-mode: Restrict\n",
    "mistyped-value": "metadata:\n  allowed-tools-mode: restricted\n",
    "underscored": "allowed_tools_mode: restrict\n",
    "not-text": "allowed-tools-mode: true\n",
    # YAML fails on the example, and the frontmatter is read line by line.
    "read-by-lines": "when_to_use: Git.\n  <example>\n  user: hi\n  </example>\n"
    "allowed_tools_mode: restrict\n",
}


@pytest.mark.parametrize("written", sorted(RESTRICTIONS))
async def test_a_restriction_written_anywhere_never_pre_approves(
    tmp_path: Path, written: str
) -> None:
    """The model calls what the list names under `shell: ask`: a restricting skill must put
    it to a person, as without the skill, and refuse what the list leaves out."""
    extra = f"allowed-tools: Bash(git status:*)\n{RESTRICTIONS[written]}"
    write_skill(tmp_path / "skills", "strict-git", description="Git.", extra=extra)
    work = git_repo(tmp_path / "work")
    script = {
        "agent": [
            call("load_skill", name="shell"),
            call("load_skill", name="files"),
            call("load_skill", name="strict-git"),
            call("shell__run", command="git status"),
            call("files__read_file", path="notes.txt"),
            {"content": "done"},
        ]
    }
    model = ScriptedModel(script)
    asked = Asked()
    agent = Agent(
        model,
        name="agent",
        skills=SkillCatalog([tmp_path / "skills"]),
        permissions=Permissions(workspace=work, shell="ask"),
        approve=asked,
    )

    await agent.run("Look at the repository.")

    *_, status, read = tool_results(model)
    assert [r.arguments["command"] for r in asked.requests] == ["git status"]
    assert status[0] == "denied" and "a person denied it" in status[1]
    assert read[0] == "denied" and "not among the tools allowed" in read[1]


def test_skills_check_reads_a_top_level_mode_and_names_a_mistyped_one(tmp_path: Path) -> None:
    for written, line in RESTRICTIONS.items():
        extra = f"allowed-tools: Bash(git status:*)\n{line}"
        write_skill(tmp_path / "skills", written, description="Git.", extra=extra)

    checked = orchestrator("skills", "check", "skills", cwd=tmp_path)

    out = checked.stdout + checked.stderr
    assert "unknown frontmatter" not in out
    notes = [line for line in out.splitlines() if "[allowed-tools-mode]" in line]
    assert sorted(n.split(":")[0].split()[-1] for n in notes) == [
        "skills/capitalised",
        "skills/mistyped-value",
        "skills/not-text",
        "skills/underscored",
    ]  # `skills check` fails the one YAML cannot read, as the reference validator does
    assert all("read as allowed-tools-mode: restrict" in n for n in notes)


@needs_git
def test_a_job_with_a_claude_code_skill_through_the_command_line(tmp_path: Path) -> None:
    """`orchestrator run` off a terminal: nobody can be asked, so only pre-approved calls of
    a `shell: ask` run go through."""
    write_skill(tmp_path / ".claude" / "skills", "git-helper", description="Git.", extra=GIT_SKILL)
    git_repo(tmp_path / "work")
    script = {
        "goal": [
            call("load_skill", name="git-helper"),
            call("load_skill", name="files"),
            call("files__read_file", path="notes.txt"),
            call("load_skill", name="shell"),
            call("shell__run", command="git add notes.txt"),
            call("shell__run", command="git add notes.txt && touch owned.txt"),
            {"content": "done"},
        ]
    }
    (tmp_path / "script.yaml").write_text(json.dumps(script), encoding="utf-8")
    (tmp_path / "job.yaml").write_text(
        "name: t\nmodel: scripted:script.yaml\npermissions: {shell: ask}\non_input: deny\n"
        "goal: go\n",
        encoding="utf-8",
    )

    done = orchestrator("run", "job.yaml", "--trace", "t.jsonl", cwd=tmp_path, stdin="")

    assert done.returncode == 0, done.stderr
    events = list(read_trace(tmp_path / "t.jsonl"))
    results = [
        e.message
        for e in events
        if e.type == "message" and e.message.role == "tool"  # type: ignore[union-attr]
    ]
    texts = {m.name: [] for m in results}  # type: ignore[union-attr]
    for message in results:
        texts[message.name].append((message.error_type, message.content))  # type: ignore[union-attr]
    assert texts["files__read_file"] == [(None, "a note\n")]
    added, chained_call = texts["shell__run"]
    assert added[0] is None
    assert chained_call[0] == "denied" and "the command holds '&'" in chained_call[1]
    assert not (tmp_path / "work" / "owned.txt").exists()


async def test_a_forked_skills_list_pre_approves_in_its_sub_agent(tmp_path: Path) -> None:
    write_skill(
        tmp_path / "skills",
        "summarise",
        description="Summarises.",
        extra="context: fork\nallowed-tools: Write\n",
        body="Write the summary to summary.txt.",
    )
    work = tmp_path / "work"
    work.mkdir()
    script = {
        "planner": [call("load_skill", name="summarise"), {"content": "done"}],
        "planner/summarise-1": [
            call("load_skill", name="files"),
            call("files__write_file", path="summary.txt", content="short"),  # pre-approved
            call("files__edit_file", path="summary.txt", old_text="short", new_text="x"),  # asks
            {"content": "written"},
        ],
    }
    model = ScriptedModel(script)
    orchestrator = Orchestrator(
        model,
        skills=[tmp_path / "skills"],
        permissions=Permissions(workspace=work, tools={"files__*": "ask"}),
        on_input="deny",
    )

    await orchestrator.run("Summarise.")

    model.assert_all_used()
    _, write, edit = tool_results(model, "planner/summarise-1")
    assert write[0] is None and (work / "summary.txt").read_text() == "short"
    assert edit[0] == "denied" and "needs a person's approval" in edit[1]
