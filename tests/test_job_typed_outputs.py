"""Structured outputs carried through a job: `output_schema` on steps, the goal and sub-agent
definitions; `{steps.ID.output.FIELD}`; what `validate` refuses before any model call; forks
whose tasks answer in JSON; `run --json`, the trace and resume keeping the data. The scripted
model plays every answer, the invalid ones included."""

from __future__ import annotations

import json
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
from cli_process import orchestrator
from trace_lines import trace_lines

from orchestrator import Orchestrator, Trace
from orchestrator.jobs import SpecError, load_job
from orchestrator.models import ModelWrapper, OutputMode, ScriptedModel

INVOICE_SCHEMA = {
    "type": "object",
    "properties": {
        "number": {"type": "string"},
        "total": {"type": "number"},
        "items": {
            "type": "array",
            "items": {"type": "object", "properties": {"name": {"type": "string"}}},
        },
    },
    "required": ["number", "total", "items"],
}
CHECK_SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "note": {"type": "string"}},
    "required": ["ok", "note"],
}
INVOICE = {"number": "A-7", "total": 12.5, "items": [{"name": "tea"}]}


def write_job(folder: Path, *, read_retries: int = 2, module: str | None = None) -> str:
    """A three-step job: `read` answers an inline schema, `check` a schema file, `summary` a
    pydantic model of the job's own code; each step reads fields of the one before."""
    module = module or f"schemas_{uuid.uuid4().hex[:8]}"
    (folder / f"{module}.py").write_text(
        "from pydantic import BaseModel\n\n\n"
        "class Summary(BaseModel):\n"
        "    headline: str\n"
        "    approved: bool\n"
    )
    (folder / "check.json").write_text(json.dumps(CHECK_SCHEMA))
    spec = {
        "name": "invoices",
        "model": "scripted:script.yaml",
        "steps": [
            {
                "id": "read",
                "task": "Read invoice A-7.",
                "output_schema": INVOICE_SCHEMA,
                "output_retries": read_retries,
            },
            {
                "id": "check",
                "depends_on": ["read"],
                "task": "Check invoice {steps.read.output.number} of {steps.read.output.total}, "
                "first item {steps.read.output.items.0.name}. Whole: {steps.read.output}",
                "output_schema": "check.json",
            },
            {
                "id": "summary",
                "depends_on": ["check"],
                "task": "Summarize: ok={steps.check.output.ok}, {steps.check.output.note}",
                "output_schema": f"{module}.Summary",
                "output_mode": "prompted",
            },
        ],
    }
    (folder / "job.yaml").write_text(json.dumps(spec))
    return module


def write_script(folder: Path, read_answers: list[str]) -> None:
    script = {
        "read": [{"content": answer} for answer in read_answers],
        "check": [{"content": json.dumps({"ok": True, "note": "sums match"})}],
        "summary": [{"content": json.dumps({"headline": "A-7 is fine", "approved": True})}],
    }
    (folder / "script.yaml").write_text(json.dumps(script))


MISSING_TOTAL = json.dumps({"number": "A-7", "items": [{"name": "tea"}]})


def test_three_steps_read_each_others_fields_after_one_retry(tmp_path: Path) -> None:
    write_job(tmp_path)
    write_script(tmp_path, [MISSING_TOTAL, json.dumps(INVOICE)])
    job = load_job(tmp_path / "job.yaml")
    orchestrator_ = Orchestrator.from_job(job)
    model = orchestrator_.model
    assert isinstance(model, ScriptedModel)

    result = orchestrator_.run_job_sync(trace=tmp_path / "run.jsonl")

    assert result.status == "completed", [(s.id, s.status, s.reason) for s in result.steps]
    assert [s.status for s in result.steps] == ["completed"] * 3
    assert result.step("read").data == INVOICE
    assert result.data == {"headline": "A-7 is fine", "approved": True}
    prompts = {r.agent: r.messages[1].content for r in model.requests if len(r.messages) == 2}
    assert prompts["check"] == (
        f"Check invoice A-7 of 12.5, first item tea. Whole: {json.dumps(INVOICE)}"
    )
    assert prompts["summary"] == "Summarize: ok=true, sums match"
    # The invalid answer went back naming the field, and the step's second answer validated.
    retry = [r for r in model.requests if r.agent == "read"][1]
    assert "total" in (retry.messages[-1].content or "")
    assert "'total' is a required property" in (retry.messages[-1].content or "")
    # The trace records each step's data; a resumed run keeps it.
    ends = [e for e in trace_lines(tmp_path / "run.jsonl") if e["type"] == "run_end"]
    assert {e["agent"]: e.get("data") for e in ends}["read"] == INVOICE


def test_answers_that_exhaust_their_retries_end_output_invalid_and_dependents_skip(
    tmp_path: Path,
) -> None:
    write_job(tmp_path, read_retries=1)
    write_script(tmp_path, [MISSING_TOTAL, "not json at all"])

    run = orchestrator("run", "job.yaml", "--json", "--quiet", cwd=tmp_path)

    assert run.returncode == 3, run.stderr  # a step failed: docs/typed-outputs.md
    result = json.loads(run.stdout)
    assert result["status"] == "failed"
    read, check, summary = result["steps"]
    assert read["status"] == "output_invalid"
    assert read["data"] is None
    assert check["status"] == "skipped"
    assert check["reason"] == "dependency 'read' ended output_invalid"
    assert summary["status"] == "skipped"
    assert result["data"] is None


def test_run_json_carries_every_steps_data_and_resume_keeps_it(tmp_path: Path) -> None:
    write_job(tmp_path)
    write_script(tmp_path, [json.dumps(INVOICE)])

    run = orchestrator("run", "job.yaml", "--json", "--quiet", cwd=tmp_path)

    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert [s["data"] for s in result["steps"]][:2] == [INVOICE, {"ok": True, "note": "sums match"}]
    assert result["data"] == {"headline": "A-7 is fine", "approved": True}
    again = orchestrator("resume", "last", "--json", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["data"] == result["data"]


def test_resumed_step_keeps_its_data_for_the_next_steps_fields(tmp_path: Path) -> None:
    """A run stopped after `read`: on resume `read` is not asked again, and `check` still gets
    its fields from the recorded data."""
    write_job(tmp_path)
    write_script(tmp_path, [json.dumps(INVOICE)])
    trace = tmp_path / "run.jsonl"
    job = load_job(tmp_path / "job.yaml")
    with Trace(trace) as opened:
        first = Orchestrator.from_job(job).run_job_sync(trace=opened)
    assert first.status == "completed"
    # Cut the trace after `read`'s task ended: as if the process died there.
    lines = trace.read_text().splitlines()
    cut = next(
        i
        for i, line in enumerate(lines)
        if json.loads(line)["type"] == "task_end" and json.loads(line).get("id") == "read"
    )
    trace.write_text("\n".join(lines[: cut + 1]) + "\n")

    resumed = Orchestrator.resume_sync(trace)

    assert resumed.status == "completed", [(s.id, s.status, s.reason) for s in resumed.steps]
    kept = resumed.step("read")
    assert kept.data == INVOICE
    # Read back from the trace: no Python type to rebuild, so its output is the JSON values.
    assert kept.run is not None and kept.run.validated and kept.run.output == INVOICE
    summary = resumed.step("summary").run
    assert summary is not None and type(summary.output).__name__ == "Summary"  # ran again
    asked = [
        e["message"]["content"]
        for e in trace_lines(trace)
        if e["type"] == "message" and e["agent"] == "check" and e["message"]["role"] == "user"
    ]
    assert asked[-1].startswith("Check invoice A-7 of 12.5, first item tea.")


# -- validate: every bad input named by its field, before any model call ------------------


def spec_error(folder: Path, step: dict[str, Any], extra: str = "") -> str:
    spec = {"name": "t", "model": "openai:gpt-4o-mini", "steps": [step]}
    (folder / "job.yaml").write_text(json.dumps(spec) + extra)
    with pytest.raises(SpecError) as caught:
        load_job(folder / "job.yaml")
    return str(caught.value)


def test_a_schema_that_is_not_json_schema_is_named(tmp_path: Path) -> None:
    message = spec_error(tmp_path, {"id": "a", "task": "x", "output_schema": {"type": "objekt"}})
    assert "steps[0].output_schema" in message
    assert "not valid JSON Schema" in message


def test_a_ref_that_cannot_be_resolved_is_named(tmp_path: Path) -> None:
    inner = {"type": "object", "properties": {"a": {"$ref": "#/$defs/Missing"}}}
    message = spec_error(tmp_path, {"id": "a", "task": "x", "output_schema": inner})
    assert "steps[0].output_schema" in message
    assert "'#/$defs/Missing'" in message
    remote = {"type": "object", "properties": {"a": {"$ref": "http://127.0.0.1:9/s.json"}}}
    message = spec_error(tmp_path, {"id": "a", "task": "x", "output_schema": remote})
    assert "only refs inside the schema" in message


def test_a_dotted_path_that_does_not_import_is_named(tmp_path: Path) -> None:
    message = spec_error(tmp_path, {"id": "a", "task": "x", "output_schema": "nowhere_mod.Thing"})
    assert "steps[0].output_schema" in message
    assert "'nowhere_mod.Thing' does not import" in message
    (tmp_path / "broken_mod_x1.py").write_text("raise RuntimeError('boom')\n")
    message = spec_error(tmp_path, {"id": "a", "task": "x", "output_schema": "broken_mod_x1.T"})
    assert "RuntimeError: boom" in message


def test_a_missing_schema_file_is_named(tmp_path: Path) -> None:
    message = spec_error(tmp_path, {"id": "a", "task": "x", "output_schema": "gone.json"})
    assert "steps[0].output_schema" in message
    assert "cannot be read" in message


def test_code_in_the_workspace_is_not_imported(tmp_path: Path) -> None:
    """The model writes the workspace: a module there could have been written by it."""
    work = tmp_path / "work"
    work.mkdir()
    marker = tmp_path / "imported"
    (work / "planted_mod_q7.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nfrom pydantic import BaseModel\n"
        "class T(BaseModel):\n    a: int\n"
    )
    spec = {
        "name": "t",
        "model": "openai:gpt-4o-mini",
        "permissions": {"workspace": "."},
        "steps": [{"id": "a", "task": "x", "output_schema": "work.planted_mod_q7.T"}],
    }
    (tmp_path / "job.yaml").write_text(json.dumps(spec))
    with pytest.raises(SpecError) as caught:
        load_job(tmp_path / "job.yaml")
    assert "steps[0].output_schema" in str(caught.value)
    assert "inside the workspace" in str(caught.value)


def test_a_field_reference_is_checked_against_the_schema(tmp_path: Path) -> None:
    spec = textwrap.dedent(
        """\
        name: t
        model: openai:gpt-4o-mini
        steps:
          - id: read
            task: x
            output_schema: {type: object, properties: {number: {type: string}}}
          - id: free
            task: y
          - id: use
            depends_on: [read, free]
            task: "{steps.read.output.numbr} {steps.free.output.x} {steps.read.output.number}"
        """
    )
    (tmp_path / "job.yaml").write_text(spec)
    with pytest.raises(SpecError) as caught:
        load_job(tmp_path / "job.yaml")
    message = str(caught.value)
    assert "{steps.read.output.numbr}: the answer has no field 'numbr'" in message
    assert "did you mean 'number'" in message
    assert "{steps.free.output.x}: step 'free' has no output_schema" in message
    assert "steps.read.output.number}" not in message.replace("numbr", "")


def test_validate_command_reports_the_field(tmp_path: Path) -> None:
    spec = {
        "name": "t",
        "model": "openai:gpt-4o-mini",
        "steps": [{"id": "a", "task": "x", "output_schema": {"type": 5}}],
    }
    (tmp_path / "job.yaml").write_text(json.dumps(spec))

    checked = orchestrator("validate", "job.yaml", cwd=tmp_path)

    assert checked.returncode == 2
    assert "steps[0].output_schema" in checked.stderr + checked.stdout


NO_NATIVE = "deepseek:deepseek-chat cannot give native structured output; use output_mode "


def test_validate_reports_an_output_mode_the_steps_model_cannot_give(tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "pricer.md").write_text(
        "---\nname: pricer\ndescription: Prices one item.\noutput_schema: price.yaml\n"
        "output_mode: native\n---\nYou price items.\n"
    )
    (agents / "price.yaml").write_text(json.dumps(PRICE_SCHEMA))
    spec = {
        "name": "t",
        "model": "deepseek:deepseek-chat",
        "subagents": ["agents"],
        "steps": [
            {"id": "a", "task": "x", "output_schema": PRICE_SCHEMA, "output_mode": "native"},
            {"id": "b", "task": "x", "output_schema": PRICE_SCHEMA, "output_mode": "tool"},
            {
                "id": "c",
                "task": "x",
                "model": "scripted:script.yaml",
                "output_schema": PRICE_SCHEMA,
                "output_mode": "native",
            },
            {"id": "d", "task": "x", "agent": "pricer"},
        ],
    }
    (tmp_path / "job.yaml").write_text(json.dumps(spec))
    (tmp_path / "script.yaml").write_text(json.dumps({"*": []}))

    checked = orchestrator("validate", "job.yaml", cwd=tmp_path, env={"DEEPSEEK_API_KEY": ""})

    assert checked.returncode == 2, checked.stdout
    said = checked.stderr
    assert f"steps[0].output_mode: {NO_NATIVE}'tool' or 'prompted'" in said
    assert "sub-agent 'pricer'" in said and f"output_mode: {NO_NATIVE}" in said
    assert "steps[1]" not in said and "steps[2]" not in said


def test_run_refuses_a_goals_output_mode_its_model_cannot_give_before_any_call(
    tmp_path: Path,
) -> None:
    spec = {
        "name": "t",
        "model": "deepseek:deepseek-chat",
        "goal": "Price tea.",
        "output_schema": PRICE_SCHEMA,
        "output_mode": "native",
    }
    (tmp_path / "job.yaml").write_text(json.dumps(spec))
    env = {"DEEPSEEK_API_KEY": "sk-unused-0123456789", "DEEPSEEK_BASE_URL": "http://127.0.0.1:9"}

    done = orchestrator("run", "job.yaml", "--trace", "t.jsonl", cwd=tmp_path, env=env)

    assert done.returncode == 2, done.stderr
    assert f"output_mode: {NO_NATIVE}'tool' or 'prompted'" in done.stderr
    assert not (tmp_path / "t.jsonl").exists()


def test_goal_output_schema(tmp_path: Path) -> None:
    spec = {
        "name": "t",
        "model": "scripted:script.yaml",
        "goal": "Read it.",
        "output_schema": INVOICE_SCHEMA,
        "output_mode": "tool",
    }
    (tmp_path / "job.yaml").write_text(json.dumps(spec))
    (tmp_path / "script.yaml").write_text(
        json.dumps({"goal": [{"tool_calls": [{"name": "final_result", "arguments": INVOICE}]}]})
    )

    result = Orchestrator.from_job(load_job(tmp_path / "job.yaml")).run_job_sync()

    assert result.status == "completed"
    assert result.data == INVOICE


def test_output_schema_beside_steps_is_refused(tmp_path: Path) -> None:
    spec = {
        "name": "t",
        "model": "openai:gpt-4o-mini",
        "output_schema": INVOICE_SCHEMA,
        "steps": [{"id": "a", "task": "x"}],
    }
    (tmp_path / "job.yaml").write_text(json.dumps(spec))
    with pytest.raises(SpecError, match="output_schema: is for a goal job"):
        load_job(tmp_path / "job.yaml")
    del spec["output_schema"]
    spec["output_retries"] = 5
    (tmp_path / "job.yaml").write_text(json.dumps(spec))
    with pytest.raises(SpecError, match="output_retries: is for a goal job"):
        load_job(tmp_path / "job.yaml")


# -- forks: a schema per task, or the definition's; the observation is their JSON -----------

PRICE_SCHEMA = {
    "type": "object",
    "properties": {"item": {"type": "string"}, "price": {"type": "number"}},
    "required": ["item", "price"],
}


def test_a_fork_of_three_tasks_with_an_output_schema_observes_their_json(tmp_path: Path) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "pricer.md").write_text(
        "---\nname: pricer\ndescription: Prices one item.\noutput_schema: price.yaml\n---\n"
        "You price items.\n"
    )
    (agents / "price.yaml").write_text(json.dumps(PRICE_SCHEMA))
    tasks = [
        {"id": "tea", "task": "Price tea.", "output_schema": PRICE_SCHEMA},
        {"id": "jam", "task": "Price jam.", "output_schema": PRICE_SCHEMA},
        {"id": "bun", "task": "Price a bun.", "agent": "pricer"},  # the definition's schema
    ]
    model = ScriptedModel(
        {
            "planner": [
                {"tool_calls": [{"name": "fork", "arguments": {"tasks": tasks}}]},
                {"content": "Priced."},
            ],
            "tea": [{"content": json.dumps({"item": "tea", "price": 3.5})}],
            "jam": [
                {"content": json.dumps({"item": "jam"})},  # no price: sent back once
                {"content": json.dumps({"item": "jam", "price": 4})},
            ],
            "bun": [{"content": json.dumps({"item": "bun", "price": 1.25})}],
        }
    )
    orchestrator_ = Orchestrator(model, subagents=[agents], builtin=False)

    result = orchestrator_.run_sync("Price the basket.")

    assert result.status == "completed"
    observation = next(m for m in result.messages if m.role == "tool").content or ""
    assert "3 completed" in observation
    for line in (
        '{"item": "tea", "price": 3.5}',
        '{"item": "jam", "price": 4}',
        '{"item": "bun", "price": 1.25}',
    ):
        assert line in observation
    assert [child.data for child in result.children] == [
        {"item": "tea", "price": 3.5},
        {"item": "jam", "price": 4},
        {"item": "bun", "price": 1.25},
    ]
    jam_retry = [r for r in model.requests if r.agent == "planner/jam"][1]
    assert "'price' is a required property" in (jam_retry.messages[-1].content or "")


def test_a_fork_task_with_a_bad_schema_is_refused_before_it_runs(tmp_path: Path) -> None:
    tasks = [{"id": "x", "task": "Do.", "output_schema": {"type": "objekt"}}]
    model = ScriptedModel(
        {
            "planner": [
                {"tool_calls": [{"name": "fork", "arguments": {"tasks": tasks}}]},
                {"content": "Gave up."},
            ]
        }
    )

    result = Orchestrator(model, builtin=False).run_sync("Go.")

    observation = next(m for m in result.messages if m.role == "tool").content or ""
    assert "The fork was not run" in observation
    assert "tasks[0]: output_schema: the output schema is not valid JSON Schema" in observation
    assert not [r for r in model.requests if r.agent != "planner"]


class WithoutNative(ModelWrapper):
    """A model that cannot give native structured output (as DeepSeek's API cannot)."""

    @property
    def output_modes(self) -> tuple[OutputMode, ...]:
        return ("tool", "prompted")


def test_a_fork_task_sets_its_own_output_mode_and_retries() -> None:
    tasks = [
        {
            "id": "tea",
            "task": "Price tea.",
            "output_schema": PRICE_SCHEMA,
            "output_mode": "tool",
            "output_retries": 0,
        }
    ]
    model = ScriptedModel(
        {
            "planner": [
                {"tool_calls": [{"name": "fork", "arguments": {"tasks": tasks}}]},
                {"content": "Priced."},
            ],
            "tea": [{"tool_calls": [{"name": "final_result", "arguments": {"item": "tea"}}]}],
        }
    )

    result = Orchestrator(model, builtin=False).run_sync("Price tea.")

    [tea] = result.children
    assert (tea.status, tea.data) == ("output_invalid", None)
    [request] = [r for r in model.requests if r.agent == "planner/tea"]
    assert request.output_schema is None
    assert "final_result" in [t.name for t in request.tools]
    model.assert_all_used()


@pytest.mark.parametrize(
    ("task", "problem"),
    [
        (
            {"output_mode": "prompted"},
            "tasks[0]: output_mode: the task has no output_schema, nor has its agent 'general'",
        ),
        (
            {"output_retries": 1},
            "tasks[0]: output_retries: the task has no output_schema, nor has its agent 'general'",
        ),
        (
            {"output_schema": PRICE_SCHEMA, "output_mode": "native"},
            "tasks[0]: output_mode: scripted cannot give native structured output; use "
            "output_mode 'tool' or 'prompted'",
        ),
    ],
)
def test_a_fork_tasks_output_mode_is_checked_before_it_runs(
    task: dict[str, Any], problem: str
) -> None:
    tasks = [{"id": "x", "task": "Do.", **task}]
    model = ScriptedModel(
        {
            "planner": [
                {"tool_calls": [{"name": "fork", "arguments": {"tasks": tasks}}]},
                {"content": "Gave up."},
            ]
        }
    )

    result = Orchestrator(WithoutNative(model), builtin=False).run_sync("Go.")

    observation = next(m for m in result.messages if m.role == "tool").content or ""
    assert "The fork was not run" in observation
    assert problem in observation
    assert not [r for r in model.requests if r.agent != "planner"]


def test_a_definition_with_a_bad_output_schema_is_reported(tmp_path: Path) -> None:
    from orchestrator.tasks import SubagentRegistry

    (tmp_path / "bad.md").write_text(
        "---\nname: bad\ndescription: x\noutput_schema: nowhere_mod_z.T\n---\nBody.\n"
    )
    registry = SubagentRegistry(folders=[tmp_path])

    assert "bad" not in registry
    assert any("output_schema" in str(w) and "does not import" in str(w) for w in registry.warnings)


# -- eval: checks of the structured answer's fields --------------------------------------


def test_eval_checks_the_fields_of_the_structured_answer(tmp_path: Path) -> None:
    from eval_factory import eval_folder, twelve, write_eval

    from orchestrator.eval import EvalOptions, load_eval, run_eval_sync

    root = eval_folder(tmp_path)
    job = root / "job" / "job.yaml"
    job.write_text(
        job.read_text() + "output_schema: {type: object, properties: {words: {type: integer}, "
        "summary: {type: string}}, required: [words, summary]}\n"
    )
    path = write_eval(
        root,
        {
            "cases": [twelve()],
            "scorers": [
                {"data": {"path": "$.words", "equals": "{expected.words}"}},
                {"data": {"path": "$.summary", "equals": "counted"}},
                {"data": {"json_schema": {"type": "object", "required": ["words"]}}},
                {"name": "wrong", "data": {"path": "$.summary", "equals": "guessed"}},
                {"name": "absent", "data": {"path": "$.pages"}},
                {
                    "name": "not an int",
                    "data": {"path": "$.summary", "json_schema": {"type": "integer"}},
                },
            ],
        },
    )

    result = run_eval_sync(load_eval(path), EvalOptions(out=tmp_path / "out"))

    by_name = {s["name"]: s for s in result.lines[0]["scores"]}
    assert by_name["data $.words"]["passed"], by_name
    assert by_name["data $.summary"]["passed"]
    assert by_name["data $"]["passed"]
    assert not by_name["wrong"]["passed"]
    assert by_name["wrong"]["reason"] == '$.summary = "counted", expected "guessed"'
    assert by_name["absent"]["reason"] == "$.pages is not in the answer"
    assert "is not of type 'integer'" in by_name["not an int"]["reason"]


def test_trace_show_and_the_report_show_each_steps_data(tmp_path: Path) -> None:
    write_job(tmp_path)
    write_script(tmp_path, [json.dumps(INVOICE)])
    run = orchestrator("run", "job.yaml", "--quiet", "--trace", "run.jsonl", cwd=tmp_path)
    assert run.returncode == 0, run.stderr

    shown = orchestrator("trace", "show", "run.jsonl", cwd=tmp_path)
    as_json = orchestrator("trace", "show", "run.jsonl", "--json", cwd=tmp_path)
    report = orchestrator("report", "run.jsonl", "-o", "run.html", cwd=tmp_path)

    assert f"data: {json.dumps(INVOICE)}" in shown.stdout
    assert 'data: {"headline": "A-7 is fine", "approved": true}' in shown.stdout
    agents = {a["path"]: a for a in json.loads(as_json.stdout)["agents"]}
    assert agents["read"]["data"] == INVOICE
    assert report.returncode == 0, report.stderr
    page = (tmp_path / "run.html").read_text()
    assert "data: <code>{&quot;number&quot;: &quot;A-7&quot;" in page


def test_a_hostile_traces_data_cannot_break_the_summary(tmp_path: Path) -> None:
    from orchestrator.events import parse_event
    from orchestrator.trace.summary import render, summarize

    lines = [
        {"seq": 1, "type": "run_start", "agent": "a", "ts": 1.0, "run": "r"},
        {
            "seq": 2,
            "type": "run_end",
            "agent": "a",
            "ts": 2.0,
            "run": "r",
            "status": "completed",
            "data": {"x": "line\u2028\nerror: forged" + "y" * 5000},
        },
    ]
    events = [event for line in lines if (event := parse_event(line)) is not None]
    assert len(events) == 2
    text = render(summarize(events))
    line = next(line for line in text.splitlines() if "data:" in line)
    assert "\\u2028" in line and "\\n" in line
    assert len(line) < 220
    assert "error: forged" not in text.replace("\\nerror: forged", "")


def test_run_batch_rows_carry_the_structured_output(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(
        "name: rows\nmodel: scripted:script.yaml\ninputs: {city: null}\nsteps:\n"
        "  - id: answer\n    task: 'Weather in {inputs.city}?'\n"
        "    output_schema: {type: object, properties: {temp: {type: integer}}, "
        "required: [temp]}\n"
    )
    (tmp_path / "script.yaml").write_text("answer: [{content: '{\"temp\": 7}'}]\n")
    (tmp_path / "rows.jsonl").write_text('{"id": "a", "city": "Oslo"}\n')

    batch = orchestrator("run-batch", "job.yaml", "--inputs", "rows.jsonl", cwd=tmp_path)

    assert batch.returncode == 0, batch.stderr
    [line] = [json.loads(t) for t in (tmp_path / "rows.results.jsonl").read_text().splitlines()]
    assert line["data"] == {"temp": 7}


def test_retry_failed_keeps_the_validated_output_a_retried_step_reads(tmp_path: Path) -> None:
    """`check` fails (its model has no answer for it: an error); `resume --retry-failed`
    runs it again, and the `read` step kept from the first attempt fills its fields with its
    recorded data."""
    write_job(tmp_path)
    script: dict[str, Any] = {"read": [{"content": json.dumps(INVOICE)}], "check": []}
    (tmp_path / "script.yaml").write_text(json.dumps(script))
    first = orchestrator("run", "job.yaml", "--json", "--quiet", cwd=tmp_path)
    assert first.returncode == 3, first.stderr
    steps = json.loads(first.stdout)["steps"]
    assert [s["status"] for s in steps] == ["completed", "error", "skipped"]
    write_script(tmp_path, [json.dumps(INVOICE)])

    again = orchestrator("resume", "--retry-failed", "last", "--json", cwd=tmp_path)

    assert again.returncode == 0, again.stderr
    result = json.loads(again.stdout)
    assert [s["data"] for s in result["steps"]][:2] == [INVOICE, {"ok": True, "note": "sums match"}]
    trace = tmp_path / result["trace"]
    asked = [
        e["message"]["content"]
        for e in trace_lines(trace)
        if e["type"] == "message" and e["agent"] == "check" and e["message"]["role"] == "user"
    ]
    assert asked[-1].startswith("Check invoice A-7 of 12.5, first item tea.")
    assert (
        len([e for e in trace_lines(trace) if e["type"] == "run_end" and e["agent"] == "read"]) == 1
    )


def test_the_model_cannot_rewrite_a_schema_file_the_spec_names(tmp_path: Path) -> None:
    """The workspace is the spec's own folder: the schema file there stays read-only."""
    (tmp_path / "check.json").write_text(json.dumps(CHECK_SCHEMA))
    spec = {
        "name": "t",
        "model": "scripted:script.yaml",
        "permissions": {"workspace": "."},
        "steps": [{"id": "a", "planner": True, "task": "x", "output_schema": "check.json"}],
    }
    (tmp_path / "job.yaml").write_text(json.dumps(spec))
    loose = json.dumps({"type": "object"})
    write = {"name": "files__write_file", "arguments": {"path": "check.json", "content": loose}}
    script = {
        "a": [
            {"tool_calls": [{"name": "load_skill", "arguments": {"name": "files"}}]},
            {"tool_calls": [write]},
            {"content": json.dumps({"ok": True, "note": "n"})},
        ]
    }
    (tmp_path / "script.yaml").write_text(json.dumps(script))
    job = load_job(tmp_path / "job.yaml")
    assert tmp_path / "check.json" in job.named_files()

    result = Orchestrator.from_job(job).run_job_sync()

    assert json.loads((tmp_path / "check.json").read_text()) == CHECK_SCHEMA
    run = result.step("a").run
    assert run is not None
    refused = [m for m in run.messages if m.role == "tool" and m.error_type == "denied"]
    assert refused, [m.content for m in run.messages if m.role == "tool"]


def test_a_steps_fields_may_come_from_its_agent_definitions_schema(tmp_path: Path) -> None:
    agents = tmp_path / "subagents"
    agents.mkdir()
    (agents / "pricer.md").write_text(
        "---\nname: pricer\ndescription: Prices one item.\n"
        f"output_schema: {json.dumps(PRICE_SCHEMA)}\n---\nYou price items.\n"
    )
    spec = {
        "name": "t",
        "model": "scripted:script.yaml",
        "steps": [
            {"id": "price", "agent": "pricer", "task": "Price tea."},
            {"id": "say", "depends_on": ["price"], "task": "Say {steps.price.output.price}."},
        ],
    }
    (tmp_path / "job.yaml").write_text(json.dumps(spec))
    script = {
        "price": [{"content": json.dumps({"item": "tea", "price": 3.5})}],
        "say": [{"content": "3.5 it is."}],
    }
    (tmp_path / "script.yaml").write_text(json.dumps(script))

    result = Orchestrator.from_job(load_job(tmp_path / "job.yaml")).run_job_sync()

    assert result.status == "completed"
    assert result.step("price").data == {"item": "tea", "price": 3.5}
    spec["steps"][1]["task"] = "Say {steps.price.output.cost}."
    (tmp_path / "job.yaml").write_text(json.dumps(spec))
    with pytest.raises(SpecError, match="no field 'cost'"):
        load_job(tmp_path / "job.yaml")


def test_a_field_renders_text_as_it_is_other_values_as_json_and_absent_as_null() -> None:
    from orchestrator.jobs.templating import Template

    template = Template.parse(
        "{steps.a.output.name} {steps.a.output.tags} {steps.a.output.n} "
        "{steps.a.output.missing} {steps.a.output.tags.5}"
    )
    data = {"a": {"name": "tea {inputs.x}", "tags": ["x", 1], "n": None}}

    assert template.render({}, {}, data) == 'tea {inputs.x} ["x", 1] null null null'


def test_a_job_and_a_definition_with_schemas_travel_to_another_process(tmp_path: Path) -> None:
    """A Ray worker gets the job (and definitions) pickled: they hold plain data only."""
    import pickle

    from orchestrator.tasks import SubagentRegistry

    module = write_job(tmp_path)
    write_script(tmp_path, [json.dumps(INVOICE)])
    (tmp_path / "pricer.md").write_text(
        f"---\nname: pricer\ndescription: x\noutput_schema: {module}.Summary\n---\nBody.\n"
    )
    job = pickle.loads(pickle.dumps(load_job(tmp_path / "job.yaml")))
    definition = pickle.loads(pickle.dumps(SubagentRegistry(folders=[tmp_path]).get("pricer")))

    assert [job.output_spec(i) is not None for i in job.step_ids()] == [True, True, True]
    assert definition is not None and definition.output_spec is not None
    assert definition.output_spec.schema["title"] == "Summary"
