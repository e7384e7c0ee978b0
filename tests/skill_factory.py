"""Writing real skill folders for tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator import Agent, ToolContext
from orchestrator.agent import Tool
from orchestrator.models import ScriptedModel
from orchestrator.security import Permissions

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
ANTHROPIC_SKILLS = CORPUS / "anthropic-skills"
MCP_TRANSCRIPTS = CORPUS / "mcp-transcripts"


def needs_mcp_transcripts() -> None:
    """Skip a test that replays the shared corpus' MCP transcripts when they are not there."""
    if not MCP_TRANSCRIPTS.is_dir():
        pytest.skip(f"the shared corpus is not beside the repository ({MCP_TRANSCRIPTS})")


SHOUT_TOOLS = """\
from orchestrator import tool


@tool
def shout(text: str) -> str:
    \"\"\"Say it loud.

    Args:
        text: what to say
    \"\"\"
    return text.upper() + "!"
"""
"""A skill's `tools.py` with one tool, `shout`."""


def write_skill(
    root: Path,
    folder: str,
    *,
    name: str | None = None,
    description: str = "A skill for tests.",
    extra: str = "",
    body: str = "# Instructions\n\nDo the thing.\n",
    tools: str | None = None,
    frontmatter: str | None = None,
) -> Path:
    """A skill folder `root/folder` with a SKILL.md (and a tools.py when `tools` is given).

    `frontmatter` replaces the whole generated frontmatter text (between the `---` lines).
    """
    path = root / folder
    path.mkdir(parents=True, exist_ok=True)
    if frontmatter is None:
        frontmatter = f"name: {name or folder}\ndescription: {description}\n{extra}"
    (path / "SKILL.md").write_text(f"---\n{frontmatter}---\n{body}", encoding="utf-8")
    if tools is not None:
        (path / "tools.py").write_text(tools, encoding="utf-8")
    return path


def synthetic_skills(root: Path, count: int) -> Path:
    """`count` instruction-only skills with distinct, realistic one-line descriptions."""
    for i in range(count):
        write_skill(
            root,
            f"skill-{i:04d}",
            description=(
                f"Handles task family {i} - prepares, validates and reports on batch {i} "
                "records. Use when the user mentions batch reports or record checks."
            ),
            extra=f"metadata:\n  keywords: batch, records, family-{i}\n",
        )
    return root


def context(workspace: Path, **permissions: Any) -> ToolContext:
    """A ToolContext like the loop's, with permissions rooted at `workspace`."""
    return ToolContext(agent="test", permissions=Permissions(workspace=workspace, **permissions))


async def call(found: Tool, ctx: ToolContext, **arguments: Any) -> Any:
    """Call a tool as the loop does: arguments as JSON, validated, then invoked."""
    return await found.invoke(found.parse_arguments(json.dumps(arguments)), ctx)


def scripted_agent(turns: list[dict[str, Any]], **options: Any) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel({"agent": turns})
    return Agent(model, name="agent", **options), model
