"""What `load_skill` answers: a skill's instructions, its tools and the files to read.

When the skill's tools are callable but not in the tools array (the agent keeps a stable
prefix, agent/tools.py), their full parameter schemas are part of this observation: it is
the only place the model sees them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..agent import Tool
from ..agent.tools import DISPATCH_TOOL
from .allowed import ToolRule
from .files import list_files
from .skill import LoadedSkill
from .skill_md import substitute

MAX_TOOL_LINE = 200
MAX_FILES_SHOWN = 50
_SELF_FILES = frozenset({"SKILL.md", "skill.md", "tools.py", ".mcp.json", "mcp.json"})


def render_loaded(
    skill: LoadedSkill,
    arguments: str = "",
    rule: ToolRule | None = None,
    shown: Sequence[str] | None = None,
    schemas: bool = False,
) -> str:
    """The observation of `load_skill`: instructions, tools (those in `shown`, when given:
    the ones this agent may call; with their parameter schemas when `schemas`, because they
    are not in the tools array), and files to read on demand."""
    body = substitute(skill.body, skill.info.folder, arguments)
    parts = [f"# Skill: {skill.name}\nFolder: {skill.info.folder}", body or "(no instructions)"]
    tools = [t for t in skill.tools if shown is None or t.name in shown]
    if tools and schemas:
        parts.append(_tool_schemas(tools))
    elif tools:
        lines = [f"- {t.name}: {_one_line(t.description)}" for t in tools]
        parts.append("## Tools of this skill (callable from your next step)\n" + "\n".join(lines))
    withheld = [t.name for t in skill.tools if t not in tools]
    if withheld:
        parts.append(f"(Not callable by this agent, which is limited: {', '.join(withheld)}.)")
    parts.extend(skill.notes)
    if rule is not None:
        parts.append(
            "## Tools allowed from now on\nWhile this skill is active (the rest of this run), "
            f"only these tools may be called ({rule.written}): {rule.described()}."
        )
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


def _tool_schemas(tools: Sequence[Tool]) -> str:
    """The tools of a loaded skill as the model needs them to call them: name, description
    and JSON parameter schema, and how to call them."""
    lines = [
        "## Tools of this skill (callable from your next step)",
        f"Call one by its name, or through {DISPATCH_TOOL} with "
        '{"tool": "<name>", "arguments": "<its arguments as JSON>"}; the arguments must '
        "match its parameters.",
    ]
    for item in tools:
        parameters = json.dumps(item.spec.parameters, separators=(",", ":"), ensure_ascii=False)
        lines.append(f"- {item.name}: {item.description}\n  parameters: {parameters}")
    return "\n".join(lines)


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= MAX_TOOL_LINE else line[: MAX_TOOL_LINE - 3] + "..."
