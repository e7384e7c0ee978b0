"""What a run lets its skills do inside the sandbox: a folder told to pre-approve nothing lends
its skills' `allowed-tools` no standing approval, whatever a hostile model loads; a host a skill
declares is granted only within the run's own network, and the run says what it does not grant.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from cli_process import orchestrator
from skill_factory import write_skill
from test_sandbox import (
    SPEC,
    Host,
    Listener,
    allowed_server,
    call,
    host,
    listener,
    needs_bubblewrap,
    shell,
)
from trace_lines import trace_lines

from orchestrator import Agent, Permissions
from orchestrator.models import ScriptedModel
from orchestrator.security import SandboxSettings
from orchestrator.skills import SkillCatalog, SkillFolder

__all__ = ["allowed_server", "host", "listener"]  # the fixtures, used by name

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
        on_input="deny",
    )  # no approver, and no waiting: a call that asks is denied

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


FETCH = """\
import sys, urllib.request
for url in sys.argv[1:]:
    try:
        print(url, urllib.request.urlopen(url, timeout=5).read().decode().strip())
    except Exception as exc:
        print(url, "failed:", exc, getattr(exc, "read", lambda: b"")().decode().strip())
"""


def fetcher_skill(skills: Path, *hosts: str) -> Path:
    declared = f"metadata:\n  sandbox-network: {' '.join(hosts)}\n  sandbox-paths: /opt/tool\n"
    folder = write_skill(skills, "fetcher", description="Fetches.", extra=declared)
    (folder / "scripts").mkdir()
    (folder / "scripts" / "fetch.py").write_text(FETCH)
    return folder


@needs_bubblewrap
def test_a_host_a_skill_declares_is_granted_only_within_the_runs_network(
    tmp_path: Path, allowed_server: int, listener: Listener
) -> None:
    allowed, outside = f"127.0.0.1:{allowed_server}", f"127.0.0.1:{listener.port}"
    folder = fetcher_skill(tmp_path / "skills", allowed, outside)
    script = folder / "scripts" / "fetch.py"
    fetch = f"{sys.executable} {script} http://{allowed}/ http://{outside}/"
    turns = [
        call("load_skill", name="fetcher"),
        call("load_skill", name="shell"),
        shell(fetch),
        {"content": "fetched"},
    ]
    (tmp_path / "script.yaml").write_text(yaml.safe_dump({"only": turns}))
    permissions = json.dumps({"shell": True, "sandbox": {"network": [allowed]}})
    spec = SPEC.format(permissions=permissions) + "skills: [skills]\n"
    (tmp_path / "job.yaml").write_text(spec + "trace: trace.jsonl\n")

    done = orchestrator("run", "job.yaml", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    asked = [line for line in done.stderr.splitlines() if "does not grant" in line]
    assert len(asked) == 2, done.stderr  # the host outside, the path; not the allowed host
    assert f"skill 'fetcher' asks for {outside}: not in sandbox.network ({allowed})" in asked[0]
    assert "skill 'fetcher' asks for /opt/tool: not within the workspace" in asked[1]
    [fetched] = [
        e["message"]["content"]
        for e in trace_lines(tmp_path / "trace.jsonl")
        if e.get("message", {}).get("role") == "tool" and e["message"].get("name") == "shell__run"
    ]
    assert f"http://{allowed}/ hello from the allowed port" in fetched
    assert f"blocked by the sandbox: {outside} is not in sandbox.network" in fetched
    assert listener.accepted == 0


def test_skills_check_shows_what_each_skill_asks_for(tmp_path: Path) -> None:
    folder = fetcher_skill(tmp_path / "skills", "127.0.0.1:8080", "api.example.com:443")

    done = orchestrator("skills", "check", folder, cwd=tmp_path)

    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        "its scripts ask for: network 127.0.0.1:8080, api.example.com:443; paths /opt/tool"
        in done.stdout
    )
