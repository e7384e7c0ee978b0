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

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, overload

from typing_extensions import Unpack

from ..agent import AgentLoop, AgentOptions, ModelLike, Tool
from ..agent.run_results import OutputT
from ..agent.tools import Deps
from ..security import Permissions
from .catalog import FolderLike, SkillCatalog
from .disclosure import warn_refused_code
from .meta_tools import ForksSkills, SkillsExtension, skills_extension

if TYPE_CHECKING:
    from ..agent import OutputSpec

SkillsLike = SkillCatalog | SkillsExtension | FolderLike | Iterable[FolderLike]
"""What `Agent(skills=...)` accepts: a catalog, a skills extension, or skill folders (a path,
or a `SkillFolder` that says whether its skills may pre-approve)."""


class Agent(AgentLoop[Deps, OutputT]):
    """A function-calling agent loop that may be given skills.

    Args:
        skills: A SkillCatalog, a SkillsExtension, or skill folders (searched before the
            built-in ones): the skill index joins the system prompt and the skill meta-tools
            the tools; the folders become read-only for the agent's file tools.

    Every other argument is `AgentLoop`'s, with the same meaning and default: `model`, `tools`,
    `output_type`, `deps_type` and the keywords of `AgentOptions` (`system`, `name`,
    `max_steps`, `permissions`, ...). An agent is generic in its deps and its output:
    `Agent(model, deps_type=Shop, output_type=City)` is an
    `Agent[Shop, City]`, whose runs take `deps=Shop(...)` and give a `RunResult[City]`.
    """

    @overload
    def __init__(
        self,
        model: ModelLike,
        tools: Iterable[Tool | Callable[..., object]] = (),
        *,
        skills: SkillsLike | None = None,
        output_type: type[OutputT] | OutputSpec[OutputT] | None = None,
        deps_type: type[Deps] | None = None,
        **options: Unpack[AgentOptions],
    ) -> None: ...
    @overload
    def __init__(
        self: Agent[Deps, Any],
        model: ModelLike,
        tools: Iterable[Tool | Callable[..., object]] = (),
        *,
        skills: SkillsLike | None = None,
        output_type: object,
        deps_type: type[Deps] | None = None,
        **options: Unpack[AgentOptions],
    ) -> None: ...
    def __init__(
        self,
        model: ModelLike,
        tools: Iterable[Tool | Callable[..., object]] = (),
        *,
        skills: SkillsLike | None = None,
        output_type: object = None,
        deps_type: type[Deps] | None = None,
        **options: Unpack[AgentOptions],
    ) -> None:
        extensions = list(options.get("extensions", ()))
        parsed = Permissions.coerce(options.get("permissions"))
        if skills is not None:
            extension = skills_extension(skills)
            parsed = parsed.protecting(extension.catalog.paths)
            warn_refused_code(extension.catalog, parsed)
            forker = next((e.fork_skill for e in extensions if isinstance(e, ForksSkills)), None)
            extensions = [extension.configured(parsed, forker), *extensions]
        options["permissions"], options["extensions"] = parsed, extensions
        super().__init__(model, tools, output_type=output_type, deps_type=deps_type, **options)
