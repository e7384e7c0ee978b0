"""What a job's run leaves in its workspace, and what the next run's listings leave out.

A second run of a job must see the workspace the first one saw, or it costs more (its
`list_dir` would show the first run's `out/`) and may read its own old answers as material.
So each run records, in its trace's `job_end`, the paths it `created` (files and folders,
found by comparing the workspace before and after: `snapshot`, `compare`) together with those
earlier runs created that are still there, as `outputs`; and the files it wrote (`written`),
which the command line prints as paths the user can open. The next run of the same spec
(the newest trace of it in the same folder of traces) leaves those outputs out of the file
tools' listings (`Permissions.unlisted`), and its own trace's folder too when that folder
lies in the workspace and holds only traces (the default `.orchestrator/runs/`). Reading an
output by its path still works: a goal that names `out/brief.md` can read it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from ..errors import ConfigError
from ..events import JobEnd, JobStart
from ..security import Permissions, is_inside
from .spec import Job

TRACE_SUFFIXES = (".jsonl", ".html")
"""Files of a folder of traces: traces and the reports written beside them."""
MAX_TRACES_READ = 50


class Finished(NamedTuple):
    """What a job's run left in its workspace, for its `job_end` and its result."""

    outputs: list[str]
    """What this run and earlier runs of the job created (outermost paths)."""
    written: list[str]
    """What this run created or changed."""
    files: list[str]
    """`written` as absolute paths."""


@dataclass
class WorkspaceRecord:
    """The workspace of one run of a job: what it held before, and what earlier runs made."""

    root: Path | None
    earlier: list[str] = field(default_factory=list)
    artefacts: list[Path] = field(default_factory=list)
    before: Snapshot | None = None

    @classmethod
    def start(cls, job: Job, permissions: Permissions, trace: Path | None) -> WorkspaceRecord:
        """Look at the workspace before the run: its files, and the outputs of the newest
        earlier run of `job` whose trace sits beside `trace`."""
        try:
            root = permissions.workspace_root()
        except ConfigError:  # no workspace: preflight says so, and nothing is recorded
            return cls(None)
        record = cls(root, earlier_outputs(trace, job), trace_artefacts(trace, root))
        record.before = snapshot(root)
        return record

    def permissions(self, permissions: Permissions) -> Permissions:
        """`permissions` with the earlier outputs and the run's traces unlisted."""
        if self.root is None:
            return permissions
        return permissions.unlisting([*(self.root / p for p in self.earlier), *self.artefacts])

    def finish(self) -> Finished:
        """What the run left in the workspace (paths relative to it), and the written files'
        absolute paths."""
        after = snapshot(self.root) if self.root is not None and self.before is not None else None
        if self.root is None or self.before is None or after is None:
            return Finished([], [], [])
        changes = compare(self.before, after)
        kept = [p for p in self.earlier if p in after]
        outputs = [p for p in outermost([*changes.created, *kept]) if not self._artefact(p)]
        written = [p for p in changes.written if not self._artefact(p)]
        return Finished(outputs, written, [str(self.root / p) for p in written])

    def _artefact(self, relative: str) -> bool:
        path = self.root / relative if self.root is not None else Path(relative)
        return any(path == a or path.is_relative_to(a) for a in self.artefacts)


def trace_artefacts(trace: Path | None, root: Path) -> list[Path]:
    """The trace, and each folder above it inside the workspace that holds nothing but
    traces, reports and the folder below (`.orchestrator/runs/`, then `.orchestrator/`)."""
    if trace is None or not is_inside(root, trace):
        return []
    found = [trace.resolve()]
    folder, inner = trace.resolve().parent, trace.resolve()
    while folder != root.resolve() and is_inside(root, folder):
        if not all(_trace_file(entry) or entry == inner for entry in folder.iterdir()):
            break
        found.append(folder)
        folder, inner = folder.parent, folder
    return found


def _trace_file(path: Path) -> bool:
    return path.is_file() and path.suffix in TRACE_SUFFIXES


def earlier_outputs(trace: Path | None, job: Job) -> list[str]:
    """The `outputs` of the newest earlier run of `job` (the same spec file) whose trace is
    in `trace`'s folder; [] if there is none."""
    if trace is None or job.source is None or not trace.parent.is_dir():
        return []
    spec = str(Path(job.source).resolve())
    others = [p for p in trace.parent.glob("*.jsonl") if p.is_file() and p != trace]
    others.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    for path in others[:MAX_TRACES_READ]:
        outputs = _outputs_of(path, spec)
        if outputs is not None:
            return outputs
    return []


def _outputs_of(path: Path, spec: str) -> list[str] | None:
    """The last `job_end` outputs in the trace at `path` if it is a run of `spec`."""
    from ..trace.reader import TraceReader  # only where earlier runs left traces

    found: list[str] | None = None
    for number, event in enumerate(TraceReader(path)):
        if number == 0 and not (isinstance(event, JobStart) and event.spec == spec):
            return None
        if isinstance(event, JobEnd) and event.outputs is not None:
            found = event.outputs
    return found


# --- What changed in a workspace: snapshots compared --------------------------------------


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
