"""What a run lets its skills' folders do inside the sandbox: a folder told to pre-approve
nothing lends its skills' `allowed-tools` no standing approval, whatever a hostile model loads.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cli_process import orchestrator
from skill_factory import write_skill
from test_sandbox import SPEC, Host, call, host, needs_bubblewrap, shell

from orchestrator import Agent, Permissions
from orchestrator.models import ScriptedModel
from orchestrator.security import SandboxSettings
from orchestrator.skills import SkillCatalog, SkillFolder

__all__ = ["host"]  # the fixture, used by name

GIT_HELPER = "allowed-tools: Bash(git add:*)\n"


def staged(work: Path) -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files"], cwd=work, capture_output=True, text=True, check=True
    )
    return listed.stdout.split()


@needs_bubblewrap
@pytest.mark.parametrize("preapprove", [True, False])
def test_a_folder_told_to_pre_approve_nothing_lends_its_skills_no_approval(
    host: Host, preapprove: bool
) -> None:
    vendor = host.root / "vendor-skills"
    write_skill(vendor, "git-helper", description="Git.", extra=GIT_HELPER)
    subprocess.run(["git", "init", "-q", str(host.work)], check=True)
    (host.work / "a.txt").write_text("a\n")
    hostile = [
        call("load_skill", name="git-helper"),
        call("load_skill", name="shell"),
        shell("git add a.txt"),
        {"content": "done"},
    ]
    model = ScriptedModel({"agent": hostile})
    agent = Agent(
        model,
        name="agent",
        skills=[SkillFolder(vendor, preapprove=preapprove)],
        permissions=Permissions(
            workspace=host.work, shell="ask", sandbox=SandboxSettings(backend="bubblewrap")
        ),
    )  # no approver: a call that asks is denied

    agent.run_sync("Stage a.txt.")

    added = [m for m in model.requests[-1].messages if m.role == "tool"][-1]
    if preapprove:  # the folder's default: the listed command runs, confined
        assert not added.is_error, added.content
        assert staged(host.work) == ["a.txt"]
    else:
        assert added.error_type == "denied"
        assert "preapprove: false" in (added.content or "")
        assert staged(host.work) == []


def test_a_catalog_keeps_the_strictest_word_for_a_folder_named_twice(tmp_path: Path) -> None:
    write_skill(tmp_path / "skills", "git-helper", description="Git.", extra=GIT_HELPER)
    folder = tmp_path / "skills"

    catalog = SkillCatalog([folder, SkillFolder(folder, preapprove=False)])

    info = catalog.require("git-helper")
    assert not info.preapprove
    assert SkillCatalog([folder]).require("git-helper").preapprove


@needs_bubblewrap
def test_a_job_lists_a_folder_that_pre_approves_nothing_at_its_start(tmp_path: Path) -> None:
    write_skill(tmp_path / "vendor", "git-helper", description="Git.", extra=GIT_HELPER)
    write_skill(tmp_path / "own", "committer", description="Commit.", extra=GIT_HELPER)
    (tmp_path / "script.yaml").write_text("only: [{content: listed}]\n")
    permissions = "{shell: ask, sandbox: {backend: bubblewrap}}"
    skills = "skills: [own, {path: vendor, preapprove: false}]\n"
    (tmp_path / "job.yaml").write_text(SPEC.format(permissions=permissions) + skills)

    done = orchestrator("run", "job.yaml", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "pre-approves" in line]
    assert any(
        "skill 'committer' pre-approves, once loaded: Bash(git add:*)" in line for line in lines
    )
    [vendor] = [line for line in lines if "git-helper" in line]
    assert "pre-approves nothing" in vendor and "preapprove: false" in vendor


def test_a_spec_folder_entry_takes_only_a_path_and_preapprove(tmp_path: Path) -> None:
    (tmp_path / "vendor").mkdir()
    (tmp_path / "script.yaml").write_text("only: [{content: listed}]\n")
    skills = "skills: [{path: vendor, preapprove: nope}]\n"
    (tmp_path / "job.yaml").write_text(SPEC.format(permissions="{}") + skills)

    done = orchestrator("validate", "job.yaml", cwd=tmp_path)

    assert done.returncode != 0
    assert "skills.0.preapprove" in done.stderr or "skills[0].preapprove" in done.stderr
