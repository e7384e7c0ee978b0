"""`Agent`: the agent loop with skills, as the public API offers it.

    agent = Agent(model, [my_tool], skills=["my_skills/"], permissions=Permissions(...))

`skills` (a SkillCatalog, a SkillsExtension, or skill folders searched before the built-in
ones) gives the agent the skill index in its system prompt and the skill meta-tools; every
other option is the loop's (`orchestrator.agent.AgentLoop`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..agent import AgentLoop, Extension, ModelLike, Tool
from .meta_tools import skills_extension


class Agent(AgentLoop):
    """A function-calling agent loop that may be given skills."""

    def __init__(
        self,
        model: ModelLike,
        tools: Iterable[Tool | Any] = (),
        *,
        skills: Any = None,
        extensions: Iterable[Extension] = (),
        **options: Any,
    ) -> None:
        if skills is not None:
            extensions = [skills_extension(skills), *extensions]
        super().__init__(model, tools, extensions=extensions, **options)
