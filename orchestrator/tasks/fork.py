"""The `fork` and `read_task_output` meta-tools: sub-agents as a DAG, results as one observation.

`fork(tasks=[...])` validates the tasks as a graph before anything runs (a bad graph is an
error observation the model can correct), runs each task as a fresh agent loop named
`<parent>/<id>` on the same budget and trace, and returns one observation listing every task
with its status, capped output and tokens. Sub-agents get `fork` too, up to `max_depth`.

Nothing widens down the tree: a sub-agent's skills are those its definition and task allow
among its parent's own (`within`), its permissions are its parent's, its depth is one more,
and its budget is a cap inside its parent's. Skills a task (or job step) names start loaded
in its agent (preloaded), as do those its definition preloads (Claude Code's `skills`); a
definition's `tools` limit what the agent may call (`ToolLimit`).

A `context: fork` skill runs through the same machinery (`fork_skill`): one task, its agent
the skill's `agent` (or `general`), its prompt the skill's instructions, the skill active in
it (its tools, if its agent may use the skill, and its `allowed-tools` limit).

Each task's result joins the caller's children as soon as the task ends, so a fork cut short
(a time limit, Ctrl-C) still accounts for every sub-agent's usage. `fork` is resumable: when a
run is resumed in the middle of a fork, the caller calls it again with the same tasks, and the
tasks that had ended keep their results (docs/resume.md); `restore` brings back the caller's
earlier forks (ids used, outputs, children).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import Field

from ..agent import Approver, TaskResult, Tool, ToolContext
from ..errors import ConfigError, ToolError
from ..messages import Message
from ..models import ChatModel, ModelSettings, output_cap, resolve_model
from ..skills import Agent, SkillCatalog, SkillInfo, SkillsExtension
from ..skills.allowed import ToolLimit, ToolRule, tool_rule
from ..skills.disclosure import DEFAULT_DISCLOSURE, DEFAULT_EAGER_TOKENS, Disclosure
from ..tokens import TokenCounter, default_counter
from ..trace import AgentRecord
from ..trace.summary import plural
from .executor import LocalExecutor, RemoteForks
from .graph import GraphError, suggest
from .restore import restore_forks
from .scheduler import GraphRun, lend, task_graph
from .subagents import GENERAL, GENERAL_AGENT, SubagentDef, SubagentRegistry
from .task import TaskRequest, TaskSpec

FORK_PROMPT = """\
## Sub-agents
When the work splits into parts, delegate them with `fork(tasks=[...])`. Each task runs as its
own agent with a fresh conversation: write each `task` as a complete brief. Tasks run
concurrently unless one lists another in `depends_on`; a dependent task receives the results of
its dependencies. The fork returns every task's status and output (long outputs are cut; call
`read_task_output(id)` for the whole text). Agents you can assign (`agent`):
{agents}"""


@dataclass
class ForkState:
    """What one run keeps of its forks (`ctx.state_of(ForkState)`): the task ids used, and
    each task's whole output, for `read_task_output`."""

    ids: set[str] = field(default_factory=set)
    outputs: dict[str, str] = field(default_factory=dict)


@dataclass
class ForkSettings:
    """How forks run: concurrency, nesting, and how much of each output comes back."""

    max_parallel: int = 4
    max_depth: int = 2
    output_cap_tokens: int = 1_000
    dependency_cap_tokens: int = 2_000
    default_max_steps: int = 20
    max_output_tokens: int = 4_096
    disclosure: Disclosure = DEFAULT_DISCLOSURE
    """How sub-agents' skills' tools reach their model (skills/disclosure.py)."""
    eager_tokens: int = DEFAULT_EAGER_TOKENS


class ForkExtension:
    """Gives an agent `fork` and `read_task_output`, and the list of sub-agents it can use.

    `skills` is the catalog sub-agents choose from (each within what its definition allows);
    `tools` are given to every sub-agent as they are. `resolve` turns a definition's model
    into a ChatModel (the run's aliases and environment; `resolve_model` by default).
    `approve` is the approval callback of sub-agents whose parent has none (a job's steps);
    otherwise they get their parent's.
    """

    def __init__(
        self,
        subagents: SubagentRegistry,
        *,
        skills: SkillCatalog | None = None,
        tools: Sequence[Tool] = (),
        settings: ForkSettings | None = None,
        counter: TokenCounter | None = None,
        resolve: Callable[[ModelSettings], ChatModel] = resolve_model,
        approve: Approver | None = None,
    ) -> None:
        self.subagents = subagents
        self.resolve = resolve
        self.approve = approve
        self.skills = skills
        self.shared_tools = list(tools)
        self.settings = settings or ForkSettings()
        self.counter = counter or default_counter()
        self._models: dict[str, ChatModel] = {}
        self._all_skills = skills
        # While a run sends its tasks elsewhere (a Ray session), what makes their executor.
        self.remote: RemoteForks | None = None
        self._tools = [
            # Exclusive: two forks in one turn would run side by side with nothing to order them.
            Tool(self.fork, name="fork", exclusive=True, resumable=True),
            Tool(self.read_task_output, name="read_task_output", resumable=True),
        ]

    def within(self, skills: SkillCatalog | None) -> ForkExtension:
        """This extension for a sub-agent that may use only `skills` (None: none at all):
        the tasks it forks choose from those, never from the whole catalog."""
        view = copy.copy(self)
        view.skills = skills
        view.remote = None  # a sub-agent's own forks run where it runs
        view._tools = [
            self._tools[0].rebound(view.fork),
            self._tools[1].rebound(view.read_task_output),
        ]
        return view

    def system_prompt(self) -> str:
        return FORK_PROMPT.format(agents=self.subagents.index())

    def tools(self) -> Sequence[Tool]:
        return self._tools

    async def fork(
        self, tasks: Annotated[list[TaskSpec], Field(min_length=1)], ctx: ToolContext
    ) -> str:
        """Run tasks as sub-agents, concurrently where their dependencies allow.

        Args:
            tasks: the tasks; each needs an `id` and a `task`, and may name an `agent`,
                the ids it `depends_on`, and the `skills` it may use.
        """
        results = await self._run(tasks, ctx)
        return self._observation(results, ctx)

    async def fork_skill(self, skill: SkillInfo, task: str, ctx: ToolContext) -> str:
        """Run a `context: fork` skill as one sub-agent task; its answer is the observation."""
        agent = skill.agent or GENERAL
        if agent not in self.subagents:
            known = ", ".join(self.subagents.names)
            raise ToolError(
                f"Skill {skill.name!r} runs as the sub-agent {agent!r} (its `agent` field), "
                f"which this run does not have (known: {known})."
            )
        spec = TaskSpec(id=self._skill_task_id(skill, ctx), task=task, agent=agent)
        [result] = await self._run([spec], ctx, running=skill)
        head = f"Skill {skill.name!r} ran as a sub-agent (context: fork)."
        return f"{head}\n{self._task_block(result)}"

    def _skill_task_id(self, skill: SkillInfo, ctx: ToolContext) -> str:
        used = ctx.state_of(ForkState).ids
        stem = re.sub(r"[^A-Za-z0-9_-]+", "-", skill.name).strip("-")[:36] or "skill"
        number = 1
        while f"{stem}-{number}" in used:
            number += 1
        return f"{stem}-{number}"

    async def _run(
        self, tasks: Sequence[TaskSpec], ctx: ToolContext, running: SkillInfo | None = None
    ) -> list[TaskResult]:
        self._validate(tasks, ctx.state_of(ForkState).ids)
        local = LocalExecutor(
            lambda request: self.build_agent(request, ctx, running=running), ctx.budget
        )
        executor = local if self.remote is None else self.remote(ctx, running, local.build)
        run = GraphRun(
            tasks,
            executor,
            parent=ctx.agent,
            depth=ctx.depth + 1,
            agent_of=lambda spec: spec.agent or GENERAL,
            prompt_for=self._prompt,
            gate=executor.budget_refusal,
            max_parallel=self.settings.max_parallel,
            trace=ctx.trace,
            on_result=ctx.children.append,
        )
        first = len(ctx.children)
        async with lend():  # this agent only waits now: its slot is its tasks'
            results = await run.run()
        ctx.children[first:] = results  # the whole fork done: in the order the tasks were given
        outputs = ctx.state_of(ForkState).outputs
        outputs.update({r.id: r.output for r in results})
        return results

    def restore(
        self, context: ToolContext, record: AgentRecord, messages: Sequence[Message]
    ) -> None:
        """A resumed run: the forks it made and got results for count again (their ids are
        used, their outputs readable, their results among its children). A fork still
        without a result is not restored: the resumed run calls it again."""
        state = context.state_of(ForkState)
        restore_forks(context, record, messages, state.ids, state.outputs)

    def read_task_output(self, id: str, ctx: ToolContext) -> str:
        """Return the whole output of a task from an earlier fork.

        Args:
            id: the task's id
        """
        outputs = ctx.state_of(ForkState).outputs
        if id not in outputs:
            known = ", ".join(outputs) or "none yet"
            raise ToolError(f"No task {id!r}{suggest(id, outputs)}. Tasks run so far: {known}.")
        return outputs[id]

    def _validate(self, tasks: Sequence[TaskSpec], used: set[str]) -> None:
        """Raise one error listing every problem; on success, the ids count as used."""
        problems: list[str] = []
        try:
            task_graph(tasks)
        except GraphError as exc:
            problems.extend(f"- tasks[{p.index}]: {p.message}" for p in exc.problems)
        for index, spec in enumerate(tasks):
            problems.extend(f"- tasks[{index}]: {p}" for p in self._spec_problems(spec))
            if spec.id in used:
                problems.append(
                    f"- tasks[{index}]: id {spec.id!r} was used by an earlier fork of this run; "
                    "give each task a new id (read_task_output still returns the earlier one)"
                )
        if problems:
            raise ToolError(
                "The fork was not run; fix these and call fork again:\n" + "\n".join(problems)
            )
        used.update(spec.id for spec in tasks)

    def _spec_problems(self, spec: TaskSpec) -> list[str]:
        name = spec.agent or GENERAL
        definition = self.subagents.get(name)
        if definition is None:
            known = ", ".join(self.subagents.names)
            return [f"unknown agent {name!r}{suggest(name, self.subagents.names)} (known: {known})"]
        problems = []
        for skill in spec.skills or ():
            if not definition.allows_skill(skill):
                problems.append(f"agent {name!r} may not use skill {skill!r}")
            elif self.skills is None or skill not in self.skills:
                problems.append(self._unavailable(skill))
        return problems

    def _unavailable(self, skill: str) -> str:
        everything = self._all_skills.names if self._all_skills is not None else []
        if skill not in everything:
            return f"unknown skill {skill!r}{suggest(skill, everything)}"
        mine = ", ".join(self.skills.names) if self.skills is not None else ""
        return (
            f"skill {skill!r} is outside what this agent may use, and a sub-agent can use no "
            f"more than its parent (available: {mine or 'no skills'})"
        )

    def _prompt(self, spec: TaskSpec, dependencies: Sequence[TaskResult]) -> str:
        if not dependencies:
            return spec.task
        parts = [spec.task, "", "Results of the tasks this one depends on:"]
        for dep in dependencies:
            text, cut = self.counter.truncate(dep.output, self.settings.dependency_cap_tokens)
            if cut:
                text += f"\n[... cut at {self.settings.dependency_cap_tokens} tokens]"
            parts.append(f'<result task="{dep.id}" status="{dep.status}">\n{text}\n</result>')
        return "\n".join(parts)

    def build_agent(
        self,
        request: TaskRequest,
        ctx: ToolContext,
        model: ChatModel | None = None,
        running: SkillInfo | None = None,
    ) -> Agent:
        """The agent loop for one task: its definition's prompt, skills, tools and limits.

        `model` (a job step's own) goes before the definition's; `running` is the
        `context: fork` skill the task runs, if any."""
        definition = self.subagents.get(request.agent) or GENERAL_AGENT
        skills = self._skills_for(definition, request.spec)
        cap = self.settings.default_max_steps
        extensions: list[Any] = []
        if request.depth < self.settings.max_depth:
            extensions.append(self.within(skills))
        limit = self._limit(definition, running)
        if limit is not None:
            extensions.append(limit)
        model = model or self._model_for(definition, ctx)
        return Agent(
            model,
            self.shared_tools,
            system=definition.system,
            name=request.path,
            # A definition may ask for fewer steps than the run allows, never for more.
            max_steps=min(definition.max_steps or cap, cap),
            max_tokens=definition.max_tokens,
            budget=ctx.budget,
            trace=ctx.trace,
            permissions=ctx.permissions,
            extensions=extensions,
            skills=self._skills_extension(skills, definition, request.spec, running, limit),
            depth=request.depth,
            counter=self.counter,
            max_output_tokens=output_cap(model) or self.settings.max_output_tokens,
            approve=ctx.approve if ctx.approve is not None else self.approve,
        )

    def _skills_for(self, definition: SubagentDef, spec: TaskSpec) -> SkillCatalog | None:
        if self.skills is None:
            return None
        names = [n for n in self.skills.names if definition.allows_skill(n)]
        if spec.skills is not None:
            names = [n for n in names if n in spec.skills]
        return self.skills.subset(names)

    def _skills_extension(
        self,
        skills: SkillCatalog | None,
        definition: SubagentDef,
        spec: TaskSpec,
        running: SkillInfo | None,
        limit: ToolLimit | None,
    ) -> SkillsExtension | None:
        """The task's skills: those named by its task and its definition start loaded."""
        if skills is None or not len(skills):
            return None
        preload = [n for n in (*definition.preload, *(spec.skills or ())) if n in skills]
        return SkillsExtension(
            skills,
            counter=self.counter,
            preload=list(dict.fromkeys(preload)),
            running=running.name if running is not None and running.name in skills else None,
            allows=limit.allows if limit is not None else None,
            disclosure=self.settings.disclosure,
            eager_tokens=self.settings.eager_tokens,
        )

    def _limit(self, definition: SubagentDef, running: SkillInfo | None) -> ToolLimit | None:
        """What the agent may call: its definition's `tools`, a forked skill's
        `allowed-tools`; None when neither limits anything."""
        rules: list[ToolRule] = []
        if definition.tools is not None or definition.disallowed_tools:
            source = f"its sub-agent definition {definition.name!r} (tools)"
            rule = tool_rule(source, definition.tools, definition.disallowed_tools or None)
            rules += [rule] if rule is not None else []
        if running is not None and running.allowed_tools is not None:
            source = f"the skill it runs, {running.name!r} (allowed-tools)"
            rule = tool_rule(
                source, running.allowed_tools, own_skill=running.name, skills=self._all_skills
            )
            rules += [rule] if rule is not None else []
        return ToolLimit(rules) if rules else None

    def _model_for(self, definition: SubagentDef, ctx: ToolContext) -> ChatModel:
        if definition.model is None:
            if ctx.model is None:
                raise ConfigError("no model for sub-agents: the parent agent has none")
            return ctx.model
        key = definition.model.model_dump_json()
        if key not in self._models:
            self._models[key] = self.resolve(definition.model)
        return self._models[key]

    def _observation(self, results: Sequence[TaskResult], ctx: ToolContext) -> str:
        counts: dict[str, int] = {}
        for result in results:
            counts[result.status] = counts.get(result.status, 0) + 1
        summary = ", ".join(f"{n} {status}" for status, n in counts.items())
        spent = sum(r.usage.total_tokens for r in results)
        remaining = ctx.budget.remaining if ctx.budget else None
        left = "unlimited" if remaining is None else f"{remaining:,} tokens"
        lines = [
            f"Fork finished: {plural(len(results), 'task')} ({summary}). Tokens used: {spent:,}. "
            f"Budget remaining: {left}."
        ]
        for result in results:
            lines.append("")
            lines.append(self._task_block(result))
        return "\n".join(lines)

    def _task_block(self, result: TaskResult) -> str:
        head = f"### {result.id} [{result.status}] agent={result.agent}"
        if result.status == "skipped":
            return f"{head}\nreason: {result.reason}"
        head += f" tokens={result.usage.total_tokens:,} steps={result.steps}"
        if result.reason:
            head += f"\nreason: {result.reason}"
        text, cut = self.counter.truncate(result.output, self.settings.output_cap_tokens)
        if cut:
            text += (
                f"\n[output cut at {self.settings.output_cap_tokens} tokens; "
                f"read_task_output(id={result.id!r}) returns all of it]"
            )
        return f"{head}\n{text or '(no output)'}"
