"""`orchestrator ask "goal"`: a one-off planner run, no job file.

The planner gets the skills and sub-agents of the folders named (without `--skills`, those of
the working folder's `skills/`, `.claude/skills/`, ... as a job's spec folder has them), and the
built-in ones. Its workspace (no shell, python or network) is `--workspace`; by default the
working folder, or its `work/` folder when the working folder holds configuration (a `.env`,
skills, sub-agents, a job spec), so that what decides a run stays out of the model's reach.
It streams its answer to stdout as the model writes it. The model is `--model`, else the alias
`default` of the user's alias file. Keys come from the environment, then a `.env` file in the
working folder.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

from pydantic import ValidationError

from ..agent import DEFAULT_MAX_STEPS, RunResult
from ..errors import ConfigError
from ..jobs import parse_model_options, read_dotenv
from ..models import DEFAULT_ALIAS, ModelAliases, ModelSettings, user_alias_file
from ..planner import Orchestrator
from ..security import Permissions, SecretMask
from ..security.inventory import configuration_in, default_workspace
from ..skills.disclosure import DEFAULT_DISCLOSURE
from ..skills.discovery import discover
from ..trace import Trace, new_run_id
from .jobs import (
    EXIT_BUDGET,
    EXIT_FAILED_STEP,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SPEC_ERROR,
    add_disclosure_argument,
    add_model_arguments,
    show_error,
)
from .output import AnswerStream, masked_output
from .progress import PlainProgress
from .run import default_trace_path, refusal_lines

EMPTY_ANSWER = "the run completed, but the model's final answer was empty"
EXIT_CODES = {"completed": EXIT_OK, "budget_exhausted": EXIT_BUDGET, "cancelled": EXIT_INTERRUPTED}


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ask = commands.add_parser(
        "ask",
        help="run the planner on one goal, without a job file",
        description="Run the planner on GOAL and stream its answer to stdout.",
    )
    ask.add_argument("goal", help="what to do, in a sentence or a paragraph")
    ask.add_argument(
        "--skills",
        action="append",
        default=[],
        metavar="DIR",
        help="a folder of skills, searched before the built-in ones (repeatable)",
    )
    ask.add_argument(
        "--subagents",
        action="append",
        default=[],
        metavar="DIR",
        help="a folder of sub-agent definitions, searched before the built-in ones (repeatable)",
    )
    ask.add_argument(
        "--user-skills",
        action="store_true",
        help="also search the home folders for skills and sub-agents (~/.claude/skills, ...)",
    )
    ask.add_argument(
        "--workspace",
        type=Path,
        metavar="DIR",
        help="the folder the model's file tools work in (default: the working folder, or its "
        "work/ folder when the working folder holds configuration)",
    )
    add_model_arguments(ask, "the model; default: the alias 'default' of your alias file")
    ask.add_argument("--max-tokens", type=int, metavar="N", help="the budget of the whole run")
    ask.add_argument(
        "--max-steps",
        type=int,
        default=DEFAULT_MAX_STEPS,
        metavar="N",
        help=f"model calls per agent (default {DEFAULT_MAX_STEPS})",
    )
    ask.add_argument("--trace", type=Path, help="where to write the JSONL trace")
    ask.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    add_disclosure_argument(ask, "default: progressive")
    ask.set_defaults(handler=ask_command)


def ask_command(args: argparse.Namespace) -> int:
    try:
        orchestrator = _orchestrator(args)
    except ConfigError as exc:  # `ask` has no job spec: only this folder's .env counts
        show_error(exc, spec=False)
        return EXIT_SPEC_ERROR
    for warning in orchestrator.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    workspace = orchestrator.permissions.workspace
    if not args.quiet and args.workspace is None and workspace != Path.cwd():
        print(
            f"workspace: {workspace} (the working folder holds configuration: "
            f"{', '.join(configuration_in(Path.cwd()))}; --workspace chooses another)",
            file=sys.stderr,
        )
    run_id = new_run_id()
    trace_path = args.trace or default_trace_path("ask", run_id)
    secrets = orchestrator.secrets()  # the environment's and the .env file's
    with masked_output(SecretMask(secrets)):
        listeners = [] if args.quiet else [PlainProgress(sys.stderr)]
        try:
            trace = Trace(trace_path, listeners=listeners, secrets=secrets, run_id=run_id)
        except ConfigError as exc:  # the path holds another run, or a run still writes it
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_SPEC_ERROR
        except OSError as exc:
            print(f"error: cannot write the trace to {trace_path}: {exc.strerror}", file=sys.stderr)
            return EXIT_SPEC_ERROR
        stream = AnswerStream(secrets=secrets)
        began = time.time()
        try:
            result = asyncio.run(orchestrator.run(args.goal, trace=trace, stream=stream))
        except KeyboardInterrupt:
            print(f"interrupted; the trace is in {trace_path}", file=sys.stderr)
            return EXIT_INTERRUPTED
        finally:
            trace.close()
        stream.finish(result.text)
        if not args.quiet:
            _summary(result, time.time() - began, trace_path)
        for line in refusal_lines(result.refused_by_agent()):
            print(line, file=sys.stderr)
    if result.empty_answer:  # with --quiet too: nothing on stdout must not read as success
        print(f"error: {EMPTY_ANSWER}; the trace is in {trace_path}", file=sys.stderr)
        return EXIT_FAILED_STEP
    return EXIT_CODES.get(result.status, EXIT_FAILED_STEP)


def _orchestrator(args: argparse.Namespace) -> Orchestrator:
    environ = {**read_dotenv([Path.cwd()]), **os.environ}
    aliases = ModelAliases.standard(environ=environ)
    name = args.model or _default_model(aliases)
    options = parse_model_options(args.model_options)
    try:
        model = ModelSettings.model_validate({"name": name, **options})
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ConfigError(f"--model-option {where}: {first['msg']}") from None
    here = Path.cwd()
    folders = discover(
        here,
        skills=args.skills or None,
        subagents=args.subagents or None,
        user=args.user_skills,
    )
    workspace = args.workspace if args.workspace is not None else default_workspace(here)
    if args.workspace is not None and not args.workspace.is_dir():
        raise ConfigError(f"--workspace {args.workspace}: no such folder")
    return Orchestrator(
        model,
        skills=folders.skills,
        subagents=folders.subagents,
        max_tokens=args.max_tokens,
        max_steps=args.max_steps,
        aliases=aliases,
        environ=environ,
        permissions=Permissions(workspace=workspace.resolve()).protecting(folders.protected),
        disclosure=args.disclosure or DEFAULT_DISCLOSURE,
    )


def _default_model(aliases: ModelAliases) -> str:
    if DEFAULT_ALIAS in aliases:
        return DEFAULT_ALIAS
    raise ConfigError(
        "no model: pass --model (e.g. --model sonnet, or --model ollama:qwen3:8b), or add "
        f"'{DEFAULT_ALIAS}: MODEL' to {user_alias_file()}"
    )


def _summary(result: RunResult, seconds: float, trace: Path) -> None:
    line = f"ask: {result.status} in {seconds:.1f}s, {result.total_usage.total_tokens:,} tokens"
    if result.error:
        line += f": {result.error}"
    print(f"{line}; trace: {trace}", file=sys.stderr)
