"""The skill and sub-agent folders of a job: the spec's own, or those its folder holds.

A spec that gives no `skills:` (or no `subagents:`) searches its folder's `skills/`,
`.claude/skills/` and `.agents/skills/` (`subagents/`, `.claude/agents/`, `.codex/agents/`)
before the built-ins, so a Claude Code project works as it is. `user=True` (the CLI's
`--user-skills`) adds the home folders. See tasks/discovery.py.
"""

from __future__ import annotations

from pathlib import Path

from ..tasks.discovery import Folders, discover
from .spec import Job


def job_folders(job: Job, *, user: bool = False, home: Path | None = None) -> Folders:
    """Where `job` finds its skills and sub-agents, and which folders to keep read-only."""
    base = job.source.resolve().parent if job.source is not None else None
    given = job.model_fields_set
    return discover(
        base,
        skills=list(job.skills) if "skills" in given else None,
        subagents=list(job.subagents) if "subagents" in given else None,
        user=user,
        home=home,
    )
