"""How an agent's skills' tools reach the model: `progressive`, `eager` or `auto`.

- `progressive` (the default): the tools array holds the meta-tools (and `call_skill_tool`);
  a skill's tools become callable when `load_skill` loads it, their schemas in its answer.
- `eager`: every skill the agent may choose has its tools in the tools array from the first
  request, as agents without progressive disclosure do. `load_skill` still gives a skill's
  instructions. Skills whose tools come from MCP servers stay behind `load_skill` (their
  servers start on the load that needs them), as do `context: fork` skills (they run as
  sub-agents).
- `auto`: eager while those schemas fit in `eager_tokens` tokens, progressive above.

The choice is made once, when the agent is built, so in every mode an agent's tools array and
system prompt stay the same from its first request to its last (the provider's cached prefix
holds). Eager mode imports the `tools.py` of every skill it gives, under the rules a load
follows (`untrusted_code`): a skill whose code may not run here gives no tools.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from ..agent import Tool
from ..security import Permissions
from ..tokens import TokenCounter, default_counter
from .allowed import ToolRule, first_refusal
from .catalog import SkillCatalog
from .preload import untrusted_code
from .skill import SkillError, SkillInfo

Disclosure = Literal["progressive", "eager", "auto"]
DISCLOSURES: tuple[str, ...] = get_args(Disclosure)
DEFAULT_DISCLOSURE: Disclosure = "progressive"
DEFAULT_EAGER_TOKENS = 4_000
"""`auto` is eager while the skills' tool schemas count at most this many tokens (the
built-in skills' come to about 2,000)."""

EAGER_NOTE = (
    "The tools of these skills are in your tools array already; load a skill for its "
    "instructions before you use its tools."
)


@dataclass(frozen=True)
class EagerSkill:
    """A skill whose tools an eager agent holds from its first request."""

    info: SkillInfo
    tools: tuple[Tool, ...]


@dataclass(frozen=True)
class DisclosurePlan:
    """What an agent's skills disclose up front: the mode asked for, the mode used, and the
    skills (with tools) given eagerly, with what their schemas count."""

    asked: Disclosure
    mode: Literal["progressive", "eager"]
    eager: tuple[EagerSkill, ...] = ()
    schema_tokens: int = 0

    @property
    def tools(self) -> list[Tool]:
        return [t for skill in self.eager for t in skill.tools]

    @property
    def names(self) -> set[str]:
        return {skill.info.name for skill in self.eager}


def plan_disclosure(
    asked: Disclosure,
    catalog: SkillCatalog,
    permissions: Permissions,
    *,
    given: Collection[str],
    allows: Callable[[str], bool],
    rules: Sequence[ToolRule],
    eager_tokens: int = DEFAULT_EAGER_TOKENS,
    counter: TokenCounter | None = None,
) -> DisclosurePlan:
    """Decide an agent's disclosure. `given` are the skills it starts with (preloaded, or the
    one it runs): they are not disclosed again. `allows` and `rules` are its limits on tools."""
    if asked == "progressive":
        return DisclosurePlan(asked, "progressive")
    eager = tuple(_eager_skills(catalog, permissions, given, allows, rules))
    counter = counter or default_counter()
    tokens = counter.count_tools([t.spec for skill in eager for t in skill.tools])
    if asked == "auto" and tokens > eager_tokens:
        return DisclosurePlan(asked, "progressive", schema_tokens=tokens)
    return DisclosurePlan(asked, "eager", eager, tokens)


def _eager_skills(
    catalog: SkillCatalog,
    permissions: Permissions,
    given: Collection[str],
    allows: Callable[[str], bool],
    rules: Sequence[ToolRule],
) -> list[EagerSkill]:
    found = []
    for info in catalog:
        if not info.model_invocable or not info.gives_tools or info.forks:
            continue
        if info.name in given or info.has_servers or untrusted_code(info, permissions):
            continue
        try:
            skill = catalog.load(info.name)
        except SkillError:
            continue  # its load_skill says why, as in progressive mode
        tools = tuple(
            t for t in skill.tools if allows(t.name) and first_refusal(t.name, rules) is None
        )
        if tools:
            found.append(EagerSkill(info, tools))
    return found
