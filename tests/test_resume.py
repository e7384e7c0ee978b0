"""Resuming a job from its trace: `orchestrator resume` after a real SIGKILL, and the rules.

The kill points (bench/resume_savings.py, which also reports the figures): during a model
call, during a long tool call in the second step, during a fork with several running tasks,
and right after a step finished. Each run is killed with SIGKILL as soon as its trace shows
the moment, then `orchestrator resume` finishes it; an uninterrupted run is the reference.
"""

from __future__ import annotations

import json
import pickle
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_process import orchestrator
from trace_lines import trace_lines
from trace_signing import resign

from bench.resume_savings import (
    KILL_POINTS,
    SCRIPT,
    Outcome,
    calls,
    measure,
    repeated_calls,
    run_uninterrupted,
    write_job,
)
from orchestrator import Agent, Orchestrator, read_trace, rebuild_conversations, tool
from orchestrator.jobs import ResumeError, fast_forward, prepare_resume
from orchestrator.models import ScriptedModel
from orchestrator.tasks import ForkExtension, SubagentRegistry
from orchestrator.trace import Checkpoint, Event, Trace, load_checkpoint

MAX_TOKENS = 200_000
QUICK = re.sub(r", latency: [\d.]+", "", SCRIPT).replace("sleep 1.5; ", "")
"""The same job without its waits, for the tests that need no kill point."""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Outcome, dict[str, Outcome]]:
    """The uninterrupted run and every kill point, run side by side once."""
    return measure(tmp_path_factory.mktemp("resume"))


def attempt(events: list[Event], number: int) -> list[Event]:
    return [e for e in events if e.get("attempt") == number]


def tokens(events: list[Event]) -> int:
    return sum(e["usage"]["total_tokens"] for e in events if e["type"] == "model_call")


def ended(events: list[Event], kind: str, agent: str) -> bool:
    return any(e["type"] == kind and e["agent"] == agent for e in events)


def check_kill_point(name: str, killed: list[Event]) -> None:
    """The kill landed where it was meant to: the first attempt stops at that moment."""
    if name == "model-call":
        assert calls(killed)["gather"] == 2 and not ended(killed, "run_end", "gather")
    elif name == "long-tool":
        (start,) = [e for e in killed if e["type"] == "tool_start" and e["agent"] == "work"][1:]
        assert not any(e["type"] == "tool_end" and e["call_id"] == start["call_id"] for e in killed)
    elif name == "fork":
        assert ended(killed, "run_end", "fan/a")
        running = [p for p in ("fan/b", "fan/c") if ended(killed, "run_start", p)]
        assert running == ["fan/b", "fan/c"]
        assert not any(ended(killed, "run_end", p) for p in running)
    else:
        assert ended(killed, "task_end", "gather") and not ended(killed, "run_end", "work")


@pytest.mark.parametrize("point", [p.name for p in KILL_POINTS])
@pytest.mark.slow
def test_a_run_killed_with_sigkill_resumes_to_the_same_result(
    runs: tuple[Outcome, dict[str, Outcome]], point: str
) -> None:
    reference, outcomes = runs
    resumed = outcomes[point]
    events = resumed.events
    killed = attempt(events, 1)
    check_kill_point(point, killed)

    assert resumed.returncode == 0, resumed.stderr
    assert reference.returncode == 0, reference.stderr
    assert resumed.result["status"] == "completed"
    assert resumed.result["output"] == reference.result["output"] == "all parts combined"
    outputs = [(s["id"], s["output"]) for s in resumed.result["steps"]]
    assert outputs == [(s["id"], s["output"]) for s in reference.result["steps"]]

    # No model call was made twice, and every agent made the calls an uninterrupted run makes.
    assert repeated_calls(events) == 0
    assert calls(events) == calls(reference.events)
    finished_first = {e["agent"] for e in killed if e["type"] == "run_end"}
    assert not finished_first & set(calls(attempt(events, 2)))  # what had ended did not run

    # Every tool call of every rebuilt conversation has exactly one result.
    for path, conversation in rebuild_conversations(resumed.trace).items():
        asked = [c.id for m in conversation for c in m.tool_calls]
        answered = Counter(m.tool_call_id for m in conversation if m.role == "tool")
        assert sorted(answered) == sorted(asked) and set(answered.values()) <= {1}, path

    # The spend reported includes the killed attempt's; the budget went on from it.
    assert resumed.result["usage"]["total_tokens"] == tokens(events) > tokens(attempt(events, 2))
    first = next(e for e in attempt(events, 2) if e["type"] == "model_call")
    spent_before = tokens(killed) + first["usage"]["total_tokens"]
    assert first["budget_remaining"] <= MAX_TOKENS - spent_before


@pytest.mark.slow
def test_the_conversations_go_on_from_their_last_complete_turn(
    runs: tuple[Outcome, dict[str, Outcome]],
) -> None:
    _, outcomes = runs
    # The long tool call was cut: its result is `aborted`, and the model saw that.
    work = rebuild_conversations(outcomes["long-tool"].trace)["work"]
    (result,) = [m for m in work if m.role == "tool" and m.name == "shell__run"]
    assert result.error_type == "aborted" and "not run again" in (result.content or "")
    assert work[-1].content == "work done"
    # The fork was called again; `a` kept its result, `b` went on from its first turn.
    events = outcomes["fork"].events
    later = attempt(events, 2)
    assert [e["agent"] for e in later if e["type"] == "task_end" and e.get("restored")] == [
        "gather",
        "work",
        "fan/a",
    ]
    (b,) = [e for e in later if e["type"] == "run_start" and e["agent"] == "fan/b"]
    assert b["resumed"] and b["steps"] == 1 and b["kept"] >= 3
    fan = rebuild_conversations(outcomes["fork"].trace)["fan"]
    (fork,) = [m for m in fan if m.role == "tool"]
    assert fork.content.startswith("Fork finished: 3 tasks (3 completed).")


def cut(trace: Path, keep: int, into: Path) -> Path:
    """The first `keep` events of a trace, as a run killed right after them leaves it, moved
    to the folder of `into` (whose job and script are the same files)."""
    lines = trace.read_bytes().splitlines(keepends=True)
    text = b"".join(lines[:keep]).replace(bytes(trace.parent), bytes(into.parent))
    into.write_bytes(text)
    resign(into)  # the user's own run, moved: signed again as theirs
    return into


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    return run_uninterrupted(tmp_path_factory.mktemp("finished"), QUICK)


def after_step(finished: Outcome, tmp_path: Path, step: str = "gather") -> Path:
    write_job(tmp_path, QUICK)
    events = finished.events
    end = next(i for i, e in enumerate(events) if e["type"] == "task_end" and e["agent"] == step)
    return cut(finished.trace, end + 1, tmp_path / "t.jsonl")


def test_a_finished_run_is_not_run_again(finished: Outcome) -> None:
    before = finished.trace.read_bytes()
    done = orchestrator("resume", str(finished.trace), "--json", cwd=finished.folder)
    assert done.returncode == 0, done.stderr
    assert "had already finished (completed); nothing to resume" in done.stderr
    result = json.loads(done.stdout)
    assert result["output"] == "all parts combined" and result["status"] == "completed"
    assert result["usage"] == finished.result["usage"]
    assert finished.trace.read_bytes() == before


@pytest.mark.slow
def test_a_changed_spec_is_refused_unless_forced(finished: Outcome, tmp_path: Path) -> None:
    trace = after_step(finished, tmp_path)
    job = tmp_path / "job.yaml"
    job.write_text(job.read_text().replace("Gather the facts.", "Gather other facts."))

    refused = orchestrator("resume", "t.jsonl", cwd=tmp_path)
    assert refused.returncode == 2
    assert "changed since the run" in refused.stderr and "--force" in refused.stderr
    assert load_checkpoint(trace).attempts == 1  # nothing was appended

    forced = orchestrator("resume", "t.jsonl", "--force", "--quiet", cwd=tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert forced.stdout == "all parts combined\n"


def test_a_trace_of_an_older_version_without_a_newer_permission_resumes(
    finished: Outcome, tmp_path: Path
) -> None:
    # A run recorded before `skill_allowed_tools` existed: its permissions lack the field, and
    # the spec's default for it is what that run had.
    trace = after_step(finished, tmp_path)
    older = re.sub(rb'"skill_allowed_tools": ?"pre-approve", ?', b"", trace.read_bytes())
    assert older != trace.read_bytes()
    trace.write_bytes(older)
    resign(trace)

    done = orchestrator("resume", "t.jsonl", "--quiet", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert done.stdout == "all parts combined\n"


def test_a_run_still_going_cannot_be_resumed(finished: Outcome, tmp_path: Path) -> None:
    trace = after_step(finished, tmp_path)
    with Trace(trace, resume=load_checkpoint(trace)):  # another run holds it
        busy = orchestrator("resume", "t.jsonl", cwd=tmp_path)
        with pytest.raises(ResumeError, match="still"):
            prepare_resume(trace)
    assert busy.returncode == 2 and "another process" in busy.stderr


def test_resume_from_python_appends_one_attempt(finished: Outcome, tmp_path: Path) -> None:
    trace = after_step(finished, tmp_path, step="work")
    kept = trace.read_bytes()

    result = Orchestrator.resume_sync(trace)

    assert result.status == "completed" and result.output == "all parts combined"
    assert trace.read_bytes().startswith(kept)
    events = trace_lines(trace)
    assert {e["run"] for e in events} == {events[0]["run"]}
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    later = attempt(events, 2)
    assert later[0]["type"] == "job_start" and later[0]["resumed"]
    assert not {"gather", "work"} & set(calls(later))  # both had ended
    assert result.usage.total_tokens == tokens(events)
    assert [s.status for s in result.steps] == ["completed"] * 3
    assert result.step("gather").run is not None  # restored from the trace, with its run
    assert result.step("gather").run.messages == rebuild_conversations(trace)["gather"]


def test_resume_reloads_the_spec_inputs_and_model_from_the_trace(
    finished: Outcome, tmp_path: Path
) -> None:
    trace = after_step(finished, tmp_path)
    (start,) = [e for e in trace_lines(trace) if e["type"] == "job_start"]
    assert start["spec"] == str((tmp_path / "job.yaml").resolve())
    assert len(start["spec_sha256"]) == 64 and start["inputs"] == {}
    assert start["model"] == f"scripted:{(tmp_path / 'script.yaml').resolve()}"

    # --model overrides the recorded model, as for `run`.
    other = tmp_path / "other.yaml"
    other.write_text(
        (tmp_path / "script.yaml").read_text().replace("all parts combined", "other model")
    )
    done = orchestrator("resume", "t.jsonl", "--model", "scripted:other.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "other model\n"
    assert "resuming run" in done.stderr and "1 of 3 steps done" in done.stderr


def index_of(events: list[Event], test: Callable[[Event], bool]) -> int:
    return next(i for i, e in enumerate(events) if test(e))


def test_a_trace_torn_by_the_crash_resumes(finished: Outcome, tmp_path: Path) -> None:
    write_job(tmp_path, QUICK)
    events = finished.events
    end = index_of(events, lambda e: e["type"] == "task_end" and e["agent"] == "work")
    lines = finished.trace.read_bytes().replace(bytes(finished.folder), bytes(tmp_path))
    kept = lines.splitlines(keepends=True)
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(b"".join(kept[: end + 1]) + kept[end + 1][:25])  # a line cut mid-write
    resign(trace)  # moved to this folder: signed again as the user's own

    done = orchestrator("resume", "t.jsonl", "--quiet", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert done.stdout == "all parts combined\n"
    assert read_trace(trace).skipped == 1  # the torn line, on a line of its own


def test_an_answer_recorded_before_the_run_ended_is_the_answer(
    finished: Outcome, tmp_path: Path
) -> None:
    events = finished.events
    answer = index_of(
        events,
        lambda e: (
            e["type"] == "message"
            and e["agent"] == "gather"
            and e["message"].get("content") == "gathered facts"
        ),
    )
    write_job(tmp_path, QUICK)
    trace = cut(finished.trace, answer + 1, tmp_path / "t.jsonl")

    result = Orchestrator.resume_sync(trace)

    assert result.status == "completed" and result.step("gather").output == "gathered facts"
    assert calls(trace_lines(trace))["gather"] == 3  # not asked again


@pytest.mark.parametrize("cut_after", ["tool_start", "message"])
def test_a_resumed_agent_has_its_skills_loaded_again(
    finished: Outcome, tmp_path: Path, cut_after: str
) -> None:
    """Cut after `load_skill` returned (the skill is loaded again from the record) or while
    it ran (it only reads, so it is called again rather than answered `aborted`)."""
    events = finished.events
    loaded = index_of(
        events,
        lambda e: (
            e["type"] == cut_after
            and e["agent"] == "gather"
            and "load_skill" in (e.get("name"), e.get("message", {}).get("name"))
        ),
    )
    write_job(tmp_path, QUICK)
    trace = cut(finished.trace, loaded + 1, tmp_path / "t.jsonl")

    assert Orchestrator.resume_sync(trace).status == "completed"
    gather = rebuild_conversations(trace)["gather"]
    (shell,) = [m for m in gather if m.role == "tool" and m.name == "shell__run"]
    assert not shell.is_error and "gathered" in (shell.content or "")
    assert [m.name for m in gather if m.role == "tool"] == ["load_skill", "shell__run"]


async def test_any_agent_resumes_from_the_history_it_is_handed(tmp_path: Path) -> None:
    """The resume machinery is the loop's and the fork's, not only the job runner's: an
    agent handed its history goes on, its forks' tasks restored by the restoring layer."""
    script = {
        "planner": [
            {
                "tool_calls": [
                    {"name": "fork", "arguments": {"tasks": [{"id": "one", "task": "1"}]}}
                ]
            },
            {
                "tool_calls": [
                    {
                        "name": "fork",
                        "arguments": {
                            "tasks": [{"id": "two", "task": "2"}, {"id": "three", "task": "3"}]
                        },
                    }
                ]
            },
            {"tool_calls": [{"name": "read_task_output", "arguments": {"id": "one"}}]},
            {"content": "all three"},
        ],
        "planner/one": [{"content": "first"}],
        "planner/two": [{"content": "second"}],
        "planner/three": [{"content": "third"}],
    }

    def planner(model: ScriptedModel, trace: Trace) -> Agent:
        extension = ForkExtension(SubagentRegistry())
        return Agent(model, name="planner", extensions=[extension], trace=trace)

    path = tmp_path / "t.jsonl"
    with Trace(path) as trace:
        whole = await planner(ScriptedModel(script), trace).run("go")
    events = trace_lines(path)
    two = index_of(events, lambda e: e["type"] == "task_end" and e["agent"] == "planner/two")
    (tmp_path / "cut").mkdir()
    cut_path = cut(path, two + 1, tmp_path / "cut" / "t.jsonl")
    checkpoint = load_checkpoint(cut_path)
    model = ScriptedModel(script)
    fast_forward(model, checkpoint)
    with Trace(cut_path, resume=checkpoint) as trace:
        history = trace.history("planner")
        assert history is not None and trace.history("planner") is None  # given out once
        with pytest.raises(ValueError, match="history of 'planner' cannot resume the agent"):
            await Agent(model, name="other", trace=trace).run("go", history=history)
        resumed = await planner(model, trace).run("go", history=history)

    assert resumed.status == "completed" and resumed.output == whole.output == "all three"
    assert [c.id for c in resumed.children] == ["one", "two", "three"]
    assert resumed.messages[-2].content == "first"  # read_task_output of the earlier fork
    assert resumed.usage_by_agent().keys() == whole.usage_by_agent().keys()
    later = attempt(trace_lines(cut_path), 2)
    assert set(calls(later)) == {"planner", "planner/three"}  # `one` and `two` had ended
    model.assert_all_used()


async def test_an_agent_run_on_a_resumed_trace_without_its_history_says_it_starts_over(
    tmp_path: Path,
) -> None:
    """Handed its history (by `run` or `iter`), an agent goes on from its cut-off turn; run
    there without it, it starts over, and says so instead of silently doing the work
    again."""
    script = {
        "solo": [
            {"tool_calls": [{"name": "lookup", "arguments": {"n": 1}}]},
            {"tool_calls": [{"name": "lookup", "arguments": {"n": 2}}]},
            {"content": "both looked up"},
        ]
    }

    @tool
    def lookup(n: int) -> str:
        """Look a number up.

        Args:
            n: The number.
        """
        return f"entry {n}"

    path = tmp_path / "t.jsonl"
    with Trace(path) as trace:
        await Agent(ScriptedModel(script), [lookup], name="solo", trace=trace).run("Look.")
    events = trace_lines(path)
    first = index_of(events, lambda e: e["type"] == "tool_end")
    (tmp_path / "cut").mkdir()
    (tmp_path / "again").mkdir()
    cut_path = cut(path, first + 1, tmp_path / "cut" / "t.jsonl")
    again_path = cut(path, first + 1, tmp_path / "again" / "t.jsonl")

    def resumed_model(checkpoint: Checkpoint) -> ScriptedModel:
        model = ScriptedModel(script)
        fast_forward(model, checkpoint)
        return model

    checkpoint = load_checkpoint(cut_path)
    with Trace(cut_path, resume=checkpoint) as trace:
        agent = Agent(resumed_model(checkpoint), [lookup], name="solo", trace=trace)
        async with agent.iter("Look.", history=trace.history("solo")) as run:
            kinds = [event.type async for event in run]
    assert run.result.status == "completed" and run.result.output == "both looked up"
    assert kinds.count("model_call") == 2  # the first turn was not asked again
    assert not trace.left_off("solo")

    checkpoint = load_checkpoint(again_path)
    with Trace(again_path, resume=checkpoint) as trace:
        agent = Agent(ScriptedModel(script), [lookup], name="solo", trace=trace)
        with pytest.warns(UserWarning, match="'solo' starts over on a trace opened to resume"):
            again = await agent.run("Look.")
    assert again.status == "completed" and again.steps == 3


def test_a_checkpoint_sent_to_another_process_gives_its_histories_out_again(
    finished: Outcome, tmp_path: Path
) -> None:
    """Which paths were claimed is one process's: a Ray worker started after the driver
    claimed a task's history (a worker that replaces a dead one) still resumes that task."""
    events = finished.events
    start = index_of(events, lambda e: e["type"] == "run_start" and e["agent"] == "work")
    checkpoint = load_checkpoint(cut(finished.trace, start + 3, tmp_path / "t.jsonl"))
    assert checkpoint.history("work") is not None and checkpoint.history("work") is None
    sent = pickle.loads(pickle.dumps(checkpoint))
    assert sent.history("work") is not None
    assert checkpoint.history("work") is None  # the driver's own claim stands


def test_a_run_cut_off_before_its_task_was_recorded_starts_again(
    finished: Outcome, tmp_path: Path
) -> None:
    events = finished.events
    start = index_of(events, lambda e: e["type"] == "run_start" and e["agent"] == "work")
    write_job(tmp_path, QUICK)
    trace = cut(finished.trace, start + 1, tmp_path / "t.jsonl")

    assert Orchestrator.resume_sync(trace).output == "all parts combined"
    work = rebuild_conversations(trace)["work"]
    assert [m.role for m in work][:2] == ["system", "user"]
    assert [m.role for m in work].count("user") == 1
