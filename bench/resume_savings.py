"""What resuming saves: a three-step job killed with SIGKILL at four points, then resumed.

The job runs offline (the scripted model, with a latency on some turns) but every other part
is real: `orchestrator run` in its own process, the shell skill, a fork of three sub-agents.
`gather` loads the shell skill and runs a command; `work` runs a long command; `fan`, a
planner step, forks `a`, `b` and `c`, which run side by side. For each kill point the run is
killed with SIGKILL as soon as its trace shows that moment, then `orchestrator resume`
finishes it. Reported per kill point: the model calls of an uninterrupted run, those the
killed attempt made, those the resumed attempt made, how many a rerun from scratch would have
repeated (saved), and the tokens the job reports (the killed attempt's included).

    python bench/resume_savings.py [--json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator import read_trace
from orchestrator.trace import Event

SCRIPT = """\
gather:
  - tool_calls: [{name: load_skill, arguments: {name: shell}}]
  - tool_calls: [{name: shell__run, arguments: {command: "echo gathered"}}]
  - {content: gathered facts, latency: 1.5}
work:
  - {tool_calls: [{name: load_skill, arguments: {name: shell}}], latency: 0.5}
  - tool_calls: [{name: shell__run, arguments: {command: "sleep 1.5; echo worked"}}]
  - content: work done
fan:
  - tool_calls:
      - name: fork
        arguments:
          tasks:
            - {id: a, task: "Part a."}
            - {id: b, task: "Part b."}
            - {id: c, task: "Part c."}
  - content: all parts combined
fan/a:
  - {tool_calls: [{name: load_skill, arguments: {name: files}}], latency: 0.5}
  - content: a done
fan/b:
  - {tool_calls: [{name: load_skill, arguments: {name: files}}], latency: 0.2}
  - {content: b done, latency: 1.5}
fan/c:
  - {content: c done, latency: 2}
"""
JOB = """\
name: durable
model: scripted:script.yaml
budget: {max_steps: 6, max_tokens: 200000}
permissions: {workspace: ., shell: true}
steps:
  - {id: gather, task: "Gather the facts."}
  - {id: work, depends_on: [gather], task: "Work on: {steps.gather.output}"}
  - {id: fan, depends_on: [work], planner: true, task: "Split up: {steps.work.output}"}
"""


def _has(kind: str, agent: str, **fields: Any) -> Callable[[list[Event]], bool]:
    """A test of a trace: has it an event of `kind` by `agent` with these fields (or message
    fields)?"""

    def matches(event: Event) -> bool:
        message = event.get("message") or {}
        return all(event.get(k) == v or message.get(k) == v for k, v in fields.items())

    def reached(events: list[Event]) -> bool:
        return any(e["type"] == kind and e["agent"] == agent and matches(e) for e in events)

    return reached


@dataclass(frozen=True)
class KillPoint:
    """Where a run is killed: as soon as `reached(events)` holds for its trace."""

    name: str
    description: str
    reached: Callable[[list[Event]], bool]


KILL_POINTS = [
    KillPoint(
        "model-call",
        "during a model call (gather's third call, after its command's result)",
        _has("message", "gather", role="tool", name="shell__run"),
    ),
    KillPoint(
        "long-tool",
        "during a long tool call in the second step (work's `sleep`)",
        _has("tool_start", "work", name="shell__run"),
    ),
    KillPoint(
        "fork",
        "during a fork with several running tasks (a done, b and c running)",
        _has("task_end", "fan/a", status="completed"),
    ),
    KillPoint(
        "after-step",
        "right after a step finished (gather's task_end)",
        _has("task_end", "gather", status="completed"),
    ),
]


@dataclass
class Outcome:
    """One run: its folder and trace, how the last command exited, its JSON result."""

    folder: Path
    trace: Path
    returncode: int
    result: dict[str, Any] = field(default_factory=dict)
    stderr: str = ""

    @property
    def events(self) -> list[Event]:
        return [event.as_line() for event in read_trace(self.trace)]


def write_job(folder: Path, script: str = SCRIPT) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "script.yaml").write_text(script)
    (folder / "job.yaml").write_text(JOB)
    return folder / "job.yaml"


def _orchestrator(*args: str) -> list[str]:
    return [sys.executable, "-m", "orchestrator", *args]


def _finish(folder: Path, trace: Path, command: list[str]) -> Outcome:
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=180)
    result = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}
    return Outcome(folder, trace, done.returncode, result, done.stderr)


def run_uninterrupted(folder: Path, script: str = SCRIPT) -> Outcome:
    """The job from start to end, for comparison."""
    write_job(folder, script)
    trace = folder / "t.jsonl"
    return _finish(folder, trace, _orchestrator("run", "job.yaml", "--trace", str(trace), "--json"))


def kill_and_resume(folder: Path, point: KillPoint, *, timeout: float = 120) -> Outcome:
    """Run the job, SIGKILL it at `point`, then resume it; the resume's outcome."""
    write_job(folder)
    trace = folder / "t.jsonl"
    command = _orchestrator("run", "job.yaml", "--trace", str(trace), "--quiet")
    process = subprocess.Popen(
        command, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + timeout
    try:
        while not (trace.exists() and point.reached([e.as_line() for e in read_trace(trace)])):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the run ended before the kill point {point.name!r}")
            time.sleep(0.02)
    finally:
        process.kill()  # SIGKILL
        process.wait(30)
    return _finish(folder, trace, _orchestrator("resume", str(trace), "--json"))


def calls(events: list[Event], attempt: int | None = None) -> Counter[str]:
    """Model calls per agent path (of one attempt, or all)."""
    return Counter(
        e["agent"]
        for e in events
        if e["type"] == "model_call" and (attempt is None or e.get("attempt") == attempt)
    )


def repeated_calls(events: list[Event]) -> int:
    """Model calls made a second time for the same agent and step (0: none was repeated)."""
    made = Counter((e["agent"], e["step"]) for e in events if e["type"] == "model_call")
    return sum(n - 1 for n in made.values() if n > 1)


def figures(reference: Outcome, resumed: Outcome) -> dict[str, int]:
    """What one kill point cost and saved, in model calls and tokens."""
    events = resumed.events
    killed, after = calls(events, 1), calls(events, 2)
    return {
        "uninterrupted_calls": sum(calls(reference.events).values()),
        "killed_attempt_calls": sum(killed.values()),
        "resumed_attempt_calls": sum(after.values()),
        "calls_saved": sum(killed.values()) - repeated_calls(events),
        "calls_repeated": repeated_calls(events),
        "tokens_saved": sum(
            e["usage"]["total_tokens"]
            for e in events
            if e["type"] == "model_call" and e.get("attempt") == 1
        ),
        "tokens_reported": resumed.result.get("usage", {}).get("total_tokens", 0),
        "tokens_in_trace": sum(
            e["usage"]["total_tokens"] for e in events if e["type"] == "model_call"
        ),
    }


def measure(root: Path) -> tuple[Outcome, dict[str, Outcome]]:
    """The uninterrupted run and every kill point, side by side."""
    with ThreadPoolExecutor(max_workers=len(KILL_POINTS) + 1) as pool:
        reference = pool.submit(run_uninterrupted, root / "uninterrupted")
        killed = {p.name: pool.submit(kill_and_resume, root / p.name, p) for p in KILL_POINTS}
        return reference.result(), {name: job.result() for name, job in killed.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        reference, outcomes = measure(Path(tmp))
        table = {name: figures(reference, outcome) for name, outcome in outcomes.items()}
    if args.json:
        print(json.dumps(table, indent=2))
        return 0
    uninterrupted = reference.result.get("usage", {}).get("total_tokens", 0)
    print(f"Model calls of the job, and tokens (an uninterrupted run reports {uninterrupted:,}).")
    print(
        "| kill point | uninterrupted | killed attempt | resumed attempt | calls saved "
        "| repeated | tokens saved | tokens reported |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for point in KILL_POINTS:
        row = table[point.name]
        print(
            f"| {point.description} | {row['uninterrupted_calls']} | "
            f"{row['killed_attempt_calls']} | {row['resumed_attempt_calls']} | "
            f"{row['calls_saved']} | {row['calls_repeated']} | {row['tokens_saved']:,} | "
            f"{row['tokens_reported']:,} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
