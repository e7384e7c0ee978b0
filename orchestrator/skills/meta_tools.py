"""The meta-tools that give an agent its skills, one level at a time, and `skills_extension`.

- `load_skill(name, arguments="")` (level 1): the SKILL.md body (with `$ARGUMENTS` and
  `${CLAUDE_SKILL_DIR}` filled in) and the skill's tools with their full schemas come back.
  The tools become callable, but the tools array the model is sent does not change (so the
  provider's prompt cache keeps the whole prefix): the model calls them by name or through
  `call_skill_tool` (agent/tools.py), which is in the array from the first request when
  a skill with tools could be loaded (and in a forked sub-agent that can fork: its array then
  begins as its parent's). With `stable_tools=False` their schemas are appended
  to the array instead, and the observation lists them by name only. A `context: fork`
  skill runs as a sub-agent instead (through the run's fork extension, `ForkSkill`), and
  the sub-agent's answer comes back. With `disclosure="eager"` (or `"auto"` under its
  threshold), every skill's tools are in the tools array from the first request instead, and
  `load_skill` gives the instructions (disclosure.py).
- `read_skill_file(skill, path)` (level 2): a file inside the skill's folder, size-capped.
- `search_skills(query)`: skills ranked by name, keywords and description, for catalogs
  larger than the index shows.

A loaded (or preloaded) skill is *active* for the rest of its agent's run: the tools its
`allowed-tools` lists run without a person's approval where the run's permissions would ask
(`preapproval`); in `restrict` mode (allowed.py), every call outside them is refused
(`guard`), whatever skill is loaded later. Skills marked `disable-model-invocation` are out
of the index, of search and of `load_skill`; only a task or job step that names them gives
them (preloaded).
"""

from __future__ import annotations

import copy
import json
import logging
import os
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..agent import Extension, Preapproval, Refusal, Tool, ToolContext
from ..agent.tools import dispatcher, run_in_thread
from ..errors import ConfigError, PermissionDenied, ToolError
from ..events import RunStartFields, SkillFailed, SkillLoaded
from ..messages import Message, ToolCall
from ..security import Permissions
from ..tokens import TokenCounter
from .allowed import (
    ToolRule,
    allowed_tools_mode,
    first_refusal,
    skill_preapproval,
    tool_rule,
)
from .catalog import DEFAULT_INDEX_TOKENS, SkillCatalog
from .disclosure import (
    DEFAULT_DISCLOSURE,
    DEFAULT_EAGER_TOKENS,
    EAGER_NOTE,
    Disclosure,
    DisclosurePlan,
    Preloaded,
    plan_disclosure,
    preload_skills,
    render_loaded,
    render_preloaded,
    untrusted_code,
)
from .discovery import SkillFolder
from .files import DEFAULT_MAX_FILE_CHARS, read_file
from .skill import LoadedSkill, SkillError, SkillFailure, SkillInfo
from .skill_md import read_body, substitute

if TYPE_CHECKING:
    from ..trace import AgentHistory

MAX_SEARCH_RESULTS = 20
logger = logging.getLogger("orchestrator.skills")

__all__ = [
    "ForkSkill",
    "ForksSkills",
    "SkillsExtension",
    "render_loaded",
    "skills_extension",
    "untrusted_code",
]


@dataclass
class SkillsState:
    """What one run keeps of its skills (`ctx.state_of(SkillsState)`): the skills it loaded,
    the `allowed-tools` limits they set, and the skills whose code failed to load."""

    loaded: set[str] = field(default_factory=set)
    rules: list[ToolRule] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    """(skill, what failed) for each failure, in order."""
    preload_reported: bool = False


ForkSkill = Callable[[SkillInfo, str, ToolContext], Awaitable[str]]
"""Runs a `context: fork` skill as a sub-agent and returns its answer: the fork extension's
`fork_skill`, handed in by the agent that has both."""


class ForksSkills(Extension, ABC):
    """An extension that can run a `context: fork` skill as a sub-agent (the fork extension):
    an agent given one beside its skills runs its forking skills through it."""

    @abstractmethod
    async def fork_skill(self, skill: SkillInfo, task: str, ctx: ToolContext) -> str:
        """Run `skill` on `task` as one sub-agent; its answer is the skill's observation."""


class SkillsExtension(Extension):
    """An agent extension: the skill index for the system prompt, and the meta-tools.

    `preload` names skills the agent starts with loaded (disclosure.py); `running` is the skill a
    forked sub-agent runs (its tools and limits, not its instructions: those are its task).
    `allows` filters the tools loaded skills add (a sub-agent's tool limit). `stable_tools`
    keeps the tools array of every request the same (see the module's docstring).
    `disclosure` and `eager_tokens` choose how skills' tools reach the model (disclosure.py).
    `keep_dispatcher` keeps `call_skill_tool` in the array (progressive disclosure) when the
    skills with tools that this agent could load are all preloaded: a parent that could load
    them has it, and a sub-agent that can fork then begins its array as its parent's does.
    The tools of the skills an agent starts with come last (`trailing_tools`), after the fork
    tools too.
    A skill whose code fails to load (its `tools.py` does not import, an MCP server does not
    start) is recorded (`skill_failed`) and logged; with `fail_on_skill_error` the run then
    ends as `error` before its next model call.
    """

    def __init__(
        self,
        catalog: SkillCatalog,
        *,
        index_tokens: int = DEFAULT_INDEX_TOKENS,
        max_file_chars: int = DEFAULT_MAX_FILE_CHARS,
        counter: TokenCounter | None = None,
        preload: Sequence[str] = (),
        running: str | None = None,
        allows: Callable[[str], bool] | None = None,
        stable_tools: bool = True,
        disclosure: Disclosure = DEFAULT_DISCLOSURE,
        eager_tokens: int = DEFAULT_EAGER_TOKENS,
        fail_on_skill_error: bool = False,
        keep_dispatcher: bool = False,
    ) -> None:
        self.catalog = catalog
        self.keep_dispatcher = keep_dispatcher
        self.fail_on_skill_error = fail_on_skill_error
        self.index_tokens = index_tokens
        self.max_file_chars = max_file_chars
        self.counter = counter
        self.preload = list(preload)
        self.running = running
        self.allows = allows or (lambda _: True)
        self.stable_tools = stable_tools
        self.disclosure = disclosure
        self.eager_tokens = eager_tokens
        # An agent's own (`configured`); made only for an extension used as it was built: the
        # default permissions look for configuration in the working folder.
        self._permissions: Permissions | None = None
        self.forker: ForkSkill | None = None
        self._prompt: str | None = None
        self._preloaded: list[Preloaded] | None = None
        self._rules: dict[str, list[ToolRule]] = {}
        self._plan: DisclosurePlan | None = None

    def configured(self, permissions: Permissions, forker: ForkSkill | None) -> SkillsExtension:
        """This extension for one agent: its permissions (for preloading) and its forker."""
        view = copy.copy(self)
        view._permissions, view.forker = permissions, forker
        view._prompt, view._preloaded, view._rules = None, None, {}
        view._plan = None
        return view

    @property
    def permissions(self) -> Permissions:
        """The permissions of the agent this extension serves (the defaults until
        `configured`)."""
        if self._permissions is None:
            self._permissions = Permissions()
        return self._permissions

    @property
    def preloaded(self) -> list[Preloaded]:
        if self._preloaded is None:
            self._preloaded = preload_skills(
                self.catalog,
                self.preload,
                self.permissions,
                allows=self.allows,
                running=self.running,
            )
        return self._preloaded

    @property
    def plan(self) -> DisclosurePlan:
        """How this agent's skills are disclosed: decided once, on first use."""
        if self._plan is None:
            self._plan = plan_disclosure(
                self.disclosure,
                self.catalog,
                self.permissions,
                given={*self._preloaded_names(), *([self.running] if self.running else [])},
                allows=self.allows,
                rules=self._static_rules(self.permissions),
                eager_tokens=self.eager_tokens,
                counter=self.counter,
            )
        return self._plan

    def system_prompt(self) -> str | None:
        if self._prompt is None:
            index = self.catalog.index(self.index_tokens, self.counter)
            if index and self.plan.eager:
                index += "\n" + EAGER_NOTE
            parts = [index, self._preload_text()]
            self._prompt = "\n\n".join(p for p in parts if p)
        return self._prompt or None

    def _preload_text(self) -> str | None:
        return render_preloaded(self.preloaded) if self.preload or self.running else None

    def run_permissions(self, permissions: Permissions) -> Permissions:
        """Permissions given to one run: the skill folders stay read-only to it, and a skill
        whose code this agent took in when it was built (preloaded, or its tools given
        eagerly) must be one those permissions allow code from, else the run is refused."""
        for info in [item.info for item in self.preloaded if item.tools] + [
            skill.info for skill in self.plan.eager
        ]:
            refusal = untrusted_code(info, permissions)
            if refusal is not None:
                raise ConfigError(
                    f"this agent was built with the code of skill {info.name!r}, which the "
                    f"permissions given to its run refuse: {refusal}"
                )
        return permissions.protecting(self.catalog.paths)

    def run_scope(self) -> AbstractAsyncContextManager[object]:
        """What a run with these skills holds while it goes: the MCP servers its skills
        start, shared with its sub-agents and stopped when the outermost run ends (errors and
        cancellation included). Skills that declare none hold nothing."""
        if not self.catalog.has_servers:
            return nullcontext()
        from .servers import server_scope  # loaded by a run whose skills declare servers

        return server_scope()

    def refused(self) -> dict[str, str]:
        """The preloaded skills whose code the run's rules refused."""
        return {
            f"load_skill:{item.info.name}": item.note or "refused"
            for item in self.preloaded
            if item.refused
        }

    def start_record(self) -> RunStartFields:
        """`preloaded`: the skills this agent starts with loaded, for its `run_start`."""
        names = [item.info.name for item in self.preloaded if item.info.name != self.running]
        return {"preloaded": names} if names else {}

    def tools(self) -> Sequence[Tool]:
        # load_skill runs alone: skills loaded in one turn add their tools in the model's order.
        # All three only read: a resumed run calls them again where it was cut off in them
        # (a `context: fork` skill's sub-agent resumes from the trace, as a fork does).
        meta: list[Tool] = [
            # Pinned: a skill's instructions stay whole in every request, compaction or not.
            Tool(self.load_skill, exclusive=True, resumable=True, pin=True),
            Tool(self.read_skill_file, resumable=True),
            Tool(self.search_skills, resumable=True),
        ]
        if self._dispatches():
            meta.append(dispatcher())
        return meta

    def trailing_tools(self) -> Sequence[Tool]:
        # This agent's own skills' tools, after every extension's tools: a sub-agent's array
        # begins as its parent's, whose cached prefix its first request then reads.
        return [t for item in self.preloaded for t in item.tools] + self.plan.tools

    def _dispatches(self) -> bool:
        """Whether the dispatcher is in the tools array: when loading a skill could give
        tools; with `keep_dispatcher` (progressive), also when every skill with tools is
        preloaded, as an agent that could load them (its parent) has it."""
        if not self.stable_tools:
            return False
        given = self._preloaded_names() | self.plan.names
        if self.keep_dispatcher and self.plan.mode == "progressive":
            given = set()
        return any(
            info.gives_tools and not info.forks and info.name not in given
            for info in self.catalog
            if info.model_invocable
        )

    def before_call(self, context: ToolContext) -> None:
        """Report the preloaded skills that failed (once, before the first model call); with
        `fail_on_skill_error`, end the run if any skill of it failed."""
        state = context.state_of(SkillsState)
        if not state.preload_reported:
            state.preload_reported = True
            for item in self.preloaded:
                for failure in item.failures:
                    skill_failed(context, item.info.name, failure)
        if self.fail_on_skill_error and state.failed:
            skill, error = state.failed[0]
            raise SkillFailure(f"skill {skill!r} failed: {error} (fail_on_skill_error is set)")

    def guard(self, call: ToolCall, ctx: ToolContext) -> Refusal | None:
        """Refuse a call that an active skill's `allowed-tools` does not allow (`restrict`)."""
        rules = [*self._static_rules(ctx.permissions), *ctx.state_of(SkillsState).rules]
        return first_refusal(call.name, rules)

    def preapproval(self, call: ToolCall, ctx: ToolContext) -> Preapproval | None:
        """Whether an active skill's `allowed-tools` pre-approves a call the run's
        permissions would put to a person: the first grant, else every reason it was not."""
        loaded = ctx.state_of(SkillsState).loaded
        active = [item.info for item in self.preloaded]
        active += [info for name in sorted(loaded) if (info := self.catalog.get(name))]
        refused: list[str] = []
        for info in active:
            verdict = skill_preapproval(info, call, ctx.permissions)
            if verdict is not None and verdict.granted:
                return verdict
            if verdict is not None:
                refused.append(verdict.reason)
        return Preapproval(False, "; ".join(refused)) if refused else None

    def _static_rules(self, permissions: Permissions) -> list[ToolRule]:
        """The limits of the preloaded skills, active from the start, under `permissions`:
        a run's own (given to that run), which may ask for `restrict` where the agent's
        did not."""
        mode = permissions.skill_allowed_tools
        if mode not in self._rules:
            found = (self.rule_for(item.info, permissions) for item in self.preloaded)
            self._rules[mode] = [rule for rule in found if rule is not None]
        return self._rules[mode]

    def rule_for(self, info: SkillInfo, permissions: Permissions) -> ToolRule | None:
        """The limit a skill's `allowed-tools` sets while it is active, if it names our tools
        and is a limit (`restrict` mode; else it pre-approves, `preapproval`)."""
        if info.allowed_tools is None or allowed_tools_mode(info, permissions) != "restrict":
            return None
        source = f"the active skill {info.name!r} (allowed-tools)"
        return tool_rule(source, info.allowed_tools, own_skill=info.name, skills=self.catalog)

    async def load_skill(self, name: str, ctx: ToolContext, arguments: str = "") -> str:
        """Load a skill: returns its instructions; its tools can be called from your next step.

        Args:
            name: The skill's name, as the skill index or search_skills shows it.
            arguments: Text for the skill, when its instructions take some (filled in for
                $ARGUMENTS).
        """
        info = self._info(name)
        if info.name == self.running:
            return f"You are running the skill {info.name!r}: its instructions are your task."
        state = ctx.state_of(SkillsState)
        rules, loaded = state.rules, state.loaded
        if info.forks:
            return await self._fork(
                info, arguments, [*self._static_rules(ctx.permissions), *rules], ctx
            )
        if info.name in loaded or info.name in self._preloaded_names():
            if arguments.strip():  # the instructions again, for the new arguments
                return substitute(await run_in_thread(read_body, info), info.folder, arguments)
            return (
                f"Skill {info.name!r} is already loaded: its instructions are earlier in this "
                "conversation and its tools are available."
            )
        skill = await self._read(info, ctx)
        rule = self.rule_for(info, ctx.permissions)
        active = [*self._static_rules(ctx.permissions), *rules, *([rule] if rule else [])]
        allowed = [
            t for t in skill.tools if self.allows(t.name) and first_refusal(t.name, active) is None
        ]
        added = [t.name for t in allowed if ctx.toolset.add(t, advertise=not self.stable_tools)]
        already = [t.name for t in allowed if t.name not in added]
        loaded.add(info.name)
        if rule is not None:
            rules.append(rule)
        ctx.trace.emit(SkillLoaded, agent=ctx.agent, skill=info.name, tools=added)
        shown = [*added, *already]
        # An eager agent holds this skill's tools in its tools array: their names suffice.
        schemas = self.stable_tools and info.name not in self.plan.names
        return render_loaded(skill, arguments, rule, shown=shown, schemas=schemas)

    async def _read(self, info: SkillInfo, ctx: ToolContext) -> LoadedSkill:
        refusal = untrusted_code(info, ctx.permissions)
        if refusal is not None:
            raise PermissionDenied(f"Skill {info.name!r} cannot be loaded: {refusal}")
        try:
            skill = await run_in_thread(self.catalog.load, info.name)
        except SkillError as exc:
            skill_failed(ctx, info.name, str(exc))
            raise ToolError(f"Skill {info.name!r} cannot be loaded: {exc}") from None
        if skill.info.has_servers:
            from .servers import with_servers  # loaded by a skill that declares servers

            skill = await with_servers(skill, ctx.permissions)
        for failure in skill.failures:
            skill_failed(ctx, info.name, failure)
        return skill

    async def _fork(
        self, info: SkillInfo, arguments: str, rules: list[ToolRule], ctx: ToolContext
    ) -> str:
        """Run a `context: fork` skill as a sub-agent; its instructions are the task."""
        if self.forker is None:
            raise ToolError(
                f"Skill {info.name!r} runs as a sub-agent (context: fork), and this agent "
                "cannot start sub-agents (it is at the fork depth limit, or has no fork tool)."
            )
        refused = first_refusal("fork", rules)
        if refused is not None:
            raise ToolError(f"Skill {info.name!r} runs as a sub-agent: {refused.text}")
        try:
            body = await run_in_thread(read_body, info)
        except SkillError as exc:
            raise ToolError(f"Skill {info.name!r} cannot be loaded: {exc}") from None
        return await self.forker(info, substitute(body, info.folder, arguments), ctx)

    def _preloaded_names(self) -> set[str]:
        return {item.info.name for item in self.preloaded}

    def restore(
        self, context: ToolContext, history: AgentHistory, messages: Sequence[Message]
    ) -> None:
        """A resumed run: the skills whose `load_skill` result is in the rebuilt conversation
        are loaded again, their tools in the same order and their `allowed-tools` limits
        active again (nothing is recorded again). A load cut off before its result was
        recorded is not: the resumed run calls it again. A `context: fork` skill loaded
        nothing (a sub-agent ran it), so there is nothing to bring back."""
        state = context.state_of(SkillsState)
        loaded, rules = state.loaded, state.rules
        permissions = context.permissions
        given = {*self._preloaded_names(), self.running, *loaded}
        for name in loaded_in(messages):
            info = self.catalog.get(name)
            if info is None or info.forks or info.name in given:
                continue
            # A fresh load's rules hold: a skill the model may not choose, or whose code may
            # not run here, is not brought back whatever the conversation says it loaded.
            if not info.model_invocable or untrusted_code(info, permissions):
                continue
            try:
                skill = self.catalog.load(info.name)
                if skill.info.has_servers:
                    from .servers import with_servers_sync  # a skill that declares servers

                    skill = with_servers_sync(skill, permissions)
            except SkillError:
                continue  # the model's next call of its tools gets an unknown-tool result
            rule = self.rule_for(info, permissions)
            active = [*self._static_rules(permissions), *rules, *([rule] if rule else [])]
            for item in skill.tools:
                if self.allows(item.name) and first_refusal(item.name, active) is None:
                    context.toolset.add(item, advertise=not self.stable_tools)
            loaded.add(info.name)
            given.add(info.name)
            if rule is not None:
                rules.append(rule)

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
            count = len(self.catalog.invocable)
            return f"No skill matches {query!r} ({count} skills exist). Try other words."
        loaded = ctx.state_of(SkillsState).loaded | self._preloaded_names()
        lines = [f"{info.summary()}{' (loaded)' if info.name in loaded else ''}" for info in found]
        return "\n".join([*lines, "Load one with load_skill(name)."])

    def _info(self, name: str) -> SkillInfo:
        info = self.catalog.get(name)
        if info is None:
            raise ToolError(self.catalog.unknown_message(name))
        given = info.name in self._preloaded_names() or info.name == self.running
        if not info.model_invocable and not given:
            raise ToolError(
                f"Skill {info.name!r} is not for the model to choose (disable-model-invocation); "
                "a job step or a fork task that names it in its skills gives it to its agent."
            )
        return info

    def __repr__(self) -> str:
        return f"SkillsExtension({self.catalog!r})"


def skill_failed(ctx: ToolContext, skill: str, error: str) -> None:
    """Record that a skill's code failed to load: in the run's state, the trace
    (`skill_failed`) and the `orchestrator.skills` log."""
    ctx.state_of(SkillsState).failed.append((skill, error))
    ctx.trace.emit(SkillFailed, agent=ctx.agent, skill=skill, error=error)
    logger.warning("%s: skill %r failed: %s", ctx.agent, skill, error)


def loaded_in(messages: Sequence[Message]) -> list[str]:
    """The skills a conversation loaded: `load_skill` calls that got a result, in order."""
    asked = {
        call.id: call.arguments
        for message in messages
        for call in message.tool_calls
        if call.name == "load_skill"
    }
    names = []
    for message in messages:
        if message.role == "tool" and not message.is_error and message.tool_call_id in asked:
            try:
                name = json.loads(asked[message.tool_call_id]).get("name")
            except (ValueError, AttributeError):
                continue
            if isinstance(name, str) and name not in names:
                names.append(name)
    return names


def skills_extension(skills: Any, **options: Any) -> SkillsExtension:
    """What `Agent(skills=...)` accepts: a SkillsExtension, a SkillCatalog, or skill folders."""
    if isinstance(skills, SkillsExtension):
        return skills
    if isinstance(skills, SkillCatalog):
        return SkillsExtension(skills, **options)
    if isinstance(skills, str | os.PathLike | SkillFolder):
        return SkillsExtension(SkillCatalog([skills]), **options)
    if isinstance(skills, Iterable):
        return SkillsExtension(SkillCatalog(list(skills)), **options)
    raise TypeError(f"skills must be a SkillCatalog or skill folders, not {type(skills).__name__}")
