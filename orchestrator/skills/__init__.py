"""Skills: folders in the open Agent Skills layout, disclosed to an agent one level at a time.

Level 0 is the index in the system prompt (`SkillCatalog.index`), level 1 is `load_skill`
(instructions and tools), level 2 is `read_skill_file`. `Agent(skills=...)` wires it all up
through `skills_extension`. See docs/skills.md.

`check_folders` (`orchestrator skills check`) is imported on first use (PEP 562): a run never
loads it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .agent import Agent
from .catalog import DEFAULT_INDEX_TOKENS, SkillCatalog, search_path
from .discovery import SkillFolder, builtin_skills_folder, shipped_folder
from .meta_tools import SkillsExtension, skills_extension
from .skill import LoadedSkill, SkillError, SkillInfo, SkillWarning, qualified_tool_name
from .skill_md import Problem

if TYPE_CHECKING:
    from .check import check_folders

__all__ = [
    "DEFAULT_INDEX_TOKENS",
    "Agent",
    "LoadedSkill",
    "Problem",
    "SkillCatalog",
    "SkillError",
    "SkillFolder",
    "SkillInfo",
    "SkillWarning",
    "SkillsExtension",
    "builtin_skills_folder",
    "check_folders",
    "qualified_tool_name",
    "search_path",
    "shipped_folder",
    "skills_extension",
]


def __getattr__(name: str) -> Any:
    if name != "check_folders":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(".check", __name__), name)
    globals()[name] = value
    return value
