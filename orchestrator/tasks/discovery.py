"""Where users keep skills and sub-agents, for runs that name none themselves.

A project keeps skills in `skills/`, `.claude/skills/` and `.agents/skills/`, and sub-agents in
`subagents/`, `.claude/agents/` and `.codex/agents/`; a user keeps them in the same folders
under the home folder (`~/.claude/skills/`, `~/.agents/skills/`, `~/.claude/agents/`,
`~/.codex/agents/`), searched only when asked for, since a job should not depend on one
machine's home. Project folders come first, then the user's, then the built-ins.

Every candidate folder of a project is read-only to the run's file tools, whether or not it
exists: a model must not be able to create a skill for the next run of the same job.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..security.inventory import PROJECT_SUBAGENT_FOLDERS, USER_SUBAGENT_FOLDERS
from ..skills.discovery import candidate_skill_folders, project_skill_folders, user_skill_folders


@dataclass
class Folders:
    """The skill and sub-agent folders a run searches (before the built-ins), and the
    folders to keep read-only."""

    skills: list[Path] = field(default_factory=list)
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
    skills: list[Path] | None = None,
    subagents: list[Path] | None = None,
    user: bool = False,
    home: Path | None = None,
) -> Folders:
    """The folders of a run whose own folder is `base`: `skills` and `subagents` when given
    (None: search the project's folders under `base`), then the user's when `user`."""
    found = Folders()
    if skills is not None:
        found.skills = list(skills)
    elif base is not None:
        found.skills = project_skill_folders(base)
        found.protected += candidate_skill_folders(base)
    if subagents is not None:
        found.subagents = list(subagents)
    elif base is not None:
        found.subagents = project_subagent_folders(base)
        found.protected += candidate_subagent_folders(base)
    if user:
        found.skills += user_skill_folders(home)
        found.subagents += user_subagent_folders(home)
    found.protected += [*found.skills, *found.subagents]
    return found
