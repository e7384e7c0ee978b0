"""Level 2: the files inside a skill's folder (references, scripts, assets), confined to it."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import ToolError
from ..security import is_inside, open_resolved, relative_name, resolve_inside
from .reading import read_chars
from .skill import SkillInfo

DEFAULT_MAX_FILE_CHARS = 20_000
MAX_LISTED_FILES = 200
_SKIPPED_DIRS = frozenset({"__pycache__", "node_modules"})


def list_files(
    info: SkillInfo, folder: Path | None = None, limit: int = MAX_LISTED_FILES
) -> list[str]:
    """Files under the skill's folder (or a folder in it), relative to the skill, sorted;
    none for a job's MCP server, which has no folder of its own."""
    if info.servers:
        return []
    root = info.folder.resolve()
    start = folder or root
    found: list[str] = []
    for current, dirs, files in os.walk(start):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIPPED_DIRS)
        for name in sorted(files):
            path = Path(current) / name
            if is_inside(root, path):
                found.append(relative_name(root, path))
            if len(found) >= limit:
                return found
    return found


def read_file(info: SkillInfo, path: str, *, offset: int = 0, max_chars: int) -> str:
    """A text file in the skill's folder, from `offset` (characters), at most `max_chars`."""
    if info.servers:
        raise ToolError(f"Skill {info.name!r} is an MCP server of the job spec: it has no files.")
    target = resolve_inside(info.folder, path, label=f"folder of skill {info.name!r}")
    if target.is_dir():
        listing = list_files(info, target)
        return "\n".join(listing) if listing else "(no files)"
    try:
        with open_resolved(info.folder, target, shown=repr(path)) as handle:
            if b"\x00" in handle.read(8192):
                size = os.fstat(handle.fileno()).st_size
                raise ToolError(f"{path!r} is a binary file ({size} bytes); it cannot be shown.")
            handle.seek(0)
            offset = max(0, offset)
            part, total = read_chars(handle, offset, max_chars)
    except (FileNotFoundError, NotADirectoryError):
        known = ", ".join(list_files(info, limit=30)) or "none"
        raise ToolError(f"Skill {info.name!r} has no file {path!r}. Its files: {known}.") from None
    return clipped(part, offset=offset, total=total, how_to_continue=_continue_hint(info, path))


def _continue_hint(info: SkillInfo, path: str) -> str:
    return f"read_skill_file(skill={info.name!r}, path={path!r}, offset={{offset}})"


def clipped(part: str, *, offset: int, total: int, how_to_continue: str) -> str:
    """`part` (the text's characters from `offset`, of `total`), with a note saying what was
    left out and how to go on."""
    end = offset + len(part)
    if offset == 0 and end >= total:
        return part
    note = f"[characters {offset}-{end} of {total}"
    if end < total:
        note += f"; the rest: {how_to_continue.format(offset=end)}"
    return f"{part}\n{note}]"
