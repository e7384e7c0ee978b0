"""Scale: a planner forks N sub-agents, here (asyncio) and on Ray, with 50 ms model latency.

Each sub-agent makes two model calls (a tool call, then its answer); every call sleeps
`latency` (a remote model's wait); nothing limits concurrency (`max_parallel` = N) or the
budget. The ideal wall time is the critical path, 4 x latency: the planner's fork call, a
sub-agent's two calls, the planner's answer. Both executors write the run's one trace file.
Each run is a fresh process (its driver's peak RSS is its own); Ray starts before the clock
does (a cluster is there already), its run's workers and budget host start inside it.

    python bench/ray_scale.py [--sizes 1000 10000] [--runs 3] [--latency 0.05] [--workers 2]

Prints a markdown table (median wall / ideal, spread, the start: until the planner's first
event, which for Ray includes the session's workers starting; the driver's CPU time and peak
RSS growth) and writes the figures to bench/ray_scale.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CALLS_ON_CRITICAL_PATH = 4
RESULTS = Path(__file__).with_name("ray_scale.json")


def script(width: int, latency: float) -> dict[str, list[dict[str, Any]]]:
    tasks = [{"id": f"w{i}", "task": f"Item {i}."} for i in range(width)]
    turns: dict[str, list[dict[str, Any]]] = {
        "planner": [
            {"tool_calls": [{"name": "fork", "arguments": {"tasks": tasks}}], "latency": latency},
            {"content": "all done", "latency": latency},
        ]
    }
    for i in range(width):
        turns[f"planner/w{i}"] = [
            {"tool_calls": [{"name": "lookup", "arguments": {"n": i}}], "latency": latency},
            {"content": f"item {i} done", "latency": latency},
        ]
    return turns


def one_run(executor: str, width: int, latency: float, workers: int) -> dict[str, Any]:
    """One run in this process: wall seconds and the driver's peak RSS growth (MB)."""
    from orchestrator import Orchestrator

    folder = Path(tempfile.mkdtemp(prefix="ray-scale-"))
    (folder / "script.json").write_text(json.dumps(script(width, latency)), encoding="utf-8")
    remote = None
    if executor == "ray":
        from orchestrator.ray import RayExecutor

        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        remote = RayExecutor(workers=workers, init={"num_cpus": workers})
        remote.connect()
    orch = Orchestrator(
        f"scripted:{folder / 'script.json'}",
        builtin=False,
        max_parallel=width,
        output_cap_tokens=20,
        executor=remote,
    )
    usage = resource.getrusage(resource.RUSAGE_SELF)
    before, cpu = usage.ru_maxrss, usage.ru_utime + usage.ru_stime
    began = time.perf_counter()
    result = orch.run_sync("Do every item.", trace=folder / "trace.jsonl")
    wall = time.perf_counter() - began
    usage = resource.getrusage(resource.RUSAGE_SELF)
    peak, cpu = usage.ru_maxrss, usage.ru_utime + usage.ru_stime - cpu
    statuses = {child.status for child in result.children}
    if result.status != "completed" or statuses != {"completed"}:
        raise RuntimeError(f"run failed: {result.status}, children {statuses}")
    with (folder / "trace.jsonl").open(encoding="utf-8") as trace:
        first = json.loads(trace.readline())  # the planner's run_start: the session is up
    return {
        "wall": wall,
        "start": first["ts"] - (time.time() - wall),
        "driver_rss_mb": (peak - before) / 1024,
        "driver_cpu": cpu,
    }


def measure(executor: str, width: int, runs: int, latency: float, workers: int) -> dict:
    samples = []
    for _ in range(runs):
        args = [executor, str(width), str(latency), str(workers)]
        done = subprocess.run(
            [sys.executable, __file__, "--one", *args], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"{executor} x {width} failed:\n{done.stderr[-2000:]}")
        samples.append(json.loads(done.stdout.strip().splitlines()[-1]))
    ideal = CALLS_ON_CRITICAL_PATH * latency
    walls = sorted(s["wall"] for s in samples)
    return {
        "executor": executor,
        "sub_agents": width,
        "runs": runs,
        "ideal_s": ideal,
        "wall_s": statistics.median(walls),
        "wall_over_ideal": statistics.median(walls) / ideal,
        "spread": [walls[0] / ideal, walls[-1] / ideal],
        "start_s": statistics.median(s["start"] for s in samples),
        "driver_rss_mb": statistics.median(s["driver_rss_mb"] for s in samples),
        "driver_cpu_s": statistics.median(s.get("driver_cpu", 0.0) for s in samples),
    }


def table(rows: list[dict]) -> str:
    lines = [
        "| sub-agents | executor | wall (median) | of which start | wall / ideal | spread "
        "| driver CPU | driver peak RSS |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['sub_agents']:,} | {r['executor']} | {r['wall_s']:.2f} s | "
            f"{r['start_s']:.2f} s | "
            f"{r['wall_over_ideal']:.1f}x | {r['spread'][0]:.1f}-{r['spread'][1]:.1f}x | "
            f"{r['driver_cpu_s']:.1f} s | +{r['driver_rss_mb']:.0f} MB |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--executors", nargs="+", default=["local", "ray"])
    parser.add_argument("--one", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        executor, width, latency, workers = args.one
        print(json.dumps(one_run(executor, int(width), float(latency), int(workers))))
        return 0
    rows = [
        measure(executor, size, args.runs, args.latency, args.workers)
        for size in args.sizes
        for executor in args.executors
    ]
    print(table(rows))
    machine = {"cpus": os.cpu_count(), "python": sys.version.split()[0]}
    RESULTS.write_text(json.dumps({"machine": machine, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
