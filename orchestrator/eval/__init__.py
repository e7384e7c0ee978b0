"""Evals: run a job's cases in several variants and compare them (`orchestrator eval`).

    from orchestrator.eval import EvalOptions, load_eval, run_eval_sync
    result = run_eval_sync(load_eval("my.eval.yaml"), EvalOptions(out=Path("out")))
    print(render_table(result.summary))

An eval file names a job, its cases (inline, CSV or JSONL), the checks every run is held to
(output, files, trajectory, limits, a Python function, a model as judge) and the variants
(model, model settings, skills added or removed, disclosure mode, sub-agents, crossed as a
matrix if asked), and probes: questions asked of each run's conversation as the model had it
at a point, to measure what compacting it lost. Runs are resumable, can be recorded and
replayed offline call for call, and a replay that departs from its recording says where. An
optional part of the package: it uses the core (and the HTML report for its page), and the
core never imports it. See docs/eval.md.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .loading import LoadedEval, load_eval
from .recorded import EvalCase, eval_cases
from .runner import EvalOptions, EvalProgress, EvalRunner, read_lines
from .scoring import RunRecord, Score
from .spec import Case, EvalError, EvalSpec, Probe, Scorer, Variant, eval_schema
from .summary import EvalSummary, VariantRow, benchmark, render_table, summarize, wilson

__all__ = [
    "Case",
    "EvalCase",
    "EvalError",
    "EvalOptions",
    "EvalResult",
    "EvalSpec",
    "EvalSummary",
    "LoadedEval",
    "Probe",
    "RunRecord",
    "Score",
    "Scorer",
    "Variant",
    "VariantRow",
    "eval_cases",
    "eval_schema",
    "load_eval",
    "render_table",
    "run_eval",
    "run_eval_sync",
    "wilson",
]


@dataclass
class EvalResult:
    """An eval's outcome: what this invocation ran, and the summary of every run of the eval
    in its results file (runs done earlier and skipped included)."""

    progress: EvalProgress
    summary: EvalSummary
    results: Path
    lines: list[dict[str, Any]]
    """The last line of each of the eval's runs in the results file."""
    benchmark: Path | None = None
    """Where `benchmark.json` went (an eval with a baseline)."""


async def run_eval(loaded: LoadedEval, options: EvalOptions) -> EvalResult:
    """Run the eval's runs not done yet in `options.results_file`; summarize them all."""
    runner = EvalRunner(loaded, options)
    progress = await runner.run()
    keys = [planned.key for planned in progress.planned]
    lines = read_lines(options.results_file, keys)
    titles = [variant.title() for variant in runner.variants]
    summary = summarize(loaded.spec.name, titles, lines, loaded.spec.baseline)
    result = EvalResult(progress, summary, options.results_file, lines)
    if loaded.spec.baseline is not None:
        when = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        found = benchmark(
            summary,
            lines,
            when,
            skill_path=str(loaded.skill) if loaded.skill is not None else None,
            executor_model=_executor_model(runner, options),
        )
        text = json.dumps(found, indent=2, default=str)
        result.benchmark = options.results_file.parent / "benchmark.json"
        result.benchmark.write_text(text + "\n", encoding="utf-8")
    return result


def _executor_model(runner: EvalRunner, options: EvalOptions) -> str | None:
    """The model the eval's runs were made with: `--model`, else the variants' (a variant
    without one runs the job's); None where they differ."""
    if options.model is not None:
        return options.model
    models = {str(v.model) if v.model is not None else None for v in runner.variants}
    if None in models and runner.cases:
        models.discard(None)
        models.add(runner.loaded.job_for(runner.variants[0], runner.cases[0]).model.name)
    return models.pop() if len(models) == 1 else None


def run_eval_sync(loaded: LoadedEval, options: EvalOptions) -> EvalResult:
    """`run_eval` from synchronous code."""
    return asyncio.run(run_eval(loaded, options))
