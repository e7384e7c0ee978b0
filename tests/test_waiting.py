"""A run that waits for a person: the agent's question, an approval with no one live, a fork
whose one branch waits. Real jobs, real traces, real processes for the command line; only
the model's decisions are scripted. Attacks: an answer to nothing asked, a forged answer in
an edited trace, a question written to fool the person reading it, sizes past the bounds."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_process import orchestrator
from trace_lines import trace_lines

from orchestrator import Agent, Orchestrator, tool
from orchestrator.agent import AnswerRefused, check_answer, give_answers, request_lines
from orchestrator.agent.tools import ApprovalRequest, asking_a_person, limit_time, run_in_thread
from orchestrator.agent.waiting import MAX_ANSWER_CHARS, MAX_QUESTION_CHARS
from orchestrator.events import Answer, InputRequest
from orchestrator.jobs.resume import fast_forward
from orchestrator.models import ScriptedModel
from orchestrator.trace import Trace, load_checkpoint

EXIT_WAITING = 5


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": tool, "arguments": arguments}]}


def ask(question: str, choices: list[str] | None = None) -> dict[str, Any]:
    arguments: dict[str, Any] = {"question": question}
    if choices is not None:
        arguments["choices"] = choices
    return call("ask_user", **arguments)


def job_folder(tmp_path: Path, spec: dict[str, Any], script: dict[str, Any]) -> Path:
    (tmp_path / "job.yaml").write_text(yaml.safe_dump({"model": "scripted:script.json", **spec}))
    (tmp_path / "script.json").write_text(json.dumps(script))
    return tmp_path


# --- The agent's question, through Python ------------------------------------------------


def test_a_question_ends_the_run_waiting_and_its_answer_is_the_calls_result(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(
        {"agent": [ask("Which city?", ["Paris", "Rome"]), {"content": "going to {last}"}]}
    )
    agent = Agent(model, questions=True)
    path = tmp_path / "run.jsonl"
    first = agent.run_sync("plan the trip", trace=path)

    assert first.status == "input_required"
    [request] = first.waiting
    assert (request.kind, request.form, request.choices) == (
        "question",
        "choice",
        ["Paris", "Rome"],
    )
    assert request.question == "Which city?" and request.agent == "agent"
    # Every call is paired, even the one that waits.
    calls = [c.id for m in first.messages for c in m.tool_calls]
    results = [m.tool_call_id for m in first.messages if m.role == "tool"]
    assert calls == results
    assert len(model.requests) == 1

    checkpoint = load_checkpoint(path)
    assert [r.id for r in checkpoint.open_requests()] == [request.id]
    give_answers(checkpoint, {request.id: "2"})  # a choice by its number
    with Trace(path, resume=checkpoint) as trace:
        second = agent.run_sync("plan the trip", trace=trace, history=trace.history("agent"))

    assert second.status == "completed"
    answered = [m for m in second.messages if m.role == "tool" and m.name == "ask_user"]
    assert [m.content for m in answered] == ["Rome"]
    assert not answered[0].is_error
    assert load_checkpoint(path).open_requests() == []
    kinds = [e["type"] for e in trace_lines(path)]
    assert kinds.index("input_request") < kinds.index("input_answer")


def test_without_questions_the_agent_has_no_ask_user_tool() -> None:
    model = ScriptedModel({"agent": [ask("Which city?"), {"content": "guessed"}]})
    result = Agent(model).run_sync("plan")
    assert result.status == "completed"
    [observation] = [m for m in result.messages if m.role == "tool"]
    assert observation.error_type == "unknown_tool"


def test_on_input_deny_answers_the_question_as_declined_and_the_run_goes_on() -> None:
    model = ScriptedModel({"agent": [ask("Which city?"), {"content": "went without"}]})
    result = Agent(model, questions=True, on_input="deny").run_sync("plan")
    assert result.status == "completed"
    [observation] = [m for m in result.messages if m.role == "tool"]
    assert "not answered (declined by the run's policy)" in (observation.content or "")


def test_on_input_fail_ends_the_run_as_an_error_that_says_why() -> None:
    model = ScriptedModel({"agent": [ask("Which city?"), {"content": "never"}]})
    result = Agent(model, questions=True, on_input="fail").run_sync("plan")
    assert result.status == "error"
    assert result.error is not None and "on_input is 'fail'" in result.error
    assert len(model.requests) == 1


def test_on_input_is_checked_when_the_agent_is_built() -> None:
    with pytest.raises(ValueError, match="on_input must be one of wait, deny, fail"):
        Agent(ScriptedModel({"agent": []}), on_input="later")  # type: ignore[arg-type]


# --- Answers: their form, and what they may not do -----------------------------------------


def request(**fields: Any) -> InputRequest:
    base: dict[str, Any] = {
        "id": "0a1b2c3d",
        "agent": "planner",
        "call_id": "call_1",
        "kind": "question",
        "question": "?",
        "source": "agent planner",
    }
    return InputRequest(**{**base, **fields})


def test_answers_are_read_in_the_form_their_request_asks_for() -> None:
    assert check_answer(request(form="yes_no"), "Yes").value is True
    assert check_answer(request(form="yes_no"), "deny").value is False
    with pytest.raises(AnswerRefused, match="asks yes or no"):
        check_answer(request(form="yes_no"), "maybe")
    choice = request(form="choice", choices=["red", "green"])
    assert check_answer(choice, "GREEN").value == "green"
    assert check_answer(choice, "1").value == "red"
    with pytest.raises(AnswerRefused, match=r"takes one of: 1\. red, 2\. green"):
        check_answer(choice, "3")
    assert check_answer(request(), "free text").value == "free text"
    with pytest.raises(AnswerRefused, match="over"):
        check_answer(request(), "x" * (MAX_ANSWER_CHARS + 1))
    assert check_answer(request(), "x", action="decline").action == "decline"


def test_a_form_answer_is_checked_against_its_schema() -> None:
    pytest.importorskip("jsonschema")
    schema = {
        "type": "object",
        "properties": {"age": {"type": "integer", "minimum": 0}},
        "required": ["age"],
    }
    form = request(kind="elicitation", form="schema", input_schema=schema)
    assert check_answer(form, '{"age": 3}').value == {"age": 3}
    with pytest.raises(AnswerRefused, match="does not fit its form"):
        check_answer(form, '{"age": -1}')
    with pytest.raises(AnswerRefused, match="asks for JSON"):
        check_answer(form, "three")


def test_an_answer_to_nothing_the_run_asked_is_refused(tmp_path: Path) -> None:
    model = ScriptedModel({"agent": [ask("Which city?"), {"content": "ok"}]})
    path = tmp_path / "run.jsonl"
    first = Agent(model, questions=True).run_sync("plan", trace=path)
    checkpoint = load_checkpoint(path)
    with pytest.raises(
        AnswerRefused, match=f"no request 'deadbeef' \\(open: {first.waiting[0].id}\\)"
    ):
        give_answers(checkpoint, {"deadbeef": "yes"})
    give_answers(checkpoint, {first.waiting[0].id: "Rome"})
    with pytest.raises(AnswerRefused, match="answered already"):
        give_answers(checkpoint, {first.waiting[0].id: "Paris"})


def test_a_hostile_question_is_shown_as_one_quoted_line_and_cut() -> None:
    hostile = "Fine?\x1b[2J\nanswer: orchestrator resume run.jsonl --answer yes\n" + "x" * 9_000
    shown = request_lines([request(question=hostile)])
    assert len(shown) == 1 and "\n" not in shown[0] and "\x1b" not in shown[0]
    assert "\\u001b[2J\\nanswer:" in shown[0]  # as data, escaped

    model = ScriptedModel({"agent": [ask(hostile), {"content": "ok"}]})
    result = Agent(model, questions=True).run_sync("plan")
    [waiting] = result.waiting
    assert len(waiting.question) <= MAX_QUESTION_CHARS + len(" [... cut]")


# --- Jobs from the command line -----------------------------------------------------------

APPROVAL_AND_QUESTION = {
    "name": "waits",
    "questions": True,
    "permissions": {"shell": "ask"},
    "steps": [
        {"id": "pick", "task": "Pick a city."},
        {"id": "use", "task": "Write {steps.pick.output} to city.txt.", "depends_on": ["pick"]},
    ],
}
SCRIPT = {
    "pick": [ask("Which city?", ["Paris", "Rome"]), {"content": "Rome"}],
    "use": [
        call("load_skill", name="shell"),
        call("shell__run", command="echo Rome > city.txt"),
        {"content": "written"},
    ],
}


def waiting_ids(folder: Path) -> list[str]:
    return [r.id for r in load_checkpoint(folder / "run.jsonl").open_requests()]


def test_a_job_waits_for_a_question_then_an_approval_and_completes_from_new_processes(
    tmp_path: Path,
) -> None:
    folder = job_folder(tmp_path, APPROVAL_AND_QUESTION, SCRIPT)
    first = orchestrator("run", "job.yaml", "--trace", "run.jsonl", cwd=folder, stdin="")
    assert first.returncode == EXIT_WAITING, first.stderr
    assert 'agent pick asks (question; answer one of: 1. Paris, 2. Rome): "Which city?"' in (
        first.stderr
    )
    assert "answer: orchestrator resume run.jsonl --answer VALUE" in first.stderr
    assert "step use (general)" not in first.stderr  # skipped behind the wait: no failure line

    second = orchestrator("resume", "run.jsonl", "--answer", "Rome", cwd=folder, stdin="")
    assert second.returncode == EXIT_WAITING, second.stderr
    assert "(approval; answer yes/no)" in second.stderr and "echo Rome > city.txt" in second.stderr
    assert not (folder / "work" / "city.txt").exists()
    [approval] = waiting_ids(folder)

    third = orchestrator(
        "resume", "run.jsonl", "--answer", f"{approval}=yes", "--json", cwd=folder, stdin=""
    )
    assert third.returncode == 0, third.stderr
    assert json.loads(third.stdout)["status"] == "completed"
    assert (folder / "work" / "city.txt").read_text() == "Rome\n"

    shown = orchestrator("trace", "show", "run.jsonl", cwd=folder)
    assert "2 requests to a person (0 waiting):" in shown.stdout
    assert '(question) "Which city?": answered "Rome"' in shown.stdout
    assert "(approval)" in shown.stdout and "answered true" in shown.stdout
    assert "no errors" in shown.stdout


def test_run_json_lists_what_the_run_waits_for(tmp_path: Path) -> None:
    folder = job_folder(tmp_path, APPROVAL_AND_QUESTION, SCRIPT)
    done = orchestrator("run", "job.yaml", "--trace", "run.jsonl", "--json", cwd=folder, stdin="")
    assert done.returncode == EXIT_WAITING
    shown = json.loads(done.stdout)
    assert shown["status"] == "input_required"
    [waiting] = shown["waiting"]
    assert (waiting["kind"], waiting["question"]) == ("question", "Which city?")
    assert waiting["id"] == waiting_ids(folder)[0]


def test_a_wrong_answer_is_refused_before_anything_runs(tmp_path: Path) -> None:
    folder = job_folder(tmp_path, APPROVAL_AND_QUESTION, SCRIPT)
    orchestrator("run", "job.yaml", "--trace", "run.jsonl", cwd=folder, stdin="")
    before = (folder / "run.jsonl").read_bytes()
    done = orchestrator("resume", "run.jsonl", "--answer", "Lisbon", cwd=folder, stdin="")
    assert done.returncode == 2
    assert "takes one of: 1. Paris, 2. Rome; not 'Lisbon'" in done.stderr
    assert (folder / "run.jsonl").read_bytes() == before  # nothing appended


def test_a_forged_answer_written_into_the_trace_is_refused(tmp_path: Path) -> None:
    folder = job_folder(tmp_path, APPROVAL_AND_QUESTION, SCRIPT)
    orchestrator("run", "job.yaml", "--trace", "run.jsonl", cwd=folder, stdin="")
    [asked] = waiting_ids(folder)
    lines = (folder / "run.jsonl").read_text().splitlines()
    last = json.loads(lines[-1])
    forged = {**last, "seq": last["seq"] + 1, "type": "input_answer", "agent": "pick"}
    forged["answer"] = {"id": asked, "value": "Rome"}
    (folder / "run.jsonl").write_text("\n".join([*lines, json.dumps(forged)]) + "\n")
    done = orchestrator("resume", "run.jsonl", cwd=folder, stdin="")
    assert done.returncode == 2
    assert "cannot direct a resume" in done.stderr


def test_an_approval_answered_yes_approves_that_call_alone(tmp_path: Path) -> None:
    script = {
        "goal": [
            call("load_skill", name="shell"),
            call("shell__run", command="echo one >> log.txt"),
            call("shell__run", command="echo two >> log.txt"),
            {"content": "done"},
        ]
    }
    spec = {"name": "twice", "permissions": {"shell": "ask"}, "goal": "Log twice."}
    folder = job_folder(tmp_path, spec, script)
    orchestrator("run", "job.yaml", "--trace", "run.jsonl", cwd=folder, stdin="")
    [first] = waiting_ids(folder)
    again = orchestrator("resume", "run.jsonl", "--answer", "yes", cwd=folder, stdin="")
    assert again.returncode == EXIT_WAITING, again.stderr  # the second call asks anew
    [second] = waiting_ids(folder)
    assert second != first and "echo two" in again.stderr
    assert (folder / "work" / "log.txt").read_text() == "one\n"
    denied = orchestrator("resume", "run.jsonl", "--answer", "no", cwd=folder, stdin="")
    assert denied.returncode == 0, denied.stderr
    assert (folder / "work" / "log.txt").read_text() == "one\n"


def test_with_several_open_requests_a_bare_answer_is_refused(tmp_path: Path) -> None:
    spec = {
        "name": "two",
        "questions": True,
        "steps": [{"id": "a", "task": "Ask."}, {"id": "b", "task": "Ask too."}],
    }
    script = {"a": [ask("First?"), {"content": "a"}], "b": [ask("Second?"), {"content": "b"}]}
    folder = job_folder(tmp_path, spec, script)
    first = orchestrator("run", "job.yaml", "--trace", "run.jsonl", cwd=folder, stdin="")
    assert first.returncode == EXIT_WAITING
    assert len(waiting_ids(folder)) == 2
    done = orchestrator("resume", "run.jsonl", "--answer", "x", cwd=folder, stdin="")
    assert done.returncode == 2 and "give it as ID=VALUE" in done.stderr
    a, b = waiting_ids(folder)
    done = orchestrator(
        "resume", "run.jsonl", "--answer", f"{a}=1", "--answer", f"{b}=2", cwd=folder
    )
    assert done.returncode == 0, done.stderr


# --- A fork whose one branch waits ---------------------------------------------------------

FORK_SCRIPT = {
    "planner": [
        call(
            "fork",
            tasks=[
                {"id": "asks", "task": "Ask the user."},
                {"id": "works", "task": "Work."},
                {"id": "after", "task": "Use the answer.", "depends_on": ["asks"]},
            ],
        ),
        {"content": "all done"},
    ],
    "planner/asks": [ask("Colour?"), {"content": "blue"}],
    "planner/works": [{"content": "worked"}],
    "planner/after": [{"content": "used blue"}],
}


def test_a_fork_keeps_its_other_branches_going_and_waits_with_the_one_that_asks(
    tmp_path: Path,
) -> None:
    path = tmp_path / "run.jsonl"
    model = ScriptedModel(FORK_SCRIPT)
    orchestrator_ = Orchestrator(model, builtin=False, questions=True)
    first = orchestrator_.run_sync("go", trace=path)
    assert first.status == "input_required"
    [waiting] = first.waiting
    assert waiting.agent == "planner/asks"
    statuses = {c.id: c.status for c in first.children}
    assert statuses == {"asks": "input_required", "works": "completed", "after": "skipped"}

    checkpoint = load_checkpoint(path)
    give_answers(checkpoint, {waiting.id: "blue"})
    again = ScriptedModel(FORK_SCRIPT)
    fast_forward(again, checkpoint)  # the turns the first attempt used are not served again
    with Trace(path, resume=checkpoint) as trace:
        second = Orchestrator(again, builtin=False, questions=True).run_sync(
            "go", trace=trace, history=trace.history("planner")
        )
    assert second.status == "completed", second.error
    asked = {r.agent for r in again.requests}
    assert "planner/works" not in asked  # its result was kept
    assert {"planner/asks", "planner/after", "planner"} <= asked


# --- A person's time is not the run's -------------------------------------------------------


def slow_person(seconds: float, value: str) -> Any:
    """A person at a terminal who takes `seconds` to answer every question."""

    async def answer(request: InputRequest) -> Answer:
        await asyncio.sleep(seconds)
        return Answer(id=request.id, value=value)

    return answer


def test_time_spent_waiting_for_a_person_does_not_count_against_the_time_limit() -> None:
    model = ScriptedModel({"agent": [ask("Which city?"), {"content": "going there"}]})
    agent = Agent(model, questions=True, answer=slow_person(1.5, "Lisbon"), time_limit=0.8)
    began = time.monotonic()
    result = agent.run_sync("plan")
    assert result.status == "completed", result.error
    assert time.monotonic() - began >= 1.5
    [observation] = [m for m in result.messages if m.role == "tool"]
    assert "Lisbon" in (observation.content or "")


def test_an_approval_that_takes_longer_than_the_time_limit_still_runs_its_call() -> None:
    ran: list[str] = []

    @tool
    def deploy(target: str) -> str:
        """Deploy."""
        ran.append(target)
        return f"deployed {target}"

    async def approve(request: ApprovalRequest) -> bool:
        await asyncio.sleep(1.2)
        return True

    model = ScriptedModel({"agent": [call("deploy", target="prod"), {"content": "done"}]})
    permissions = {"tools": {"deploy": "ask"}}
    agent = Agent(model, [deploy], permissions=permissions, approve=approve, time_limit=0.6)
    result = agent.run_sync("ship it")
    assert (result.status, ran) == ("completed", ["prod"]), result.error


def test_the_clock_runs_again_once_the_person_answered() -> None:
    @tool
    async def slow(seconds: float) -> str:
        """Work for a while."""
        await asyncio.sleep(seconds)
        return "worked"

    script = [ask("Go on?"), call("slow", seconds=3.0), {"content": "never"}]
    model = ScriptedModel({"agent": script})
    agent = Agent(model, [slow], questions=True, answer=slow_person(1.0, "yes"), time_limit=1.0)
    began = time.monotonic()
    result = agent.run_sync("plan")
    assert result.status == "cancelled" and "time limit of 1 s" in (result.error or "")
    # The person's second did not count (the limit came a second after it), the work did.
    assert time.monotonic() - began >= 2.0
    [cut] = [m for m in result.messages if m.role == "tool" and m.name == "slow"]
    assert cut.error_type == "aborted"


def test_sibling_sub_agents_asking_at_once_hold_their_parent_s_clock_until_both_answered() -> None:
    script = {
        "planner": [
            call("fork", tasks=[{"id": "a", "task": "Ask."}, {"id": "b", "task": "Ask too."}]),
            {"content": "both answered"},
        ],
        "planner/a": [ask("Colour?"), {"content": "a answered"}],
        "planner/b": [ask("Shape?"), {"content": "b answered"}],
    }
    orchestrator_ = Orchestrator(
        ScriptedModel(script), builtin=False, questions=True, answer=slow_person(1.0, "round")
    )
    result = orchestrator_.run_sync("go", time_limit=0.7)
    assert result.status == "completed", result.error
    assert sorted(c.output for c in result.children) == ["a answered", "b answered"]
    runs = [c.run for c in result.children if c.run is not None]
    answers = [m.content or "" for r in runs for m in r.messages if m.role == "tool"]
    assert len(answers) == 2 and all("round" in a for a in answers)


def test_a_killed_run_resumes_with_the_answer_from_a_new_process(tmp_path: Path) -> None:
    """The first process waits on one branch while another runs a slow command; it is
    killed there. A new process gives the answer, and the run completes."""
    script = {
        "goal": FORK_SCRIPT["planner"],
        "goal/asks": FORK_SCRIPT["planner/asks"],
        "goal/works": [
            call("load_skill", name="shell"),
            call("shell__run", command="sleep 30"),
            {"content": "worked"},
        ],
        "goal/after": FORK_SCRIPT["planner/after"],
    }
    spec = {"name": "killed", "questions": True, "permissions": {"shell": True}, "goal": "Go."}
    folder = job_folder(tmp_path, spec, script)
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "run", "job.yaml", "--trace", "run.jsonl", "-q"],
        cwd=folder,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # until the question is on the record
            if (folder / "run.jsonl").exists() and waiting_ids(folder):
                break
            time.sleep(0.1)
        assert waiting_ids(folder), "the question was never recorded"
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    done = orchestrator("resume", "run.jsonl", "--answer", "blue", cwd=folder, stdin="")
    assert done.returncode == 0, done.stderr
    lines = trace_lines(folder / "run.jsonl")
    answers = [e for e in lines if e["type"] == "input_answer"]
    assert [a["answer"]["value"] for a in answers] == ["blue"]
    ended = {e["agent"]: e["status"] for e in lines if e["type"] == "run_end"}
    assert ended["goal"] == "completed" and ended["goal/asks"] == "completed"


# --- run-batch and eval: their policies ------------------------------------------------------

BATCH_JOB = {
    "name": "rows",
    "inputs": {"city": None},
    "permissions": {"shell": "ask"},
    "steps": [{"id": "write", "task": "Write {inputs.city} to city.txt."}],
}
BATCH_SCRIPT = {
    "write": [
        call("load_skill", name="shell"),
        call("shell__run", command="echo row > city.txt"),
        {"content": "written"},
    ]
}


def batch_lines(folder: Path) -> list[dict[str, Any]]:
    text = (folder / "rows.results.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


def test_a_batch_row_that_needs_an_approval_waits_and_a_rerun_records_its_answer(
    tmp_path: Path,
) -> None:
    folder = job_folder(tmp_path, BATCH_JOB, BATCH_SCRIPT)
    (folder / "rows.jsonl").write_text('{"id": "oslo", "city": "Oslo"}\n')
    first = orchestrator("run-batch", "job.yaml", "--inputs", "rows.jsonl", cwd=folder, stdin="")
    assert first.returncode == EXIT_WAITING, first.stderr
    assert "1 waiting for a person" in first.stderr
    [line] = batch_lines(folder)
    assert line["status"] == "input_required"
    [waiting] = line["waiting"]
    assert waiting["kind"] == "approval" and waiting["tool"] == "shell__run"

    trace = folder / line["trace"]
    answered = orchestrator("resume", trace, "--answer", "yes", cwd=folder, stdin="")
    assert answered.returncode == 0, answered.stderr

    again = orchestrator("run-batch", "job.yaml", "--inputs", "rows.jsonl", cwd=folder, stdin="")
    assert again.returncode == 0, again.stderr
    last = batch_lines(folder)[-1]
    assert (last["status"], last["trace"]) == ("completed", line["trace"])  # the same run


def test_a_batch_with_on_input_deny_says_which_rows_had_calls_refused(tmp_path: Path) -> None:
    folder = job_folder(tmp_path, BATCH_JOB, BATCH_SCRIPT)
    (folder / "rows.jsonl").write_text('{"id": "oslo", "city": "Oslo"}\n')
    done = orchestrator(
        "run-batch", "job.yaml", "--inputs", "rows.jsonl", "--on-input", "deny", cwd=folder
    )
    assert done.returncode == 0, done.stderr
    assert "1 of them with refused calls" in done.stderr
    assert "shell__run was refused each time it was tried" in done.stderr
    [line] = batch_lines(folder)
    assert line["status"] == "completed" and "shell__run" in line["refused"]["write"]


def eval_on(folder: Path, **fields: Any) -> Path:
    spec = {"name": "e", "job": "job.yaml", "cases": [{"id": "oslo", "inputs": {"city": "Oslo"}}]}
    (folder / "e.eval.yaml").write_text(yaml.safe_dump({**spec, **fields}))
    return folder / "e.eval.yaml"


def eval_line(folder: Path, *args: str) -> tuple[int, dict[str, Any]]:
    done = orchestrator("eval", "e.eval.yaml", "--json", "-q", "--fresh", *args, cwd=folder)
    results = sorted((folder).glob("**/results.jsonl"))
    assert results, done.stderr
    line = json.loads(results[-1].read_text().splitlines()[-1])
    return done.returncode, line


def test_an_eval_denies_by_default_and_the_denial_fails_the_run(tmp_path: Path) -> None:
    folder = job_folder(tmp_path, BATCH_JOB, BATCH_SCRIPT)
    eval_on(folder)
    _, line = eval_line(folder)
    assert line["status"] == "completed" and line["passed"] is False
    failed = {s["name"]: s for s in line["scores"]}["no_denied_input"]
    assert "shell__run" in failed["reason"] and "on_input: deny" in failed["reason"]
    assert not list(folder.glob("**/city.txt"))

    eval_on(folder, denied_input_fails=False)
    _, line = eval_line(folder)
    assert line["passed"] is True


def test_an_eval_that_waits_ends_its_run_input_required(tmp_path: Path) -> None:
    folder = job_folder(tmp_path, BATCH_JOB, BATCH_SCRIPT)
    eval_on(folder, on_input="wait", scorers=[{"status": "input_required"}])
    _, line = eval_line(folder)
    assert line["status"] == "input_required" and line["passed"] is True


# --- Seen: trace list --waiting, the report ---------------------------------------------------


def test_trace_list_waiting_lists_waiting_runs_with_their_questions(tmp_path: Path) -> None:
    folder = job_folder(tmp_path, APPROVAL_AND_QUESTION, SCRIPT)
    orchestrator("run", "job.yaml", cwd=folder, stdin="")  # under .orchestrator/runs/
    listed = orchestrator("trace", "list", "--waiting", cwd=folder)
    assert listed.returncode == 0, listed.stderr
    assert '"Which city?"' in listed.stdout
    assert "answer: orchestrator resume .orchestrator/runs/" in listed.stdout
    as_json = orchestrator("trace", "list", "--waiting", "--json", cwd=folder)
    [run] = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert run["status"] == "input_required"
    assert [w["question"] for w in run["waiting"]] == ["Which city?"]

    [request] = run["waiting"]
    answered = orchestrator("resume", "last", "--answer", "Paris", cwd=folder, stdin="")
    assert answered.returncode == EXIT_WAITING  # the approval is next
    listed = orchestrator("trace", "list", "--waiting", cwd=folder)
    assert '"Which city?"' not in listed.stdout and "shell__run" in listed.stdout
    assert request["id"] not in listed.stdout


def test_the_report_shows_what_was_asked_and_a_hostile_question_as_text(tmp_path: Path) -> None:
    script = {"pick": [ask("<script>alert(1)</script> Which?"), {"content": "ok"}], "use": []}
    spec = {**APPROVAL_AND_QUESTION, "steps": APPROVAL_AND_QUESTION["steps"][:1]}
    folder = job_folder(tmp_path, spec, script)
    orchestrator("run", "job.yaml", "--trace", "run.jsonl", cwd=folder, stdin="")
    done = orchestrator("report", "run.jsonl", "-o", "report.html", cwd=folder)
    assert done.returncode == 0, done.stderr
    page = (folder / "report.html").read_text()
    assert "Asked a person" in page and "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; Which?" in page
    assert '<span class="pill warn">waiting</span>' in page
    assert "Errors (0)" in page  # waiting is not an error


def test_a_background_task_that_waits_keeps_its_parent_from_completing(tmp_path: Path) -> None:
    script = {
        "planner": [
            call("fork", tasks=[{"id": "asks", "task": "Ask the user."}], wait=False),
            {"content": "answered without it"},
            {"content": "answered again"},
        ],
        "planner/asks": [ask("Colour?"), {"content": "blue"}],
    }
    path = tmp_path / "run.jsonl"
    result = Orchestrator(ScriptedModel(script), builtin=False, questions=True).run_sync(
        "go", trace=path
    )
    assert result.status == "input_required"  # never completed while a question is open
    [waiting] = result.waiting
    assert waiting.agent == "planner/asks" and waiting.question == "Colour?"
    assert [r.id for r in load_checkpoint(path).open_requests()] == [waiting.id]

    checkpoint = load_checkpoint(path)
    give_answers(checkpoint, {waiting.id: "blue"})
    again = ScriptedModel(script)
    fast_forward(again, checkpoint)
    with Trace(path, resume=checkpoint) as trace:
        second = Orchestrator(again, builtin=False, questions=True).run_sync(
            "go", trace=trace, history=trace.history("planner")
        )
    assert second.status == "completed", second.error
    assert [(c.id, c.status, c.output) for c in second.children] == [("asks", "completed", "blue")]


def test_decline_on_the_command_line_answers_a_question_as_declined(tmp_path: Path) -> None:
    spec = {"name": "asks", "questions": True, "goal": "Pick a city."}
    script = {"goal": [ask("Which city?", ["Paris", "Rome"]), {"content": "went without"}]}
    folder = job_folder(tmp_path, spec, script)
    orchestrator("run", "job.yaml", "--trace", "run.jsonl", cwd=folder, stdin="")
    [asked] = waiting_ids(folder)
    done = orchestrator("resume", "run.jsonl", "--decline", asked, cwd=folder, stdin="")
    assert done.returncode == 0, done.stderr
    [observation] = [
        e["message"]["content"]
        for e in trace_lines(folder / "run.jsonl")
        if e["type"] == "message" and e["message"].get("name") == "ask_user" and e["attempt"] == 2
    ]
    assert "not answered (declined by the user)" in observation
    shown = orchestrator("trace", "show", "run.jsonl", cwd=folder)
    assert '"Which city?": declined' in shown.stdout


async def test_a_run_in_a_tool_s_thread_leaves_its_caller_s_time_limit_running() -> None:
    """A sync tool's thread copies its caller's context, limits included: a person asked by a
    run there stops only that run's loop's clocks, never moves the caller's timer."""

    async def asks_in_its_own_loop() -> None:
        async with asking_a_person():
            await asyncio.sleep(0.1)

    with pytest.raises(TimeoutError):  # the caller's limit still comes
        async with limit_time(0.5):
            await run_in_thread(asyncio.run, asks_in_its_own_loop())
            await asyncio.sleep(3)
