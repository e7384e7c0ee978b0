"""Level 1 from disk: a skill's SKILL.md body and its tools, read only on first load.

The tools come from the skill's tool sources (`sources/`): its `tools.py` today.
"""

from __future__ import annotations

from .frontmatter import FrontmatterError, split_skill_text
from .skill import LoadedSkill, SkillError, SkillInfo
from .sources import import_tools


def load_folder(info: SkillInfo) -> LoadedSkill:
    """Read the body and import the tools of a scanned skill; SkillError if either fails."""
    return LoadedSkill(info=info, body=read_body(info), tools=import_tools(info))


def read_body(info: SkillInfo) -> str:
    """The SKILL.md body (all of the file when it has no frontmatter), stripped; for a job's
    MCP server (no SKILL.md), a line saying what the skill is."""
    if info.servers:
        names = ", ".join(sorted(info.servers))
        return f"The tools of the MCP server {names}, declared in the job spec."
    try:
        text = info.skill_file.read_text(encoding="utf-8")
        return split_skill_text(text)[1]
    except (OSError, UnicodeDecodeError) as exc:
        raise SkillError(f"{info.folder}: cannot read SKILL.md: {exc}") from None
    except FrontmatterError as exc:
        raise SkillError(f"{info.folder}: {exc}") from None
