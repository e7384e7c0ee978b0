"""The report in a real browser: headless Chromium opens the page of each real run.

Checks the rendered DOM (every agent, the graph's nodes and edges, each conversation once
opened), that nothing went wrong in the page (no console error, no exception, no request for
anything but the file itself), and saves a screenshot in the test's temp folder. Skipped only
when no Chromium is installed (`apt-get install chromium`; `.ci/run` installs it).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import Chromium, Page, find_chromium
from report_traces import expected_graph
from trace_lines import trace_lines

from orchestrator import rebuild_conversations
from orchestrator.report import write_report

# Starts headless Chromium: left out of the inner loop (`pytest -m "not slow"`).
pytestmark = pytest.mark.slow

COUNT = "document.querySelectorAll({!r}).length"
OPEN_ALL = """(async () => {
  document.querySelectorAll('details.conv').forEach(d => { d.open = true; });
  await new Promise(done => setTimeout(done, 50));  // toggle events come as tasks
  return Array.from(document.querySelectorAll('details.conv')).map(d => [
    d.dataset.agent, d.querySelectorAll('.msgs > .msg').length]);
})()"""
GRAPH = """
[Array.from(document.querySelectorAll('svg.dag .node')).map(n => n.dataset.path),
 Array.from(document.querySelectorAll('svg.dag path.edge')).map(
   e => [e.dataset.source, e.dataset.target])]
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Chromium]:
    executable = find_chromium()
    if executable is None:
        pytest.skip("no Chromium on this machine: apt-get install chromium (.ci/run does)")
    with Chromium.launch(executable) as launched:
        yield launched


def open_report(browser: Chromium, trace: Path, folder: Path) -> Page:
    return browser.open(write_report(trace, folder / "report.html"))


@pytest.mark.parametrize(
    "name", ["quickstart", "code-review", "sales-report", "failed", "cancelled", "resumed"]
)
def test_each_report_renders_every_agent(
    browser: Chromium, report_traces: dict[str, Path], tmp_path: Path, name: str
) -> None:
    events = trace_lines(report_traces[name])
    page = open_report(browser, report_traces[name], tmp_path)

    assert page.evaluate("document.documentElement.dataset.ready") == "1"
    nodes, edges = page.evaluate(GRAPH)
    assert (set(nodes), {tuple(e) for e in edges}) == expected_graph(events)
    # A run resumed in a later attempt goes on as the same run.
    runs = [e["agent"] for e in events if e["type"] == "run_start" and not e.get("resumed")]
    assert page.evaluate(COUNT.format(".trow[data-agent]")) == len(runs)
    opened = dict(page.evaluate(OPEN_ALL))
    messages = {key: len(m) for key, m in rebuild_conversations(report_traces[name]).items()}
    assert opened == messages
    assert page.problems() == []
    shot = page.screenshot(tmp_path / f"{name}.png")
    assert shot.stat().st_size > 20_000


def test_hostile_markup_in_a_trace_never_runs(
    browser: Chromium, report_traces: dict[str, Path], tmp_path: Path
) -> None:
    page = open_report(browser, report_traces["hostile"], tmp_path)

    page.evaluate(OPEN_ALL)
    page.evaluate(
        "document.querySelectorAll('.msg details').forEach(d => { d.open = true; });"
        "new Promise(done => setTimeout(done, 50))"
    )
    assert page.evaluate("typeof window.pwned") == "undefined"
    assert page.evaluate("document.images.length") == 0
    assert page.evaluate(COUNT.format("script")) == 2
    shown = page.evaluate("document.querySelector('.msg.system pre').textContent")
    assert shown.startswith("</script><script>window.pwned = 1</script>")
    assert page.problems() == []
    page.screenshot(tmp_path / "hostile.png")


def test_a_1000_agent_report_opens_quickly(
    browser: Chromium, report_traces: dict[str, Path], tmp_path: Path
) -> None:
    page = open_report(browser, report_traces["fanout"], tmp_path)

    assert page.load_seconds < 15  # about 1.5 s on two cores
    assert page.evaluate(COUNT.format("svg.dag .node")) == 1_001
    assert page.evaluate(COUNT.format(".trow[data-agent]")) == 1_001
    page.evaluate("location.hash = '#a500'; new Promise(done => setTimeout(done, 100))")
    assert page.evaluate(COUNT.format("#a500[open] .msg")) == 5
    system = page.evaluate("document.querySelector('#a500 .msg.system').textContent")
    assert len(system) > 200  # a prompt all 1,000 share, written once in the page
    page.evaluate("""(() => { const f = document.getElementById('filter');
        f.value = 'w99'; f.dispatchEvent(new Event('input')); })()""")
    visible = (
        "Array.from(document.querySelectorAll('.trow[data-agent]')).filter(r => r.offsetParent)"
    )
    assert page.evaluate(f"{visible}.map(r => r.dataset.agent)") == [
        "planner/w99",
        "planner/w990",
        "planner/w991",
        "planner/w992",
        "planner/w993",
        "planner/w994",
        "planner/w995",
        "planner/w996",
        "planner/w997",
        "planner/w998",
        "planner/w999",
    ]
    assert page.problems() == []
    page.screenshot(tmp_path / "fanout.png", full_page=False)
