from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from orchestrator.errors import ConfigError
from orchestrator.jobs import GOAL_STEP, Job, SpecError, parse_set_options
from orchestrator.jobs import load_spec as load_job
from orchestrator.security import Permissions

GOOD = """\
name: quarterly-sales-review
model: openai:gpt-4o-mini
budget: {max_tokens: 150000, max_steps: 30, max_parallel: 4}
skills: [./skills]
subagents: [./subagents]
permissions: {workspace: ./data, shell: false, python: true, network: []}
inputs: {region: EMEA}
steps:
  - id: load
    agent: analyst
    task: "Summarize sales.csv for {inputs.region}."
  - id: risks
    agent: reviewer
    depends_on: [load]
    task: "List the three biggest risks in: {steps.load.output}"
  - id: report
    planner: true
    depends_on: [load, risks]
    task: "Write the review as report.md in the workspace."
output: report
"""

STEPS_HEAD = """\
name: t
model: openai:gpt-4o-mini
inputs: {region: EMEA}
steps:
"""


def write(folder: Path, text: str, name: str = "job.yaml") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def good_job(folder: Path) -> Path:
    for sub in ("skills", "subagents", "data"):
        (folder / sub).mkdir(exist_ok=True)
    return write(folder, GOOD)


def error_of(path: Path, **overrides: Any) -> str:
    """The message of the SpecError that loading `path` raises; it names the file, or the
    command-line flag at fault."""
    with pytest.raises(SpecError) as caught:
        load_job(path, **overrides)
    message = str(caught.value)
    assert message.startswith((f"{path}: ", "--"))
    return message


# -- good specs ---------------------------------------------------------------------------


def test_good_spec_resolves_paths_against_the_spec_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = good_job(tmp_path)
    monkeypatch.chdir(tmp_path.parent)

    job = load_job(path.relative_to(tmp_path.parent), known_agents=["analyst", "reviewer"])

    assert job.name == "quarterly-sales-review"
    assert [folder.path for folder in job.skills] == [tmp_path / "skills"]
    assert job.subagents == [tmp_path / "subagents"]
    assert isinstance(job.permissions, Permissions)
    assert job.permissions.workspace == tmp_path / "data"
    assert job.permissions.python is True
    assert job.permissions.shell is False
    assert job.budget.max_tokens == 150000
    assert [step.agent_name for step in job.plan] == ["analyst", "reviewer", "planner"]
    assert job.output_step == "report"
    assert list(job.graph().edges) == [("load", "risks"), ("load", "report"), ("risks", "report")]


def test_defaults(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        name: t
        model: openai:gpt-4o-mini
        steps:
          - {id: a, task: first}
          - {id: b, task: second}
        """,
    )

    job = load_job(path)

    assert job.output_step == "b"
    assert job.plan[0].agent_name == "general"
    assert job.permissions.workspace == tmp_path / "work"  # beside the spec, not its folder
    assert job.permissions.network == []
    assert job.budget.max_tokens is None
    assert job.skills == []
    assert job.trace is None


def test_overrides_model_inputs_and_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = good_job(tmp_path)
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    (cwd / "script.yaml").write_text("'*': [{content: done}]\n", encoding="utf-8")
    monkeypatch.chdir(cwd)

    job = load_job(path, model="scripted:script.yaml", inputs={"region": "APAC"}, trace="run.jsonl")

    assert job.model.name == f"scripted:{cwd / 'script.yaml'}"
    assert job.inputs == {"region": "APAC"}
    assert job.trace == cwd / "run.jsonl"


def test_scripted_model_and_trace_in_spec_resolve_against_spec_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, "'*': [{content: done}]\n", name="script.yaml")
    path = write(
        tmp_path,
        """\
        name: t
        model: scripted:script.yaml
        trace: traces/run.jsonl
        goal: do it
        """,
    )
    monkeypatch.chdir(tmp_path.parent)

    job = load_job(path)

    assert job.model.name == f"scripted:{tmp_path / 'script.yaml'}"
    assert job.trace == tmp_path / "traces" / "run.jsonl"


def test_required_input_given_with_set(tmp_path: Path) -> None:
    path = write(
        tmp_path, STEPS_HEAD.replace("{region: EMEA}", "{region: null}") + "  - {id: a, task: x}\n"
    )

    assert load_job(path, inputs={"region": "APAC"}).inputs == {"region": "APAC"}


def test_scalar_inputs_become_text(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        name: t
        model: openai:gpt-4o-mini
        inputs: {year: 2025, ratio: 0.5, final: true, day: 2025-01-31}
        goal: "Review {inputs.year} ({inputs.final}, {inputs.ratio}, {inputs.day})."
        """,
    )

    job = load_job(path)

    assert job.render_task(GOAL_STEP, {}) == "Review 2025 (true, 0.5, 2025-01-31)."


def test_goal_job_is_one_planner_step(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """\
        name: t
        model: openai:gpt-4o-mini
        inputs: {region: EMEA}
        goal: "Review {inputs.region}."
        """,
    )

    job = load_job(path, inputs={"region": "APAC"})

    [step] = job.plan
    assert (step.id, step.planner, step.agent_name) == (GOAL_STEP, True, "planner")
    assert job.output_step == GOAL_STEP
    assert job.render_task(GOAL_STEP, {}) == "Review APAC."


def test_render_task_substitutes_once_and_keeps_escaped_braces(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        STEPS_HEAD
        + """\
  - {id: a, task: "Sales for {inputs.region}."}
  - id: b
    depends_on: [a]
    task: 'Use {{"format": "json"}} on: {steps.a.output} ({ inputs.region })'
""",
    )
    job = load_job(path)

    rendered = job.render_task("b", {"a": "text with {inputs.region} and {{x}}"})

    assert rendered == 'Use {"format": "json"} on: text with {inputs.region} and {{x}} (EMEA)'
    assert job.render_task("a", {}) == "Sales for EMEA."


def test_render_task_reports_missing_output_and_unknown_step(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        STEPS_HEAD
        + "  - {id: a, task: x}\n  - {id: b, depends_on: [a], task: '{steps.a.output}'}\n",
    )
    job = load_job(path)

    with pytest.raises(KeyError, match="output of step 'a'"):
        job.render_task("b", {})
    with pytest.raises(KeyError, match="did you mean 'b'"):
        job.render_task("bb", {})


def test_transitive_dependency_output_may_be_used(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        STEPS_HEAD
        + """\
  - {id: a, task: x}
  - {id: b, depends_on: [a], task: y}
  - {id: c, depends_on: [b], task: "{steps.a.output}"}
""",
    )

    assert load_job(path).render_task("c", {"a": "A", "b": "B"}) == "A"


def test_general_agent_is_always_known(tmp_path: Path) -> None:
    path = write(tmp_path, STEPS_HEAD + "  - {id: a, agent: general, task: x}\n")

    assert load_job(path, known_agents=[]).plan[0].agent_name == "general"


def test_job_round_trips_through_its_dump(tmp_path: Path) -> None:
    job = load_job(good_job(tmp_path))

    again = Job.model_validate(job.model_dump(mode="json"))

    assert again.model_dump() == job.model_dump()
    assert (job.source, again.source) == (tmp_path / "job.yaml", None)


def test_job_built_in_python_is_checked_too() -> None:
    with pytest.raises(SpecError, match=r"^job spec: goal: give either goal or steps"):
        Job(name="t", model="openai:x", goal="g", steps=[{"id": "a", "task": "x"}])


def test_field_docs_are_descriptions() -> None:
    assert "depends_on" in (Job.model_fields["steps"].description or "")


# -- bad specs: one SpecError naming the file, the field path and the problem ----------------


def test_yaml_syntax_error_gives_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, "name: t\nsteps:\n  - id: a\n   task: b\n")

    message = error_of(path)

    assert "line 4, column 4: invalid YAML" in message


def test_duplicate_yaml_key(tmp_path: Path) -> None:
    path = write(tmp_path, "name: t\nmodel: openai:x\nname: u\ngoal: g\n")

    assert "line 3, column 1: invalid YAML: the key 'name' is given twice" in error_of(path)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "expected a mapping of fields (name, model, goal or steps, ...), got an empty file"),
        ("- a\n- b\n", "got a list"),
    ],
)
def test_file_that_is_not_a_mapping(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in error_of(write(tmp_path, text))


def test_missing_file(tmp_path: Path) -> None:
    assert "cannot read the file" in error_of(tmp_path / "nope.yaml")


def test_unknown_key_names_path_and_suggests(tmp_path: Path) -> None:
    path = write(tmp_path, STEPS_HEAD + "  - {id: a, task: x, depend_on: [b]}\n")

    message = error_of(path)

    assert "steps[0].depend_on: unknown field 'depend_on' (did you mean 'depends_on'?)" in message
    assert "expected one of: id, task, agent, planner, depends_on" in message


def test_unknown_top_level_key(tmp_path: Path) -> None:
    path = write(tmp_path, "name: t\nmodel: openai:x\ngoal: g\nouptut: x\n")

    assert "ouptut: unknown field 'ouptut' (did you mean 'output'?)" in error_of(path)


def test_unknown_permission(tmp_path: Path) -> None:
    path = write(tmp_path, "name: t\nmodel: openai:x\ngoal: g\npermissions: {shel: true}\n")

    assert "permissions.shel: unknown field 'shel' (did you mean 'shell'?)" in error_of(path)


def test_wrong_type(tmp_path: Path) -> None:
    path = write(tmp_path, "name: t\nmodel: openai:x\ngoal: g\nbudget: {max_tokens: lots}\n")

    assert "budget.max_tokens: expected a whole number, got 'lots'" in error_of(path)


def test_wrong_type_of_step_and_list(tmp_path: Path) -> None:
    path = write(tmp_path, STEPS_HEAD + "  - just text\n  - {id: b, task: 7, depends_on: a}\n")

    message = error_of(path)

    assert "3 problems" in message
    assert "steps[0]: expected a mapping of fields (key: value), got 'just text'" in message
    assert "steps[1].task: expected text, got the number 7 (put it in quotes)" in message
    assert "steps[1].depends_on: expected a list, got 'a' (write [a])" in message


def test_bad_input_names(tmp_path: Path) -> None:
    path = write(tmp_path, "name: t\nmodel: openai:x\ngoal: g\ninputs: {1: a, 'a b': c}\n")

    message = error_of(path)

    assert "inputs: key 1: expected text, got the number 1" in message
    assert "inputs: key 'a b': expected a name of letters" in message


def test_missing_required_field(tmp_path: Path) -> None:
    path = write(tmp_path, STEPS_HEAD + "  - {id: a}\n")

    assert "steps[0].task: required, but missing" in error_of(path)


def test_bad_model_string(tmp_path: Path) -> None:
    path = write(tmp_path, "name: t\nmodel: gpt-4o\ngoal: g\n")

    assert "model: unknown model 'gpt-4o' (did you mean 'openai:gpt-4o'?)" in error_of(path)


def test_missing_skill_folder(tmp_path: Path) -> None:
    path = write(tmp_path, "name: t\nmodel: openai:x\ngoal: g\nskills: [./skills]\n")

    message = error_of(path)

    assert (
        f"skills[0]: expected an existing folder, but {tmp_path / 'skills'} is not one" in message
    )


def test_unknown_step_in_depends_on(tmp_path: Path) -> None:
    path = write(
        tmp_path, STEPS_HEAD + "  - {id: load, task: x}\n  - {id: b, depends_on: [lod], task: y}\n"
    )

    message = error_of(path)

    assert "steps[1].depends_on[0]: step 'b' depends on unknown step 'lod'" in message
    assert "did you mean 'load'?" in message


def test_unknown_agent(tmp_path: Path) -> None:
    path = write(tmp_path, STEPS_HEAD + "  - {id: a, agent: reviwer, task: x}\n")

    message = error_of(path, known_agents=["reviewer", "analyst"])

    assert "steps[0].agent: unknown agent 'reviwer' (did you mean 'reviewer'?)" in message
    assert "known agents: analyst, general, reviewer" in message


def test_unknown_agent_not_checked_without_known_agents(tmp_path: Path) -> None:
    path = write(tmp_path, STEPS_HEAD + "  - {id: a, agent: anyone, task: x}\n")

    assert load_job(path).plan[0].agent_name == "anyone"


def test_cycle_is_named(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        STEPS_HEAD
        + """\
  - {id: a, depends_on: [c], task: x}
  - {id: b, depends_on: [a], task: x}
  - {id: c, depends_on: [b], task: x}
""",
    )

    assert "steps[0].depends_on[0]: dependency cycle: a -> c -> b -> a" in error_of(path)


def test_duplicate_step_id(tmp_path: Path) -> None:
    path = write(tmp_path, STEPS_HEAD + "  - {id: a, task: x}\n  - {id: a, task: y}\n")

    assert "steps[1].id: duplicate step id 'a'" in error_of(path)


def test_bad_step_id(tmp_path: Path) -> None:
    path = write(tmp_path, STEPS_HEAD + "  - {id: 'load data', task: x}\n")

    assert "steps[0].id: expected a name of letters, digits" in error_of(path)


def test_missing_required_input(tmp_path: Path) -> None:
    path = write(
        tmp_path, STEPS_HEAD.replace("{region: EMEA}", "{region: null}") + "  - {id: a, task: x}\n"
    )

    message = error_of(path)

    assert "inputs.region: required input has no value; give it with --set region=VALUE" in message


def test_unknown_set_key(tmp_path: Path) -> None:
    path = write(tmp_path, STEPS_HEAD + "  - {id: a, task: x}\n")

    message = error_of(path, inputs={"regoin": "APAC"})

    assert "--set regoin: 'regoin' is not an input of this job" in message
    assert "did you mean 'region'?" in message
    assert "declared inputs: region" in message


def test_unknown_input_reference(tmp_path: Path) -> None:
    path = write(tmp_path, STEPS_HEAD + "  - {id: a, task: 'For {inputs.regoin}'}\n")

    message = error_of(path)

    assert "steps[0].task: {inputs.regoin}: unknown input 'regoin'" in message
    assert "did you mean 'region'?" in message


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        (
            "'Give {name}'",
            "{name} is not a reference; expected {inputs.NAME}, {steps.ID.output} or "
            "{steps.ID.output.FIELD}",
        ),
        ("'{steps.a.result}'", "{steps.a.result} is not a reference"),
        ("'JSON: {\"a\": 1'", "unmatched '{' at character 7; write {{ for a literal brace"),
        ("'x }'", "unmatched '}' at character 3; write }} for a literal brace"),
    ],
)
def test_bad_template_syntax(tmp_path: Path, task: str, expected: str) -> None:
    path = write(tmp_path, STEPS_HEAD + f"  - {{id: a, task: {task}}}\n")

    assert f"steps[0].task: {expected}" in error_of(path)


def test_reference_to_unknown_step(tmp_path: Path) -> None:
    path = write(tmp_path, STEPS_HEAD + "  - {id: a, task: '{steps.lod.output}'}\n")

    assert "steps[0].task: {steps.lod.output}: unknown step 'lod'" in error_of(path)


def test_reference_to_step_not_depended_on(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        STEPS_HEAD + "  - {id: load, task: x}\n  - {id: b, task: 'Use {steps.load.output}'}\n",
    )

    message = error_of(path)

    assert "steps[1].task: {steps.load.output}: step 'b' does not depend on 'load'" in message
    assert "add 'load' to its depends_on" in message


def test_reference_to_own_output(tmp_path: Path) -> None:
    path = write(tmp_path, STEPS_HEAD + "  - {id: a, task: '{steps.a.output}'}\n")

    assert "steps[0].task: {steps.a.output}: a step cannot use its own output" in error_of(path)


def test_goal_cannot_use_step_outputs(tmp_path: Path) -> None:
    path = write(tmp_path, "name: t\nmodel: openai:x\ngoal: '{steps.a.output}'\n")

    assert "goal: {steps.a.output}: a goal cannot use step outputs" in error_of(path)


def test_goal_and_steps_both_given(tmp_path: Path) -> None:
    path = write(tmp_path, STEPS_HEAD + "  - {id: a, task: x}\ngoal: do it\n")

    assert "goal: give either goal or steps, not both" in error_of(path)


def test_neither_goal_nor_steps(tmp_path: Path) -> None:
    path = write(tmp_path, "name: t\nmodel: openai:x\n")

    assert f"{path}: expected a 'goal' for the planner or a list of 'steps'" in error_of(path)


def test_empty_steps(tmp_path: Path) -> None:
    path = write(tmp_path, "name: t\nmodel: openai:x\nsteps: []\n")

    assert "steps: needs at least one step" in error_of(path)


def test_agent_and_planner_both_given(tmp_path: Path) -> None:
    path = write(tmp_path, STEPS_HEAD + "  - {id: a, agent: analyst, planner: true, task: x}\n")

    assert "steps[0]: give agent or planner: true, not both" in error_of(path)


def test_unknown_output_step(tmp_path: Path) -> None:
    path = write(tmp_path, STEPS_HEAD + "  - {id: report, task: x}\noutput: reprot\n")

    assert "output: unknown step 'reprot' (did you mean 'report'?)" in error_of(path)


def test_output_with_goal(tmp_path: Path) -> None:
    path = write(tmp_path, "name: t\nmodel: openai:x\ngoal: g\noutput: goal\n")

    assert "output: a goal job's output is the planner's answer" in error_of(path)


def test_all_problems_in_one_error(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        STEPS_HEAD
        + """\
  - {id: a, agent: nobody, task: '{inputs.nope}'}
  - {id: b, depends_on: [zz], task: x}
""",
    )

    message = error_of(path, known_agents=[], inputs={"extra": "1"})

    assert message.startswith(f"{path}: 4 problems\n")
    for fragment in ("--set extra", "steps[0].agent", "steps[1].depends_on[0]", "steps[0].task"):
        assert f"  - {fragment}: " in message


# -- --set parsing -------------------------------------------------------------------------


def test_parse_set_options() -> None:
    options = ["region=APAC", "query=a=b", "empty=", "region=EMEA"]

    assert parse_set_options(options) == {"region": "EMEA", "query": "a=b", "empty": ""}


@pytest.mark.parametrize("option", ["region", "=APAC"])
def test_parse_set_options_rejects_malformed(option: str) -> None:
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        parse_set_options([option])


# -- the validate command, as a real process ------------------------------------------------


def test_validate_checks_agents_against_the_folders_the_job_names(tmp_path: Path) -> None:
    good_job(tmp_path)  # its subagents folder is empty: no 'analyst' anywhere

    result = run_cli("validate", "job.yaml", cwd=tmp_path)

    assert result.returncode == 2
    assert "steps[0].agent: unknown agent 'analyst'" in result.stderr
    assert "reviewer" in result.stderr  # the built-in sub-agents are known


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


ANALYST = "---\nname: analyst\ndescription: Crunches numbers.\n---\nYou analyse data.\n"


def test_validate_ok(tmp_path: Path) -> None:
    good_job(tmp_path)
    (tmp_path / "subagents" / "analyst.md").write_text(ANALYST)
    (tmp_path / "skills" / "notes").mkdir()  # an empty skills folder is warned about
    (tmp_path / "skills" / "notes" / "SKILL.md").write_text(
        "---\nname: notes\ndescription: Takes notes.\n---\nWrite them down.\n"
    )

    result = run_cli("validate", "job.yaml", "--set", "region=APAC", cwd=tmp_path)

    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        "ok: quarterly-sales-review (3 steps)\n",
        "",
    )


def test_validate_bad_spec_exits_2_with_error_on_stderr(tmp_path: Path) -> None:
    good_job(tmp_path)

    result = run_cli("validate", "job.yaml", "--set", "regoin=APAC", "--model", "x", cwd=tmp_path)

    assert result.returncode == 2
    assert result.stdout == ""
    # One pass: the flags' problems, the spec's, and the agent no definition gives.
    assert result.stderr.startswith("error: job.yaml: 3 problems\n")
    assert "--set regoin:" in result.stderr
    assert "  - --model x: unknown model 'x': give 'provider:model'" in result.stderr
    assert "steps[0].agent: unknown agent 'analyst'" in result.stderr


@pytest.mark.parametrize(
    ("flag", "meant"),
    [
        ("gpt-4o-mini", "openai:gpt-4o-mini"),
        ("openai/gpt-4o-mini", "openai:gpt-4o-mini"),
        ("claude-sonnet-4-5", "anthropic:claude-sonnet-4-5"),
    ],
)
def test_a_model_flag_spelled_another_way_is_blamed_on_the_flag(
    tmp_path: Path, flag: str, meant: str
) -> None:
    good_job(tmp_path)

    result = run_cli("validate", "job.yaml", "--set", "region=APAC", "-m", flag, cwd=tmp_path)

    assert result.returncode == 2
    assert f"- --model {flag}: unknown model {flag!r} (did you mean {meant!r}?)" in result.stderr
    assert "- model:" not in result.stderr


def test_a_bad_model_option_is_blamed_on_the_flag(tmp_path: Path) -> None:
    good_job(tmp_path)

    result = run_cli(
        "validate",
        "job.yaml",
        "--set",
        "region=APAC",
        "--model-option",
        "max_output_tokens=0",
        cwd=tmp_path,
    )

    assert result.returncode == 2
    assert "--model-option max_output_tokens: expected a number" in result.stderr
    assert "model.max_output_tokens" not in result.stderr


def test_validate_malformed_set_option(tmp_path: Path) -> None:
    good_job(tmp_path)

    result = run_cli("validate", "job.yaml", "--set", "region", cwd=tmp_path)

    assert result.returncode == 2
    assert "--set 'region': expected KEY=VALUE" in result.stderr


def test_validate_reports_every_problem_of_a_spec_in_one_pass(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(
        "name: v\nmodel: openai:gpt-4o-mini\nsteps:\n"
        '  - {id: a, task: "x {steps.b.output}", depends_on: [a]}\n'
        '  - {id: b, task: "y {steps.nope.output}", agent: ghost}\n'
        '  - {id: c, task: "z {steps.a.output}"}\n'
    )
    result = run_cli("validate", "job.yaml", cwd=tmp_path)

    assert result.returncode == 2
    assert result.stderr.startswith("error: job.yaml: 5 problems\n")
    for found in (
        "steps[1].agent: unknown agent 'ghost'",
        "steps[0].depends_on[0]: step 'a' depends on itself",
        "steps[0].task: {steps.b.output}: step 'a' does not depend on 'b'",
        "steps[1].task: {steps.nope.output}: unknown step 'nope'",
        "steps[2].task: {steps.a.output}: step 'c' does not depend on 'a'",
    ):
        assert found in result.stderr


def test_validate_reports_a_money_cap_on_a_model_without_a_price(tmp_path: Path) -> None:
    spec = "name: v\nmodel: openai-compatible:mystery\nbudget: {max_cost_usd: 1}\ngoal: Hi.\n"
    (tmp_path / "job.yaml").write_text(spec)
    result = run_cli("validate", "job.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert "model 'openai-compatible:mystery' has no price" in result.stderr

    priced = spec + "prices: {'openai-compatible:mystery': {input: 1, output: 2}}\n"
    (tmp_path / "job.yaml").write_text(priced)
    assert run_cli("validate", "job.yaml", cwd=tmp_path).returncode == 0
