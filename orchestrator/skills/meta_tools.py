"""The meta-tools that give an agent its skills, one level at a time, and `skills_extension`.

- `load_skill(name)` (level 1): the SKILL.md body and the skill's tools (names and one-line
  descriptions) come back; the tools' full schemas are appended to the run's toolset, so they
  are in every request from the next one on, after the tools that were already there.
- `read_skill_file(skill, path)` (level 2): a file inside the skill's folder, size-capped.
- `search_skills(query)`: skills ranked by name, keywords and description, for catalogs
  larger than the index shows.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from ..agent import Tool, ToolContext
from ..agent.threads import run_in_thread
from ..errors import ToolError
from ..security import Permissions, is_inside
from ..tokens import TokenCounter
from .catalog import SkillCatalog
from .files import DEFAULT_MAX_FILE_CHARS, list_files, read_file
from .index import DEFAULT_INDEX_TOKENS
from .skill import LoadedSkill, SkillError, SkillInfo

STATE_KEY = "skills.loaded"
MAX_SEARCH_RESULTS = 20
MAX_TOOL_LINE = 200
MAX_FILES_SHOWN = 50
_SELF_FILES = frozenset({"SKILL.md", "skill.md", "tools.py"})


class SkillsExtension:
    """An agent extension: the skill index for the system prompt, and the meta-tools."""

    def __init__(
        self,
        catalog: SkillCatalog,
        *,
        index_tokens: int = DEFAULT_INDEX_TOKENS,
        max_file_chars: int = DEFAULT_MAX_FILE_CHARS,
        counter: TokenCounter | None = None,
    ) -> None:
        self.catalog = catalog
        self.index_tokens = index_tokens
        self.max_file_chars = max_file_chars
        self.counter = counter
        self._prompt: str | None = None

    def system_prompt(self) -> str | None:
        if self._prompt is None:
            self._prompt = self.catalog.index(self.index_tokens, self.counter) or ""
        return self._prompt or None

    def tools(self) -> Sequence[Tool]:
        # load_skill runs alone: skills loaded in one turn add their tools in the model's order.
        return [
            Tool(self.load_skill, exclusive=True),
            Tool(self.read_skill_file),
            Tool(self.search_skills),
        ]

    async def load_skill(self, name: str, ctx: ToolContext) -> str:
        """Load a skill: returns its instructions; its tools can be called from your next step.

        Args:
            name: The skill's name, as the skill index or search_skills shows it.
        """
        info = self._info(name)
        loaded: set[str] = ctx.state.setdefault(STATE_KEY, set())
        if info.name in loaded:
            return (
                f"Skill {info.name!r} is already loaded: its instructions are earlier in this "
                "conversation and its tools are available."
            )
        refusal = untrusted_code(info, Permissions.coerce(ctx.permissions))
        if refusal is not None:
            raise ToolError(f"Skill {info.name!r} cannot be loaded: {refusal}")
        try:
            skill = await run_in_thread(self.catalog.load, info.name)
        except SkillError as exc:
            raise ToolError(f"Skill {info.name!r} cannot be loaded: {exc}") from None
        added = [t.name for t in skill.tools if ctx.toolset.add(t)]
        loaded.add(info.name)
        if ctx.trace is not None:
            ctx.trace.emit("skill_loaded", ctx.agent, skill=info.name, tools=added)
        return render_loaded(skill)

    def read_skill_file(self, skill: str, path: str, ctx: ToolContext, offset: int = 0) -> str:
        """Read a file inside a skill's folder, such as a reference its instructions mention.

        Args:
            skill: The skill's name.
            path: The file's path relative to the skill's folder, e.g. references/api.md; a
                folder's path lists its files.
            offset: Character offset to start from, to read on in a long file.
        """
        info = self._info(skill)
        return read_file(info, path, offset=offset, max_chars=self.max_file_chars)

    def search_skills(self, query: str, ctx: ToolContext, limit: int = 5) -> str:
        """Find skills by what they do: ranks every skill by its name, keywords and description.

        Args:
            query: A few words describing the work, e.g. "csv summary statistics".
            limit: How many skills to return (1-20).
        """
        found = self.catalog.search(query, limit=max(1, min(limit, MAX_SEARCH_RESULTS)))
        if not found:
            return (
                f"No skill matches {query!r} ({len(self.catalog)} skills exist). Try other words."
            )
        loaded = ctx.state.get(STATE_KEY, set())
        lines = [f"{info.summary()}{' (loaded)' if info.name in loaded else ''}" for info in found]
        return "\n".join([*lines, "Load one with load_skill(name)."])

    def _info(self, name: str) -> SkillInfo:
        info = self.catalog.get(name)
        if info is None:
            raise ToolError(self.catalog.unknown_message(name))
        return info

    def __repr__(self) -> str:
        return f"SkillsExtension({self.catalog!r})"


def untrusted_code(info: SkillInfo, permissions: Permissions) -> str | None:
    """Why a skill's code must not run in a run with these permissions, or None if it may.

    Code is never imported from a skill folder inside the run's workspace, where the files
    skill writes: the model could have written it, in this run or an earlier one. The skills
    shipped with the package are exempt (the workspace may be a checkout that holds them).
    """
    if not info.has_tools or info.builtin:
        return None
    root = permissions.workspace_root()
    if not is_inside(root, info.folder):
        return None
    return (
        f"its folder {info.folder} is inside the run's workspace ({root}), where files can be "
        "written during a run, so its tools.py is not imported. Keep skills with code outside "
        "the workspace, or set the workspace (permissions.workspace) to a folder that does "
        "not hold them."
    )


def render_loaded(skill: LoadedSkill) -> str:
    """The observation of `load_skill`: instructions, tools, and files to read on demand."""
    parts = [
        f"# Skill: {skill.name}\nFolder: {skill.info.folder}",
        skill.body or "(no instructions)",
    ]
    if skill.tools:
        lines = [f"- {t.name}: {_one_line(t.description)}" for t in skill.tools]
        parts.append("## Tools of this skill (callable from your next step)\n" + "\n".join(lines))
    files = [f for f in list_files(skill.info, limit=MAX_FILES_SHOWN + 2) if f not in _SELF_FILES]
    if files:
        shown = files[:MAX_FILES_SHOWN]
        more = f"\n- ... and {len(files) - len(shown)} more" if len(files) > len(shown) else ""
        parts.append(
            "## Files in this skill's folder (read_skill_file reads them)\n"
            + "\n".join(f"- {f}" for f in shown)
            + more
        )
    return "\n\n".join(parts)


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= MAX_TOOL_LINE else line[: MAX_TOOL_LINE - 3] + "..."


def skills_extension(skills: Any, **options: Any) -> SkillsExtension:
    """What `Agent(skills=...)` accepts: a SkillsExtension, a SkillCatalog, or skill folders."""
    if isinstance(skills, SkillsExtension):
        return skills
    if isinstance(skills, SkillCatalog):
        return SkillsExtension(skills, **options)
    if isinstance(skills, str | os.PathLike):
        return SkillsExtension(SkillCatalog([skills]), **options)
    if isinstance(skills, Iterable):
        return SkillsExtension(SkillCatalog(list(skills)), **options)
    raise TypeError(f"skills must be a SkillCatalog or skill folders, not {type(skills).__name__}")
