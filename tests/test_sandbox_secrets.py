"""Files of keys stay hidden in every folder mounted for a command, not only the workspace.

A hostile model with shell and Python allowed goes for the keys a run's own folders hold: a
`.env` in a skill folder (mounted read-only so the skill's scripts run), a file matching the
permissions' `secret_files` (`*.pem`) in the workspace and in a `sandbox.read_only` path.
It reads each with `cat` and with Python's `open()`: none reaches a tool result or the
trace, and the files beside them still read.
"""

from __future__ import annotations

from pathlib import Path

from skill_factory import write_skill
from test_sandbox import LOADS, Host, call, host, needs_bubblewrap, python, shell

from orchestrator import Agent, Permissions
from orchestrator.models import ScriptedModel
from orchestrator.security import SandboxSettings
from orchestrator.security.inventory import DOTENV_FILES
from orchestrator.skills import SkillCatalog

__all__ = ["host"]  # the fixture, used by name

SKILL_DOTENV = "REPORT_API_KEY=sk-in-the-skill-folder-41c7"
WORKSPACE_PEM = "-----BEGIN PRIVATE KEY----- in-the-workspace-8e02"
READ_ONLY_PEM = "-----BEGIN PRIVATE KEY----- in-a-read-only-path-d95b"


@needs_bubblewrap
def test_keys_in_skill_folders_read_only_paths_and_the_workspace_stay_hidden(
    host: Host,
) -> None:
    skills = host.root / "skills"
    folder = write_skill(skills, "report", description="Reports.")
    (folder / ".env").write_text(SKILL_DOTENV + "\n")
    (host.work / "keys").mkdir()
    (host.work / "keys" / "server.pem").write_text(WORKSPACE_PEM + "\n")
    reference = host.root / "reference"
    (reference / "deep").mkdir(parents=True)
    (reference / "deep" / "client.pem").write_text(READ_ONLY_PEM + "\n")
    (reference / "table.csv").write_text("a,b\n")
    targets = [folder / ".env", host.work / "keys" / "server.pem", reference / "deep/client.pem"]
    reads = [shell(f"cat {target}") for target in targets]
    reads += [python(f"print(open({str(target)!r}).read())") for target in targets]
    reads += [shell(f"cat {reference}/table.csv {folder}/SKILL.md")]
    model = ScriptedModel(
        {"agent": [call("load_skill", name="report"), *LOADS, *reads, {"content": "done"}]}
    )
    permissions = Permissions(
        workspace=host.work,
        shell=True,
        python=True,
        secret_files=(*DOTENV_FILES, "*.pem"),
        sandbox=SandboxSettings(read_only=(reference,)),
    )
    agent = Agent(
        model,
        name="agent",
        skills=SkillCatalog([skills]),
        permissions=permissions,
        trace=host.trace,
    )
    assert agent.run_sync("Report.").status == "completed"

    results = [m.content or "" for m in model.requests[-1].messages if m.role == "tool"]
    trace = host.trace.read_text()
    for secret in (SKILL_DOTENV, WORKSPACE_PEM, READ_ONLY_PEM):
        assert secret not in "\n".join(results)
        assert secret not in trace
    for target, text in zip(targets * 2, results[3:9], strict=True):
        # Covered by a device node that cannot be opened: the read names what it could not.
        assert "Permission denied" in text and str(target) in text, text
    assert "a,b" in results[9] and "Reports." in results[9]  # what lies beside still reads
    # The keys themselves are untouched on the host.
    assert (folder / ".env").read_text() == SKILL_DOTENV + "\n"


def test_the_sandbox_hides_the_permissions_secret_files_wherever_they_are_mounted(
    tmp_path: Path,
) -> None:
    from orchestrator.security.sandbox import _hidden, command_sandbox

    work, skills, reference = tmp_path / "work", tmp_path / "skills", tmp_path / "reference"
    for folder in (work, skills / "report", reference):
        folder.mkdir(parents=True)
    hidden = [work / "a.pem", skills / "report" / ".env", reference / "b.pem"]
    for path in [*hidden, work / "notes.txt", reference / "c.txt"]:
        path.write_text("x")
    permissions = Permissions(
        workspace=work,
        shell=True,
        secret_files=(*DOTENV_FILES, "*.pem"),
        read_only=(skills,),
        sandbox=SandboxSettings(backend="none", read_only=(reference,)),
    )
    sandbox = command_sandbox(permissions)
    masked = _hidden((work, reference, skills), sandbox.secret_files)
    assert sorted(masked) == sorted(hidden)


@needs_bubblewrap
def test_a_link_named_like_a_key_to_nothing_inside_does_not_stop_commands(host: Host) -> None:
    (host.work / ".env").unlink()
    for name in (".env", "server.pem"):
        (host.work / name).symlink_to(host.root / "elsewhere" / name)
    model = ScriptedModel({"agent": [LOADS[0], shell("echo still runs"), {"content": "done"}]})
    permissions = Permissions(
        workspace=host.work, shell=True, secret_files=(*DOTENV_FILES, "*.pem")
    )
    Agent(model, name="agent", skills=SkillCatalog(), permissions=permissions).run_sync("Go.")

    results = [m.content or "" for m in model.requests[-1].messages if m.role == "tool"]
    assert results[1] == "[exit code 0]\nstill runs\n"
