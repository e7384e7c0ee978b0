"""Job commands: `orchestrator validate JOB.yaml [--set k=v ...] [--model M]`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import ConfigError
from ..jobs import Job, load_job, parse_set_options

EXIT_OK = 0
EXIT_SPEC_ERROR = 2
EXIT_FAILED_STEP = 3
EXIT_BUDGET = 4
EXIT_INTERRUPTED = 130


def register(subparsers: Any) -> None:
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
    parser.add_argument("job", metavar="JOB.yaml", help="the job spec file")
    parser.add_argument(
        "--set",
        dest="set_options",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="give a value to an input declared in the spec (repeatable)",
    )
    parser.add_argument("--model", help="model for the whole job, as provider:model")
    parser.add_argument(
        "--user-skills",
        action="store_true",
        help="also search the home folders (~/.claude/skills, ~/.agents/skills, "
        "~/.claude/agents, ~/.codex/agents) after the job's own",
    )


def load_job_from_args(args: argparse.Namespace, **overrides: Any) -> Job:
    """The job named on the command line, with its --set and --model overrides, its agents
    checked against the sub-agents it can see."""
    return load_job(
        args.job,
        model=args.model,
        inputs=parse_set_options(args.set_options),
        user_skills=args.user_skills,
        **overrides,
    )


def validate_command(args: argparse.Namespace) -> int:
    try:
        job = load_job_from_args(args)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_SPEC_ERROR
    count = len(job.plan)
    print(f"ok: {job.name} ({count} step{'' if count == 1 else 's'})")
    return EXIT_OK
