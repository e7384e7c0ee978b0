"""The Ray executor on a real local Ray: the same runs as here, one budget, one trace, deaths.

Workers are real Ray worker processes; each builds its agents itself from the job (or the
orchestrator's settings) and its scripted model from the script file, as on a cluster.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from cli_process import orchestrator
from trace_lines import trace_lines

from orchestrator import Orchestrator
from orchestrator.errors import ConfigError
from orchestrator.events import ModelCall, TraceEvent
from orchestrator.jobs import JobRunner, load_job
from orchestrator.trace import Event, Trace

# Starts a local Ray: left out of the inner loop (`pytest -m "not slow"`).
pytestmark = [pytest.mark.usefixtures("ray_cluster"), pytest.mark.slow]

JOB = """\
name: dag
model: scripted:script.yaml
executor: {type: ray, workers: 2}
budget: {max_parallel: 4}
steps:
  - {id: load, task: Load the rows.}
  - {id: check, task: "Check {steps.load.output}", depends_on: [load]}
  - {id: count, task: Count them.}
  - {id: plan, task: Split the work., planner: true}
  - {id: broken, task: This one fails.}
  - {id: after, task: "Never runs: {steps.broken.output}", depends_on: [broken]}
  - id: report
    task: "Report {steps.check.output} {steps.count.output}"
    depends_on: [check, count, plan]
"""
SCRIPT: dict[str, Any] = {
    "load": [{"content": "12 rows", "latency": 0.05}],
    "check": [
        {"tool_calls": [{"name": "no_such_tool", "arguments": {}}]},
        {"content": "rows ok"},
    ],
    "count": [{"content": "12"}],
    "plan": [
        {
            "tool_calls": [
                {
                    "name": "fork",
                    "arguments": {
                        "tasks": [
                            {"id": "left", "task": "Do the left half."},
                            {"id": "right", "task": "Do the right half.", "depends_on": ["left"]},
                        ]
                    },
                }
            ]
        },
        {"content": "both halves done"},
    ],
    "plan/left": [{"content": "left done"}],
    "plan/right": [{"content": "right done"}],
    "broken": [],  # no turn: the scripted model raises, the step ends in error
    "report": [{"content": "all good"}],
}


def write_job(folder: Path, spec: str = JOB, script: dict[str, Any] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "script.yaml").write_text(json.dumps(script or SCRIPT), encoding="utf-8")
    (folder / "job.yaml").write_text(spec, encoding="utf-8")
    return folder / "job.yaml"


def by_agent(events: list[Event]) -> dict[str, list[str]]:
    """Each agent's events, in order, by what they are (message roles spelled out)."""
    order: dict[str, list[str]] = defaultdict(list)
    for event in events:
        kind = event["type"]
        if kind == "message":
            kind = f"message:{event['message']['role']}"
        order[event["agent"]].append(kind)
    return dict(order)


def run_job(path: Path, trace: Path, **overrides: Any) -> Any:
    job = load_job(path)
    return Orchestrator.from_job(job, **overrides).run_job_sync(job, trace=trace)


def test_the_same_dag_ends_the_same_on_ray_as_here(tmp_path: Path) -> None:
    spec = write_job(tmp_path)
    here = run_job(spec, tmp_path / "local.jsonl", executor=None)
    there = run_job(spec, tmp_path / "ray.jsonl")

    def ends(result: Any) -> list[tuple[Any, ...]]:
        return [(s.id, s.status, s.output, s.usage.total_tokens) for s in result.steps]

    assert ends(there) == ends(here)
    assert there.status == here.status == "failed"
    assert {s.id: s.status for s in there.steps}["after"] == "skipped"
    assert there.usage == here.usage
    local_events, ray_events = (
        trace_lines(tmp_path / "local.jsonl"),
        trace_lines(tmp_path / "ray.jsonl"),
    )
    # Every agent's events arrived, in the same order as when everything ran here.
    assert by_agent(ray_events) == by_agent(local_events)
    assert [e["seq"] for e in ray_events] == list(range(1, len(ray_events) + 1))


def test_task_start_says_which_executor_and_worker(tmp_path: Path) -> None:
    spec = write_job(tmp_path)
    run_job(spec, tmp_path / "local.jsonl", executor=None)
    run_job(spec, tmp_path / "ray.jsonl")
    local = [e for e in trace_lines(tmp_path / "local.jsonl") if e["type"] == "task_start"]
    ray = [e for e in trace_lines(tmp_path / "ray.jsonl") if e["type"] == "task_start"]
    assert {e["executor"] for e in local} == {"local"}
    assert all(e["worker"].endswith(f":{os.getpid()}") for e in local)
    steps = [e for e in ray if "/" not in e["agent"]]
    assert {e["executor"] for e in steps} == {"ray"}
    assert len({e["worker"] for e in steps}) == 2  # the steps were spread over both workers
    assert all(e["worker"].startswith(("w1@", "w2@")) for e in steps)
    # Every event a worker wrote says which one; the forked halves ran inside their planner's.
    events = trace_lines(tmp_path / "ray.jsonl")
    worker_of = {e["agent"]: e["worker"] for e in steps}
    for event in events:
        if event["type"] == "model_call":
            root = event["agent"].split("/")[0]
            assert event["worker"] == worker_of[root]


def test_trace_show_and_resume_work_on_a_ray_trace(tmp_path: Path) -> None:
    spec = write_job(tmp_path)
    full = run_job(spec, tmp_path / "ray.jsonl")
    shown = orchestrator("trace", "show", str(tmp_path / "ray.jsonl"), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "  left  [completed]" in shown.stdout and "report  [completed]" in shown.stdout

    # The run as a crash leaves it: cut after the planner step's fork had begun.
    lines = (tmp_path / "ray.jsonl").read_text(encoding="utf-8").splitlines()
    cut = next(i for i, line in enumerate(lines) if json.loads(line).get("agent") == "plan/right")
    (tmp_path / "cut.jsonl").write_text("\n".join(lines[:cut]) + "\n", encoding="utf-8")
    resumed = asyncio.run(Orchestrator.resume(tmp_path / "cut.jsonl"))
    assert [(s.id, s.status, s.output) for s in resumed.steps] == [
        (s.id, s.status, s.output) for s in full.steps
    ]
    ended = [json.loads(line) for line in lines[:cut] if '"task_end"' in line]
    before = {e["agent"] for e in ended if e["status"] != "skipped"}  # skips are decided again
    events = trace_lines(tmp_path / "cut.jsonl")
    restored = {e["agent"] for e in events if e["type"] == "task_end" and e.get("restored")}
    assert "plan/left" in before and restored == before  # what had ended is not run again
    assert sum(1 for e in events if e["type"] == "job_end") == 1


def test_a_goal_forks_onto_ray_from_the_python_api(tmp_path: Path) -> None:
    from orchestrator.ray import RayExecutor

    tasks = [{"id": f"t{i}", "task": f"Part {i}."} for i in range(6)]
    script = {
        "planner": [
            {"tool_calls": [{"name": "fork", "arguments": {"tasks": tasks}}]},
            {"content": "joined"},
        ],
        **{f"planner/t{i}": [{"content": f"part {i} done"}] for i in range(6)},
    }
    (tmp_path / "s.yaml").write_text(json.dumps(script), encoding="utf-8")
    model = f"scripted:{tmp_path / 's.yaml'}"
    here = Orchestrator(model, max_tokens=100_000).run_sync("go", trace=tmp_path / "l.jsonl")
    there = Orchestrator(model, max_tokens=100_000, executor=RayExecutor(workers=2)).run_sync(
        "go", trace=tmp_path / "r.jsonl"
    )
    assert there.output == here.output == "joined"
    assert [(c.id, c.status, c.output) for c in there.children] == [
        (c.id, c.status, c.output) for c in here.children
    ]
    assert there.total_usage == here.total_usage
    starts = [e for e in trace_lines(tmp_path / "r.jsonl") if e["type"] == "task_start"]
    assert {e["executor"] for e in starts} == {"ray"} and len(starts) == 6


def test_a_catalog_given_whole_reaches_the_workers_as_the_driver_scanned_it(
    tmp_path: Path,
) -> None:
    """A `SkillCatalog` object crosses as what its scan found (the run's `RunRecipe`): each
    worker imports the skill's code itself, checked against the digest the driver took."""
    from orchestrator.ray import RayExecutor
    from orchestrator.skills import SkillCatalog

    skill = tmp_path / "skills" / "loud"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: loud\ndescription: Says it loud.\n---\nShout.\n")
    (skill / "tools.py").write_text(
        "import os\nfrom orchestrator import tool\n\n\n@tool\n"
        "def shout(text: str) -> str:\n"
        '    """Say it loud.\n\n    Args:\n        text: what to say\n    """\n'
        "    return f'{text.upper()}! from {os.getpid()}'\n"
    )
    tasks = [{"id": f"t{i}", "task": f"Shout {i}."} for i in range(2)]
    script: dict[str, Any] = {
        "planner": [
            {"tool_calls": [{"name": "fork", "arguments": {"tasks": tasks}}]},
            {"content": "joined"},
        ],
    }
    for i in range(2):
        script[f"planner/t{i}"] = [
            {"tool_calls": [{"name": "load_skill", "arguments": {"name": "loud"}}]},
            {"tool_calls": [{"name": "loud__shout", "arguments": {"text": f"part {i}"}}]},
            {"content": f"shouted {i}"},
        ]
    (tmp_path / "s.yaml").write_text(json.dumps(script), encoding="utf-8")
    catalog = SkillCatalog([tmp_path / "skills"])
    catalog.load("loud")  # imported here first: what crosses is the scan, not this code
    orch = Orchestrator(
        f"scripted:{tmp_path / 's.yaml'}",
        skills=catalog,
        max_tokens=100_000,
        executor=RayExecutor(workers=2),
    )
    result = orch.run_sync("go", trace=tmp_path / "r.jsonl")
    assert result.status == "completed", result.error
    assert [(c.id, c.status) for c in result.children] == [("t0", "completed"), ("t1", "completed")]
    shouted = [
        e["message"]["content"]
        for e in trace_lines(tmp_path / "r.jsonl")
        if e["type"] == "message" and e["message"]["role"] == "tool" and "!" in str(e["message"])
    ]
    assert sorted(text.split(" from ")[0] for text in shouted) == ["PART 0!", "PART 1!"]
    assert all(int(text.split(" from ")[1]) != os.getpid() for text in shouted)


def test_two_runs_of_one_orchestrator_on_ray_cancel_and_finish_independently(
    tmp_path: Path,
) -> None:
    """Each run sends its forks through its own session (a view of the fork extension), so
    one run's start or end never moves the other's tasks; one is cancelled, the other ends."""
    from orchestrator.ray import RayExecutor

    tasks = [{"id": f"t{i}", "task": f"Part {i}."} for i in range(3)]
    # Both runs have opened their sessions before either forks (the planner's first turn is
    # slow): a run that sent its forks through a setting shared by the two would send both
    # runs' tasks through the session opened last.
    script = {
        "planner": [
            {"tool_calls": [{"name": "fork", "arguments": {"tasks": tasks}}], "latency": 2.0},
            {"content": "joined"},
        ],
        **{f"planner/t{i}": [{"content": f"part {i} done", "latency": 1.5}] for i in range(3)},
    }
    (tmp_path / "s.yaml").write_text(json.dumps(script), encoding="utf-8")
    orch = Orchestrator(
        f"scripted:{tmp_path / 's.yaml'}",
        max_tokens=100_000,
        executor=RayExecutor(workers=2),
    )

    async def both() -> tuple[Any, BaseException | Any]:
        started = asyncio.Event()

        def on_event(event: TraceEvent) -> None:
            if event.type == "task_start":
                started.set()

        with Trace(tmp_path / "cut.jsonl", listeners=[on_event]) as cut_trace:
            cut = asyncio.create_task(orch.run("go", trace=cut_trace))
            kept = asyncio.create_task(orch.run("go", trace=tmp_path / "kept.jsonl"))
            async with asyncio.timeout(60):  # its tasks start, recorded in its own trace
                await started.wait()
            cut.cancel()
            outcome = (await asyncio.gather(cut, return_exceptions=True))[0]
            return await kept, outcome

    kept, outcome = asyncio.run(both())
    assert isinstance(outcome, asyncio.CancelledError)
    assert kept.status == "completed" and kept.output == "joined"
    assert [(c.id, c.status) for c in kept.children] == [(f"t{i}", "completed") for i in range(3)]
    for name in ("kept", "cut"):
        starts = [e for e in trace_lines(tmp_path / f"{name}.jsonl") if e["type"] == "task_start"]
        assert {e["executor"] for e in starts} == {"ray"}, name
        assert sorted(e["id"] for e in starts) == [f"t{i}" for i in range(3)], name
    kept_ends = [e for e in trace_lines(tmp_path / "kept.jsonl") if e["type"] == "task_end"]
    assert sorted(e["status"] for e in kept_ends) == ["completed"] * 3
    cut_ends = [e for e in trace_lines(tmp_path / "cut.jsonl") if e["type"] == "run_end"]
    assert cut_ends and cut_ends[-1]["status"] == "cancelled"


def test_two_hundred_tasks_never_overdraw_a_tight_shared_budget(tmp_path: Path) -> None:
    from orchestrator.ray import RayExecutor

    count, limit = 200, 60_000
    tasks = [{"id": f"t{i}", "task": f"Look up item {i}."} for i in range(count)]
    script: dict[str, Any] = {
        "planner": [
            {"tool_calls": [{"name": "fork", "arguments": {"tasks": tasks}}]},
            {"content": "summary"},
        ]
    }
    for i in range(count):
        script[f"planner/t{i}"] = [
            {"content": "first", "tool_calls": [{"name": "missing", "arguments": {"n": i}}]},
            {"content": "second", "tool_calls": [{"name": "missing", "arguments": {"n": -i}}]},
            {"content": f"t{i} done", "latency": 0.01},
        ]
    (tmp_path / "s.yaml").write_text(json.dumps(script), encoding="utf-8")
    orch = Orchestrator(
        f"scripted:{tmp_path / 's.yaml'}",
        max_tokens=limit,
        max_parallel=50,
        executor=RayExecutor(workers=2, lease_tokens=8_000),
    )
    used: list[int] = []
    trace = Trace(tmp_path / "t.jsonl", listeners=[used_so_far(used)])
    with trace:
        result = asyncio.run(orch.run("go", trace=trace))

    assert max(used) <= limit  # at no point did the tree spend more than the budget
    statuses = [c.status for c in result.children]
    assert len(statuses) == count
    assert "completed" in statuses  # some ran to their end...
    assert set(statuses) & {"budget_exhausted", "skipped"}  # ...and the budget stopped others
    assert set(statuses) <= {"completed", "budget_exhausted", "skipped"}
    assert used[-1] > limit // 2  # the budget was spent, not stranded in leases


def used_so_far(totals: list[int]) -> Any:
    """A listener keeping the tree's spend after each model call, in the order they came."""

    def listen(event: TraceEvent) -> None:
        if isinstance(event, ModelCall):
            totals.append((totals[-1] if totals else 0) + event.usage.total_tokens)

    return listen


KILL_JOB = """\
name: dies
model: scripted:script.yaml
executor: {type: ray, workers: 2}
steps:
  - {id: slow, task: Take your time.}
"""
KILL_SCRIPT = {
    "slow": [
        {"content": "looking", "tool_calls": [{"name": "missing", "arguments": {}}]},
        {"content": "slow answer", "latency": 1.5},
    ]
}


def kill_on_first_call(agent: str) -> Any:
    """A listener that kills the worker of `agent` once its first model call is recorded."""
    killed: list[str] = []

    def listen(event: TraceEvent) -> None:
        if isinstance(event, ModelCall) and event.agent == agent and not killed:
            worker = str((event.model_extra or {})["worker"])  # a Ray worker's own field
            killed.append(worker)
            os.kill(int(worker.rsplit(":", 1)[1]), signal.SIGKILL)

    listen.killed = killed  # type: ignore[attr-defined]
    return listen


def run_until_killed(tmp_path: Path, retries: int) -> tuple[Any, JobRunner, list[Event], Any]:
    from orchestrator.ray import RayExecutor

    job = load_job(write_job(tmp_path, KILL_JOB, KILL_SCRIPT))
    orch = Orchestrator.from_job(job, executor=RayExecutor(workers=2, retries=retries))
    killer = kill_on_first_call("slow")
    with Trace(tmp_path / "t.jsonl", listeners=[killer]) as trace:
        runner = orch.job_runner(job, trace)
        result = asyncio.run(runner.run())
    return result, runner, trace_lines(tmp_path / "t.jsonl"), killer


def spent(events: list[Event]) -> int:
    return sum(e["usage"]["total_tokens"] for e in events if e["type"] == "model_call")


def test_a_killed_worker_s_task_runs_again_on_another_and_its_spend_stays(tmp_path: Path) -> None:
    result, runner, events, killer = run_until_killed(tmp_path, retries=1)
    assert killer.killed, "the worker was never killed"
    assert result.status == "completed" and result.output == "slow answer"
    [retry] = [e for e in events if e["type"] == "task_retry"]
    assert "died" in retry["reason"] and killer.killed[0] in retry["reason"]
    assert retry["worker"] != killer.killed[0]
    starts = [e for e in events if e["type"] == "run_start" and e["agent"] == "slow"]
    assert [e["worker"] for e in starts] == [killer.killed[0], retry["worker"]]
    # What the dead worker spent is spent: the budget counts both attempts' calls.
    first_attempt = [e for e in events if e.get("worker") == killer.killed[0]]
    assert spent(first_attempt) > 0
    assert runner.budget.used == spent(events)
    assert runner.budget.used > result.usage.total_tokens


def test_a_task_whose_worker_dies_with_no_retry_left_fails_with_the_reason(
    tmp_path: Path,
) -> None:
    result, runner, events, killer = run_until_killed(tmp_path, retries=0)
    assert killer.killed
    [step] = result.steps
    assert step.status == "error" and result.status == "failed"
    assert step.reason is not None and f"worker {killer.killed[0]} died" in step.reason
    assert step.usage.total_tokens == spent(events) > 0  # its spend is in its result
    assert runner.budget.used == spent(events)
    [end] = [e for e in events if e["type"] == "task_end"]
    assert end["status"] == "error" and "died" in end["reason"]


def test_without_ray_asking_for_it_names_the_extra(tmp_path: Path) -> None:
    spec = write_job(tmp_path, JOB.replace("executor: {type: ray, workers: 2}\n", ""))
    hidden = tmp_path / "no-ray"
    hidden.mkdir()
    (hidden / "ray.py").write_text("raise ImportError('no module named ray')\n", encoding="utf-8")
    env = {"PYTHONPATH": os.pathsep.join([str(hidden), os.environ.get("PYTHONPATH", "")])}
    done = orchestrator("run", str(spec), "--executor", "ray", cwd=tmp_path, env=env)
    assert done.returncode == 2
    assert "pip install 'orchestrator[ray]'" in done.stderr
    ran = orchestrator("run", str(spec), "--quiet", cwd=tmp_path, env=env)
    assert ran.returncode == 3, ran.stderr  # local runs need no Ray (the broken step fails)


def test_the_command_line_runs_a_job_on_ray(tmp_path: Path, ray_cluster: str) -> None:
    spec = write_job(tmp_path, JOB.replace("executor: {type: ray, workers: 2}\n", ""))
    trace = tmp_path / "cli.jsonl"
    args = ["run", str(spec), "--executor", "ray", "--ray-address", ray_cluster]
    args += ["--trace", str(trace)]
    done = orchestrator(*args, "--json", cwd=tmp_path)
    assert done.returncode == 3, done.stderr  # the broken step
    assert json.loads(done.stdout)["output"] == "all good"
    starts = [e for e in trace_lines(trace) if e["type"] == "task_start" and "/" not in e["agent"]]
    assert {e["executor"] for e in starts} == {"ray"}


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = defaultdict(list)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process ended meanwhile
        children[int(fields[1])].append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        found.update(children[todo[-1]])
        todo.extend(children.pop(todo.pop(), []))
    return found


def _listening_addresses(pids: set[int]) -> set[str]:
    """The local addresses (hex, as /proc/net/tcp* shows them) the processes `pids` listen on."""
    inodes = set()
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").glob("*"):
            try:
                target = str(fd.readlink())
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    addresses = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                addresses.add(fields[1].split(":")[0])
    return addresses


LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F", "00000000000000000000000001000000"}


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's /proc")
def test_the_tests_ray_uses_the_loopback_only(ray_cluster: str) -> None:
    import ray

    @ray.remote
    def where() -> str:
        return str(ray.util.get_node_ip_address())

    assert ray_cluster.startswith("127.0.0.1:")
    assert {node["NodeManagerAddress"] for node in ray.nodes()} == {"127.0.0.1"}
    assert ray.get(where.remote()) == "127.0.0.1"
    listening = _listening_addresses(_descendants(os.getpid()))
    assert listening and listening <= LOOPBACK, listening


def test_importing_the_library_does_not_import_ray() -> None:
    code = "import sys, orchestrator, orchestrator.cli; print('ray' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_a_model_object_that_cannot_travel_is_a_clear_error(tmp_path: Path) -> None:
    from orchestrator.ray import RayExecutor

    class Local:
        name = "local"
        lock = __import__("threading").Lock()

        async def complete(self, request: Any) -> Any:
            raise AssertionError("never called")

    orch = Orchestrator(Local(), executor=RayExecutor(workers=1))
    with pytest.raises(ConfigError, match="cannot go to Ray workers"):
        orch.run_sync("go")


def test_a_money_cap_holds_across_the_cluster(tmp_path: Path) -> None:
    steps = "".join(f"  - {{id: s{i}, task: Part {i}.}}\n" for i in range(30))
    spec = (
        "name: priced\nmodel: scripted:script.yaml\n"
        "executor: {type: ray, workers: 2}\n"
        "budget: {max_cost_usd: 0.02, max_parallel: 8}\n"
        "prices:\n  scripted: {input: 1, output: 2}\n"
        f"steps:\n{steps}"
    )
    script = {f"s{i}": [{"content": f"part {i}", "latency": 0.02}] for i in range(30)}
    job = load_job(write_job(tmp_path, spec, script))
    with Trace(tmp_path / "t.jsonl") as trace:
        runner = Orchestrator.from_job(job).job_runner(job, trace)
        result = asyncio.run(runner.run())
    events = trace_lines(tmp_path / "t.jsonl")
    costs = [e["cost"] for e in events if e["type"] == "model_call"]
    assert costs and sum(costs) <= 0.02  # never more than the cap, across both workers
    assert runner.budget.spent == pytest.approx(sum(costs))  # every dollar came back
    statuses = {s.status for s in result.steps}
    assert "completed" in statuses and statuses - {"completed"}  # the cap stopped some
    assert result.status == "budget_exhausted"
