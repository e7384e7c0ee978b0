"""Recorded evals: `--record` keeps every run's model calls, `--replay` runs them again
offline call for call, a replay that departs from its recording says where and how, an
interrupted eval resumes, and `eval_cases` turns an eval into test cases."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_process import orchestrator
from eval_factory import eval_folder, results, twelve, write_eval

from orchestrator.eval import EvalOptions, eval_cases, load_eval, run_eval_sync

REPO = Path(__file__).resolve().parents[1]
GUESS = {"name": "guess", "model": "scripted:job/guess.script.yaml"}
FULL = {"name": "full"}
WRITTEN = {"file": {"path": "out/count.txt", "equals": "{expected.words}"}}


def recorded_eval(root: Path) -> Path:
    eval_folder(root)
    (root / "judge.script.yaml").write_text(
        yaml.safe_dump({"judge": [{"content": '{"score": 1, "reason": "ok"}'}] * 4})
    )
    judge = {"rubric": "Gives the count.", "model": "scripted:judge.script.yaml"}
    return write_eval(
        root,
        {
            "cases": [twelve("twelve"), twelve("seven", 7)],
            "scorers": [WRITTEN, {"judge": judge}],
            "variants": [FULL, GUESS],
            "concurrency": 1,
        },
    )


def test_a_recorded_eval_replays_offline_call_for_call(tmp_path: Path) -> None:
    path = recorded_eval(tmp_path / "here")
    recorded = run_eval_sync(
        load_eval(path), EvalOptions(out=tmp_path / "rec-out", record=tmp_path / "rec")
    )
    assert sorted(p.name for p in (tmp_path / "rec" / "full").iterdir()) == [
        "seven-1.json",
        "seven-1.jsonl",
        "twelve-1.json",
        "twelve-1.jsonl",
    ]
    # The judge will not be asked again: its script is gone, its verdicts are recorded.
    (tmp_path / "here" / "judge.script.yaml").unlink()
    # The eval moves to another folder (another checkout): the recording still replays.
    moved = tmp_path / "elsewhere"
    shutil.copytree(tmp_path / "here", moved)
    (moved / "judge.script.yaml").write_text("judge: []\n")  # it must exist to load
    replayed = run_eval_sync(
        load_eval(moved / path.name),
        EvalOptions(out=tmp_path / "replay-out", replay=tmp_path / "rec"),
    )
    assert replayed.summary.divergences == [] and replayed.summary.errors == []
    before = {line["key"]: line for line in recorded.lines}
    for line in replayed.lines:
        was = before[line["key"]]
        assert line["passed"] == was["passed"]
        assert line["output"] == was["output"]
        assert line["usage"] == was["usage"]
        assert [s["score"] for s in line["scores"]] == [s["score"] for s in was["scores"]]
    assert [r.pass_rate for r in replayed.summary.rows] == [1.0, 0.0]  # guess writes no file
    # Every model call was answered from the recording: the replayed traces name it.
    trace = Path(replayed.lines[0]["trace"]).read_text()
    assert '"model":"replay:' in trace


def test_a_changed_skill_is_reported_where_the_replay_diverges(tmp_path: Path) -> None:
    path = recorded_eval(tmp_path)
    run_eval_sync(load_eval(path), EvalOptions(out=tmp_path / "a", record=tmp_path / "rec"))
    skill = tmp_path / "job" / "skills" / "word-stats" / "SKILL.md"
    skill.write_text(skill.read_text().replace("tally(path, output)", "tally(path, out)"))
    replayed = orchestrator(
        "eval", path, "--replay", tmp_path / "rec", "--out", tmp_path / "b", "-q", cwd=tmp_path
    )
    assert replayed.returncode == 1
    assert "2 runs diverged from the recording" in replayed.stderr
    diverged = [
        line for line in results(tmp_path / "b" / "results.jsonl") if line.get("divergence")
    ]
    assert {line["key"] for line in diverged} == {"full/twelve/1", "full/seven/1"}
    message = diverged[0]["divergence"]
    assert "agent 'goal', turn 2: message 4 (tool) departs from the recording" in message
    assert "its text differs from character" in message
    assert "tally(path, out)." in message  # the new text, from where it differs
    assert all(line["status"] == "diverged" and not line["passed"] for line in diverged)
    assert "diverged: full/twelve/1: replay: agent 'goal'" in replayed.stdout


def test_a_changed_tools_array_is_reported(tmp_path: Path) -> None:
    path = recorded_eval(tmp_path)
    run_eval_sync(load_eval(path), EvalOptions(out=tmp_path / "a", record=tmp_path / "rec"))
    # The same variant, now eager: the skill's tool is in the tools array from the start.
    data = yaml.safe_load(path.read_text())
    data["variants"][1]["disclosure"] = "eager"
    path.write_text(yaml.safe_dump(data))
    replayed = run_eval_sync(
        load_eval(path),
        EvalOptions(out=tmp_path / "b", replay=tmp_path / "rec", variants=["guess"]),
    )
    messages = [line["divergence"] for line in replayed.lines]
    assert len(messages) == 2
    assert "turn 1: the tools array differs from the recording" in messages[0]
    assert "sent now but not recorded: word-stats__tally" in messages[0]


def test_a_missing_recording_is_an_error_of_its_run(tmp_path: Path) -> None:
    path = recorded_eval(tmp_path)
    (tmp_path / "rec").mkdir()
    replayed = run_eval_sync(
        load_eval(path), EvalOptions(out=tmp_path / "b", replay=tmp_path / "rec")
    )
    assert all(line["status"] == "error" for line in replayed.lines)
    assert "no recording of run full/twelve/1" in replayed.lines[0]["error"]


def test_eval_cases_are_test_cases(tmp_path: Path) -> None:
    path = recorded_eval(tmp_path)
    run_eval_sync(load_eval(path), EvalOptions(out=tmp_path / "a", record=tmp_path / "rec"))
    cases = eval_cases(path, replay=tmp_path / "rec")
    assert [case.id for case in cases] == [
        "full/twelve",
        "full/seven",
        "guess/twelve",
        "guess/seven",
    ]
    lines = cases[0].check(tmp_path / "c0")
    assert lines[0]["passed"] and lines[0]["key"] == "full/twelve/1"
    with pytest.raises(AssertionError) as failed:
        cases[3].check(tmp_path / "c3")
    assert "guess/seven/1 failed: file out/count.txt (out/count.txt does not exist)" in str(
        failed.value
    )
    skill = tmp_path / "job" / "skills" / "word-stats" / "SKILL.md"
    skill.write_text(skill.read_text() + "\nOne more line.\n")
    with pytest.raises(AssertionError) as diverged:
        eval_cases(path, replay=tmp_path / "rec")[1].check(tmp_path / "c1")
    assert "full/seven/1 diverged from its recording" in str(diverged.value)


def wait_for_lines(path: Path, count: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if path.is_file() and len(path.read_text().splitlines()) >= count:
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} did not reach {count} lines")


def test_an_interrupted_eval_resumes_without_running_done_runs_again(tmp_path: Path) -> None:
    root = eval_folder(tmp_path)
    slow = {"goal": [{"content": '{"words": 12}', "latency": 0.4}]}
    (root / "job" / "slow.script.yaml").write_text(yaml.safe_dump(slow))
    path = write_eval(
        root,
        {
            "cases": [twelve(f"c{i}") for i in range(6)],
            "variants": [{"name": "slow", "model": "scripted:job/slow.script.yaml"}],
            "concurrency": 1,
        },
    )
    out = tmp_path / "out"
    command = [sys.executable, "-m", "orchestrator", "eval", str(path), "--out", str(out), "-q"]
    results_file = out / "results.jsonl"
    # Ctrl-C first: the eval stops, says so, and keeps what ended.
    interrupted = subprocess.Popen(
        command, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        wait_for_lines(results_file, 1)
        interrupted.send_signal(signal.SIGINT)
        _, stderr = interrupted.communicate(timeout=30)
    finally:
        if interrupted.poll() is None:
            interrupted.kill()
    assert interrupted.returncode == 130
    assert b"eval interrupted: the runs that ended are in" in stderr
    # Then a kill, with nothing to say.
    process = subprocess.Popen(
        command, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for_lines(results_file, len(results(results_file)) + 1)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait(timeout=30)
    before = results(results_file)
    assert 2 <= len(before) < 6  # stopped part-way, twice
    again = orchestrator("eval", path, "--out", out, "-q", cwd=root)
    assert again.returncode == 0, again.stderr
    assert f"{6 - len(before)} runs; {len(before)} done earlier, skipped" in again.stderr
    after = results(results_file)
    keys = [line["key"] for line in after]
    assert sorted(keys) == sorted(f"slow/c{i}/1" for i in range(6))  # each run once
    assert "6/6 100%" in again.stdout


def test_the_recorded_example_replays_in_the_test_suite(tmp_path: Path) -> None:
    """examples/evals/recorded.eval.yaml with its recordings: what a skill author keeps in CI."""
    example = REPO / "examples" / "evals"
    done = orchestrator(
        "eval",
        example / "skill-ab.eval.yaml",
        "--replay",
        example / "recordings" / "skill-ab",
        "--out",
        tmp_path / "out",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "with-skill     4/4 100%" in done.stdout
    assert "without-skill   2/4 50%" in done.stdout
    assert "diverged" not in done.stdout
    lines = results(tmp_path / "out" / "results.jsonl")
    assert all(line["done"] for line in lines) and len(lines) == 8
    # The folders a recording names are those its messages name, so that they move: the
    # built-in `files` skill the guessing model loads, and the eval's own skill.
    recordings = example / "recordings" / "skill-ab"
    for variant, skill in (("without-skill", "files"), ("with-skill", "word-stats")):
        paths = json.loads((recordings / variant / "seven-1.json").read_text())["paths"]
        recorded = (recordings / variant / "seven-1.jsonl").read_text()
        key = "builtin_skills" if skill == "files" else "job"
        assert f"Folder: {paths[key]}/" in recorded
    # Every model call was answered from the committed recording.
    assert '"model":"replay:' in Path(lines[0]["trace"]).read_text()


def test_a_recording_made_on_another_machine_replays_here(tmp_path: Path) -> None:
    """The example's recordings, as if made in another checkout: every folder they name (the
    eval's, the job's, the built-in skills', the workspaces) moved to where it is there."""
    example = REPO / "examples" / "evals"
    source = example / "recordings" / "skill-ab"
    moved = tmp_path / "recordings"
    elsewhere = "/home/someone/src/orchestrator"
    for path in source.rglob("*.json*"):
        text = path.read_text()
        sidecar = json.loads((path.with_suffix(".json")).read_text())["paths"]
        for folder in sorted(sidecar.values(), key=len, reverse=True):
            if folder:
                text = text.replace(folder, folder.replace(str(REPO), elsewhere, 1))
        target = moved / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    assert str(REPO) not in "".join(p.read_text() for p in moved.rglob("*.jsonl"))
    done = orchestrator(
        "eval", example / "skill-ab.eval.yaml", "--replay", moved, "--out", tmp_path / "out",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "diverged" not in done.stdout and "4/4 100%" in done.stdout


def test_record_after_a_plain_run_records_every_run(tmp_path: Path) -> None:
    root = eval_folder(tmp_path)
    write_eval(root, {"cases": [twelve("a")], "variants": [GUESS], "scorers": [WRITTEN]})
    plain = orchestrator("eval", "test.eval.yaml", "-q", cwd=root)
    assert plain.returncode == 0, plain.stderr
    recorded = orchestrator("eval", "test.eval.yaml", "--record", "rec", "-q", cwd=root)
    assert recorded.returncode == 0, recorded.stderr
    assert sorted(p.name for p in (root / "rec" / "guess").iterdir()) == ["a-1.json", "a-1.jsonl"]
    assert "1 run done earlier was made by a changed eval (the mode changed: plain, now record" in (
        recorded.stderr
    )
    # A recorded run is a plain run too: asked plainly again, it stands.
    again = orchestrator("eval", "test.eval.yaml", "-q", cwd=root)
    assert "0 runs; 1 done earlier, skipped" in again.stderr, again.stderr
    # A replay is not: it runs, from the recording.
    replayed = orchestrator("eval", "test.eval.yaml", "--replay", "rec", "-q", cwd=root)
    assert replayed.returncode == 0 and "eval test: 1 run;" in replayed.stderr, replayed.stderr


CLOCK_TOOLS = '''
import time

from orchestrator import tool


@tool
def now() -> str:
    """The time now, to the nanosecond."""
    return f"it is {time.time_ns()} ns since the epoch"
'''


def clock_eval(root: Path, volatile: list[str] | None = None) -> Path:
    """An eval whose job reads a clock (a tool whose output changes every run), counts the
    words with word-stats, and answers."""
    eval_folder(root)
    clock = root / "job" / "skills" / "clock"
    clock.mkdir()
    (clock / "SKILL.md").write_text("---\nname: clock\ndescription: Tells the time.\n---\nx\n")
    (clock / "tools.py").write_text(CLOCK_TOOLS)
    load = {"name": "load_skill"}
    script = {
        "goal": [
            {"tool_calls": [{**load, "arguments": {"name": "clock"}}]},
            {"tool_calls": [{"name": "clock__now", "arguments": {}}]},
            {"tool_calls": [{**load, "arguments": {"name": "word-stats"}}]},
            {
                "tool_calls": [
                    {
                        "name": "word-stats__tally",
                        "arguments": {"path": "input.txt", "output": "out/count.txt"},
                    }
                ]
            },
            {"content": '{"words": 12}'},
        ]
    }
    (root / "job" / "clock.script.yaml").write_text(yaml.safe_dump(script))
    return clock_eval_file(root, volatile)


def clock_eval_file(root: Path, volatile: list[str] | None = None) -> Path:
    spec: dict[str, Any] = {
        "cases": [twelve("twelve")],
        "scorers": [WRITTEN, {"no_tool_errors": True}],
        "variants": [{"name": "clock", "model": "scripted:job/clock.script.yaml"}],
    }
    if volatile is not None:
        spec["volatile_tools"] = volatile
    return write_eval(root, spec)


def tool_results(trace: Path, name: str) -> list[str]:
    found = []
    for line in trace.read_text().splitlines():
        event = json.loads(line)
        message = event.get("message") or {}
        if event.get("type") == "message" and message.get("name") == name:
            found.append(message["content"])
    return found


def test_a_volatile_tool_runs_again_on_replay_and_its_new_result_is_accepted(
    tmp_path: Path,
) -> None:
    path = clock_eval(tmp_path)
    recorded = run_eval_sync(
        load_eval(path), EvalOptions(out=tmp_path / "a", record=tmp_path / "rec")
    )
    assert recorded.lines[0]["passed"], recorded.lines[0]
    # Replayed as it is, the clock's new reading departs from the recording.
    strict = run_eval_sync(
        load_eval(path), EvalOptions(out=tmp_path / "b", replay=tmp_path / "rec")
    )
    (line,) = strict.lines
    assert line["status"] == "diverged"
    assert "message 6 (tool) departs from the recording" in line["divergence"]
    assert "it is " in line["divergence"]
    # Named volatile (in the eval file), the clock runs again and its reading is taken.
    path = clock_eval_file(tmp_path, volatile=["clock__now"])
    replayed = run_eval_sync(
        load_eval(path), EvalOptions(out=tmp_path / "c", replay=tmp_path / "rec")
    )
    (line,) = replayed.lines
    assert line["passed"] and line["status"] == "completed", line
    assert line["volatile_results"] == ["goal: clock__now"]
    was = tool_results(tmp_path / "rec" / "clock" / "twelve-1.jsonl", "clock__now")
    now = tool_results(Path(line["trace"]), "clock__now")
    assert len(was) == len(now) == 1 and was != now  # really run again, a new reading
    # Only the tools named are spared: another tool's changed output still diverges.
    skill = tmp_path / "job" / "skills" / "word-stats" / "tools.py"
    skill.write_text(skill.read_text().replace('f"{words} words"', 'f"{words} words!"'))
    changed = run_eval_sync(
        load_eval(path), EvalOptions(out=tmp_path / "d", replay=tmp_path / "rec")
    )
    assert changed.lines[0]["status"] == "diverged"
    assert "12 words!" in changed.lines[0]["divergence"]


def test_the_volatile_tool_flag_reruns_the_runs_that_diverged(tmp_path: Path) -> None:
    path = clock_eval(tmp_path)
    run_eval_sync(load_eval(path), EvalOptions(out=tmp_path / "a", record=tmp_path / "rec"))
    common = ["eval", path, "--replay", tmp_path / "rec", "--out", tmp_path / "b", "-q"]
    strict = orchestrator(*common, cwd=tmp_path)
    assert strict.returncode == 1
    assert "1 run diverged from the recording" in strict.stderr
    spared = orchestrator(*common, "--volatile-tool", "clock__*", cwd=tmp_path)
    assert spared.returncode == 0, spared.stdout + spared.stderr
    # The run that diverged is made again: the mode it answers to changed.
    assert "the mode changed" in spared.stderr and "volatile clock__*" in spared.stderr
    assert "1/1 100%" in spared.stdout
