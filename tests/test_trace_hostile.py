"""Hostile traces: every field of every event type given the wrong type (or left out), lines
that are not objects at all. `trace show`, `trace list` and `report` read them without a
traceback, skip the bad events and name them by line number."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_process import orchestrator

from orchestrator.report import collect, render_report
from orchestrator.trace import read_trace, rebuild_conversations
from orchestrator.trace.history import run_info
from orchestrator.trace.summary import render, summarize

WRONG: list[Any] = ["x", 5, True, [], {}, None, ["x"], {"x": "y"}]
NOT_OBJECTS = ["[]", '"x"', "5", "null", "true", "{}", '{"seq": "1", "type": "x", "agent": "a"}']


def _paths(value: Any, prefix: tuple[Any, ...] = (), depth: int = 0) -> Iterator[tuple[Any, ...]]:
    """Every place in an event (keys of objects, items of lists) down to three levels."""
    if depth > 3:
        return
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, inner in items:
        yield (*prefix, key)
        yield from _paths(inner, (*prefix, key), depth + 1)


def _replaced(event: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(event)
    target: Any = changed
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return changed


def _removed(event: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k != key}


def mutants(events: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """One example of each event type, with each of its fields wrong in each way."""
    samples = {event["type"]: event for event in reversed(events)}
    for event in samples.values():
        for path in _paths(event):
            if path in (("seq",), ("type",), ("agent",)):
                continue  # those make it no event at all: covered by NOT_OBJECTS
            for value in WRONG:
                yield _replaced(event, path, value)
        for key in event:
            if key not in ("seq", "type", "agent"):
                yield _removed(event, key)


@pytest.fixture(scope="module")
def real_lines(report_traces: dict[str, Path]) -> list[str]:
    """The lines of real traces between them holding every event type the writer makes."""
    lines: list[str] = []
    for name in ("failed", "resumed", "code-review"):
        lines += report_traces[name].read_text(encoding="utf-8").splitlines()
    return lines


def _read_everything(path: Path) -> None:
    events = read_trace(path)
    render(summarize(events))
    summarize(events).as_dict()
    collect(read_trace(path))
    render_report(read_trace(path), source=str(path))
    rebuild_conversations(path)
    run_info(path)


def test_every_wrong_field_of_every_event_type_is_skipped_and_named(
    real_lines: list[str], tmp_path: Path
) -> None:
    events = [json.loads(line) for line in real_lines]
    base = "\n".join(real_lines) + "\n"
    tried = 0
    for mutant in mutants(events):
        path = tmp_path / "t.jsonl"
        path.write_text(base + json.dumps(mutant) + "\n", encoding="utf-8")
        try:
            _read_everything(path)
        except Exception as exc:  # noqa: BLE001 - the test names the event that broke a reader
            raise AssertionError(f"{type(exc).__name__}: {exc} reading {mutant}") from exc
        tried += 1
    assert tried > 500
    for line in NOT_OBJECTS:
        path = tmp_path / "t.jsonl"
        path.write_text(base + line + "\n", encoding="utf-8")
        _read_everything(path)
        assert read_trace(path).problems == [f"line {len(real_lines) + 1}: not an event"]


def test_bad_usage_is_named_by_its_line(real_lines: list[str], tmp_path: Path) -> None:
    events = [json.loads(line) for line in real_lines]
    call = next(e for e in events if e["type"] == "model_call")
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join([*real_lines, json.dumps({**call, "usage": "x"})]) + "\n", "utf-8")
    read = read_trace(path)
    assert read.skipped == 1
    assert read.problems == [
        f"line {len(real_lines) + 1}: a model_call event whose 'usage' is str, not an object"
    ]


def test_the_commands_read_a_hostile_trace_without_a_traceback(
    real_lines: list[str], tmp_path: Path
) -> None:
    events = [json.loads(line) for line in real_lines]
    hostile = [json.dumps(m) for m in mutants(events)] + NOT_OBJECTS
    runs = tmp_path / "runs"
    runs.mkdir()
    trace = runs / "hostile.jsonl"
    trace.write_text("\n".join([*real_lines, *hostile]) + "\n", encoding="utf-8")
    for args in (
        ("trace", "show", trace),
        ("trace", "show", "--json", trace),
        ("trace", "list", "--dir", runs),
        ("report", trace, "-o", tmp_path / "r.html"),
    ):
        ran = orchestrator(*args, cwd=tmp_path)
        assert ran.returncode == 0, (args, ran.stderr[-2000:])
        assert "Traceback" not in ran.stderr, (args, ran.stderr[-2000:])
        assert f"line {len(real_lines) + 1}:" in ran.stderr + ran.stdout, args
