"""A planner that overlaps its own four steps with a background fork, against the blocking fork.

The planner forks one research task, does four steps of its own (a model turn and a tool call
each), and answers with the research. With `fork(..., wait=false)` the research runs while the
planner works, and the planner collects it with `wait_tasks` before it answers; with the
blocking fork the planner waits for the research first, then does its four steps. Only the
model's decisions and latencies are scripted (`ScriptedModel`); the loop, the fork, the
scheduler, the budget and a JSONL trace are real.

The ideal wall time is what the scripted latencies allow: the longer of the research and the
planner's own steps in the background, their sum for the blocking fork. Reported: the median
wall time of `--runs` runs (with [min, max]), the ideal, the background run's overhead over
its ideal, and what the background fork saves against the blocking one, for research shorter
than, as long as and longer than the planner's own work.

    python bench/background_fork.py [--runs 7] [--step 0.25] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from orchestrator import Agent, Trace, tool
from orchestrator.models import ScriptedModel
from orchestrator.tasks import ForkExtension, SubagentRegistry

OWN_STEPS = 4
RESEARCH_STEPS = 2


@tool
def record(finding: str) -> str:
    """Record one finding of the planner's own work.

    Args:
        finding: what was found
    """
    return f"recorded: {finding}"


def script(*, background: bool, step: float, research: float) -> dict[str, list[dict[str, Any]]]:
    """The planner's turns and the research task's, with their latencies (seconds)."""

    def call(name: str, **arguments: Any) -> dict[str, Any]:
        return {"tool_calls": [{"name": name, "arguments": arguments}]}

    fork = call("fork", tasks=[{"id": "research", "task": "Research the market."}])
    if background:
        fork["tool_calls"][0]["arguments"]["wait"] = False
    own = [{**call("record", finding=f"part {i}"), "latency": step} for i in range(OWN_STEPS)]
    collect = [call("wait_tasks")] if background else []
    per_step = research / RESEARCH_STEPS
    digging = [
        {**call("record", finding=f"source {i}"), "latency": per_step}
        for i in range(RESEARCH_STEPS - 1)
    ]
    return {
        "planner": [fork, *own, *collect, {"content": "The plan, with the research."}],
        "planner/research": [*digging, {"content": "market grows 7%", "latency": per_step}],
    }


async def run_once(folder: Path, *, background: bool, step: float, research: float) -> float:
    """Wall seconds of one run of the planner."""
    model = ScriptedModel(script(background=background, step=step, research=research))
    forks = ForkExtension(SubagentRegistry(), tools=[record])
    path = folder / f"{time.monotonic_ns()}.jsonl"
    with Trace(path) as trace:
        agent = Agent(model, [record], name="planner", extensions=[forks], trace=trace)
        began = time.perf_counter()
        result = await agent.run("Plan the launch")
        wall = time.perf_counter() - began
    if result.status != "completed" or [c.status for c in result.children] != ["completed"]:
        raise RuntimeError(f"the run did not complete: {result.status} {result.error}")
    model.assert_all_used()
    return wall


def measure(runs: int, step: float, ratios: list[float]) -> list[dict[str, Any]]:
    """For each research length (a ratio of the planner's own work), both forks' wall times."""
    own = OWN_STEPS * step
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for ratio in ratios:
            research = own * ratio
            walls: dict[str, list[float]] = {"background": [], "blocking": []}
            for _ in range(runs):
                for kind in walls:  # interleaved: both see the same machine load
                    wall = asyncio.run(
                        run_once(
                            Path(folder),
                            background=kind == "background",
                            step=step,
                            research=research,
                        )
                    )
                    walls[kind].append(wall)
            rows.append(
                {
                    "research_s": research,
                    "own_s": own,
                    "ideal_background_s": max(own, research),
                    "ideal_blocking_s": own + research,
                    "background_s": walls["background"],
                    "blocking_s": walls["blocking"],
                }
            )
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| research / own work | background fork: wall [min, max] | ideal | over ideal "
        "| blocking fork: wall | ideal | blocking / background |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        background = statistics.median(row["background_s"])
        blocking = statistics.median(row["blocking_s"])
        spread = f"[{min(row['background_s']):.3f}, {max(row['background_s']):.3f}]"
        over = background - row["ideal_background_s"]
        lines.append(
            f"| {row['research_s']:.2f} s / {row['own_s']:.2f} s "
            f"| {background:.3f} s {spread} | {row['ideal_background_s']:.2f} s "
            f"| +{over * 1000:.0f} ms ({background / row['ideal_background_s']:.3f}x) "
            f"| {blocking:.3f} s | {row['ideal_blocking_s']:.2f} s "
            f"| {blocking / background:.2f}x |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="runs of each fork per row")
    parser.add_argument("--step", type=float, default=0.25, help="seconds per own step")
    parser.add_argument(
        "--ratios", type=float, nargs="+", default=[0.5, 1.0, 2.0], help="research / own work"
    )
    parser.add_argument("--json", action="store_true", help="every run's figures as JSON")
    args = parser.parse_args()
    rows = measure(args.runs, args.step, args.ratios)
    print(json.dumps(rows, indent=2) if args.json else table(rows))


if __name__ == "__main__":
    main()
