"""Tools of the `files` skill: read, write, edit, list, glob and grep inside the workspace.

Every path is relative to the workspace root of the run's permissions; `..`, absolute paths
and symbolic links that lead out of the workspace are refused, and files are opened without
following links (`open_inside`), so a link swapped in after the check cannot lead out. Writes
are refused under the run's read-only paths (its job spec, skills, sub-agents and trace).
Writes and edits hold the file's lock and replace the file at once (`write_resolved`,
`locked_file`): parallel calls and forks lose no edit, and a reader never sees half a file.
Patterns for grep run on RE2, in time linear in the text, so no pattern can freeze the run.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterator
from pathlib import Path, PurePath
from typing import BinaryIO

import re2

from orchestrator import ToolContext, ToolError, tool
from orchestrator.security import (
    LockedFile,
    PathRefused,
    Permissions,
    is_inside,
    is_temporary,
    locked_file,
    open_resolved,
    relative_name,
    resolve_inside,
    write_resolved,
)
from orchestrator.skills.files import Lines, read_lines

MAX_READ_CHARS = 50_000
MAX_EDIT_BYTES = 10_000_000
MAX_ENTRIES = 500
MAX_LINE_CHARS = 300
MAX_GREP_FILE_BYTES = 2_000_000
SKIPPED_DIRS = frozenset(
    {".git", "__pycache__", "node_modules", ".venv", "venv", ".mypy_cache", ".pytest_cache"}
)


def _root(ctx: ToolContext) -> Path:
    return ctx.permissions.workspace_root()


def _open(permissions: Permissions, path: str) -> BinaryIO:
    """The workspace file at `path`, opened for reading; ToolError if it is not one."""
    root = permissions.workspace_root()
    target = resolve_inside(root, path)
    permissions.require_readable(target, repr(path))
    try:
        return open_resolved(root, target, shown=repr(path))
    except IsADirectoryError:
        raise ToolError(f"{path!r} is a folder; list_dir shows what is in it.") from None
    except (FileNotFoundError, NotADirectoryError):
        raise ToolError(f"There is no file {path!r} in the workspace.") from None


def _refuse_binary(handle: BinaryIO, shown: str) -> None:
    if b"\x00" in handle.read(8192):
        size = os.fstat(handle.fileno()).st_size
        raise ToolError(f"{shown} is a binary file ({size} bytes); it cannot be shown.")
    handle.seek(0)


def _text_of(file: LockedFile, path: str) -> str:
    with file.open() as handle:
        _refuse_binary(handle, repr(path))
        data = handle.read(MAX_EDIT_BYTES + 1)
    if len(data) > MAX_EDIT_BYTES:
        raise ToolError(f"{path!r} is larger than {MAX_EDIT_BYTES:,} bytes; it cannot be edited.")
    # Decoding bytes keeps line endings exactly as they are on disk.
    return data.decode("utf-8", errors="replace")


def _writable(permissions: Permissions, path: str) -> tuple[Path, Path]:
    """The workspace root and the resolved target of a write, refused if it is read-only."""
    root = permissions.workspace_root()
    target = resolve_inside(root, path)
    permissions.require_writable(target, repr(path))
    return root, target


def _write(root: Path, target: Path, path: str, data: bytes) -> None:
    try:
        write_resolved(root, target, data, shown=repr(path))
    except IsADirectoryError:
        raise ToolError(f"{path!r} is a folder, not a file.") from None
    except NotADirectoryError:
        raise ToolError(f"A part of {path!r} is a file, not a folder.") from None


@tool
def read_file(path: str, ctx: ToolContext, start_line: int = 1, end_line: int | None = None) -> str:
    """Read a text file in the workspace, whole or a range of its lines.

    Args:
        path: The file's path, relative to the workspace root.
        start_line: The first line to return (1-based).
        end_line: The last line to return (inclusive); leave out to read to the end.
    """
    with _open(ctx.permissions, path) as handle:
        _refuse_binary(handle, repr(path))
        lines = read_lines(handle, max(1, start_line), end_line, MAX_READ_CHARS)
    return _lines_shown(lines, path, end_line)


def _lines_shown(lines: Lines, path: str, end_line: int | None) -> str:
    if lines.total == 0:
        return "(empty file)"
    last = lines.total if end_line is None else min(end_line, lines.total)
    if lines.first > last:
        raise ToolError(
            f"{path!r} has {lines.total} lines; lines {lines.first}-{last} do not exist."
        )
    whole = lines.first == 1 and lines.last_shown == lines.total
    if whole and lines.cut_line is None:
        return lines.text
    note = f"[lines {lines.first}-{lines.last_shown} of {lines.total}"
    if lines.cut_line is not None:
        note += f"; line {lines.cut_line} is cut at {MAX_READ_CHARS:,} characters"
    if lines.last_shown < last:
        joint = "; read on" if lines.cut_line is not None else "; output capped, read on"
        note += f"{joint} with start_line={lines.last_shown + 1}"
    return f"{lines.text.rstrip(chr(10))}\n{note}]"


@tool(changes="path")
def write_file(path: str, content: str, ctx: ToolContext) -> str:
    """Write a text file in the workspace, replacing it if it exists; folders are created.

    Args:
        path: The file's path, relative to the workspace root.
        content: The whole new content of the file.
    """
    root, target = _writable(ctx.permissions, path)
    _write(root, target, path, content.encode("utf-8"))
    lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
    return f"Wrote {len(content)} characters ({lines} lines) to {relative_name(root, target)}."


@tool(changes="path")
def edit_file(path: str, old_text: str, new_text: str, ctx: ToolContext) -> str:
    """Replace one exact, unique piece of text in a file; the file is untouched otherwise.

    The edit is refused if old_text is not found or is found more than once: then include
    more of the surrounding text so that it matches exactly one place.

    Args:
        path: The file's path, relative to the workspace root.
        old_text: The exact text to replace, whitespace and line breaks included.
        new_text: The text to put in its place.
    """
    if not old_text:
        raise ToolError("old_text is empty; give the exact text to replace.")
    permissions = ctx.permissions
    root, target = _writable(permissions, path)
    permissions.require_readable(target, repr(path))
    # Read, check and write under the file's lock: a parallel edit of the same file waits, then
    # finds this one's result (and its own old_text gone, if this edit replaced it).
    try:
        with locked_file(root, target, shown=repr(path)) as file:
            return _edit(file, path, old_text, new_text)
    except IsADirectoryError:
        raise ToolError(f"{path!r} is a folder; list_dir shows what is in it.") from None
    except (FileNotFoundError, NotADirectoryError):
        raise ToolError(f"There is no file {path!r} in the workspace.") from None


def _edit(file: LockedFile, path: str, old_text: str, new_text: str) -> str:
    text = _text_of(file, path)
    count = text.count(old_text)
    if count == 0:
        raise ToolError(
            f"old_text was not found in {path!r}; the file is unchanged. Read the file and "
            "copy the text exactly, including whitespace (another call may have changed it)."
        )
    if count > 1:
        lines = _match_lines(text, old_text)
        raise ToolError(
            f"old_text occurs {count} times in {path!r} (lines {', '.join(map(str, lines))}); "
            "the file is unchanged. Include more surrounding text so it matches once."
        )
    start = text.index(old_text)
    file.replace(text.replace(old_text, new_text, 1).encode("utf-8"))
    line = text.count("\n", 0, start) + 1
    return (
        f"Edited {path!r} at line {line}: replaced {len(old_text)} characters with {len(new_text)}."
    )


def _match_lines(text: str, needle: str, limit: int = 10) -> list[int]:
    lines: list[int] = []
    start = 0
    while len(lines) < limit and (found := text.find(needle, start)) >= 0:
        lines.append(text.count("\n", 0, found) + 1)
        start = found + max(1, len(needle))
    return lines


@tool
def list_dir(ctx: ToolContext, path: str = ".") -> str:
    """List a folder of the workspace: sub-folders (ending in /) first, then files with sizes.

    Args:
        path: The folder's path, relative to the workspace root.
    """
    permissions = ctx.permissions
    target = resolve_inside(permissions.workspace_root(), path)
    if not target.is_dir():
        raise ToolError(f"{path!r} is not a folder in the workspace.")
    with os.scandir(target) as found:
        entries = sorted(
            (
                e
                for e in found
                if not is_temporary(e.name) and not permissions.is_unlisted(Path(e.path), target)
            ),
            key=lambda e: (not e.is_dir(), e.name),
        )
    lines = []
    for entry in entries[:MAX_ENTRIES]:
        if entry.is_symlink():
            lines.append(f"{entry.name} (symbolic link)")
        elif entry.is_dir():
            lines.append(f"{entry.name}/")
        else:
            lines.append(f"{entry.name} ({entry.stat().st_size} bytes)")
    if len(entries) > MAX_ENTRIES:
        lines.append(f"[... {len(entries) - MAX_ENTRIES} more entries]")
    return "\n".join(lines) or "(empty folder)"


@tool
def glob(pattern: str, ctx: ToolContext, path: str = ".") -> str:
    """Find files whose paths match a glob pattern, such as **/*.py or docs/*.md.

    Args:
        pattern: The glob pattern, relative to `path`; ** matches any depth of folders.
        path: The folder to search from, relative to the workspace root.
    """
    pure = PurePath(pattern)
    if pure.is_absolute() or ".." in pure.parts:
        raise PathRefused(f"pattern {pattern!r} must be relative and may not contain '..'.")
    permissions = ctx.permissions
    root = permissions.workspace_root()
    base = resolve_inside(root, path)
    found = sorted(
        relative_name(root, match)
        for match in base.glob(pattern)
        if is_inside(root, match)
        and not is_temporary(match.name)
        and not SKIPPED_DIRS.intersection(match.parts)
        and not permissions.is_unlisted(match, base)
    )
    if not found:
        return f"No file matches {pattern!r}."
    shown = found[:MAX_ENTRIES]
    more = [f"[... {len(found) - len(shown)} more matches]"] if len(found) > len(shown) else []
    return "\n".join(shown + more)


@tool
def grep(
    pattern: str,
    ctx: ToolContext,
    path: str = ".",
    include: str | None = None,
    ignore_case: bool = False,
    max_matches: int = 100,
) -> str:
    """Search file contents for a regular expression; shows path:line: text for each match.

    Args:
        pattern: A regular expression (RE2 syntax: like Python's, without backreferences
            or lookaround).
        path: A file or folder to search, relative to the workspace root.
        include: Only search files whose names match this glob, e.g. *.py.
        ignore_case: Match letters regardless of case.
        max_matches: Stop after this many matching lines.
    """
    regex = _compile(pattern, ignore_case)
    permissions = ctx.permissions
    root = permissions.workspace_root()
    base = resolve_inside(root, path)
    if base.is_file():
        permissions.require_readable(base, repr(path))
    if not base.exists():
        raise ToolError(f"There is no file or folder {path!r} in the workspace.")
    limit = max(1, min(max_matches, 1000))
    matches: list[str] = []
    for file in _searchable_files(base, include, permissions):
        matches += _grep_file(root, file, regex, limit - len(matches))
        if len(matches) >= limit:
            matches.append(f"[stopped after {limit} matches]")
            break
    return "\n".join(matches) if matches else f"No match for {pattern!r}."


def _compile(pattern: str, ignore_case: bool) -> re2._Regexp:
    options = re2.Options()
    options.log_errors = False
    options.case_sensitive = not ignore_case
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise ToolError(
            f"{pattern!r} is not a valid regular expression for grep ({reason}). grep uses RE2: "
            "Python's syntax without backreferences (\\1) or lookaround ((?=...), (?<=...))."
        ) from None


def _searchable_files(base: Path, include: str | None, permissions: Permissions) -> Iterator[Path]:
    if base.is_file():
        yield base
        return
    root = permissions.workspace_root()
    for current, dirs, files in os.walk(base):
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in SKIPPED_DIRS and not permissions.is_unlisted(Path(current) / d, base)
        )
        for name in sorted(files):
            file = Path(current) / name
            if is_temporary(name) or (include and not fnmatch.fnmatch(name, include)):
                continue
            if permissions.is_secret(file):
                continue
            if permissions.is_unlisted(file, base):
                continue
            if is_inside(root, file) and _size(file) <= MAX_GREP_FILE_BYTES:
                yield file


def _size(file: Path) -> int:
    """The file's size; a dangling link or an unreadable entry counts as too big to search."""
    try:
        return file.stat().st_size
    except OSError:
        return MAX_GREP_FILE_BYTES + 1


def _grep_file(root: Path, file: Path, regex: re2._Regexp, limit: int) -> list[str]:
    try:
        with open_resolved(root, file.resolve()) as handle:
            data = handle.read(MAX_GREP_FILE_BYTES + 1)
    except (OSError, PathRefused):
        return []
    if len(data) > MAX_GREP_FILE_BYTES or b"\x00" in data[:8192]:
        return []
    shown = relative_name(root, file)
    found = []
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        if regex.search(line):
            found.append(f"{shown}:{number}: {line[:MAX_LINE_CHARS]}")
            if len(found) >= limit:
                break
    return found
