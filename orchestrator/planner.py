"""`Orchestrator`: a planner agent with the skill index, the skill meta-tools and `fork`.

    orch = Orchestrator(model="openai:gpt-4o-mini", skills=["my_skills/"],
                        subagents=["my_agents/"], max_tokens=200_000, max_parallel=8)
    result = orch.run_sync("goal")

Every agent of the tree (the planner, each sub-agent, nested forks) draws from one
`TokenBudget` and writes to one trace. `approve=` is the approval callback for calls the
permissions mark `ask` (orchestrator.agent.approval); every agent of the tree uses it.

An orchestrator, whether made from its arguments or from a job spec (`from_job`, which every
door uses), resolves what it was given once into a `RunRecipe`: the skill folders scanned
into a catalog, the sub-agent definitions read, the permissions made with the folders that
define the run kept read-only, the model aliases read, the limits and choices set. The
recipe is frozen, and the orchestrator takes every setting from it. It holds nothing that
lives only in one process, so it is also what crosses to another: a Ray worker makes the
run's orchestrator from the recipe alone (`Orchestrator.made_from`), without scanning
folders, reading the spec or checking the job again. A catalog crosses as what its scan
found, never as imported code (skills/catalog.py); a model given as a string or
`ModelSettings` is resolved again where it is used (a model object must pickle); the
process's variables are read where the orchestrator is made. What a person answers through
(`approve`, `answer`), where tasks run (the executor) and the open trace stay with the
orchestrator that was given them.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, Unpack

from .agent import (
    COMPACTION_STRATEGIES,
    DEFAULT_MAX_STEPS,
    DEFAULT_OUTPUT_RETRIES,
    AgentLoop,
    Answerer,
    Approver,
    CancelHandle,
    CompactionStrategy,
    OnInput,
    RunResult,
    RunSettings,
    TokenBudget,
    Tool,
    ToolContext,
    as_tool,
    run_sync,
)
from .errors import ConfigError
from .jobs import (
    Executor,
    Job,
    JobCancelled,
    JobResult,
    JobRunner,
    job_folders,
)
from .jobs.outputs import WorkspaceRecord
from .jobs.preflight import Preflight, job_catalog, job_registry, preflight
from .models import (
    ChatModel,
    ModelAliases,
    ModelRef,
    ModelSettings,
    PricedModel,
    ResolvedModels,
    TextSink,
    TextTap,
    output_cap,
    price_of,
)
from .models.prices import STANDARD_PRICES, Price, unpriced
from .parts import Slot
from .security import Permissions
from .security.permissions import UNCONFINED_WARNING
from .security.secrets import named_secrets, secrets_from_environment
from .skills import Agent, SkillCatalog, SkillsExtension
from .skills.allowed import standing_approvals
from .skills.catalog import FolderLike
from .skills.disclosure import (
    DEFAULT_DISCLOSURE,
    DEFAULT_EAGER_TOKENS,
    Disclosure,
    refused_code,
    warn_refused_code,
)
from .tasks import (
    ForkExtension,
    ForkSettings,
    RemoteSession,
    StepOutput,
    SubagentRegistry,
    TaskRequest,
    builtin_subagent_folders,
)
from .tasks.subagents import Choices, merged
from .trace import Listener, Trace, open_trace

if TYPE_CHECKING:
    from .agent.run_events import AgentRun
    from .jobs.resume import Resumption
    from .trace import AgentHistory

T = TypeVar("T")
DEFAULT_OUTPUT_TOKENS = 4096
PLANNER_PROMPT = """\
You are the planner. Reach the user's goal by the shortest sound path: do small things
yourself with the skills listed below (load a skill to get its instructions and tools), and
delegate parts that are independent or large to sub-agents with `fork`. Check what comes back,
then give the final answer: complete, and in the form the goal asks for."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunRecipe:
    """Everything a run of an orchestrator is made from, resolved and frozen (see the module's
    text): `Orchestrator.recipe`; `Orchestrator`'s arguments of the same names say what each
    is. `Orchestrator.made_from(recipe)` makes the orchestrator it describes. Frozen as a
    record: its catalog and registry are the orchestrator's own objects, not copies."""

    model: ChatModel | ModelRef
    """The planner's model as given: a model object, a string or `ModelSettings`."""
    tools: tuple[Tool, ...]
    catalog: SkillCatalog
    subagents: SubagentRegistry
    permissions: Permissions
    """The run's, with the folders that define it (skills, sub-agents, a job's spec and the
    files it names) kept read-only."""
    aliases: ModelAliases
    environ: Mapping[str, str] | None
    """Where models' keys and base URLs come from, when given (`environ=`); None: the
    variables of the process that makes the orchestrator, over a job's `.env` values
    (`environment()`). A process's variables are read in that process, never sent."""
    prices: Mapping[str, Price]
    """The caller's prices, over the standard table."""
    max_tokens: int | None
    max_cost: float | None
    max_steps: int
    max_parallel: int
    max_depth: int
    output_cap_tokens: int
    system: str
    disclosure: Disclosure
    eager_tokens: int
    on_background_answer: Literal["wait", "cancel"]
    fail_on_skill_error: bool
    compaction: CompactionStrategy
    note: bool
    questions: bool
    on_input: OnInput
    job: Job | None = None
    """The job it was resolved for (`Orchestrator.from_job`), checked before it was made."""
    user_skills: bool = False
    """The home folders were searched for skills and sub-agents too (`from_job`)."""

    def __post_init__(self) -> None:
        if self.compaction not in COMPACTION_STRATEGIES:
            raise ValueError(
                f"compaction must be one of {', '.join(COMPACTION_STRATEGIES)}, "
                f"got {self.compaction!r}"
            )

    def environment(self) -> dict[str, str]:
        """The variables this process's models read for this run (`environ`)."""
        if self.environ is not None:
            return dict(self.environ)
        if self.job is not None:
            return self.job.environment()
        return dict(os.environ)


class Orchestrator:
    """Runs goals with a planner over skills and sub-agents, under one token budget.

    `skills` and `subagents` are folders searched in order before the built-in ones (set
    `builtin=False` to leave the built-ins out). `max_tokens` is the budget of the whole tree.
    Models (the planner's, and those that sub-agent definitions name) are resolved with
    `aliases` (the built-in ones and the user's alias file by default) and `environ` (where
    keys and base URLs come from; the process environment by default).
    `tools` are the planner's own (functions marked `@tool`), beside its skills and `fork`;
    its sub-agents have them too, less what a definition's `tools:` leaves out.
    `approve` decides calls the permissions mark `ask`, and `answer` the agents' questions
    (`questions` gives them `ask_user`), while a person is there; without them `on_input`
    says what a run does: `wait` (it ends `input_required`, resumed with the answers),
    `deny` or `fail` (docs/waiting.md).
    `executor` is where tasks run: here (None, the default) or a `RayExecutor` (docs/ray.md).
    `disclosure` is how every agent's skills' tools reach the model: `progressive` (loaded on
    demand), `eager` (all in the tools array from the first request) or `auto` (eager while
    their schemas fit in `eager_tokens`); see docs/skills.md.
    `fail_on_skill_error`: a skill whose code fails to load (its `tools.py` does not import,
    an MCP server does not start) ends the agent that loaded it as `error`, instead of a
    warning and an error observation the model reads.
    `on_background_answer`: what becomes of background tasks (`fork(..., wait=false)`) still
    running when their agent answers: `wait` for them and let it answer again with their
    results, or `cancel` them (docs/background.md).
    `compaction` is how every agent compacts its conversation to fit its model's window
    (`mask` or `summarize`), and `note` gives every agent the `note` tool (its working
    record); a sub-agent definition or a job step may choose otherwise
    (docs/context-window.md).
    """

    def __init__(
        self,
        model: ChatModel | ModelRef,
        *,
        tools: Iterable[Tool | Callable[..., object]] = (),
        skills: Sequence[FolderLike] | SkillCatalog = (),
        subagents: Sequence[str | Path] | SubagentRegistry = (),
        max_tokens: int | None = None,
        max_cost: float | None = None,
        prices: Mapping[str, Price] | None = None,
        max_steps: int = DEFAULT_MAX_STEPS,
        max_parallel: int = 4,
        max_depth: int = 2,
        output_cap_tokens: int = 1_000,
        permissions: Permissions | Mapping[str, Any] | None = None,
        trace: Trace | str | Path | None = None,
        system: str | None = None,
        builtin: bool = True,
        aliases: ModelAliases | None = None,
        environ: Mapping[str, str] | None = None,
        approve: Approver | None = None,
        executor: RemoteExecutor | None = None,
        disclosure: Disclosure = DEFAULT_DISCLOSURE,
        eager_tokens: int = DEFAULT_EAGER_TOKENS,
        on_background_answer: Literal["wait", "cancel"] = "wait",
        fail_on_skill_error: bool = False,
        compaction: CompactionStrategy = "mask",
        note: bool = False,
        questions: bool = False,
        on_input: OnInput = "wait",
        answer: Answerer | None = None,
    ) -> None:
        environment = dict(os.environ if environ is None else environ)
        catalog = _catalog(skills, builtin)
        registry = (
            subagents
            if isinstance(subagents, SubagentRegistry)
            else SubagentRegistry(folders=[*subagents, *builtin_subagent_folders(builtin)])
        )
        # The model must not rewrite what defines its own run: skills and sub-agents.
        defining = [*catalog.paths, *registry.folders]
        recipe = RunRecipe(
            model=model,
            tools=tuple(as_tool(t) for t in tools),
            catalog=catalog,
            subagents=registry,
            permissions=Permissions.coerce(permissions).protecting(defining),
            aliases=aliases or ModelAliases.standard(environ=environment),
            environ=None if environ is None else dict(environ),
            prices=dict(prices or {}),
            max_tokens=max_tokens,
            max_cost=max_cost,
            max_steps=max_steps,
            max_parallel=max_parallel,
            max_depth=max_depth,
            output_cap_tokens=output_cap_tokens,
            system=system or PLANNER_PROMPT,
            disclosure=disclosure,
            eager_tokens=eager_tokens,
            on_background_answer=on_background_answer,
            fail_on_skill_error=fail_on_skill_error,
            compaction=compaction,
            note=note,
            questions=questions,
            on_input=on_input,
        )
        self._set_up(recipe, approve=approve, answer=answer, executor=executor, trace=trace)

    def _set_up(
        self,
        recipe: RunRecipe,
        *,
        approve: Approver | None,
        answer: Answerer | None,
        executor: RemoteExecutor | None,
        trace: Trace | str | Path | None,
    ) -> None:
        """Every setting from `recipe`; what stays in this process beside it."""
        self.recipe = recipe
        """What this orchestrator was made from, resolved (`RunRecipe`): what a
        Ray worker makes it again from."""
        self.executor = executor
        self.tools = list(recipe.tools)
        self.checked: Preflight | None = None
        """What `from_job` found checking that job: its warnings are among `warnings`."""
        self.environ = recipe.environment()
        self.prices = STANDARD_PRICES.over(recipe.prices)
        self.max_cost = recipe.max_cost
        self.aliases = recipe.aliases
        self._models = ResolvedModels.priced(
            self.prices,
            aliases=self.aliases,
            environ=self.environ,
            capped=recipe.max_cost is not None,
        )
        model = recipe.model
        self.model: ChatModel = (
            self._price_given(model) if isinstance(model, ChatModel) else self._models.get(model)
        )
        self.approve = approve
        self.on_input: OnInput = recipe.on_input
        self.answer = answer
        self.catalog = recipe.catalog
        self.subagents = recipe.subagents
        self.max_tokens = recipe.max_tokens
        self.max_steps = recipe.max_steps
        self.permissions = recipe.permissions
        warn_refused_code(self.catalog, self.permissions)
        self.trace = trace
        self.system = recipe.system
        self.disclosure: Disclosure = recipe.disclosure
        self.eager_tokens = recipe.eager_tokens
        self.fail_on_skill_error = recipe.fail_on_skill_error
        self.fork = ForkExtension(
            self.subagents,
            skills=self.catalog,
            tools=self.tools,  # the planner's own reach its sub-agents, as its skills do
            settings=ForkSettings(
                max_parallel=recipe.max_parallel,
                max_depth=recipe.max_depth,
                output_cap_tokens=recipe.output_cap_tokens,
                default_max_steps=recipe.max_steps,
                disclosure=recipe.disclosure,
                eager_tokens=recipe.eager_tokens,
                on_answer=recipe.on_background_answer,
                fail_on_skill_error=recipe.fail_on_skill_error,
                compaction=recipe.compaction,
                note=recipe.note,
                questions=recipe.questions,
            ),
            resolve=self.resolve,
            approve=approve,
        )

    @property
    def job(self) -> Job | None:
        """The job this orchestrator was made for (`from_job`): what `run_job()` runs."""
        return self.recipe.job

    @property
    def user_skills(self) -> bool:
        """The home folders were searched for skills and sub-agents too (`from_job`)."""
        return self.recipe.user_skills

    @classmethod
    def made_from(
        cls,
        recipe: RunRecipe,
        *,
        approve: Approver | None = None,
        answer: Answerer | None = None,
        executor: RemoteExecutor | None = None,
        trace: Trace | str | Path | None = None,
    ) -> Orchestrator:
        """The orchestrator `recipe` describes, with what stays in this process given again
        (a Ray worker makes the run's this way: no folder scanned, no check made again)."""
        orchestrator = cls.__new__(cls)
        orchestrator._set_up(recipe, approve=approve, answer=answer, executor=executor, trace=trace)
        return orchestrator

    @classmethod
    def from_job(cls, job: Job, *, user_skills: bool = False, **overrides: Any) -> Orchestrator:
        """An orchestrator set up as the job spec says (keyword arguments override it), or
        `SpecError` if the job would certainly fail (jobs/preflight.py): every way of running
        a job builds its orchestrator here, so every one refuses the same jobs, in the same
        words, before anything runs. `warnings` then holds what only might go wrong.

        A spec without `skills:` (`subagents:`) searches its folder's `skills/`,
        `.claude/skills/`, `.agents/skills/` (`subagents/`, `.claude/agents/`,
        `.codex/agents/`); `user_skills` adds the home folders (orchestrator.skills.discovery).
        """
        folders = job_folders(job, user=user_skills)
        settings: dict[str, Any] = {
            "aliases": ModelAliases.standard(job.models),
            "environ": job.environment(),
            "skills": folders.skills,
            "subagents": job_registry(job, folders.subagents),
            "max_tokens": job.budget.max_tokens,
            "max_cost": job.budget.max_cost_usd,
            "prices": job.price_overrides(),
            "max_steps": job.budget.max_steps,
            "max_parallel": job.budget.max_parallel,
            "trace": job.trace,
            "executor": executor_for(job),
            "disclosure": job.disclosure,
            "fail_on_skill_error": job.fail_on_skill_error,
            "compaction": job.compaction,
            "note": job.note,
            "questions": job.questions,
            "on_input": job.on_input,
        }
        settings.update(overrides)
        builtin = bool(settings.get("builtin", True))
        skills = settings["skills"]
        if not isinstance(skills, SkillCatalog):  # a catalog given whole is used as it is
            skills = settings["skills"] = job_catalog(job, skills, builtin=builtin)
        subagents = settings["subagents"]
        if not isinstance(subagents, SubagentRegistry):
            subagents = settings["subagents"] = SubagentRegistry(
                folders=[*subagents, *builtin_subagent_folders(builtin)]
            )
        # What the spec names and the folders it searches stay read-only, whatever
        # permissions are given.
        given = Permissions.coerce(overrides.get("permissions", job.permissions))
        settings["permissions"] = given.protecting([*job.named_files(), *folders.protected])
        checked = preflight(job, subagents, skills, settings["aliases"], settings["permissions"])
        checked.refuse(job)
        orchestrator = cls(settings.pop("model", job.model), **settings)
        given_environ: Mapping[str, str] | None = overrides.get("environ")
        # The environment it was made with is the job's (`.env` values under this process's
        # variables): read again where it is made again, never carried, unless given.
        orchestrator.recipe = replace(
            orchestrator.recipe,
            job=job,
            user_skills=user_skills,
            environ=None if given_environ is None else dict(given_environ),
        )
        orchestrator.checked = checked
        for step in job.plan:  # a step's model that cannot be resolved stops the job early
            orchestrator.resolve(step.model)
        return orchestrator

    def model_key(self, model: ChatModel | None) -> str | None:
        """The settings (JSON) this resolved `model` from; None for its own (or unknown)."""
        return self._models.key_of(model)

    def preflight(self, job: Job) -> Preflight:
        """What would certainly fail if `job` ran with this orchestrator (jobs/preflight.py):
        the check `from_job` made, or, for another job, the same check made now."""
        if job is self.job and self.checked is not None:
            return self.checked
        return preflight(job, self.subagents, self.catalog, self.aliases, self.permissions)

    def resolve(self, model: ChatModel | ModelRef | None) -> ChatModel:
        """A model for this run: None is the run's own; the same settings give the same one."""
        if model is None:
            return self.model
        return self._models.get(model)

    def _price_given(self, model: ChatModel) -> ChatModel:
        """A model the caller passed in: priced by the run's table through a wrapper, so the
        caller's object is left as it was (another run may share it at other prices)."""
        price = self._checked_price(model)
        if price is None or price == price_of(model):
            return model
        return PricedModel(model, price)

    def _checked_price(self, model: ChatModel) -> Price | None:
        price = price_of(model, self.prices)
        if price is None and self.max_cost is not None:
            raise unpriced(model.name)
        return price

    def secrets(self) -> list[str]:
        """Values to mask in traces: secret-looking variables of this run's environment
        (`.env` files included), every key a model names with `api_key_env` and the values of
        its `headers`, and the token every remote agent names with `token_env`."""
        models = [settings for settings in self._model_settings() if settings is not None]
        names = [settings.api_key_env for settings in models]
        names += [d.remote.token_env for d in self.subagents if d.remote is not None]
        headers = [str(v) for s in models for v in dict(s.options().get("headers") or {}).values()]
        return [
            *secrets_from_environment(self.environ),
            *named_secrets(names, self.environ, headers),
        ]

    def _model_settings(self) -> list[ModelSettings | None]:
        found: list[ModelSettings | None] = [*self._models.settings()]
        return found + [definition.model for definition in self.subagents]

    @property
    def warnings(self) -> list[str]:
        """Problems found while loading skills and sub-agents, the skills the planner's index
        leaves out by its cap, and skills whose code this run will not import (their folder
        is inside the workspace), commands that run unconfined (sandbox backend none),
        what skills' `allowed-tools` will pre-approve in a run that asks a person, and what
        skills ask of the sandbox that the run does not grant (`SandboxNeeds`, skills/skill.py)."""
        found = [str(w) for w in self.catalog.warnings]
        listing = self.catalog.index_listing()  # the planner's index, at its default cap
        note = listing.left_out_note() if listing is not None else None
        found += [note] if note else []
        found += [str(w) for w in self.subagents.warnings] + self._code_warnings()
        if self.permissions.allows_commands() and self.permissions.sandbox.backend == "none":
            found.append(UNCONFINED_WARNING)
        found += standing_approvals(self.catalog, self.permissions)
        if self.permissions.allows_commands():
            found += [
                f"skill {info.name!r} asks for {refused}, which this run does not grant "
                "(its scripts may fail for want of it)"
                for info in self.catalog
                for refused in info.needs.refused_by(self.permissions)
            ]
        return found + (self.checked.warnings if self.checked is not None else [])

    def sandbox(self) -> str | None:
        """Where this orchestrator's commands run (`bubblewrap (...)`, `container`, `none`),
        as a run records it in `run_start`; None where its permissions allow no command.
        SandboxUnavailable when its sandbox cannot run here."""
        if not self.permissions.allows_commands():
            return None
        from .security.sandbox import sandbox_at_start  # loaded where commands run

        return sandbox_at_start(self.permissions)

    def _code_warnings(self) -> list[str]:
        return refused_code(self.catalog, self.permissions)

    def new_budget(self) -> TokenBudget:
        """A budget for one run of the whole tree: this orchestrator's token and money caps."""
        return TokenBudget(self.max_tokens, max_cost=self.max_cost)

    def planner(
        self,
        *,
        name: str = "planner",
        budget: TokenBudget | None = None,
        trace: Trace | None = None,
        model: ChatModel | None = None,
        permissions: Permissions | None = None,
        output: StepOutput | None = None,
        compaction: CompactionStrategy | None = None,
        note: bool | None = None,
        questions: bool | None = None,
        forks: ForkExtension | None = None,
    ) -> Agent[Any, Any]:
        """The planner agent, ready to run (a job's planner steps use this too, some with a
        model of their own); `permissions` are the run's (this orchestrator's, by default);
        `output`: what its answer must be (a step's `output_schema`); `compaction` and
        `note`: a step's own, over this orchestrator's; `forks`: the run's own view of the
        fork extension (`ForkExtension.sending`), this orchestrator's by default."""
        settings = self.fork.settings
        forks = forks or self.fork
        extensions = [forks] if settings.max_depth > 0 else []
        model = model or self.model
        chosen = merged(
            Choices(
                compaction=compaction,
                note=note,
                questions=questions,
                **(output.choices() if output else {}),
            ),
            settings.choices(),
        )
        return Agent(
            model,
            self.tools,
            system=self.system,
            name=name,
            max_steps=self.max_steps,
            budget=budget if budget is not None else self.new_budget(),
            trace=trace,
            permissions=permissions or self.permissions,
            skills=SkillsExtension(
                self.catalog,
                disclosure=self.disclosure,
                eager_tokens=self.eager_tokens,
                fail_on_skill_error=self.fail_on_skill_error,
            ),
            extensions=extensions,
            max_output_tokens=output_cap(model) or DEFAULT_OUTPUT_TOKENS,
            approve=self.approve,
            answer=self.answer,
            on_input=self.on_input,
            questions=bool(chosen.questions),
            output_type=chosen.output,
            output_mode=chosen.output_mode,
            output_retries=DEFAULT_OUTPUT_RETRIES
            if chosen.output_retries is None
            else chosen.output_retries,
            compaction=chosen.compaction or settings.compaction,
            note=bool(chosen.note),
        )

    def run(
        self,
        goal: str,
        *,
        stream: TextSink | None = None,
        **settings: Unpack[RunSettings[Any]],
    ) -> Coroutine[Any, Any, RunResult]:
        """Run the planner on `goal` until it answers or a limit stops it (a job runs with
        `run_job`): `await orchestrator.run(goal)`. The settings are those of every agent's
        run (`RunSettings`: deps, trace, permissions, max_tokens, max_cost, time_limit,
        history, cancel), this run's only; `deps`, the caller's own object, reaches every tool
        of the run as `ctx.deps`: the planner's, its sub-agents' at any depth, their skills'.
        `stream` is shown the planner's text as the model writes it. With an executor, the
        run's permissions and caps are the orchestrator's (its workers are built from it)."""
        return self._run(goal, stream, settings)

    async def _run(
        self, goal: str, stream: TextSink | None, settings: RunSettings[Any]
    ) -> RunResult:
        self._check_run(settings)
        self._keep_protected(settings)
        opened, owned = self._open_trace(settings.pop("trace", None))
        model = TextTap(self.model, stream, "planner") if stream is not None else None
        try:
            # A trace opened to resume: where the planner was.
            history = settings.pop("history", None) or opened.history("planner")
            if self.executor is None:  # the planner keeps its trace read-only to itself
                planner = self.planner(trace=opened, model=model)
                own = RunSettings[Any](**settings)
                own["trace"], own["history"] = opened, history
                return await planner.run(goal, **own)
            return await self.executor.run_goal(self, goal, opened, model, history, settings)
        finally:
            if owned:
                opened.close()

    def run_sync(
        self,
        goal: str,
        *,
        stream: TextSink | None = None,
        **settings: Unpack[RunSettings[Any]],
    ) -> RunResult:
        """`run` from synchronous code, with the same settings."""
        return run_sync(self.run(goal, stream=stream, **settings))

    @asynccontextmanager
    async def iter(
        self, goal: str, **settings: Unpack[RunSettings[Any]]
    ) -> AsyncIterator[AgentRun[Any]]:
        """The planner's run on `goal` as typed events, every agent of its tree included, and
        its result at the end (`AgentLoop.iter`), with `run`'s settings:

            async with orchestrator.iter(goal, deps=shop) as run:
                async for event in run:
                    ...
            result = run.result

        It runs the planner here: with an executor, use `run`."""
        if self.executor is not None:
            raise ConfigError(
                "iter runs the planner in this process; with an executor "
                f"({type(self.executor).__name__}), run the goal with run()"
            )
        self._check_run(settings)
        self._keep_protected(settings)
        opened, owned = self._open_trace(settings.pop("trace", None))
        try:
            history = settings.pop("history", None) or opened.history("planner")
            planner = self.planner(trace=opened)
            own = RunSettings[Any](**settings)
            own["trace"], own["history"] = opened, history
            async with planner.iter(goal, **own) as run:
                yield run
        finally:
            if owned:
                opened.close()

    async def run_job(
        self,
        job: Job | None = None,
        *,
        trace: Trace | str | Path | None = None,
        stream: TextSink | None = None,
        budget: TokenBudget | None = None,
        deps: object = None,
        cancel: CancelHandle | None = None,
    ) -> JobResult:
        """Run a job's steps (or its goal) with this orchestrator's model, skills and budget
        (or `budget`, shared with other jobs): `job`, or the one this orchestrator was made
        from (`from_job`). `stream` is shown the output step's text as the model writes it;
        `deps` reaches every tool of every step (`ctx.deps`); `cancel`'s `cancel()` ends the
        job `cancelled` and it returns its result (cancelling the awaiting task raises
        `JobCancelled`, which carries it). The module's `run_job(job)` makes the orchestrator
        from the spec and calls this."""
        job = job or self.job
        if job is None:
            raise ValueError("run_job() needs a job, or an orchestrator made with from_job(job)")
        self._check_deps(deps)
        opened, owned = self._open_trace(trace)
        try:
            runner = self.job_runner(job, opened, stream=stream, budget=budget, deps=deps)
            if cancel is None:
                return await runner.run()
            return await _until_cancelled(runner.run(), cancel)
        finally:
            if owned:
                opened.close()

    def run_job_sync(
        self,
        job: Job | None = None,
        *,
        trace: Trace | str | Path | None = None,
        stream: TextSink | None = None,
        budget: TokenBudget | None = None,
        deps: object = None,
        cancel: CancelHandle | None = None,
    ) -> JobResult:
        """`run_job` from synchronous code."""
        return run_sync(
            self.run_job(job, trace=trace, stream=stream, budget=budget, deps=deps, cancel=cancel)
        )

    @classmethod
    def for_resume(
        cls,
        resumption: Resumption,
        *,
        approve: Approver | None = None,
        answer: Answerer | None = None,
        **overrides: Any,
    ) -> tuple[Orchestrator, Job]:
        """The orchestrator of a run to resume, set up as its job spec says (keyword
        arguments override it, as for `from_job`: a door that ran it with more protected
        paths gives them again), and the job."""
        if resumption.job is None:
            raise ValueError("the run had finished: there is nothing to resume")
        orchestrator = cls.from_job(
            resumption.job,
            user_skills=resumption.user_skills,
            approve=approve,
            answer=answer,
            **overrides,
        )
        from .jobs.resume import fast_forward  # resuming is loaded by a run that resumes

        fast_forward(orchestrator.model, resumption.checkpoint)
        return orchestrator, resumption.job

    @classmethod
    async def resume(
        cls,
        trace: str | Path,
        *,
        model: str | None = None,
        model_options: Mapping[str, Any] | None = None,
        force: bool = False,
        user_skills: bool = False,
        retry_failed: bool = False,
        answers: Mapping[str, Any] | None = None,
        listeners: Sequence[Listener] = (),
        approve: Approver | None = None,
        stream: TextSink | None = None,
        cancel: CancelHandle | None = None,
    ) -> JobResult:
        """Go on with the job run recorded in `trace`, appending to it (docs/resume.md).
        `answers` answer what a run that ended `input_required` waits for, by request id
        (`JobResult.waiting`; docs/waiting.md): each waiting call gets its answer.
        `retry_failed`: run again the steps and forked tasks that ended failed, and what
        depends on them, a finished run's included.

        Steps and forked tasks that had ended keep their results; those that were running
        restart from their last complete turn; the budget goes on from what was spent. A run
        that had finished is not run again: its recorded result is returned. The spec and
        inputs are the run's; the model and permissions are the spec's (`model` overrides the
        model, `model_options` its settings), and a run made with others is refused, as is a
        spec that changed since (`ResumeError`), unless `force`. `user_skills`, `approve`,
        `stream` and `cancel` are those of `from_job`, `Orchestrator` and `run_job`.
        """
        from .jobs.resume import prepare_resume

        resumption = prepare_resume(
            trace,
            model=model,
            model_options=model_options,
            force=force,
            user_skills=user_skills,
            retry_failed=retry_failed,
            answers=answers,
        )
        if resumption.finished is not None:
            return resumption.finished
        orchestrator, job = cls.for_resume(resumption, approve=approve)
        with Trace(
            resumption.path,
            resume=resumption.checkpoint,
            listeners=listeners,
            secrets=orchestrator.secrets(),
        ) as opened:
            return await orchestrator.run_job(job, trace=opened, stream=stream, cancel=cancel)

    @classmethod
    def resume_sync(
        cls,
        trace: str | Path,
        *,
        model: str | None = None,
        model_options: Mapping[str, Any] | None = None,
        force: bool = False,
        user_skills: bool = False,
        retry_failed: bool = False,
        answers: Mapping[str, Any] | None = None,
        listeners: Sequence[Listener] = (),
        approve: Approver | None = None,
        stream: TextSink | None = None,
        cancel: CancelHandle | None = None,
    ) -> JobResult:
        """`resume` from synchronous code."""
        return run_sync(
            cls.resume(
                trace,
                model=model,
                model_options=model_options,
                force=force,
                user_skills=user_skills,
                retry_failed=retry_failed,
                answers=answers,
                listeners=listeners,
                approve=approve,
                stream=stream,
                cancel=cancel,
            )
        )

    def job_runner(
        self,
        job: Job,
        trace: Trace,
        *,
        stream: TextSink | None = None,
        budget: TokenBudget | None = None,
        deps: object = None,
    ) -> JobRunner:
        """One run of `job`, ready to be awaited (`JobRunner.run`) on the opened `trace` (the
        caller closes it): its steps run with this orchestrator's agents, here or on its
        executor, with the run's permissions (the trace read-only to its agents), its
        workspace record and the caller's `deps`. `run_job` opens the trace, makes one and
        awaits it. A job with problems (`preflight`) is refused with its `SpecError`."""
        self._check_deps(deps)
        self.preflight(job).refuse(job)
        permissions = self._run_permissions(trace)
        workspace = WorkspaceRecord.start(job, permissions, trace.path)
        run_permissions = workspace.permissions(permissions)
        executor = self.executor
        return JobRunner(
            job,
            trace,
            build=lambda request, context: self.step_agent(job, request, context, stream),
            context=lambda step_budget: self.step_context(
                step_budget, trace, run_permissions, deps
            ),
            budget=budget if budget is not None else self.new_budget(),
            shared_budget=budget is not None,
            remote=None if executor is None else lambda b: executor.open_job(self, job, b, trace),
            user_skills=self.user_skills,
            servers=self.catalog.has_servers,
            workspace=workspace,
            subagents=self.subagents,
        )

    def step_context(
        self,
        budget: TokenBudget,
        trace: Trace,
        permissions: Permissions | None = None,
        deps: object = None,
    ) -> ToolContext[Any]:
        """The context a job's steps are forked from: the run's permissions (this
        orchestrator's, by default), budget, trace and the caller's `deps`."""
        return ToolContext[Any](
            agent="job",
            permissions=permissions or self.permissions,
            budget=budget,
            trace=trace,
            model=self.model,
            answer=self.answer,
            on_input=self.on_input,
            deps=deps,
        )

    def step_agent(
        self,
        job: Job,
        request: TaskRequest,
        context: ToolContext,
        stream: TextSink | None = None,
    ) -> AgentLoop[Any, Any]:
        """The agent of one job step: the planner, or its sub-agent, on its own model if it
        has one (here or on a Ray worker, which builds it the same way)."""
        step = job.step(request.spec.id)
        spec = job.output_spec(step.id)
        output = StepOutput(spec, step.output_mode, step.output_retries) if spec else None
        model = self.resolve(step.model) if step.model is not None else None
        if stream is not None and step.id == job.output_step:
            model = TextTap(model or self.model, stream, request.path)
        if request.agent == "planner":
            return self.planner(
                name=request.path,
                budget=context.budget,
                trace=context.trace,
                model=model,
                permissions=context.permissions,
                output=output,
                compaction=step.compaction,
                note=step.note,
                questions=step.questions,
            )
        return self.fork.build_agent(
            request,
            context,
            model,
            output=output,
            compaction=step.compaction,
            note=step.note,
            questions=step.questions,
        )

    def _check_deps(self, deps: object) -> None:
        """`deps` are objects of this process: a run whose tasks go to another refuses them."""
        if deps is not None and self.executor is not None:
            raise ConfigError(
                "deps are objects of this process and cannot reach tasks run on an executor "
                f"({type(self.executor).__name__}); run without an executor to use them"
            )

    def _keep_protected(self, settings: RunSettings[Any]) -> None:
        """A run's own permissions keep read-only what this orchestrator's keep (its skill
        and sub-agent folders, its job's spec and named files): a run may narrow, never
        open what defines it to the model."""
        given = settings.get("permissions")
        if given is not None:
            settings["permissions"] = Permissions.coerce(given).protecting(
                self.permissions.read_only
            )

    def _check_run(self, settings: RunSettings[Any]) -> None:
        """A run's settings that its executor cannot carry are refused, never dropped: deps
        (objects of this process), and permissions, caps and `on_input`, which its workers
        take from the orchestrator they are built from."""
        self._check_deps(settings.get("deps"))
        if self.executor is None:
            return
        given = [
            k for k in ("permissions", "max_tokens", "max_cost", "on_input") if settings.get(k)
        ]
        if given:
            raise ConfigError(
                f"a run's own {', '.join(given)} cannot reach the tasks an executor "
                f"({type(self.executor).__name__}) runs: set them on the Orchestrator"
            )

    def _open_trace(self, trace: Trace | str | Path | None) -> tuple[Trace, bool]:
        """The run's trace (its own, else this orchestrator's), masking this run's secrets
        when it opens one."""
        return open_trace(trace, default=self.trace, secrets=self.secrets())

    def _run_permissions(self, trace: Trace) -> Permissions:
        """One run's permissions: this orchestrator's, with the run's trace read-only to its
        agents like its skills and sub-agents (the orchestrator keeps nothing of the run)."""
        if trace.path is None:
            return self.permissions
        return self.permissions.protecting([trace.path])


class RemoteExecutor(Protocol):
    """Where a run's tasks go when they do not run here: a cluster
    (`orchestrator.ray.RayExecutor`), or an executor of your own with these methods."""

    async def run_goal(
        self,
        orchestrator: Orchestrator,
        goal: str,
        trace: Trace,
        model: ChatModel | None,
        history: AgentHistory | None,
        settings: RunSettings[Any],
    ) -> RunResult:
        """Run the planner on `goal` (on from `history`, its cut-off run's, when resumed),
        with the run's own settings (`time_limit`, `cancel`)."""
        ...

    def open_job(
        self, orchestrator: Orchestrator, job: Job, budget: TokenBudget, trace: Trace
    ) -> RemoteSession: ...

    def shared_budget(self, budget: TokenBudget) -> TokenBudget: ...


EXECUTORS: Slot[Callable[[Executor], RemoteExecutor]] = Slot("executor", "orchestrator.executors")
"""Executors by the name a spec gives them (`executor: ray`): the optional parts declare
theirs (orchestrator/parts.py)."""


def executor_for(job: Job) -> RemoteExecutor | None:
    """The executor a job spec asks for: None (here), or the one its `executor:` names (Ray,
    an optional part: without the `[ray]` extra this is a ConfigError)."""
    spec = job.executor
    if spec.type == "local":
        return None
    return EXECUTORS.get(spec.type)(spec)


def run_job(
    job: Job,
    *,
    trace: Trace | str | Path | None = None,
    stream: TextSink | None = None,
    user_skills: bool = False,
    deps: object = None,
    cancel: CancelHandle | None = None,
) -> Coroutine[Any, Any, JobResult]:
    """Run a job as its spec says: `Orchestrator.from_job(job, user_skills=...).run_job()`;
    `deps` reaches every tool of the run (`ctx.deps`), `cancel` ends it `cancelled`."""
    orchestrator = Orchestrator.from_job(job, user_skills=user_skills)
    return orchestrator.run_job(trace=trace, stream=stream, deps=deps, cancel=cancel)


def run_job_sync(
    job: Job,
    *,
    trace: Trace | str | Path | None = None,
    stream: TextSink | None = None,
    user_skills: bool = False,
    deps: object = None,
    cancel: CancelHandle | None = None,
) -> JobResult:
    """`run_job` from synchronous code."""
    running = run_job(
        job, trace=trace, stream=stream, user_skills=user_skills, deps=deps, cancel=cancel
    )
    return run_sync(running)


async def _until_cancelled(work: Coroutine[Any, Any, JobResult], cancel: CancelHandle) -> JobResult:
    """`work`'s result, or, once `cancel` is cancelled, the result the job ended with."""
    task = asyncio.ensure_future(work)
    loop = asyncio.get_running_loop()

    def stop() -> None:  # cancel() may come from another thread
        loop.call_soon_threadsafe(task.cancel)

    with cancel.watching(stop):
        try:
            return await task
        except JobCancelled as cancelled:
            if not cancel.cancelled:
                raise
            return cancelled.result


def _catalog(skills: Sequence[FolderLike] | SkillCatalog, builtin: bool) -> SkillCatalog:
    if isinstance(skills, SkillCatalog):
        return skills
    return SkillCatalog([*skills], include_builtin=builtin)
