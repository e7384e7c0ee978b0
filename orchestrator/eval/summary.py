"""What an eval's result lines add up to: a row per variant (pass rate with its 95% interval,
mean score, tokens, cached share, cost, time), the cases that flipped between variants, and
the runs that diverged from their recording. A trigger eval's rows add precision, recall and
accuracy, and the queries that misfired each way; an eval with a baseline adds each variant's
lift over it, and its `benchmark.json` in skill-creator's layout."""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .spec import REFERENCE

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


def lift_interval(passed: int, runs: int, base_passed: int, base_runs: int) -> tuple[float, float]:
    """Newcombe's interval (from the two Wilson intervals) of a difference of pass rates:
    sound for few runs, as theirs are."""
    rate, base = passed / runs if runs else 0.0, base_passed / base_runs if base_runs else 0.0
    low, high = wilson(passed, runs)
    base_low, base_high = wilson(base_passed, base_runs)
    below = math.sqrt((rate - low) ** 2 + (base_high - base) ** 2)
    above = math.sqrt((high - rate) ** 2 + (base - base_low) ** 2)
    return max(-1.0, rate - base - below), min(1.0, rate - base + above)


@dataclass
class TriggerCounts:
    """A trigger eval's figures of one variant: how its queries fired against how they
    should have, and the ones that misfired each way."""

    fired_right: int = 0
    """Should load the skill, and did."""
    fired_wrong: int = 0
    """Should not, and did."""
    missed: int = 0
    """Should, and did not."""
    held: int = 0
    """Should not, and did not."""
    missed_queries: list[str] = field(default_factory=list)
    false_queries: list[str] = field(default_factory=list)

    def add(self, record: dict[str, Any]) -> None:
        should, fired, query = bool(record.get("should")), bool(record.get("fired")), ""
        query = str(record.get("query") or "")
        if should and fired:
            self.fired_right += 1
        elif should:
            self.missed += 1
            self.missed_queries.append(query)
        elif fired:
            self.fired_wrong += 1
            self.false_queries.append(query)
        else:
            self.held += 1

    @property
    def runs(self) -> int:
        return self.fired_right + self.fired_wrong + self.missed + self.held

    @property
    def precision(self) -> float | None:
        fired = self.fired_right + self.fired_wrong
        return self.fired_right / fired if fired else None

    @property
    def recall(self) -> float | None:
        should = self.fired_right + self.missed
        return self.fired_right / should if should else None

    @property
    def right(self) -> int:
        return self.fired_right + self.held

    @property
    def accuracy(self) -> float:
        return self.right / self.runs if self.runs else 0.0

    def as_dict(self) -> dict[str, Any]:
        low, high = wilson(self.right, self.runs)
        return {
            "precision": _rounded(self.precision),
            "recall": _rounded(self.recall),
            "accuracy": round(self.accuracy, 4),
            "accuracy_interval": [round(low, 4), round(high, 4)],
            "fired_right": self.fired_right,
            "fired_wrong": self.fired_wrong,
            "missed": self.missed,
            "held": self.held,
            "missed_queries": self.missed_queries,
            "false_triggers": self.false_queries,
        }


def errored(line: Line) -> bool:
    """Whether a run ended in error: it could not start, or its model or one of its steps
    errored (`errored`), as opposed to a run that finished and failed its checks."""
    return line.get("status") == "error" or bool(line.get("errored"))


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


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
    trigger: TriggerCounts | None = None
    """A trigger eval's figures (its lines carry a `trigger` record)."""
    lift: tuple[float, float, float] | None = None
    """The lift in pass rate over the eval's baseline, and its 95% interval."""
    compactions: int = 0
    """How many times its runs' agents compacted their conversations (cuts)."""
    probes_asked: int = 0
    probes_passed: int = 0
    probe_tokens: int = 0
    probe_cost: float | None = None
    by_probe: dict[str, list[int]] = field(default_factory=dict)
    """Each probe's [passed, asked] over the runs."""

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

    @property
    def probe_rate(self) -> float:
        return self.probes_passed / self.probes_asked if self.probes_asked else 0.0

    @property
    def probe_interval(self) -> tuple[float, float]:
        return wilson(self.probes_passed, self.probes_asked)

    def _add_probes(self, probes: dict[str, Any]) -> None:
        self.probe_tokens += int((probes.get("usage") or {}).get("total_tokens") or 0)
        if probes.get("cost") is not None:
            self.probe_cost = (self.probe_cost or 0.0) + float(probes["cost"])
        for result in probes.get("results") or []:
            counts = self.by_probe.setdefault(str(result.get("id")), [0, 0])
            counts[0] += bool(result.get("passed"))
            counts[1] += 1
            self.probes_passed += bool(result.get("passed"))
            self.probes_asked += 1

    def add(self, line: Line) -> None:
        self.runs += 1
        self.passed += bool(line.get("passed"))
        self.errors += errored(line)
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
        if isinstance(line.get("trigger"), dict):
            self.trigger = self.trigger or TriggerCounts()
            self.trigger.add(line["trigger"])
        self.compactions += int(line.get("compactions") or 0)
        if isinstance(line.get("probes"), dict):
            self._add_probes(line["probes"])

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
            "compactions_per_run": round(self.compactions / self.runs, 2) if self.runs else 0.0,
            **({"probes": self._probes_dict()} if self.probes_asked else {}),
            **({"trigger": self.trigger.as_dict()} if self.trigger else {}),
            **(
                {
                    "lift": round(self.lift[0], 4),
                    "lift_interval": [round(self.lift[1], 4), round(self.lift[2], 4)],
                }
                if self.lift
                else {}
            ),
        }

    def _probes_dict(self) -> dict[str, Any]:
        low, high = self.probe_interval
        return {
            "asked": self.probes_asked,
            "passed": self.probes_passed,
            "pass_rate": round(self.probe_rate, 4),
            "interval": [round(low, 4), round(high, 4)],
            "tokens": self.probe_tokens,
            "cost_usd": self.probe_cost,
            "by_probe": {
                name: {"passed": passed, "asked": asked}
                for name, (passed, asked) in self.by_probe.items()
            },
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
    baseline: str | None = None

    def below(self, min_pass: float) -> list[VariantRow]:
        """The variants whose pass rate is under `min_pass` (a trigger eval: its accuracy)."""
        return [row for row in self.rows if _rate(row) < min_pass]

    def below_trigger(self, figure: str, least: float) -> list[VariantRow]:
        """The variants of a trigger eval whose `precision` or `recall` is under `least`
        (a figure with nothing to count, no query that should or did fire, is not under)."""
        found = []
        for row in self.rows:
            value = getattr(row.trigger, figure) if row.trigger else None
            if value is not None and value < least:
                found.append(row)
        return found

    def as_dict(self) -> dict[str, Any]:
        return {
            "eval": self.name,
            **({"baseline": self.baseline} if self.baseline else {}),
            "variants": [row.as_dict() for row in self.rows],
            "flips": [{"case": f.case, "passes": f.passes} for f in self.flips],
            "diverged": [
                {"run": line["key"], "divergence": line.get("divergence")}
                for line in self.divergences
            ],
        }


def _rate(row: VariantRow) -> float:
    return row.trigger.accuracy if row.trigger else row.pass_rate


def summarize(
    name: str, variants: Sequence[str], lines: Sequence[Line], baseline: str | None = None
) -> EvalSummary:
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
    base = rows.get(baseline) if baseline is not None else None
    if base is not None:
        for row in rows.values():
            if row is not base and row.runs and base.runs:
                low, high = lift_interval(row.passed, row.runs, base.passed, base.runs)
                row.lift = (row.pass_rate - base.pass_rate, low, high)
    return EvalSummary(
        name,
        list(rows.values()),
        flips,
        [line for line in lines if line.get("status") == "diverged"],
        [line for line in lines if errored(line)],
        baseline,
    )


def table_cells(summary: EvalSummary) -> tuple[list[str], list[list[str]]]:
    """The summary's table as cells: its head, and a row of texts per variant (a trigger
    eval's precision, recall and accuracy; a baseline's lift), as the text and the page
    show it."""
    trigger = any(row.trigger for row in summary.rows)
    probed = any(row.probes_asked for row in summary.rows)
    head = (
        ["variant", "precision", "recall", "accuracy", "95% interval"]
        if trigger
        else ["variant", "pass", "95% interval", "score"]
    )
    if probed:
        head[1:1] = ["probes", "95% interval"]
    if summary.baseline is not None:
        head.append(f"lift over {summary.baseline}")
    head += ["tokens/run", "cached", "cost", *(["cuts/run"] if probed else []), "s/run"]
    body = [_cells(row, summary.baseline is not None, probed) for row in summary.rows]
    return head, body


def render_table(summary: EvalSummary) -> str:
    """The summary as plain text: the table, then flips, misfires, divergences and errors."""
    head, body = table_cells(summary)
    probed = any(row.probes_asked for row in summary.rows)
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
    if probed:
        lines += _probe_lines(summary.rows)
    if summary.flips:
        lines.append("cases that flipped between variants:")
        for flip in summary.flips:
            shown = ", ".join(f"{v} {p}" for v, p in flip.passes.items())
            lines.append(f"  {flip.case}: {shown}")
    for row in summary.rows:
        if row.trigger and row.trigger.missed_queries:
            lines.append(f"did not load when it should ({row.name}):")
            lines += [f"  {_query(q)}" for q in row.trigger.missed_queries]
        if row.trigger and row.trigger.false_queries:
            lines.append(f"loaded when it should not ({row.name}):")
            lines += [f"  {_query(q)}" for q in row.trigger.false_queries]
    for line in summary.divergences:
        lines.append(f"diverged: {line['key']}: {line.get('divergence')}")
    for line in summary.errors:
        lines.append(f"error: {line['key']}: {line.get('error')}")
    return "\n".join(lines)


def _cells(row: VariantRow, lift: bool, probed: bool) -> list[str]:
    """One row of the table: a trigger eval's figures or the pass rate, then the probes',
    the lift, the spend (and, with probes, the cuts)."""
    if row.trigger:
        counts = row.trigger
        low, high = wilson(counts.right, counts.runs)
        cells = [
            row.name,
            _share(counts.precision),
            _share(counts.recall),
            f"{counts.right}/{counts.runs} {counts.accuracy:.0%}",
            f"{low:.0%}-{high:.0%}",
        ]
    else:
        low, high = row.interval
        cells = [
            row.name,
            f"{row.passed}/{row.runs} {row.pass_rate:.0%}",
            f"{low:.0%}-{high:.0%}",
            f"{row.mean_score:.2f}",
        ]
    if probed:
        low, high = row.probe_interval
        cells[1:1] = [
            f"{row.probes_passed}/{row.probes_asked} {row.probe_rate:.0%}",
            f"{low:.0%}-{high:.0%}",
        ]
    if lift:
        cells.append(
            f"{row.lift[0]:+.0%} ({row.lift[1]:+.0%} to {row.lift[2]:+.0%})" if row.lift else "-"
        )
    return [
        *cells,
        f"{row.tokens // row.runs:,}" if row.runs else "-",
        f"{row.cached_share:.0%}",
        f"${row.cost:.4f}" if row.cost is not None else "-",
        *([f"{row.compactions / row.runs:.1f}" if row.runs else "-"] if probed else []),
        f"{row.seconds / row.runs:.2f}" if row.runs else "-",
    ]


def _probe_lines(rows: Sequence[VariantRow]) -> list[str]:
    """Under a table with probes: what asking cost, each probe's passes per variant, and a
    reference that cut (its answers are then no full-context reference)."""
    lines = []
    for row in rows:
        if row.probe_tokens:
            cost = f", ${row.probe_cost:.4f}" if row.probe_cost is not None else ""
            lines.append(
                f"probes ({row.name}): {row.probe_tokens:,} tokens{cost}, not counted above"
            )
    names = list(dict.fromkeys(name for row in rows for name in row.by_probe))
    if names:
        lines.append("probes passed, per variant:")
    for name in names:
        shown = ", ".join(
            f"{row.name} {row.by_probe[name][0]}/{row.by_probe[name][1]}"
            for row in rows
            if name in row.by_probe
        )
        lines.append(f"  {name}: {shown}")
    for row in rows:
        if row.name == REFERENCE and row.compactions:
            lines.append(
                f"warning: the {REFERENCE} runs compacted {row.compactions} times: their "
                "answers are not full-context ones (set a larger reference_window)"
            )
    return lines


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _query(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 100 else line[:97] + "..."


def benchmark(
    summary: EvalSummary,
    lines: Sequence[Line],
    when: str,
    *,
    skill_path: str | None = None,
    executor_model: str | None = None,
) -> dict[str, Any]:
    """The eval in skill-creator's `benchmark.json` layout, so its viewer and graders read
    it: each run as a `configuration` (the variant) with its `result` (`pass_rate`: the share
    of its expectations, the eval's own checks, that passed; the status check a run is held
    to without one of its own is shown apart, as `status` and `completed`), and
    `run_summary` per configuration (`pass_rate`, `time_seconds`, `tokens`: mean, stddev,
    min, max) with the `delta` of the first other variant over the baseline. `metadata`
    says the skill's folder (`skill_path`), the model that ran it (`executor_model`) and
    `runs_per_configuration`, the runs of each eval in each configuration."""
    runs: list[dict[str, Any]] = []
    for line in lines:
        scores = [s for s in line.get("scores") or [] if not s.get("implicit")]
        passed = sum(bool(s.get("passed")) for s in scores)
        runs.append(
            {
                "eval_id": line.get("case"),
                "eval_name": str(line.get("case")),
                "configuration": line.get("variant"),
                "run_number": line.get("repeat"),
                "result": {
                    "pass_rate": round(passed / len(scores), 4) if scores else 0.0,
                    "passed": passed,
                    "failed": len(scores) - passed,
                    "total": len(scores),
                    "time_seconds": line.get("seconds"),
                    "tokens": (line.get("usage") or {}).get("total_tokens", 0),
                    "tool_calls": len(line.get("tools_called") or []),
                    "errors": int(errored(line)),
                    "status": line.get("status"),
                    "completed": line.get("status") == "completed",
                },
                "expectations": [
                    {
                        "text": s.get("name"),
                        "passed": bool(s.get("passed")),
                        "evidence": s.get("reason"),
                    }
                    for s in scores
                ],
            }
        )
    per_config: dict[str, dict[str, Any]] = {}
    for row in summary.rows:
        mine: list[dict[str, Any]] = [r["result"] for r in runs if r["configuration"] == row.name]
        per_config[row.name] = {
            "pass_rate": _spread([float(r["pass_rate"]) for r in mine]),
            "time_seconds": _spread([float(r["time_seconds"] or 0) for r in mine]),
            "tokens": _spread([float(r["tokens"] or 0) for r in mine]),
            "runs_passed": row.passed,
            "runs": row.runs,
        }
    run_summary: dict[str, Any] = dict(per_config)
    others = [row for row in summary.rows if row.name != summary.baseline]
    if summary.baseline in per_config and others:
        base, top = per_config[summary.baseline], per_config[others[0].name]
        run_summary["delta"] = {
            key: f"{top[key]['mean'] - base[key]['mean']:+.{2 if key == 'pass_rate' else 1}f}"
            for key in ("pass_rate", "time_seconds", "tokens")
        }
    per_eval = Counter((r["configuration"], str(r["eval_id"])) for r in runs)
    return {
        "metadata": {
            "skill_name": summary.name,
            "skill_path": skill_path,
            "executor_model": executor_model,
            "timestamp": when,
            "evals_run": list(dict.fromkeys(line.get("case") for line in lines)),
            "runs_per_configuration": max(per_eval.values(), default=0),
        },
        "runs": runs,
        "run_summary": run_summary,
        "notes": [],
    }


def _spread(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {"mean": 0.0, "stddev": 0.0, "min": 0.0, "max": 0.0}
    deviation = statistics.stdev(values) if len(values) > 1 else 0.0
    return {
        "mean": round(statistics.fmean(values), 4),
        "stddev": round(deviation, 4),
        "min": round(min(values), 4),
        "max": round(max(values), 4),
    }
