"""What an eval's result lines add up to: a row per variant (pass rate with its 95% interval,
mean score, tokens, cached share, cost, time), the cases that flipped between variants, and
the runs that diverged from their recording."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

Line = dict[str, Any]
Z95 = 1.959964


def wilson(passed: int, runs: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a pass rate: sound for few runs and for 0% or 100%."""
    if runs == 0:
        return 0.0, 1.0
    rate = passed / runs
    denominator = 1 + z * z / runs
    centre = (rate + z * z / (2 * runs)) / denominator
    half = z * math.sqrt(rate * (1 - rate) / runs + z * z / (4 * runs * runs)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass
class VariantRow:
    """One variant's figures over its runs."""

    name: str
    runs: int = 0
    passed: int = 0
    errors: int = 0
    diverged: int = 0
    score_total: float = 0.0
    tokens: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    cost: float | None = None
    seconds: float = 0.0
    judge_tokens: int = 0
    judge_cost: float | None = None

    @property
    def pass_rate(self) -> float:
        return self.passed / self.runs if self.runs else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.passed, self.runs)

    @property
    def mean_score(self) -> float:
        return self.score_total / self.runs if self.runs else 0.0

    @property
    def cached_share(self) -> float:
        return self.cached_tokens / self.input_tokens if self.input_tokens else 0.0

    def add(self, line: Line) -> None:
        self.runs += 1
        self.passed += bool(line.get("passed"))
        self.errors += line.get("status") == "error"
        self.diverged += line.get("status") == "diverged"
        self.score_total += float(line.get("score") or 0.0)
        usage = line.get("usage") or {}
        self.tokens += int(usage.get("total_tokens") or 0)
        self.input_tokens += int(usage.get("input_tokens") or 0)
        self.cached_tokens += int(usage.get("cache_read_tokens") or 0)
        if line.get("cost") is not None:
            self.cost = (self.cost or 0.0) + float(line["cost"])
        self.seconds += float(line.get("seconds") or 0.0)
        judge = line.get("judge") or {}
        self.judge_tokens += int((judge.get("usage") or {}).get("total_tokens") or 0)
        if judge.get("cost") is not None:
            self.judge_cost = (self.judge_cost or 0.0) + float(judge["cost"])

    def as_dict(self) -> dict[str, Any]:
        low, high = self.interval
        return {
            "variant": self.name,
            "runs": self.runs,
            "passed": self.passed,
            "pass_rate": round(self.pass_rate, 4),
            "interval": [round(low, 4), round(high, 4)],
            "mean_score": round(self.mean_score, 4),
            "tokens_per_run": round(self.tokens / self.runs) if self.runs else 0,
            "cached_share": round(self.cached_share, 4),
            "cost_usd": self.cost,
            "seconds_per_run": round(self.seconds / self.runs, 3) if self.runs else 0.0,
            "errors": self.errors,
            "diverged": self.diverged,
            "judge_tokens": self.judge_tokens,
            "judge_cost_usd": self.judge_cost,
        }


@dataclass
class Flip:
    """A case that passed in some variants and failed in others: its passes per variant."""

    case: str
    passes: dict[str, str]


@dataclass
class EvalSummary:
    """An eval's table, flips and divergences."""

    name: str
    rows: list[VariantRow]
    flips: list[Flip] = field(default_factory=list)
    divergences: list[Line] = field(default_factory=list)
    errors: list[Line] = field(default_factory=list)

    def below(self, min_pass: float) -> list[VariantRow]:
        """The variants whose pass rate is under `min_pass`."""
        return [row for row in self.rows if row.pass_rate < min_pass]

    def as_dict(self) -> dict[str, Any]:
        return {
            "eval": self.name,
            "variants": [row.as_dict() for row in self.rows],
            "flips": [{"case": f.case, "passes": f.passes} for f in self.flips],
            "diverged": [
                {"run": line["key"], "divergence": line.get("divergence")}
                for line in self.divergences
            ],
        }


def summarize(name: str, variants: Sequence[str], lines: Sequence[Line]) -> EvalSummary:
    rows = {variant: VariantRow(variant) for variant in variants}
    per_case: dict[str, dict[str, list[bool]]] = {}
    for line in lines:
        row = rows.get(str(line.get("variant")))
        if row is None:
            continue
        row.add(line)
        by_variant = per_case.setdefault(str(line.get("case")), {})
        by_variant.setdefault(row.name, []).append(bool(line.get("passed")))
    flips = []
    for case, results in per_case.items():
        verdicts = {variant: sum(r) / len(r) >= 0.5 for variant, r in results.items()}
        if len(set(verdicts.values())) > 1:
            passes = {variant: f"{sum(r)}/{len(r)}" for variant, r in results.items()}
            flips.append(Flip(case, passes))
    return EvalSummary(
        name,
        list(rows.values()),
        flips,
        [line for line in lines if line.get("status") == "diverged"],
        [line for line in lines if line.get("status") == "error"],
    )


def render_table(summary: EvalSummary) -> str:
    """The summary as plain text: the table, then flips, divergences and errors."""
    head = ["variant", "pass", "95% interval", "score", "tokens/run", "cached", "cost", "s/run"]
    body = []
    for row in summary.rows:
        low, high = row.interval
        body.append(
            [
                row.name,
                f"{row.passed}/{row.runs} {row.pass_rate:.0%}",
                f"{low:.0%}-{high:.0%}",
                f"{row.mean_score:.2f}",
                f"{row.tokens // row.runs:,}" if row.runs else "-",
                f"{row.cached_share:.0%}",
                f"${row.cost:.4f}" if row.cost is not None else "-",
                f"{row.seconds / row.runs:.2f}" if row.runs else "-",
            ]
        )
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    lines = [f"eval {summary.name}"]
    for cells in [head, *body]:
        lines.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            )
        )
    judged = [row for row in summary.rows if row.judge_tokens]
    for row in judged:
        cost = f", ${row.judge_cost:.4f}" if row.judge_cost is not None else ""
        lines.append(f"judge ({row.name}): {row.judge_tokens:,} tokens{cost}, not counted above")
    if summary.flips:
        lines.append("cases that flipped between variants:")
        for flip in summary.flips:
            shown = ", ".join(f"{v} {p}" for v, p in flip.passes.items())
            lines.append(f"  {flip.case}: {shown}")
    for line in summary.divergences:
        lines.append(f"diverged: {line['key']}: {line.get('divergence')}")
    for line in summary.errors:
        lines.append(f"error: {line['key']}: {line.get('error')}")
    return "\n".join(lines)
