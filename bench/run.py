"""Run the whole suite, ours and every peer, and write bench/results.json and a markdown table.

    python -m bench [--quick] [--frameworks ours langgraph ...] [--workloads loop fanout ...]
                    [--out bench/results.json] [--readme bench/README.md] [--budget 540]

Each (framework, workload) runs in a fresh worker process (`bench/worker.py`), one at a time,
so nothing runs alongside what is being timed; only the token workload, which times nothing,
runs two workers at once. The suite keeps to `--budget` seconds: each worker gets a deadline
from its share of the budget (`EXPECTED_S`), and past it makes no more runs than one.
`--readme` replaces the results section of bench/README.md with this run's table, machine and
versions.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .machine import machine, versions
from .peers import FRAMEWORKS
from .report import rows, table
from .skills_tokens import write_catalog
from .worker import WORKLOADS, settings_to_json
from .workloads import QUICK, Settings

HERE = Path(__file__).resolve().parent
START, END = "<!-- results:start -->", "<!-- results:end -->"
UNTIMED = {"tokens"}
# Seconds each worker took in a full run on a 2-CPU AMD EPYC VM; only the proportions matter:
# they split the suite's budget into deadlines. Token workers run two at a time, hence halved.
EXPECTED_S = {
    "loop": {"ours": 2, "langgraph": 26, "pydantic_ai": 74, "openai_agents": 176},
    "fanout": {"ours": 8, "langgraph": 29, "pydantic_ai": 31, "openai_agents": 45},
    "tokens": {"ours": 8, "langgraph": 18, "pydantic_ai": 6, "openai_agents": 12},
    "scan": {"ours": 2, "langgraph": 19, "pydantic_ai": 19, "openai_agents": 22},
}
DEFAULT_EXPECTED_S = 30.0


def deadlines(
    keys: list[str], workloads: list[str], budget: float, start: float
) -> dict[tuple[str, str], float]:
    """A `time.time()` deadline per (workload, framework): the budget split by expected cost."""
    costs = [
        ((w, k), EXPECTED_S.get(w, {}).get(k, DEFAULT_EXPECTED_S)) for w in workloads for k in keys
    ]
    scale = budget / sum(cost for _, cost in costs)
    schedule, elapsed = {}, 0.0
    for key, cost in costs:
        elapsed += cost * scale
        schedule[key] = start + elapsed
    return schedule


def spawn(
    key: str, workload: str, settings: Settings, catalogs: list[Path], timeout: float
) -> dict[str, Any]:
    """One worker process; its outcome, or why there is none."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        command = [sys.executable, "-m", "bench.worker", key, workload, "--out", out.name]
        command += ["--settings", settings_to_json(settings), "--catalogs", *map(str, catalogs)]
        try:
            done = subprocess.run(
                command, cwd=HERE.parent, capture_output=True, text=True, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            return {"status": "failed", "reason": f"no result within {timeout:.0f} s"}
        text = Path(out.name).read_text(encoding="utf-8")
    if done.returncode != 0 or not text:
        tail = (done.stderr or "").strip().splitlines()[-3:]
        return {"status": "failed", "reason": f"worker exited {done.returncode}: {tail}"}
    return json.loads(text)


def run_suite(
    settings: Settings, keys: list[str], workloads: list[str], timeout: float, budget: float
) -> dict[str, Any]:
    began = time.perf_counter()
    schedule = deadlines(keys, workloads, budget, time.time())
    frameworks: dict[str, dict[str, Any]] = {key: {} for key in keys}
    with tempfile.TemporaryDirectory(prefix="bench-catalogs-") as tmp:
        catalogs = [
            write_catalog(Path(tmp) / f"skills-{size}", size, settings.tools_per_skill)
            for size in settings.catalog_sizes
        ]
        for workload in workloads:

            def one(key: str, workload: str = workload) -> dict[str, Any]:
                step = time.perf_counter()
                timed = dataclasses.replace(settings, deadline=schedule[workload, key])
                outcome = spawn(key, workload, timed, catalogs, timeout)
                took = time.perf_counter() - step
                line = f"{workload:>7} {key:<14} {outcome['status']:<11} {took:6.1f} s"
                print(line, file=sys.stderr)
                return outcome

            with ThreadPoolExecutor(max_workers=2 if workload in UNTIMED else 1) as pool:
                for key, outcome in zip(keys, pool.map(one, keys), strict=True):
                    frameworks[key][workload] = outcome
    distributions = [d for key in keys for d in FRAMEWORKS[key].distributions]
    return {
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "suite_seconds": round(time.perf_counter() - began, 1),
        "machine": machine(),
        "versions": versions(distributions),
        "settings": {**json.loads(settings_to_json(settings)), "budget_s": budget},
        "frameworks": frameworks,
    }


def markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    tested = ", ".join(f"{name} {version}" for name, version in results["versions"].items())
    return "\n".join(
        [
            table(results),
            "",
            f"Machine: {m['cpu']}, {m['nproc']} CPUs, {m['memory_gb']} GB; "
            f"{m['implementation']} {m['python']} on {m['platform']}.",
            f"Versions: {tested}.",
            f"Run {results['generated_at']}; the whole suite took {results['suite_seconds']} s.",
        ]
    )


def update_readme(path: Path, text: str) -> None:
    readme = path.read_text(encoding="utf-8")
    head, found, rest = readme.partition(START)
    _, found_end, tail = rest.partition(END)
    if not (found and found_end):
        raise SystemExit(f"{path} has no {START} ... {END} section")
    path.write_text(f"{head}{START}\n{text}\n{END}{tail}", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, a few seconds each")
    parser.add_argument(
        "--frameworks", nargs="+", choices=list(FRAMEWORKS), default=list(FRAMEWORKS)
    )
    parser.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    parser.add_argument("--out", type=Path, default=HERE / "results.json")
    parser.add_argument("--readme", type=Path, help="write the table into this README")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per worker")
    parser.add_argument("--budget", type=float, default=540, help="seconds for the whole suite")
    args = parser.parse_args(argv)
    settings = QUICK if args.quick else Settings()
    results = run_suite(settings, args.frameworks, args.workloads, args.timeout, args.budget)
    results["summary"] = rows(results)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    text = markdown(results)
    print(text)
    if args.readme:
        update_readme(args.readme, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
