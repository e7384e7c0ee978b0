"""The suite's figures as one markdown table: ours, each peer, ours / best peer, the target."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .peers import FRAMEWORKS, OURS

Result = Mapping[str, Any]


@dataclass(frozen=True)
class Cell:
    value: float
    text: str


@dataclass(frozen=True)
class Figure:
    """One row: where to find it in each framework's result of one workload, how to show it."""

    label: str
    workload: str
    ours: Callable[[Any], Cell | None]
    peer: Callable[[Any], Cell | None]
    target: str = ""


def _spread(result: Result, key: str, fmt: str) -> Cell:
    low, high = result[f"{key}_spread"]
    value = result[key]
    if result.get("runs") == 1:
        return Cell(value, f"{fmt.format(value)} (1 run)")
    return Cell(value, f"{fmt.format(value)} ({fmt.format(low)}–{fmt.format(high)})")


def _plain(result: Result, key: str, fmt: str) -> Cell | None:
    return Cell(result[key], fmt.format(result[key])) if key in result else None


def _row(rows: Sequence[Result], field: str, size: int) -> Result:
    return next(r for r in rows if r[field] == size)


def loop_figures(steps: int) -> list[Figure]:
    def per_step(r: Result) -> Cell:
        return _spread(r, "us_per_step", "{:,.0f}")

    def last_100(r: Result) -> Cell:
        return _spread(r, "last_100_us", "{:,.0f}")

    def counting(r: Result) -> Cell | None:
        return _plain(r, "counting_share", "{:.0%}")

    return [
        Figure(f"Loop, {steps:,} steps: µs per step", "loop", per_step, per_step, "≤ 100"),
        Figure("Loop: µs per step, last 100 steps", "loop", last_100, last_100),
        Figure("Loop: share spent counting tokens", "loop", counting, lambda r: None),
    ]


def fanout_figures(sizes: Sequence[int]) -> list[Figure]:
    figures = []
    for k in sizes:
        target = k == max(sizes)

        def ratio(rows: Sequence[Result], k: int = k) -> Cell:
            return _spread(_row(rows, "subagents", k), "ratio", "{:.2f}×")

        def peak(rows: Sequence[Result], k: int = k) -> Cell | None:
            return _plain(_row(rows, "subagents", k), "peak_mb", "{:.1f}")

        figures.append(
            Figure(f"Fan-out K={k}: wall / ideal", "fanout", ratio, ratio, "≤ 1.15×" * target)
        )
        figures.append(Figure(f"Fan-out K={k}: peak MB", "fanout", peak, peak, "≤ 5" * target))
    return figures


def token_figures(sizes: Sequence[int]) -> list[Figure]:
    figures = []
    for n in sizes:

        def first(rows: Sequence[Result], n: int = n) -> Cell:
            row = _row(rows, "skills", n)
            share = row["first_request"] / row["first_request_eager"]
            text = f"{row['first_request']:,} ({share:.1%} of eager {row['first_request_eager']:,})"
            return Cell(row["first_request"], text)

        def job(rows: Sequence[Result], n: int = n) -> Cell:
            row = _row(rows, "skills", n)
            return Cell(row["job"], f"{row['job']:,} (eager {row['job_eager']:,})")

        def eager(key: str, n: int = n) -> Callable[[Sequence[Result]], Cell]:
            return lambda rows: _count(_row(rows, "skills", n)[key])

        target = "≤ 2% of eager" if n == max(sizes) else ""
        label = f"Tools, {n:,} skills: first request tokens"
        figures.append(Figure(label, "tokens", first, eager("first_request_eager"), target))
        figures.append(
            Figure(f"Tools, {n:,} skills: 3-skill job tokens", "tokens", job, eager("job_eager"))
        )
    return figures


def _count(value: int) -> Cell:
    return Cell(value, f"{value:,}")


def scan_figures(size: int) -> list[Figure]:
    def ms(r: Result) -> Cell:
        return _spread(r, "ms", "{:,.1f}" if r["ms"] < 100 else "{:,.0f}")

    label = f"Catalog of {size:,} skills: ms to be ready"
    return [Figure(label, "scan", ms, ms, "")]


def figures(settings: Mapping[str, Any]) -> list[Figure]:
    return [
        *loop_figures(settings["loop_steps"]),
        *fanout_figures(settings["fanout_sizes"]),
        *token_figures(settings["catalog_sizes"]),
        *scan_figures(max(settings["catalog_sizes"])),
    ]


def rows(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every figure of a results.json document: each framework's cell, and ours / best peer."""
    keys = list(results["frameworks"])
    summary = []
    for figure in figures(results["settings"]):
        cells = {k: _cell(results["frameworks"][k], figure, k == OURS.key) for k in keys}
        ours = cells.get(OURS.key)
        peers = {k: c for k, c in cells.items() if k != OURS.key and isinstance(c, Cell)}
        best = min(peers, key=lambda k: peers[k].value) if peers else None
        ratio = None
        if isinstance(ours, Cell) and best is not None and peers[best].value > 0:
            ratio = ours.value / peers[best].value
        summary.append(
            {
                "figure": figure.label,
                "target": figure.target,
                "cells": {k: c.text if isinstance(c, Cell) else c for k, c in cells.items()},
                "values": {k: c.value if isinstance(c, Cell) else None for k, c in cells.items()},
                "best_peer": best,
                "ratio_to_best_peer": ratio,
            }
        )
    return summary


def table(results: Mapping[str, Any]) -> str:
    """The markdown table of a results.json document, with notes on what ran short or not."""
    keys = list(results["frameworks"])
    names = [FRAMEWORKS[k].name for k in keys]
    lines = [
        "| figure | " + " | ".join(names) + " | ours / best peer | target |",
        "|---|" + "---|" * (len(keys) + 2),
    ]
    for row in rows(results):
        ratio = row["ratio_to_best_peer"]
        shown = "–" if ratio is None else f"{ratio:.2f}" if ratio >= 0.1 else f"{ratio:.2g}"
        cells = " | ".join(row["cells"][k] for k in keys)
        lines.append(f"| {row['figure']} | {cells} | {shown} | {row['target']} |")
    return "\n".join([*lines, "", *_notes(results)])


def _cell(framework: Mapping[str, Any], figure: Figure, ours: bool) -> Cell | str:
    outcome = framework.get(figure.workload)
    if outcome is None:
        return "not run"
    if outcome["status"] != "ok":
        return outcome["status"]
    cell = (figure.ours if ours else figure.peer)(outcome["result"])
    return cell if cell is not None else "–"


def _notes(results: Mapping[str, Any]) -> list[str]:
    notes = []
    settings = results["settings"]
    for key, framework in results["frameworks"].items():
        name = FRAMEWORKS[key].name
        for workload, outcome in framework.items():
            if outcome["status"] != "ok":
                notes.append(f"- {name}, {workload}: {outcome['status']}: {outcome['reason']}")
            elif short := _short(outcome["result"], workload, settings):
                notes.append(f"- {name}, {workload}: {short} (time box)")
    return notes


def _short(result: Any, workload: str, settings: Mapping[str, Any]) -> str:
    """Which figures got fewer runs than asked, e.g. "K=200: 3 runs of 5"."""
    asked = settings.get(f"{workload}_runs", settings.get(f"{workload}_repeats"))
    parts = []
    for row in result if isinstance(result, list) else [result]:
        if isinstance(row, Mapping) and row.get("time_boxed") and row["runs"] != asked:
            where = f"K={row['subagents']}: " if "subagents" in row else ""
            parts.append(f"{where}{row['runs']} run{'s' * (row['runs'] != 1)} of {asked}")
    return ", ".join(parts)
