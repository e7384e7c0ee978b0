"""Disclosure modes: progressive, eager and auto; the tools array and system prompt of every
request of a run stay the same in each, and a job's spec, `Orchestrator` and `--disclosure`
choose the mode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_process import orchestrator
from skill_factory import write_skill

from orchestrator import Orchestrator, load_job
from orchestrator.errors import ConfigError
from orchestrator.jobs import prepare_resume
from orchestrator.models import ScriptedModel
from orchestrator.security import Permissions
from orchestrator.skills import SkillCatalog, SkillsExtension
from orchestrator.skills.disclosure import plan_disclosure

COUNTER_TOOLS = '''
from orchestrator import tool

@tool
def count(text: str) -> int:
    """Count the words of a text.

    Args:
        text: The text.
    """
    return len(text.split())
'''
UPPER_TOOLS = '''
from orchestrator import tool

@tool
def shout(text: str) -> str:
    """Upper-case a text.

    Args:
        text: The text.
    """
    return text.upper()
'''


def skills_folder(root: Path) -> Path:
    folder = root / "skills"
    write_skill(folder, "counter", description="Counts words.", tools=COUNTER_TOOLS)
    write_skill(folder, "upper", description="Upper-cases text.", tools=UPPER_TOOLS)
    write_skill(folder, "notes", description="Instructions only.")
    return folder


def script() -> dict[str, list[dict[str, object]]]:
    return {
        "planner": [
            {"tool_calls": [{"name": "load_skill", "arguments": {"name": "counter"}}]},
            {"tool_calls": [{"name": "counter__count", "arguments": {"text": "a b c"}}]},
            {"content": "3 words"},
        ]
    }


def run_mode(tmp_path: Path, mode: str) -> ScriptedModel:
    model = ScriptedModel(script())
    orch = Orchestrator(
        model,
        skills=[skills_folder(tmp_path)],
        builtin=False,
        permissions={"workspace": tmp_path / "work"},
        disclosure=mode,  # type: ignore[arg-type]
    )
    (tmp_path / "work").mkdir(exist_ok=True)
    result = orch.run_sync("count the words of 'a b c'")
    assert result.status == "completed", result
    assert result.output == "3 words"
    return model


@pytest.mark.parametrize("mode", ["progressive", "eager", "auto"])
def test_every_mode_keeps_tools_and_system_prompt_the_same_over_the_run(
    tmp_path: Path, mode: str
) -> None:
    model = run_mode(tmp_path, mode)
    first = model.requests[0]
    for request in model.requests[1:]:
        assert [t.name for t in request.tools] == [t.name for t in first.tools]
        assert request.tools == first.tools
        assert request.messages[0] == first.messages[0]  # the system prompt
    # The tool call worked: its result is the count, not an error.
    tool_results = [m for m in model.requests[-1].messages if m.role == "tool"]
    assert tool_results[-1].content == "3" and not tool_results[-1].is_error


def test_eager_sends_every_skills_tools_from_the_first_request(tmp_path: Path) -> None:
    progressive = [t.name for t in run_mode(tmp_path, "progressive").requests[0].tools]
    eager_model = run_mode(tmp_path, "eager")
    eager = [t.name for t in eager_model.requests[0].tools]
    assert "counter__count" not in progressive and "call_skill_tool" in progressive
    assert {"counter__count", "upper__shout"} <= set(eager)
    assert "call_skill_tool" not in eager  # nothing is left to reach through it
    system = eager_model.requests[0].messages[0].content
    assert "in your tools array already" in system
    # load_skill still gives the instructions, and names the tools without their schemas.
    loaded = next(m for m in eager_model.requests[1].messages if m.role == "tool")
    assert "Do the thing." in loaded.content and "parameters:" not in loaded.content


def test_auto_is_eager_under_the_threshold_and_progressive_above(tmp_path: Path) -> None:
    catalog = SkillCatalog([skills_folder(tmp_path)], include_builtin=False)
    workspace = Permissions(workspace=tmp_path / "work")

    def plan(tokens: int) -> str:
        found = plan_disclosure(
            "auto",
            catalog,
            workspace,
            given=(),
            allows=lambda _: True,
            rules=(),
            eager_tokens=tokens,
        )
        assert found.schema_tokens > 0
        return found.mode

    small = plan_disclosure(
        "eager", catalog, workspace, given=(), allows=lambda _: True, rules=()
    ).schema_tokens
    assert plan(small) == "eager"
    assert plan(small - 1) == "progressive"


def test_eager_gives_no_tools_of_a_skill_whose_code_may_not_run(tmp_path: Path) -> None:
    # Skills inside the workspace: their tools.py is never imported, whatever the mode.
    folder = skills_folder(tmp_path)
    extension = SkillsExtension(SkillCatalog([folder], include_builtin=False), disclosure="eager")
    view = extension.configured(Permissions(workspace=tmp_path), None)
    names = [t.name for t in [*view.tools(), *view.trailing_tools()]]
    assert "counter__count" not in names and view.plan.mode == "eager"
    assert view.plan.eager == ()


def test_a_preloaded_skill_is_not_given_twice(tmp_path: Path) -> None:
    folder = skills_folder(tmp_path)
    extension = SkillsExtension(
        SkillCatalog([folder], include_builtin=False), disclosure="eager", preload=["counter"]
    )
    view = extension.configured(Permissions(workspace=tmp_path / "work"), None)
    names = [t.name for t in [*view.tools(), *view.trailing_tools()]]
    assert names.count("counter__count") == 1 and "upper__shout" in names


def test_the_spec_chooses_the_mode_and_rejects_an_unknown_one(tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: j\nmodel: openai:gpt-4o-mini\ngoal: hi\ndisclosure: eager\n")
    job = load_job(spec)
    assert job.disclosure == "eager"
    assert Orchestrator.from_job(job, model=ScriptedModel({})).disclosure == "eager"
    spec.write_text("name: j\nmodel: openai:gpt-4o-mini\ngoal: hi\ndisclosure: lazy\n")
    with pytest.raises(ConfigError) as error:
        load_job(spec)
    assert "disclosure:" in str(error.value) and "eager" in str(error.value)


def test_sub_agents_get_the_runs_mode(tmp_path: Path) -> None:
    orch = Orchestrator(
        ScriptedModel({}), skills=[skills_folder(tmp_path)], builtin=False, disclosure="auto"
    )
    assert orch.fork.settings.disclosure == "auto"


def tool_errors(trace: Path) -> dict[str, bool]:
    """Each tool call's name and whether its result was an error, from a run's trace."""
    names: dict[str, str] = {}
    found: dict[str, bool] = {}
    for line in trace.read_text().splitlines():
        event = json.loads(line)
        message = event.get("message") or {}
        for call in message.get("tool_calls") or ():
            names[call["id"]] = call["name"]
        if message.get("role") == "tool":
            found[names[message["tool_call_id"]]] = bool(message.get("is_error"))
    return found


def test_the_flag_overrides_the_spec(tmp_path: Path) -> None:
    folder = skills_folder(tmp_path)
    (tmp_path / "work").mkdir()
    (tmp_path / "job.script.yaml").write_text(
        "goal:\n"
        "  - tool_calls: [{name: counter__count, arguments: {text: 'a b'}}]\n"
        "  - content: done\n"
    )
    spec = tmp_path / "job.yaml"
    spec.write_text(
        f"name: j\nmodel: scripted:job.script.yaml\ngoal: count\nskills: [{folder}]\n"
        "permissions: {workspace: work}\n"
    )
    # Progressive (the spec's default): the tool is not callable before its skill is loaded.
    plain = orchestrator("run", spec, "-q", "--trace", tmp_path / "plain.jsonl", cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    assert tool_errors(tmp_path / "plain.jsonl") == {"counter__count": True}
    eager = orchestrator(
        "run",
        spec,
        "-q",
        "--disclosure",
        "eager",
        "--trace",
        tmp_path / "eager.jsonl",
        cwd=tmp_path,
    )
    assert eager.returncode == 0, eager.stderr
    assert tool_errors(tmp_path / "eager.jsonl") == {"counter__count": False}


def test_a_resumed_run_keeps_the_mode_it_ran_with(tmp_path: Path) -> None:
    folder = skills_folder(tmp_path)
    (tmp_path / "work").mkdir()
    (tmp_path / "job.script.yaml").write_text(
        "goal:\n"
        "  - tool_calls: [{name: counter__count, arguments: {text: 'a b'}}]\n"
        "  - content: done\n"
    )
    spec = tmp_path / "job.yaml"
    spec.write_text(
        f"name: j\nmodel: scripted:job.script.yaml\ngoal: count\nskills: [{folder}]\n"
        "permissions: {workspace: work}\n"
    )
    trace = tmp_path / "run.jsonl"
    done = orchestrator("run", spec, "-q", "--disclosure", "eager", "--trace", trace, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    # Cut the run before its end, as a crash would: the job must resume as it ran, eager.
    lines = trace.read_text().splitlines(keepends=True)
    cut = next(i for i, line in enumerate(lines) if json.loads(line)["type"] == "tool_end")
    trace.write_text("".join(lines[:cut]))
    resumption = prepare_resume(trace)
    assert resumption.job is not None and resumption.job.disclosure == "eager"


def test_the_trace_records_the_schemas_sent_once_per_tools_array(tmp_path: Path) -> None:
    from orchestrator.events import ModelCall
    from orchestrator.messages import tools_digest
    from orchestrator.trace import read_trace

    model = ScriptedModel(script())
    orch = Orchestrator(
        model,
        skills=[skills_folder(tmp_path)],
        builtin=False,
        permissions={"workspace": tmp_path / "work"},
        disclosure="eager",
    )
    (tmp_path / "work").mkdir()
    result = orch.run_sync("count the words of 'a b c'", trace=tmp_path / "t.jsonl")
    assert result.status == "completed", result
    calls = [e for e in read_trace(tmp_path / "t.jsonl") if isinstance(e, ModelCall)]
    assert len(calls) == 3
    sent = model.requests[0].tools
    # The first call carries the schemas as they were sent; the others only their digest.
    assert calls[0].tool_specs == list(sent)
    assert {"counter__count", "upper__shout"} <= {spec.name for spec in sent}
    assert [c.tool_specs for c in calls[1:]] == [None, None]
    assert {c.tools_digest for c in calls} == {tools_digest(sent)}
