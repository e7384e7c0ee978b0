"""The `orchestrator` command line. Each command group lives in a module of its own."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from . import ask, batch, jobs, report, resume, run, skills, subagents, trace
from .output import masked_output


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="orchestrator",
        description="Run skills-based multi-agent jobs.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for register in _command_groups():
        register(commands)
    return parser


def _command_groups() -> list:
    return [
        jobs.register,
        skills.register,
        run.register,
        batch.register,
        resume.register,
        ask.register,
        trace.register,
        report.register,
        subagents.register,
    ]


def main(argv: Sequence[str] | None = None) -> int:
    # Commands print the catalog's warnings themselves: the logger must not repeat them.
    logging.getLogger("orchestrator.skills").addHandler(logging.NullHandler())
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        with masked_output():
            return int(handler(args) or 0)
    except BrokenPipeError:
        # The reader went away (`orchestrator run ... | head`): stop quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _version() -> str:
    try:
        return version("orchestrator")
    except PackageNotFoundError:
        return "unknown"
