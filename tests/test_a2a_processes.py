"""`orchestrator serve` as a user runs it, in processes of its own: a client written from the
A2A specification alone (plain JSON-RPC over HTTP, server-sent events) drives the quickstart,
and a job of a second process forks a sub-agent the first one serves."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from trace_lines import trace_lines

pytest.importorskip("a2a", reason="the [a2a] extra is not installed")

from a2a_helpers import ASK, ASK_SCRIPT, PICKER, PICKER_SCRIPT, call, write_job

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow
VERSION = {"A2A-Version": "1.0"}


@contextmanager
def serving(
    folder: Path, *args: str, env: dict[str, str] | None = None
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`orchestrator serve ARGS --port 0` in `folder`; yields the URL it prints, and the
    process (stopped with Ctrl-C at the end, unless it was stopped already)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "serve", *args, "--port", "0"],
        cwd=folder,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env={**os.environ, **env} if env is not None else None,
    )
    try:
        assert process.stderr is not None
        first = process.stderr.readline()
        assert first.startswith("serving "), first + process.stderr.read()
        yield first.rsplit(" at ", 1)[1].strip(), process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def rpc(method: str, params: dict[str, Any], id: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": params}


def sse_results(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC results of an event stream, in order."""
    results = []
    for line in response.iter_lines():
        if line.startswith("data:"):
            event = json.loads(line[5:])
            assert "error" not in event, event
            results.append(event["result"])
    return results


def test_a_client_written_from_the_specification_drives_the_quickstart(tmp_path: Path) -> None:
    for name in ("quickstart.yaml", "quickstart.script.yaml"):
        shutil.copy(ROOT / "examples" / name, tmp_path / name)
    shutil.copytree(ROOT / "examples" / "quickstart", tmp_path / "quickstart",
                    ignore=shutil.ignore_patterns("out"))  # fmt: skip
    message = {
        "role": "ROLE_USER",
        "messageId": "m-1",
        "parts": [{"text": "Write the brief from the notes."}],
    }
    with serving(tmp_path, "quickstart.yaml", "--trace-dir", "runs") as (url, _):
        card = httpx.get(url + ".well-known/agent-card.json").json()
        with httpx.stream(
            "POST", url, json=rpc("SendStreamingMessage", {"message": message}),
            headers=VERSION, timeout=60,
        ) as response:  # fmt: skip
            assert response.headers["content-type"].startswith("text/event-stream")
            results = sse_results(response)
        task_id = results[0]["task"]["id"]
        got = httpx.post(url, json=rpc("GetTask", {"id": task_id}, 2), headers=VERSION).json()
    assert card["name"] == "quickstart"
    assert [skill["id"] for skill in card["skills"]] == ["quickstart"]
    assert card["supportedInterfaces"][0]["protocolVersion"] == "1.0"
    updates = [r["statusUpdate"]["status"] for r in results if "statusUpdate" in r]
    assert updates[-1]["state"] == "TASK_STATE_COMPLETED"
    texts = [u["message"]["parts"][0]["text"] for u in updates if "message" in u]
    assert "goal/early started" in texts and "goal/late completed" in texts
    [artifact] = [r["artifactUpdate"]["artifact"] for r in results if "artifactUpdate" in r]
    assert artifact["name"] == "brief.md"
    assert artifact["parts"][0]["text"].startswith("# Platform brief")
    assert got["result"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert got["result"]["id"] == task_id
    assert (tmp_path / "quickstart" / "out" / "brief.md").is_file()


HELPER = """\
name: helper
model: scripted:SCRIPT
goal: Replaced by each message.
"""
CALLER = """\
name: caller
model: scripted:SCRIPT
agents:
  helper: {a2a: "URL", description: Another process's helper job.}
goal: Ask the helper.
"""


def test_one_process_forks_a_sub_agent_the_other_serves(tmp_path: Path) -> None:
    server_folder, client_folder = tmp_path / "a", tmp_path / "b"
    write_job(server_folder, HELPER, {"goal": [{"content": "helped with it"}]}, "helper")
    with serving(server_folder, "helper.yaml", "--trace-dir", "runs") as (url, _):
        write_job(
            client_folder,
            CALLER.replace("URL", url),
            {"goal": [call("fork", tasks=[{"id": "ask", "agent": "helper",
                                           "task": "Help, please."}]),
                      {"content": "the helper answered"}]},
            "caller",
        )  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-m", "orchestrator", "run", "caller.yaml", "--trace", "b.jsonl"],
            cwd=client_folder, capture_output=True, text=True, timeout=120,
            env={**os.environ, "NO_COLOR": "1"},
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "goal/ask: remote task completed: helped with it" in done.stderr
    caller = list(trace_lines(client_folder / "b.jsonl"))
    [served_trace] = (server_folder / "runs").glob("*.jsonl")
    served = list(trace_lines(served_trace))
    [tie] = [e for e in caller if e["type"] == "a2a_task"]
    assert tie["agent"] == "goal/ask"
    assert served[0]["type"] == "a2a_task" and served[0]["task_id"] == tie["task_id"]
    prompt = next(e for e in served if e["type"] == "message"
                  and e["message"]["role"] == "user")  # fmt: skip
    assert prompt["message"]["content"] == "Help, please."
    observation = next(
        str(e["message"]["content"]) for e in caller
        if e["type"] == "message" and e["message"]["role"] == "tool"
    )  # fmt: skip
    assert "helped with it" in observation and "[completed]" in observation


def test_the_overhead_benchmark_runs() -> None:
    """bench/a2a_overhead.py at a tiny size, so that it cannot rot (its figures are in the
    docs, never asserted here)."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import a2a_overhead
    finally:
        sys.path.remove(str(ROOT / "bench"))
    found = a2a_overhead.measure(2)
    assert found["repeats"] == 2
    assert len(found["local_ms"]) == len(found["remote_ms"]) == 2
    difference = found["remote_fork_ms_median"] - found["local_fork_ms_median"]
    assert abs(found["remote_overhead_ms_median"] - difference) <= 0.011  # two roundings


SLEEPER = """\
name: sleeper
model: scripted:SCRIPT
permissions: {workspace: ./work, shell: true}
goal: Replaced by each message.
"""
SLEEPER_SCRIPT = {
    "goal": [
        call("load_skill", name="shell"),
        call("shell__run", command="sleep 120", timeout_seconds=300),
        {"content": "slept"},
    ]
}


def test_ctrl_c_cancels_the_running_tasks_and_stops_the_server(tmp_path: Path) -> None:
    write_job(tmp_path, SLEEPER, SLEEPER_SCRIPT, "sleeper")
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "serve", "sleeper.yaml", "--port", "0",
         "--trace-dir", "runs"],
        cwd=tmp_path, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    answers: list[dict[str, Any]] = []
    try:
        assert process.stderr is not None
        first = process.stderr.readline()
        assert first.startswith("serving "), first + process.stderr.read()
        url = first.rsplit(" at ", 1)[1].strip()
        message = {"role": "ROLE_USER", "messageId": "m-1", "parts": [{"text": "Sleep."}]}
        # A client that waits for the task's end on an open request, as a blocking send does.
        request = rpc("SendMessage", {"message": message})
        waiting = threading.Thread(
            target=lambda: answers.append(
                httpx.post(url, json=request, headers=VERSION, timeout=60).json()
            )
        )
        waiting.start()
        deadline = time.monotonic() + 30
        while not any("shell__run" in p.read_text() for p in (tmp_path / "runs").glob("*.jsonl")):
            assert time.monotonic() < deadline, "the run never started its command"
            time.sleep(0.1)
        process.send_signal(signal.SIGINT)
        started = time.monotonic()
        process.wait(timeout=20)
        stopped_in = time.monotonic() - started
        waiting.join(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert stopped_in < 10, f"stopped in {stopped_in:.1f} s"
    [answer] = answers
    assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_CANCELED"
    [trace] = (tmp_path / "runs").glob("*.jsonl")
    events = list(trace_lines(trace))
    assert events[-1]["type"] == "job_end" and events[-1]["status"] == "cancelled"


# --- A served task that waits for an answer, across processes ------------------------------

PICKER_CALLER = """\
name: caller
model: scripted:SCRIPT
agents:
  picker: {a2a: "URL", description: Another process's picker job.}
goal: Ask the picker.
"""


def run_cli(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=folder, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        env={**os.environ, "NO_COLOR": "1"},
    )  # fmt: skip


def test_a_remote_question_waits_and_resume_answers_it_on_the_same_remote_task(
    tmp_path: Path,
) -> None:
    server_folder, client_folder = tmp_path / "a", tmp_path / "b"
    write_job(server_folder, PICKER, PICKER_SCRIPT, "picker")
    with serving(server_folder, "picker.yaml", "--trace-dir", "runs") as (url, _):
        write_job(
            client_folder,
            PICKER_CALLER.replace("URL", url),
            {"goal": [call("fork", tasks=[{"id": "far", "agent": "picker",
                                           "task": "Pick a city."}]),
                      {"content": "the picker picked"}]},
            "caller",
        )  # fmt: skip
        first = run_cli(client_folder, "run", "caller.yaml", "--trace", "b.jsonl")
        [asked] = [e for e in trace_lines(client_folder / "b.jsonl")
                   if e["type"] == "input_request"]  # fmt: skip
        second = run_cli(client_folder, "resume", "b.jsonl", "--answer", "Rome", "--json")
    shown = run_cli(client_folder, "trace", "show", "b.jsonl")
    assert first.returncode == 5, first.stderr
    assert f"{asked['request']['id']}  remote agent 'picker' asks (remote; answer text)" in (
        first.stderr
    )
    assert '\\"question\\": \\"Which city?\\"' in first.stderr  # its text, quoted as data
    assert "answer: orchestrator resume b.jsonl --answer VALUE" in first.stderr
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["status"] == "completed"
    assert "  far  [completed]" in shown.stdout  # waited, then went on
    assert f"{asked['request']['id']}  goal/far (remote)" in shown.stdout
    assert 'answered "Rome"' in shown.stdout
    caller = list(trace_lines(client_folder / "b.jsonl"))
    [remote_id] = {e["task_id"] for e in caller if e["type"] == "a2a_task"}
    [sent] = [e for e in caller if e["type"] == "a2a_send" and e.get("answer")]
    assert (sent["task_id"], sent["answer"]) == (remote_id, asked["request"]["id"])
    assert asked["request"]["state"]["task_id"] == remote_id
    observation = [str(e["message"]["content"]) for e in caller if e["type"] == "message"
                   and e["message"]["role"] == "tool"][-1]  # fmt: skip
    assert "### far [completed]" in observation and "going to Rome" in observation
    [served_trace] = (server_folder / "runs").glob("*.jsonl")
    served = list(trace_lines(served_trace))
    assert {e["task_id"] for e in served if e["type"] == "a2a_task"} == {remote_id}
    assert [e["answer"]["value"] for e in served if e["type"] == "input_answer"] == ["Rome"]
    assert [e["status"] for e in served if e["type"] == "job_end"] == [
        "input_required",
        "completed",
    ]


def test_a_waiting_task_outlives_a_restart_of_serve(tmp_path: Path) -> None:
    """Killed (no chance to tidy up) while a task waits for its approval: the server started
    again on the same folder shows the task waiting, to its owner only, and the owner's next
    message on it answers it."""
    write_job(tmp_path, ASK, ASK_SCRIPT, "asker")
    tokens = {"SERVE_TOKENS": "alice-token-41c2, mallory-token-0f9e"}
    alice = {**VERSION, "Authorization": "Bearer alice-token-41c2"}
    mallory = {**VERSION, "Authorization": "Bearer mallory-token-0f9e"}
    args = ("asker.yaml", "--trace-dir", "runs", "--token-env", "SERVE_TOKENS")
    message = {"role": "ROLE_USER", "messageId": "m-1", "parts": [{"text": "Touch it."}]}
    with serving(tmp_path, *args, env=tokens) as (url, process):
        sent = httpx.post(url, json=rpc("SendMessage", {"message": message}), headers=alice,
                          timeout=60).json()  # fmt: skip
        process.kill()
        process.wait()
    task = sent["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    with serving(tmp_path, *args, env=tokens) as (url, _):
        shown = httpx.post(url, json=rpc("GetTask", {"id": task["id"]}), headers=alice).json()
        hidden = httpx.post(url, json=rpc("GetTask", {"id": task["id"]}), headers=mallory).json()
        answer = {
            "role": "ROLE_USER", "messageId": "m-2", "taskId": task["id"],
            "contextId": task["contextId"], "parts": [{"text": "yes"}],
        }  # fmt: skip
        stolen = httpx.post(url, json=rpc("SendMessage", {"message": answer}), headers=mallory,
                            timeout=60).json()  # fmt: skip
        with httpx.stream(
            "POST", url, json=rpc("SendStreamingMessage", {"message": answer}),
            headers=alice, timeout=60,
        ) as response:  # fmt: skip
            results = sse_results(response)
    status = shown["result"]["status"]
    assert status["state"] == "TASK_STATE_INPUT_REQUIRED"
    [text, data] = status["message"]["parts"]
    [request] = data["data"]["requests"]
    assert (request["kind"], request["tool"]) == ("approval", "shell__run")
    assert json.dumps(request["question"]) in text["text"]
    assert "not found" in hidden["error"]["message"]
    assert "not found" in stolen["error"]["message"]
    updates = [r["statusUpdate"]["status"] for r in results if "statusUpdate" in r]
    assert updates[-1]["state"] == "TASK_STATE_COMPLETED"
    assert (tmp_path / "work" / "approved.txt").is_file()
    assert json.loads((tmp_path / "runs" / "a2a-waiting.json").read_text()) == []
    [trace] = (tmp_path / "runs").glob("*.jsonl")
    events = list(trace_lines(trace))
    assert [e["status"] for e in events if e["type"] == "job_end"] == [
        "input_required",
        "completed",
    ]
    [given] = [e["answer"] for e in events if e["type"] == "input_answer"]
    assert (given["id"], given["value"]) == (request["id"], True)
