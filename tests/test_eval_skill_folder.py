"""`orchestrator eval SKILL_FOLDER`: a skill's own eval files (skill-creator's layout) run as
evals. The model is a rule-based one served over the real OpenAI wire (tests/provider_server.py):
it loads the skill when the query names a keyword, so the expected precision and recall are
known in advance; every other part (the catalog, load_skill, the trace, the checks, the judge,
record and replay) runs for real."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator, Mapping
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from cli_process import orchestrator
from provider_server import ProviderServer

from orchestrator.eval import EvalError, EvalOptions, EvalResult, run_eval_sync
from orchestrator.eval.skill_folder import (
    SkillEvalOptions,
    find_eval_files,
    read_evals,
    read_triggers,
    trigger_eval,
    with_without_eval,
)

DATA = Path(__file__).parent / "data" / "skill_evals"
MODEL = "openai-compatible:rule"
LOAD = {"tool_calls": [{"name": "load_skill", "arguments": {"name": "csv-tools"}}]}
QUERIES = [
    ("Summarise sales.csv by region", True),
    ("Filter the csv rows where price > 10", True),
    ("Merge two CSV files on their id column", True),
    ("Total the columns of this spreadsheet export", True),  # no keyword: missed
    ("What does CSV stand for?", False),  # the keyword, a near miss: a false trigger
    ("Write a haiku about autumn", False),
    ("Fix the failing unit test", False),
    ("Translate this paragraph to French", False),
]


def _text(message: Mapping[str, Any]) -> str:
    return json.dumps(message.get("content"))


def route(body: Mapping[str, Any]) -> str:
    """The model's rule: a judge grades by the answer; an agent loads csv-tools when its task
    names CSV, or a spreadsheet while the catalog's description does (and answers right once
    it has the skill); otherwise it answers at once."""
    messages = body["messages"]
    system = " ".join(_text(m) for m in messages if m["role"] == "system")
    if "You grade an answer" in system:
        return "pass" if "## Answer\\nRight" in _text(messages[-1]) else "fail"
    task = _text(next(m for m in messages if m["role"] == "user")).lower()
    if any(m["role"] == "tool" for m in messages):
        return "right"
    if "csv-tools" not in system:
        return "guess"
    if "csv" in task or ("spreadsheet" in task and "spreadsheet" in system.lower()):
        return "load"
    return "guess"


SCRIPT = {
    "load": [LOAD] * 200,
    "guess": [{"content": "Guessed: 42."}] * 200,
    "right": [{"content": "Right: the totals are in out/totals.txt."}] * 200,
    "pass": [{"content": '{"score": 1, "reason": "says it right"}'}] * 200,
    "fail": [{"content": '{"score": 0, "reason": "a guess"}'}] * 200,
}


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ProviderServer]:
    with ProviderServer(SCRIPT, route=route) as served:
        monkeypatch.setenv("OPENAI_BASE_URL", served.openai_url)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        yield served


def skill_folder(root: Path, queries: list[tuple[str, bool]] = QUERIES) -> Path:
    """A skill folder in skill-creator's layout, with both eval files and an input file."""
    skill = root / "skills" / "csv-tools"
    (skill / "evals" / "files").mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: csv-tools\ndescription: Read, filter and summarise CSV files.\n---\n\n"
        "Read the file with the csv module; total each column; say the totals.\n"
    )
    rows = [{"query": q, "should_trigger": t} for q, t in queries]
    (skill / "evals" / "trigger_eval.json").write_text(json.dumps(rows, indent=1))
    (skill / "evals" / "files" / "sales.csv").write_bytes(b"region,total\nnorth,3\nsouth,4\n")
    cases = {
        "skill_name": "csv-tools",
        "evals": [
            {
                "id": 1,
                "prompt": "Total the columns of sales.csv",
                "expected_output": "The totals of each column",
                "files": ["evals/files/sales.csv"],
                "expectations": ["The answer gives the totals"],
            },
            {
                "id": 2,
                "prompt": "What is the sum of the csv's total column?",
                "expected_output": "7",
                "files": [],
                "expectations": ["The answer is 7", "The answer says how it was found"],
            },
        ],
    }
    (skill / "evals" / "evals.json").write_text(json.dumps(cases, indent=1))
    return skill


def run_trigger(skill: Path, out: Path, **given: Any) -> EvalResult:
    options = SkillEvalOptions(out=out, models=[MODEL], catalog=[], **given)
    made = trigger_eval(find_eval_files(skill), options)
    return run_eval_sync(made.loaded, EvalOptions(out=out / "trigger"))


def test_a_trigger_eval_finds_the_precision_and_recall_the_rule_gives(
    tmp_path: Path, server: ProviderServer
) -> None:
    skill = skill_folder(tmp_path)
    result = run_trigger(skill, tmp_path / "out")
    (row,) = result.summary.rows
    assert row.trigger is not None
    assert (row.trigger.fired_right, row.trigger.missed) == (3, 1)
    assert (row.trigger.fired_wrong, row.trigger.held) == (1, 3)
    assert row.trigger.precision == 0.75 and row.trigger.recall == 0.75
    assert row.trigger.accuracy == 0.75
    assert row.trigger.missed_queries == ["Total the columns of this spreadsheet export"]
    assert row.trigger.false_queries == ["What does CSV stand for?"]
    # Each run stopped as soon as the question was answered: one request to the model each,
    # the run that loaded the skill ended by the eval, without asking the model again.
    assert len(server.requests) == len(QUERIES)
    loaded = [line for line in result.lines if line["trigger"]["fired"]]
    assert {line["steps"] for line in loaded} == {2}
    assert all("ends here" in line["output"] for line in loaded)
    as_json = result.summary.as_dict()["variants"][0]["trigger"]
    assert as_json["precision"] == 0.75 and as_json["accuracy_interval"][0] < 0.75


def test_catalog_sizes_and_a_rewritten_description_are_variants(
    tmp_path: Path, server: ProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    skill = skill_folder(tmp_path)
    monkeypatch.chdir(tmp_path)  # `out` as the command line gives it: relative
    other = tmp_path / "mine" / "notes"
    other.mkdir(parents=True)
    (other / "SKILL.md").write_text("---\nname: notes\ndescription: Keep meeting notes.\n---\nx\n")
    better = "Read, filter and summarise CSV files and spreadsheet exports."
    options = SkillEvalOptions(
        out=Path("out"),
        models=[MODEL],
        catalog=[tmp_path / "mine"],
        catalogs=["all", "alone"],
        descriptions=[better],
    )
    made = trigger_eval(find_eval_files(skill), options)
    titles = [variant.title() for variant in made.loaded.variants]
    assert titles == [
        "all-as-written",
        "all-description-1",
        "alone-as-written",
        "alone-description-1",
    ]
    result = run_eval_sync(made.loaded, EvalOptions(out=tmp_path / "out" / "trigger"))
    recall = {row.name: row.trigger.recall for row in result.summary.rows if row.trigger}
    assert recall == {
        "all-as-written": 0.75,
        "all-description-1": 1.0,
        "alone-as-written": 0.75,
        "alone-description-1": 1.0,
    }
    systems = [_text(b["messages"][0]) for b in server.bodies()]
    assert any("notes" in s and "Keep meeting notes" in s for s in systems)
    assert any(
        "Keep meeting notes" not in s and "data" not in s.split("csv-tools")[0] for s in systems
    )
    # The skill's own folder is never written to: the rewrite is a copy.
    assert "spreadsheet" not in (skill / "SKILL.md").read_text()


def test_with_and_without_the_skill_the_lift_and_a_benchmark_file(
    tmp_path: Path, server: ProviderServer
) -> None:
    skill = skill_folder(tmp_path)
    made = with_without_eval(
        find_eval_files(skill), SkillEvalOptions(out=tmp_path / "out", models=[MODEL], catalog=[])
    )
    result = run_eval_sync(made.loaded, EvalOptions(out=tmp_path / "out" / "evals"))
    rows = {row.name: row for row in result.summary.rows}
    assert (rows["with_skill"].passed, rows["without_skill"].passed) == (2, 0)
    assert rows["with_skill"].lift is not None
    lift, low, high = rows["with_skill"].lift
    assert lift == 1.0 and 0 < low < 1.0 and high == 1.0
    assert result.summary.flips and {f.case for f in result.summary.flips} == {"1", "2"}
    # The judge's spend is its own, and it was told what the eval expects.
    assert all(line["judge"]["usage"]["total_tokens"] > 0 for line in result.lines)
    judged = [b for b in server.bodies() if "You grade an answer" in json.dumps(b)]
    assert len(judged) == 6 and "The totals of each column" in json.dumps(judged)
    # The case's file was copied in, bytes as they are.
    first = next(line for line in result.lines if line["key"] == "with_skill/1/1")
    copied = Path(first["workspace"]) / "evals" / "files" / "sales.csv"
    assert copied.read_bytes() == b"region,total\nnorth,3\nsouth,4\n"
    benchmark = json.loads((tmp_path / "out" / "evals" / "benchmark.json").read_text())
    summary = benchmark["run_summary"]
    # Pass rates count the expectations alone: a run without the skill that completes but
    # meets none of them scores 0, as skill-creator's graders score it; the status is apart.
    assert summary["with_skill"]["pass_rate"]["mean"] == 1.0
    by_case = {
        run["eval_id"]: run["result"]
        for run in benchmark["runs"]
        if run["configuration"] == "without_skill"
    }
    assert {case: r["completed"] for case, r in by_case.items()} == {"1": True, "2": True}
    assert {case: (r["passed"], r["total"]) for case, r in by_case.items()} == {
        "1": (0, 1),
        "2": (0, 2),
    }
    assert summary["without_skill"]["pass_rate"]["mean"] == 0.0  # 0.42 with the status counted
    assert summary["delta"]["pass_rate"] == "+1.00"
    assert {run["configuration"] for run in benchmark["runs"]} == {"with_skill", "without_skill"}
    assert all(
        e["text"] != "status completed" for run in benchmark["runs"] for e in run["expectations"]
    )
    metadata = benchmark["metadata"]
    assert metadata["runs_per_configuration"] == 1  # runs of each eval, not of all evals
    assert metadata["skill_path"] == str(skill.resolve())
    assert metadata["executor_model"] == MODEL


def test_a_published_trigger_file_parses_unchanged() -> None:
    # Copied as published in anthropics/claude-plugins-official (Apache-2.0; see the LICENSE
    # note beside it): the math-olympiad skill's trigger eval.
    queries = read_triggers(DATA / "math-olympiad" / "evals" / "trigger_eval.json")
    assert len(queries) == 20
    assert sum(q.should_trigger for q in queries) == 10
    assert queries[0].text.startswith("Solve this IMO problem")
    # skill-creator's other layout: {"evals": [{"prompt", "should_trigger"}]}.
    other = read_triggers(DATA / "layouts" / "eval_queries.json")
    assert [q.text for q in other][:1] == ["Improve this SKILL.md description"]
    evals = read_evals(DATA / "layouts" / "evals.json")
    assert evals.skill_name == "example-skill" and evals.evals[0].files == [
        "evals/files/sample1.pdf"
    ]


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('[{"query": "a", "should_trigger": "yes"}]', "[0].should_trigger"),
        ('[{"should_trigger": true}]', "[0]"),
        ('{"evals": [{"prompt": "a"}]}', "evals[0].should_trigger"),
        ('{"queries": []}', "evals"),
        ("[{]", "file"),
    ],
)
def test_a_trigger_file_it_cannot_read_names_the_file_and_the_field(
    tmp_path: Path, text: str, field: str
) -> None:
    path = tmp_path / "trigger_eval.json"
    path.write_text(text)
    with pytest.raises(EvalError) as caught:
        read_triggers(path)
    assert str(path) in str(caught.value)
    assert [p.path for p in caught.value.problems][0] == field


def test_an_evals_file_it_cannot_read_names_the_file_and_the_field(tmp_path: Path) -> None:
    path = tmp_path / "evals.json"
    path.write_text(json.dumps({"skill_name": "x", "evals": [{"id": 1, "expectations": "no"}]}))
    with pytest.raises(EvalError) as caught:
        read_evals(path)
    paths = {p.path for p in caught.value.problems}
    assert {"evals[0].prompt", "evals[0].expectations"} <= paths
    assert str(path) in str(caught.value)


def test_the_command_records_a_trigger_eval_and_replays_it_offline_in_ci(
    tmp_path: Path, server: ProviderServer
) -> None:
    skill = skill_folder(tmp_path)
    (tmp_path / "none").mkdir()
    env = {"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": ""}
    common = [skill, "-m", MODEL, "--catalog", tmp_path / "none", "--only", "trigger", "-q"]
    recorded = orchestrator("eval", *common, "--out", "a", "--record", "rec", cwd=tmp_path, env=env)
    assert recorded.returncode == 0, recorded.stderr
    assert "precision" in recorded.stdout and "75%" in recorded.stdout
    assert "What does CSV stand for?" in recorded.stdout
    requests = len(server.requests)
    # Offline: no server reachable, every model call answered by the recording.
    offline = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": ""}
    replayed = orchestrator(
        "eval",
        *common,
        "--out",
        "b",
        "--replay",
        "rec",
        "--min-precision",
        "0.9",
        cwd=tmp_path,
        env=offline,
    )
    assert len(server.requests) == requests
    assert replayed.returncode == 1, replayed.stderr
    assert "precision 75% is under --min-precision 90%" in replayed.stderr
    assert "diverged" not in replayed.stdout
    again = orchestrator(
        "eval",
        *common,
        "--out",
        "b",
        "--replay",
        "rec",
        "--min-recall",
        "0.7",
        cwd=tmp_path,
        env=offline,
    )
    assert again.returncode == 0, again.stderr
    assert "8 done earlier, skipped" in again.stderr


def test_skills_check_mentions_the_eval_files_and_whether_they_parse(tmp_path: Path) -> None:
    skill = skill_folder(tmp_path)
    shutil.copytree(DATA / "math-olympiad", tmp_path / "skills" / "math-olympiad")
    (skill / "evals" / "evals.json").write_text('{"evals": [{"id": 1}]}')
    checked = orchestrator("skills", "check", tmp_path / "skills", cwd=tmp_path)
    out = checked.stdout
    assert "evals/trigger_eval.json: 20 trigger queries (10 should load it)" in out
    assert "evals/trigger_eval.json: 8 trigger queries (4 should load it)" in out
    assert "evals/evals.json: cannot be read: evals[0].prompt" in out
    assert checked.returncode == 1


def test_a_changed_file_anywhere_in_the_skill_folder_makes_its_results_stale(
    tmp_path: Path,
) -> None:
    from orchestrator.eval.skill_folder import _skill_digest

    skill = tmp_path / "notes"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: notes\ndescription: Notes.\n---\nBody.\n")
    (skill / "tools.py").write_text("# one\n")
    (skill / "scripts" / "run.sh").write_text("echo one\n")
    first = _skill_digest(skill)
    (skill / "tools.py").write_text("# two\n")
    second = _skill_digest(skill)
    (skill / "scripts" / "run.sh").write_text("echo two\n")
    third = _skill_digest(skill)
    (skill / "__pycache__").mkdir()
    (skill / "__pycache__" / "tools.cpython-311.pyc").write_bytes(b"\0")
    assert len({first, second, third}) == 3
    assert _skill_digest(skill) == third  # what Python leaves behind is not the skill


TOTAL_TOOL = '''
from orchestrator import tool


@tool
def total(path: str) -> str:
    """Total each column of a CSV file.

    Args:
        path: The file.
    """
    return "totals: 7"
'''
CALL = {"tool_calls": [{"name": "csv-tools__total", "arguments": {"path": "sales.csv"}}]}


def eager_route(body: Mapping[str, Any]) -> str:
    """The same rule, but where the skill's tool is in the tools array (eager disclosure) the
    model calls it at once instead of loading the skill."""
    tools = [t["function"]["name"] for t in body.get("tools") or []]
    decision = route(body)
    return "call" if decision == "load" and "csv-tools__total" in tools else decision


def test_an_eager_trigger_counts_a_call_of_the_skills_tool_as_a_trigger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    skill = skill_folder(tmp_path)
    (skill / "tools.py").write_text(TOTAL_TOOL)
    with ProviderServer({**SCRIPT, "call": [CALL] * 200}, route=eager_route) as served:
        monkeypatch.setenv("OPENAI_BASE_URL", served.openai_url)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        result = run_trigger(skill, tmp_path / "out", disclosures=["progressive", "eager"])
    rows = {row.name: row for row in result.summary.rows}
    assert set(rows) == {"progressive", "eager"}
    for row in rows.values():
        assert row.trigger is not None
        counts = row.trigger
        assert (counts.fired_right, counts.missed, counts.fired_wrong, counts.held) == (3, 1, 1, 3)
    eager = [line for line in result.lines if line["variant"] == "eager"]
    fired = [line for line in eager if line["trigger"]["fired"]]
    assert len(fired) == 4
    # Eagerly, no load_skill: the call of the skill's own tool is what triggered, and the
    # run ended right after its result.
    for line in fired:
        assert line["skills_loaded"] == [] and line["tools_called"] == ["csv-tools__total"]
        assert line["steps"] == 2 and "ends here" in line["output"]
    progressive = [line for line in result.lines if line["variant"] == "progressive"]
    assert all(
        "csv-tools__total" not in line["tools_called"]
        for line in progressive
        if line["trigger"]["fired"]
    )


class Tables(HTMLParser):
    """The tables of a page, each a list of rows of cell texts, and its links."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.headings: list[str] = []
        self.links: list[str] = []
        self._cell: list[str] | None = None
        self._heading: list[str] | None = None
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag in ("h1", "h2"):
            self._heading = []
        elif tag == "a":
            self.links += [value or "" for name, value in attrs if name == "href"]

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag in ("h1", "h2") and self._heading is not None:
            self.headings.append("".join(self._heading).strip())
            self._heading = None

    def handle_data(self, data: str) -> None:
        for part in (self._cell, self._heading):
            if part is not None:
                part.append(data)


def test_the_html_page_of_a_skill_folder_names_the_trigger_figures(
    tmp_path: Path, server: ProviderServer
) -> None:
    skill = skill_folder(tmp_path)
    (tmp_path / "none").mkdir()
    env = {"OPENAI_BASE_URL": server.openai_url, "OPENAI_API_KEY": ""}
    done = orchestrator(
        "eval",
        skill,
        "-m",
        MODEL,
        "--catalog",
        tmp_path / "none",
        "--html",
        "pages/eval.html",
        "--out",
        "out",
        "-q",
        cwd=tmp_path,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    trigger_page = tmp_path / "pages" / "eval-csv-tools-trigger.html"
    evals_page = tmp_path / "pages" / "eval-csv-tools-evals.html"
    assert f"page: {Path('pages') / trigger_page.name}" in done.stderr
    parsed = Tables(trigger_page.read_text())
    assert parsed.headings[0] == "eval csv-tools-trigger"
    head, row = parsed.tables[0]
    figures = dict(zip(head, row, strict=True))
    assert figures["variant"] == "trigger"
    assert (figures["precision"], figures["recall"]) == ("75%", "75%")
    assert figures["accuracy"] == "6/8 75%" and figures["95% interval"] == "41%-93%"
    # The queries that misfired, each way, as the text table names them.
    assert "Did not load when it should (trigger)" in parsed.headings
    assert "Loaded when it should not (trigger)" in parsed.headings
    runs = parsed.tables[-1]
    assert len(runs) == 1 + 8 and len(parsed.links) == 8
    assert all((trigger_page.parent / link).is_file() for link in parsed.links)
    # The with/without page has its lift over the baseline.
    head, with_skill, without = Tables(evals_page.read_text()).tables[0]
    lift = head.index("lift over without_skill")
    assert with_skill[0] == "with_skill" and with_skill[lift].startswith("+100%")
    assert without[lift] == "-"


def test_a_skill_folders_recording_replays_after_the_folder_moved(
    tmp_path: Path, server: ProviderServer
) -> None:
    """The skill's folder is named in what its load returns ("Folder: ..."): a recording
    made in one checkout replays in another, as a skill author's CI needs."""
    skill = skill_folder(tmp_path / "here")
    options = SkillEvalOptions(out=tmp_path / "out", models=[MODEL], catalog=[])
    made = with_without_eval(find_eval_files(skill), options)
    run_eval_sync(made.loaded, EvalOptions(out=tmp_path / "a", record=tmp_path / "rec"))
    moved = tmp_path / "there" / "skills" / "csv-tools"
    shutil.copytree(skill, moved)
    shutil.rmtree(tmp_path / "here")
    made = with_without_eval(find_eval_files(moved), options)
    replayed = run_eval_sync(made.loaded, EvalOptions(out=tmp_path / "b", replay=tmp_path / "rec"))
    assert replayed.summary.divergences == [], replayed.summary.divergences[0]["divergence"]
    assert [row.passed for row in replayed.summary.rows] == [2, 0]


def test_a_misspelt_key_in_evals_json_is_named_beside_the_missing_field(tmp_path: Path) -> None:
    path = tmp_path / "evals.json"
    path.write_text(json.dumps({"evals": [{"id": 1, "promt": "Sum the column."}]}))
    with pytest.raises(EvalError) as raised:
        read_evals(path)
    assert [str(p) for p in raised.value.problems] == [
        "evals[0].prompt: required, but missing (is 'promt' it, misspelt?)"
    ]


def test_a_scripted_model_given_on_the_command_line_is_read_from_the_working_folder(
    tmp_path: Path,
) -> None:
    """`-m scripted:FILE` names a file from where the command runs, not from the evals
    folder the made eval is read from."""
    skill = skill_folder(tmp_path)
    (tmp_path / "script.yaml").write_text(json.dumps({"*": [{"content": "No skill needed."}]}))
    done = orchestrator(
        "eval",
        skill,
        "-m",
        "scripted:script.yaml",
        "--only",
        "trigger",
        "--out",
        "out",
        cwd=tmp_path,
    )
    assert "cannot read" not in done.stderr and "No such file" not in done.stderr, done.stderr
    lines = [
        json.loads(x)
        for x in (tmp_path / "out").rglob("results.jsonl").__next__().read_text().splitlines()
    ]
    assert lines and all(line["status"] == "completed" for line in lines), lines
