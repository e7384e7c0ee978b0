"""Where skills are: the folders below a search-path entry, and where users keep them.

A folder on the search path is a skill itself (it holds a SKILL.md) or has skills somewhere
below it: one level down (`skills/pdf/`), or deeper, as plugin repositories lay them out
(`plugins/*/skills/*/SKILL.md`) and as tiers in dot folders (`skills/.curated/*`). The walk
goes breadth first, in name order, never into a skill's own folder, and skips folders that
never hold skills (`.git`, `node_modules`, virtual environments, caches); it stops at
`MAX_DEPTH` levels and `MAX_FOLDERS` folders.

Projects keep skills in `skills/`, `.claude/skills/` (Claude Code) and `.agents/skills/` (the
cross-client convention), and sub-agents in `subagents/`, `.claude/agents/` and
`.codex/agents/`; users keep them in the same folders under the home folder, searched only
when asked for, since a job should not depend on one machine's home (`discover`). Project
folders come first, then the user's, then the built-ins. Every candidate folder of a project
is read-only to the run's file tools, whether or not it exists: a model must not be able to
create a skill for the next run of the same job.

The built-ins are the folders shipped with the package, `skills/` and `subagents/`
(`shipped_folder`). The repository's top-level folders are the source of truth.
`orchestrator/_builtin/<kind>` is a symbolic link to `../../<kind>`, and pyproject.toml lists
`<kind>/**/*` as package data of `orchestrator._builtin`, so a regular (non-editable) install
copies the folder's files into the package. Shipping another folder takes one more link and
one more package-data pattern.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..security.inventory import (
    PROJECT_SKILL_FOLDERS,
    PROJECT_SUBAGENT_FOLDERS,
    USER_SKILL_FOLDERS,
    USER_SUBAGENT_FOLDERS,
)
from .skill_md import skill_file_in

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
MAX_DEPTH = 6
MAX_FOLDERS = 20_000
SKIPPED = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        "__pycache__",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".cache",
        ".idea",
        ".vscode",
        "site-packages",
        ".orchestrator",
    }
)


@dataclass
class Walk:
    """The skill folders found below one root, and whether the walk hit a limit."""

    folders: list[Path]
    truncated: bool = False


def walk_skill_folders(root: Path) -> Walk:
    """Every folder at or below `root` that holds a SKILL.md (breadth first, by name)."""
    if skill_file_in(root) is not None:
        return Walk([root])
    found: list[Path] = []
    queue: deque[tuple[Path, int]] = deque([(root, 0)])
    seen = {root.resolve()}
    visited = 0
    while queue:
        folder, depth = queue.popleft()
        for child in _subfolders(folder):
            visited += 1
            if visited > MAX_FOLDERS:
                return Walk(found, truncated=True)
            if skill_file_in(child) is not None:
                found.append(child)
            elif depth + 1 < MAX_DEPTH and (real := child.resolve()) not in seen:
                seen.add(real)
                queue.append((child, depth + 1))
    return Walk(found)


def _subfolders(folder: Path) -> Iterator[Path]:
    try:
        with os.scandir(folder) as entries:
            names = sorted(e.name for e in entries if e.name not in SKIPPED and _is_dir(e))
    except OSError:
        return
    for name in names:
        yield folder / name


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def project_skill_folders(base: Path) -> list[Path]:
    """The skill folders of a project (`skills/`, `.claude/skills/`, `.agents/skills/`)
    that exist under `base`."""
    return [folder for folder in candidate_skill_folders(base) if folder.is_dir()]


def candidate_skill_folders(base: Path) -> list[Path]:
    """Where a project may keep skills, whether or not the folders exist."""
    return [base / relative for relative in PROJECT_SKILL_FOLDERS]


def user_skill_folders(home: Path | None = None) -> list[Path]:
    """The user's own skill folders (`~/.claude/skills/`, `~/.agents/skills/`) that exist."""
    home = home if home is not None else Path.home()
    return [home / relative for relative in USER_SKILL_FOLDERS if (home / relative).is_dir()]


# --- A project's and a user's folders of skills and sub-agents ---------------------------


@dataclass(frozen=True)
class SkillFolder:
    """A folder on the skills search path, and whether its skills' `allowed-tools` may
    pre-approve calls (`skills: [{path: vendor, preapprove: false}]` in a spec)."""

    path: Path
    preapprove: bool = True
    """False: a skill from here pre-approves nothing (its calls ask as any other); a list
    given as a limit (`allowed-tools-mode: restrict`) still limits."""

    @classmethod
    def of(cls, folder: str | os.PathLike[str] | SkillFolder) -> SkillFolder:
        """A folder given as a plain path pre-approves as its skills say."""
        return folder if isinstance(folder, SkillFolder) else cls(Path(folder))


def skill_folders(folders: Iterable[str | os.PathLike[str] | SkillFolder]) -> list[SkillFolder]:
    return [SkillFolder.of(folder) for folder in folders]


@dataclass
class Folders:
    """The skill and sub-agent folders a run searches (before the built-ins), and the
    folders to keep read-only."""

    skills: list[SkillFolder] = field(default_factory=list)
    subagents: list[Path] = field(default_factory=list)
    protected: list[Path] = field(default_factory=list)


def project_subagent_folders(base: Path) -> list[Path]:
    """The sub-agent folders of a project that exist under `base`."""
    return [folder for folder in candidate_subagent_folders(base) if folder.is_dir()]


def candidate_subagent_folders(base: Path) -> list[Path]:
    return [base / relative for relative in PROJECT_SUBAGENT_FOLDERS]


def user_subagent_folders(home: Path | None = None) -> list[Path]:
    """The user's own sub-agent folders that exist."""
    home = home if home is not None else Path.home()
    return [home / relative for relative in USER_SUBAGENT_FOLDERS if (home / relative).is_dir()]


def discover(
    base: Path | None,
    *,
    skills: Iterable[Path | SkillFolder] | None = None,
    subagents: list[Path] | None = None,
    user: bool = False,
    home: Path | None = None,
) -> Folders:
    """The folders of a run whose own folder is `base`: `skills` and `subagents` when given
    (None: search the project's folders under `base`), then the user's when `user`."""
    found = Folders()
    if skills is not None:
        found.skills = skill_folders(skills)
    elif base is not None:
        found.skills = skill_folders(project_skill_folders(base))
        found.protected += candidate_skill_folders(base)
    if subagents is not None:
        found.subagents = list(subagents)
    elif base is not None:
        found.subagents = project_subagent_folders(base)
        found.protected += candidate_subagent_folders(base)
    if user:
        found.skills += skill_folders(user_skill_folders(home))
        found.subagents += user_subagent_folders(home)
    found.protected += [*(folder.path for folder in found.skills), *found.subagents]
    return found


def shipped_folder(kind: str) -> Path | None:
    """The installed or checked-out folder `kind` ("skills", "subagents"), if there is one."""
    packaged = PACKAGE_ROOT / "_builtin" / kind
    if packaged.is_dir():
        return packaged
    # A source checkout whose link did not survive (a copy without symlinks): use the folder
    # beside the package, but only inside this project, never a stray `skills` in site-packages.
    checkout = PACKAGE_ROOT.parent
    if (checkout / "pyproject.toml").is_file() and (checkout / kind).is_dir():
        return checkout / kind
    return None


def builtin_skills_folder() -> Path | None:
    """The folder of the skills that ship with the package."""
    return shipped_folder("skills")
