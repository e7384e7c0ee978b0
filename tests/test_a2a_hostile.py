"""A2A under attack, both ways, on 127.0.0.1: hostile clients of `orchestrator serve` (other
clients' tasks, memory, secrets in file names) and hostile remote agents of a run (memory,
trace volume, echoed credentials, more tasks than `max_calls`)."""

from __future__ import annotations

import asyncio
import os
import re
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import httpx
import pytest
from trace_lines import trace_lines

pytest.importorskip("a2a", reason="the [a2a] extra is not installed")

from a2a.client import Client, ClientConfig, create_client
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskState,
)
from a2a.utils.errors import A2AError
from a2a_helpers import ASK, ASK_SCRIPT, call, load_served, served, write_job
from a2a_servers import EchoAgent, hostile_agent, sdk_agent
from google.protobuf.json_format import MessageToDict

from orchestrator.jobs import load_job
from orchestrator.planner import run_job

WRITER = """\
name: writer
model: scripted:SCRIPT
permissions: {workspace: ./work}
goal: Overwritten.
"""


def writer_script(file_name: str) -> dict[str, Any]:
    return {
        "goal": [
            call("load_skill", name="files"),
            call("files__write_file", path=file_name, content="the report\n"),
            {"content": "Wrote it."},
        ]
    }


def message(text: str, task_id: str = "", context_id: str = "", **meta: str) -> Message:
    sent = Message(
        role=Role.ROLE_USER,
        message_id=os.urandom(8).hex(),
        task_id=task_id,
        context_id=context_id,
        parts=[Part(text=text)],
    )
    if meta:
        sent.metadata.update(meta)
    return sent


async def client_as(url: str, bearer: str | None = None, streaming: bool = True) -> Client:
    headers = {"Authorization": f"Bearer {bearer}"} if bearer is not None else {}
    http = httpx.AsyncClient(headers=headers, timeout=30)
    return await create_client(url, ClientConfig(streaming=streaming, httpx_client=http))


async def until_input_required(client: Client, text: str) -> tuple[str, str]:
    """Send `text` as a new task; its task and context ids once it waits for input."""
    task_id = context_id = ""
    async for response in client.send_message(SendMessageRequest(message=message(text))):
        if response.HasField("task"):
            task_id, context_id = response.task.id, response.task.context_id
        update = response.status_update
        if update.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            break
    return task_id, context_id


async def ended(client: Client, text: str, **meta: str) -> list[StreamResponse]:
    request = SendMessageRequest(message=message(text, **meta))
    return [response async for response in client.send_message(request)]


# --- Serving: one client and another's tasks ------------------------------------------------


async def test_a_client_neither_sees_nor_steers_another_clients_task(tmp_path: Path) -> None:
    job = load_served(write_job(tmp_path, ASK, ASK_SCRIPT, "asker"))
    tokens = ["alice-token-5e1c0d", "mallory-token-9a7b2f"]
    async with served([job], tmp_path / "runs", tokens=tokens) as url:
        alice = await client_as(url, tokens[0])
        mallory = await client_as(url, tokens[1])
        task_id, context_id = await until_input_required(alice, "Touch the file")
        # Mallory lists nothing of Alice's, cannot read her task, nor answer its question.
        listed = await mallory.list_tasks(ListTasksRequest())
        assert [task.id for task in listed.tasks] == []
        with pytest.raises(A2AError, match="not found"):
            await mallory.get_task(GetTaskRequest(id=task_id))
        with pytest.raises(A2AError, match="not found"):
            await ended(mallory, "yes", task_id=task_id, context_id=context_id)
        with pytest.raises(A2AError, match="not found"):  # nor cancel her run
            await mallory.cancel_task(CancelTaskRequest(id=task_id))
        await asyncio.sleep(0.2)
        (trace,) = (tmp_path / "runs").glob("*.jsonl")
        events = list(trace_lines(trace))
        assert [e["status"] for e in events if e["type"] == "job_end"] == ["input_required"]
        assert [e for e in events if e["type"] == "input_answer"] == []  # nothing answered
        # Alice's task still waits for her, and she sees it.
        mine = await alice.get_task(GetTaskRequest(id=task_id))
        assert mine.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert [task.id for task in (await alice.list_tasks(ListTasksRequest())).tasks] == [task_id]
        await alice.close()
        await mallory.close()
    assert not (tmp_path / "work" / "approved.txt").exists()


async def test_an_oversized_answer_is_refused_and_the_task_still_waits(tmp_path: Path) -> None:
    job = load_served(write_job(tmp_path, ASK, ASK_SCRIPT, "asker"))
    async with served([job], tmp_path / "runs") as url:
        alice = await client_as(url, "alice-7d1e")
        task_id, context_id = await until_input_required(alice, "Touch the file")
        huge = "y" * 70_000
        refused = await ended(alice, huge, task_id=task_id, context_id=context_id)
        many = message("yes", task_id=task_id, context_id=context_id)
        data = many.parts.add()
        data.data.struct_value.update({"answers": {"0badc0de": "x" * 70_000}})
        refused_data = [r async for r in alice.send_message(SendMessageRequest(message=many))]
        still = await alice.get_task(GetTaskRequest(id=task_id))
        answered = await ended(alice, "yes", task_id=task_id, context_id=context_id)
        await alice.close()
    for responses in (refused, refused_data):
        [update] = [r.status_update.status for r in responses if r.HasField("status_update")]
        assert update.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert "over 64000 characters" in update.message.parts[0].text
    assert still.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    final = answered[-1].status_update.status
    assert final.state == TaskState.TASK_STATE_COMPLETED
    assert (tmp_path / "work" / "approved.txt").exists()


async def test_without_a_bearer_token_no_client_lists_tasks(tmp_path: Path) -> None:
    job = load_served(write_job(tmp_path, WRITER, writer_script("out.txt"), "writer"))
    async with served([job], tmp_path / "runs") as url:
        alice = await client_as(url)
        responses = await ended(alice, "Write it")
        task_id = responses[0].task.id
        stranger = await client_as(url)
        with pytest.raises(A2AError, match="bearer token"):
            await stranger.list_tasks(ListTasksRequest())
        # A client that names itself with a bearer token of its own sees only its tasks.
        named = await client_as(url, "a-name-of-my-own-3c9d")
        assert list((await named.list_tasks(ListTasksRequest())).tasks) == []
        with pytest.raises(A2AError, match="not found"):
            await named.get_task(GetTaskRequest(id=task_id))
        # The creator still has its task (by its id, which only it was given).
        assert (await alice.get_task(GetTaskRequest(id=task_id))).id == task_id
        for client in (alice, stranger, named):
            await client.close()


# --- Serving: what the server keeps -----------------------------------------------------------


async def test_rejected_and_ended_tasks_are_not_kept_for_ever(tmp_path: Path) -> None:
    job = load_served(write_job(tmp_path, WRITER, writer_script("out.txt"), "writer"))
    body = "x" * 300_000
    async with served([job], tmp_path / "runs", keep_tasks=5, keep_seconds=3600) as url:
        client = await client_as(url, streaming=False)
        ids = []
        for _ in range(12):  # rejected: no such job
            [response] = await ended(client, body, skill="nothing")
            assert response.task.status.state == TaskState.TASK_STATE_REJECTED
            ids.append(response.task.id)
        with pytest.raises(A2AError, match="not found"):
            await client.get_task(GetTaskRequest(id=ids[0]))
        last = await client.get_task(GetTaskRequest(id=ids[-1]))
        assert last.status.state == TaskState.TASK_STATE_REJECTED
        kept = sum(len(part.text) for sent in last.history for part in sent.parts)
        assert kept < 1_000  # the rejected message's body is not kept
        await client.close()


async def test_ended_tasks_are_dropped_after_their_age(tmp_path: Path) -> None:
    job = load_served(write_job(tmp_path, WRITER, writer_script("out.txt"), "writer"))
    async with served([job], tmp_path / "runs", keep_tasks=100, keep_seconds=0.5) as url:
        client = await client_as(url, streaming=False)
        [first] = await ended(client, "old", skill="nothing")
        await asyncio.sleep(1.0)
        [second] = await ended(client, "new", skill="nothing")
        with pytest.raises(A2AError, match="not found"):
            await client.get_task(GetTaskRequest(id=first.task.id))
        assert (await client.get_task(GetTaskRequest(id=second.task.id))).id == second.task.id
        await client.close()


async def test_a_secret_used_as_a_file_name_is_masked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REPORT_SECRET", "s3cr3t-n4me-77")
    script = writer_script("s3cr3t-n4me-77.txt")
    job = load_served(write_job(tmp_path, WRITER, script, "writer"))
    async with served([job], tmp_path / "runs") as url:
        client = await client_as(url)
        responses = await ended(client, "Write it")
        task = await client.get_task(GetTaskRequest(id=responses[0].task.id))
        await client.close()
    sent = [MessageToDict(r) for r in responses] + [MessageToDict(task)]
    assert "s3cr3t-n4me-77" not in str(sent)
    [artifact] = task.artifacts
    assert artifact.name == "[REDACTED].txt"
    assert artifact.parts[0].filename == "[REDACTED].txt"


# --- Consuming: hostile remote agents -------------------------------------------------------

REMOTE = """\
name: remote
model: scripted:SCRIPT
budget: {max_tokens: 100000}
agents:
  far: {a2a: "URL", time_limit: LIMIT, description: A remote agent.EXTRA}
goal: Use the remote agent.
"""


def remote_job(
    tmp_path: Path, url: str, script: dict[str, Any], limit: float = 30, extra: str = ""
) -> Path:
    spec = REMOTE.replace("URL", url).replace("LIMIT", str(limit)).replace("EXTRA", extra)
    return write_job(tmp_path, spec, script, "remote")


def fork_far(task: str = "anything") -> dict[str, Any]:
    return {"goal": [call("fork", tasks=[{"id": "far", "agent": "far", "task": task}]),
                     {"content": "done"}]}  # fmt: skip


def observation(trace: Path) -> str:
    for event in trace_lines(trace):
        content = str((event.get("message") or {}).get("content", ""))
        if content.startswith("Fork finished"):
            return content
    raise AssertionError("no fork observation")


async def test_appended_artifact_chunks_are_capped_while_they_arrive(tmp_path: Path) -> None:
    trace = tmp_path / "run.jsonl"
    async with hostile_agent("flood") as (url, _):
        job = load_job(remote_job(tmp_path, url, fork_far()))
        tracemalloc.start()
        try:
            result = await run_job(job, trace=trace)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert result.status == "completed"
    # 40 MB came (kept whole, they peaked at 134 MB); what is kept stays at the cap, and the
    # peak is the chunks in flight, on both sides of the connection (one process here).
    assert peak < 40_000_000, f"peak {peak / 1e6:.0f} MB"
    assert "not kept: the remote sent more than 200000 characters" in observation(trace)
    [end] = [e for e in trace_lines(trace) if e["type"] == "a2a_end"]
    assert end["truncated_chars"] > 30_000_000


async def test_artifact_names_count_under_the_cap_and_cannot_break_the_observation(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "run.jsonl"
    async with hostile_agent("names") as (url, _):
        result = await run_job(load_job(remote_job(tmp_path, url, fork_far())), trace=trace)
    assert result.status == "completed"
    seen = observation(trace)
    assert "<injected/>" not in seen  # a name cannot close the tag it is shown in
    names = re.findall(r'<artifact name="([^"]*)">', seen)
    assert names and max(len(name) for name in names) <= 200  # each was 100,000 long


async def test_an_endless_stream_of_status_updates_is_coalesced_in_the_trace(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "run.jsonl"
    async with hostile_agent("chatter") as (url, _):
        job = load_job(remote_job(tmp_path, url, fork_far(), limit=3))
        result = await asyncio.wait_for(run_job(job, trace=trace), 30)
    assert result.status == "completed"
    assert "time limit of 3 s reached" in observation(trace)
    statuses = [e for e in trace_lines(trace) if e["type"] == "a2a_status"]
    assert len(statuses) <= 60, len(statuses)  # the first 50, then about one a second
    assert any(e.get("coalesced", 0) > 0 for e in statuses)
    [end] = [e for e in trace_lines(trace) if e["type"] == "a2a_end"]
    assert end["status_updates"] > 1_000
    assert end["status_updates"] == len(statuses) + end["status_coalesced"]
    assert trace.stat().st_size < 200_000


async def test_an_echoed_bearer_token_is_masked_everywhere_the_run_writes(
    tmp_path: Path,
) -> None:
    token = "b3arer-value-8c21f0"
    script = fork_far()
    async with hostile_agent("echo_credentials") as (url, called):
        path = remote_job(tmp_path, url, script, extra=", token_env: FAR_BEARER")
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "orchestrator", "run", str(path), "--trace",
            str(tmp_path / "run.jsonl"), "--json",
            cwd=tmp_path,
            env={**os.environ, "FAR_BEARER": token},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(process.communicate(), 60)
    assert called == ["SendStreamingMessage"], err.decode()  # sent the token, echoed it
    assert process.returncode == 0, err.decode()
    written = (tmp_path / "run.jsonl").read_text()
    assert "you sent Bearer [REDACTED]" in written
    for what in (written, out.decode(), err.decode()):
        assert token not in what


async def test_max_calls_counts_every_task_of_the_run(tmp_path: Path) -> None:
    agent = EchoAgent()
    forks_far = [call("fork", tasks=[{"id": "far", "agent": "echo", "task": "hi"}]),
                 {"content": "forked"}]  # fmt: skip
    script = {
        "goal": [
            call("fork", tasks=[{"id": name, "task": "Fork the echo agent."}
                                for name in ("a", "b", "c")]),
            {"content": "done"},
        ],
        **{f"goal/{name}": forks_far for name in ("a", "b", "c")},
    }  # fmt: skip
    spec = """\
name: remote
model: scripted:SCRIPT
agents:
  echo: {a2a: "URL", max_calls: 1, description: Echoes.}
goal: Go.
"""
    async with sdk_agent(agent) as url:
        path = write_job(tmp_path, spec.replace("URL", url), script, "remote")
        result = await run_job(load_job(path), trace=tmp_path / "run.jsonl")
    assert result.status == "completed"
    assert agent.received == ["hi"]
    refused = [e for e in trace_lines(tmp_path / "run.jsonl") if e["type"] == "task_end"
               and "its cap for one run (max_calls)" in str(e.get("reason"))]  # fmt: skip
    assert len(refused) == 2


@pytest.mark.slow
@pytest.mark.usefixtures("ray_cluster")
async def test_max_calls_counts_every_task_of_the_run_across_ray_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The steps run on two Ray workers, each forking the remote agent: one count for the
    run still caps them, not one per worker process."""
    monkeypatch.chdir(tmp_path)  # the workers read the scripted model's file from here
    agent = EchoAgent()
    forks_far = [call("fork", tasks=[{"id": "far", "agent": "echo", "task": "hi"}]),
                 {"content": "forked"}]  # fmt: skip
    script = {name: forks_far for name in ("a", "b", "c")}
    spec = """\
name: remote
model: scripted:SCRIPT
executor: {type: ray, workers: 2}
budget: {max_parallel: 3}
agents:
  echo: {a2a: "URL", max_calls: 1, description: Echoes.}
steps:
  - {id: a, task: Fork the echo agent.}
  - {id: b, task: Fork the echo agent.}
  - {id: c, task: Fork the echo agent.}
"""
    async with sdk_agent(agent) as url:
        path = write_job(tmp_path, spec.replace("URL", url), script, "remote")
        result = await run_job(load_job(path), trace=tmp_path / "run.jsonl")
    assert result.status == "completed"
    assert agent.received == ["hi"]
    events = trace_lines(tmp_path / "run.jsonl")
    workers = {e["worker"] for e in events if e["type"] == "task_start" and e["agent"] in "abc"}
    assert len(workers) == 2  # the steps did run in two processes
    refused = [e for e in events if e["type"] == "task_end"
               and "its cap for one run (max_calls)" in str(e.get("reason"))]  # fmt: skip
    assert len(refused) == 2
