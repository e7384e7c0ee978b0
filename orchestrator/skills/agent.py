"""`Agent`: the agent loop with skills, as the public API offers it.

    agent = Agent(model, [my_tool], skills=["my_skills/"], permissions=Permissions(...))

`skills` (a SkillCatalog, a SkillsExtension, or skill folders searched before the built-in
ones) gives the agent the skill index in its system prompt and the skill meta-tools; every
other option is the loop's (`orchestrator.agent.AgentLoop`), `approve=` (the approval
callback) included. The skill folders become read-only for the agent's file tools: a model
must not rewrite the skills it runs. An extension that can fork (a `ForksSkills`: the fork
extension) runs the agent's `context: fork` skills.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from ..agent import (
    DEFAULT_MAX_STEPS,
    DEFAULT_OUTPUT_RETRIES,
    NOTE_CHARS,
    AgentLoop,
    Approver,
    CompactionStrategy,
    Extension,
    ModelLike,
    OutputMode,
    TokenBudget,
    Tool,
)
from ..agent.run_results import OutputT
from ..agent.tools import Deps
from ..security import Permissions
from ..tokens import TokenCounter
from ..trace import Trace
from .catalog import SkillCatalog
from .disclosure import warn_refused_code
from .meta_tools import ForksSkills, SkillsExtension, skills_extension

if TYPE_CHECKING:
    from ..agent import OutputSpec

SkillsLike = (
    SkillCatalog | SkillsExtension | str | os.PathLike[str] | Iterable[str | os.PathLike[str]]
)
"""What `Agent(skills=...)` accepts: a catalog, a skills extension, or skill folders."""


class Agent(AgentLoop[Deps, OutputT]):
    """A function-calling agent loop that may be given skills.

    Args:
        skills: A SkillCatalog, a SkillsExtension, or skill folders (searched before the
            built-in ones): the skill index joins the system prompt and the skill meta-tools
            the tools; the folders become read-only for the agent's file tools.

    Every other argument is `AgentLoop`'s, with the same meaning and default: `model`,
    `tools`, `system`, `name`, `max_steps`, `max_tokens`, `budget`, `trace`,
    `max_output_tokens`, `tool_concurrency`, `tool_timeout`, `permissions`, `extensions`,
    `counter`, `depth`, `time_limit`, `approve`, `compact_at`, `compaction`, `note`,
    `note_chars`, `output_type`, `output_mode`, `output_retries`, `deps_type`. An agent is
    generic in its deps and its output: `Agent(model, deps_type=Shop, output_type=City)` is an
    `Agent[Shop, City]`, whose runs take `deps=Shop(...)` and give a `RunResult[City]`.
    """

    @overload
    def __init__(
        self,
        model: ModelLike,
        tools: Iterable[Tool | Callable[..., object]] = (),
        *,
        skills: SkillsLike | None = None,
        system: str | None = None,
        name: str = "agent",
        max_steps: int = DEFAULT_MAX_STEPS,
        max_tokens: int | None = None,
        budget: TokenBudget | None = None,
        trace: Trace | str | Path | None = None,
        max_output_tokens: int = 4096,
        tool_concurrency: int = 8,
        tool_timeout: float | None = None,
        permissions: Permissions | None = None,
        extensions: Iterable[Extension] = (),
        counter: TokenCounter | None = None,
        depth: int = 0,
        time_limit: float | None = None,
        approve: Approver | None = None,
        compact_at: float | None = None,
        compaction: CompactionStrategy = "mask",
        note: bool = False,
        note_chars: int = NOTE_CHARS,
        output_type: type[OutputT] | OutputSpec[OutputT] | None = None,
        output_mode: OutputMode | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
        deps_type: type[Deps] | None = None,
    ) -> None: ...
    @overload
    def __init__(
        self: Agent[Deps, Any],
        model: ModelLike,
        tools: Iterable[Tool | Callable[..., object]] = (),
        *,
        skills: SkillsLike | None = None,
        system: str | None = None,
        name: str = "agent",
        max_steps: int = DEFAULT_MAX_STEPS,
        max_tokens: int | None = None,
        budget: TokenBudget | None = None,
        trace: Trace | str | Path | None = None,
        max_output_tokens: int = 4096,
        tool_concurrency: int = 8,
        tool_timeout: float | None = None,
        permissions: Permissions | None = None,
        extensions: Iterable[Extension] = (),
        counter: TokenCounter | None = None,
        depth: int = 0,
        time_limit: float | None = None,
        approve: Approver | None = None,
        compact_at: float | None = None,
        compaction: CompactionStrategy = "mask",
        note: bool = False,
        note_chars: int = NOTE_CHARS,
        output_type: object,
        output_mode: OutputMode | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
        deps_type: type[Deps] | None = None,
    ) -> None: ...
    def __init__(
        self,
        model: ModelLike,
        tools: Iterable[Tool | Callable[..., object]] = (),
        *,
        skills: SkillsLike | None = None,
        system: str | None = None,
        name: str = "agent",
        max_steps: int = DEFAULT_MAX_STEPS,
        max_tokens: int | None = None,
        budget: TokenBudget | None = None,
        trace: Trace | str | Path | None = None,
        max_output_tokens: int = 4096,
        tool_concurrency: int = 8,
        tool_timeout: float | None = None,
        permissions: Permissions | None = None,
        extensions: Iterable[Extension] = (),
        counter: TokenCounter | None = None,
        depth: int = 0,
        time_limit: float | None = None,
        approve: Approver | None = None,
        compact_at: float | None = None,
        compaction: CompactionStrategy = "mask",
        note: bool = False,
        note_chars: int = NOTE_CHARS,
        output_type: object = None,
        output_mode: OutputMode | None = None,
        output_retries: int = DEFAULT_OUTPUT_RETRIES,
        deps_type: type[Deps] | None = None,
    ) -> None:
        extensions = list(extensions)
        parsed = Permissions.coerce(permissions)
        if skills is not None:
            extension = skills_extension(skills)
            parsed = parsed.protecting(extension.catalog.paths)
            warn_refused_code(extension.catalog, parsed)
            forker = next((e.fork_skill for e in extensions if isinstance(e, ForksSkills)), None)
            extensions = [extension.configured(parsed, forker), *extensions]
        super().__init__(
            model,
            tools,
            system=system,
            name=name,
            max_steps=max_steps,
            max_tokens=max_tokens,
            budget=budget,
            trace=trace,
            max_output_tokens=max_output_tokens,
            tool_concurrency=tool_concurrency,
            tool_timeout=tool_timeout,
            permissions=parsed,
            extensions=extensions,
            counter=counter,
            depth=depth,
            time_limit=time_limit,
            approve=approve,
            compact_at=compact_at,
            compaction=compaction,
            note=note,
            note_chars=note_chars,
            output_type=output_type,
            output_mode=output_mode,
            output_retries=output_retries,
            deps_type=deps_type,
        )
