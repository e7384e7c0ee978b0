"""The four workloads, run the same way for every framework: warm-up, repeated runs, medians.

Each takes a framework module (`bench/ours.py` or one in `bench/peers/`) that does one run;
this module warms it up, repeats it, and summarizes each figure as its median and [min, max].
Repeats are time-boxed so the suite fits in ten minutes: a framework whose runs take long gets
fewer of them (at least two, one for a peer's catalog import, or one when the suite runs late
against its deadline), and the report says so.
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from .common import job_for, repeat, summarize
from .fanout import CALLS_ON_CRITICAL_PATH


@dataclass(frozen=True)
class Settings:
    """Sizes, repetitions and time boxes of one suite run."""

    loop_steps: int = 1000
    loop_runs: int = 5
    loop_budget_s: float = 20.0
    fanout_sizes: tuple[int, ...] = (10, 50, 200)
    fanout_latency: float = 0.05
    fanout_runs: int = 5
    fanout_budget_s: float = 8.0
    catalog_sizes: tuple[int, ...] = (10, 100, 1000)
    tools_per_skill: int = 5
    scan_repeats: int = 5
    scan_budget_s: float = 10.0
    deadline: float | None = None  # time.time() by which this worker should be done


QUICK = Settings(
    loop_steps=100,
    loop_runs=2,
    fanout_sizes=(5, 20),
    fanout_latency=0.01,
    fanout_runs=2,
    catalog_sizes=(3, 10),
    tools_per_skill=5,
    scan_repeats=2,
)


def loop(framework: ModuleType, settings: Settings) -> dict[str, Any]:
    """One agent, `loop_steps` sequential single-tool steps, zero latency."""
    framework.loop_overhead(min(settings.loop_steps, 50))
    samples, cut = repeat(
        lambda: framework.loop_overhead(settings.loop_steps),
        settings.loop_runs,
        settings.loop_budget_s,
        deadline=settings.deadline,
    )
    return {"steps": settings.loop_steps, "time_boxed": cut, **summarize(samples)}


def fanout(framework: ModuleType, settings: Settings) -> list[dict[str, Any]]:
    """A planner forking K sub-agents of 3 tool steps each: wall / ideal, and peak memory."""
    framework.fanout(5, 0.0)
    latency = settings.fanout_latency
    ideal = CALLS_ON_CRITICAL_PATH * latency
    rows = []
    for width in settings.fanout_sizes:
        walls, cut = repeat(
            lambda w=width: framework.fanout(w, latency),
            settings.fanout_runs,
            settings.fanout_budget_s,
            deadline=settings.deadline,
        )
        samples = [{"wall_s": wall, "ratio": wall / ideal} for wall in walls]
        peak = peak_memory(lambda w=width: framework.fanout(w, latency))
        row = {"subagents": width, "ideal_s": ideal, "time_boxed": cut, **summarize(samples)}
        rows.append({**row, "peak_mb": peak / 1e6})
    return rows


def peak_memory(run: Callable[[], Any]) -> int:
    """Peak bytes allocated (tracemalloc) during one run, in a run of its own."""
    gc.collect()
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def tokens(framework: ModuleType, catalogs: Sequence[Path]) -> list[dict[str, Any]]:
    """Tokens of the planner's first request and of a 3-skill job, per catalog size."""
    rows = []
    for root in catalogs:
        skills = sum(1 for p in root.iterdir() if p.is_dir())
        rows.append({"skills": skills, **framework.tool_tokens(root, job_for(root))})
    return rows


def scan(framework: ModuleType, catalogs: Sequence[Path], settings: Settings) -> dict[str, Any]:
    """What it takes before a planner can start on the largest catalog: ours scans, peers import.

    The warm-up runs on the smallest catalog (the files were just written, so the largest is
    in the page cache already), which keeps a slow peer's warm-up short.
    """
    framework.load_catalog(catalogs[0])
    catalog = catalogs[-1]

    def one() -> dict[str, float]:
        began = time.perf_counter()
        framework.load_catalog(catalog)
        return {"ms": (time.perf_counter() - began) * 1000}

    samples, cut = repeat(
        one, settings.scan_repeats, settings.scan_budget_s, min_runs=1, deadline=settings.deadline
    )
    skills = sum(1 for p in catalog.iterdir() if p.is_dir())
    return {"skills": skills, "time_boxed": cut, **summarize(samples)}
