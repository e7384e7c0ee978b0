"""What a run changed in its workspace: files and folders it created, files it wrote.

`snapshot(root)` records every file and folder under the workspace (its size and change
time); `compare(before, after)` says which paths are new and which files changed. Any tool
counts, the shell and Python included: the job runner takes one snapshot before the job and
one after. Folders that hold tools' caches and environments (`.git`, `node_modules`, virtual
environments) are recorded but not entered, and a workspace of more than `MAX_ENTRIES`
entries is not recorded at all (None), so a run in a huge tree does not walk it twice.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

MAX_ENTRIES = 20_000
NOT_ENTERED = frozenset(
    {".git", "__pycache__", "node_modules", ".venv", "venv", ".mypy_cache", ".pytest_cache"}
)

Snapshot = dict[str, tuple[bool, int, int]]
"""Relative path (forward slashes) -> (is a folder, size, change time in ns)."""


@dataclass
class Changes:
    """What changed between two snapshots: `created` paths (files and folders) and
    `written` files (created or changed), relative to the workspace."""

    created: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)


def snapshot(root: Path, *, limit: int = MAX_ENTRIES) -> Snapshot | None:
    """Every file and folder under `root` (links not followed), or None past `limit`."""
    found: Snapshot = {}
    pending = [(root, "")]
    while pending:
        folder, prefix = pending.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            name = prefix + entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            found[name] = (is_dir, 0 if is_dir else info.st_size, info.st_mtime_ns)
            if len(found) > limit:
                return None
            if is_dir and entry.name not in NOT_ENTERED:
                pending.append((Path(entry.path), name + "/"))
    return found


def compare(before: Snapshot, after: Snapshot) -> Changes:
    """The paths of `after` that `before` lacks, and the files that are new or differ."""
    changes = Changes()
    for name in sorted(after):
        is_dir = after[name][0]
        if name not in before:
            changes.created.append(name)
            if not is_dir:
                changes.written.append(name)
        elif not is_dir and before[name] != after[name]:
            changes.written.append(name)
    return changes


def outermost(paths: list[str]) -> list[str]:
    """`paths` without those inside another of them (`out` covers `out/brief.md`)."""
    kept: list[str] = []
    for name in sorted(paths):
        if not any(name.startswith(parent + "/") for parent in kept):
            kept.append(name)
    return kept
