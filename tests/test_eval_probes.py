"""Compaction probes in `orchestrator eval`: questions asked of each run's conversation as the
model had it at a point, rebuilt from the trace, compaction stubs and all.

The job is real and long: an agent loads the built-in `files` skill, reads twelve notes of
the workspace one by one (each about 330 tokens, each ending with a code word), writes
`summary.txt`, and answers. The model is a rule-based one served over the real OpenAI wire
(tests/provider_server.py): it reads the next note until all are read, and it answers a
probe by searching the messages it was sent. So a note compacted out of the conversation
really cannot be answered from; nothing decides a probe's pass but what the request held.
Asked for a summary (the `summarize` strategy's writer), it writes one from what the text it
was sent states: each code word it read there, with the message it came from.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_process import orchestrator
from eval_factory import FULL_SCRIPT, eval_folder, twelve, write_eval
from provider_server import ProviderServer
from trace_lines import trace_lines

from orchestrator.agent.compaction import SUMMARY_SYSTEM
from orchestrator.eval import EvalError, EvalOptions, EvalResult, load_eval, run_eval_sync, wilson
from orchestrator.eval.probes import NOT_CALLABLE
from orchestrator.eval.runner import EvalRunner
from orchestrator.eval.summary import render_table
from orchestrator.messages import Message, Usage
from orchestrator.models.base import ModelRequest, ModelResponse
from orchestrator.models.scripted import ScriptedModel

NOTES = 12
WORDS = {n: f"W{n:02d}{'XYZ'[n % 3]}" for n in range(1, NOTES + 1)}
FILLER = " ".join(["The quarterly figures were reviewed again and nothing new came up."] * 25)
MODEL = "openai-compatible:rule"


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else json.dumps(content)


def is_probe(body: Mapping[str, Any]) -> bool:
    """A request whose last message is a question put after the model's own turns."""
    messages = body["messages"]
    return messages[-1]["role"] == "user" and any(m["role"] == "assistant" for m in messages)


WRITE = "write:"
"""A route key for a text the rule writes itself, after the prefix (a summary)."""
STATED = r"The code word of (note-\d+) is (\w+)\."


def summary_of(task: str) -> str:
    """The summary the rule writes of a summarizer's task (orchestrator/agent/compaction.py
    `summary_task`): every code word the text states, the earlier summary's and the cut
    results', each with the message it came from, under the four headings asked for."""
    kept, _, cut = task.partition("The tool results being cut:")
    points = [line for line in kept.splitlines() if re.search(STATED, line)]
    for part in re.split(r"^--- ", cut, flags=re.M)[1:]:
        where = re.match(r"\S+ \(message (\d+)\)", part)
        for note, word in re.findall(STATED, part):
            points.append(f"- The code word of {note} is {word}. (message {where and where[1]})")
    decisions = "\n".join(points) or "- none yet"
    return (
        f"Decisions:\n{decisions}\nDead ends:\n- none\nArtifacts:\n- none yet\n"
        "Next step:\n- go on with the task"
    )


def route(body: Mapping[str, Any]) -> str:
    """The model's rule. A summary (the summarize strategy's writer): written from its task.
    A probe: a code word is answered when a message sent states it, a changed file when a
    call sent wrote it; else "I do not know". A turn of the job: load the files skill, read
    the next note, write the summary, answer."""
    messages = body["messages"]
    if _text(messages[0]) == SUMMARY_SYSTEM:
        return WRITE + summary_of(_text(messages[-1]))
    if "You grade an answer" in _text(messages[0]):
        return "pass" if "## Answer\nIt is summary.txt." in _text(messages[-1]) else "fail"
    if is_probe(body):
        question = _text(messages[-1])
        sent = "\n".join(_text(m) for m in messages[:-1])
        if asked := re.search(r"code word of (note-\d+)", question):
            found = re.search(rf"The code word of {asked[1]} is (\w+)\.", sent)
            return f"say:{found[1]}" if found else "unknown"
        if "which file" in question.lower():
            calls = [c for m in messages for c in m.get("tool_calls") or []]
            written = [
                json.loads(c["function"]["arguments"])["path"]
                for c in calls
                if c["function"]["name"] == "files__write_file"
            ]
            return f"say:{written[-1]}" if written else "unknown"
        return "unknown"
    results = sum(1 for m in messages if m["role"] == "tool")
    if results == 0:
        return "load"
    if results - 1 < NOTES:
        return f"read:{results}"
    return "write" if results - 1 == NOTES else "final"


def _reply(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [message] * 100


SCRIPT = {
    "load": _reply({"tool_calls": [{"name": "load_skill", "arguments": {"name": "files"}}]}),
    **{
        f"read:{n}": _reply(
            {
                "tool_calls": [
                    {"name": "files__read_file", "arguments": {"path": f"notes/note-{n:02d}.txt"}}
                ]
            }
        )
        for n in WORDS
    },
    "write": _reply(
        {
            "tool_calls": [
                {
                    "name": "files__write_file",
                    "arguments": {"path": "summary.txt", "content": "Twelve notes read."},
                }
            ]
        }
    ),
    "final": _reply({"content": "I read the twelve notes and wrote summary.txt."}),
    "unknown": [{"content": "I do not know."}] * 500,
    "pass": _reply({"content": '{"score": 1, "reason": "names the file"}'}),
    "fail": _reply({"content": '{"score": 0, "reason": "no file named"}'}),
    **{f"say:{w}": _reply({"content": f"It is {w}."}) for w in [*WORDS.values(), "summary.txt"]},
}


class RuleModel(ScriptedModel):
    """The script's turns, and the texts the rule writes itself (a route key `write:TEXT`)."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if request.agent.startswith(WRITE):
            text = request.agent.removeprefix(WRITE)
            return ModelResponse(Message(role="assistant", content=text), Usage(), "stop")
        return await super().complete(request)


def counted(body: Mapping[str, Any]) -> tuple[int, int]:
    """The server's usage: a prompt's characters / 4, and 10 tokens out."""
    return len(json.dumps(body["messages"])) // 4, 10


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ProviderServer]:
    with ProviderServer(RuleModel(SCRIPT), route=route, usage=counted) as served:
        monkeypatch.setenv("OPENAI_BASE_URL", served.openai_url)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        yield served


PROBES: list[dict[str, Any]] = [
    {
        "id": "first-word",
        "question": "What is the code word of note-01?",
        "checks": [{"contains": "W01Y"}],
    },
    {
        "id": "first-word-early",
        "question": "What is the code word of note-01?",
        "after": 2,
        "checks": [{"regex": r"\bW01Y\b"}],
    },
    {
        "id": "last-word",
        "question": "What is the code word of note-12?",
        "checks": [{"contains": "{expected.last}"}],
    },
    {
        "id": "changed-file",
        "question": "Which file did you change?",
        "checks": [{"contains": "summary.txt"}, {"not_contains": "note-"}],
    },
]


def notes_eval(root: Path, **extra: Any) -> Path:
    """The notes job, its workspace, and an eval of it with a reference and a 4,096-token
    window under test."""
    notes = root / "work" / "notes"
    notes.mkdir(parents=True)
    for n, word in WORDS.items():
        text = f"Note {n}. {FILLER}\nThe code word of note-{n:02d} is {word}.\n"
        (notes / f"note-{n:02d}.txt").write_text(text)
    spec: dict[str, Any] = {
        "name": "notes",
        "job": {
            "name": "notes",
            "model": MODEL,
            "goal": "Read the twelve notes in notes/ and write summary.txt.",
            "permissions": {"workspace": "./work"},
        },
        "cases": [{"id": "notes", "expected": {"last": WORDS[12]}}],
        "scorers": [{"file": {"path": "summary.txt", "contains": "Twelve"}}],
        "variants": [{"name": "window-4k", "model_options": {"context_window": 4096}}],
        "probes": PROBES,
        **extra,
    }
    path = root / "notes.eval.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def run(path: Path, out: Path, **options: Any) -> EvalResult:
    return run_eval_sync(load_eval(path), EvalOptions(out=out, **options))


def probe_results(line: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in line["probes"]["results"]}


def test_probes_pass_with_the_reference_and_find_what_a_small_window_cut(
    tmp_path: Path, server: ProviderServer
) -> None:
    result = run(notes_eval(tmp_path), tmp_path / "out")
    lines = {line["variant"]: line for line in result.lines}
    assert list(lines) == ["reference", "window-4k"]
    reference, small = lines["reference"], lines["window-4k"]

    # Both jobs did their work; only the small window compacted.
    assert reference["passed"] and small["passed"]
    assert reference["compactions"] == 0
    assert small["compactions"] >= 3
    assert (tmp_path / "out" / "work" / "window-4k" / "notes-1" / "summary.txt").is_file()

    # With nothing cut, every probe is answered.
    assert all(r["passed"] for r in reference["probes"]["results"])
    # With 4,096 tokens, the first note was cut before the end: its code word is lost there,
    # but not after the second call, when nothing had been cut yet; the latest note and the
    # model's own call (never cut) survive.
    found = probe_results(small)
    assert found["first-word"]["passed"] is False
    assert found["first-word"]["answer"] == "I do not know."
    assert found["first-word"]["scores"][0]["reason"] == "missing: 'W01Y'"
    assert found["first-word"]["at"] == "goal at its end (call 15)"
    assert found["first-word-early"]["passed"] is True
    assert found["first-word-early"]["at"] == "goal after call 2 of 15"
    assert found["changed-file"]["passed"]  # the model's own calls are never cut

    # What the model was asked is what the trace says the run's request held: at its end,
    # stubs for the early notes, the question appended, no tool callable. The latest note's
    # word is answered exactly when the request still held it (a read note may be cut too).
    probes = [body for body in server.bodies() if is_probe(body)]
    last = next(
        b
        for b in probes
        if "note-12" in _text(b["messages"][-1]) and "[compacted]" in json.dumps(b["messages"])
    )
    assert found["last-word"]["passed"] == ("W12X" in json.dumps(last["messages"]))
    assert len(probes) == 8
    end = next(
        b
        for b in probes
        if "note-01" in _text(b["messages"][-1]) and "[compacted]" in json.dumps(b["messages"])
    )
    assert "W01Y" not in json.dumps(end["messages"])
    assert end["tool_choice"] == "none"
    job_request = next(b for b in server.bodies() if not is_probe(b))
    names = [t["function"]["name"] for t in end["tools"]]
    assert names == [t["function"]["name"] for t in job_request["tools"]]  # by name only
    assert {t["function"]["description"] for t in end["tools"]} == {NOT_CALLABLE}
    assert end["messages"][-1] == {"role": "user", "content": "What is the code word of note-01?"}
    assert end["messages"][-2]["content"] == "I read the twelve notes and wrote summary.txt."

    # The probes' spend is on a line of its own, not in the job's.
    asked = small["probes"]["usage"]["total_tokens"]
    assert asked > 0
    job_calls = [b for b in server.bodies() if not is_probe(b)]
    assert reference["usage"]["total_tokens"] + small["usage"]["total_tokens"] == sum(
        counted(b)[0] + 10 for b in job_calls
    )

    # The table: probe pass rate with its interval, the job's, tokens, cost, cuts.
    rows = {row.name: row for row in result.summary.rows}
    assert (rows["reference"].probes_passed, rows["reference"].probes_asked) == (4, 4)
    passed = sum(1 for r in found.values() if r["passed"])
    assert (rows["window-4k"].probes_passed, rows["window-4k"].probes_asked) == (passed, 4)
    assert rows["window-4k"].probe_interval == wilson(passed, 4)
    table = render_table(result.summary)
    head = table.splitlines()[1].split()
    assert head[:6] == ["variant", "probes", "95%", "interval", "pass", "95%"]
    assert "cuts/run" in head
    low, high = wilson(passed, 4)
    shown_rate = rf"{passed}/4 {passed / 4:.0%}\s+{low:.0%}-{high:.0%}"
    assert re.search(rf"window-4k\s+{shown_rate}\s+1/1 100%", table), table
    assert "  first-word: reference 1/1, window-4k 0/1" in table
    assert f"probes (window-4k): {asked:,} tokens, not counted above" in table
    shown = result.summary.as_dict()["variants"][1]
    assert shown["probes"]["pass_rate"] == passed / 4
    assert shown["probes"]["interval"] == [round(x, 4) for x in wilson(passed, 4)]
    assert shown["probes"]["by_probe"]["first-word"] == {"passed": 0, "asked": 1}
    assert shown["compactions_per_run"] == small["compactions"]


def test_a_point_not_reached_fails_and_says_where(tmp_path: Path, server: ProviderServer) -> None:
    checks = [{"contains": "summary"}]
    probes = [
        {"id": "late", "question": "Which file did you change?", "after": 40, "checks": checks},
        {"id": "other", "question": "Which file?", "agent": "goal/helper", "checks": checks},
    ]
    result = run(notes_eval(tmp_path, probes=probes), tmp_path / "out", variants=["reference"])
    found = probe_results(result.lines[0])
    assert found["late"]["passed"] is False
    assert found["late"]["error"] == "not reached: agent 'goal' made 15 calls"
    assert found["late"]["at"] == "goal after call 40 of 15"
    assert found["other"]["error"] == (
        "no model call of agent 'goal/helper' in the trace (agents: goal)"
    )
    assert not any(is_probe(body) for body in server.bodies())  # nothing was asked


def test_a_reference_that_cuts_is_named_and_the_reference_window_reaches_the_run(
    tmp_path: Path, server: ProviderServer
) -> None:
    path = notes_eval(tmp_path, variants=[], reference_window=4096)
    result = run(path, tmp_path / "out")
    lines = {line["variant"]: line for line in result.lines}
    assert list(lines) == ["reference", "baseline"]  # no variants: the job as it is
    line = lines["reference"]
    assert lines["baseline"]["compactions"] == 0
    assert line["compactions"] >= 3
    table = render_table(result.summary)
    assert (
        f"warning: the reference runs compacted {line['compactions']} times: their answers are "
        "not full-context ones (set a larger reference_window)"
    ) in table


JUDGED = {
    "id": "judged",
    "question": "Which file did you change?",
    "checks": [{"judge": {"rubric": "Names the file written."}}],
}


def test_a_probes_judge_grades_its_answer_and_is_counted_apart(
    tmp_path: Path, server: ProviderServer
) -> None:
    probes = [JUDGED, {**JUDGED, "id": "judged-early", "after": 3}]
    result = run(notes_eval(tmp_path, probes=probes), tmp_path / "out", variants=["reference"])
    (line,) = result.lines
    found = probe_results(line)
    assert found["judged"]["scores"][0] == {
        "name": "judge rubric",
        "kind": "judge",
        "passed": True,
        "score": 1.0,
        "reason": "names the file",
    }
    # Before the file was written the model says it does not know, and the judge says so.
    assert found["judged-early"]["answer"] == "I do not know."
    assert found["judged-early"]["scores"][0]["reason"] == "no file named"
    judged = [b for b in server.bodies() if "You grade an answer" in _text(b["messages"][0])]
    assert len(judged) == 2
    assert "## Task\nWhich file did you change?" in _text(judged[0]["messages"][-1])
    assert line["judge"]["usage"]["total_tokens"] == sum(counted(b)[0] + 10 for b in judged)


def test_probe_calls_draw_from_the_evals_budget(tmp_path: Path, server: ProviderServer) -> None:
    loaded = load_eval(notes_eval(tmp_path, budget={"max_tokens": 10_000_000}))
    runner = EvalRunner(loaded, EvalOptions(out=tmp_path / "out", variants=["window-4k"]))
    (line,) = asyncio.run(runner.run()).lines
    assert runner.budget is not None
    probes = line["probes"]["usage"]["total_tokens"]
    assert probes > 0
    assert runner.budget.used == line["usage"]["total_tokens"] + probes


def test_recorded_probes_replay_offline(tmp_path: Path, server: ProviderServer) -> None:
    path = notes_eval(tmp_path, probes=[*PROBES, JUDGED])
    recorded = run(path, tmp_path / "out", record=tmp_path / "rec")
    sidecar = json.loads((tmp_path / "rec" / "window-4k" / "notes-1.json").read_text())
    assert sidecar["probes"]["first-word"]["answer"] == "I do not know."
    assert sidecar["judge"]["probe judged: judge rubric"]["score"] == 1.0
    asked = len(server.bodies())
    replayed = run(path, tmp_path / "again", replay=tmp_path / "rec")
    assert len(server.bodies()) == asked  # nothing asked of the model
    for before, after in zip(recorded.lines, replayed.lines, strict=True):
        assert after["status"] == "completed"
        assert after["probes"]["results"] == before["probes"]["results"]
        failed = [r["id"] for r in after["probes"]["results"] if not r["passed"]]
        assert failed == [] if after["variant"] == "reference" else "first-word" in failed


def test_a_changed_probe_runs_the_eval_again(tmp_path: Path, server: ProviderServer) -> None:
    path = notes_eval(tmp_path)
    run(path, tmp_path / "out")
    again = run(path, tmp_path / "out")
    assert again.progress.skipped == 2
    spec = yaml.safe_load(path.read_text())
    spec["probes"][0]["question"] = "What is the code word of note-02?"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    third = run(path, tmp_path / "out")
    assert third.progress.skipped == 0
    assert list(third.progress.changed.values()) == [["its checks changed"]] * 2


def test_the_command_prints_probes_in_its_table_json_and_page(
    tmp_path: Path, server: ProviderServer
) -> None:
    path = notes_eval(tmp_path)
    env = {"OPENAI_BASE_URL": server.openai_url}
    page = tmp_path / "page.html"
    shown = orchestrator(
        "eval", path, "--out", tmp_path / "out", "--html", page, cwd=tmp_path, env=env
    )
    assert shown.returncode == 0, shown.stderr
    assert "probes passed, per variant:" in shown.stdout
    html = page.read_text()
    assert "<h2>Probes passed</h2>" in html
    assert "FAIL: probe first-word" in html and "I do not know." in html
    as_json = orchestrator("eval", path, "--out", tmp_path / "out", "--json", cwd=tmp_path, env=env)
    variants = json.loads(as_json.stdout)["variants"]
    reference, small = (v["probes"]["passed"] for v in variants)
    assert reference == 4 and 1 <= small < 4


def test_bad_probes_get_errors_naming_the_field(tmp_path: Path) -> None:
    probes = [
        {"id": "a", "question": "Which file?", "checks": [{"file": {"path": "x"}}]},
        {"id": "a", "question": "Which?", "after": 0, "checks": []},
        {"id": "b", "checks": [{"contains": "{expected.nothing}"}, {"tools_called": ["x"]}]},
        {"id": "c", "question": "Q", "checks": [{"python": "missing.py:f"}], "when": 3},
    ]
    with pytest.raises(EvalError) as raised:
        load_eval(notes_eval(tmp_path, probes=probes))
    problems = {p.path: p.message for p in raised.value.problems}
    assert problems == {
        "probes[1].after": "expected a number of model calls (1 or more) or 'end', got 0",
        "probes[1].checks": "give at least one check of the answer",
        "probes[2].question": "required, but missing",
        "probes[3].when": (
            "unknown field 'when'; expected one of: id, question, after, agent, checks"
        ),
    }
    # Structure first: the rest is checked once the file parses.
    fixed = [
        {"id": "a", "question": "Which file?", "checks": [{"file": {"path": "x"}}]},
        {"id": "a", "question": "Which?", "checks": [{"contains": "{expected.nothing}"}]},
        {"id": "c", "question": "Q", "checks": [{"python": "missing.py:f"}]},
    ]
    variants = [{"name": "reference", "model_options": {"context_window": 4096}}]
    with pytest.raises(EvalError) as raised:
        load_eval(notes_eval(tmp_path / "2", probes=fixed, variants=variants))
    problems = {p.path: p.message for p in raised.value.problems}
    assert problems["probes[0].checks[0].file"] == (
        "a probe's answer is a text: a file check does not apply; use equals, contains, "
        "not_contains, regex, json_path, json_schema, python, judge"
    )
    assert problems["probes[1].id"] == "'a' names two probes"
    assert problems["probes[1].checks[0]"] == (
        "{expected.nothing}: case 'notes' has no expected 'nothing'"
    )
    assert problems["probes[2].checks[0].python"].endswith("missing.py does not exist")
    assert problems["variants[0]"] == (
        "'reference' names the run the probes compare with; rename this one"
    )
    with pytest.raises(EvalError) as raised:
        load_eval(notes_eval(tmp_path / "3", probes=[], reference_window=4096))
    assert [str(p) for p in raised.value.problems] == [
        "reference_window: applies to probes; the eval has none"
    ]


def test_a_scripted_models_probe_turns_are_keyed_probe(tmp_path: Path) -> None:
    root = eval_folder(tmp_path)
    script = {**FULL_SCRIPT, "probe": [{"content": "out/count.txt"}, {"content": "no idea"}]}
    (root / "job" / "full.script.yaml").write_text(yaml.safe_dump(script))
    probes = [
        {"id": "file", "question": "Which file did you write?", "checks": [{"contains": "out/"}]},
        {"id": "again", "question": "And now?", "after": 1, "checks": [{"contains": "out/"}]},
    ]
    result = run(write_eval(root, {"cases": [twelve()], "probes": probes}), tmp_path / "out")
    assert [line["variant"] for line in result.lines] == ["reference", "baseline"]
    for line in result.lines:
        found = probe_results(line)
        assert found["file"]["passed"] and found["file"]["at"] == "goal at its end (call 4)"
        assert found["again"]["answer"] == "no idea" and not found["again"]["passed"]


def test_mask_and_summarize_run_as_named_and_compare_per_strategy(
    tmp_path: Path, server: ProviderServer
) -> None:
    window = {"context_window": 5120}
    variants = [
        {"name": "mask", "model_options": window, "compaction": "mask"},
        {"name": "summarize", "model_options": window, "compaction": "summarize"},
    ]
    result = run(notes_eval(tmp_path, variants=variants), tmp_path / "out")
    lines = {line["variant"]: line for line in result.lines}
    assert list(lines) == ["reference", "mask", "summarize"]
    events = {name: trace_lines(line["trace"]) for name, line in lines.items()}
    cuts = {
        name: [e for e in found if e["type"] == "compact" and e["agent"] == "goal"]
        for name, found in events.items()
    }

    # Each variant's run compacted with its own strategy, as often as its line says.
    assert cuts["reference"] == []
    for name in ("mask", "summarize"):
        assert cuts[name] and {e["strategy"] for e in cuts[name]} == {name}
        assert lines[name]["compactions"] == len(cuts[name])
    assert all("summary_agent" not in e for e in cuts["mask"])

    # With summarize, each cut had its summary written by a one-step agent of its own, on a
    # line of its own: its run's usage is what the cut's event charges, and it is part of the
    # variant's tokens (every model call of the run, the writers' among them).
    ended = {e["agent"]: e for e in events["summarize"] if e["type"] == "run_end"}
    writers = [e["summary_agent"] for e in cuts["summarize"]]
    assert writers == [f"goal/summary-{e['step']}" for e in cuts["summarize"]]
    for cut in cuts["summarize"]:
        writer = ended[cut["summary_agent"]]
        assert writer["status"] == "completed" and writer["steps"] == 1
        assert writer["usage"]["total_tokens"] == cut["summary_tokens"] > 0
        assert "summary_error" not in cut
    calls = [e for e in events["summarize"] if e["type"] == "model_call"]
    assert {e["agent"] for e in calls} == {"goal", *writers}
    written = sum(e["usage"]["total_tokens"] for e in calls if e["agent"] in writers)
    assert written == sum(e["summary_tokens"] for e in cuts["summarize"])
    total = lines["summarize"]["usage"]["total_tokens"]
    assert total == sum(e["usage"]["total_tokens"] for e in calls)
    assert total - written == ended["goal"]["usage"]["total_tokens"]
    summaries = [b for b in server.bodies() if _text(b["messages"][0]) == SUMMARY_SYSTEM]
    assert len(summaries) == len(writers)

    # What the summary carries is what the cut results stated, so a fact mask lost is still
    # in the summarize run's last request; mask's has only a stub where it was.
    at_end = {
        name: next(
            b
            for b in server.bodies()
            if is_probe(b)
            and "note-01" in _text(b["messages"][-1])
            and b["messages"][-2]["content"] == lines[name]["output"]
            and "[compacted]" in json.dumps(b["messages"])  # not the reference's
            and (name == "summarize") == ("Summary of the results" in json.dumps(b["messages"]))
        )
        for name in ("mask", "summarize")
    }
    carried = [m for m in at_end["summarize"]["messages"] if "[kept across" in _text(m)]
    assert len(carried) == 1 and "The code word of note-01 is W01Y." in _text(carried[0])
    assert "W01Y" not in json.dumps(at_end["mask"]["messages"])
    found = {name: probe_results(line) for name, line in lines.items()}
    assert found["summarize"]["first-word"]["passed"] is True
    assert found["mask"]["first-word"]["passed"] is False

    # The table compares them per strategy: probes, the job's pass rate, tokens, cuts.
    rows = {row.name: row for row in result.summary.rows}
    table = render_table(result.summary)
    for name in ("mask", "summarize"):
        line = lines[name]
        passed = sum(1 for r in found[name].values() if r["passed"])
        assert (rows[name].probes_passed, rows[name].probes_asked) == (passed, 4)
        low, high = wilson(passed, 4)
        job = "1/1 100%" if line["passed"] else "0/1 0%"
        tokens = line["usage"]["total_tokens"]
        shown = (
            rf"{name}\s+{passed}/4 {passed / 4:.0%}\s+{low:.0%}-{high:.0%}\s+{job}\s+\S+\s+"
            rf"\S+\s+{tokens:,}\s+0%\s+-\s+{len(cuts[name])}\.0\s"
        )
        assert re.search(shown, table), table
    by_probe = {
        probe["id"]: ", ".join(
            f"{name} {int(found[name][probe['id']]['passed'])}/1" for name in lines
        )
        for probe in PROBES
    }
    for probe, shown in by_probe.items():
        assert f"  {probe}: {shown}" in table
