"""Resuming a job from its trace: which spec, inputs and model, and what is left to do.

`prepare_resume(trace)` reads the trace as a checkpoint and its `job_start` (the spec file and
its sha256, the inputs, the model and its options, the folders searched), refuses a spec that
changed since the run (unless `force`), and loads the job as it was run (`model` overrides the
recorded model, as `--model` does for `run`, and drops the recorded options; `model_options`
go over them). A run that had finished is not run again: `Resumption.finished` holds the
result its trace recorded. Running the job on a `Trace(path, resume=checkpoint)` then goes on
where the run stopped (runner.py, tasks/restore.py, agent/resume.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..errors import ConfigError
from ..messages import Usage
from ..tasks import restored_children
from ..trace import Checkpoint, load_checkpoint
from ..trace.lock import is_locked
from .loading import load_job
from .record import spec_digest
from .runner import JobResult
from .spec import Job


class ResumeError(ConfigError):
    """The trace cannot be resumed: no job in it, its spec changed or is gone, it still runs."""


@runtime_checkable
class FastForward(Protocol):
    """A model that serves turns in order (the scripted model) and can skip those an earlier
    attempt of the run already used."""

    def fast_forward(self, agent: str, calls: int) -> None: ...


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
) -> Resumption:
    """Read the trace of a job's run and load its job, ready to resume; see the module doc.

    Raises ResumeError (a ConfigError) when it cannot be resumed.
    """
    path = Path(trace)
    if not path.is_file():
        raise ResumeError(f"no trace at {path}")
    if is_locked(path):
        raise ResumeError(f"trace {path} is being written by another process: its run still goes")
    checkpoint = load_checkpoint(path)
    record = checkpoint.job
    if record is None:
        raise ResumeError(
            f"trace {path} holds no job run (no job_start): only runs of a job spec resume"
        )
    if checkpoint.finished:
        return Resumption(path, checkpoint, finished=recorded_result(checkpoint, path))
    spec = _spec(path, record, force)
    inputs = {str(k): str(v) for k, v in (record.get("inputs") or {}).items()}
    recorded = record.get("model_options") if model is None else None
    options = {**(recorded if isinstance(recorded, dict) else {}), **(model_options or {})}
    user_skills = user_skills or record.get("user_skills") is True
    job = load_job(
        spec,
        model=model or _recorded_model(record.get("model")),
        model_options=options or None,
        inputs=inputs,
        user_skills=user_skills,
    )
    return Resumption(path, checkpoint, job=job, user_skills=user_skills)


def _recorded_model(value: object) -> str | None:
    """The model name `job_start` recorded (a mapping's `name`, from a settings dump)."""
    if isinstance(value, dict):
        value = value.get("name")
    return value if isinstance(value, str) and value else None


def _spec(trace: Path, record: dict[str, Any], force: bool) -> Path:
    if not record.get("spec"):
        raise ResumeError(f"the job in {trace} was not run from a spec file, so it cannot resume")
    spec = Path(record["spec"])
    if not spec.is_file():
        raise ResumeError(f"the job's spec {spec} is gone; the run in {trace} cannot resume")
    recorded, now = record.get("spec_sha256"), spec_digest(spec)
    if recorded != now and not force:
        raise ResumeError(
            f"the job's spec {spec} changed since the run in {trace} (sha256 {str(recorded)[:12]} "
            f"then, {now[:12]} now); resume with --force (force=True) to use it as it is now"
        )
    return spec


def recorded_result(checkpoint: Checkpoint, path: Path | None = None) -> JobResult:
    """The result of a finished job, as its trace recorded it."""
    record = checkpoint.job or {}
    steps = next((f for f in checkpoint.forks if f.caller == "job"), None)
    results = restored_children(checkpoint, steps) if steps is not None else []
    output_step = str(record.get("output_step") or (results[-1].id if results else ""))
    end = checkpoint.job_end or {}
    return JobResult(
        name=str(record.get("name") or "job"),
        status=end.get("status") or "failed",
        output=next((r.output for r in results if r.id == output_step), ""),
        output_step=output_step,
        usage=sum((r.usage for r in results), Usage()),
        steps=results,
        trace=str(path) if path is not None else None,
    )


def fast_forward(model: object, checkpoint: Checkpoint) -> None:
    """Tell a turn-by-turn model (scripted) which turns the earlier attempts used."""
    if isinstance(model, FastForward):
        for agent, calls in checkpoint.calls_by_agent().items():
            model.fast_forward(agent, calls)
