"""`orchestrator run JOB.yaml`.

`run` shows a live view on a terminal (plain progress lines on stderr otherwise), writes the
job's output to stdout (or, with --json, a JSON object; with --stream, as the model writes
it), always writes a trace, and exits with a code that says how the job ended (see EXIT_* in
jobs.py). Every run gets a run id and a trace of its own: by default a new file named after
both under `.orchestrator/runs/`; a `--trace` path that already holds a run is refused
(`orchestrator resume` goes on with that run). `execute` is shared with `resume` (resume.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from ..events import Listener, SkillFailed, TraceEvent
from ..jobs import Job, JobResult
from ..planner import Orchestrator
from ..security import SecretMask
from ..security.inventory import TRACE_FOLDER
from ..security.permissions import sandbox_line
from ..trace import Trace, new_run_id
from . import STARTED
from .jobs import (
    EXIT_BUDGET,
    EXIT_FAILED_STEP,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SPEC_ERROR,
    EXIT_WAITING,
    add_executor_arguments,
    add_job_arguments,
    load_job_from_args,
    show_error,
    terminal_approver,
)
from .output import AnswerStream, masked_output

if TYPE_CHECKING:
    from ..trace import Checkpoint
    from .approval import TerminalApprover

DEFAULT_TRACE_DIR = TRACE_FOLDER
OFFLINE_PROVIDERS = {"scripted", "replay"}
"""Models that answer from a file, not a server: a run with only these is offline."""
EXIT_CODES = {
    "completed": EXIT_OK,
    "failed": EXIT_FAILED_STEP,
    "budget_exhausted": EXIT_BUDGET,
    "cancelled": EXIT_INTERRUPTED,
    "input_required": EXIT_WAITING,
}


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = commands.add_parser("run", help="run a job spec")
    add_job_arguments(run)
    run.add_argument("--trace", type=Path, help="where to write the JSONL trace")
    add_executor_arguments(run)
    add_output_arguments(run)
    run.set_defaults(handler=run_command)


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """`--json`, `--quiet`, `--stream` and `--otel`: how a job's run shows (run and resume)."""
    parser.add_argument("--json", action="store_true", help="print a JSON result on stdout")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument(
        "--stream",
        action="store_true",
        help="write the output step's answer to stdout as the model writes it",
    )
    parser.add_argument(
        "--otel",
        action="store_true",
        help="also export OpenTelemetry spans (OTLP/HTTP to OTEL_EXPORTER_OTLP_ENDPOINT)",
    )


def run_command(args: argparse.Namespace) -> int:
    try:
        job = load_job_from_args(args, trace=args.trace)
        approver = terminal_approver()  # calls marked `ask`: on a terminal, a person decides
        orchestrator = Orchestrator.from_job(
            job,
            user_skills=args.user_skills,
            approve=approver,
            answer=approver.answer if approver is not None else None,
        )
    except ConfigError as exc:
        show_error(exc)
        return EXIT_SPEC_ERROR
    run_id = new_run_id()
    path = job.trace or default_trace_path(job.name, run_id)
    return execute(args, job, orchestrator, path, approver=approver, run_id=run_id)


def execute(
    args: argparse.Namespace,
    job: Job,
    orchestrator: Orchestrator,
    path: Path,
    *,
    approver: TerminalApprover | None = None,
    run_id: str | None = None,
    resume: Checkpoint | None = None,
) -> int:
    """Run `job` on a new trace at `path` (or resume the run there, from its checkpoint
    `resume`): progress, approval on the terminal, masked output, exit code."""
    try:
        telemetry = _otlp() if args.otel else nullcontext()
    except ConfigError as exc:
        show_error(exc)
        return EXIT_SPEC_ERROR
    for warning in orchestrator.warnings:  # the job's problems were refused by `from_job`
        print(f"warning: {warning}", file=sys.stderr)
    try:
        confined = orchestrator.sandbox()
    except ConfigError as exc:
        show_error(exc)
        return EXIT_SPEC_ERROR
    if confined is not None:  # where commands are allowed, what confines them
        print(sandbox_line([confined]), file=sys.stderr)
    secrets = orchestrator.secrets()  # the environment's and the .env files'
    with telemetry, masked_output(SecretMask(secrets)):
        progress, view, pause = _progress(args, job)
        if approver is not None:
            approver.pause = pause
        stream = AnswerStream(secrets=secrets) if args.stream and not args.json else None
        failures = SkillFailures()
        try:
            listeners: list[Listener] = [progress, failures] if progress else [failures]
            trace = Trace(path, listeners=listeners, secrets=secrets, run_id=run_id, resume=resume)
        except ConfigError as exc:  # the path holds another run, or a run still writes it
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_SPEC_ERROR
        except OSError as exc:
            print(f"error: cannot write the trace to {path}: {exc.strerror}", file=sys.stderr)
            return EXIT_SPEC_ERROR
        try:
            with view:
                # Made here, so that the run awaited is the job's own (`JobRunner.run`).
                runner = orchestrator.job_runner(job, trace, stream=stream)
                result = asyncio.run(runner.run())
        except KeyboardInterrupt:
            print(f"interrupted; the trace is in {path}", file=sys.stderr)
            print(f"resume: orchestrator resume {shlex.quote(str(path))}", file=sys.stderr)
            print(f"report: orchestrator report {shlex.quote(str(path))}", file=sys.stderr)
            return EXIT_INTERRUPTED
        except ConfigError as exc:
            show_error(exc)
            return EXIT_SPEC_ERROR
        finally:
            trace.close()
        report(
            args,
            result,
            time.time() - STARTED,
            stream,
            offline=offline_note(job),
            warnings=failures.lines(),
        )
    code = EXIT_CODES[result.status]
    if code == EXIT_OK and failures.found and job.fail_on_skill_error:
        # An agent the failure ended was a sub-agent; the run's own answer came anyway.
        print("error: a skill failed to load, and fail_on_skill_error is set", file=sys.stderr)
        return EXIT_FAILED_STEP
    return code


class SkillFailures:
    """A trace listener that keeps the run's `skill_failed` events, for the warnings."""

    def __init__(self) -> None:
        self.found: list[tuple[str, str, str]] = []

    def __call__(self, event: TraceEvent) -> None:
        if isinstance(event, SkillFailed):
            self.found.append((event.agent, event.skill, event.error))

    def lines(self) -> list[str]:
        return [
            f"warning: {agent}: skill {skill!r} failed: {error}"
            for agent, skill, error in dict.fromkeys(self.found)
        ]


def default_trace_path(name: str, run_id: str) -> Path:
    """A new trace's default path: `.orchestrator/runs/RUN-ID-NAME.jsonl`."""
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in name)
    return DEFAULT_TRACE_DIR / f"{run_id}-{safe}.jsonl"


def _progress(
    args: argparse.Namespace, job: Job
) -> tuple[
    Callable[[Any], None] | None,
    AbstractContextManager[object],
    Callable[[], AbstractContextManager[object]],
]:
    """What shows the run's progress: its listener (None with --quiet), the context it is
    shown in, and what pauses it while the terminal asks for an approval."""
    if args.quiet:
        return None, nullcontext(), nullcontext
    # Loaded by a run that shows its progress (not `-q`).
    from .progress import LiveView, PlainProgress
    from .rows import silence_after

    if sys.stderr.isatty() and not args.stream:  # a live view would redraw over the answer
        view = LiveView(f"job {job.name}", job.budget.max_tokens, silence_after=silence_after())
        return view, view, view.paused
    return PlainProgress(sys.stderr), nullcontext(), nullcontext


def report(
    args: argparse.Namespace,
    result: JobResult,
    seconds: float | None,
    stream: AnswerStream | None = None,
    *,
    offline: str | None = None,
    warnings: Sequence[str] = (),
) -> None:
    """The job's output (or JSON, or the rest of a streamed answer) on stdout; unless quiet,
    how it went on stderr: the time since the command started, the files written (as paths
    from the working folder), whether no real model was called, why steps failed, and last
    the trace and the command that shows its report. `warnings` (skills that failed to
    load) are printed with --quiet too."""
    if args.json:
        print(json.dumps(_as_json(result), indent=2))
    elif stream is not None:
        stream.finish(result.output)
    else:
        print(result.output)
    if not args.quiet:
        took = f" in {seconds:.1f}s" if seconds is not None else ""
        print(
            f"job {result.name}: {result.status}{took}, {result.usage.total_tokens:,} tokens"
            + (
                f" ({result.usage.cache_read_tokens:,} cached)"
                if result.usage.cache_read_tokens
                else ""
            )
            + (f", ${result.cost:.4f}" if result.cost is not None else "")
            + (f"; {offline}" if offline else ""),
            file=sys.stderr,
        )
        for file in result.files:
            print(f"wrote {shown_path(file)}", file=sys.stderr)
    for line in failure_lines(result):  # with --quiet too: a failure must say why
        print(line, file=sys.stderr)
    for line in refusal_lines(result.refused_by_agent()):  # and so must a refusal
        print(line, file=sys.stderr)
    for line in warnings:  # and a skill that failed to load
        print(line, file=sys.stderr)
    for line in waiting_lines(result):  # and what the run waits for
        print(line, file=sys.stderr)
    if not args.quiet:  # last, however the run ended: the next command to type
        print(f"trace: {result.trace}", file=sys.stderr)
        print(f"report: orchestrator report {shlex.quote(str(result.trace))}", file=sys.stderr)


def waiting_lines(result: JobResult) -> list[str]:
    """What a run that ended `input_required` waits for, and the command that answers it."""
    waiting = result.waiting
    if not waiting:
        return []
    from ..agent.waiting import request_lines  # loaded by a run that waits

    lines = [f"waiting: {line}" for line in request_lines(waiting)]
    trace = shlex.quote(shown_path(str(result.trace)))
    answer = "VALUE" if len(waiting) == 1 else f"{waiting[0].id}=VALUE"
    lines.append(f"answer: orchestrator resume {trace} --answer {answer}")
    return lines


def refusal_lines(refused: dict[str, dict[str, str]]) -> list[str]:
    """A warning for each tool (or skill) the safety rules refused every time it was tried."""
    lines = []
    for agent, found in refused.items():
        for tool, reason in found.items():
            what = f"skill {tool.partition(':')[2]!r}" if tool.startswith("load_skill:") else tool
            lines.append(f"warning: {agent}: {what} was refused each time it was tried: {reason}")
    return lines


def offline_note(job: Job) -> str | None:
    """`offline, scripted model (FILE)` when no model of the job reaches a server."""
    models = [job.model, *(s.model for s in job.plan if s.model is not None)]
    # ModelSettings' fields are generated (models/settings.py), so mypy does not see `name`
    # until the models room declares it; from then on the ignore is unused, and allowed to be.
    names = [model.name for model in models]
    providers = {name.partition(":")[0] for name in names}
    if not providers <= OFFLINE_PROVIDERS:
        return None
    kind = "scripted" if providers == {"scripted"} else "recorded"
    sources = ", ".join(dict.fromkeys(shown_path(n.partition(":")[2]) for n in names))
    return f"offline, {kind} model ({sources})"


def shown_path(path: str | Path) -> str:
    """`path` as the user can open it from here: relative to the working folder when it lies
    in it, else absolute."""
    absolute = Path(path).resolve()
    cwd = Path.cwd().resolve()
    return str(absolute.relative_to(cwd)) if absolute.is_relative_to(cwd) else str(absolute)


def failure_lines(result: JobResult) -> list[str]:
    """Why each step that did not complete ended as it did (skips for a dependency aside),
    and a warning for each that completed with an empty answer."""
    lines = []
    for step in result.steps:
        if step.empty_answer:
            role = " (the job's output)" if step.id == result.output_step else ""
            lines.append(f"warning: step {step.id}{role} completed with an empty answer")
            continue
        if step.status in ("completed", "input_required") or (step.reason or "").startswith(
            "dependency "
        ):
            continue
        lines.append(
            f"step {step.id} ({step.agent}): {step.status}: {step.reason or 'no reason given'}"
        )
    return lines


def _as_json(result: JobResult) -> dict[str, Any]:
    return {
        "name": result.name,
        "status": result.status,
        "output": result.output,
        "data": result.data,
        "output_step": result.output_step,
        "usage": result.usage.model_dump(),
        "cost": result.cost,
        "refused": result.refused_by_agent(),
        "steps": [
            {
                **step.model_dump(
                    include={"id", "agent", "status", "output", "reason", "usage", "cost", "steps"}
                ),
                "data": step.data,
            }
            for step in result.steps
        ],
        "trace": result.trace,
        "files": result.files,
        "waiting": [r.shown() for r in result.waiting],
    }


def _otlp() -> AbstractContextManager[object]:
    """OpenTelemetry export for this run (`--otel`): an optional part, loaded only then."""
    from ..telemetry import instrument_otlp

    return instrument_otlp()
