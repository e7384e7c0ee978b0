"""`orchestrator serve JOB.yaml [JOB.yaml ...]`: jobs as one A2A agent (docs/a2a.md).

Each job is a skill of the agent; a message runs the job it names (metadata `skill`) or the
first. Every task is a run of its own, with its own trace under `--trace-dir`; a task whose
run waits for its client's answer is kept there too, so a server started again on the same
folder takes it back. On an address
other than loopback a bearer token is required (`--token-env NAME`: the variable holding it,
or several, one per client, separated by commas or spaces).
The SDK lives in the `[a2a]` extra; without it the command says so.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from ..errors import ConfigError
from ..jobs import Job, load_job
from ..security.inventory import TRACE_FOLDER
from .jobs import EXIT_INTERRUPTED, EXIT_OK, EXIT_SPEC_ERROR, show_error

EXTRA = "serving needs the `[a2a]` extra: pip install 'orchestrator[a2a]'"


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser(
        "serve",
        help="serve jobs as an A2A agent",
        description="Serve jobs as one A2A agent (JSON-RPC over HTTP, with streaming): a "
        "message starts a run of a job; its steps stream as status updates, its output is the "
        "final message and the files it wrote are artifacts.",
    )
    serve.add_argument("jobs", nargs="+", metavar="JOB.yaml", help="the job specs to serve")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port (8000; 0: any free one)")
    serve.add_argument(
        "--max-tasks", type=int, default=4, help="runs at once; a task past that is rejected (4)"
    )
    serve.add_argument(
        "--max-waiting",
        type=int,
        default=100,
        help="tasks waiting for their client's answer; past that a new task is rejected (100)",
    )
    serve.add_argument(
        "--token-env",
        metavar="NAME",
        help="environment variable holding the bearer token every request must carry, or "
        "several (one per client) separated by commas or spaces; a task belongs to the token "
        "that created it (required on an address other than loopback)",
    )
    serve.add_argument(
        "--max-request-bytes",
        type=int,
        default=1_000_000,
        help="requests with a larger body are refused (1000000)",
    )
    serve.add_argument(
        "--keep-tasks",
        type=int,
        default=100,
        help="ended tasks kept for GetTask; the oldest are forgotten first (100)",
    )
    serve.add_argument(
        "--keep-seconds",
        type=float,
        default=3600.0,
        help="how long an ended task is kept for GetTask (3600)",
    )
    serve.add_argument(
        "--trace-dir",
        type=Path,
        default=TRACE_FOLDER,
        help=f"where each task's trace is written, and the tasks that wait for their "
        f"client's answer are kept across restarts ({TRACE_FOLDER})",
    )
    serve.add_argument(
        "--user-skills", action="store_true", help="also search the home skill folders"
    )
    serve.set_defaults(handler=serve_command)


def serve_command(args: argparse.Namespace) -> int:
    try:
        jobs = [_load(path, args.user_skills) for path in args.jobs]
        tokens = _tokens(args.token_env)
        if args.max_tasks < 1 or args.max_waiting < 1:
            raise ConfigError("--max-tasks and --max-waiting must be at least 1")
        if args.keep_tasks < 0 or args.keep_seconds < 0:
            raise ConfigError("--keep-tasks and --keep-seconds cannot be negative")
    except ConfigError as exc:
        show_error(exc)
        return EXIT_SPEC_ERROR
    try:
        from ..a2a import serve
    except ImportError:
        print(f"error: {EXTRA}", file=sys.stderr)
        return EXIT_SPEC_ERROR

    def ready(url: str) -> None:
        names = ", ".join(job.name for job in jobs)
        print(f"serving {names} at {url}", file=sys.stderr, flush=True)
        print(f"agent card: {url}.well-known/agent-card.json", file=sys.stderr, flush=True)

    try:
        asyncio.run(
            serve(
                jobs,
                host=args.host,
                port=args.port,
                tokens=tokens,
                max_tasks=args.max_tasks,
                max_waiting=args.max_waiting,
                keep_tasks=args.keep_tasks,
                keep_seconds=args.keep_seconds,
                max_request_bytes=args.max_request_bytes,
                trace_dir=args.trace_dir,
                user_skills=args.user_skills,
                ready=ready,
            )
        )
    except ConfigError as exc:
        show_error(exc)
        return EXIT_SPEC_ERROR
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc.strerror}", file=sys.stderr)
        return EXIT_SPEC_ERROR
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_OK


def _load(path: str, user_skills: bool) -> Job:
    return load_job(path, user_skills=user_skills, open_inputs=True)


def _tokens(name: str | None) -> list[str]:
    """The tokens the variable `name` holds (commas or spaces between them)."""
    if name is None:
        return []
    tokens = os.environ.get(name, "").replace(",", " ").split()
    if not tokens:
        raise ConfigError(f"--token-env {name}: the environment variable is not set or empty")
    return tokens
