"""Job commands: `orchestrator validate JOB.yaml [--set k=v] [--model M] [--model-option k=v]`,
and the arguments every command that runs a job shares (`--executor local|ray` and
`--ray-address ADDR`: where a job's agents run, for run and run-batch).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..agent import ON_INPUT
from ..errors import ConfigError
from ..jobs import Executor, Job, SpecError, load_job, parse_model_options, parse_set_options
from ..jobs.preflight import Preflight, preflight_job
from ..messages import plural
from ..models import MissingSettingError
from ..skills.disclosure import DISCLOSURES

if TYPE_CHECKING:
    from .approval import TerminalApprover

EXIT_OK = 0
EXIT_SPEC_ERROR = 2
EXIT_FAILED_STEP = 3
EXIT_BUDGET = 4
EXIT_WAITING = 5
"""The run waits for a person's answer (`input_required`): `resume --answer` goes on."""
EXIT_INTERRUPTED = 130
STDIN_SPEC = Path("<stdin>")
"""What a spec read from standard input (`run -`) is called; its folder is the working one."""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the job commands to the `orchestrator` command's subparsers."""
    validate = subparsers.add_parser(
        "validate",
        help="check a job spec without running anything",
        description="Load and check a job spec; print 'ok' or every problem found.",
    )
    add_job_arguments(validate)
    validate.set_defaults(handler=validate_command)


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    """The job file and the overrides every job command takes."""
    parser.add_argument(
        "job",
        metavar="JOB.yaml",
        help="the job spec file, or - to read it from standard input (its paths then "
        "resolve from the working folder)",
    )
    parser.add_argument(
        "--set",
        dest="set_options",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="give a value to an input declared in the spec (repeatable)",
    )
    add_model_arguments(
        parser, "the job's model (its name); its settings stay for one of the same provider"
    )
    parser.add_argument(
        "--user-skills",
        action="store_true",
        help="also search the home folders (~/.claude/skills, ~/.agents/skills, "
        "~/.claude/agents, ~/.codex/agents) after the job's own",
    )
    add_disclosure_argument(parser, "default: the spec's `disclosure`, else progressive")
    parser.add_argument(
        "--fail-on-skill-error",
        action="store_true",
        help="end an agent's run as an error when a skill's code fails to load (its tools.py "
        "does not import, an MCP server does not start); by default a warning (the spec's "
        "`fail_on_skill_error`)",
    )
    parser.add_argument(
        "--on-input",
        choices=ON_INPUT,
        help="where a person must answer and no one is there (a call marked ask off a "
        "terminal, an agent's question): wait (the run ends input_required; `resume "
        "--answer` goes on), deny the call, or fail the run; default: the spec's `on_input`, "
        "else wait",
    )


def add_disclosure_argument(parser: argparse.ArgumentParser, default: str) -> None:
    """`--disclosure progressive|eager|auto`: how skills' tools reach the model."""
    parser.add_argument(
        "--disclosure",
        choices=DISCLOSURES,
        help="how skills' tools reach the model: loaded on demand (progressive), all from the "
        f"first request (eager), or eager while their schemas are small (auto); {default}",
    )


def add_model_arguments(parser: argparse.ArgumentParser, model_help: str) -> None:
    """`--model` and `--model-option`."""
    parser.add_argument(
        "-m", "--model", metavar="MODEL", help=f"{model_help}: provider:model or an alias"
    )
    parser.add_argument(
        "--model-option",
        dest="model_options",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="one setting of the model, e.g. stream=false, timeout=120, "
        "base_url=http://127.0.0.1:8080/v1 (repeatable)",
    )


def report_preflight(found: Preflight, job: Job) -> bool:
    """Print what would certainly fail (and what might); False if the job must not start."""
    for warning in found.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if found.problems:
        print(f"error: {SpecError(job.source, found.problems)}", file=sys.stderr)
    return not found.problems


def show_error(error: ConfigError, *, spec: bool = True) -> None:
    """Print an error as a user of the command line should read it, on stderr: a refused
    job's warnings first, as `validate` prints them, then the error."""
    if isinstance(error, SpecError):
        for warning in error.warnings:
            print(f"warning: {warning}", file=sys.stderr)
    print(f"error: {config_error(error, spec=spec)}", file=sys.stderr)


def config_error(error: ConfigError, *, spec: bool = True) -> str:
    """An error as a user of the command line should read it (`spec`: the command reads a
    job spec)."""
    if isinstance(error, MissingSettingError):
        return error.for_files(spec=spec)
    return str(error)


def load_job_from_args(args: argparse.Namespace, **overrides: Any) -> Job:
    """The job named on the command line, with its --set and --model overrides, its agents
    checked against the sub-agents it can see."""
    from_stdin = args.job == "-"
    job = load_job(
        STDIN_SPEC if from_stdin else args.job,
        text=sys.stdin.read() if from_stdin else None,
        model=args.model,
        model_options=parse_model_options(args.model_options),
        inputs=parse_set_options(args.set_options),
        user_skills=args.user_skills,
        **overrides,
    )
    return with_command_line(job, args)


def with_command_line(job: Job, args: argparse.Namespace) -> Job:
    """`job` with what the command line sets over its spec: `--fail-on-skill-error`,
    `--on-input`, `--disclosure` and, for the commands that take them, `--executor` and
    `--ray-address`."""
    if args.fail_on_skill_error:
        job = job.model_copy(update={"fail_on_skill_error": True})
    if getattr(args, "on_input", None) is not None:
        job = job.model_copy(update={"on_input": args.on_input})
    job = with_disclosure(job, args)
    return with_executor(job, args) if "executor" in args else job


def terminal_approver() -> TerminalApprover | None:
    """The approver of a job command whose standard input is a terminal, else None (no one to
    ask). Set its `pause` to the live view's `paused` once there is one."""
    if not sys.stdin.isatty():
        return None
    from .approval import TerminalApprover  # loaded by a run on a terminal, where one can answer

    return TerminalApprover()


def with_disclosure(job: Job, args: argparse.Namespace) -> Job:
    """`job` with the disclosure the command line asks for, if it asks for one."""
    if getattr(args, "disclosure", None) is None:
        return job
    return job.model_copy(update={"disclosure": args.disclosure})


def add_executor_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--executor",
        choices=["local", "ray"],
        help="where the agents run: here (local) or on a Ray cluster (needs the [ray] extra); "
        "default: the spec's `executor`, else local",
    )
    parser.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="the Ray cluster to use: auto (the one running here) or ray://HOST:10001; "
        "default: a Ray of its own on this machine",
    )


def with_executor(job: Job, args: argparse.Namespace) -> Job:
    """`job` with the executor the command line asks for (`--ray-address` implies ray)."""
    kind = args.executor or ("ray" if args.ray_address else None)
    if kind is None:
        return job
    spec = job.executor
    address = args.ray_address or (spec.address if spec.type == "ray" else None)
    chosen = Executor.model_validate(
        {"type": kind, "address": address if kind == "ray" else None, "workers": spec.workers}
    )
    return job.model_copy(update={"executor": chosen})


def validate_command(args: argparse.Namespace) -> int:
    try:
        job = load_job_from_args(args)
        found = preflight_job(job, user_skills=args.user_skills)
    except ConfigError as error:
        show_error(error)
        return EXIT_SPEC_ERROR
    if not report_preflight(found, job):
        return EXIT_SPEC_ERROR
    count = len(job.plan)
    print(f"ok: {job.name} ({plural(count, 'step')})")
    return EXIT_OK
