"""What a remote (A2A) sub-agent adds to a fork, against the same sub-agent run here.

A planner forks one task, N times each way: to a local sub-agent, and to the same job served
by `orchestrator serve` in another process on 127.0.0.1. Both sub-agents answer with a
scripted model in one turn, so nearly all of a fork's time is the machinery around the model.
From the traces: the fork call's duration (`tool_end` of `fork`), less the model time of the
sub-agent (its `model_call` durations; for the remote one, read from the served run's trace).
The overhead of going remote is the difference of the two medians.

    python bench/a2a_overhead.py [--repeats 20] [--json FILE]

Needs the `[a2a]` extra.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from orchestrator import read_trace
from orchestrator.jobs import load_job
from orchestrator.planner import run_job

HELPER = "name: helper\nmodel: scripted:helper.script.yaml\ngoal: Replaced by each message.\n"
CALLER = """\
name: caller
model: scripted:caller.script.yaml
agents:
  far: {a2a: "URL"}
goal: Fork one task.
"""


def _write(folder: Path, agent: str, url: str) -> Path:
    fork = {"tool_calls": [{"name": "fork", "arguments": {"tasks": [
        {"id": "t", "agent": agent, "task": "Answer in one line."}]}}]}  # fmt: skip
    script = {"goal": [fork, {"content": "done"}], "goal/t": [{"content": "one line"}]}
    (folder / "caller.script.yaml").write_text(yaml.safe_dump(script))
    path = folder / "caller.yaml"
    path.write_text(CALLER.replace("URL", url))
    return path


def _model_ms(events: list[dict[str, Any]], agent: str | None = None) -> float:
    return sum(
        float(e.get("duration_ms") or 0)
        for e in events
        if e["type"] == "model_call" and (agent is None or e["agent"] == agent)
    )


def _fork_ms(events: list[dict[str, Any]]) -> float:
    [end] = [e for e in events if e["type"] == "tool_end" and e["name"] == "fork"]
    return float(end["duration_ms"])


async def _once(folder: Path, agent: str, url: str, served: Path, index: int) -> float:
    """One fork to `agent`; its time less the sub-agent's model time, in milliseconds."""
    job = load_job(_write(folder, agent, url))
    trace = folder / f"{agent}-{index}.jsonl"
    await run_job(job, trace=trace)
    events = [event.as_line() for event in read_trace(trace)]
    if agent == "general":
        return _fork_ms(events) - _model_ms(events, "goal/t")
    return _fork_ms(events) - _model_ms(_newest_served(served))


def _newest_served(served: Path) -> list[dict[str, Any]]:
    """The events of the run the server wrote last."""
    newest = max(served.glob("*.jsonl"), key=lambda p: p.stat().st_mtime)
    return [event.as_line() for event in read_trace(newest)]


async def _forks(folder: Path, url: str, served: Path, repeats: int) -> dict[str, Any]:
    await _once(folder, "far", url, served, -1)  # warm: imports, first connections
    await _once(folder, "general", url, served, -1)
    local, remote = [], []
    for index in range(repeats):
        local.append(await _once(folder, "general", url, served, index))
        remote.append(await _once(folder, "far", url, served, index))
    local_ms, remote_ms = statistics.median(local), statistics.median(remote)
    return {
        "repeats": repeats,
        "local_fork_ms_median": round(local_ms, 2),
        "remote_fork_ms_median": round(remote_ms, 2),
        "remote_overhead_ms_median": round(remote_ms - local_ms, 2),
        "local_ms": [round(x, 2) for x in local],
        "remote_ms": [round(x, 2) for x in remote],
    }


def measure(repeats: int) -> dict[str, Any]:
    """Serve the helper job in another process, then time the forks against it and here."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "helper.yaml").write_text(HELPER)
        (folder / "helper.script.yaml").write_text(
            yaml.safe_dump({"goal": [{"content": "one line"}]})
        )
        served = folder / "served"
        server = subprocess.Popen(
            [sys.executable, "-m", "orchestrator", "serve", "helper.yaml", "--port", "0",
             "--trace-dir", str(served)],
            cwd=folder, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert server.stderr is not None
            url = server.stderr.readline().rsplit(" at ", 1)[1].strip()
            return asyncio.run(_forks(folder, url, served, repeats))
        finally:
            server.terminate()
            server.wait(timeout=20)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    found = measure(args.repeats)
    print(
        f"fork of one task, less the sub-agent's model time (median of {args.repeats}):\n"
        f"  local sub-agent:             {found['local_fork_ms_median']:8.2f} ms\n"
        f"  remote (A2A, 127.0.0.1):     {found['remote_fork_ms_median']:8.2f} ms\n"
        f"  added by going remote:       {found['remote_overhead_ms_median']:8.2f} ms"
    )
    if args.json:
        args.json.write_text(json.dumps(found, indent=2) + "\n")


if __name__ == "__main__":
    main()
