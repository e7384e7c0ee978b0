"""Level 2: the files inside a skill's folder (references, scripts, assets), confined to it,
and reading text files of any size in bounded memory, for the tools that show them to a model.

`read_lines` returns a range of lines, at most `max_chars` characters of them (the built-in
`files` skill's `read_file`); `read_chars` a stretch of characters from an offset
(`read_skill_file`). Both stream the file in chunks, so memory stays near the cap whatever the
file's size, and a single line longer than the cap is cut, not read whole. Lines end at `\\n`
(a `\\r\\n` stays part of its line, byte for byte); text is UTF-8, with undecodable bytes
shown as U+FFFD.
"""

from __future__ import annotations

import codecs
import os
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..errors import ToolError
from ..security import is_inside, open_resolved, relative_name, resolve_inside
from .skill import SkillInfo

DEFAULT_MAX_FILE_CHARS = 20_000
MAX_LISTED_FILES = 200
CHUNK = 1 << 20
MAX_BYTES_PER_CHAR = 4
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


# Reading in bounded memory.


@dataclass(frozen=True)
class Lines:
    """Lines `first`..`last_shown` of a file of `total` lines; `cut_line` was cut at the cap."""

    text: str
    first: int
    last_shown: int
    total: int
    cut_line: int | None = None


def read_lines(handle: BinaryIO, first: int, last: int | None, max_chars: int) -> Lines:
    """Lines `first` to `last` (None: to the end), as many as fit in `max_chars`."""
    total = _count_lines(handle)
    handle.seek(0)
    _skip_lines(handle, first - 1)
    chosen: list[str] = []
    size, number, cut = 0, first - 1, None
    limit = max_chars * MAX_BYTES_PER_CHAR
    while last is None or number < last:
        raw = handle.readline(limit)
        if not raw:
            break
        whole = raw.endswith(b"\n") or len(raw) < limit
        line = raw.decode("utf-8", errors="replace")
        if whole and size + len(line) <= max_chars:
            chosen.append(line)
            size += len(line)
            number += 1
            continue
        if not chosen:  # one line longer than the cap: its start is shown
            chosen.append(line[:max_chars])
            number, cut = number + 1, number + 1
        break
    return Lines("".join(chosen), first, first + len(chosen) - 1, total, cut)


def read_chars(handle: BinaryIO, offset: int, max_chars: int) -> tuple[str, int]:
    """`max_chars` characters from character `offset`, and the text's length in characters."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    kept: list[str] = []
    seen = 0

    def take(text: str) -> None:
        nonlocal seen
        start, end = offset - seen, offset + max_chars - seen
        if end > 0 and start < len(text):
            kept.append(text[max(0, start) : end])
        seen += len(text)

    while chunk := handle.read(CHUNK):
        take(decoder.decode(chunk))
    take(decoder.decode(b"", final=True))
    return "".join(kept), seen


def _count_lines(handle: BinaryIO) -> int:
    newlines, last = 0, b""
    while chunk := handle.read(CHUNK):
        newlines += chunk.count(b"\n")
        last = chunk[-1:]
    return newlines + (1 if last and last != b"\n" else 0)


def _skip_lines(handle: BinaryIO, count: int) -> None:
    """Move past the first `count` lines (or to the end of a shorter file)."""
    skipped = 0
    while skipped < count and (chunk := handle.read(CHUNK)):
        found = chunk.count(b"\n")
        if skipped + found < count:
            skipped += found
            continue
        position = -1
        for _ in range(count - skipped):
            position = chunk.index(b"\n", position + 1)
        handle.seek(position + 1 - len(chunk), os.SEEK_CUR)
        return
