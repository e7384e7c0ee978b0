"""Terminal sequences in what a file, a server or a model wrote never act on the terminal.

A hostile skill folder (its name, description and metadata), a `tools.py` that fails with
sequences in its error, an MCP server that writes them on stderr as it dies, and a model that
names a tool with them: `skills list`, `show` and `check`, a run's warnings and `trace show`
print what they said with every control character written as its escape, and no ESC, BEL
or C1 byte reaches standard output or standard error.
"""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest
from rich.console import Console
from skill_factory import write_skill

from orchestrator.cli.progress import LiveView
from orchestrator.messages import inert
from orchestrator.skills import SkillCatalog

OSC = "\x1b]0;owned\x07"  # sets the window title
CSI = "\x1b[2J"  # clears the screen
C1 = "\x9b31m"  # the one-byte CSI
ACTIVE = ("\x1b", "\x07", "\x9b")


def run_cli(*args: str, cwd: Path) -> tuple[str, str]:
    """`orchestrator ARGS`, its standard output and error as the terminal would get them."""
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        capture_output=True,
        cwd=cwd,
        timeout=120,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )
    return done.stdout.decode("utf-8", "replace"), done.stderr.decode("utf-8", "replace")


def assert_inert(out: str, err: str) -> None:
    for text in (out, err):
        for char in ACTIVE:
            assert char not in text, f"{char!r} reached the terminal:\n{text}"


def hostile_skills(root: Path) -> None:
    folder = root / "skills"
    write_skill(
        folder,
        "crafted",
        frontmatter=(
            "name: crafted\n"
            'description: "Reads files. \\e]0;owned\\a \\e]8;;http://evil.example\\a click"\n'
            'metadata:\n  author: "\\e[2J\\x9b31m mallory"\n'
        ),
    )
    write_skill(folder, f"bad{CSI}name", name="crafted-too", description="A folder named badly.")
    write_skill(
        folder,
        "broken",
        description="Fails to import.",
        tools=f"raise RuntimeError({OSC + 'import failed' + CSI!r})\n",
    )
    dying = f"import sys; sys.stderr.write({OSC + 'server died' + C1!r}); sys.exit(1)"
    mcp = write_skill(folder, "dying", description="An MCP server that dies.")
    (mcp / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"dying": {"command": sys.executable, "args": ["-c", dying]}}})
    )


def test_inert_writes_every_active_character_as_its_escape() -> None:
    assert inert(f"a{OSC}b") == "a\\x1b]0;owned\\x07b"
    assert inert(f"{CSI}{C1}") == "\\x1b[2J\\x9b31m"
    assert inert("right\u202eto left\rover") == "right\\u202eto left\\x0dover"
    assert inert("lines\r\nand\ttabs\n") == "lines\r\nand\ttabs\n"
    assert inert("plain, and ünïcode ✓") == "plain, and ünïcode ✓"


def test_the_skills_commands_print_no_terminal_sequence(tmp_path: Path) -> None:
    hostile_skills(tmp_path)

    listed = run_cli("skills", "list", cwd=tmp_path)
    assert "crafted" in listed[0] and "\\x1b]0;owned" in listed[0] + listed[1]
    assert_inert(*listed)
    shown = run_cli("skills", "show", "crafted", cwd=tmp_path)
    assert "mallory" in shown[0] and "\\x1b]0;owned" in shown[0]  # shown, as text
    assert_inert(*shown)
    assert_inert(*run_cli("skills", "show", "broken", "--as-model", cwd=tmp_path))
    checked = run_cli("skills", "check", "skills", cwd=tmp_path)
    assert "import failed" in checked[0] + checked[1]
    assert_inert(*checked)


def test_a_run_and_its_trace_print_no_terminal_sequence(tmp_path: Path) -> None:
    hostile_skills(tmp_path)
    turns = [
        {"tool_calls": [{"name": "load_skill", "arguments": {"name": "broken"}}]},
        {"tool_calls": [{"name": "load_skill", "arguments": {"name": "dying"}}]},
        {"tool_calls": [{"name": f"{OSC}files__read_file{CSI}", "arguments": {}}]},
        {"content": f"done{C1}"},
    ]
    (tmp_path / "script.json").write_text(json.dumps({"*": turns}))
    (tmp_path / "job.yaml").write_text(
        "name: escapes\nmodel: scripted:script.json\nskills: [skills]\n"
        "steps:\n  - {id: go, task: Use the skills.}\n"
    )

    ran = run_cli("run", "job.yaml", "--trace", "t.jsonl", cwd=tmp_path)
    assert "server died" in ran[1] and "import failed" in ran[1]  # the warnings, inert
    assert_inert(*ran)
    shown = run_cli("trace", "show", "t.jsonl", cwd=tmp_path)
    assert "files__read_file" in shown[0]
    assert_inert(*shown)


def test_the_live_view_draws_a_hostile_run_inert(tmp_path: Path) -> None:
    hostile_skills(tmp_path)
    turns = [
        {"tool_calls": [{"name": "load_skill", "arguments": {"name": "dying"}}]},
        {"tool_calls": [{"name": f"{OSC}evil{CSI}", "arguments": {}}]},
        {"content": "done"},
    ]
    (tmp_path / "script.json").write_text(json.dumps({"*": turns}))
    (tmp_path / "job.yaml").write_text(
        'name: "escapes\\e[2J"\nmodel: scripted:script.json\nskills: [skills]\n'
        "steps:\n  - {id: go, task: Use the skills.}\n"
    )
    child = pexpect.spawn(
        sys.executable, ["-m", "orchestrator", "run", "job.yaml"], cwd=str(tmp_path),
        encoding="utf-8", timeout=60, dimensions=(40, 140),
    )  # fmt: skip
    child.expect(pexpect.EOF)
    shown = child.before
    assert "server died" in shown  # the warning, after the live view
    for sequence in ("\x1b]0;owned", "\x1b[2J", "\x9b", "\x07"):
        assert sequence not in shown


def test_what_is_printed_while_the_live_view_runs_is_inert() -> None:
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=100)
    with LiveView("job", None, console=console):
        print(f"a warning {OSC}{CSI}\x1b]8;;http://evil.example\x07link", file=sys.stderr)
    drawn = screen.getvalue()
    assert "a warning \\x1b]0;owned" in drawn
    for sequence in ("\x1b]0;owned", "\x1b[2J", "\x1b]8;;http://evil", "\x07"):
        assert sequence not in drawn


def test_an_embedders_log_of_catalog_warnings_is_inert(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Outside the command line too: the catalog's warnings, as its logger writes them."""
    hostile_skills(tmp_path)
    with caplog.at_level(logging.WARNING, logger="orchestrator.skills"):
        catalog = SkillCatalog([tmp_path / "skills"], include_builtin=False)
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "bad\\x1b[2Jname" in logged
    assert all(str(w) in logged for w in catalog.warnings)
    for char in ACTIVE:
        assert char not in logged
