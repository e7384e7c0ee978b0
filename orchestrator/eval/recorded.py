"""Recorded evals as test cases: each run of an eval, replayed from its recording, one test.

    from orchestrator.eval import eval_cases

    CASES = eval_cases("evals/my.eval.yaml", replay="evals/recordings/my")

    @pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
    def test_my_eval(case, tmp_path):
        case.check(tmp_path)

`check` runs the case in each repeat (offline, with `replay`), and fails with every check
that did not pass, every divergence from the recording (where the first request differs,
and how) and every error.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .loading import LoadedEval, load_eval
from .runner import EvalOptions, EvalRunner, read_lines


@dataclass(frozen=True)
class EvalCase:
    """One case of one variant of an eval, to run as a test."""

    loaded: LoadedEval
    variant: str
    case: str
    replay: Path | None = None

    @property
    def id(self) -> str:
        return f"{self.variant}/{self.case}"

    def check(self, out: Path) -> list[dict[str, Any]]:
        """Run it (its results under `out`); raise AssertionError saying what failed.
        Returns its result lines."""
        options = EvalOptions(
            out=Path(out),
            variants=[self.variant],
            cases=[self.case],
            replay=self.replay,
            fresh=True,
        )
        progress = asyncio.run(EvalRunner(self.loaded, options).run())
        lines = read_lines(options.results_file, [p.key for p in progress.planned])
        problems = [_problem(line) for line in lines if not line.get("passed")]
        if problems:
            raise AssertionError("\n".join(problems))
        return lines


def eval_cases(path: str | Path, *, replay: str | Path | None = None) -> list[EvalCase]:
    """Every (variant, case) of the eval file at `path`, replayed from `replay` if given."""
    loaded = load_eval(path)
    recordings = Path(replay) if replay is not None else None
    return [
        EvalCase(loaded, variant.title(), str(case.id), recordings)
        for variant in loaded.variants
        for case in loaded.cases
    ]


def _problem(line: dict[str, Any]) -> str:
    key = line.get("key")
    if line.get("divergence"):
        return f"{key} diverged from its recording: {line['divergence']}"
    if line.get("error"):
        return f"{key} could not run: {line['error']}"
    failed = [
        f"{s['name']} ({s.get('reason')})" for s in line.get("scores") or [] if not s["passed"]
    ]
    return f"{key} failed: {'; '.join(failed)}"
