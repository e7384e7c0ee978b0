"""Parallel writes lose nothing: tool calls of one turn, forked sub-agents and other processes
that write the same file or folder, through the real loop with a scripted model (issue #31)."""

from __future__ import annotations

import errno
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from skill_factory import scripted_agent

from orchestrator import Message, Orchestrator
from orchestrator.models import ScriptedModel
from orchestrator.security import (
    Permissions,
    is_temporary,
    locked_file,
    resolve_inside,
    write_resolved,
)
from orchestrator.security import workspace as workspace_module
from orchestrator.skills import SkillCatalog

ROUNDS = 50
LOAD_FILES = {"tool_calls": [{"name": "load_skill", "arguments": {"name": "files"}}]}


def edit(path: str, old: str, new: str) -> dict[str, Any]:
    return {
        "name": "files__edit_file",
        "arguments": {"path": path, "old_text": old, "new_text": new},
    }


def write(path: str, content: str) -> dict[str, Any]:
    return {"name": "files__write_file", "arguments": {"path": path, "content": content}}


async def run_turn(workspace: Path, calls: list[dict[str, Any]]) -> list[Message]:
    """One agent that loads `files`, makes `calls` in one turn, and answers: the calls' results."""
    agent, _ = scripted_agent(
        [LOAD_FILES, {"tool_calls": calls}, {"content": "done"}],
        skills=SkillCatalog(),
        permissions=Permissions(workspace=workspace),
    )
    result = await agent.run("edit")
    assert result.status == "completed"
    return [m for m in result.messages if m.role == "tool" and m.name != "load_skill"]


@pytest.mark.slow
async def test_eight_parallel_edits_of_one_file_in_one_turn_all_land(tmp_path: Path) -> None:
    lines = [f"line {i} = old\n" for i in range(8)]
    for round_ in range(ROUNDS):
        (tmp_path / "many.txt").write_text("".join(lines))
        calls = [edit("many.txt", f"line {i} = old", f"line {i} = NEW") for i in range(8)]
        results = await run_turn(tmp_path, calls)

        assert [m.error_type for m in results] == [None] * 8, (round_, results)
        assert (tmp_path / "many.txt").read_text() == "".join(
            line.replace("old", "NEW") for line in lines
        ), round_


@pytest.mark.slow
async def test_four_parallel_writes_into_one_new_nested_folder_all_land(tmp_path: Path) -> None:
    for round_ in range(ROUNDS):
        folder = f"out{round_}/deep/er"
        calls = [write(f"{folder}/file{i}.txt", f"content {i}\n") for i in range(4)]
        results = await run_turn(tmp_path, calls)

        assert [m.error_type for m in results] == [None] * 4, (round_, results)
        made = sorted(p.name for p in (tmp_path / folder).iterdir())
        assert made == [f"file{i}.txt" for i in range(4)]
        for i in range(4):
            assert (tmp_path / folder / f"file{i}.txt").read_text() == f"content {i}\n"


@pytest.mark.slow
async def test_three_forked_sub_agents_editing_one_file_all_land(tmp_path: Path) -> None:
    ids = ("a", "b", "c")
    tasks = [{"id": i, "task": f"Edit line {i}.", "skills": ["files"]} for i in ids]
    script: dict[str, list[dict[str, Any]]] = {
        "planner": [
            {"tool_calls": [{"name": "fork", "arguments": {"tasks": tasks}}]},
            {"content": "all edited"},
        ],
        **{
            f"planner/{i}": [
                {"tool_calls": [edit("shared.txt", f"{i} = old", f"{i} = NEW")]},
                {"content": f"{i} edited"},
            ]
            for i in ids
        },
    }
    for round_ in range(ROUNDS):
        (tmp_path / "shared.txt").write_text("".join(f"{i} = old\n" for i in ids))
        model = ScriptedModel(script)
        orchestrator = Orchestrator(model, permissions=Permissions(workspace=tmp_path))
        result = await orchestrator.run("Edit the three lines in parallel.")

        assert result.status == "completed"
        assert [c.status for c in result.children] == ["completed"] * 3
        for child in result.children:
            assert child.run is not None
            (answer,) = [m for m in child.run.messages if m.name == "files__edit_file"]
            assert answer.error_type is None, (round_, answer.content)
        assert (tmp_path / "shared.txt").read_text() == "".join(f"{i} = NEW\n" for i in ids)


async def test_overlapping_edits_one_applies_and_the_other_fails_clearly(tmp_path: Path) -> None:
    for round_ in range(20):
        (tmp_path / "both.txt").write_text("alpha beta gamma\n")
        calls = [edit("both.txt", "alpha beta", "ONE"), edit("both.txt", "beta gamma", "TWO")]
        results = await run_turn(tmp_path, calls)

        failed = [m for m in results if m.error_type is not None]
        assert len(failed) == 1, (round_, results)
        assert "old_text was not found in 'both.txt'; the file is unchanged" in (
            failed[0].content or ""
        )
        assert (tmp_path / "both.txt").read_text() in ("ONE gamma\n", "alpha TWO\n")


def test_a_reader_never_sees_a_torn_file(tmp_path: Path) -> None:
    size = 2_000_000
    versions = (b"a" * size, b"b" * size)
    target = tmp_path / "big.bin"
    target.write_bytes(versions[0])
    seen: set[tuple[int, int]] = set()
    done = threading.Event()

    def read_until_done() -> None:
        while not done.is_set():
            data = target.read_bytes()
            seen.add((len(data), data.count(data[:1])))

    reader = threading.Thread(target=read_until_done)
    reader.start()
    try:
        for n in range(40):
            write_resolved(tmp_path, target, versions[n % 2])
    finally:
        done.set()
        reader.join()
    assert seen == {(size, size)}  # whole, and all of one version


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "kept.txt"
    target.write_text("before\n")

    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(workspace_module.os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space left"):
        write_resolved(tmp_path, target, b"after\n")
    monkeypatch.undo()

    assert target.read_text() == "before\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.txt"]


def test_a_write_keeps_the_mode_and_its_temporary_file_is_unlisted(tmp_path: Path) -> None:
    target = tmp_path / "script.sh"
    target.write_text("echo one\n")
    target.chmod(0o750)
    write_resolved(tmp_path, target, b"echo two\n")
    assert stat.S_IMODE(target.stat().st_mode) == 0o750
    assert target.read_text() == "echo two\n"

    with locked_file(tmp_path, target) as file, file.open() as handle:
        assert handle.read() == b"echo two\n"
    assert is_temporary(".script.sh.0123abcd" + workspace_module.TEMP_SUFFIX)
    assert not is_temporary("script.sh")


EDITOR = """
import sys, time
from pathlib import Path
from orchestrator.agent import ToolContext
from orchestrator.security import Permissions
from orchestrator.skills import SkillCatalog

root, letter, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
edit = {t.name: t for t in SkillCatalog().load("files").tools}["files__edit_file"]
ctx = ToolContext(agent=letter, permissions=Permissions(workspace=root))
while not (root / "go").exists():
    time.sleep(0.001)
for i in range(count):
    edit.fn(path="shared.txt", old_text=f"{letter}{i} old", new_text=f"{letter}{i} NEW", ctx=ctx)
"""


def test_two_processes_editing_one_file_lose_no_edit(tmp_path: Path) -> None:
    count = 150
    lines = [f"{letter}{i} old\n" for i in range(count) for letter in "xy"]
    (tmp_path / "shared.txt").write_text("".join(lines))
    editors = [
        subprocess.Popen(
            [sys.executable, "-c", EDITOR, str(tmp_path), letter, str(count)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for letter in "xy"
    ]
    time.sleep(0.3)  # both import before either starts: their edits overlap in time
    (tmp_path / "go").touch()
    for editor in editors:
        _, errors = editor.communicate(timeout=120)
        assert editor.returncode == 0, errors

    assert (tmp_path / "shared.txt").read_text() == "".join(
        line.replace("old", "NEW") for line in lines
    )
    assert not [p for p in tmp_path.iterdir() if is_temporary(p.name)]


def test_resolve_then_write_through_a_link_inside_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real")
    target = resolve_inside(tmp_path, "alias/new.txt")
    write_resolved(tmp_path, target, b"through the link\n")
    assert (tmp_path / "real" / "new.txt").read_text() == "through the link\n"
    assert [p.name for p in (tmp_path / "real").iterdir()] == ["new.txt"]
