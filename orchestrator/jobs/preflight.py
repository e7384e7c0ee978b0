"""What would certainly fail once a job runs, found before anything starts.

The spec's own checks (`spec.check_job`) see the file; these see what it points at: the
workspace folder, the skills its steps start with (they must exist, and their code must load:
a problem under `fail_on_skill_error`, a warning otherwise), and the sub-agent definitions its
steps name (their model must be one that can be built, their `skills:` must name skills that
exist). Definitions only a planner might fork are reported as warnings: a run that never
forks them is not hurt by them.

This is the check of the one entry: `Orchestrator.from_job`, which every door builds its run
with (`run`, `resume`, the Python API, `run-batch`, `serve`, `eval`), refuses a job with
problems by raising them as one `SpecError`, and `orchestrator validate` reports the same
problems in the same words without building a model (`preflight_job`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ConfigError, Problem, SpecError
from ..models import (
    ModelAliases,
    ModelRef,
    ModelSettings,
    OutputMode,
    check_model,
    output_modes_for,
    unsupported_mode,
)
from ..models.prices import STANDARD_PRICES, PriceTable
from ..security import Permissions
from ..security.inventory import is_default_workspace
from ..skills import SkillCatalog
from ..skills.disclosure import untrusted_code
from ..skills.discovery import SkillFolder
from ..skills.skill import SkillError
from ..tasks import SubagentDef, SubagentRegistry, builtin_subagent_folders, suggest
from .loading import job_folders
from .spec import FILE_MODELS, Job


@dataclass
class Preflight:
    """Problems that stop the job, and warnings about what only might be used."""

    problems: list[Problem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def refuse(self, job: Job) -> None:
        """Raise the problems found, if any, as the job's `SpecError`."""
        if self.problems:
            raise SpecError(job.source, self.problems, warnings=self.warnings)


def preflight(
    job: Job,
    registry: SubagentRegistry,
    catalog: SkillCatalog,
    aliases: ModelAliases,
    permissions: Permissions | None = None,
) -> Preflight:
    """Check the job's workspace, the skills its steps start with and the sub-agents it can
    run against what exists; `permissions` are the run's (the job's, by default)."""
    found = Preflight()
    skills = catalog.names
    permissions = permissions or job.permissions
    workspace = permissions.workspace
    made_on_first_run = not workspace.exists() and is_default_workspace(workspace)
    if not workspace.is_dir() and not made_on_first_run:
        found.problems.append(
            Problem("permissions.workspace", f"the folder {workspace} does not exist")
        )
    if permissions.allows_commands():
        from ..security.sandbox import sandbox_refusal  # loaded by a job that runs commands

        if (sandbox := sandbox_refusal(permissions)) is not None:
            found.problems.append(Problem("permissions.sandbox", sandbox))
    found.problems += _unpriced(job, [job.model, *(s.model for s in job.plan if s.model)])
    found.problems += _output_modes(job, registry, aliases)
    for index, step in enumerate(job.steps):
        for issue in _unknown_skills(step.skills or [], skills):
            found.problems.append(Problem(f"steps[{index}].skills", issue))
    _preloaded_code(job, catalog, permissions, found)
    named = {step.agent for step in job.plan if step.agent and not step.planner}
    for definition in registry:
        issues = _definition_issues(definition, skills, aliases)
        if definition.output_mode is not None:
            # Its model, else the job's: what a step (or the planner) that forks it runs on.
            model = definition.model or job.model
            issues += [
                f"output_mode: {m}" for m in _mode_issue(model, definition.output_mode, aliases)
            ]
        if definition.model is not None:
            issues += [p.message for p in _unpriced(job, [definition.model])]
        where = f"sub-agent {definition.name!r}" + (
            f" ({definition.path})" if definition.path else ""
        )
        if definition.name in named:
            found.problems += [Problem(where, issue) for issue in issues]
        else:
            found.warnings += [f"{where}: {issue} (it fails if it is forked)" for issue in issues]
    return found


def _output_modes(job: Job, registry: SubagentRegistry, aliases: ModelAliases) -> list[Problem]:
    """A step's (or the goal's) `output_mode` that its model cannot give: the step's own
    model, else its agent definition's, else the job's. An agent is built refusing it, so the
    run would fail only once the step starts."""
    problems = []
    for index, step in enumerate(job.plan):
        if step.output_mode is None:
            continue
        definition = registry.get(step.agent_name) if step.agent else None
        own = definition.model if definition is not None else None
        model = step.model or own or job.model
        where = "output_mode" if job.goal is not None else f"steps[{index}].output_mode"
        problems += [Problem(where, m) for m in _mode_issue(model, step.output_mode, aliases)]
    return problems


def _mode_issue(model: ModelRef, mode: OutputMode, aliases: ModelAliases) -> list[str]:
    """Why `model` cannot give `mode`, if it cannot (none when the model itself is wrong:
    that has its own problem)."""
    try:
        settings = check_model(model, aliases)
    except ConfigError:
        return []
    refusal = unsupported_mode(settings.name, mode, output_modes_for(settings))
    return [refusal] if refusal is not None else []


def _unpriced(job: Job, models: list[ModelSettings]) -> list[Problem]:
    """A money cap needs a price for every model the job may call: `run` refuses one
    without, so `validate` says so first."""
    if job.budget.max_cost_usd is None:
        return []
    table = STANDARD_PRICES.over(job.price_overrides())
    missing = dict.fromkeys(m.name for m in models if not _priced(m, table))
    return [
        Problem(
            "budget.max_cost_usd",
            f"the budget caps money, but model {name!r} has no price; give it one under "
            "prices: (US dollars per million tokens: input, output)",
        )
        for name in missing
    ]


def _priced(model: ModelSettings, table: PriceTable) -> bool:
    """Whether `model` has a price as the run would look it up: a scripted or replayed model
    goes by its provider's name (the model object is named `scripted`, `replay`)."""
    if table.get(model.name) is not None:
        return True
    return model.provider in FILE_MODELS and table.get(model.provider or "") is not None


def _preloaded_code(
    job: Job, catalog: SkillCatalog, permissions: Permissions, found: Preflight
) -> None:
    """Load the code of each skill a step starts with, as its run would: one that fails is
    a problem under `fail_on_skill_error` (the run would end there), else the catalog's own
    warning says it (`SkillCatalog.warnings`, which every door shows).
    The catalog keeps what it loaded, so the run that follows does not import it again; code
    the run would refuse to import (a folder inside the workspace) is not imported here
    either: the run's own warning says why."""
    for index, step in enumerate(job.steps):
        for name in step.skills or []:
            info = catalog.get(name)
            if info is None or untrusted_code(info, permissions) is not None:
                continue
            try:
                catalog.load(name)
            except SkillError as exc:
                if job.fail_on_skill_error:
                    message = (
                        f"skill {name!r} failed to load, and fail_on_skill_error is set: {exc}"
                    )
                    found.problems.append(Problem(f"steps[{index}].skills", message))


def job_catalog(job: Job, folders: Sequence[SkillFolder], *, builtin: bool = True) -> SkillCatalog:
    """The skills a run of `job` sees: the skill `folders` (its own, searched first), the
    built-in ones, and each of its `mcp_servers:` as a skill of its own."""
    catalog = SkillCatalog([*folders], include_builtin=builtin)
    if job.mcp_servers:
        catalog.add_servers(job.mcp_servers, job_base(job))
    return catalog


def job_registry(job: Job, folders: Sequence[Path]) -> SubagentRegistry:
    """The sub-agents a run of `job` sees: the spec's remote agents (`agents:`) first, then
    the definitions in `folders` and the built-in ones."""
    return SubagentRegistry(job.remote_agents(), folders=[*folders, *builtin_subagent_folders()])


def job_base(job: Job) -> Path:
    """Where the relative paths of `job`'s `mcp_servers:` start: the spec's folder."""
    return job.source.parent if job.source is not None else Path.cwd()


def preflight_job(job: Job, *, user_skills: bool = False) -> Preflight:
    """`preflight` with the skills, sub-agents and aliases the job's spec points at; no
    model is built, so no key is needed. The skills' warnings (their scan's, and a preloaded
    skill whose code failed to load) come first."""
    folders = job_folders(job, user=user_skills)
    registry = job_registry(job, folders.subagents)
    catalog = job_catalog(job, folders.skills)
    found = preflight(job, registry, catalog, ModelAliases.standard(job.models))
    found.warnings[:0] = [str(w) for w in (*catalog.warnings, *registry.warnings)]
    return found


def _definition_issues(
    definition: SubagentDef, skills: Collection[str], aliases: ModelAliases
) -> list[str]:
    issues = []
    if definition.model is not None:
        try:
            check_model(definition.model, aliases)
        except ConfigError as exc:
            issues.append(f"model: {exc}")
    if isinstance(definition.skills, list):
        issues += [f"skills: {issue}" for issue in _unknown_skills(definition.skills, skills)]
    return issues


def _unknown_skills(names: list[str], skills: Collection[str]) -> list[str]:
    """A problem for each of `names` that is no skill, with the close spellings."""
    return [
        f"{name!r} names no skill{suggest(name, skills)}" for name in names if name not in skills
    ]
