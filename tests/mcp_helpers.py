"""Helpers for the MCP tests: real servers, real skill folders, processes seen in /proc."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from skill_factory import write_skill

BIN = Path(sys.executable).parent
GIT_SERVER = str(BIN / "mcp-server-git")
TIME_SERVER = str(BIN / "mcp-server-time")
TEST_SERVER = str(Path(__file__).with_name("mcp_server.py"))
LEGACY_SERVER = str(Path(__file__).with_name("legacy_mcp_server.py"))


def mcp_skill(root: Path, name: str, servers: dict[str, Any], **options: Any) -> Path:
    """A skill folder with a SKILL.md and a `.mcp.json` declaring `servers`."""
    folder = write_skill(root, name, **options)
    (folder / ".mcp.json").write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return folder


def git_server(repo: Path) -> dict[str, Any]:
    return {"command": GIT_SERVER, "args": ["--repository", str(repo)]}


def kit_server(**extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [TEST_SERVER, "stdio"], **extra}


def git_repo(path: Path, message: str = "first commit of the test repo") -> Path:
    """A git repository with one commit."""
    path.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com"}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    subprocess.run(["git", "init", "-q", str(path)], check=True, env=env)
    (path / "a.txt").write_text("hello\n", encoding="utf-8")
    subprocess.run(["git", "-C", str(path), "add", "a.txt"], check=True, env=env)
    subprocess.run(["git", "-C", str(path), "commit", "-q", "-m", message], check=True, env=env)
    return path


def descendants(pid: int) -> list[int]:
    """Every live process below `pid` (children, their children, ...), from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z":  # a zombie has ended already
            parents[int(entry.name)] = int(fields[1])
    found, frontier = [], [pid]
    while frontier:
        current = frontier.pop()
        children = [p for p, parent in parents.items() if parent == current]
        found += children
        frontier += children
    return found


def command_line(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace")


def parent_of(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def servers_below(pid: int, marker: str) -> list[int]:
    """Server processes below `pid`: those whose command line holds `marker` (its program),
    leaving out their own children (a fork that has not exec'd yet shows its parent's)."""
    found = [p for p in descendants(pid) if marker in command_line(p)]
    return [p for p in found if parent_of(p) not in found]


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def tool_results(messages: list[Any]) -> list[Any]:
    return [m for m in messages if m.role == "tool"]
