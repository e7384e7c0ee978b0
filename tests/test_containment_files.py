"""Symlink races: a link swapped in between the check of a path and its open cannot lead the
file tools out of the workspace. The attacker is a real process that flips a folder of the
workspace to a link pointing outside, and back, as fast as it can."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from skill_factory import call, context

from orchestrator.agent import Tool
from orchestrator.errors import PermissionDenied, ToolError
from orchestrator.security import (
    PathRefused,
    is_temporary,
    open_resolved,
    resolve_inside,
    write_resolved,
)
from orchestrator.security import workspace as workspace_module
from orchestrator.skills import SkillCatalog

FLIPPER = """
import os, sys
from pathlib import Path
root, outside = Path(sys.argv[1]), sys.argv[2]
link = root / ".link"
os.symlink(outside, link)
while True:
    os.rename(root / "real", root / ".kept")   # the checked folder goes away...
    os.rename(link, root / "real")             # ...a link out of the workspace takes its place
    os.rename(root / "real", link)
    os.rename(root / ".kept", root / "real")
"""
ATTEMPTS = 800


@pytest.fixture(scope="module")
def tools() -> dict[str, Tool]:
    skill = SkillCatalog(include_builtin=True).load("files")
    return {t.name.removeprefix("files__"): t for t in skill.tools}


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    root, outside = tmp_path / "ws", tmp_path / "outside"
    (root / "real").mkdir(parents=True)
    outside.mkdir()
    (root / "real" / "data.txt").write_text("inside\n")
    (outside / "data.txt").write_text("SECRET\n")
    return root, outside


@pytest.fixture
def flipper(layout: tuple[Path, Path]) -> Iterator[subprocess.Popen[bytes]]:
    root, outside = layout
    process = subprocess.Popen([sys.executable, "-c", FLIPPER, str(root), str(outside)])
    time.sleep(0.2)
    try:
        yield process
    finally:
        process.kill()
        process.wait()


@pytest.fixture
def flipping(layout: tuple[Path, Path], flipper: subprocess.Popen[bytes]) -> tuple[Path, Path]:
    return layout


def test_a_link_swapped_in_after_the_check_is_refused(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    checked = resolve_inside(root, "real/data.txt")
    # The race, frozen at its worst moment: the checked folder becomes a link out.
    (root / "real").rename(root / "kept")
    (root / "real").symlink_to(outside)
    with pytest.raises(PathRefused, match="changed while it was being opened"):
        open_resolved(root, checked)
    with pytest.raises(PathRefused):
        write_resolved(root, checked, b"changed\n")
    assert (outside / "data.txt").read_text() == "SECRET\n"


def test_a_link_swapped_in_for_the_folder_before_the_rename_keeps_the_write_inside(
    layout: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, outside = layout
    checked = resolve_inside(root, "real/data.txt")
    rename = os.replace

    def swap_then_rename(source: str, name: str, *, src_dir_fd: int, dst_dir_fd: int) -> None:
        # The race, frozen between the checked folder's open and the rename into it.
        (root / "real").rename(root / "kept")
        (root / "real").symlink_to(outside)
        rename(source, name, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

    monkeypatch.setattr(workspace_module.os, "replace", swap_then_rename)
    write_resolved(root, checked, b"changed\n")
    monkeypatch.undo()

    # The rename happened in the folder that was opened and locked: it is inside, now `kept`.
    assert (root / "kept" / "data.txt").read_text() == "changed\n"
    assert (outside / "data.txt").read_text() == "SECRET\n"
    assert sorted(p.name for p in outside.iterdir()) == ["data.txt"]
    assert sorted(p.name for p in (root / "kept").iterdir()) == ["data.txt"]


async def test_reads_never_see_outside_files_while_links_flip(
    tools: dict[str, Tool], flipping: tuple[Path, Path]
) -> None:
    root, _ = flipping
    ctx = context(root)
    seen: dict[str, int] = {}
    for _ in range(ATTEMPTS):
        try:
            text = await call(tools["read_file"], ctx, path="real/data.txt")
        except (ToolError, PermissionDenied):
            text = "refused"
        seen[text] = seen.get(text, 0) + 1
    assert set(seen) <= {"inside\n", "refused"}
    assert "SECRET" not in "".join(seen)


async def test_writes_never_land_outside_while_links_flip(
    tools: dict[str, Tool], flipping: tuple[Path, Path], flipper: subprocess.Popen[bytes]
) -> None:
    root, outside = flipping
    ctx = context(root)
    for i in range(ATTEMPTS):
        try:
            await call(tools["write_file"], ctx, path="real/data.txt", content=f"write {i}\n")
        except (ToolError, PermissionDenied, OSError):
            pass
    flipper.kill()  # the folders hold still while they are looked over
    flipper.wait()
    assert (outside / "data.txt").read_text() == "SECRET\n"
    assert sorted(p.name for p in outside.iterdir()) == ["data.txt"]
    # However a write failed, it left no temporary file behind.
    assert not [p for p in root.parent.rglob("*") if is_temporary(p.name)]


async def test_named_pipes_and_folders_are_refused_without_blocking(
    tools: dict[str, Tool], layout: tuple[Path, Path]
) -> None:
    root, _ = layout
    os.mkfifo(root / "pipe")
    ctx = context(root)
    with pytest.raises(PermissionDenied, match="not a regular file"):
        await call(tools["read_file"], ctx, path="pipe")
    with pytest.raises(ToolError, match="is a folder"):
        await call(tools["read_file"], ctx, path="real")
