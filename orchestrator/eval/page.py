"""An eval as one HTML page: the table per variant, the cases that flipped, and every run with
its checks, each linked to its run's report (written beside the page, from its trace)."""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..report import write_report
from ..trace.reader import iter_trace
from .summary import EvalSummary, table_cells

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.3em .6em}
th{background:#f3f3f3;text-align:left}td.n{text-align:right}
.pass{color:#176b2c}.fail{color:#a32020;font-weight:600}small{color:#666}
"""


def write_page(summary: EvalSummary, lines: Sequence[dict[str, Any]], target: Path) -> Path:
    """Write the page of `summary` and its result `lines` to `target`, and each run's report
    into a folder beside it; returns where the page went."""
    target = Path(target)
    reports = target.parent / f"{target.stem}-runs"
    rows = [_run_row(line, reports, target.parent) for line in lines]
    parts = [
        f"<!doctype html><meta charset=utf-8><title>eval {_e(summary.name)}</title>",
        f"<style>{STYLE}</style><h1>eval {_e(summary.name)}</h1>",
        _variant_table(summary),
    ]
    if summary.flips:
        items = "".join(
            f"<li>{_e(f.case)}: {_e(', '.join(f'{v} {p}' for v, p in f.passes.items()))}</li>"
            for f in summary.flips
        )
        parts.append(f"<h2>Cases that flipped between variants</h2><ul>{items}</ul>")
    head = "<tr><th>run</th><th>result</th><th>status</th><th>tokens</th><th>checks</th></tr>"
    parts.append(f"<h2>Runs</h2><table>{head}{''.join(rows)}</table>")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("\n".join(parts), encoding="utf-8")
    return target


def _variant_table(summary: EvalSummary) -> str:
    """The table the text shows (a trigger eval's precision, recall and accuracy; a
    baseline's lift), then the queries that misfired each way."""
    head, body = table_cells(summary)
    first = "".join(f"<th>{_e(cell)}</th>" for cell in head)
    rows = [
        "<tr>"
        + "".join(
            f"<td>{_e(cell)}</td>" if i == 0 else f"<td class=n>{_e(cell)}</td>"
            for i, cell in enumerate(cells)
        )
        + "</tr>"
        for cells in body
    ]
    parts = [f"<table><tr>{first}</tr>{''.join(rows)}</table>"]
    for row in summary.rows:
        if row.trigger is None:
            continue
        for title, queries in (
            ("Did not load when it should", row.trigger.missed_queries),
            ("Loaded when it should not", row.trigger.false_queries),
        ):
            if queries:
                items = "".join(f"<li>{_e(query)}</li>" for query in queries)
                parts.append(f"<h2>{title} ({_e(row.name)})</h2><ul>{items}</ul>")
    if any(row.probes_asked for row in summary.rows):
        parts.append(_probe_table(summary))
    return "".join(parts)


def _probe_table(summary: EvalSummary) -> str:
    """Each probe's passes per variant."""
    names = list(dict.fromkeys(name for row in summary.rows for name in row.by_probe))
    head = "".join(f"<th>{_e(row.name)}</th>" for row in summary.rows)
    body = []
    for name in names:
        cells = "".join(
            f"<td class=n>{row.by_probe[name][0]}/{row.by_probe[name][1]}</td>"
            if name in row.by_probe
            else "<td>-</td>"
            for row in summary.rows
        )
        body.append(f"<tr><td>{_e(name)}</td>{cells}</tr>")
    return f"<h2>Probes passed</h2><table><tr><th>probe</th>{head}</tr>{''.join(body)}</table>"


def _run_row(line: dict[str, Any], reports: Path, base: Path) -> str:
    key = str(line.get("key"))
    link = _e(key)
    trace_file = line.get("trace")
    if trace_file and Path(trace_file).is_file():
        report = reports / (key.replace("/", "--") + ".html")
        reader = iter_trace(trace_file)
        write_report(trace_file, report, reader=reader)
        link = f'<a href="{_e(os.path.relpath(report, base))}">{_e(key)}</a>'
    passed = bool(line.get("passed"))
    verdict = "<span class=pass>pass</span>" if passed else "<span class=fail>FAIL</span>"
    checks = "<br>".join(
        f"{'pass' if s.get('passed') else 'FAIL'}: {_e(s.get('name'))} "
        f"<small>{_e(s.get('reason'))}</small>"
        for s in line.get("scores") or []
    )
    probes = line.get("probes") or {}
    for result in probes.get("results") or []:
        verdict = "pass" if result.get("passed") else "FAIL"
        why = result.get("error") or "; ".join(
            str(s.get("reason")) for s in result.get("scores") or [] if not s.get("passed")
        )
        checks += (
            f"<br>{verdict}: probe {_e(result.get('id'))} <small>({_e(result.get('at'))}) "
            f"{_e(result.get('answer'))} {_e(why)}</small>"
        )
    extra = line.get("divergence") or line.get("error")
    if extra:
        checks += f"<br><small>{_e(extra)}</small>"
    tokens = (line.get("usage") or {}).get("total_tokens", 0)
    return (
        f"<tr><td>{link}</td><td>{verdict}</td><td>{_e(line.get('status'))}</td>"
        f"<td class=n>{tokens:,}</td><td>{checks}</td></tr>"
    )


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value))
