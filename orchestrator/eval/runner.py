"""Running an eval: every case of every variant, `repeat` times, `concurrency` at once, under
one budget, each run's line appended to a results file as it ends.

Each run loads the job as its variant changes it with its case's inputs, works in a copy of
the job's workspace (the case's `files` written into it first), and writes a trace of its own.
Its checks then read its output, its files and its trace. Running the same eval again with
the same results file skips the runs whose line says they finished (`done`), as `run-batch`
does, and says how many it skipped; a line counts only when what made it (`made_by`: the
checks, the case, the job, the variant, the mode) is what would make it now, else the run
is made again and the output says what changed.

Recorded runs: with `record`, each run's trace goes to that folder, beside a small JSON file
of what the run's messages may name that differs between machines (the eval's folder, the
run's workspace, the built-in skills) and the judge's verdicts. With `replay`, every model
the run would call is its recording (`ReplayModel`), the folders moved to where they are now;
the first request that departs from the recording ends the run as `diverged`, and its line
says where and how. The judge's recorded verdicts are used again, nothing is asked.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import shutil
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..agent import TokenBudget
from ..errors import ConfigError, SafetyWarning
from ..jobs import Job, JobResult, job_folders
from ..jobs.preflight import job_base, preflight
from ..jobs.templating import Template, TemplateError
from ..messages import Message, Usage
from ..models import (
    ChatModel,
    ModelAliases,
    ModelRef,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    ModelWrapper,
    ResolvedModels,
    priced_by,
)
from ..models.prices import STANDARD_PRICES
from ..models.replay import ReplayMismatch, ReplayModel
from ..planner import Orchestrator
from ..security import SecretMask, secrets_from_environment
from ..security.inputs import JsonInputError, json_lines, load_json
from ..security.inventory import reads, reads_no_configuration
from ..skills import SkillCatalog
from ..skills.discovery import builtin_skills_folder
from ..tasks import SubagentRegistry, builtin_subagent_folders
from ..trace import Trace
from .judge import Judge, Verdict, judged
from .loading import LoadedEval
from .probes import ProbeAnswer, ask, point, recorded_agents
from .python_checks import CheckSandbox
from .scoring import Grade, RunRecord, Score, score, triggered
from .spec import Case, Probe, Scorer, Variant

IGNORED_IN_COPIES = (".orchestrator", "__pycache__", ".git")
Line = dict[str, Any]


@dataclass
class EvalOptions:
    """How to run an eval (the command line's flags; each None keeps the eval file's)."""

    out: Path
    """Where the runs' traces, workspaces and (by default) the results go."""
    results: Path | None = None
    repeat: int | None = None
    concurrency: int | None = None
    variants: Sequence[str] = ()
    """Only the variants so named (all when empty)."""
    cases: Sequence[str] = ()
    """Only the cases with these ids (all when empty)."""
    model: str | None = None
    """Every variant's model (as `--model`), e.g. to run the eval against another endpoint."""
    max_tokens: int | None = None
    max_cost_usd: float | None = None
    record: Path | None = None
    replay: Path | None = None
    volatile_tools: Sequence[str] = ()
    """Tools whose results a replay takes as they come (beside the eval file's own)."""
    fresh: bool = False
    """Start over: the results file's earlier lines are removed first."""
    on_line: Callable[[Line], None] | None = None
    unconfined_checks: bool = False
    """Where no sandbox can run, run the eval's Python checks unconfined, as the user (with
    a SafetyWarning), instead of refusing the eval (python_checks.py)."""

    @property
    def results_file(self) -> Path:
        return self.results or self.out / "results.jsonl"


@dataclass(frozen=True)
class Planned:
    """One run to make: a variant, a case and the repeat's number (from 1)."""

    variant: Variant
    case: Case
    number: int

    @property
    def key(self) -> str:
        return f"{self.variant.title()}/{self.case.id}/{self.number}"

    @property
    def slug(self) -> Path:
        return Path(_safe(self.variant.title())) / f"{_safe(str(self.case.id))}-{self.number}"


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=+-]", "-", text)[:80]


MADE_BY = {
    "checks": "its checks changed",
    "case": "the case changed",
    "job": "the job changed",
    "variant": "the variant changed",
    "mode": "the mode changed",
}
"""What a result line's `made_by` holds (digests, and the mode), and how a change is said."""


@dataclass
class EvalProgress:
    """What an eval run did: the lines it wrote, what it skipped as done already, and the
    runs done earlier that it made again because what made them changed."""

    lines: list[Line] = field(default_factory=list)
    skipped: int = 0
    planned: list[Planned] = field(default_factory=list)
    changed: dict[str, list[str]] = field(default_factory=dict)
    """By run key: what changed since its earlier line (that line set aside, not counted)."""


class EvalRunner:
    """Runs a loaded eval as `options` say (`await runner.run()`)."""

    def __init__(self, loaded: LoadedEval, options: EvalOptions) -> None:
        self.loaded = loaded
        self.options = options
        spec = loaded.spec
        self.repeat = options.repeat or spec.repeat
        self.concurrency = (
            1 if spec.workspace == "shared" else options.concurrency or spec.concurrency
        )
        if self.repeat < 1 or self.concurrency < 1:
            raise ConfigError("--repeat and --concurrency must be at least 1")
        tokens = options.max_tokens or spec.budget.max_tokens
        cost = options.max_cost_usd or spec.budget.max_cost_usd
        self.budget = TokenBudget(tokens, max_cost=cost) if tokens or cost else None
        self.variants = self._chosen(loaded.variants, options.variants)
        self.cases = loaded.cases
        if options.cases:
            ids = [str(case.id) for case in loaded.cases]
            unknown = [c for c in options.cases if c not in ids]
            if unknown:
                raise ConfigError(
                    f"--case {', '.join(unknown)}: no such case; cases: {', '.join(ids)}"
                )
            self.cases = [case for case in loaded.cases if case.id in options.cases]
        self.volatile = sorted({*spec.volatile_tools, *options.volatile_tools})
        self.mask = SecretMask(secrets_from_environment(dict(os.environ)))
        self._checks_digest, self._job_digest = self._shared_digests()
        self.checks = CheckSandbox(
            loaded.python_checks.values(), unconfined=options.unconfined_checks
        )
        if self.checks.unconfined:
            warnings.warn(self.checks.describe(), SafetyWarning, stacklevel=3)
        self._judges: dict[str, Judge] = {}
        self._write_lock = asyncio.Lock()

    @staticmethod
    def _chosen(variants: list[Variant], names: Sequence[str]) -> list[Variant]:
        if not names:
            return variants
        titles = [v.title() for v in variants]
        unknown = [n for n in names if n not in titles]
        if unknown:
            raise ConfigError(
                f"--variant {', '.join(unknown)}: no such variant; variants: {', '.join(titles)}"
            )
        return [v for v in variants if v.title() in names]

    def plan(self) -> list[Planned]:
        return [
            Planned(variant, case, number)
            for variant in self.variants
            for case in self.cases
            for number in range(1, self.repeat + 1)
        ]

    def refuse_failing_jobs(self) -> None:
        """Before any case runs: the job as each variant changes it is checked as every run
        of a job is (jobs/preflight.py), and one that would certainly fail is refused with
        its `SpecError`, in the words `orchestrator run` uses."""
        if not self.cases:
            return
        model = self.options.model if self.options.replay is None else None
        for variant in self.variants:
            job = self.loaded.job_for(variant, self.cases[0], model=model)
            catalog, registry = self._skills_and_agents(job, variant)
            found = preflight(job, registry, catalog, ModelAliases.standard(job.models))
            found.refuse(job)

    async def run(self) -> EvalProgress:
        self.refuse_failing_jobs()
        results = self.options.results_file
        results.parent.mkdir(parents=True, exist_ok=True)
        if self.options.fresh and results.exists():
            results.unlink()
        last = last_lines(results)
        progress = EvalProgress(planned=self.plan())
        todo = []
        for planned in progress.planned:
            earlier = last.get(planned.key)
            if earlier is None or not earlier.get("done"):
                todo.append(planned)
            elif changes := changed(earlier.get("made_by"), self.made_by(planned)):
                progress.changed[planned.key] = changes
                todo.append(planned)
        progress.skipped = len(progress.planned) - len(todo)
        gate = asyncio.Semaphore(self.concurrency)

        async def one(planned: Planned) -> None:
            async with gate:
                line = await self.run_one(planned)
            async with self._write_lock:
                progress.lines.append(self._write(results, line))

        async with asyncio.TaskGroup() as group:
            for planned in todo:
                group.create_task(one(planned))
        return progress

    # --- What made a result ---------------------------------------------------------------

    def made_by(self, planned: Planned) -> dict[str, str]:
        """What a run's result answers to, stored in its line and compared on resume:
        digests of the eval's checks, the case, the job and the variant (with `--model`),
        and the mode (`plain`, `record DIR` or `replay DIR`)."""
        variant = {"variant": planned.variant.model_dump(mode="json"), "model": self.options.model}
        return {
            "checks": self._checks_digest,
            "case": _digest([planned.case.model_dump(mode="json"), _copied(planned.case)]),
            "job": self._job_digest,
            "variant": _digest(variant),
            "mode": self.mode,
        }

    @property
    def mode(self) -> str:
        if self.options.record is not None:
            return f"record {self.options.record.resolve()}"
        if self.options.replay is not None:
            volatile = f"; volatile {', '.join(self.volatile)}" if self.volatile else ""
            return f"replay {self.options.replay.resolve()}{volatile}"
        return "plain"

    @reads("eval")
    def _shared_digests(self) -> tuple[str, str]:
        """The digests of what every run answers to: the eval's checks (with the files of
        its Python checks and its workspace mode), and the job (its spec file's bytes, or
        the spec written in the eval file)."""
        spec = self.loaded.spec
        files: dict[str, str] = {}
        try:
            for reference, check in self.loaded.python_checks.items():
                if check.file is not None:
                    code = check.file.read_bytes()
                    files[reference.rpartition(":")[0]] = hashlib.sha256(code).hexdigest()
            job = (
                {"file": hashlib.sha256(spec.job.read_bytes()).hexdigest()}
                if isinstance(spec.job, Path)
                else spec.job
            )
        except OSError as exc:
            raise ConfigError(f"cannot read {exc.filename}: {exc.strerror}") from None
        scorers = [scorer.model_dump(mode="json") for scorer in spec.scorers]
        checks: dict[str, Any] = {"scorers": scorers, "files": files, "workspace": spec.workspace}
        if spec.until_triggered is not None:  # runs cut short are other runs
            checks["until_triggered"] = spec.until_triggered
        if spec.probes:
            checks["probes"] = [probe.model_dump(mode="json") for probe in spec.probes]
            checks["probe_model"] = spec.probe_model
        return _digest(checks), _digest(job)

    # --- One run ------------------------------------------------------------------------

    async def run_one(self, planned: Planned) -> Line:
        line: Line = {
            "variant": planned.variant.title(),
            "case": planned.case.id,
            "repeat": planned.number,
            "key": planned.key,
            "made_by": self.made_by(planned),
        }
        try:
            return {**line, **await self._run(planned)}
        except ConfigError as exc:
            return {**line, "status": "error", "done": False, "passed": False, "error": str(exc)}
        except Exception as exc:  # one run's failure is its line, never the whole eval's end
            error = f"{type(exc).__name__}: {exc}"
            return {**line, "status": "error", "done": False, "passed": False, "error": error}

    async def _run(self, planned: Planned) -> Line:
        variant, case = planned.variant, planned.case
        workspace_root = self.options.out / "work" / planned.slug
        sidecar = self._sidecar(planned)
        replay = self._replay_model(planned, sidecar, workspace_root)
        job = self.loaded.job_for(variant, case, model=None if replay else self.options.model)
        workspace = self._workspace(job, case, workspace_root)
        orchestrator = self._orchestrator(job, variant, workspace, replay)
        trace_path = self._trace_path(planned)
        budget = self.budget
        if budget is not None:
            budget = budget.scoped(orchestrator.max_tokens, orchestrator.max_cost)
        started = time.perf_counter()
        with Trace(trace_path, secrets=orchestrator.secrets()) as trace:
            result = await orchestrator.run_job(job, trace=trace, budget=budget)
        seconds = time.perf_counter() - started
        divergence = replay.divergence if replay is not None else None
        status = "diverged" if divergence else result.status
        record = RunRecord(
            variant=variant.title(),
            case=case,
            repeat=planned.number,
            status=status,
            output=result.output,
            data=result.data,
            workspace=workspace,
            seconds=seconds,
            usage=result.usage,
            cost=result.cost,
            trace=trace_path,
            task=_task(job, result),
        )
        record.read_trajectory()
        scores, verdicts = await self._scores(planned, record, job, sidecar)
        probes: Line | None = None
        answers: dict[str, ProbeAnswer] = {}
        if self.loaded.spec.probes:
            probes, answers = await self._probes(
                planned, record, job, orchestrator, sidecar, verdicts
            )
        if self.options.record is not None:
            self._write_sidecar(planned, workspace, job, verdicts, answers)
        passed = divergence is None and all(s.passed for s in scores)
        line: Line = {
            "status": status,
            "done": True,
            "passed": passed,
            "score": sum(s.score for s in scores) / len(scores) if scores else float(passed),
            "scores": [score_line(s) for s in scores],
            "output": result.output,
            "usage": result.usage.model_dump(),
            "cost": result.cost,
            "seconds": round(seconds, 3),
            "steps": record.steps,
            "compactions": record.compactions,
            "skills_loaded": sorted(set(record.skills_loaded)),
            "tools_called": sorted(set(record.tools_called)),
            "trace": str(trace_path),
            "workspace": str(workspace),
        }
        if divergence:
            line["divergence"] = divergence
        if divergence is None and (errors := step_errors(result)):  # a divergence is its own
            line["errored"] = True
            line["error"] = "; ".join(errors)
        if probes is not None:
            line["probes"] = probes
        if replay is not None and replay.replay.accepted:  # said, never silently taken
            line["volatile_results"] = replay.replay.accepted
        for check in self.loaded.scorers_for(case):
            if check.trigger is not None:  # what a trigger eval's summary counts
                line["trigger"] = {
                    "skill": check.trigger.skill,
                    "should": check.trigger.should_trigger,
                    "fired": triggered(record, check.trigger.skill),
                    "query": record.task,
                }
        if verdicts:  # the judge's spend, apart from the job's
            costs = [v.cost for v in verdicts.values() if v.cost is not None]
            line["judge"] = {
                "usage": sum((v.usage for v in verdicts.values()), Usage()).model_dump(),
                "cost": sum(costs) if costs else None,
            }
        return line

    def _workspace(self, job: Job, case: Case, root: Path) -> Path:
        """The run's workspace: a fresh copy of the job's (`copy`), or the job's (`shared`);
        the case's files are written into it."""
        source = job.permissions.workspace.resolve()
        if self.loaded.spec.workspace == "shared":
            target = source
        else:
            if root.exists():
                shutil.rmtree(root)
            out = self.options.out.resolve()
            ignored = shutil.ignore_patterns(*IGNORED_IN_COPIES)

            def ignore(folder: str, names: list[str]) -> set[str]:
                skipped = set(ignored(folder, names))
                return skipped | {n for n in names if (Path(folder) / n).resolve() == out}

            if source.is_dir():
                shutil.copytree(source, root, ignore=ignore, symlinks=True)
            else:
                root.mkdir(parents=True)
            target = root.resolve()
        for name, text in case.files.items():
            self._in_workspace(target, case, f"files.{name}").write_text(text, encoding="utf-8")
        for name, source_file in case.copies.items():
            shutil.copyfile(source_file, self._in_workspace(target, case, f"copies.{name}"))
        return target

    @staticmethod
    def _in_workspace(workspace: Path, case: Case, field: str) -> Path:
        path = (workspace / field.split(".", 1)[1]).resolve()
        if not path.is_relative_to(workspace):
            raise ConfigError(f"case {case.id!r}: {field} is outside the workspace")
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    @staticmethod
    def _skills_and_agents(job: Job, variant: Variant) -> tuple[SkillCatalog, SubagentRegistry]:
        """The skills and sub-agent definitions a run of `job` sees in `variant`: its added
        folders first, then the job's."""
        folders = job_folders(job)
        catalog = variant_catalog(job, variant)
        if job.mcp_servers:
            catalog.add_servers(job.mcp_servers, job_base(job))
        registry = SubagentRegistry(
            job.remote_agents(),
            folders=[*variant.subagents, *folders.subagents, *builtin_subagent_folders()],
        )
        return catalog, registry

    def _orchestrator(
        self, job: Job, variant: Variant, workspace: Path, replay: WatchedReplay | None
    ) -> Orchestrator:
        catalog, registry = self._skills_and_agents(job, variant)
        # What decides the eval's runs stays read-only to every run's model: the eval file, its
        # cases, the checks' code, the results (which runs are done), the recordings and traces.
        permissions = job.permissions.model_copy(update={"workspace": workspace}).protecting(
            self.defining()
        )
        overrides: dict[str, Any] = {
            "permissions": permissions,
            "skills": catalog,
            "subagents": registry,
        }
        skill = self.loaded.spec.until_triggered
        if skill is not None:
            inner = replay if replay is not None else job.resolve_model()
            return Replayed.from_job(job, model=UntilTriggered(inner, skill), **overrides)
        if replay is not None:
            return Replayed.from_job(job, model=replay, **overrides)
        return Orchestrator.from_job(job, **overrides)

    def defining(self) -> list[Path]:
        """The files and folders that decide this eval's runs."""
        spec = self.loaded.spec
        found = [self.loaded.source.resolve(), self.options.results_file.resolve()]
        found.append((self.options.out / "traces").resolve())
        if isinstance(spec.cases, Path):
            found.append(spec.cases)
        if isinstance(spec.job, Path):
            found.append(spec.job)
        found += [path for case in self.cases for path in case.copies.values()]
        found += [c.file for c in self.loaded.python_checks.values() if c.file is not None]
        found += [p.resolve() for p in (self.options.record, self.options.replay) if p]
        return found

    def _trace_path(self, planned: Planned) -> Path:
        folder = self.options.record or self.options.out / "traces"
        path = folder / planned.slug.with_suffix(".jsonl")
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            path.unlink()  # a run made again (an earlier attempt that did not finish)
        return path

    # --- Recording and replaying -----------------------------------------------------------

    @reads("eval")
    def _sidecar(self, planned: Planned) -> dict[str, Any]:
        if self.options.replay is None:
            return {}
        path = self.options.replay / planned.slug.with_suffix(".json")
        if not path.is_file():
            return {}
        try:
            value = load_json(path.read_bytes(), str(path))
        except (OSError, JsonInputError) as exc:
            raise ConfigError(f"cannot read the recording's {path}: {exc}") from None
        return value if isinstance(value, dict) else {}

    def _replay_model(
        self, planned: Planned, sidecar: dict[str, Any], workspace: Path
    ) -> WatchedReplay | None:
        if self.options.replay is None:
            return None
        recording = self.options.replay / planned.slug.with_suffix(".jsonl")
        if not recording.is_file():
            raise ConfigError(f"no recording of run {planned.key} at {recording}")
        recorded = sidecar.get("paths") or {}
        job = self.loaded.job_for(planned.variant, planned.case)
        now = self._paths(workspace.resolve(), job)
        paths = {str(recorded[k]): v for k, v in now.items() if recorded.get(k)}
        return WatchedReplay(ReplayModel(recording, paths=paths, volatile=self.volatile))

    def _paths(self, workspace: Path, job: Job) -> dict[str, str]:
        """The folders a run's messages may name that differ from one machine to another."""
        builtin = builtin_skills_folder()
        found = {
            "workspace": str(workspace),
            "eval": str(self.loaded.folder),
            "job": str(job.source.resolve().parent) if job.source is not None else "",
            # As the catalog shows it (not resolved: it may be a link into a checkout).
            "builtin_skills": str(builtin.absolute()) if builtin else "",
        }
        # The job's skill folders (a skill folder's own eval names the skill's), wherever
        # they lie: a loaded skill's observation names its folder.
        for number, folder in enumerate(job_folders(job).skills):
            found[f"skills/{number}"] = str(folder.path)
        return found

    def _write_sidecar(
        self,
        planned: Planned,
        workspace: Path,
        job: Job,
        verdicts: dict[str, Verdict],
        answers: dict[str, ProbeAnswer],
    ) -> None:
        if self.options.record is None:
            return
        path = self.options.record / planned.slug.with_suffix(".json")
        value = {
            "run": planned.key,
            "paths": self._paths(workspace, job),
            "judge": {
                name: {"score": v.score, "reason": v.reason, "usage": v.usage.model_dump()}
                for name, v in verdicts.items()
            },
        }
        if answers:
            value["probes"] = {
                name: {
                    "answer": a.text,
                    "at": a.at,
                    "error": a.error,
                    "usage": a.usage.model_dump(),
                }
                for name, a in answers.items()
            }
        # Masked as result lines are: a probe's answer or a verdict may repeat a secret.
        path.write_text(self.mask(json.dumps(value, indent=2)) + "\n", encoding="utf-8")

    # --- Scoring ----------------------------------------------------------------------------

    async def _scores(
        self, planned: Planned, record: RunRecord, job: Job, sidecar: dict[str, Any]
    ) -> tuple[list[Score], dict[str, Verdict]]:
        scorers = self.loaded.scorers_for(planned.case)
        implicit = not any(s.status is not None for s in scorers)
        if implicit:  # without a status check of its own, a run must complete
            scorers = [Scorer(status="completed"), *scorers]
        verdicts: dict[str, Verdict] = {}
        grade = self._grader(planned, job, sidecar, verdicts)
        found = [await score(s, record, self.checks.call_reference, grade) for s in scorers]
        if implicit:
            found[0] = found[0].model_copy(update={"implicit": True})
        if self.loaded.spec.denied_input_fails and record.denied_input:
            denied = "; ".join(record.denied_input)
            reason = f"calls that needed a person were denied (on_input: deny): {denied}"
            found.append(
                Score(name="no_denied_input", kind="status", passed=False, score=0.0, reason=reason)
            )
        return found, verdicts

    def _grader(
        self,
        planned: Planned,
        job: Job,
        sidecar: dict[str, Any],
        verdicts: dict[str, Verdict],
        prefix: str = "",
    ) -> Grade:
        """How this run's judge checks are graded: by the judge, or (replaying) by its
        recorded verdicts; each verdict kept in `verdicts`, by `prefix` and the check's name."""
        recorded = sidecar.get("judge") or {}

        async def grade(scorer: Scorer, run: RunRecord) -> Score:
            spec = scorer.judge
            if spec is None:
                raise ValueError("not a judge check")
            key = f"{prefix}{scorer.label}"
            if self.options.replay is not None:
                saved = recorded.get(key)
                if not isinstance(saved, dict):
                    raise ConfigError(f"the recording of {planned.key} has no verdict for it")
                verdict = Verdict(float(saved["score"]), str(saved.get("reason", "")))
            else:
                verdict = await self._judge(spec.model, job).verdict(spec.rubric, run)
            verdicts[key] = verdict
            return judged(scorer.label, spec.pass_score, verdict)

        return grade

    # --- Probes -----------------------------------------------------------------------------

    async def _probes(
        self,
        planned: Planned,
        record: RunRecord,
        job: Job,
        orchestrator: Orchestrator,
        sidecar: dict[str, Any],
        verdicts: dict[str, Verdict],
    ) -> tuple[Line, dict[str, ProbeAnswer]]:
        """Ask each probe of the run's conversation at its point, and hold its answer to its
        checks: the line's `probes`, and the answers (a recording keeps them); the judge's
        verdicts join the run's `verdicts`."""
        spec = self.loaded.spec
        saved = sidecar.get("probes") or {}
        agents, unreadable = {}, None
        trace_file = record.trace
        if self.options.replay is None and trace_file is not None:
            try:
                agents = recorded_agents(trace_file)
            except ConfigError as exc:
                unreadable = str(exc)
        model = orchestrator.resolve(spec.probe_model) if spec.probe_model else orchestrator.model
        budget = self.budget.scoped(None) if self.budget is not None else TokenBudget()
        answers: dict[str, ProbeAnswer] = {}
        results: list[Line] = []
        for number, probe in enumerate(spec.probes, 1):
            if self.options.replay is not None:
                answer = _saved_answer(saved.get(probe.id))
            elif unreadable is not None:
                answer = ProbeAnswer(error=unreadable)
            else:
                at = point(agents, probe.agent or job.output_step, probe.after)
                answer = await ask(probe, at, model, budget, step=number)
            answers[probe.id] = answer
            results.append(
                await self._probe_result(planned, record, job, probe, answer, sidecar, verdicts)
            )
        costs = [a.cost for a in answers.values() if a.cost is not None]
        return {
            "asked": len(results),
            "passed": sum(bool(r["passed"]) for r in results),
            "usage": sum((a.usage for a in answers.values()), Usage()).model_dump(),
            "cost": sum(costs) if costs else None,
            "results": results,
        }, answers

    async def _probe_result(
        self,
        planned: Planned,
        record: RunRecord,
        job: Job,
        probe: Probe,
        answer: ProbeAnswer,
        sidecar: dict[str, Any],
        verdicts: dict[str, Verdict],
    ) -> Line:
        result: Line = {"id": probe.id, "at": answer.at, "answer": answer.text}
        if answer.error is not None:
            return {**result, "passed": False, "error": answer.error, "scores": []}
        asked = replace(record, output=answer.text, task=probe.question)
        grade = self._grader(planned, job, sidecar, verdicts, prefix=f"probe {probe.id}: ")
        scores = [await score(c, asked, self.checks.call_reference, grade) for c in probe.checks]
        passed = all(s.passed for s in scores)
        return {**result, "passed": passed, "scores": [score_line(s) for s in scores]}

    def _judge(self, model: str | None, job: Job) -> Judge:
        key = model or ""
        if key not in self._judges:
            models = ResolvedModels(
                aliases=ModelAliases.standard(job.models),
                environ=job.environment(),
                prepare=priced_by(STANDARD_PRICES.over(job.price_overrides())),
            )
            chosen: ModelRef = model or job.model
            judge_model = models.get(chosen)
            budget = self.budget.scoped(None) if self.budget is not None else TokenBudget()
            self._judges[key] = Judge(judge_model, budget)
        return self._judges[key]

    @reads("eval")
    def _write(self, results: Path, line: Line) -> Line:
        text = self.mask(json.dumps(line, ensure_ascii=False, default=str))
        with results.open("a", encoding="utf-8") as file:
            file.write(text + "\n")
        masked: Line = json.loads(text)
        if self.options.on_line is not None:
            self.options.on_line(masked)
        return masked


def _saved_answer(saved: Any) -> ProbeAnswer:
    """A probe's answer as a recording kept it."""
    if not isinstance(saved, dict):
        return ProbeAnswer(error="the recording has no answer to this probe")
    error = saved.get("error")
    return ProbeAnswer(
        text=str(saved.get("answer") or ""),
        at=str(saved.get("at") or ""),
        error=str(error) if error is not None else None,
    )


def _task(job: Job, result: JobResult) -> str:
    """What the job's output step was asked: its inputs and the outputs of the steps before
    it filled in as the run filled them (as written where a step it names did not answer)."""
    text = job.goal or job.step(job.output_step).task
    inputs = {name: value for name, value in job.inputs.items() if value is not None}
    outputs = {step.id: step.output for step in result.steps if step.status == "completed"}
    data = {step.id: step.data for step in result.steps if step.data is not None}
    try:
        return Template.parse(text).render(inputs, outputs, data)
    except (TemplateError, KeyError):
        return text


def score_line(found: Score) -> dict[str, Any]:
    """A check's result as its results line keeps it (`implicit` only where it is)."""
    return found.model_dump(exclude=None if found.implicit else {"implicit"})


def step_errors(result: JobResult) -> list[str]:
    """Why each step of a run that ended in error did (a run that finished and failed its
    checks is not an error: its model, or one of its steps, is)."""
    return [
        f"step {step.id} ({step.agent}): {step.reason or 'error'}"
        for step in result.steps
        if step.status == "error"
    ]


def variant_catalog(job: Job, variant: Variant) -> SkillCatalog:
    """The skills a run of `job` sees in `variant`: its added folders first, then the job's,
    less the skills it removes."""
    folders = job_folders(job)
    catalog = SkillCatalog([*variant.skills_add, *folders.skills])
    if variant.skills_remove:
        removed = set(variant.skills_remove)
        catalog = catalog.subset(n for n in catalog.names if n not in removed)
    return catalog


@reads_no_configuration(
    "hashes the files an eval case copies into its workspace, for its result's identity; "
    "decides nothing of a run"
)
def _copied(case: Case) -> dict[str, str]:
    """The bytes a case copies into its workspace, as digests: a changed input file makes
    the case's earlier results stale."""
    found: dict[str, str] = {}
    for name, source in case.copies.items():
        try:
            found[name] = hashlib.sha256(Path(source).read_bytes()).hexdigest()[:16]
        except OSError:
            found[name] = "unreadable"
    return found


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def changed(earlier: Any, now: dict[str, str]) -> list[str]:
    """What changed between the `made_by` of a run's earlier line and the run's now (see
    `MADE_BY`); nothing: the earlier result answers the eval as it is. A recorded run
    answers a plain one (it made the same calls, live); a plain run does not answer one to
    record, nor a replay."""
    if not isinstance(earlier, dict):
        return ["made before result lines said what made them"]
    found = []
    for part, value in now.items():
        was = earlier.get(part)
        if part == "mode" and value == "plain" and str(was).startswith("record "):
            continue
        if was != value:
            found.append(
                f"{MADE_BY[part]}: {was}, now {value}" if part == "mode" else MADE_BY[part]
            )
    return found


@reads("eval")
def last_lines(results: Path) -> dict[str, Line]:
    """The last line of each run in `results`, by its key. A line that cannot be read is a
    ConfigError naming the file and the line: skipped, it could hide a failed run."""
    if not results.is_file():
        return {}
    try:
        text = results.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the results {results}: {exc}") from None
    last: dict[str, Line] = {}
    for number, raw in json_lines(text):
        try:
            line = load_json(raw, str(results), line=number)
        except JsonInputError as exc:
            raise ConfigError(f"{exc}; mend or remove the line (--fresh starts over)") from None
        if not isinstance(line, dict) or not isinstance(line.get("key"), str):
            raise ConfigError(
                f"{results}, line {number}: not a result line (a JSON object with a key)"
            )
        last[line["key"]] = line
    return last


def read_lines(results: Path, keys: Sequence[str]) -> list[Line]:
    """The last line of each of `keys` in `results` (the runs of this eval that have one)."""
    last = last_lines(results)
    return [last[key] for key in keys if key in last]


class WatchedReplay(ModelWrapper):
    """A replayed model that keeps the first way a request departed from the recording."""

    def __init__(self, inner: ReplayModel) -> None:
        super().__init__(inner)
        self.replay = inner
        self.divergence: str | None = None

    async def complete(self, request: ModelRequest) -> ModelResponse:
        try:
            return await self.inner.complete(request)
        except ReplayMismatch as exc:
            if self.divergence is None:
                self.divergence = str(exc)
            raise


class UntilTriggered(ModelWrapper):
    """A trigger eval's model: once a reply has loaded `skill` (or called one of its tools),
    the question is answered, and the next call is answered here, without asking the model,
    so that the run ends at once (its trace says so in that answer)."""

    def __init__(self, inner: ChatModel, skill: str) -> None:
        super().__init__(inner)
        self.skill = skill
        self.fired = False

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if self.fired:
            note = f"[trigger eval] {self.skill} was loaded; the run ends here."
            request.text(note)
            message = Message(role="assistant", content=note)
            return ModelResponse(message=message, usage=Usage(), finish_reason="stop")
        response = await self.inner.complete(request)
        self.fired = any(
            self._fires(call.name, call.arguments) for call in response.message.tool_calls
        )
        return response

    def _fires(self, name: str, arguments: str) -> bool:
        if name.startswith(f"{self.skill}__"):
            return True
        if name != "load_skill":
            return False
        try:
            value = json.loads(arguments)
        except ValueError:
            return False
        return isinstance(value, dict) and value.get("name") == self.skill


class Replayed(Orchestrator):
    """An orchestrator whose every model (the job's, a step's, a sub-agent's) is the one it
    was made with: a run's recording."""

    def resolve(self, model: ChatModel | ModelRef | None) -> ChatModel:
        if model is None or isinstance(model, str | ModelSettings):
            return self.model
        return super().resolve(model)
