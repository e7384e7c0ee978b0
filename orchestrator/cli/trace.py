"""`orchestrator trace show TRACE|last` and `orchestrator trace list`: runs from their traces."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

from ..security.signing import TraceKeyRefused
from ..trace import read_trace
from ..trace.history import RunInfo, list_runs
from ..trace.reader import verify_trace
from ..trace.summary import render, summarize
from ..trace.writer import is_locked
from .jobs import EXIT_OK, EXIT_SPEC_ERROR
from .resume import existing_trace
from .run import DEFAULT_TRACE_DIR


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    trace = commands.add_parser("trace", help="list runs and summarize one from its trace")
    actions = trace.add_subparsers(dest="action", metavar="ACTION", required=True)
    show = actions.add_parser("show", help="summarize a run from its trace")
    show.add_argument("path", metavar="TRACE", help="a trace file, or `last` (the newest run)")
    show.add_argument("--dir", type=Path, default=DEFAULT_TRACE_DIR, help="where `last` looks")
    show.add_argument(
        "--json", action="store_true", help="the summary as one JSON object (tokens, cache, cost)"
    )
    show.set_defaults(handler=show_command)
    listing = actions.add_parser("list", help="recent runs, newest first")
    listing.add_argument(
        "--dir", type=Path, default=DEFAULT_TRACE_DIR, help="the folder of traces to list"
    )
    listing.add_argument("--limit", type=int, default=20, help="how many runs (default 20)")
    listing.add_argument("--json", action="store_true", help="one JSON object per run")
    listing.add_argument(
        "--waiting",
        action="store_true",
        help="only the runs that wait for a person's answer (input_required), each with "
        "what it asks and the command that answers it",
    )
    listing.set_defaults(handler=list_command)


def show_command(args: argparse.Namespace) -> int:
    path = existing_trace(args.path, args.dir)
    if path is None:
        return EXIT_SPEC_ERROR
    events = read_trace(path)
    if not events:
        print(f"error: {path} is not a trace: it holds no events", file=sys.stderr)
        return EXIT_SPEC_ERROR
    for problem in events.problems:
        print(f"note: {path}: skipped {problem}", file=sys.stderr)
    summary = summarize(events, live=is_locked(path), skips=events)
    try:
        signature = verify_trace(path)
    except TraceKeyRefused as refused:
        signature = None
        print(f"note: {refused}; until then no trace can be checked or resumed", file=sys.stderr)
    if signature is not None and not signature.valid:
        print(
            f"note: {path} line {signature.bad_line}: {signature.reason}; this trace was changed "
            "after its run wrote it, or written elsewhere: it cannot be resumed",
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps({"trace": str(path), **summary.as_dict()}))
        return EXIT_OK
    if args.path == "last":
        print(f"trace: {path}")
    print(render(summary))
    return EXIT_OK


def list_command(args: argparse.Namespace) -> int:
    runs = list_runs(args.dir, limit=max(0, args.limit))
    if args.waiting:
        runs = [run for run in runs if run.waiting]
    for run in runs:
        for problem in run.skipped:
            print(f"note: {run.path}: skipped {problem}", file=sys.stderr)
    if args.json:
        for run in runs:
            print(json.dumps(_as_json(run)))
        return EXIT_OK
    if not runs:
        waiting = " waiting for a person" if args.waiting else ""
        print(f"no runs{waiting} in {args.dir}", file=sys.stderr)
        return EXIT_OK
    if args.waiting:
        _print_waiting(runs)
        return EXIT_OK
    header = ("RUN", "NAME", "STATUS", "TOKENS", "COST", "STARTED", "TRACE")
    rows: list[tuple[str, ...]] = [header]
    rows.extend(_row(run) for run in runs)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print("  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[-1]]))
    return EXIT_OK


def _print_waiting(runs: list[RunInfo]) -> None:
    """Each waiting run, its requests (questions quoted: a model's or a remote's text) and
    the command that answers them."""
    from ..agent.waiting import request_lines  # loaded where runs wait

    for run in runs:
        print(f"{run.run_id or '-'}  {run.name or '-'}  {run.path}")
        for line in request_lines(run.waiting):
            print(f"  {line}")
        print(f"  answer: orchestrator resume {shlex.quote(str(run.path))} --answer ID=VALUE")


def _row(run: RunInfo) -> tuple[str, ...]:
    status = run.status if run.attempts <= 1 else f"{run.status} ({run.attempts} attempts)"
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run.started or 0))
    cost = f"{run.cost:.4f}" if run.cost is not None else "-"
    return (
        run.run_id or "-",
        run.name or "-",
        status,
        f"{run.tokens:,}",
        cost,
        started,
        str(run.path),
    )


def _as_json(run: RunInfo) -> dict[str, object]:
    return {
        "run": run.run_id,
        "job": run.job,
        "goal": None if run.job is not None else run.goal,
        "status": run.status,
        "attempts": run.attempts,
        "tokens": run.tokens,
        "cost": run.cost,
        "started": run.started,
        "trace": str(run.path),
        "waiting": [
            r.model_dump(mode="json", exclude_none=True, exclude={"state"}) for r in run.waiting
        ],
    }
