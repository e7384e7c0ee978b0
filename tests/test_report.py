"""`orchestrator report`: the HTML page of real runs' traces, read as markup.

The page in a real browser is tested in test_report_browser.py.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest
from cli_process import orchestrator
from report_traces import HOSTILE, expected_graph
from trace_lines import trace_lines

from orchestrator import read_trace
from orchestrator.events import ModelCall
from orchestrator.report import collect, render_report

# Its traces come from real runs of every example (report_traces.py): left out of the inner
# loop (`pytest -m "not slow"`).
pytestmark = pytest.mark.slow

EXAMPLES = ("quickstart", "code-review", "sales-report")
TAGS = {"html", "head", "meta", "title", "style", "body", "header", "div", "span", "h1", "h2"}
TAGS |= {"nav", "a", "input", "main", "section", "p", "svg", "defs", "marker", "path", "g"}
TAGS |= {"rect", "text", "table", "thead", "tbody", "tfoot", "tr", "th", "td", "b", "code"}
TAGS |= {"ul", "li", "details", "summary", "script"}


class Markup(HTMLParser):
    """Every element of a page with its attributes, and the text inside each script."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.scripts: list[str] = []
        self._in_script = False
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {k: v or "" for k, v in attrs}))
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append("")

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data

    def having(self, tag: str, cls: str) -> list[dict[str, str]]:
        return [a for t, a in self.elements if t == tag and cls in a.get("class", "").split()]


def page_of(traces: dict[str, Path], name: str) -> str:
    return render_report(read_trace(traces[name]), source=str(traces[name]))


@pytest.mark.parametrize("name", [*EXAMPLES, "failed", "cancelled", "resumed", "nested"])
def test_the_graph_and_the_conversations_hold_every_agent(
    report_traces: dict[str, Path], name: str
) -> None:
    events = trace_lines(report_traces[name])
    markup = Markup(page_of(report_traces, name))

    nodes, edges = expected_graph(events)
    assert {a["data-path"] for a in markup.having("g", "node")} == nodes
    drawn = {(a["data-source"], a["data-target"]) for a in markup.having("path", "edge")}
    assert drawn == edges
    # A run resumed in a later attempt goes on as the same run.
    runs = [e["agent"] for e in events if e["type"] == "run_start" and not e.get("resumed")]
    conversations = markup.having("details", "conv")
    assert len(conversations) == len(runs) == len(markup.having("div", "trow")) - 1
    assert {a["data-agent"].partition("#")[0] for a in conversations} == set(runs)


@pytest.mark.parametrize("name", [*EXAMPLES, "failed", "cancelled", "hostile", "fanout"])
def test_the_page_asks_for_nothing_outside_itself(
    report_traces: dict[str, Path], name: str
) -> None:
    page = page_of(report_traces, name)
    markup = Markup(page)

    assert {tag for tag, _ in markup.elements} <= TAGS
    for tag, attributes in markup.elements:
        assert "src" not in attributes, tag
        assert attributes.get("href", "#").startswith("#"), (tag, attributes)
        assert not any(key.startswith("on") for key in attributes), (tag, attributes)
    assert re.findall(r"url\(([^)]*)\)", page) == ["#arrow"] * page.count("url(#arrow)")
    (policy,) = [a for t, a in markup.elements if a.get("http-equiv") == "Content-Security-Policy"]
    assert "default-src 'none'" in policy["content"]
    if name in EXAMPLES:
        assert "http://" not in page and "https://" not in page


def test_hostile_markup_from_the_trace_stays_text(report_traces: dict[str, Path]) -> None:
    page = page_of(report_traces, "hostile")
    markup = Markup(page)

    assert [t for t, _ in markup.elements].count("script") == 2  # the data and our own
    assert "img" not in {t for t, _ in markup.elements}
    data, code = markup.scripts
    assert "window.pwned" not in code
    assert "</" not in data and "<" not in data
    (key, messages), *_ = json.loads(data)["agents"]
    assert key == "hostile"
    assert messages[0] == {"role": "system", "content": HOSTILE}
    assert messages[2]["tool_calls"][0]["name"] == HOSTILE
    assert "&lt;/script&gt;&lt;script&gt;window.pwned = 1" in page  # in the errors table


def test_a_failed_job_shows_the_failure_and_what_it_skipped(report_traces: dict[str, Path]) -> None:
    report = collect(read_trace(report_traces["failed"]))

    assert report.status == "failed"
    assert {k: a.status for k, a in report.agents.items()} == {
        "first": "completed",
        "second": "error",
    }
    assert report.tasks["third"].status == "skipped"
    assert [(e.agent, e.kind, e.where) for e in report.errors] == [
        ("first", "unknown_tool", "nope"),
        ("second", "error", "run"),
    ]
    markup = Markup(render_report(read_trace(report_traces["failed"])))
    third = next(a for a in markup.having("g", "node") if a["data-path"] == "third")
    assert "skip" in third["class"]


def test_a_cancelled_job_shows_what_was_cut_short(report_traces: dict[str, Path]) -> None:
    report = collect(read_trace(report_traces["cancelled"]))

    assert report.job_status == "cancelled" and report.status == "cancelled"
    slow = report.agents["slow"]
    assert slow.status == "cancelled" and slow.skills == ["shell"]
    (shell,) = [b for b in slow.bars if b.label == "shell__run"]
    assert shell.error == "aborted" and shell.end is not None
    assert report.agents["quick"].status == "completed"
    assert "after" in report.tasks and "after" not in report.agents  # never started
    assert report.tasks["after"].status == "skipped"


def test_a_killed_and_resumed_job_shows_one_run_in_two_attempts(
    report_traces: dict[str, Path],
) -> None:
    report = collect(read_trace(report_traces["resumed"]))

    assert report.attempts == 2 and report.status == "completed"
    assert list(report.agents) == ["first", "second", "third"]  # `second` went on, not again
    second = report.agents["second"]
    assert second.status == "completed" and second.steps == 3
    (shell,) = [b for b in second.bars if b.label == "shell__run"]
    assert shell.error == "interrupted" and shell.end is not None  # ended with attempt 1
    assert [m.get("error_type") for m in second.messages if m.get("role") == "tool"] == [
        None,
        "aborted",
    ]
    assert "resumed: 2 attempts" in render_report(read_trace(report_traces["resumed"]))


def test_a_trace_cut_off_by_a_crash_still_makes_a_report(report_traces: dict[str, Path]) -> None:
    lines = report_traces["code-review"].read_text().splitlines(keepends=True)
    cut = lines[: len(lines) // 2] + [lines[len(lines) // 2][:40]]  # and a torn last line
    torn = report_traces["code-review"].with_name("torn.jsonl")
    torn.write_text("".join(cut))

    report = collect(read_trace(torn))
    assert report.status == "unfinished"
    assert {a.status for a in report.agents.values()} >= {"unfinished"}
    assert all(b.end is not None for a in report.agents.values() for b in a.bars)
    assert "unfinished" in render_report(read_trace(torn))


def test_cost_appears_only_when_the_trace_records_it(report_traces: dict[str, Path]) -> None:
    events = read_trace(report_traces["nested"])
    assert "$" not in render_report(events)
    assert "not in the trace" in render_report(events)

    priced = [
        e.model_copy(update={"cost": 0.0025}) if isinstance(e, ModelCall) else e for e in events
    ]
    report = collect(priced)
    calls = sum(1 for e in events if isinstance(e, ModelCall))
    assert report.total_cost == pytest.approx(0.0025 * calls)
    assert f"${0.0025 * calls:,.4f}" in render_report(priced)


def test_a_fan_out_to_1000_agents_is_one_light_page(report_traces: dict[str, Path]) -> None:
    events = read_trace(report_traces["fanout"])
    began = time.perf_counter()
    page = render_report(events)
    seconds = time.perf_counter() - began

    markup = Markup(page)
    assert len(markup.having("g", "node")) == 1_001
    assert len(markup.having("details", "conv")) == 1_001
    (bundle,) = markup.having("path", "bundle")  # one bracket, not 1,000 curves
    assert bundle["data-source"] == "planner"
    assert 'class="msg' not in page  # conversations are drawn only when opened
    assert len(page.encode()) < 6_000_000 and seconds < 10


def test_the_report_command(report_traces: dict[str, Path], tmp_path: Path) -> None:
    trace = report_traces["code-review"]
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "report", str(trace), "-o", "out/review.html"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("wrote out/review.html (")
    assert (tmp_path / "out" / "review.html").read_text().startswith("<!DOCTYPE html>")
    missing = subprocess.run(
        [sys.executable, "-m", "orchestrator", "report", "nope.jsonl"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert missing.returncode == 2 and "no trace at nope.jsonl" in missing.stderr


def test_run_says_how_to_make_its_report(tmp_path: Path) -> None:
    (tmp_path / "script.yaml").write_text("hello: [{content: hi}]\n")
    (tmp_path / "job.yaml").write_text(
        "name: t\nmodel: scripted:script.yaml\nsteps:\n  - {id: hello, task: Say hi.}\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator", "run", "job.yaml", "--trace", "t.jsonl"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-1] == f"report: orchestrator report {tmp_path / 't.jsonl'}"


async def test_a_model_call_that_waited_then_failed_is_a_bar_as_long_as_its_wait(
    tmp_path: Path,
) -> None:
    from provider_server import Fault, ProviderServer

    from orchestrator import Agent
    from orchestrator.report import collect
    from orchestrator.trace import Trace

    with ProviderServer({"*": [{"content": "never"}]}) as server:
        server.fail(Fault("status", status=400, delay=0.6))
        trace = Trace(tmp_path / "t.jsonl")
        result = await Agent(server.adapter("openai", "sk-test"), trace=trace).run("Go.")
        trace.close()

    assert result.status == "error"
    (failed,) = [e for e in trace_lines(tmp_path / "t.jsonl") if e["type"] == "model_error"]
    assert failed["duration_ms"] >= 600 and not failed["cancelled"]
    (agent,) = collect(read_trace(tmp_path / "t.jsonl")).tree()
    (bar,) = agent.bars
    assert bar.kind == "model" and bar.error and "400" in bar.error
    assert bar.end is not None and bar.end - bar.start >= 0.6


def test_a_steps_preloaded_skills_are_among_the_skills_loaded(tmp_path: Path) -> None:
    """A step that starts with a skill loaded (`skills: [files]`) loaded it, as `trace show`
    says: the report lists it, marked preloaded, rather than "No agent loaded a skill"."""
    (tmp_path / "script.yaml").write_text("a: [{content: done}]\n")
    (tmp_path / "job.yaml").write_text(
        "name: pre\nmodel: scripted:script.yaml\nsteps:\n  - {id: a, task: Go., skills: [files]}\n"
    )
    ran = orchestrator("run", "job.yaml", "-q", "--trace", "t.jsonl", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    made = orchestrator("report", "t.jsonl", "-o", "r.html", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "No agent loaded a skill" not in page
    section = page[page.index("Skills loaded") :]
    assert '<span class="chip">files</span>' in section
    assert "(preloaded)" in section[: section.index("</ul>")]
