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

from a2a_helpers import call, write_job

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow
VERSION = {"A2A-Version": "1.0"}


@contextmanager
def serving(folder: Path, *args: str) -> Iterator[str]:
    """`orchestrator serve ARGS --port 0` in `folder`; yields the URL it prints."""
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "serve", *args, "--port", "0"],
        cwd=folder,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stderr is not None
        first = process.stderr.readline()
        assert first.startswith("serving "), first + process.stderr.read()
        yield first.rsplit(" at ", 1)[1].strip()
    finally:
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
    with serving(tmp_path, "quickstart.yaml", "--trace-dir", "runs") as url:
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
    with serving(server_folder, "helper.yaml", "--trace-dir", "runs") as url:
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
