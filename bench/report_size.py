"""Report size and speed: the HTML report of a fan-out to N sub-agents (1,000 by default).

Runs a real fan-out (the scripted model; each sub-agent makes one tool call, then answers)
into a trace, then times `render_report` on it (median of `--runs`), gives the page's size,
and, when Chromium is installed, how long headless Chromium takes from navigation to the load
event, and to open one conversation. Uses the test suite's Chromium driver (tests/browser.py).

    python bench/report_size.py [--agents 1000] [--runs 5] [--no-browser]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from orchestrator import Agent, Trace, read_trace, tool
from orchestrator.models import ScriptedModel
from orchestrator.report import render_report
from orchestrator.tasks import ForkExtension, ForkSettings, SubagentRegistry

TESTS = Path(__file__).resolve().parents[1] / "tests"


@tool
async def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: what to look up
    """
    return f"value of {key}"


def fan_out(path: Path, width: int) -> Path:
    """A planner that forks `width` sub-agents, each making one tool call, then answering."""
    tasks = [{"id": f"w{i}", "task": f"Look up item {i}."} for i in range(width)]
    script: dict[str, list[dict[str, Any]]] = {
        "planner": [
            {"tool_calls": [{"name": "fork", "arguments": {"tasks": tasks}}]},
            {"content": f"{width} items looked up"},
        ]
    }
    for i in range(width):
        script[f"planner/w{i}"] = [
            {"tool_calls": [{"name": "lookup", "arguments": {"key": str(i)}}]},
            {"content": f"item {i}: value of {i}"},
        ]
    extension = ForkExtension(
        SubagentRegistry(), tools=[lookup], settings=ForkSettings(max_parallel=64)
    )
    with Trace(path) as trace:
        agent = Agent(ScriptedModel(script), name="planner", extensions=[extension], trace=trace)
        if agent.run_sync("Look up every item.").status != "completed":
            raise RuntimeError("the fan-out run did not complete")
    return path


def browser_times(page_path: Path) -> dict[str, float] | None:
    """Seconds to the load event, and to open a conversation, in headless Chromium."""
    sys.path.insert(0, str(TESTS))
    from browser import Chromium, find_chromium

    if find_chromium() is None:
        return None
    with Chromium.launch() as browser:
        page = browser.open(page_path)
        began = time.perf_counter()
        page.evaluate("location.hash = '#a1'; new Promise(done => setTimeout(done, 0))")
        opened = time.perf_counter() - began
        return {"load_s": page.load_seconds, "open_conversation_s": opened}


def measure(agents: int, runs: int, *, browser: bool = True) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        trace = fan_out(Path(folder) / "fanout.jsonl", agents)
        events = read_trace(trace)
        times = []
        for _ in range(runs):
            began = time.perf_counter()
            page = render_report(events)
            times.append(time.perf_counter() - began)
        target = Path(folder) / "report.html"
        target.write_text(page, encoding="utf-8")
        return {
            "agents": agents + 1,
            "trace_mb": trace.stat().st_size / 1e6,
            "report_mb": target.stat().st_size / 1e6,
            "render_s": statistics.median(times),
            "chromium": browser_times(target) if browser else None,
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=1_000, help="sub-agents in the fan-out")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.agents, args.runs, browser=not args.no_browser), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
