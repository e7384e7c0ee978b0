"""Traces of real runs, for the report's tests: the three examples through the command line,
a job whose step fails, one interrupted with Ctrl-C, one killed half-way and resumed, nested
forks, a run whose model output is hostile markup, and a fan-out to 1,000 sub-agents. All
offline, with the scripted model.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from trace_lines import trace_lines

from bench.report_size import fan_out
from orchestrator import Agent, Trace
from orchestrator.models import ScriptedModel
from orchestrator.tasks import ForkExtension, SubagentRegistry
from orchestrator.testing import loopback_only

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
HOSTILE = '</script><script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'

JOB = """\
name: {name}
model: scripted:script.yaml
budget: {{max_steps: 5}}
permissions: {{workspace: ., shell: true}}
steps:
{steps}
"""
TWO_STEPS = """\
  - {id: first, task: "Say hello."}
  - {id: second, depends_on: [first], task: "Repeat: {steps.first.output}"}
  - {id: third, depends_on: [second], task: "Once more."}
"""


def _command(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "orchestrator", "run", *map(str, args), "--quiet", "--json"]


def _job(folder: Path, name: str, script: str, steps: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "script.yaml").write_text(script)
    (folder / "job.yaml").write_text(JOB.format(name=name, steps=steps))
    return folder / "job.yaml"


def make_traces(root: Path) -> dict[str, Path]:
    """Run everything once (the command-line runs side by side); returns each trace's path."""
    shutil.copytree(EXAMPLES, root / "examples", ignore=shutil.ignore_patterns("out"))
    traces, runs = {}, {}
    for name in ("quickstart", "code-review", "sales-report"):
        traces[name] = root / f"{name}.jsonl"
        runs[name] = _start(root, root / "examples" / f"{name}.yaml", traces[name])
    failed, resumed, cancelled = root / "failed", root / "resumed", root / "cancelled"
    script = "first:\n  - tool_calls: [{name: nope, arguments: {}}]\n  - content: hello\n"
    runs["failed"] = _start(failed, _job(failed, "failing", script, TWO_STEPS), "t.jsonl")
    # Killed (SIGKILL) while `second` runs a long shell command, then resumed.
    runs["resumed"] = _start(resumed, _job(resumed, "resumed", KILLED, TWO_STEPS), "t.jsonl")
    runs["cancelled"] = _start(cancelled, _job(cancelled, "interrupted", *SLOW), "t.jsonl")
    # The kill first: its window is the killed step's command, the shorter one; waiting for
    # the interrupted run's exit first could outlast it on a busy machine.
    _kill(runs.pop("resumed"), resumed / "t.jsonl")
    _interrupt(runs.pop("cancelled"), cancelled / "t.jsonl")
    runs["resumed"] = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "resume", "t.jsonl", "--quiet", "--json"],
        cwd=resumed,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for name, process in runs.items():
        assert process.wait(120) == {"failed": 3}.get(name, 0), name
    traces.update({n: root / n / "t.jsonl" for n in ("failed", "resumed", "cancelled")})
    with loopback_only("tests"):
        traces["nested"] = _nested(root / "nested.jsonl")
        traces["hostile"] = _hostile(root / "hostile.jsonl")
        traces["fanout"] = fan_out(root / "fanout.jsonl", 1_000)
    return traces


def _start(cwd: Path, job: Path, trace: Path | str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        _command(job, "--trace", trace),
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


KILLED = """\
first: [{content: hello}]
second:
  - tool_calls: [{name: load_skill, arguments: {name: shell}}]
  - tool_calls: [{name: shell__run, arguments: {command: "sleep 15"}}]
  - content: hi
third: [{content: done}]
"""


def _kill(process: subprocess.Popen[bytes], trace: Path) -> None:
    """SIGKILL the run once the second step's command runs (the command, in a session of its
    own, outlives it by a few seconds)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not _started(trace, "shell__run"):
        time.sleep(0.05)
    process.kill()
    process.wait(60)


SLOW = (
    """\
slow:
  - tool_calls: [{name: load_skill, arguments: {name: shell}}]
  - tool_calls: [{name: shell__run, arguments: {command: "sleep 30"}}]
quick: [{content: fine}]
""",
    "  - {id: slow, task: Wait.}\n  - {id: quick, task: x}\n"
    "  - {id: after, depends_on: [slow, quick], task: x}\n",
)


def _interrupt(process: subprocess.Popen[bytes], trace: Path) -> None:
    """Ctrl-C once the slow step's shell command runs."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not _started(trace, "shell__run"):
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    assert process.wait(60) == 130


def _started(trace: Path, name: str) -> bool:
    if not trace.exists():
        return False
    return any(e["type"] == "tool_start" and e["name"] == name for e in trace_lines(trace))


def fork_call(*tasks: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": [{"name": "fork", "arguments": {"tasks": list(tasks)}}]}


def _nested(path: Path) -> Path:
    script = {
        "planner": [
            fork_call(
                {"id": "load", "task": "Load it."},
                {"id": "team", "task": "Split it.", "depends_on": ["load"]},
                {"id": "check", "task": "Check it.", "depends_on": ["load"]},
            ),
            {"content": "all done"},
        ],
        "planner/load": [{"content": "loaded"}],
        "planner/check": [{"content": "checked"}],
        "planner/team": [
            fork_call({"id": "leaf", "task": "x"}, {"id": "twig", "task": "y"}),
            {"content": "team done"},
        ],
        "planner/team/leaf": [{"content": "leaf done"}],
        "planner/team/twig": [{"content": "twig done"}],
    }
    extension = ForkExtension(SubagentRegistry())
    with Trace(path) as trace:
        Agent(ScriptedModel(script), name="planner", extensions=[extension], trace=trace).run_sync(
            "go"
        )
    return path


def _hostile(path: Path) -> Path:
    script = {
        "*": [
            {"tool_calls": [{"name": HOSTILE, "arguments": {"text": HOSTILE}}]},
            {"content": f"Here it is: {HOSTILE}\n" + "a long line of output\n" * 60},
        ]
    }
    with Trace(path) as trace:
        Agent(ScriptedModel(script), name="hostile", system=HOSTILE, trace=trace).run_sync(HOSTILE)
    return path


def expected_graph(events: list[dict[str, Any]]) -> tuple[set[str], set[tuple[str, str]]]:
    """The graph a trace describes: every task and agent; depends_on edges, and an edge from
    a forking agent to each of its tasks that waits for nothing."""
    nodes = {e["agent"] for e in events if e["type"] == "run_start"}
    edges = set()
    for event in (e for e in events if e["type"] == "fork"):
        prefix = "" if event["agent"] == "job" else f"{event['agent']}/"
        for task in event["tasks"]:
            nodes.add(task["path"])
            edges |= {(prefix + d, task["path"]) for d in task["depends_on"]}
            if not task["depends_on"] and event["agent"] != "job":
                edges.add((event["agent"], task["path"]))
    return nodes, edges
