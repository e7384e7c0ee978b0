"""`orchestrator resume TRACE`: go on with a job run that was killed or interrupted.

The run's spec, inputs and model come from its trace (`--model` and `--model-option` override
the model, as for `run`); the trace gets the next attempt appended. Output, `--stream`, approval
on the terminal and exit codes are those of `run`. A run that had finished is not run again:
its recorded result is printed, and the exit code is 0. `TRACE` may be `last`, the newest run
under `--dir` (default `.orchestrator/runs/`).
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
import time
from pathlib import Path

from ..agent import AnswerRefused, request_lines
from ..agent.waiting import give_answers
from ..errors import ConfigError
from ..events import Answer
from ..jobs import JobResult, Resumption, parse_model_options, prepare_resume
from ..planner import Orchestrator
from ..trace import Checkpoint, load_checkpoint
from ..trace.history import latest_trace
from .jobs import (
    EXIT_OK,
    EXIT_SPEC_ERROR,
    add_model_arguments,
    show_error,
    terminal_approver,
)
from .run import DEFAULT_TRACE_DIR, add_output_arguments, execute, report

REQUEST_ID = re.compile(r"[0-9a-f]{8}")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    resume = commands.add_parser(
        "resume",
        help="go on with a killed or interrupted job run, from its trace",
        description="Continue the job run recorded in TRACE, appending to it: steps and "
        "sub-agents that had ended keep their results, running ones restart from their last "
        "complete turn, and the budget goes on from what was spent.",
    )
    resume.add_argument("trace", metavar="TRACE", help="the run's trace, or `last`")
    add_model_arguments(resume, "the job's model (its name), instead of the one the run had")
    resume.add_argument(
        "--force", action="store_true", help="resume even if the job spec changed since the run"
    )
    resume.add_argument(
        "--retry-failed",
        action="store_true",
        help="run again the steps and sub-agents that ended failed (error), and only what "
        "depends on them; everything that completed keeps its result and its spend",
    )
    resume.add_argument(
        "--answer",
        dest="answers",
        action="append",
        default=[],
        metavar="ID=VALUE",
        help="answer what the run waits for (it ended input_required): the request's id and "
        "the answer (yes/no, a choice or its number, text, JSON for a form); VALUE alone when "
        "one request is open. Repeatable. On a terminal, open requests not answered here are "
        "asked",
    )
    resume.add_argument(
        "--decline",
        dest="declined",
        action="append",
        default=[],
        metavar="ID",
        help="decline what the run waits for: the request's id (an approval is denied, a "
        "question or a server's form is answered as declined). Repeatable",
    )
    resume.add_argument(
        "--dir", type=Path, default=DEFAULT_TRACE_DIR, help="where `last` looks for runs"
    )
    resume.add_argument(
        "--user-skills",
        action="store_true",
        help="also search the home folders for skills and sub-agents (as the run did if it "
        "was started with --user-skills)",
    )
    add_output_arguments(resume)
    resume.set_defaults(handler=resume_command)


def resume_command(args: argparse.Namespace) -> int:
    path = trace_argument(args.trace, args.dir, jobs_only=True)
    if path is None:
        print(f"error: {no_runs(args.dir, 'job runs')}", file=sys.stderr)
        return EXIT_SPEC_ERROR
    try:
        resumption = prepare_resume(
            path,
            model=args.model,
            model_options=parse_model_options(args.model_options),
            force=args.force,
            user_skills=args.user_skills,
            retry_failed=args.retry_failed,
            answers={**_answers(args.answers, path), **_declined(args.declined)},
        )
        if sys.stdin.isatty():
            _ask_open(resumption)
        _say_late(resumption.checkpoint)
        if (finished := resumption.finished) is not None:
            return _finished(args, resumption, finished)
        approver = terminal_approver()  # calls marked `ask`: on a terminal, a person decides
        answer = approver.answer if approver is not None else None
        orchestrator, job = Orchestrator.for_resume(resumption, approve=approver, answer=answer)
    except ConfigError as exc:
        show_error(exc)
        return EXIT_SPEC_ERROR
    if not args.quiet:
        print(_resuming(resumption), file=sys.stderr)
        if resumption.checkpoint.retrying:
            print(f"retrying: {', '.join(resumption.checkpoint.retrying)}", file=sys.stderr)
    return execute(args, job, orchestrator, path, approver=approver, resume=resumption.checkpoint)


def _answers(given: list[str], path: Path) -> dict[str, str]:
    """`--answer ID=VALUE` (or `--answer VALUE` where one request is open) by request id."""
    if not given:
        return {}
    answers: dict[str, str] = {}
    for item in given:
        key, sep, value = item.partition("=")
        if sep and REQUEST_ID.fullmatch(key.strip()):
            answers[key.strip()] = value
            continue
        waiting = load_checkpoint(path).open_requests() if path.is_file() else []
        if len(given) > 1 or len(waiting) != 1:
            listed = ", ".join(r.id for r in waiting) or "none"
            raise AnswerRefused(
                f"--answer {item!r}: give it as ID=VALUE (the run waits for: {listed})"
            )
        answers[waiting[0].id] = item
    return answers


def _declined(ids: list[str]) -> dict[str, Answer]:
    """`--decline ID`: the person declines the request (an MCP server hears `decline`, an
    approval is denied, a question is answered as declined)."""
    return {key.strip(): Answer(id=key.strip(), action="decline") for key in ids}


def _ask_open(resumption: Resumption) -> None:
    """On a terminal: ask a person each request the run still waits for."""
    for request in resumption.checkpoint.open_requests():
        print(request_lines([request])[0], file=sys.stderr)
        while True:
            try:
                value = input(f"answer {request.id} (empty: leave it waiting): ")
            except EOFError:
                return
            if not value.strip():
                break
            try:
                give_answers(resumption.checkpoint, {request.id: value})
                break
            except AnswerRefused as refused:
                print(f"error: {refused}", file=sys.stderr)


def _say_late(checkpoint: Checkpoint) -> None:
    """An answer given after its request expired is recorded, and its asker told so."""
    for answer in checkpoint.answering:
        request = checkpoint.asked.requests.get(answer.id)
        if answer.id in checkpoint.asked.late and request is not None:
            expired = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(request.expires_at))
            print(
                f"warning: the answer to {answer.id} comes too late: the request of "
                f"{request.source} expired at {expired}. It is recorded, and the asker is told "
                "it came too late instead of being given it",
                file=sys.stderr,
            )


def trace_argument(value: str, folder: Path, *, jobs_only: bool = False) -> Path | None:
    """A TRACE argument: a path, or `last` for the trace in `folder` written last (with
    `jobs_only`, the last that holds a job's run)."""
    if value == "last" and not Path(value).exists():
        return latest_trace(folder, jobs_only=jobs_only)
    return Path(value)


def existing_trace(value: str, folder: Path) -> Path | None:
    """The trace file a TRACE|last argument names, or None once the error is on stderr."""
    path = trace_argument(value, folder)
    if path is None:
        print(f"error: {no_runs(folder)}", file=sys.stderr)
        return None
    if not path.is_file():
        print(f"error: no trace at {path}", file=sys.stderr)
        return None
    return path


def no_runs(folder: Path, what: str = "runs") -> str:
    """Why `last` found nothing: where it looked, and where traces are written."""
    return (
        f"no {what} in {folder.resolve()}; a run writes its trace under the folder it was "
        "started from (.orchestrator/runs/): run this from there, or pass --dir or a trace's path"
    )


def _finished(args: argparse.Namespace, resumption: Resumption, result: JobResult) -> int:
    print(
        f"run {resumption.checkpoint.run_id} in {resumption.path} had already finished "
        f"({result.status}); nothing to resume. Its recorded result:",
        file=sys.stderr,
    )
    if resumption.checkpoint.failed_tasks():
        print(
            "to run its failed steps again: orchestrator resume --retry-failed "
            f"{shlex.quote(str(resumption.path))}",
            file=sys.stderr,
        )
    report(args, result, None)
    return EXIT_OK


def _resuming(resumption: Resumption) -> str:
    checkpoint = resumption.checkpoint
    steps = [t for t in checkpoint.tasks.values() if t.caller == "job"]
    done = sum(1 for t in steps if t.status == "completed")
    return (
        f"resuming run {checkpoint.run_id} from {resumption.path} (attempt "
        f"{checkpoint.attempts + 1}): {done} of {len(steps)} steps done, "
        f"{checkpoint.usage.total_tokens:,} tokens spent so far"
    )
