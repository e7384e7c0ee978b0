"""`orchestrator eval`: every kind of check and of variant, the table, results, budget,
one-pass errors, and the command's exit codes. Real jobs run (skills, tools, forks, traces);
only the models' decisions are scripted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_process import orchestrator
from eval_factory import eval_folder, twelve, write_eval
from provider_server import ProviderServer

from orchestrator.eval import (
    EvalError,
    EvalOptions,
    EvalResult,
    load_eval,
    render_table,
    run_eval_sync,
    wilson,
)


def run(path: Path, out: Path, **options: Any) -> EvalResult:
    return run_eval_sync(load_eval(path), EvalOptions(out=out, **options))


def scores(result: EvalResult) -> dict[str, dict[str, Any]]:
    """The first line's checks, by name."""
    line = result.lines[0]
    return {s["name"]: s for s in line["scores"]}


def test_every_kind_of_check_on_a_real_run(tmp_path: Path) -> None:
    root = eval_folder(tmp_path)
    (root / "checks.py").write_text(
        "from orchestrator.eval import Score\n"
        "def long_enough(run):\n"
        "    return len(run.output) > 10, 'length'\n"
        "def half(run):\n"
        "    return 0.25\n"
        "def named(run):\n"
        "    forks = run.forks\n"
        "    return Score(name='x', passed=forks == 1, score=1.0, reason=f'{forks} forks')\n"
    )
    path = write_eval(
        root,
        {
            "cases": [twelve()],
            "scorers": [
                {"status": "completed"},
                {"contains": ["words", "counted"]},
                {"not_contains": "guessed"},
                {"equals": '{"words": 12, "summary": "counted"}'},
                {"regex": r'"words": \d+'},
                {"json_path": {"path": "$.words", "equals": "{expected.words}"}},
                {"json_path": {"path": "$.summary"}},
                {"json_schema": {"type": "object", "required": ["words", "summary"]}},
                {"file": {"path": "out/count.txt", "equals": "{expected.words}"}},
                {"file": {"path": "readme.md", "contains": "every copy"}},
                {"file": {"path": "out/other.txt", "exists": False}},
                {"skills_loaded": ["word-stats"]},
                {"skills_not_loaded": ["shell"]},
                {"tools_called": ["word-stats__tally", "fork"]},
                {"tools_not_called": ["shell__run"]},
                {"forks": {"min": 1, "max": 1}},
                {"steps": {"min": 5}},
                {"max_tokens": 50000},
                {"max_seconds": 60},
                {"name": "long", "python": "checks.py:long_enough"},
                {"name": "forked", "python": "checks.py:named"},
            ],
        },
    )
    result = run(path, tmp_path / "out")
    line = result.lines[0]
    failed = [s for s in line["scores"] if not s["passed"]]
    assert failed == [], failed
    assert line["passed"] and line["status"] == "completed" and line["done"]
    assert line["skills_loaded"] == ["word-stats"]
    assert {"word-stats__tally", "fork"} <= set(line["tools_called"])
    named = scores(result)
    assert named["forked"]["reason"] == "1 forks"
    assert named["long"]["reason"] == "length"
    # The run wrote in a copy of the workspace, never in the job's own.
    assert not (root / "job" / "work" / "out").exists()
    assert (Path(line["workspace"]) / "out" / "count.txt").read_text() == "12\n"


def test_failing_checks_say_why(tmp_path: Path) -> None:
    root = eval_folder(tmp_path)
    (root / "checks.py").write_text("def half(run):\n    return 0.25\n")
    path = write_eval(
        root,
        {
            "cases": [twelve("seven", 7)],
            "scorers": [
                {"file": {"path": "out/count.txt", "equals": "12"}},
                {"json_path": {"path": "$.words", "equals": 7}},
                {"json_path": {"path": "$.missing"}},
                {"json_schema": {"type": "array"}},
                {"tools_not_called": ["fork"]},
                {"skills_loaded": ["files"]},
                {"steps": {"max": 2}},
                {"max_tokens": 10},
                {"max_cost_usd": 1.0},
                {"regex": "^never$"},
                {"name": "half", "python": "checks.py:half"},
            ],
        },
    )
    result = run(path, tmp_path / "out")
    by_name = scores(result)
    assert not result.lines[0]["passed"]
    assert by_name["file out/count.txt"]["reason"] == "out/count.txt: output: 7"
    assert by_name["json_path $.words"]["reason"] == "$.words = 12, expected 7"
    assert by_name["json_path $.missing"]["reason"] == "$.missing is not in the output"
    assert "is not of type 'array'" in by_name["json_schema"]["reason"]
    assert by_name["tools_not_called fork"]["reason"] == "called: fork"
    assert by_name["skills_loaded files"]["reason"] == "not loaded: files"
    assert "model calls (want <= 2)" in by_name["steps <= 2"]["reason"]
    assert "at most 10" in by_name["max_tokens 10"]["reason"]
    # A scripted model has no price: a cost limit cannot pass, and says why.
    assert "cost is unknown" in by_name["max_cost_usd 1.0"]["reason"]
    assert by_name["half"]["score"] == 0.25 and not by_name["half"]["passed"]
    # The status check was added (none was given) and passed.
    assert by_name["status completed"]["passed"]


def test_a_model_as_judge_is_counted_apart(tmp_path: Path) -> None:
    root = eval_folder(tmp_path)
    (root / "judge.script.yaml").write_text(
        yaml.safe_dump(
            {
                "judge": [
                    {"content": '{"score": 0.9, "reason": "counts and says so"}'},
                    {"content": "I think it is fine"},
                ]
            }
        )
    )
    rubric = "The answer gives the word count as JSON."
    judge = {"rubric": rubric, "model": "scripted:judge.script.yaml", "pass_score": 0.8}
    path = write_eval(
        root,
        {"cases": [twelve("a"), twelve("b")], "scorers": [{"judge": judge}], "concurrency": 1},
    )
    result = run(path, tmp_path / "out")
    first, second = (scores_of(line) for line in result.lines)
    assert first["judge rubric"]["score"] == 0.9 and first["judge rubric"]["passed"]
    assert first["judge rubric"]["reason"] == "counts and says so"
    # A reply that is not the JSON asked for scores 0, and says so.
    assert second["judge rubric"]["score"] == 0.0
    assert "not the JSON asked for" in second["judge rubric"]["reason"]
    judge_tokens = [line["judge"]["usage"]["total_tokens"] for line in result.lines]
    assert all(tokens > 0 for tokens in judge_tokens)
    row = result.summary.rows[0]
    assert row.judge_tokens == sum(judge_tokens)
    # The job's own tokens do not include the judge's.
    assert row.tokens == sum(line["usage"]["total_tokens"] for line in result.lines)
    assert "judge (baseline)" in render_table(result.summary)


def scores_of(line: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in line["scores"]}


def test_variants_of_every_kind_change_what_they_name(tmp_path: Path) -> None:
    root = eval_folder(tmp_path)
    extra = root / "more-skills" / "greeter"
    extra.mkdir(parents=True)
    (extra / "SKILL.md").write_text("---\nname: greeter\ndescription: Says hello.\n---\nHello.\n")
    agents = root / "agents"
    agents.mkdir()
    (agents / "checker.md").write_text("---\nname: checker\ndescription: Checks.\n---\nCheck.\n")
    path = write_eval(
        root,
        {
            "cases": [twelve()],
            "scorers": [{"file": {"path": "out/count.txt", "equals": "{expected.words}"}}],
            "variants": [
                {"name": "plain"},
                {"name": "guess", "model": "scripted:job/guess.script.yaml"},
                {"name": "more", "skills_add": ["more-skills"]},
                {"name": "fewer", "skills_remove": ["word-stats"]},
                {"name": "eager", "disclosure": "eager"},
                {"name": "agents", "subagents": ["agents"]},
            ],
        },
    )
    result = run(path, tmp_path / "out")
    lines = {line["variant"]: line for line in result.lines}
    assert lines["plain"]["passed"] and lines["eager"]["passed"]
    assert not lines["guess"]["passed"] and lines["guess"]["steps"] == 1
    # Without the skill, its load fails and its tool is unknown: the count is never written.
    assert not lines["fewer"]["passed"]
    events = trace_events(lines["fewer"]["trace"])
    assert any("unknown skill" in str(e.get("message", {}).get("content", "")).lower() or
               "no skill" in str(e.get("message", {}).get("content", "")).lower()
               for e in events)  # fmt: skip
    assert "greeter" in system_prompt(lines["more"]["trace"])
    assert "greeter" not in system_prompt(lines["plain"]["trace"])
    assert "word-stats__tally" in first_tools(lines["eager"]["trace"])
    assert "word-stats__tally" not in first_tools(lines["plain"]["trace"])
    assert "checker" in fork_tool_text(lines["agents"]["trace"])
    assert "checker" not in fork_tool_text(lines["plain"]["trace"])
    assert [row.name for row in result.summary.rows] == list(lines)


def test_a_variants_model_settings_reach_its_job(tmp_path: Path) -> None:
    # A scripted model takes no settings: a real provider's do (no call is made here).
    root = eval_folder(tmp_path)
    path = write_eval(
        root,
        {
            "cases": [twelve()],
            "variants": [
                {
                    "name": "cold",
                    "model": "openai-compatible:tiny",
                    "model_options": {"base_url": "http://127.0.0.1:9/v1", "temperature": 0},
                }
            ],
        },
    )
    loaded = load_eval(path)
    job = loaded.job_for(loaded.variants[0], loaded.cases[0])
    assert job.model.name == "openai-compatible:tiny"
    assert job.model.temperature == 0 and job.model.base_url == "http://127.0.0.1:9/v1"
    path = write_eval(root, {"cases": [twelve()], "variants": [{"model_options": {"x": 1}}]})
    with pytest.raises(EvalError) as error:
        load_eval(path)
    assert "variants[0].model_options.x: unknown field 'x'" in str(error.value)


def test_model_settings_of_each_variant_reach_the_wire(tmp_path: Path) -> None:
    root = eval_folder(tmp_path)
    answer = {"content": '{"words": 12, "summary": "counted"}'}
    with ProviderServer({"*": [answer, answer]}) as server:
        wire = {"stream": False, "base_url": server.openai_url}
        model = "openai-compatible:tiny"
        path = write_eval(
            root,
            {
                "cases": [twelve()],
                "scorers": [{"json_path": {"path": "$.words", "equals": "{expected.words}"}}],
                "variants": [
                    {"name": "cold", "model": model, "model_options": {**wire, "temperature": 0}},
                    {"name": "warm", "model": model, "model_options": {**wire, "temperature": 0.7}},
                ],
                "concurrency": 1,
            },
        )
        for variant in ("cold", "warm"):  # one after the other: the bodies' order is known
            result = run(path, tmp_path / "out", variants=[variant])
            assert result.lines[-1]["passed"], result.lines
        temperatures = [body.get("temperature") for body in server.bodies()]
    assert temperatures == [0, 0.7]


def trace_events(path: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def system_prompt(trace: str) -> str:
    for event in trace_events(trace):
        message = event.get("message") or {}
        if message.get("role") == "system":
            return str(message["content"])
    raise AssertionError("no system prompt in the trace")


def first_tools(trace: str) -> list[str]:
    calls = [e for e in trace_events(trace) if e["type"] == "model_call"]
    return list(calls[0]["tools"])


def fork_tool_text(trace: str) -> str:
    """What the planner is told of its sub-agents (`fork`'s description, as the first
    request's tool schemas were recorded)."""
    calls = [e for e in trace_events(trace) if e["type"] == "model_call"]
    specs = calls[0]["tool_specs"]
    return str(next(spec["description"] for spec in specs if spec["name"] == "fork"))


def test_a_matrix_crosses_the_variants(tmp_path: Path) -> None:
    root = eval_folder(tmp_path)
    path = write_eval(
        root,
        {
            "cases": [twelve()],
            "variants": [
                {"name": "full"},
                {"name": "guess", "model": "scripted:job/guess.script.yaml"},
            ],
            "matrix": {"disclosure": ["progressive", "eager"]},
        },
    )
    loaded = load_eval(path)
    names = [v.title() for v in loaded.variants]
    assert names == [
        "full-progressive",
        "full-eager",
        "guess-progressive",
        "guess-eager",
    ]
    result = run(path, tmp_path / "out")
    assert len(result.lines) == 4
    by = {line["variant"]: line for line in result.lines}
    # Eager sends the skill's schema from the first request: more tokens than progressive
    # for the same decisions.
    eager = by["guess-eager"]["usage"]["total_tokens"]
    progressive = by["guess-progressive"]["usage"]["total_tokens"]
    assert eager > progressive


def test_repeat_concurrency_table_and_interval(tmp_path: Path) -> None:
    root = eval_folder(tmp_path)
    path = write_eval(
        root,
        {
            "cases": [twelve("twelve"), twelve("seven", 7)],
            "scorers": [{"json_path": {"path": "$.words", "equals": "{expected.words}"}}],
            "variants": [{"name": "guess", "model": "scripted:job/guess.script.yaml"}],
            "repeat": 3,
            "concurrency": 3,
        },
    )
    result = run(path, tmp_path / "out")
    assert len(result.lines) == 6
    row = result.summary.rows[0]
    assert (row.runs, row.passed) == (6, 3)
    low, high = row.interval
    assert (round(low, 3), round(high, 3)) == (0.188, 0.812)
    table = render_table(result.summary)
    assert "guess" in table and "3/6 50%" in table and "19%-81%" in table
    assert len(set(line["key"] for line in result.lines)) == 6


def test_the_wilson_interval() -> None:
    assert wilson(0, 10) == (0.0, pytest.approx(0.2775, abs=1e-4))
    low, high = wilson(10, 10)
    assert low == pytest.approx(0.7225, abs=1e-4) and high == pytest.approx(1.0)
    assert wilson(0, 0) == (0.0, 1.0)


def test_cases_from_csv_and_jsonl(tmp_path: Path) -> None:
    root = eval_folder(tmp_path)
    (root / "cases.csv").write_text("id,topic,expected.words\nfirst,words,12\nsecond,text,7\n")
    (root / "cases.jsonl").write_text(
        json.dumps({"id": "a", "topic": "flat", "expected.words": 12})
        + "\n\n"
        + json.dumps({"id": "b", "inputs": {"topic": "nested"}, "expected": {"words": 3}})
        + "\n"
    )
    for name in ("cases.csv", "cases.jsonl"):
        guess = {"name": "guess", "model": "scripted:job/guess.script.yaml"}
        words = {"json_path": {"path": "$.words", "equals": "{expected.words}"}}
        path = write_eval(root, {"cases": name, "variants": [guess], "scorers": [words]})
        result = run(path, tmp_path / f"out-{name}", fresh=True)
        passed = {line["case"]: line["passed"] for line in result.lines}
        assert passed == (
            {"first": True, "second": False} if name == "cases.csv" else {"a": True, "b": False}
        )
        asked = [system_and_task(line["trace"]) for line in result.lines]
        assert any("(text)" in task or "(nested)" in task for task in asked)


def system_and_task(trace: str) -> str:
    """The first user message of a run: its task."""
    for event in trace_events(trace):
        message = event.get("message") or {}
        if message.get("role") == "user":
            return str(message["content"])
    raise AssertionError("no task in the trace")


def test_one_budget_for_the_whole_eval(tmp_path: Path) -> None:
    root = eval_folder(tmp_path)
    path = write_eval(
        root,
        {
            "cases": [twelve(f"c{i}") for i in range(4)],
            "variants": [{"name": "guess", "model": "scripted:job/guess.script.yaml"}],
            "concurrency": 1,
            "budget": {"max_tokens": 7000},
        },
    )
    result = run(path, tmp_path / "out")
    statuses = [line["status"] for line in result.lines]  # in the order they ran
    # Each call reserves its output allowance (4,096 tokens) on the eval's budget: the first
    # run fits, and once the budget cannot cover a call, the runs end budget_exhausted.
    assert statuses[0] == "completed" and statuses[-1] == "budget_exhausted"
    spent = sum(line["usage"]["total_tokens"] for line in result.lines)
    assert spent <= 7000
    row = result.summary.rows[0]
    assert row.pass_rate == statuses.count("completed") / 4 < 1


def test_a_bad_eval_file_gets_every_problem_with_its_path(tmp_path: Path) -> None:
    root = eval_folder(tmp_path)
    path = write_eval(
        root,
        {
            "repeat": 0,
            "cases": [
                {"id": "a", "inputs": {"topc": "x"}},
                {"id": "a", "expected": {"words": 1}},
            ],
            "scorers": [
                {"contains": "x", "regex": "y"},
                {"file": {"path": "out/count.txt", "equals": "{expected.words}"}},
                {"python": "nowhere.py:f"},
            ],
            "variants": [
                {"name": "v", "disclosure": "lazy"},
                {"name": "w", "model": "scripted:none.yaml"},
            ],
            "surprise": 1,
        },
    )
    with pytest.raises(EvalError) as error:
        load_eval(path)
    text = str(error.value)
    # Structure first: every structural problem at once.
    assert "repeat: expected a number at least 1" in text
    assert "surprise:" in text
    assert "scorers[0]" in text and "exactly one kind" in text
    assert "variants[0].disclosure" in text
    assert "variants[1].model" in text and "does not exist" in text
    # Then, on a file whose structure is sound, the checks across fields, also all at once.
    path = write_eval(
        root,
        {
            "cases": [
                {"id": "a", "inputs": {"topc": "x"}},
                {"id": "a", "expected": {"words": 1}},
            ],
            "scorers": [
                {"file": {"path": "out/count.txt", "equals": "{expected.words}"}},
                {"python": "nowhere.py:f"},
            ],
            "variants": [{"name": "v"}, {"name": "v", "skills_add": ["job/skills"]}],
        },
    )
    with pytest.raises(EvalError) as error:
        load_eval(path)
    problems = [str(p) for p in error.value.problems]
    assert "cases[1].id: 'a' names two cases" in problems
    assert any(
        p.startswith("cases[0].inputs.topc: not an input of the job (did you mean 'topic'?)")
        for p in problems
    ), problems
    assert "scorers[0]: {expected.words}: case 'a' has no expected 'words'" in problems
    assert any(p.startswith("scorers[1].python:") and "does not exist" in p for p in problems)
    assert "variants[1]: two variants are named 'v'" in problems


def test_a_wrong_field_in_an_eval_file_is_named_in_the_users_words(tmp_path: Path) -> None:
    """A field that takes a list or a path: its problems say neither pydantic's branch tags
    nor the branch the value was not of."""
    eval_folder(tmp_path)
    inline = write_eval(tmp_path, {"cases": [{"id": "a", "inputz": {}}]})
    with pytest.raises(EvalError) as error:
        load_eval(inline)
    assert [str(p) for p in error.value.problems] == [
        "cases[0].inputz: unknown field 'inputz' (did you mean 'inputs'?); expected one of: "
        "id, inputs, expected, files, copies, scorers"
    ]
    number = write_eval(tmp_path, {"cases": 12}, name="n.eval.yaml")
    with pytest.raises(EvalError) as error:
        load_eval(number)
    assert [str(p) for p in error.value.problems] == [
        "cases: expected a list or a path, got the number 12"
    ]
    assert "function-after" not in str(error.value) and "list[" not in str(error.value)


def test_a_bad_job_is_reported_as_the_evals_problem(tmp_path: Path) -> None:
    root = eval_folder(tmp_path)
    path = root / "inline.eval.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "inline",
                "job": {
                    "name": "j",
                    "model": "scripted:job/guess.script.yaml",
                    "goal": "hi {inputs.nope}",
                },
                "cases": [{"id": "a"}],
            }
        )
    )
    with pytest.raises(EvalError) as error:
        load_eval(path)
    assert "job.goal" in str(error.value) and "nope" in str(error.value)


def test_the_command_exits_1_under_min_pass_and_2_on_a_bad_file(tmp_path: Path) -> None:
    root = eval_folder(tmp_path)
    write_eval(
        root,
        {
            "cases": [twelve("twelve"), twelve("seven", 7)],
            "scorers": [{"json_path": {"path": "$.words", "equals": "{expected.words}"}}],
            "variants": [{"name": "guess", "model": "scripted:job/guess.script.yaml"}],
        },
    )
    passing = orchestrator("eval", "test.eval.yaml", "--min-pass", "0.5", cwd=root)
    assert passing.returncode == 0, passing.stderr
    assert "guess" in passing.stdout and "1/2 50%" in passing.stdout
    failing = orchestrator("eval", "test.eval.yaml", "--min-pass", "0.75", "-q", cwd=root)
    assert failing.returncode == 1
    assert "variant guess: pass rate 50% is under --min-pass 75%" in failing.stderr
    # The second run found both runs done: it ran nothing and said so.
    assert "0 runs; 2 done earlier, skipped" in failing.stderr
    as_json = orchestrator("eval", "test.eval.yaml", "--json", "-q", "--fresh", cwd=root)
    summary = json.loads(as_json.stdout)
    assert summary["variants"][0]["pass_rate"] == 0.5
    assert summary["flips"] == []
    (root / "bad.eval.yaml").write_text("name: bad\njob: job/job.yaml\ncases: []\n")
    bad = orchestrator("eval", "bad.eval.yaml", cwd=root)
    assert bad.returncode == 2 and "cases: needs at least one case" in bad.stderr


def test_the_html_page_links_every_run_to_its_report(tmp_path: Path) -> None:
    root = eval_folder(tmp_path)
    check = {"file": {"path": "out/count.txt", "equals": "12"}}
    write_eval(root, {"cases": [twelve("a"), twelve("b", 3)], "scorers": [check]})
    done = orchestrator("eval", "test.eval.yaml", "--html", "page/eval.html", "-q", cwd=root)
    assert done.returncode == 0, done.stderr
    page = (root / "page" / "eval.html").read_text()
    assert "baseline" in page and "1/2" in page
    links = [part.split('"')[0] for part in page.split('href="')[1:]]
    assert len(links) == 2
    for link in links:
        report = (root / "page" / link).read_text()
        assert "<html" in report.lower() and "word-stats" in report


def test_a_case_cannot_write_and_a_check_cannot_read_outside_the_workspace(
    tmp_path: Path,
) -> None:
    root = eval_folder(tmp_path)
    (tmp_path / "secret.txt").write_text("do not read\n")
    path = write_eval(
        root,
        {
            "cases": [
                {"id": "escape", "files": {"../../../escape.txt": "x"}},
                {"id": "absolute", "files": {str(tmp_path / "absolute.txt"): "x"}},
                {"id": "reader", "files": {"input.txt": "a b"}},
            ],
            "scorers": [{"file": {"path": "../../../../secret.txt", "contains": "do not"}}],
            "variants": [{"name": "guess", "model": "scripted:job/guess.script.yaml"}],
        },
    )
    result = run(path, tmp_path / "out")
    lines = {line["case"]: line for line in result.lines}
    for case in ("escape", "absolute"):
        assert lines[case]["status"] == "error" and not lines[case]["done"]
        assert "is outside the workspace" in lines[case]["error"]
    assert not list(tmp_path.rglob("escape.txt")) and not (tmp_path / "absolute.txt").exists()
    reader = scores_of(lines["reader"])["file ../../../../secret.txt"]
    assert not reader["passed"] and "outside the run's workspace" in reader["reason"]


def test_a_runs_model_cannot_rewrite_what_decides_the_eval(tmp_path: Path) -> None:
    """Even in a shared workspace that holds them, the eval file, the results and the
    checks' code are read-only to the model."""
    root = eval_folder(tmp_path)
    (root / "checks.py").write_text("def ok(run):\n    return True\n")
    writes = [
        {"name": "files__write_file", "arguments": {"path": name, "content": "pwned"}}
        for name in ("shared.eval.yaml", "out/results.jsonl", "checks.py", "out/traces/x.jsonl")
    ]
    script = {"goal": [{"tool_calls": [{"name": "load_skill", "arguments": {"name": "files"}}]},
                       {"tool_calls": writes}, {"content": "done"}]}  # fmt: skip
    (root / "attack.script.yaml").write_text(yaml.safe_dump(script))
    job = {
        "name": "attack",
        "model": "scripted:attack.script.yaml",
        "goal": "Do it.",
        "permissions": {"workspace": "."},
        "skills": [],
    }
    path = root / "shared.eval.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "shared",
                "job": job,
                "cases": [{"id": "a"}],
                "scorers": [{"python": "checks.py:ok"}],
                "workspace": "shared",
            }
        )
    )
    before = path.read_text()
    result = run(path, root / "out")
    line = result.lines[0]
    assert path.read_text() == before
    assert (root / "checks.py").read_text().startswith("def ok")
    assert not (root / "out" / "traces" / "x.jsonl").exists()
    assert "pwned" not in (root / "out" / "results.jsonl").read_text()
    refusals = [
        e["message"]
        for e in trace_events(line["trace"])
        if e.get("message", {}).get("role") == "tool" and e["message"].get("is_error")
    ]
    assert len(refusals) == 4, refusals


WORDS = {"json_path": {"path": "$.words", "equals": "{expected.words}"}}


def test_a_line_separator_in_an_answer_cannot_hide_a_failed_run(tmp_path: Path) -> None:
    """U+2028 and U+2029 are written as they are in a results line: reading the file back
    must not split the line there, or the failed runs vanish and the eval passes its gate."""
    root = eval_folder(tmp_path)
    right = {"content": '{"words": 12}'}
    wrong = {"content": '{"words": 7, "note": "one\u2028two\u2029three"}'}
    with ProviderServer({"*": [right, wrong, right, wrong]}) as server:
        wire = {"stream": False, "base_url": server.openai_url}
        variant = {"name": "wire", "model": "openai-compatible:tiny", "model_options": wire}
        spec = {"cases": [twelve("a"), twelve("b")], "scorers": [WORDS], "variants": [variant]}
        write_eval(root, {**spec, "concurrency": 1})
        done = orchestrator("eval", "test.eval.yaml", "--min-pass", "0.9", "-q", cwd=root)
        again = orchestrator("eval", "test.eval.yaml", "--min-pass", "0.9", "-q", cwd=root)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1/2 50%" in done.stdout
    assert "variant wire: pass rate 50% is under --min-pass 90%" in done.stderr
    # Read again on resume: both runs are done, the failed one still counts.
    assert again.returncode == 1 and "1/2 50%" in again.stdout
    assert "0 runs; 2 done earlier, skipped" in again.stderr


def test_a_damaged_results_line_is_an_error_naming_the_file_and_line(tmp_path: Path) -> None:
    root = eval_folder(tmp_path)
    guess = {"name": "guess", "model": "scripted:job/guess.script.yaml"}
    write_eval(
        root, {"cases": [twelve("a"), twelve("b", 7)], "scorers": [WORDS], "variants": [guess]}
    )
    first = orchestrator("eval", "test.eval.yaml", "--out", "out", "-q", cwd=root)
    assert first.returncode == 0, first.stderr
    results_file = root / "out" / "results.jsonl"
    lines = results_file.read_text(encoding="utf-8").split("\n")
    lines[1] = lines[1][: len(lines[1]) // 2]  # the failed run's line, cut in half
    results_file.write_text("\n".join(lines), encoding="utf-8")
    again = orchestrator("eval", "test.eval.yaml", "--out", "out", "--min-pass", "0.9", cwd=root)
    assert again.returncode == 2, again.stdout + again.stderr
    assert f"{Path('out') / 'results.jsonl'}, line 2: not JSON" in again.stderr
    assert "Traceback" not in again.stderr


def test_a_case_file_with_a_long_field_or_a_line_separator_reads_whole(tmp_path: Path) -> None:
    """A field past csv's default limit (131,072 characters), and a field holding U+2028."""
    root = eval_folder(tmp_path)
    long_text = "word " * 40_000  # 200,000 characters
    (root / "cases.csv").write_text(
        f'id,topic,expected.words\nlong,"{long_text}",12\nodd,"one\u2028two\u2029three",7\n',
        encoding="utf-8",
    )
    (root / "cases.jsonl").write_text(
        json.dumps({"id": "odd", "topic": "one\u2028two"}, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    for name in ("cases.csv", "cases.jsonl"):
        done = orchestrator("eval", write_eval(root, {"cases": name}), "--case", "odd", cwd=root)
        assert done.returncode == 0, done.stderr
        assert "1/1 100%" in done.stdout
    loaded = load_eval(write_eval(root, {"cases": "cases.csv"}))
    topics = {case.id: case.inputs["topic"] for case in loaded.cases}
    assert topics == {"long": long_text, "odd": "one\u2028two\u2029three"}


def deep(levels: int = 100_000) -> str:
    return "[" * levels + "]" * levels


def test_a_cases_line_nested_too_deeply_is_an_error_naming_it(tmp_path: Path) -> None:
    root = eval_folder(tmp_path)
    (root / "cases.jsonl").write_text(
        '{"id": "a"}\n{"id": "b", "inputs": {"topic": ' + deep() + "}}\n", encoding="utf-8"
    )
    write_eval(root, {"cases": "cases.jsonl"})
    done = orchestrator("eval", "test.eval.yaml", cwd=root)
    assert done.returncode == 2, done.stderr
    assert "cases (cases.jsonl line 2): the JSON is nested too deeply" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_judges_reply_nested_too_deeply_scores_0_and_says_why() -> None:
    from orchestrator.eval.judge import parse_verdict

    score, reason = parse_verdict('{"score": 1, "reason": ' + deep() + "}")
    assert score == 0.0 and "not the JSON asked for" in reason


def test_a_changed_check_runs_the_eval_again(tmp_path: Path) -> None:
    """Results made under the old checks do not answer the new ones."""
    root = eval_folder(tmp_path)  # the job's own model: five model calls
    write_eval(root, {"cases": [twelve("a")], "scorers": [{"steps": {"max": 10}}]})
    first = orchestrator("eval", "test.eval.yaml", "--min-pass", "1", "-q", cwd=root)
    assert first.returncode == 0 and "1/1 100%" in first.stdout, first.stderr
    write_eval(root, {"cases": [twelve("a")], "scorers": [{"steps": {"max": 2}}]})
    changed = orchestrator("eval", "test.eval.yaml", "--min-pass", "1", "-q", cwd=root)
    assert changed.returncode == 1, changed.stdout + changed.stderr
    assert "0/1 0%" in changed.stdout
    assert "1 run done earlier was made by a changed eval (its checks changed)" in changed.stderr
    assert "eval test: 1 run;" in changed.stderr
    # Unchanged since: the new result stands.
    again = orchestrator("eval", "test.eval.yaml", "--min-pass", "1", "-q", cwd=root)
    assert again.returncode == 1 and "0/1 0%" in again.stdout
    assert "0 runs; 1 done earlier, skipped" in again.stderr and "changed" not in again.stderr
    # A changed case, and a changed job file, run again too.
    write_eval(root, {"cases": [twelve("a", 7)], "scorers": [{"steps": {"max": 2}}]})
    job = root / "job" / "job.yaml"
    job.write_text(job.read_text().replace("max_tokens: 60000", "max_tokens: 60001"))
    both = orchestrator("eval", "test.eval.yaml", "-q", cwd=root)
    assert "(the case changed, the job changed)" in both.stderr, both.stderr


def test_no_tool_errors_fails_a_run_whose_tool_raised_and_allows_what_it_is_told(
    tmp_path: Path,
) -> None:
    root = eval_folder(tmp_path)
    (root / "job" / "bad.script.yaml").write_text(
        yaml.safe_dump(
            {
                "goal": [
                    {"tool_calls": [{"name": "load_skill", "arguments": {"name": "word-stats"}}]},
                    {"tool_calls": [{"name": "word-stats__nope", "arguments": {}}]},
                    {"content": "done"},
                ]
            }
        )
    )
    path = write_eval(
        root,
        {
            # "gone" has no input.txt: the skill's tool raises (FileNotFoundError).
            "cases": [twelve("twelve"), {"id": "gone"}],
            "scorers": [
                {"no_tool_errors": True},
                {"name": "one allowed", "no_tool_errors": {"allow": 1}},
                {"name": "tally's own", "no_tool_errors": {"ignore": ["word-stats__tally"]}},
            ],
            "variants": [
                {"name": "full"},
                {"name": "unknown", "model": "scripted:job/bad.script.yaml"},
            ],
        },
    )
    result = run(path, tmp_path / "out")
    lines = {line["key"]: {s["name"]: s for s in line["scores"]} for line in result.lines}
    clean = lines["full/twelve/1"]
    assert (
        clean["no_tool_errors"]["passed"] and clean["no_tool_errors"]["reason"] == "no tool errors"
    )
    raised = lines["full/gone/1"]
    assert not raised["no_tool_errors"]["passed"]
    reason = raised["no_tool_errors"]["reason"]
    assert reason.startswith("1 tool error (at most 0): word-stats__tally [tool_error]")
    assert "No such file" in reason
    assert raised["one allowed"]["passed"] and raised["tally's own"]["passed"]
    # A call of a tool that does not exist is a tool error too, whoever ignores tally's.
    unknown = lines["unknown/twelve/1"]
    assert "word-stats__nope [unknown_tool]" in unknown["no_tool_errors"]["reason"]
    assert not unknown["tally's own"]["passed"]
    assert raised["no_tool_errors"]["kind"] == "no_tool_errors"
