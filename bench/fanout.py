"""Fan-out: a planner forks K sub-agents, each making 3 tool steps, with simulated latency.

Every model call sleeps `latency` seconds (as a remote model would), tools are instant, and
nothing limits concurrency, so the ideal wall time is the critical path: the planner's fork
call, each sub-agent's 3 tool-calling turns and its answer, then the planner's answer, i.e.
6 x latency. Reports wall time / ideal (median of several runs) and the peak memory per
sub-agent (tracemalloc, measured in a separate run so it does not slow the timed ones).

    python bench/fanout.py [--sizes 10 50 200] [--runs 5] [--latency 0.05]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import tracemalloc
from typing import Any

from orchestrator import Agent, TokenBudget, tool
from orchestrator.models import ScriptedModel
from orchestrator.tasks import ForkExtension, ForkSettings, SubagentRegistry

TOOL_STEPS = 3
CALLS_ON_CRITICAL_PATH = 2 + TOOL_STEPS + 1
TASK = "Look up every item."


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def tasks(width: int) -> list[dict[str, str]]:
    return [{"id": f"w{i}", "task": f"Look up the three parts of item {i}."} for i in range(width)]


def prompts(width: int) -> dict[str, str]:
    """Script keys by each conversation's first user message (for peers' fake models)."""
    keys = {t["task"]: f"planner/{t['id']}" for t in tasks(width)}
    return {TASK: "planner", **keys}


def script(width: int) -> dict[str, list[dict[str, Any]]]:
    turns: dict[str, list[dict[str, Any]]] = {
        "planner": [
            {"tool_calls": [{"name": "fork", "arguments": {"tasks": tasks(width)}}]},
            {"content": "all parts looked up"},
        ]
    }
    for i in range(width):
        steps: list[dict[str, Any]] = [
            {"tool_calls": [{"name": "lookup", "arguments": {"key": f"{i}.{step}"}}]}
            for step in range(TOOL_STEPS)
        ]
        steps.append({"content": f"item {i}: done"})
        turns[f"planner/w{i}"] = steps
    return turns


async def one_run(width: int, latency: float) -> float:
    model = ScriptedModel(script(width), latency=latency)
    extension = ForkExtension(
        SubagentRegistry(),
        tools=[lookup],
        settings=ForkSettings(max_parallel=width, output_cap_tokens=50),
    )
    planner = Agent(model, name="planner", extensions=[extension], budget=TokenBudget())
    began = time.perf_counter()
    result = await planner.run(TASK)
    elapsed = time.perf_counter() - began
    statuses = {child.status for child in result.children}
    if result.status != "completed" or statuses != {"completed"}:
        raise RuntimeError(f"fan-out run failed: {result.status}, children {statuses}")
    return elapsed


def peak_memory(width: int, latency: float) -> int:
    tracemalloc.start()
    try:
        asyncio.run(one_run(width, latency))
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def measure(sizes: list[int], runs: int = 5, latency: float = 0.05) -> list[dict[str, Any]]:
    """Median wall/ideal per fan-out width, and the peak memory per sub-agent."""
    asyncio.run(one_run(5, 0.0))  # warm-up: imports, encodings, schema caches
    ideal = CALLS_ON_CRITICAL_PATH * latency
    rows = []
    for width in sizes:
        walls = [asyncio.run(one_run(width, latency)) for _ in range(runs)]
        baseline = peak_memory(1, latency)
        peak = peak_memory(width, latency)
        rows.append(
            {
                "subagents": width,
                "ideal_s": ideal,
                "wall_s": statistics.median(walls),
                "ratio": statistics.median(walls) / ideal,
                "ratio_spread": [min(walls) / ideal, max(walls) / ideal],
                "peak_mb": peak / 1e6,
                "kb_per_subagent": (peak - baseline) / max(1, width - 1) / 1e3,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 50, 200])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.05)
    args = parser.parse_args(argv)
    rows = measure(args.sizes, args.runs, args.latency)
    json.dump(rows, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
