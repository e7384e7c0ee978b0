"""The loop's own cost per step: scripted model, zero latency, a trivial tool.

Reports the median microseconds per step over several runs, the share spent in token
counting (the loop's and the scripted model's usage count), the share spent inside the scripted
model, and whether the cost stays flat as the history grows (first vs last 100 steps).

    python bench/loop_overhead.py [--steps 1000] [--runs 5] [--trace] [--sync-tool]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from orchestrator import Agent, TokenCounter, Trace, tool
from orchestrator.agent import RunState
from orchestrator.models import ScriptedModel
from orchestrator.models.base import ModelRequest, ModelResponse


@tool(name="echo")
def echo_sync(n: int) -> str:
    """Return the number it was given (runs in a thread of its own)."""
    return str(n)


@tool(name="echo")
async def echo_async(n: int) -> str:
    """Return the number it was given (runs on the event loop)."""
    return str(n)


class TimedCounter(TokenCounter):
    """A counter that adds up the time spent counting requests."""

    def __init__(self) -> None:
        super().__init__()
        self.seconds = 0.0

    def count_request(self, messages: Any, tools: Any = ()) -> int:
        began = time.perf_counter()
        try:
            return super().count_request(messages, tools)
        finally:
            self.seconds += time.perf_counter() - began


class TimedModel(ScriptedModel):
    """A scripted model that adds up the time spent inside it (its reply and its usage count)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seconds = 0.0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        began = time.perf_counter()
        try:
            return await super().complete(request)
        finally:
            self.seconds += time.perf_counter() - began


class TimedAgent(Agent):
    """An agent that records how long each step took."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.step_seconds: list[float] = []

    async def step(self, state: RunState) -> None:
        began = time.perf_counter()
        await super().step(state)
        self.step_seconds.append(time.perf_counter() - began)


def script(steps: int) -> dict[str, list[dict[str, Any]]]:
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "echo", "arguments": {"n": i}}]} for i in range(steps - 1)
    ]
    turns.append({"content": "done"})
    return {"*": turns}


def one_run(steps: int, trace_dir: Path | None, sync_tool: bool = False) -> dict[str, float]:
    counter = TimedCounter()
    model = TimedModel(script(steps))
    # The scripted model counts its requests too, as a provider would; time both.
    model._counter = counter
    trace = Trace(trace_dir / "run.jsonl", secrets=[]) if trace_dir else None
    echo = echo_sync if sync_tool else echo_async
    agent = TimedAgent(model, [echo], max_steps=steps + 1, trace=trace, counter=counter)
    began = time.perf_counter()
    result = asyncio.run(agent.run("count"))
    total = time.perf_counter() - began
    if trace:
        trace.close()
    if result.status != "completed" or result.steps != steps:
        raise RuntimeError(f"benchmark run ended {result.status} after {result.steps} steps")
    per_step = agent.step_seconds
    return {
        "us_per_step": total / steps * 1e6,
        "median_step_us": statistics.median(per_step) * 1e6,
        "first_100_us": statistics.median(per_step[:100]) * 1e6,
        "last_100_us": statistics.median(per_step[-100:]) * 1e6,
        "counting_share": counter.seconds / total,
        "model_share": model.seconds / total,
    }


def measure(
    steps: int = 1000, runs: int = 5, with_trace: bool = False, sync_tool: bool = False
) -> dict[str, Any]:
    """Median figures over `runs` runs after one warm-up run."""
    with tempfile.TemporaryDirectory() as tmp:
        trace_dir = Path(tmp) if with_trace else None
        one_run(min(steps, 50), trace_dir, sync_tool)
        samples = [one_run(steps, trace_dir, sync_tool) for _ in range(runs)]
    summary: dict[str, Any] = {
        "steps": steps,
        "runs": runs,
        "trace": with_trace,
        "tool": "sync (a daemon thread per call)" if sync_tool else "async",
    }
    for key in samples[0]:
        values = [s[key] for s in samples]
        summary[key] = statistics.median(values)
        summary[f"{key}_spread"] = [min(values), max(values)]
    summary["flatness"] = summary["last_100_us"] / summary["first_100_us"]
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--trace", action="store_true", help="also write a JSONL trace")
    parser.add_argument("--sync-tool", action="store_true", help="use a sync tool (thread hop)")
    args = parser.parse_args(argv)
    result = measure(args.steps, args.runs, args.trace, args.sync_tool)
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
