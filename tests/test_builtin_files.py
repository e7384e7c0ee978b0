"""The built-in `files` skill, on real files in a temporary workspace."""

from __future__ import annotations

from pathlib import Path

import pytest
from skill_factory import call, context, scripted_agent

from orchestrator.agent import Tool, ToolContext
from orchestrator.errors import PermissionDenied, ToolError
from orchestrator.security import Permissions
from orchestrator.skills import SkillCatalog


@pytest.fixture(scope="module")
def tools() -> dict[str, Tool]:
    skill = SkillCatalog(include_builtin=True).load("files")
    return {t.name.removeprefix("files__"): t for t in skill.tools}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text(
        "def main():\n    return 1\n\n\ndef other():\n    return 1\n"
    )
    (root / "notes.md").write_text("one\ntwo\nthree\nfour\nfive\n")
    (tmp_path / "outside.txt").write_text("secret")
    return root


@pytest.fixture
def ctx(ws: Path) -> ToolContext:
    return context(ws)


def test_the_skill_has_its_six_tools(tools: dict[str, Tool]) -> None:
    assert set(tools) == {"read_file", "write_file", "edit_file", "list_dir", "glob", "grep"}


async def test_read_file_whole_and_by_lines(tools: dict[str, Tool], ctx: ToolContext) -> None:
    read = tools["read_file"]
    assert await call(read, ctx, path="notes.md") == "one\ntwo\nthree\nfour\nfive\n"
    assert await call(read, ctx, path="notes.md", start_line=2, end_line=3) == (
        "two\nthree\n[lines 2-3 of 5]"
    )
    assert await call(read, ctx, path="notes.md", start_line=4) == "four\nfive\n[lines 4-5 of 5]"
    with pytest.raises(ToolError, match="has 5 lines"):
        await call(read, ctx, path="notes.md", start_line=9)
    with pytest.raises(ToolError, match="no file 'nope.md'"):
        await call(read, ctx, path="nope.md")
    with pytest.raises(ToolError, match="is a folder"):
        await call(read, ctx, path="src")


async def test_read_file_caps_long_files(
    tools: dict[str, Tool], ctx: ToolContext, ws: Path
) -> None:
    (ws / "big.txt").write_text("".join(f"line {i:05d} " + "x" * 90 + "\n" for i in range(2000)))
    text = await call(tools["read_file"], ctx, path="big.txt")
    assert len(text) < 52_000
    assert text.endswith("output capped, read on with start_line=491]")
    assert text.startswith("line 00000")


async def test_read_file_refuses_binary_files(
    tools: dict[str, Tool], ctx: ToolContext, ws: Path
) -> None:
    (ws / "blob.bin").write_bytes(b"\x00\x01\x02" * 10)
    with pytest.raises(ToolError, match="binary"):
        await call(tools["read_file"], ctx, path="blob.bin")


async def test_write_file_creates_folders(
    tools: dict[str, Tool], ctx: ToolContext, ws: Path
) -> None:
    text = await call(tools["write_file"], ctx, path="out/deep/new.txt", content="a\nb")
    assert text == "Wrote 3 characters (2 lines) to out/deep/new.txt."
    assert (ws / "out" / "deep" / "new.txt").read_text() == "a\nb"
    await call(tools["write_file"], ctx, path="notes.md", content="replaced\n")
    assert (ws / "notes.md").read_text() == "replaced\n"


@pytest.mark.parametrize("path", ["../outside.txt", "src/../../outside.txt"])
async def test_paths_out_of_the_workspace_are_refused(
    tools: dict[str, Tool], ctx: ToolContext, ws: Path, path: str
) -> None:
    for name, extra in (
        ("read_file", {}),
        ("write_file", {"content": "x"}),
        ("edit_file", {"old_text": "secret", "new_text": "x"}),
        ("list_dir", {}),
        ("grep", {"pattern": "secret"}),
    ):
        with pytest.raises(PermissionDenied):
            await call(tools[name], ctx, path=path, **extra)
    with pytest.raises(PermissionDenied, match="absolute"):
        await call(tools["read_file"], ctx, path=str(ws.parent / "outside.txt"))
    assert (ws.parent / "outside.txt").read_text() == "secret"


async def test_symlinks_out_of_the_workspace_are_refused(
    tools: dict[str, Tool], ctx: ToolContext, ws: Path
) -> None:
    (ws / "link.txt").symlink_to(ws.parent / "outside.txt")
    (ws / "linkdir").symlink_to(ws.parent)
    with pytest.raises(PermissionDenied, match="symbolic link"):
        await call(tools["read_file"], ctx, path="link.txt")
    with pytest.raises(PermissionDenied, match="symbolic link"):
        await call(tools["write_file"], ctx, path="linkdir/new.txt", content="x")
    assert not (ws.parent / "new.txt").exists()
    assert await call(tools["grep"], ctx, pattern="secret") == "No match for 'secret'."
    # Through the link only what lies inside the workspace again (ws itself) is listed.
    assert await call(tools["glob"], ctx, pattern="linkdir/*") == "linkdir/ws"


async def test_edit_file_replaces_one_unique_match(
    tools: dict[str, Tool], ctx: ToolContext, ws: Path
) -> None:
    text = await call(
        tools["edit_file"],
        ctx,
        path="src/app.py",
        old_text="def main():\n    return 1",
        new_text="def main():\n    return 2",
    )
    assert text.startswith("Edited 'src/app.py' at line 1")
    assert (ws / "src" / "app.py").read_text().startswith("def main():\n    return 2\n")


async def test_edit_file_refuses_zero_or_several_matches_and_leaves_the_file(
    tools: dict[str, Tool], ctx: ToolContext, ws: Path
) -> None:
    target = ws / "src" / "app.py"
    before = target.read_bytes()
    with pytest.raises(ToolError, match=r"occurs 2 times .*lines 2, 6.*unchanged"):
        await call(tools["edit_file"], ctx, path="src/app.py", old_text="return 1", new_text="x")
    with pytest.raises(ToolError, match="not found.*unchanged"):
        await call(tools["edit_file"], ctx, path="src/app.py", old_text="return 3", new_text="x")
    with pytest.raises(ToolError, match="empty"):
        await call(tools["edit_file"], ctx, path="src/app.py", old_text="", new_text="x")
    assert target.read_bytes() == before


async def test_edit_file_of_a_missing_file_or_a_folder_changes_nothing(
    tools: dict[str, Tool], ctx: ToolContext, ws: Path
) -> None:
    edit = tools["edit_file"]
    with pytest.raises(ToolError, match="no file 'nope/deeper.md'"):
        await call(edit, ctx, path="nope/deeper.md", old_text="a", new_text="b")
    with pytest.raises(ToolError, match="no file 'nope.md'"):
        await call(edit, ctx, path="nope.md", old_text="a", new_text="b")
    with pytest.raises(ToolError, match="'src' is a folder"):
        await call(edit, ctx, path="src", old_text="a", new_text="b")
    assert not (ws / "nope").exists() and not (ws / "nope.md").exists()


async def test_edit_file_keeps_crlf_line_endings(
    tools: dict[str, Tool], ctx: ToolContext, ws: Path
) -> None:
    (ws / "win.txt").write_bytes(b"alpha\r\nbeta\r\n")
    await call(tools["edit_file"], ctx, path="win.txt", old_text="beta", new_text="gamma")
    assert (ws / "win.txt").read_bytes() == b"alpha\r\ngamma\r\n"


async def test_list_dir(tools: dict[str, Tool], ctx: ToolContext, ws: Path) -> None:
    (ws / "empty").mkdir()
    assert await call(tools["list_dir"], ctx) == "empty/\nsrc/\nnotes.md (24 bytes)"
    assert await call(tools["list_dir"], ctx, path="empty") == "(empty folder)"
    with pytest.raises(ToolError, match="not a folder"):
        await call(tools["list_dir"], ctx, path="notes.md")


async def test_glob(tools: dict[str, Tool], ctx: ToolContext, ws: Path) -> None:
    (ws / "src" / "pkg").mkdir()
    (ws / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    (ws / "src" / "__pycache__").mkdir()
    (ws / "src" / "__pycache__" / "app.py").write_text("")
    assert await call(tools["glob"], ctx, pattern="**/*.py") == "src/app.py\nsrc/pkg/mod.py"
    assert await call(tools["glob"], ctx, pattern="*.py", path="src") == "src/app.py"
    with pytest.raises(PermissionDenied):
        await call(tools["glob"], ctx, pattern="../*")
    with pytest.raises(PermissionDenied):
        await call(tools["glob"], ctx, pattern="/etc/*")


async def test_grep(tools: dict[str, Tool], ctx: ToolContext, ws: Path) -> None:
    (ws / "blob.bin").write_bytes(b"\x00return 1")
    grep = tools["grep"]
    assert (
        await call(grep, ctx, pattern=r"return \d")
        == "src/app.py:2:     return 1\nsrc/app.py:6:     return 1"
    )
    assert await call(grep, ctx, pattern="THREE", ignore_case=True) == "notes.md:3: three"
    assert await call(grep, ctx, pattern="three", include="*.py") == "No match for 'three'."
    assert await call(grep, ctx, pattern="o", path="notes.md", max_matches=2) == (
        "notes.md:1: one\nnotes.md:2: two\n[stopped after 2 matches]"
    )
    with pytest.raises(ToolError, match="not a valid regular expression"):
        await call(grep, ctx, pattern="(")


async def test_grep_skips_dangling_links(
    tools: dict[str, Tool], ctx: ToolContext, ws: Path
) -> None:
    (ws / "src" / "gone.py").symlink_to(ws / "src" / "deleted.py")
    result = await call(tools["grep"], ctx, pattern=r"return \d")
    assert result == "src/app.py:2:     return 1\nsrc/app.py:6:     return 1"


def test_through_the_loop_a_refusal_is_a_denied_observation(ws: Path) -> None:
    agent, _ = scripted_agent(
        [
            {"tool_calls": [{"name": "load_skill", "arguments": {"name": "files"}}]},
            {
                "tool_calls": [
                    {"name": "files__read_file", "arguments": {"path": "../outside.txt"}},
                    {"name": "files__read_file", "arguments": {"path": "notes.md"}},
                ]
            },
            {"content": "done"},
        ],
        skills=SkillCatalog(),
        permissions=Permissions(workspace=ws),
    )
    result = agent.run_sync("read")
    denied, fine = [m for m in result.messages if m.name == "files__read_file"]
    assert denied.error_type == "denied"
    assert "Permission denied" in (denied.content or "")
    assert fine.error_type is None and fine.content == "one\ntwo\nthree\nfour\nfive\n"
