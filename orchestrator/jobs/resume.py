"""Resuming a job from its trace: which spec, inputs and model, and what is left to do.

`prepare_resume(trace)` reads the trace as a checkpoint and its `job_start` (the spec file and
its sha256, the inputs, the model and its options, the folders searched), refuses a spec that
changed since the run (unless `force`), and loads the job as it was run (`model` overrides the
recorded model, as `--model` does for `run`, and drops the recorded options; `model_options`
go over them). A run that had finished is not run again: `Resumption.finished` holds the
result its trace recorded. Running the job on a `Trace(path, resume=checkpoint)` then goes on
where the run stopped (runner.py, tasks/restore.py, agent/restart.py).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from ..agent.waiting import give_answers
from ..errors import ConfigError
from ..events import Answer, JobStart
from ..messages import Usage
from ..models import ChatModel, ScriptedModel, unwrap
from ..security import Permissions
from ..security.signing import TraceKeyRefused
from ..skills.disclosure import DISCLOSURES
from ..tasks.restore import restored_children
from ..trace import Checkpoint, load_checkpoint
from ..trace.reader import verify_trace
from ..trace.writer import is_locked
from .loading import load_job
from .runner import JobResult, is_job_status, permissions_record, spec_digest
from .spec import Job


class ResumeError(ConfigError):
    """The trace cannot be resumed: no job in it, its spec changed or is gone, it still runs."""


@dataclass
class Resumption:
    """A run to go on with: its trace, its checkpoint, and the job (None if it had finished,
    then `finished` is its recorded result); `user_skills` when its folders include the home
    folders."""

    path: Path
    checkpoint: Checkpoint
    job: Job | None = None
    finished: JobResult | None = None
    user_skills: bool = False


def prepare_resume(
    trace: str | Path,
    *,
    model: str | None = None,
    model_options: Mapping[str, Any] | None = None,
    force: bool = False,
    user_skills: bool = False,
    retry_failed: bool = False,
    answers: Mapping[str, JsonValue | Answer] | None = None,
) -> Resumption:
    """Read the trace of a job's run and load its job, ready to resume; see the module doc.
    With `retry_failed`, the steps and forked tasks that ended failed run again, with what
    depends on them, a finished run's included (`Checkpoint.reopen`). `answers` answer what
    the run waits for (by request id; `give_answers`).

    Raises ResumeError (a ConfigError) when it cannot be resumed.
    """
    path = Path(trace)
    if not path.is_file():
        raise ResumeError(f"no trace at {path}")
    if is_locked(path):
        raise ResumeError(f"trace {path} is being written by another process: its run still goes")
    _require_own_run(path)
    checkpoint = load_checkpoint(path)
    if len(checkpoint.runs) > 1:
        raise ResumeError(
            f"trace {path} holds {len(checkpoint.runs)} runs ({', '.join(sorted(checkpoint.runs))})"
            "; a trace holds one run, so this one was put together by hand and cannot resume"
        )
    record = checkpoint.job
    if record is None:
        raise ResumeError(
            f"trace {path} holds no job run (no job_start): only runs of a job spec resume"
        )
    if retry_failed:
        failed = checkpoint.failed_tasks()
        if not failed and checkpoint.finished:
            raise ResumeError(
                f"run {checkpoint.run_id} in {path} has no failed step or sub-agent to retry "
                f"(it ended {checkpoint.job_end.status if checkpoint.job_end else '?'})"
            )
        checkpoint.reopen(failed)
        checkpoint.retrying = failed
    if answers:
        give_answers(checkpoint, answers)
    if checkpoint.finished:
        return Resumption(path, checkpoint, finished=recorded_result(checkpoint, path))
    spec = _spec(path, record, force)
    inputs = {str(k): str(v) for k, v in (record.inputs or {}).items()}
    user_skills = user_skills or record.user_skills is True
    job = load_job(
        spec, model=model, model_options=model_options, inputs=inputs, user_skills=user_skills
    )
    recorded = record.disclosure  # as the run had it: the spec's, or --disclosure
    if recorded is not None and recorded in DISCLOSURES and recorded != job.disclosure:
        job = job.model_copy(update={"disclosure": recorded})
    if record.fail_on_skill_error is True:  # the spec's, or --fail-on-skill-error
        job = job.model_copy(update={"fail_on_skill_error": True})
    if not force:
        overridden = model is not None or bool(model_options)
        _require_same_settings(path, record, job, overridden=overridden)
    return Resumption(path, checkpoint, job=job, user_skills=user_skills)


def _require_own_run(path: Path) -> None:
    """Refuse a trace that the user's own runs did not write, as its signatures tell."""
    try:
        signature = verify_trace(path)
    except TraceKeyRefused as refused:
        raise ResumeError(
            f"trace {path} cannot be checked, so it cannot direct a resume: {refused}"
        ) from None
    if not signature.valid:
        raise ResumeError(
            f"trace {path} cannot direct a resume: line {signature.bad_line} {signature.reason}. "
            "Only a trace written by your own runs, unchanged since, resumes (its lines are "
            "signed with the key in your configuration folder); start the job again with "
            "`orchestrator run`"
        )


def _require_same_settings(path: Path, record: JobStart, job: Job, *, overridden: bool) -> None:
    """Refuse to resume with a model or permissions other than the run had: the spec on disk
    (with the flags given now) decides them, never the trace, and a difference is a choice
    the user makes with flags or `--force`."""
    differences = []
    if not overridden:
        ran = _flags(record.model, record.model_options)
        now = _flags(job.model.name, job.model.options())
        if ran != now:
            had = " ".join(flag for flag in ran if flag not in now)
            lost = " ".join(flag for flag in now if flag not in ran)
            differences.append(
                f"the run had `{had or 'none of these'}` where the spec now gives "
                f"`{lost or 'nothing'}`: pass the flags the run had (or others) to resume"
            )
    recorded = record.permissions
    if recorded is not None and not _same_permissions(recorded, permissions_record(job)):
        differences.append("the run's permissions differ from the spec's now")
    if differences:
        raise ResumeError(
            f"the run in {path} was not run as its spec now says: {'; '.join(differences)}. "
            "Resume with --force (force=True) to go on as the spec says now"
        )


def _same_permissions(recorded: Mapping[str, Any], now: Mapping[str, Any]) -> bool:
    """Whether a run's recorded permissions are the spec's now. A field the run's version did
    not record yet (a newer one) is the same when it has its default now."""
    defaults = Permissions(workspace=Path()).model_dump(mode="json")
    return all(
        recorded[key] == value if key in recorded else value == defaults.get(key)
        for key, value in now.items()
    ) and set(recorded) <= set(now)


def _flags(model: object, options: object) -> list[str]:
    """A model and its options as the command-line flags that give them."""
    name = _recorded_model(model)
    flags = [f"--model {shlex.quote(name)}"] if name else []
    if isinstance(options, dict):
        for key, value in sorted(options.items()):
            shown = value if isinstance(value, str) else json.dumps(value)
            flags.append(f"--model-option {shlex.quote(f'{key}={shown}')}")
    return flags


def _recorded_model(value: object) -> str | None:
    """The model name `job_start` recorded (a mapping's `name`, from a settings dump)."""
    if isinstance(value, dict):
        value = value.get("name")
    return value if isinstance(value, str) and value else None


def _spec(trace: Path, record: JobStart, force: bool) -> Path:
    if not record.spec:
        raise ResumeError(f"the job in {trace} was not run from a spec file, so it cannot resume")
    spec = Path(record.spec)
    if not spec.is_file():
        raise ResumeError(f"the job's spec {spec} is gone; the run in {trace} cannot resume")
    recorded, now = record.spec_sha256, spec_digest(spec)
    if recorded != now and not force:
        raise ResumeError(
            f"the job's spec {spec} changed since the run in {trace} (sha256 {str(recorded)[:12]} "
            f"then, {now[:12]} now); resume with --force (force=True) to use it as it is now"
        )
    return spec


def recorded_result(checkpoint: Checkpoint, path: Path | None = None) -> JobResult:
    """The result of a finished job, as its trace recorded it."""
    record, end = checkpoint.job, checkpoint.job_end
    steps = next((f for f in checkpoint.forks if f.caller == "job"), None)
    results = restored_children(checkpoint, steps) if steps is not None else []
    recorded_step = record.output_step if record is not None else None
    output_step = recorded_step or (results[-1].id if results else "")
    status = end.status if end is not None else None
    last = next((r for r in results if r.id == output_step), None)
    return JobResult(
        name=(record.name if record is not None else None) or "job",
        status=status if is_job_status(status) else "failed",
        output=last.output if last is not None else "",
        data=last.data if last is not None else None,
        output_step=output_step,
        usage=sum((r.usage for r in results), Usage()),
        steps=results,
        trace=str(path) if path is not None else None,
    )


def fast_forward(model: ChatModel, checkpoint: Checkpoint) -> None:
    """Tell a scripted model, which serves each run its turns in order, which turns the
    earlier attempts of the run used."""
    model = unwrap(model)
    if isinstance(model, ScriptedModel):
        for agent, calls in checkpoint.calls_by_agent().items():
            model.fast_forward(agent, calls, run=checkpoint.run_id or "")
