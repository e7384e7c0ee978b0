"""What a resumed run keeps besides its conversation: an active skill's `allowed-tools` limit,
a `context: fork` skill's sub-agent, the model's settings and folders, a streamed answer.

Each run is recorded whole once, its trace cut where a kill would leave it, and the cut trace
resumed the way `orchestrator resume` does (a checkpoint, the scripted model fast-forwarded).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from skill_factory import write_skill
from trace_lines import trace_lines

from orchestrator import Agent, Orchestrator, Permissions, rebuild_conversations
from orchestrator.jobs import ResumeError, fast_forward, job_record, load_job, prepare_resume
from orchestrator.models import ModelResponse, ReplayModel, ScriptedModel, TextTap
from orchestrator.skills import SkillCatalog
from orchestrator.tasks import SubagentDef, SubagentRegistry
from orchestrator.trace import Event, Trace, load_checkpoint


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "arguments": arguments}]}


def cut_after(trace: Path, into: Path, test: Any) -> Path:
    """The events of `trace` up to the first one that passes `test`, as a kill leaves them."""
    events = trace_lines(trace)
    last = next(i for i, e in enumerate(events) if test(e))
    lines = trace.read_bytes().splitlines(keepends=True)
    into.write_bytes(b"".join(lines[: last + 1]))
    return into


def tool_result(name: str, agent: str) -> Any:
    def test(event: Event) -> bool:
        message = event.get("message") or {}
        return (
            event["type"] == "message" and event["agent"] == agent and message.get("name") == name
        )

    return test


def attempt(path: Path, number: int) -> list[Event]:
    return [e for e in trace_lines(path) if e.get("attempt") == number]


AUDIT = {
    "agent": [
        call("load_skill", name="files"),
        call("load_skill", name="auditor"),
        call("files__read_file", path="notes.txt"),
        call("files__write_file", path="owned.txt", content="x"),
        {"content": "done"},
    ]
}


async def test_an_active_skills_limit_holds_in_the_resumed_run(tmp_path: Path) -> None:
    write_skill(
        tmp_path / "skills",
        "auditor",
        description="Audits files, read-only.",
        extra="allowed-tools: Read Grep\n",
    )
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "notes.txt").write_text("a note\n")

    def agent(model: ScriptedModel, trace: Trace) -> Agent:
        return Agent(
            model,
            name="agent",
            skills=SkillCatalog([tmp_path / "skills"]),
            permissions=Permissions(workspace=tmp_path / "work", skill_allowed_tools="restrict"),
            trace=trace,
        )

    whole = tmp_path / "whole.jsonl"
    with Trace(whole) as trace:
        assert (await agent(ScriptedModel(AUDIT), trace).run("Audit.")).status == "completed"
    # Killed once the read's result was recorded: the write is the resumed run's first call.
    cut = cut_after(whole, tmp_path / "cut.jsonl", tool_result("files__read_file", "agent"))
    checkpoint = load_checkpoint(cut)
    model = ScriptedModel(AUDIT)
    fast_forward(model, checkpoint)
    with Trace(cut, resume=checkpoint) as trace:
        auditor = agent(model, trace)
        resumed = await auditor.run("Audit.", history=trace.history(auditor.name))

    assert resumed.status == "completed"
    assert not (tmp_path / "work" / "owned.txt").exists()
    (write,) = [m for m in resumed.messages if m.name == "files__write_file"]
    assert write.error_type == "denied"
    assert "allowed by the active skill 'auditor' (allowed-tools)" in (write.content or "")
    assert set(e["agent"] for e in attempt(cut, 2) if e["type"] == "model_call") == {"agent"}
    model.assert_all_used()


SUMMARISE = {
    "planner": [
        call("load_skill", name="summarise", arguments="report.txt"),
        {"content": "Sales are up."},
    ],
    "planner/summarise-1": [
        call("load_skill", name="files"),
        call("files__read_file", path="report.txt"),
        {"content": "sales up 5%"},
    ],
}


async def test_a_context_fork_skill_cut_in_its_sub_agent_resumes_that_sub_agent(
    tmp_path: Path,
) -> None:
    write_skill(
        tmp_path / "skills",
        "summarise",
        description="Summarises a file.",
        extra="context: fork\nagent: reader\nallowed-tools: Read\n",
        body="Summarise the file $ARGUMENTS in one line.\n",
    )
    (tmp_path / "report.txt").write_text("sales up 5%\n")
    reader = SubagentDef(name="reader", description="Reads.", skills=["files"], system="You read.")

    def orchestrator(model: ScriptedModel) -> Orchestrator:
        return Orchestrator(
            model,
            skills=[tmp_path / "skills"],
            subagents=SubagentRegistry([reader]),
            permissions=Permissions(workspace=tmp_path),
        )

    whole = tmp_path / "whole.jsonl"
    first = await orchestrator(ScriptedModel(SUMMARISE)).run("Summarise.", trace=whole)
    cut = cut_after(whole, tmp_path / "cut.jsonl", tool_result("load_skill", "planner/summarise-1"))
    checkpoint = load_checkpoint(cut)
    model = ScriptedModel(SUMMARISE)
    fast_forward(model, checkpoint)
    with Trace(cut, resume=checkpoint) as trace:
        resumed = await orchestrator(model).run("Summarise.", trace=trace)

    assert resumed.status == "completed" and resumed.output == first.output == "Sales are up."
    later = attempt(cut, 2)
    starts = {e["agent"]: e for e in later if e["type"] == "run_start"}
    assert starts["planner/summarise-1"]["resumed"]  # the same task, not summarise-2
    assert "planner/summarise-2" not in {e["agent"] for e in trace_lines(cut)}
    (observation,) = [
        m for m in rebuild_conversations(cut)["planner"] if m.role == "tool" and not m.is_error
    ]
    assert "Skill 'summarise' ran as a sub-agent (context: fork)." in (observation.content or "")
    assert "sales up 5%" in (observation.content or "")
    assert [c.id for c in resumed.children] == ["summarise-1"]
    model.assert_all_used()


SPEC = """\
name: settings
model: {name: openai-compatible:local, base_url: "http://127.0.0.1:9/v1", temperature: 0}
steps:
  - id: only
    task: Say hi.
"""


def test_the_run_records_its_model_by_name_and_settings_and_resume_reloads_them(
    tmp_path: Path,
) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(SPEC)
    job = load_job(spec, model_options={"timeout": 30, "stream": False})
    record = job_record(job, user_skills=True)
    assert record.model == "openai-compatible:local"
    assert record.model_options == {
        "base_url": "http://127.0.0.1:9/v1",
        "temperature": 0.0,
        "timeout": 30.0,
        "stream": False,
    }
    assert record.user_skills is True and job_record(job).user_skills is None

    trace = tmp_path / "t.jsonl"
    with Trace(trace) as writer:
        writer.record(record)
    # The trace never decides the model: the flags the run had must be given again.
    with pytest.raises(ResumeError, match="--model-option stream=false --model-option timeout=30"):
        prepare_resume(trace)
    resumed = prepare_resume(trace, model_options={"timeout": 30, "stream": False})
    assert resumed.job is not None and resumed.user_skills
    assert resumed.job.model == job.model
    other = prepare_resume(trace, model="openai-compatible:other", model_options={"timeout": 5})
    assert other.job is not None
    assert other.job.model.name == "openai-compatible:other"
    assert other.job.model.timeout == 5 and other.job.model.stream is None
    assert other.job.model.temperature == 0  # the spec's own settings, same provider


class Collect:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def text(self, fragment: str) -> None:
        self.parts.append(fragment)

    def turn_end(self, response: ModelResponse) -> None:
        pass


async def test_a_replayed_answer_is_streamed(tmp_path: Path) -> None:
    script = {"agent": [{"content": "recorded answer"}]}
    recording = tmp_path / "recording.jsonl"
    with Trace(recording) as trace:
        await Agent(ScriptedModel(script), name="agent", trace=trace).run("go")

    sink = Collect()
    replayed = await Agent(TextTap(ReplayModel(recording), sink, "agent"), name="agent").run("go")

    assert replayed.output == "recorded answer"
    assert "".join(sink.parts) == "recorded answer"


RESUMABLE_TOOLS = '''
from pathlib import Path

from orchestrator import tool


@tool(resumable=True)
def tally(folder: str) -> str:
    """Count the calls made so far (a tool safe to call again).

    Args:
        folder: Where to count.
    """
    marks = Path(folder) / "calls.txt"
    marks.write_text(marks.read_text() + "x" if marks.exists() else "x")
    return f"call {len(marks.read_text())}"
'''


async def test_a_dispatched_resumable_skill_tool_cut_off_runs_again(tmp_path: Path) -> None:
    write_skill(tmp_path / "skills", "counter", tools=RESUMABLE_TOOLS)
    dispatched = {"tool": "counter__tally", "arguments": {"folder": str(tmp_path)}}
    script = {
        "agent": [
            call("load_skill", name="counter"),
            {"tool_calls": [{"name": "call_skill_tool", "arguments": dispatched}]},
            {"content": "done"},
        ]
    }

    def agent(model: ScriptedModel, trace: Trace) -> Agent:
        catalog = SkillCatalog([tmp_path / "skills"], include_builtin=False)
        return Agent(model, name="agent", skills=catalog, trace=trace)

    whole = tmp_path / "whole.jsonl"
    with Trace(whole) as trace:
        assert (await agent(ScriptedModel(script), trace).run("Count.")).status == "completed"
    # Killed while the dispatched call ran: its start is recorded, its result is not.
    cut = cut_after(
        whole,
        tmp_path / "cut.jsonl",
        lambda e: e["type"] == "tool_start" and e["name"] == "counter__tally",
    )
    checkpoint = load_checkpoint(cut)
    model = ScriptedModel(script)
    fast_forward(model, checkpoint)
    with Trace(cut, resume=checkpoint) as trace:
        counter = agent(model, trace)
        resumed = await counter.run("Count.", history=trace.history(counter.name))
    assert resumed.status == "completed"
    (tally,) = [m for m in resumed.messages if m.name == "counter__tally"]
    assert tally.error_type is None and tally.content == "call 2"  # called again, not aborted
