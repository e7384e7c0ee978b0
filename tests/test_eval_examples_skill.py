"""examples/evals/data-skill/: a trigger eval and a with/without eval of the built-in `data`
skill, in skill-creator's layout, kept outside the skill's folder (`--triggers-file`,
`--evals-file`), with their recordings (examples/evals/recordings/data-skill/).

The recordings were made against a rule-based model served over the real OpenAI wire on
127.0.0.1 (`route` below): it loads `data` when a query names a data file (csv, tsv, json),
then totals the file with `data__aggregate` and answers with the tool's figure; without the
skill it guesses. The first test replays the committed recordings offline, as a skill
author's CI does; the second records afresh against the rule model and finds the same
figures, so the recordings are what the rule makes (to make them again: the second test's
`--record` folder, copied over the committed one). The figures asserted are those the runs
made, each checked against the per-query and per-case lines it is computed from.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cli_process import orchestrator
from provider_server import ProviderServer

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "evals" / "data-skill"
RECORDINGS = REPO / "examples" / "evals" / "recordings" / "data-skill"
SKILL = REPO / "orchestrator" / "_builtin" / "skills" / "data"
MODEL = "openai-compatible:rule"
FILES = ["--triggers-file", EXAMPLE / "trigger_eval.json", "--evals-file", EXAMPLE / "evals.json"]


def _text(message: Mapping[str, Any]) -> str:
    return json.dumps(message.get("content"))


def route(body: Mapping[str, Any]) -> str:
    """The rule model (see the module doc)."""
    messages = body["messages"]
    system = " ".join(_text(m) for m in messages if m["role"] == "system")
    if "You grade an answer" in system:
        return "pass" if "(sum of amount)" in _text(messages[-1]) else "fail"
    task = _text(next(m for m in messages if m["role"] == "user")).lower()
    called = [c["function"]["name"] for m in messages for c in m.get("tool_calls") or []]
    region = "region" in task
    if called and called[-1] == "data__aggregate":
        return "region" if region else "total"
    if called and called[-1] == "load_skill" and "# Data" in _text(messages[-1]):
        return "by-region" if region else "sum"
    if "- data:" in system and any(word in task for word in ("csv", "tsv", "json")):
        return "load"
    return "guess"


def _aggregate(**arguments: Any) -> dict[str, Any]:
    call = {"name": "data__aggregate", "arguments": {"path": "files/sales.csv", **arguments}}
    return {"tool_calls": [call]}


SCRIPT = {
    "load": [{"tool_calls": [{"name": "load_skill", "arguments": {"name": "data"}}]}] * 50,
    "by-region": [_aggregate(metrics=["sum:amount"], group_by=["region"])] * 50,
    "sum": [_aggregate(metrics=["sum:amount"])] * 50,
    "region": [{"content": "north sold the most: 1200 (sum of amount)."}] * 50,
    "total": [{"content": "The total amount is 1950 (sum of amount)."}] * 50,
    "guess": [{"content": "Probably about 1000."}] * 50,
    "pass": [{"content": '{"score": 1, "reason": "the figure the tool gave"}'}] * 50,
    "fail": [{"content": '{"score": 0, "reason": "a guess"}'}] * 50,
}


def eval_data_skill(cwd: Path, *flags: str | Path, env: Mapping[str, str]) -> Any:
    (cwd / "no-other-skills").mkdir(exist_ok=True)
    done = orchestrator(
        "eval",
        SKILL,
        *FILES,
        "-m",
        MODEL,
        "--catalog",
        cwd / "no-other-skills",
        "--out",
        cwd / "out",
        "--json",
        "-q",
        *flags,
        cwd=cwd,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # One JSON summary per eval, trigger first.
    decoder, text, found = json.JSONDecoder(), done.stdout.strip(), []
    while text:
        value, end = decoder.raw_decode(text)
        found.append(value)
        text = text[end:].strip()
    return found


def lines_of(out: Path, kind: str) -> list[dict[str, Any]]:
    path = out / "data" / kind / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def check_figures(cwd: Path, summaries: list[dict[str, Any]]) -> None:
    """The figures each summary gives, held to the lines they are computed from, and to what
    the rule model makes of the example's queries and cases."""
    trigger, evals = summaries
    (row,) = trigger["variants"]
    lines = lines_of(cwd / "out", "trigger")
    assert len(lines) == 4 and all(line["done"] for line in lines)
    fired = {line["case"]: line["trigger"]["fired"] for line in lines}
    should = {line["case"]: line["trigger"]["should"] for line in lines}
    right = sum(fired[q] and should[q] for q in fired)
    assert row["trigger"]["precision"] == round(right / sum(fired.values()), 4)
    assert row["trigger"]["recall"] == round(right / sum(should.values()), 4)
    # What the rule makes of the four queries: the two data files load it, and so does the
    # question that only names CSV (a false trigger); the limerick does not.
    assert fired == {"q1": True, "q2": True, "q3": False, "q4": True}
    assert row["trigger"]["false_triggers"] == ["Explain what a CSV file is, in one sentence"]
    assert (row["trigger"]["precision"], row["trigger"]["recall"]) == (0.6667, 1.0)
    by_name = {variant["variant"]: variant for variant in evals["variants"]}
    cases = lines_of(cwd / "out", "evals")
    for name in ("with_skill", "without_skill"):
        mine = [line for line in cases if line["variant"] == name]
        assert len(mine) == 2
        assert by_name[name]["pass_rate"] == sum(line["passed"] for line in mine) / 2
    assert (by_name["with_skill"]["pass_rate"], by_name["without_skill"]["pass_rate"]) == (1, 0)
    for line in cases:
        checks = {s["kind"]: s for s in line["scores"]}
        with_skill = line["variant"] == "with_skill"
        # The data tool really ran on the case's copied file, and did not fail.
        assert checks["tools_called"]["passed"] == with_skill
        assert checks["no_tool_errors"]["passed"]
        assert checks["judge"]["passed"] == with_skill
    benchmark = json.loads((cwd / "out" / "data" / "evals" / "benchmark.json").read_text())

    # skill-creator's pass rate is a run's share of its expectations passed (the eval's own
    # checks; the status a run is held to without one is apart): the baseline passes one (no
    # tool failed), so the delta is less than the lift in whole runs.
    def share(line: dict[str, Any]) -> float:
        own = [s for s in line["scores"] if not s.get("implicit")]
        return sum(s["passed"] for s in own) / len(own)

    mean = {
        name: sum(share(line) for line in cases if line["variant"] == name) / 2
        for name in ("with_skill", "without_skill")
    }
    delta = mean["with_skill"] - mean["without_skill"]
    assert benchmark["run_summary"]["delta"]["pass_rate"] == f"{delta:+.2f}" == "+0.75"


def documented_fields() -> dict[str, set[str]]:
    """The fields docs/eval.md gives for each part of `benchmark.json`, by the part's path
    (`runs[].result`); what a cell says in parentheses is left out."""
    page = (REPO / "docs" / "eval.md").read_text(encoding="utf-8")
    table = page.split("<!-- benchmark-fields -->\n", 1)[1].split("\n\n", 1)[0]
    found: dict[str, set[str]] = {}
    for row in table.splitlines()[2:]:
        part, fields = row.strip("|").split(" | ")
        names = set(re.findall(r"`(\w+)`", re.sub(r"\([^)]*\)", "", fields)))
        for path in re.findall(r"`([\w.\[\]]+)`", part) or [""]:
            found[path] = names
    return found


def check_documented_fields(benchmark: dict[str, Any]) -> None:
    """Each part of `benchmark.json` has exactly the fields docs/eval.md gives it."""
    documented = documented_fields()
    assert len(documented) == 10, documented
    for path, names in documented.items():
        value: Any = benchmark
        for key in filter(None, path.split(".")):
            value = value[key.removesuffix("[]")]
            if key.endswith("[]"):
                value = value[0]
        assert set(value) == names, (path, set(value) ^ names)


def test_the_data_skill_examples_replay_offline(tmp_path: Path) -> None:
    offline = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": ""}
    summaries = eval_data_skill(tmp_path, "--replay", RECORDINGS, env=offline)
    assert summaries[0]["diverged"] == [] and summaries[1]["diverged"] == []
    check_figures(tmp_path, summaries)
    benchmark = json.loads((tmp_path / "out" / "data" / "evals" / "benchmark.json").read_text())
    check_documented_fields(benchmark)


def test_the_data_skill_recordings_are_what_the_rule_model_makes(tmp_path: Path) -> None:
    with ProviderServer(SCRIPT, route=route) as served:
        env = {"OPENAI_BASE_URL": served.openai_url, "OPENAI_API_KEY": ""}
        summaries = eval_data_skill(tmp_path, "--record", tmp_path / "rec", env=env)
    check_figures(tmp_path, summaries)
    made = sorted(p.relative_to(tmp_path / "rec").as_posix() for p in (tmp_path / "rec").rglob("*"))
    committed = sorted(p.relative_to(RECORDINGS).as_posix() for p in RECORDINGS.rglob("*"))
    assert made == committed
