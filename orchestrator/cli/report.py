"""`orchestrator report TRACE|last [-o FILE]`: a run's trace as one self-contained HTML page."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..report import write_report
from ..trace.reader import TraceReader
from .jobs import EXIT_OK, EXIT_SPEC_ERROR
from .resume import existing_trace
from .run import DEFAULT_TRACE_DIR


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    report = commands.add_parser(
        "report",
        help="write a run's HTML report",
        description="Write a run's report as one HTML file that needs nothing but a browser: "
        "the task graph, a timeline, tokens per agent, skills, errors and every conversation.",
    )
    report.add_argument(
        "path", metavar="TRACE", help="the run's JSONL trace, or `last` (the newest run)"
    )
    report.add_argument("--dir", type=Path, default=DEFAULT_TRACE_DIR, help="where `last` looks")
    report.add_argument(
        "-o",
        "--output",
        type=Path,
        metavar="FILE",
        help="where to write the page (default: the trace's path with .html)",
    )
    report.set_defaults(handler=report_command)


def report_command(args: argparse.Namespace) -> int:
    path = existing_trace(args.path, args.dir)
    if path is None:
        return EXIT_SPEC_ERROR
    reader = TraceReader(path)
    target = write_report(path, args.output, reader=reader)
    for problem in reader.problems:
        print(f"note: {path}: skipped {problem}", file=sys.stderr)
    size = target.stat().st_size
    print(f"wrote {target} ({size / 1024:,.0f} KB); open it in a browser")
    return EXIT_OK
