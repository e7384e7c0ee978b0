"""`Agent`: the agent loop with skills, as the public API offers it.

    agent = Agent(model, [my_tool], skills=["my_skills/"], permissions=Permissions(...))

`skills` (a SkillCatalog, a SkillsExtension, or skill folders searched before the built-in
ones) gives the agent the skill index in its system prompt and the skill meta-tools; every
other option is the loop's (`orchestrator.agent.AgentLoop`), `approve=` (the approval
callback) included. The skill folders become read-only for the agent's file tools: a model
must not rewrite the skills it runs. An extension that can fork (`SkillForker`) runs the
agent's `context: fork` skills.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..agent import AgentLoop, Extension, ModelLike, RunResult, Tool
from ..security import Permissions
from .meta_tools import SkillForker, skills_extension
from .preload import warn_refused_code
from .sources.mcp import server_scope


class Agent(AgentLoop):
    """A function-calling agent loop that may be given skills."""

    def __init__(
        self,
        model: ModelLike,
        tools: Iterable[Tool | Any] = (),
        *,
        skills: Any = None,
        extensions: Iterable[Extension] = (),
        permissions: Any = None,
        **options: Any,
    ) -> None:
        extensions = list(extensions)
        if skills is not None:
            extension = skills_extension(skills)
            permissions = Permissions.coerce(permissions).protecting(extension.catalog.paths)
            warn_refused_code(extension.catalog, permissions)
            forker = next((e for e in extensions if isinstance(e, SkillForker)), None)
            extensions = [extension.configured(permissions, forker), *extensions]
        super().__init__(model, tools, extensions=extensions, permissions=permissions, **options)

    async def run(self, task: str) -> RunResult:
        """Run as `AgentLoop.run` does, within the run's MCP server scope: servers its skills
        start are shared with its sub-agents and stopped when the outermost run ends
        (errors and cancellation included)."""
        async with server_scope():
            return await super().run(task)
