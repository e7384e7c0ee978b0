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

`fork(tasks, wait=false)` starts the tasks in the background and returns at once (background.py):
the agent goes on with its own turns, and each task's result reaches it at its first turn after
the task ends, as a message after the last turn (never inserted before it) with the same blocks
as a fork's observation. `wait_tasks` waits for some or all of them, `task_status` shows how
they go and what they spent, `cancel_tasks` ends them. When the agent answers while some still
run, the run waits for them and the agent answers again with their results
(`ForkSettings.on_answer`: `wait`), or ends them (`cancel`); a run cut short (a time limit,
Ctrl-C, an error) ends them. Either way a `background_settle` event says which. Background
tasks draw from the run's budget and take the tree's `max_parallel` slots like any other.

Each task's result joins the caller's children as soon as the task ends, so a fork cut short
(a time limit, Ctrl-C) still accounts for every sub-agent's usage. `fork` is resumable: when a
run is resumed in the middle of a fork, the caller calls it again with the same tasks, and the
tasks that had ended keep their results (docs/resume.md); `restore` brings back the caller's
earlier forks (ids used, outputs, children), and starts its background forks again: the tasks
that had ended keep their results, the ones in flight go on from their last complete turn.
"""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from ..agent import (
    DEFAULT_MAX_STEPS,
    DEFAULT_OUTPUT_RETRIES,
    AgentLoop,
    Approver,
    CompactionStrategy,
    OutputMode,
    TaskResult,
    TokenBudget,
    Tool,
    ToolContext,
    WaitingForInput,
)
from ..errors import ConfigError, ToolError
from ..events import BackgroundCancel, BackgroundDelivered, BackgroundSettle, InputRequest
from ..messages import Message, plural, suggest
from ..models import (
    ChatModel,
    ModelSettings,
    ResolvedModels,
    output_cap,
    output_modes_of,
    unsupported_mode,
)
from ..security import Permissions
from ..skills import Agent, SkillCatalog, SkillInfo, SkillsExtension
from ..skills.allowed import ToolLimit, ToolRule, allowed_tools_mode, tool_rule
from ..skills.disclosure import DEFAULT_DISCLOSURE, DEFAULT_EAGER_TOKENS, Disclosure
from ..skills.meta_tools import ForksSkills
from ..tokens import TokenCounter, default_counter
from .executor import RemoteForks, TaskRequest, TaskSpec, with_remote_agents
from .scheduler import GraphError, GraphRun, LocalExecutor, Slots, check_tasks, lend
from .subagents import GENERAL, GENERAL_AGENT, Choices, SubagentDef, SubagentRegistry, merged

if TYPE_CHECKING:
    from ..agent import OutputSpec
    from ..trace import AgentHistory, Checkpoint
    from .background import Background

FORK_DESCRIPTION = """\
Run tasks as sub-agents, concurrently where their dependencies allow. When the work splits into
parts, delegate them here. Each task runs as its own agent with a fresh conversation: write
each `task` as a complete brief. Tasks run concurrently unless one lists another in
`depends_on`; a dependent task receives the results of its dependencies. The fork returns every
task's status and output (long outputs are cut; call `read_task_output(id)` for the whole
text). With `wait: false` they run in the background while you go on, and each result comes to
you after its task ends. Agents you can assign (`agent`):
{agents}"""
"""`fork`'s description: how to fork, and the sub-agents a task may name. It is in the tools
array, not the system prompt, so that it is part of the prefix every agent of the run that can
fork shares: a sub-agent's first request reads its parent's whole tools array from the
provider's cache, which Anthropic serves only when it reaches 1,024 tokens (the meta-tools and
fork tools come to about 1,015 without the list, 1,230 with it, on its wire)."""


@dataclass(frozen=True)
class StepOutput:
    """What a task's or step's answer must be, and how its agent is asked for it."""

    spec: OutputSpec[Any]
    mode: OutputMode | None = None
    retries: int = DEFAULT_OUTPUT_RETRIES

    def choices(self) -> dict[str, Any]:
        """As a level's `Choices` (tasks/subagents.py)."""
        return {"output": self.spec, "output_mode": self.mode, "output_retries": self.retries}


@dataclass
class ForkState:
    """What one run keeps of its forks (`ctx.state_of(ForkState)`): the task ids used, each
    task's whole output, for `read_task_output`, the slots all its forks take, and its
    background graphs (None until it starts one)."""

    ids: set[str] = field(default_factory=set)
    outputs: dict[str, str] = field(default_factory=dict)
    restoring: Checkpoint | None = None
    """The checkpoint of the run this one resumes: its forks' tasks are restored from it."""
    slots: Slots | None = None
    background: Background | None = None
    output_specs: dict[str, OutputSpec[Any]] = field(default_factory=dict)
    """Each task's own `output_schema`, compiled when its fork was checked, by task id."""


@dataclass
class ForkSettings:
    """How forks run: concurrency, nesting, and how much of each output comes back."""

    max_parallel: int = 4
    max_depth: int = 2
    output_cap_tokens: int = 1_000
    dependency_cap_tokens: int = 2_000
    default_max_steps: int = DEFAULT_MAX_STEPS
    max_output_tokens: int = 4_096
    disclosure: Disclosure = DEFAULT_DISCLOSURE
    """How sub-agents' skills' tools reach their model (skills/disclosure.py)."""
    eager_tokens: int = DEFAULT_EAGER_TOKENS
    on_answer: Literal["wait", "cancel"] = "wait"
    """Background tasks still running when the agent answers: wait for them (and let the
    agent answer again with their results), or cancel them."""
    wait_timeout: float = 600.0
    """The most seconds one `wait_tasks` call waits."""
    fail_on_skill_error: bool = False
    """A sub-agent whose skill's code fails to load ends as `error` (skills/meta_tools.py)."""
    compaction: CompactionStrategy = "mask"
    """How sub-agents compact their conversations, unless their definition says."""
    note: bool = False
    """Whether sub-agents get the `note` tool, unless their definition says."""
    questions: bool = False
    """Whether sub-agents get the `ask_user` tool, unless their definition says."""

    def choices(self) -> Choices:
        """What the run chooses for its agents: the last level of `merged`."""
        return Choices(
            compaction=self.compaction,
            note=self.note,
            questions=self.questions,
            max_steps=self.default_max_steps,
            output_retries=DEFAULT_OUTPUT_RETRIES,
        )


class ForkExtension(ForksSkills):
    """Gives an agent `fork` and `read_task_output`, and the list of sub-agents it can use (in
    `fork`'s description).

    `skills` is the catalog sub-agents choose from (each within what its definition allows);
    `tools` are given to every sub-agent as they are. `resolve` turns a definition's model
    into a ChatModel (the run's aliases and environment), the same settings into the same
    model (by default resolved with the built-in aliases and the process environment).
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
        resolve: Callable[[ModelSettings], ChatModel] | None = None,
        approve: Approver | None = None,
    ) -> None:
        self.subagents = subagents
        self.resolve = resolve or ResolvedModels().get
        self.approve = approve
        self.skills = skills
        self.shared_tools = list(tools)
        self.settings = settings or ForkSettings()
        self.counter = counter or default_counter()
        self._all_skills = skills
        # In the view of a run that sends its tasks elsewhere (`sending`: a Ray session), what
        # makes their executor.
        self.remote: RemoteForks | None = None
        self._tools = self._make_tools()
        self._skill_less: ForkExtension | None = None  # `within(None)`, made once

    def _make_tools(self) -> list[Tool]:
        fork, read_task_output, wait_tasks, task_status, cancel_tasks = self._methods()
        return [
            # Exclusive: two forks in one turn would run side by side with nothing to order them.
            Tool(
                fork,
                name="fork",
                description=FORK_DESCRIPTION.format(agents=self.subagents.index()),
                exclusive=True,
                resumable=True,
            ),
            Tool(read_task_output, name="read_task_output", resumable=True),
            Tool(wait_tasks, name="wait_tasks", resumable=True),
            Tool(task_status, name="task_status", resumable=True),
            Tool(cancel_tasks, name="cancel_tasks"),
        ]

    def _methods(self) -> list[Callable[..., Any]]:
        """The methods behind the tools, in the tools' order."""
        return [
            self.fork,
            self.read_task_output,
            self.wait_tasks,
            self.task_status,
            self.cancel_tasks,
        ]

    def within(self, skills: SkillCatalog | None) -> ForkExtension:
        """This extension for a sub-agent that may use only `skills` (None: none at all):
        the tasks it forks choose from those, never from the whole catalog. Every sub-agent
        given no skills gets the same view (it keeps nothing of a run: a run's forks are in
        its context), not one of its own with its own tools."""
        if skills is None and self._skill_less is not None:
            return self._skill_less
        view = self._view(remote=None)  # a sub-agent's own forks run where it runs
        view.skills = skills
        if skills is None:
            self._skill_less = view
        return view

    def sending(self, remote: RemoteForks) -> ForkExtension:
        """This extension for one run whose tasks go where `remote` sends them (a Ray
        session): a view, so that the extension every run of its orchestrator shares is
        never changed by one of them."""
        return self._view(remote=remote)

    def _view(self, *, remote: RemoteForks | None) -> ForkExtension:
        view = copy.copy(self)
        view.remote = remote
        view._skill_less = None
        # The same schemas, bound to the view: building a tool's schema costs milliseconds,
        # and a fan-out builds one view per sub-agent.
        view._tools = [t.rebound(fn) for t, fn in zip(self._tools, view._methods(), strict=True)]
        return view

    def run_permissions(self, permissions: Permissions) -> Permissions:
        """Permissions given to one run: the sub-agent definitions' folders stay read-only
        to it, as to the agent's own runs (what its forks run is never the model's to
        write)."""
        return permissions.protecting(self.subagents.folders)

    def tools(self) -> Sequence[Tool]:
        return self._tools

    async def fork(
        self,
        tasks: Annotated[list[TaskSpec], Field(min_length=1)],
        ctx: ToolContext,
        wait: bool = True,
    ) -> str:
        """Run tasks as sub-agents, concurrently where their dependencies allow.

        Args:
            tasks: the tasks; each needs an `id` and a `task`, and may name an `agent`,
                the ids it `depends_on`, and the `skills` it may use.
            wait: false: run them in the background and go on at once.
        """
        if not wait:
            return self._start_background(tasks, ctx)
        results = await self._run(tasks, ctx)
        return self._report("Fork finished", results, ctx)

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
        self._validate(tasks, ctx)
        run = self._graph(
            tasks,
            ctx,
            lambda request: self.build_agent(request, ctx, running=running),
            running=running,
            on_result=ctx.children.append,
        )
        async with lend():  # this agent only waits now: its slot is its tasks'
            results = await run.run()
        # The whole fork done: its results in the order the tasks were given (after those of
        # background tasks that ended meanwhile).
        mine = {id(r) for r in results}
        ctx.children[:] = [c for c in ctx.children if id(c) not in mine] + results
        outputs = ctx.state_of(ForkState).outputs
        outputs.update({r.id: r.output for r in results})
        waiting = [w for r in results if r.run is not None for w in r.run.waiting]
        if waiting:  # the other tasks ran as far as they could: the fork waits with them
            raise WaitingForInput(waiting, relayed=True)
        return results

    def _graph(
        self,
        tasks: Sequence[TaskSpec],
        ctx: ToolContext,
        build: Callable[[TaskRequest], AgentLoop[Any, Any]],
        *,
        running: SkillInfo | None = None,
        **options: Any,
    ) -> GraphRun:
        """A fork's graph: its tasks run here (or where the run sends them, a remote agent's
        through `orchestrator.a2a`), in the tree's slots, recorded in the agent's trace."""
        local = LocalExecutor(build, ctx.budget, ctx.deps)  # the run's deps, to every depth
        executor = local if self.remote is None else self.remote(ctx, running, local.build)
        executor = with_remote_agents(executor, self.subagents, ctx)
        restoring = ctx.state_of(ForkState).restoring
        if restoring is not None:
            from .restore import Restoring  # loaded by a run that resumes

            executor = Restoring(executor, restoring)
        return GraphRun(
            tasks,
            executor,
            parent=ctx.agent,
            depth=ctx.depth + 1,
            agent_of=lambda spec: spec.agent or GENERAL,
            prompt_for=self._prompt,
            gate=executor.budget_refusal,
            trace=ctx.trace,
            slots=self._slots(ctx),
            **options,
        )

    def _slots(self, ctx: ToolContext) -> Slots:
        """The slots this run's forks take: the tree's pool, one for all its forks."""
        state = ctx.state_of(ForkState)
        if state.slots is None:
            state.slots = Slots.for_graph(self.settings.max_parallel)
        return state.slots

    # --- Background forks ---------------------------------------------------------------

    def _start_background(
        self,
        tasks: Sequence[TaskSpec],
        ctx: ToolContext,
        *,
        resumed: bool = False,
        delivered: Collection[str] = (),
    ) -> str:
        """Start `tasks` beside the agent. A fork `resumed` from the trace is not validated
        again (its ids are in use already); `delivered` are its tasks the agent had seen."""
        state = ctx.state_of(ForkState)
        if not resumed:
            self._validate(tasks, ctx)
        if state.background is None:
            from .background import Background  # loaded by a run that forks in the background

            state.background = Background()
        background = state.background
        meters: dict[str, TokenBudget] = {}

        def build(request: TaskRequest) -> Agent[Any, Any]:
            return self.build_agent(request, ctx, budget=meters[request.spec.id])

        def started(spec: TaskSpec) -> None:
            background.tasks[spec.id].started_at = time.time()

        def ended(result: TaskResult) -> None:
            ctx.children.append(result)
            state.outputs[result.id] = result.output
            background.ended(result)

        graph = self._graph(
            tasks,
            ctx,
            build,
            on_result=ended,
            background=True,
            overlap=background.overlap,
            on_start=started,
        )
        for spec in tasks:
            meters[spec.id] = ctx.budget.scoped(None) if ctx.budget else TokenBudget()
            background.add(graph, spec, meters[spec.id])
            background.tasks[spec.id].delivered = spec.id in delivered
        background.start(graph)
        ids = ", ".join(spec.id for spec in tasks)
        return (
            f"Started {plural(len(tasks), 'task')} in the background: {ids}. Go on with your "
            "own work: each result comes to you at your next turn after its task ends. "
            "wait_tasks waits for them, task_status shows their progress and spend, "
            "cancel_tasks stops them."
        )

    def arrived(self, context: ToolContext) -> list[Message]:
        """Results of background tasks that ended since the agent's last model call."""
        return self._deliver(context, "turn")

    async def settle(self, context: ToolContext, *, answered: bool) -> list[Message]:
        """The run is ending: wait for its background tasks (after an answer, by default) and
        hand the agent their results, or cancel them."""
        background = self._background(context)
        if background is None or not background.tasks:
            return []
        running = background.unfinished()
        if answered and self.settings.on_answer == "wait":
            if running:
                context.trace.emit(
                    BackgroundSettle, agent=context.agent, choice="wait", ids=running
                )
                async with lend():
                    await background.wait(running, None)
            await background.close()
            return self._deliver(context, "answer")
        if running:
            reason = (
                "cancelled: the agent gave its final answer (on_answer: cancel)"
                if answered
                else "cancelled: the run of the agent that started it ended first"
            )
            context.trace.emit(
                BackgroundSettle, agent=context.agent, choice="cancel", ids=running, reason=reason
            )
            await background.cancel(running, reason)
        await background.close()
        return []

    def waiting(self, context: ToolContext) -> list[InputRequest]:
        """What the run's background tasks that ended `input_required` wait for."""
        background = self._background(context)
        if background is None:
            return []
        results = [t.result for t in background.tasks.values() if t.result is not None]
        return [w for r in results if r.run is not None for w in r.run.waiting]

    def _background(self, context: ToolContext) -> Background | None:
        """The run's background graphs, None before it starts one (asked at every step and
        as each run ends: a run that never forks is given no `ForkState`)."""
        state = context.existing_state(ForkState)
        return state.background if state is not None else None

    def _deliver(self, context: ToolContext, via: str) -> list[Message]:
        background = self._background(context)
        if background is None:
            return []
        results = background.undelivered()
        if not results:
            return []
        background.mark_delivered(results)
        context.trace.emit(
            BackgroundDelivered, agent=context.agent, ids=[r.id for r in results], via=via
        )
        text = self._report("Background tasks ended", results, context)
        return [Message.user(f"[orchestrator] {text}{self._still_running(background)}")]

    def _still_running(self, background: Background) -> str:
        running = background.unfinished()
        return f"\nStill running: {', '.join(running)}." if running else ""

    async def wait_tasks(
        self,
        ctx: ToolContext,
        ids: Sequence[str] = (),
        timeout_seconds: Annotated[float, Field(gt=0)] = 120.0,
    ) -> str:
        """Wait for background tasks (default all) to end; returns their new results."""
        background, chosen = self._background_tasks(ctx, ids)
        limit = min(timeout_seconds, self.settings.wait_timeout)
        async with lend():
            await background.wait(chosen, limit)
        results = [r for i in chosen if (r := background.tasks[i].result) is not None]
        fresh = [r for r in results if not background.tasks[r.id].delivered]
        background.mark_delivered(fresh)
        if fresh:
            ctx.trace.emit(
                BackgroundDelivered, agent=ctx.agent, ids=[r.id for r in fresh], via="wait_tasks"
            )
        lines = []
        if fresh:
            lines.append(self._report("Background tasks ended", fresh, ctx))
        earlier = [r.id for r in results if r not in fresh]
        if earlier:
            lines.append(
                f"Given to you earlier: {', '.join(earlier)} (read_task_output returns them)."
            )
        waiting = background.unfinished(chosen)
        if waiting:
            lines.append(
                f"Still running after {limit:g} s: {', '.join(waiting)} "
                "(task_status shows their progress)."
            )
        return "\n".join(lines)

    def task_status(self, ctx: ToolContext, ids: Sequence[str] = ()) -> str:
        """State, tokens spent and time of background tasks (default all)."""
        background, chosen = self._background_tasks(ctx, ids)
        remaining = ctx.budget.remaining if ctx.budget else None
        left = "unlimited" if remaining is None else f"{remaining:,} tokens"
        lines = [f"Background tasks: {len(chosen)}. Budget remaining: {left}."]
        now = time.time()
        for task_id in chosen:
            task = background.tasks[task_id]
            result = task.result
            spent = result.usage.total_tokens if result is not None else task.meter.used
            line = f"- {task_id} [{task.state}] tokens={spent:,}"
            if result is None and task.meter.reserved:
                line += f" (+{task.meter.reserved:,} reserved for a call in flight)"
            if result is None and task.started_at is not None:
                line += f" running for {now - task.started_at:.1f} s"
            elif result is not None:
                given = task.delivered
                line += " (result given to you)" if given else " (result at your next turn)"
            lines.append(line)
        return "\n".join(lines)

    async def cancel_tasks(self, ctx: ToolContext, ids: Sequence[str] = ()) -> str:
        """Stop background tasks (default all) and the tasks that depend on them."""
        background, chosen = self._background_tasks(ctx, ids)
        running = background.unfinished(background.with_dependents(chosen))
        if not running:
            return f"Nothing to cancel: {', '.join(chosen)} had ended already."
        reason = "cancelled by cancel_tasks"
        ctx.trace.emit(BackgroundCancel, agent=ctx.agent, ids=running)
        results = await background.cancel(running, reason)
        stopped = [r for r in results if r.id in running and not background.tasks[r.id].delivered]
        background.mark_delivered(stopped)
        ctx.trace.emit(
            BackgroundDelivered, agent=ctx.agent, ids=[r.id for r in stopped], via="cancel_tasks"
        )
        return self._report("Cancelled", stopped, ctx)

    def _background_tasks(
        self, ctx: ToolContext, ids: Sequence[str]
    ) -> tuple[Background, list[str]]:
        """The run's background graphs, and the tasks named (all of them when none is)."""
        background = ctx.state_of(ForkState).background
        if background is None or not background.tasks:
            raise ToolError("No background tasks in this run: fork(..., wait=false) starts some.")
        if not ids:
            return background, list(background.tasks)
        unknown = [i for i in ids if i not in background.tasks]
        if unknown:
            known = ", ".join(background.tasks)
            raise ToolError(
                f"No background task {unknown[0]!r}{suggest(unknown[0], background.tasks)}. "
                f"Background tasks: {known}."
            )
        return background, list(dict.fromkeys(ids))

    def restore(
        self, context: ToolContext, history: AgentHistory, messages: Sequence[Message]
    ) -> None:
        """A resumed run: the forks it made and got results for count again (their ids are
        used, their outputs readable, their results among its children). A fork still
        without a result is not restored: the resumed run calls it again. A background fork
        starts again: its tasks that had ended keep their results (and are not given to the
        agent twice), the ones in flight go on."""
        state = context.state_of(ForkState)
        from .restore import background_forks, restore_forks  # loaded by a run that resumes

        state.restoring = history.checkpoint
        restore_forks(context, history, messages, state.ids, state.outputs)
        for specs, delivered in background_forks(history, messages):
            state.ids.update(spec.id for spec in specs)
            self._start_background(specs, context, resumed=True, delivered=delivered)

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

    def _validate(self, tasks: Sequence[TaskSpec], ctx: ToolContext) -> None:
        """Raise one error listing every problem; on success, the ids count as used."""
        state = ctx.state_of(ForkState)
        used = state.ids
        problems: list[str] = []
        compiled: dict[str, OutputSpec[Any]] = {}
        try:
            check_tasks(tasks)
        except GraphError as exc:
            problems.extend(f"- tasks[{p.index}]: {p.message}" for p in exc.problems)
        for index, spec in enumerate(tasks):
            found = self._spec_problems(spec, ctx, compiled)
            problems.extend(f"- tasks[{index}]: {p}" for p in found)
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
        state.output_specs.update(compiled)

    def _spec_problems(
        self, spec: TaskSpec, ctx: ToolContext, compiled: dict[str, OutputSpec[Any]]
    ) -> list[str]:
        """What is wrong with one task; its own output schema, compiled (within bounds:
        agent/bounded_schema.py), goes into `compiled`."""
        name = spec.agent or GENERAL
        definition = self.subagents.get(name)
        if definition is None:
            known = ", ".join(self.subagents.names)
            return [f"unknown agent {name!r}{suggest(name, self.subagents.names)} (known: {known})"]
        problems = []
        if spec.output_schema is not None:
            from ..agent.output import OutputSpec  # loaded by a task with an output type

            try:
                compiled[spec.id] = OutputSpec.from_schema(spec.output_schema)
            except ConfigError as exc:
                problems.append(f"output_schema: {exc}")
        problems += self._output_problems(spec, definition, ctx)
        for skill in spec.skills or ():
            if not definition.allows_skill(skill):
                problems.append(f"agent {name!r} may not use skill {skill!r}")
            elif self.skills is None or skill not in self.skills:
                problems.append(self._unavailable(skill))
        return problems

    def _output_problems(
        self, spec: TaskSpec, definition: SubagentDef, ctx: ToolContext
    ) -> list[str]:
        """A task's `output_mode` and `output_retries` need a schema to apply to (its own or
        its definition's), and the mode one its model can give."""
        if spec.output_schema is None and definition.output_spec is None:
            given = {"output_mode": spec.output_mode, "output_retries": spec.output_retries}
            why = f"the task has no output_schema, nor has its agent {definition.name!r}"
            return [f"{name}: {why}" for name, value in given.items() if value is not None]
        if spec.output_mode is None:
            return []
        try:
            model = self._model_for(definition, ctx)
        except ConfigError:
            return []  # the model's own problem, reported when the task runs
        refusal = unsupported_mode(model.name, spec.output_mode, output_modes_of(model))
        return [f"output_mode: {refusal}"] if refusal is not None else []

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
        budget: TokenBudget | None = None,
        output: StepOutput | None = None,
        compaction: CompactionStrategy | None = None,
        note: bool | None = None,
        questions: bool | None = None,
    ) -> Agent[Any, Any]:
        """The agent loop for one task: its definition's prompt, skills, tools and limits.

        `model` (a job step's own) goes before the definition's; `running` is the
        `context: fork` skill the task runs, if any; `budget` (a meter within the run's
        budget) replaces the run's. The rest is chosen by the one merge rule (`merged`,
        tasks/subagents.py) over the levels, most specific first: the job step's own
        (`model`, `output`, `compaction`, `note`, `questions`), the task's, its
        definition's, the run's."""
        definition = self.subagents.get(request.agent) or GENERAL_AGENT
        spec = request.spec
        task_output = None
        if spec.output_schema is not None:
            from ..agent.output import OutputSpec  # loaded by a task with an output type

            checked = ctx.state_of(ForkState).output_specs.get(spec.id)
            task_output = checked or OutputSpec.from_schema(spec.output_schema)
        chosen = merged(
            Choices(
                model=model,
                compaction=compaction,
                note=note,
                questions=questions,
                **(output.choices() if output is not None else {}),
            ),
            Choices(
                output=task_output,
                output_mode=spec.output_mode,
                output_retries=spec.output_retries,
            ),
            definition.choices(output=output is None and task_output is None),
            self.settings.choices(),
        )
        skills = self._skills_for(definition, request.spec)
        extensions: list[Any] = []
        forks = request.depth < self.settings.max_depth
        if forks:
            extensions.append(self.within(skills))
        limit = self._limit(definition, running, ctx.permissions)
        if limit is not None:
            extensions.append(limit)
        # The definition's own model is resolved only where it is the one chosen.
        model = chosen.model or self._model_for(definition, ctx)
        return Agent(
            model,
            self.shared_tools,
            system=definition.system,
            name=request.path,
            max_steps=chosen.max_steps or self.settings.default_max_steps,
            max_tokens=chosen.max_tokens,
            budget=budget or ctx.budget,
            trace=ctx.trace,
            permissions=ctx.permissions,
            extensions=extensions,
            skills=self._skills_extension(skills, definition, request.spec, running, limit, forks),
            depth=request.depth,
            counter=self.counter,
            max_output_tokens=output_cap(model) or self.settings.max_output_tokens,
            approve=ctx.approve if ctx.approve is not None else self.approve,
            answer=ctx.answer,
            on_input=ctx.on_input,
            questions=bool(chosen.questions),
            output_type=chosen.output,
            output_mode=chosen.output_mode,
            output_retries=_or_default(chosen.output_retries),
            compaction=chosen.compaction or self.settings.compaction,
            note=bool(chosen.note),
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
        forks: bool,
    ) -> SkillsExtension | None:
        """The task's skills: those named by its task and its definition start loaded. An
        agent that forks keeps the dispatcher: its tools array then begins as its parent's
        (the skill meta-tools, the dispatcher, the fork tools), and its first request reads
        what its parent's requests cached. Without the fork tools too little would match
        for a provider to serve it, so an agent that cannot fork is spared the dispatcher."""
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
            fail_on_skill_error=self.settings.fail_on_skill_error,
            keep_dispatcher=forks,
        )

    def _limit(
        self, definition: SubagentDef, running: SkillInfo | None, permissions: Permissions
    ) -> ToolLimit | None:
        """What the agent may call: its definition's `tools`, a forked skill's
        `allowed-tools` when it is a limit (`restrict`); None when neither limits anything.
        A forked skill's list that pre-approves does so as an active skill of the agent."""
        rules: list[ToolRule] = []
        if definition.tools is not None or definition.disallowed_tools:
            source = f"its sub-agent definition {definition.name!r} (tools)"
            rule = tool_rule(source, definition.tools, definition.disallowed_tools or None)
            rules += [rule] if rule is not None else []
        if (
            running is not None
            and running.allowed_tools is not None
            and allowed_tools_mode(running, permissions) == "restrict"
        ):
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
        return self.resolve(definition.model)

    def _report(self, title: str, results: Sequence[TaskResult], ctx: ToolContext) -> str:
        counts: dict[str, int] = {}
        for result in results:
            counts[result.status] = counts.get(result.status, 0) + 1
        summary = ", ".join(f"{n} {status}" for status, n in counts.items())
        spent = sum(r.usage.total_tokens for r in results)
        remaining = ctx.budget.remaining if ctx.budget else None
        left = "unlimited" if remaining is None else f"{remaining:,} tokens"
        lines = [
            f"{title}: {plural(len(results), 'task')} ({summary}). Tokens used: {spent:,}. "
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


def _or_default(retries: int | None) -> int:
    return DEFAULT_OUTPUT_RETRIES if retries is None else retries
