"""`orchestrator run-batch JOB.yaml --inputs rows.csv|rows.jsonl`: one job per input row.

Rows run `--concurrency` at a time (each job's own `max_parallel` still holds inside it),
each with a trace of its own under `--traces`. The budget is each job's own (`--budget job`,
the spec's `max_tokens`) or one for the whole batch (`--budget batch --max-tokens N`: every
job draws from the same N tokens, on the cluster too). Each row ends as one JSON line in
`--results` (default: next to the inputs, `NAME.results.jsonl`); running the same command
again skips the rows already completed. Works with either executor (`--executor ray`).
The exit code is 0 when every row has completed, 3 when some did not, 2 for bad input.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from ..agent import TokenBudget
from ..errors import ConfigError
from ..jobs import (
    Job,
    JobResult,
    load_job,
    parse_model_options,
    parse_set_options,
    prepare_resume,
    recorded_result,
)
from ..jobs.batch import Batch, Row, read_rows
from ..messages import plural
from ..planner import Orchestrator, executor_for
from ..trace import Trace, new_run_id
from .jobs import (
    EXIT_FAILED_STEP,
    EXIT_OK,
    EXIT_SPEC_ERROR,
    EXIT_WAITING,
    add_executor_arguments,
    add_job_arguments,
    show_error,
    with_command_line,
)
from .run import DEFAULT_TRACE_DIR, refusal_lines


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    batch = commands.add_parser(
        "run-batch",
        help="run a job once per input row (CSV or JSONL)",
        description="Run JOB.yaml once per row of --inputs, the row's columns as its inputs.",
    )
    add_job_arguments(batch)
    batch.add_argument(
        "--inputs", type=Path, required=True, metavar="ROWS", help="rows.csv or rows.jsonl"
    )
    batch.add_argument("--results", type=Path, help="the results file (one JSON line per row)")
    batch.add_argument("--traces", type=Path, help="the folder for the rows' traces")
    batch.add_argument(
        "--concurrency", type=int, default=4, metavar="N", help="jobs at once (default 4)"
    )
    batch.add_argument(
        "--budget",
        choices=["job", "batch"],
        default="job",
        help="one budget per job (the spec's max_tokens; the default) or one for the batch",
    )
    batch.add_argument(
        "--max-tokens", type=int, metavar="N", help="the batch's budget (with --budget batch)"
    )
    batch.add_argument(
        "--max-cost-usd",
        type=float,
        metavar="USD",
        help="the batch's budget in US dollars (with --budget batch)",
    )
    batch.add_argument("--quiet", action="store_true", help="no line per row on stderr")
    add_executor_arguments(batch)
    batch.set_defaults(handler=batch_command)


def batch_command(args: argparse.Namespace) -> int:
    try:
        rows = read_rows(args.inputs)
        runner = BatchRun(args, rows[0] if rows else Row(1, "1", {}))
        lines = asyncio.run(runner.batch.run(rows, runner.start, runner.resume))
    except ConfigError as exc:
        show_error(exc)
        return EXIT_SPEC_ERROR
    completed = sum(1 for line in lines if line["status"] == "completed")
    waiting = sum(1 for line in lines if line["status"] == "input_required")
    refused = sum(1 for line in lines if line["status"] == "completed" and line.get("refused"))
    skipped = len(rows) - len(lines)
    print(
        f"batch: {plural(len(lines), 'row')} run ({completed} completed"
        + (f", {refused} of them with refused calls" if refused else "")
        + (f", {waiting} waiting for a person" if waiting else "")
        + f", {len(lines) - completed - waiting} not), "
        f"{skipped} already done; {runner.batch.usage.total_tokens:,} tokens; "
        f"results: {runner.batch.results}",
        file=sys.stderr,
    )
    if waiting:
        print(
            "a waiting row goes on with `orchestrator resume TRACE --answer ID=VALUE` (its "
            "`trace` and `waiting` are in the results); running the batch again then records "
            "its result",
            file=sys.stderr,
        )
    if completed == len(lines):
        return EXIT_OK
    return EXIT_WAITING if completed + waiting == len(lines) else EXIT_FAILED_STEP


class BatchRun:
    """What the rows of one `run-batch` share: the overrides, the executor, the budget."""

    def __init__(self, args: argparse.Namespace, first_row: Row) -> None:
        self.args = args
        self.sets = parse_set_options(args.set_options)
        self.model_options = parse_model_options(args.model_options)
        self.batch = Batch(
            args.job,
            results=args.results or args.inputs.with_name(f"{args.inputs.stem}.results.jsonl"),
            concurrency=args.concurrency,
            load=lambda spec, inputs: self.load(spec, inputs),
            on_line=None if args.quiet else _show,
        )
        # A spec that cannot load (with the first row's inputs) stops the batch up front.
        first = self.load(args.job, self.batch.inputs_of(first_row))
        self.executor = executor_for(first)
        # A job that would certainly fail stops the batch before any row, as `run` stops.
        checked = Orchestrator.from_job(first, user_skills=args.user_skills, executor=self.executor)
        for warning in checked.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        self.budget = self._budget(first)
        name = "".join(c if c.isalnum() or c in "-_" else "-" for c in first.name)
        self.traces: Path = args.traces or DEFAULT_TRACE_DIR / f"batch-{name}"

    def load(self, spec: Path, inputs: dict[str, str]) -> Job:
        job = load_job(
            spec,
            model=self.args.model,
            model_options=self.model_options,
            inputs={**self.sets, **inputs},
            user_skills=self.args.user_skills,
        )
        return with_command_line(job, self.args)

    def _budget(self, job: Job) -> TokenBudget | None:
        tokens, cost = self.args.max_tokens, self.args.max_cost_usd
        if self.args.budget == "job":
            if tokens is not None or cost is not None:
                raise ConfigError(
                    "--max-tokens and --max-cost-usd are the batch's budget: give --budget batch"
                )
            return None
        bad = (tokens is not None and tokens < 1) or (cost is not None and cost <= 0)
        if (tokens is None and cost is None) or bad:
            raise ConfigError("--budget batch needs --max-tokens N (N > 0) or --max-cost-usd X")
        budget = TokenBudget(tokens, max_cost=cost)
        if self.executor is not None:  # on the cluster, for every job's workers to share
            return self.executor.shared_budget(budget)
        return budget

    async def start(self, job: Job, row: Row) -> JobResult:
        # The batch's own files decide what its next run does: read-only to every row's model.
        permissions = job.permissions.protecting([self.args.inputs, self.batch.results])
        orchestrator = Orchestrator.from_job(
            job, user_skills=self.args.user_skills, executor=self.executor, permissions=permissions
        )
        safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in row.id)[:48]
        path = self.traces / f"{safe}-{new_run_id()}.jsonl"
        budget = self.budget
        if budget is not None and self.executor is None:
            # The spec's own caps still hold for each job, inside the batch's budget.
            budget = budget.scoped(orchestrator.max_tokens, orchestrator.max_cost)
        secrets = orchestrator.secrets()
        self.batch.mask_also(secrets)  # the row's line is written once its job has ended
        with Trace(path, secrets=secrets) as trace:
            return await orchestrator.run_job(job, trace=trace, budget=budget)

    async def resume(self, trace: Path) -> JobResult:
        """A row that waited for a person goes on from its trace: its answers were given with
        `orchestrator resume` (then it has its result), or it waits again; the batch's own
        files stay read-only to it, as to every row."""
        resumption = prepare_resume(trace, user_skills=self.args.user_skills)
        if resumption.job is None:  # it finished (answered since): its recorded result
            return resumption.finished or recorded_result(resumption.checkpoint, trace)
        protected = [self.args.inputs, self.batch.results]
        permissions = resumption.job.permissions.protecting(protected)
        orchestrator, job = Orchestrator.for_resume(
            resumption, permissions=permissions, executor=self.executor
        )
        secrets = orchestrator.secrets()
        self.batch.mask_also(secrets)
        with Trace(trace, resume=resumption.checkpoint, secrets=secrets) as opened:
            return await orchestrator.run_job(job, trace=opened)


def _show(line: dict[str, Any]) -> None:
    usage = line.get("usage") or {}
    detail = line.get("error") or f"{usage.get('total_tokens', 0):,} tokens"
    print(f"row {line['row']} ({line['id']}): {line['status']}, {detail}", file=sys.stderr)
    for warning in refusal_lines(line.get("refused") or {}):
        print(f"row {line['row']} ({line['id']}): {warning}", file=sys.stderr)
