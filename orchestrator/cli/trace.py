"""`orchestrator trace show TRACE`: a finished run, summarized from its trace."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..trace import read_trace
from ..trace.summary import render, summarize
from .jobs import EXIT_OK, EXIT_SPEC_ERROR


def register(commands: argparse._SubParsersAction) -> None:
    trace = commands.add_parser("trace", help="read traces")
    actions = trace.add_subparsers(dest="action", metavar="ACTION", required=True)
    show = actions.add_parser("show", help="summarize a run from its trace")
    show.add_argument("path", type=Path, metavar="TRACE")
    show.set_defaults(handler=show_command)


def show_command(args: argparse.Namespace) -> int:
    if not args.path.is_file():
        print(f"error: no trace at {args.path}", file=sys.stderr)
        return EXIT_SPEC_ERROR
    print(render(summarize(read_trace(args.path))))
    return EXIT_OK
