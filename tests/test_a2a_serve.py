"""`orchestrator serve`, driven by the A2A SDK's own client: card, send, stream, get, cancel,
subscribe and `input-required`, on 127.0.0.1 with real specs and scripted models."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from trace_lines import trace_lines

pytest.importorskip("a2a", reason="the [a2a] extra is not installed")

from a2a.client import A2ACardResolver, Client, ClientConfig, create_client
from a2a.helpers import get_message_text
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a_helpers import (
    ASK,
    ASK_SCRIPT,
    PICKER,
    PICKER_SCRIPT,
    call,
    load_served,
    served,
    write_job,
)
from google.protobuf.json_format import MessageToDict

from orchestrator.errors import ConfigError

WRITER = """\
name: writer
model: scripted:SCRIPT
permissions: {workspace: ./work}
goal: Overwritten by each message.
"""
WRITER_SCRIPT = {
    "goal": [
        call("load_skill", name="files"),
        call("fork", tasks=[{"id": "note", "task": "Say hello."}]),
        call("files__write_file", path="out.txt", content="hello from the run\n"),
        {"content": "Wrote out.txt."},
    ],
    "goal/note": [{"content": "hello from the sub-agent"}],
}
SLOW = """\
name: slow
model: scripted:SCRIPT
permissions: {workspace: ./work, shell: true}
goal: Overwritten.
"""
SLOW_SCRIPT = {
    "goal": [
        call("load_skill", name="shell"),
        call("shell__run", command="sleep 30", timeout_seconds=60),
        {"content": "slept"},
    ]
}


def user_message(text: str, task_id: str = "", context_id: str = "") -> Message:
    return Message(
        role=Role.ROLE_USER,
        message_id=f"m-{text[:8]}-{task_id[:8]}",
        task_id=task_id,
        context_id=context_id,
        parts=[Part(text=text)],
    )


async def client_for(url: str, streaming: bool = True) -> Client:
    # A cancel waits for its run to end (a sandboxed command killed, the record completed):
    # on a loaded machine that can pass httpx's 5 s default.
    http = httpx.AsyncClient(timeout=60)
    return await create_client(url, ClientConfig(streaming=streaming, httpx_client=http))


def states(responses: list[StreamResponse]) -> list[str]:
    found = []
    for response in responses:
        kind = response.WhichOneof("payload")
        if kind == "status_update":
            found.append(TaskState.Name(response.status_update.status.state))
        elif kind == "task":
            found.append(TaskState.Name(response.task.status.state))
    return found


def status_texts(responses: list[StreamResponse]) -> list[str]:
    return [
        get_message_text(r.status_update.status.message)
        for r in responses
        if r.WhichOneof("payload") == "status_update"
    ]


async def ask_once(url: str, text: str, *, streaming: bool = True) -> list[StreamResponse]:
    """Send the served agent one message as a new client, and collect what comes back."""
    client = await client_for(url, streaming=streaming)
    try:
        return await collect(client.send_message(SendMessageRequest(message=user_message(text))))
    finally:
        await client.close()


async def collect(stream: Any, until: set[int] | None = None) -> list[StreamResponse]:
    responses = []
    async for response in stream:
        responses.append(response)
        kind = response.WhichOneof("payload")
        if until and kind == "status_update" and response.status_update.status.state in until:
            break
    return responses


def traces(folder: Path) -> list[list[dict[str, Any]]]:
    return [list(trace_lines(path)) for path in sorted(folder.glob("*.jsonl"))]


async def test_the_card_names_each_job_as_a_skill(tmp_path: Path) -> None:
    jobs = [
        load_served(write_job(tmp_path, WRITER, WRITER_SCRIPT, "writer")),
        load_served(write_job(tmp_path, SLOW, SLOW_SCRIPT, "slow")),
    ]
    async with served(jobs, tmp_path / "runs") as url, httpx.AsyncClient() as http:
        card = await A2ACardResolver(http, url).get_agent_card()
    assert [skill.id for skill in card.skills] == ["writer", "slow"]
    assert "the goal" in card.skills[0].description
    assert list(card.default_input_modes) == ["text/plain"]
    assert card.capabilities.streaming
    [interface] = card.supported_interfaces
    assert (interface.url, interface.protocol_binding) == (url, "JSONRPC")
    assert interface.protocol_version == "1.0"


async def test_a_message_runs_the_job_and_streams_its_steps(tmp_path: Path) -> None:
    job = load_served(write_job(tmp_path, WRITER, WRITER_SCRIPT, "writer"))
    runs = tmp_path / "runs"
    async with served([job], runs) as url:
        client = await client_for(url)
        responses = await collect(client.send_message(SendMessageRequest(message=user_message(
            "Write {the} file"))))  # fmt: skip
        task_id = responses[0].task.id
        fetched = await client.get_task(GetTaskRequest(id=task_id))
        await client.close()
    assert states(responses)[0] == "TASK_STATE_SUBMITTED"
    assert states(responses)[-1] == "TASK_STATE_COMPLETED"
    texts = status_texts(responses)
    assert "goal started" in texts
    assert "goal/note started" in texts and "goal/note completed" in texts
    assert texts[-1] == "Wrote out.txt."
    artifacts = [r.artifact_update.artifact for r in responses if r.HasField("artifact_update")]
    assert [(a.name, a.parts[0].text) for a in artifacts] == [("out.txt", "hello from the run\n")]
    # get returns the same task, ended, with its artifact and the final message.
    assert fetched.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_message_text(fetched.status.message) == "Wrote out.txt."
    assert [a.name for a in fetched.artifacts] == ["out.txt"]
    usage = MessageToDict(fetched.status.message)["parts"][1]["data"]["usage"]
    assert usage["total_tokens"] > 0
    # One run, one trace, tied to the task; the message (braces and all) was its goal.
    [events] = traces(runs)
    assert events[0]["type"] == "a2a_task" and events[0]["task_id"] == task_id
    assert events[-1]["type"] == "job_end" and events[-1]["status"] == "completed"
    goal = next(e for e in events if e["type"] == "message" and e["agent"] == "goal"
                and e["message"]["role"] == "user")  # fmt: skip
    assert goal["message"]["content"] == "Write {the} file"


async def test_send_without_streaming_returns_the_ended_task(tmp_path: Path) -> None:
    job = load_served(write_job(tmp_path, WRITER, WRITER_SCRIPT, "writer"))
    async with served([job], tmp_path / "runs") as url:
        [response] = await ask_once(url, "Write it", streaming=False)
    assert response.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_message_text(response.task.status.message) == "Wrote out.txt."


async def test_cancel_stops_the_run_and_its_trace_ends(tmp_path: Path) -> None:
    job = load_served(write_job(tmp_path, SLOW, SLOW_SCRIPT, "slow"))
    runs = tmp_path / "runs"
    async with served([job], runs) as url:
        client = await client_for(url)
        stream = client.send_message(SendMessageRequest(message=user_message("Sleep")))
        task_id = ""
        async for response in stream:
            if response.HasField("task"):
                task_id = response.task.id
            if "goal started" in status_texts([response]):
                break
        await stream.aclose()
        watcher = await client_for(url)
        followed = asyncio.create_task(
            collect(watcher.subscribe(SubscribeToTaskRequest(id=task_id)))
        )
        await asyncio.sleep(0.2)
        cancelled = await client.cancel_task(CancelTaskRequest(id=task_id))
        fetched = await client.get_task(GetTaskRequest(id=task_id))
        seen = await asyncio.wait_for(followed, 30)
        await client.close()
        await watcher.close()
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert fetched.status.state == TaskState.TASK_STATE_CANCELED
    assert "TASK_STATE_CANCELED" in states(seen)
    [events] = traces(runs)
    assert events[-1]["type"] == "job_end" and events[-1]["status"] == "cancelled"
    results = [e["message"]["content"] for e in events
               if e["type"] == "message" and e["message"]["role"] == "tool"]  # fmt: skip
    assert results[-1].startswith("Aborted: the run was cancelled")


@pytest.mark.parametrize(("answer", "allowed"), [("yes", True), ("no", False)])
async def test_an_ask_call_waits_for_the_clients_answer(
    tmp_path: Path, answer: str, allowed: bool
) -> None:
    job = load_served(write_job(tmp_path, ASK, ASK_SCRIPT, "asker"))
    runs = tmp_path / "runs"
    async with served([job], runs) as url:
        client = await client_for(url)
        first = await collect(
            client.send_message(SendMessageRequest(message=user_message("Make the file"))),
            until={TaskState.TASK_STATE_INPUT_REQUIRED},
        )
        task = first[0].task
        question = first[-1].status_update.status.message
        assert first[-1].status_update.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert "shell__run" in get_message_text(question)
        [approval] = MessageToDict(question)["parts"][1]["data"]["requests"]
        assert (approval["kind"], approval["form"]) == ("approval", "yes_no")
        assert approval["tool"] == "shell__run"
        assert '{"command": "touch approved.txt"}' in approval["question"]
        rest = await collect(client.send_message(SendMessageRequest(
            message=user_message(answer, task.id, task.context_id))))  # fmt: skip
        await client.close()
    assert states(rest)[-1] == "TASK_STATE_COMPLETED"
    assert (tmp_path / "work" / "approved.txt").exists() is allowed
    [events] = traces(runs)
    [answered] = [e for e in events if e["type"] == "input_answer"]
    assert (answered["answer"]["id"], answered["answer"]["value"]) == (approval["id"], allowed)
    [decision] = [e for e in events if e["type"] == "approval"]
    assert decision["decision"] == ("approved" if allowed else "denied")


async def test_a_wrong_answer_keeps_the_task_waiting_and_says_why(tmp_path: Path) -> None:
    """The run waits with nothing denied meanwhile (no time limit on an answer); an answer
    that does not fit is not taken, the task still waits, and a right one goes on."""
    job = load_served(write_job(tmp_path, PICKER, PICKER_SCRIPT, "picker"))
    runs = tmp_path / "runs"
    async with served([job], runs) as url:
        client = await client_for(url)
        first = await collect(
            client.send_message(SendMessageRequest(message=user_message("Pick one"))),
            until={TaskState.TASK_STATE_INPUT_REQUIRED},
        )
        task = first[0].task
        [request] = MessageToDict(first[-1].status_update.status.message)["parts"][1]["data"][
            "requests"
        ]
        wrong = await collect(client.send_message(SendMessageRequest(
            message=user_message("Lisbon", task.id, task.context_id))))  # fmt: skip
        fetched = await client.get_task(GetTaskRequest(id=task.id))
        answer = Message(
            role=Role.ROLE_USER,
            message_id="m-answer",
            task_id=task.id,
            context_id=task.context_id,
        )
        answer.parts.add().data.struct_value.update({"answers": {request["id"]: 2}})
        rest = await collect(client.send_message(SendMessageRequest(message=answer)))
        await client.close()
    assert (request["kind"], request["form"], request["choices"]) == (
        "question",
        "choice",
        ["Paris", "Rome"],
    )
    assert states(wrong) == ["TASK_STATE_INPUT_REQUIRED"]
    said = status_texts(wrong)[-1]
    assert said.startswith("Not taken: ") and "takes one of: 1. Paris, 2. Rome" in said
    assert json.dumps(request["question"]) in said  # the question, still shown as data
    assert fetched.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert states(rest)[-1] == "TASK_STATE_COMPLETED"
    [events] = traces(runs)
    [given] = [e["answer"] for e in events if e["type"] == "input_answer"]
    assert (given["id"], given["value"]) == (request["id"], "Rome")
    ended = [e["status"] for e in events if e["type"] == "job_end"]
    assert ended == ["input_required", "completed"]  # one trace, resumed: two attempts
    asked = [e["message"] for e in events if e["type"] == "message"
             and e["message"]["role"] == "tool" and e["message"]["name"] == "ask_user"]  # fmt: skip
    assert asked[-1]["content"] == "Rome"
    assert json.loads((runs / "a2a-waiting.json").read_text()) == []


async def test_tasks_of_one_job_take_its_workspace_in_turn(tmp_path: Path) -> None:
    """Two clients at once: each run's files are its own task's artifacts, never the other's,
    because runs that share a workspace go one after another."""
    script = {
        "goal": [
            call("load_skill", name="files"),
            {**call("files__write_file", path="brief.md", content="a brief\n"), "latency": 0.3},
            {"content": "Wrote brief.md."},
        ]
    }
    job = load_served(write_job(tmp_path, WRITER, script, "writer"))
    async with served([job], tmp_path / "runs") as url:
        client = await client_for(url)
        both = await asyncio.gather(
            *(
                collect(client.send_message(SendMessageRequest(message=user_message(text))))
                for text in ("first client", "second client")
            )
        )
        await client.close()
    assert [states(responses)[-1] for responses in both] == ["TASK_STATE_COMPLETED"] * 2
    assert any("waiting: another task is running" in text for r in both for text in status_texts(r))
    runs = traces(tmp_path / "runs")
    spans = sorted(
        (next(e["ts"] for e in run if e["type"] == "job_start"),
         next(e["ts"] for e in run if e["type"] == "job_end"))
        for run in runs
    )  # fmt: skip
    assert len(spans) == 2 and spans[0][1] <= spans[1][0]  # one after the other
    for responses in both:  # each task gets the file its own run wrote, once
        artifacts = [
            r.artifact_update.artifact.name
            for r in responses
            if r.WhichOneof("payload") == "artifact_update"
        ]
        assert artifacts == ["brief.md"]


async def test_secrets_are_masked_on_the_wire_as_in_the_trace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-live-4f9a8b7c6d5e4f3a2b1c"
    monkeypatch.setenv("BILLING_API_KEY", secret)
    script = {
        "goal": [
            call("load_skill", name="files"),
            call("files__write_file", path="key.txt", content=f"key={secret}\n"),
            {"content": f"The key is {secret}."},
        ]
    }
    job = load_served(write_job(tmp_path, WRITER, script, "writer"))
    async with served([job], tmp_path / "runs") as url:
        client = await client_for(url)
        responses = await collect(
            client.send_message(SendMessageRequest(message=user_message("Leak it")))
        )
        await client.close()
    wire = "".join(str(MessageToDict(r)) for r in responses)
    assert states(responses)[-1] == "TASK_STATE_COMPLETED"
    assert "key.txt" in wire and "The key is" in wire
    assert secret not in wire


async def test_a_message_goes_into_the_marked_input(tmp_path: Path) -> None:
    spec = """\
name: echo
model: scripted:SCRIPT
inputs: {topic: null, tone: plain}
steps:
  - {id: answer, task: "Write about {inputs.topic}, {inputs.tone}."}
"""
    job = load_served(write_job(tmp_path, spec, {"answer": [{"content": "ok"}]}, "echo"))
    runs = tmp_path / "runs"
    async with served([job], runs) as url:
        responses = await ask_once(url, "bees")
    assert states(responses)[-1] == "TASK_STATE_COMPLETED"
    [events] = traces(runs)
    prompt = next(e for e in events if e["type"] == "message" and e["agent"] == "answer"
                  and e["message"]["role"] == "user")  # fmt: skip
    assert prompt["message"]["content"] == "Write about bees, plain."


async def test_a_typed_answer_goes_on_the_wire_as_its_json_text(tmp_path: Path) -> None:
    """A step whose output type is a Python class: its value stays in the run, the message
    the client gets is the answer's JSON text."""
    (tmp_path / "served_types.py").write_text(
        "from pydantic import BaseModel\n\n\nclass Town(BaseModel):\n    name: str\n"
    )
    spec = """\
name: towns
model: scripted:SCRIPT
inputs: {topic: null}
steps:
  - {id: answer, task: "Name a town of {inputs.topic}.", output_schema: served_types.Town}
"""
    script = {"answer": [{"content": '{"name": "Paris"}'}]}
    job = load_served(write_job(tmp_path, spec, script, "towns"))
    async with served([job], tmp_path / "runs") as url:
        responses = await ask_once(url, "France")
    assert states(responses)[-1] == "TASK_STATE_COMPLETED"
    assert status_texts(responses)[-1] == '{"name":"Paris"}'


async def test_tasks_past_the_limit_are_rejected(tmp_path: Path) -> None:
    job = load_served(write_job(tmp_path, SLOW, SLOW_SCRIPT, "slow"))
    async with served([job], tmp_path / "runs", max_tasks=1) as url:
        client = await client_for(url)
        stream = client.send_message(SendMessageRequest(message=user_message("first")))
        first_id = ""
        async for response in stream:
            first_id = first_id or response.task.id
            if "goal started" in status_texts([response]):
                break
        await stream.aclose()
        second = await collect(client.send_message(SendMessageRequest(
            message=user_message("second"))))  # fmt: skip
        await client.cancel_task(CancelTaskRequest(id=first_id))
        await client.close()
    assert states(second)[-1] == "TASK_STATE_REJECTED"
    assert "--max-tasks" in status_texts(second)[-1]


async def test_a_new_task_is_rejected_while_max_waiting_tasks_wait_for_answers(
    tmp_path: Path,
) -> None:
    """Each waiting task keeps a trace and a record: a client cannot pile them up without end."""
    job = load_served(write_job(tmp_path, PICKER, PICKER_SCRIPT, "picker"))
    async with served([job], tmp_path / "runs", max_waiting=1) as url:
        client = await client_for(url)
        first = await collect(
            client.send_message(SendMessageRequest(message=user_message("Pick"))),
            until={TaskState.TASK_STATE_INPUT_REQUIRED},
        )
        waiting = first[0].task
        refused = await collect(client.send_message(SendMessageRequest(
            message=user_message("Pick again"))))  # fmt: skip
        answered = await collect(client.send_message(SendMessageRequest(
            message=user_message("Rome", waiting.id, waiting.context_id))))  # fmt: skip
        taken = await collect(
            client.send_message(SendMessageRequest(message=user_message("Pick once more"))),
            until={TaskState.TASK_STATE_INPUT_REQUIRED},
        )
        await client.close()
    assert states(refused)[-1] == "TASK_STATE_REJECTED"
    assert "1 of your tasks wait for your answer" in status_texts(refused)[-1]
    assert "--max-waiting" in status_texts(refused)[-1]
    assert states(answered)[-1] == "TASK_STATE_COMPLETED"
    assert states(taken)[-1] == "TASK_STATE_INPUT_REQUIRED"  # answered, it made room


GATE = """\
name: gate
model: scripted:SCRIPT
permissions: {workspace: ./work, shell: true}
goal: Overwritten.
"""
GATE_SCRIPT = {
    "goal": [
        call("load_skill", name="shell"),
        call("shell__run", command="while [ ! -e go ]; do sleep 0.05; done", timeout_seconds=60),
        {"content": "let through"},
    ]
}


async def test_an_answer_past_the_task_limit_is_not_taken_and_the_task_still_waits(
    tmp_path: Path,
) -> None:
    """An answer starts a run, so `--max-tasks` holds for it as for a new task."""
    jobs = [
        load_served(write_job(tmp_path, PICKER, PICKER_SCRIPT, "picker")),
        load_served(write_job(tmp_path, GATE, GATE_SCRIPT, "gate")),
    ]
    async with served(jobs, tmp_path / "runs", max_tasks=1) as url:
        client = await client_for(url)
        first = await collect(
            client.send_message(SendMessageRequest(message=user_message("Pick"))),
            until={TaskState.TASK_STATE_INPUT_REQUIRED},
        )
        waiting = first[0].task
        busy = user_message("Wait at the gate")
        busy.metadata.update({"skill": "gate"})
        started: asyncio.Queue[None] = asyncio.Queue()

        async def through_the_gate() -> list[StreamResponse]:
            responses = []
            async for response in client.send_message(SendMessageRequest(message=busy)):
                responses.append(response)
                started.put_nowait(None)
            return responses

        gate = asyncio.create_task(through_the_gate())
        await started.get()  # its run goes on: the one task the server takes
        refused = await collect(client.send_message(SendMessageRequest(
            message=user_message("Rome", waiting.id, waiting.context_id))))  # fmt: skip
        (tmp_path / "work" / "go").touch()
        passed = await gate
        taken = await collect(client.send_message(SendMessageRequest(
            message=user_message("Rome", waiting.id, waiting.context_id))))  # fmt: skip
        await client.close()
    assert states(refused) == ["TASK_STATE_INPUT_REQUIRED"]
    assert status_texts(refused)[-1].startswith("Not taken: busy: 1 tasks are running")
    assert states(passed)[-1] == "TASK_STATE_COMPLETED"
    assert states(taken)[-1] == "TASK_STATE_COMPLETED"


async def test_a_token_guards_every_request_but_the_card(tmp_path: Path) -> None:
    job = load_served(write_job(tmp_path, WRITER, WRITER_SCRIPT, "writer"))
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "none"}}
    async with (
        served([job], tmp_path / "runs", tokens=["s3cret"]) as url,
        httpx.AsyncClient() as http,
    ):
        card = await http.get(url + ".well-known/agent-card.json")
        bare = await http.post(url, json=body)
        wrong = await http.post(url, json=body, headers={"Authorization": "Bearer nope"})
        right = await http.post(url, json=body, headers={"Authorization": "Bearer s3cret"})
    assert card.status_code == 200 and "bearer" in card.json()["securitySchemes"]
    assert (bare.status_code, wrong.status_code) == (401, 401)
    assert right.status_code == 200 and "error" in right.json()  # no such task, but let in


async def test_a_web_page_cannot_start_a_run_on_a_loopback_server(tmp_path: Path) -> None:
    """A page the user has open posts to the local server (its browser adds `Origin`), or
    re-points its own name at 127.0.0.1 (DNS rebinding: the `Host` is the page's name)."""
    job = load_served(write_job(tmp_path, WRITER, WRITER_SCRIPT, "writer"))
    send = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "x"}]}},
    }
    async with served([job], tmp_path / "runs") as url, httpx.AsyncClient() as http:
        from_page = await http.post(url, json=send, headers={"Origin": "https://evil.example"})
        rebound = await http.post(url, json=send, headers={"Host": "evil.example:8000"})
        card = await http.get(url + ".well-known/agent-card.json")
        plain = await http.post(url, json={**send, "method": "GetTask", "params": {"id": "x"}})
    assert (from_page.status_code, rebound.status_code) == (403, 403)
    assert card.status_code == 200 and plain.status_code == 200
    assert traces(tmp_path / "runs") == []  # nothing ran


async def test_a_request_over_the_size_limit_is_refused(tmp_path: Path) -> None:
    job = load_served(write_job(tmp_path, WRITER, WRITER_SCRIPT, "writer"))

    async def chunks() -> Any:
        for _ in range(20):
            yield b"x" * 1_000

    async with (
        served([job], tmp_path / "runs", max_request_bytes=10_000) as url,
        httpx.AsyncClient() as http,
    ):
        big = await http.post(url, content=b"x" * 20_000)
        chunked = await http.post(url, content=chunks())
    assert big.status_code == 413
    assert chunked.status_code == 413
    assert traces(tmp_path / "runs") == []


async def test_serving_beyond_loopback_needs_a_token(tmp_path: Path) -> None:
    job = load_served(write_job(tmp_path, WRITER, WRITER_SCRIPT, "writer"))
    with pytest.raises(ConfigError, match="needs a bearer token"):
        async with served([job], tmp_path / "runs", host="0.0.0.0"):
            pass


def test_a_job_with_no_place_for_the_message_is_refused(tmp_path: Path) -> None:
    from orchestrator.a2a.served import ServeError, message_input

    spec = """\
name: two
model: scripted:SCRIPT
inputs: {a: null, b: null}
steps:
  - {id: s, task: "{inputs.a} {inputs.b}"}
"""
    job = load_served(write_job(tmp_path, spec, {"s": [{"content": "ok"}]}, "two"))
    with pytest.raises(ServeError, match="exactly one required input"):
        message_input(job)


async def test_a_link_the_run_made_to_a_file_elsewhere_is_not_sent(tmp_path: Path) -> None:
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("the secret outside the workspace\n")
    spec = """\
name: linker
model: scripted:SCRIPT
permissions: {workspace: ./work, shell: true}
goal: Overwritten.
"""
    script = {
        "goal": [
            call("load_skill", name="shell"),
            call("shell__run", command=f"ln -s {secret} leak.txt && echo fine > ok.txt"),
            {"content": "linked"},
        ]
    }
    (tmp_path / "work").mkdir()
    job = load_served(write_job(tmp_path, spec, script, "linker"))
    async with served([job], tmp_path / "runs") as url:
        responses = await ask_once(url, "Link it")
    assert states(responses)[-1] == "TASK_STATE_COMPLETED"
    artifacts = {
        r.artifact_update.artifact.name: r.artifact_update.artifact.parts[0].text
        for r in responses
        if r.HasField("artifact_update")
    }
    assert artifacts.get("ok.txt") == "fine\n"
    assert all("the secret" not in text for text in artifacts.values())
    assert artifacts["leak.txt"] == "cannot be read: a link; not sent"  # named, not followed


def caller_spec(url: str, on_input: str = "wait") -> str:
    return (
        f"name: caller\nmodel: scripted:SCRIPT\non_input: {on_input}\n"
        f"agents:\n  picker: {{a2a: '{url}'}}\ngoal: Ask.\n"
    )


CALLER_SCRIPT = {
    "goal": [
        call("fork", tasks=[{"id": "far", "agent": "picker", "task": "Pick a city"}]),
        {"content": "the picker answered"},
    ]
}


async def test_a_fork_to_a_served_job_that_asks_waits_and_its_answer_goes_to_the_same_task(
    tmp_path: Path,
) -> None:
    """Our client against our server: the remote task asks, so the fork's task (and the
    run) waits, the remote task left waiting; resumed with the answer, the answer goes to
    that same remote task, which completes."""
    from orchestrator import Orchestrator
    from orchestrator.jobs import load_job
    from orchestrator.planner import run_job

    job = load_served(write_job(tmp_path / "server", PICKER, PICKER_SCRIPT, "picker"))
    runs = tmp_path / "runs"
    trace = tmp_path / "caller.jsonl"
    async with served([job], runs) as url:
        caller = write_job(tmp_path / "client", caller_spec(url), CALLER_SCRIPT)
        first = await run_job(load_job(caller), trace=trace)
        client = await client_for(url)
        [remote_id] = {e["task_id"] for e in trace_lines(trace) if e["type"] == "a2a_task"}
        remote = await client.get_task(GetTaskRequest(id=remote_id))
        await client.close()
        [waiting] = first.waiting
        second = await Orchestrator.resume(trace, answers={waiting.id: "Rome"})
    assert first.status == "input_required"
    assert (waiting.kind, waiting.source, waiting.agent) == (
        "remote",
        "remote agent 'picker'",
        "goal/far",
    )
    assert '"question": "Which city?"' in waiting.question  # the remote's status text
    assert remote.status.state == TaskState.TASK_STATE_INPUT_REQUIRED  # left waiting there
    assert second.status == "completed", second
    events = list(trace_lines(trace))
    assert {e["task_id"] for e in events if e["type"] == "a2a_task"} == {remote_id}
    [sent] = [e for e in events if e["type"] == "a2a_send" and e.get("answer")]
    assert (sent["task_id"], sent["answer"]) == (remote_id, waiting.id)
    assert [e for e in events if e["type"] == "a2a_cancel"] == []
    [far] = [e for e in events if e["type"] == "task_end" and e["agent"] == "goal/far"][-1:]
    assert far["status"] == "completed"
    observation = [str(e["message"]["content"]) for e in events if e["type"] == "message"
                   and e["message"]["role"] == "tool"][-1]  # fmt: skip
    assert "### far [completed]" in observation and "going to Rome" in observation
    # The served side: one task, one trace; the answer reached its question.
    [served_events] = traces(runs)
    assert {e["task_id"] for e in served_events if e["type"] == "a2a_task"} == {remote_id}
    [given] = [e["answer"]["value"] for e in served_events if e["type"] == "input_answer"]
    assert given == "Rome"


@pytest.mark.parametrize(
    ("on_input", "said"),
    [
        ("deny", "was declined by the run's on_input"),
        ("fail", "this run's on_input is 'fail'"),
    ],
)
async def test_where_the_run_will_not_wait_the_remote_task_is_cancelled(
    tmp_path: Path, on_input: str, said: str
) -> None:
    from orchestrator.jobs import load_job
    from orchestrator.planner import run_job

    job = load_served(write_job(tmp_path / "server", PICKER, PICKER_SCRIPT, "picker"))
    runs = tmp_path / "runs"
    async with served([job], runs) as url:
        spec = caller_spec(url, on_input)
        caller = write_job(tmp_path / "client", spec, CALLER_SCRIPT)
        result = await run_job(load_job(caller), trace=tmp_path / "caller.jsonl")
        events = list(trace_lines(tmp_path / "caller.jsonl"))
        [remote_id] = {e["task_id"] for e in events if e["type"] == "a2a_task"}
        client = await client_for(url)
        remote = await client.get_task(GetTaskRequest(id=remote_id))
        await client.close()
    assert result.status == "completed" and result.waiting == []
    [far] = [e for e in events if e["type"] == "task_end" and e["agent"] == "goal/far"]
    assert far["status"] == "error"
    assert "it asked for input" in far["reason"] and said in far["reason"]
    assert f"the remote task {remote_id} was cancelled" in far["reason"]
    assert [e["ok"] for e in events if e["type"] == "a2a_cancel"] == [True]
    assert remote.status.state == TaskState.TASK_STATE_CANCELED
    assert json.loads((runs / "a2a-waiting.json").read_text()) == []  # waits no more


def test_two_jobs_of_one_name_are_refused(tmp_path: Path) -> None:
    from orchestrator.a2a.served import JobAgent, ServeError

    one = load_served(write_job(tmp_path / "a", WRITER, WRITER_SCRIPT, "writer"))
    two = load_served(write_job(tmp_path / "b", WRITER, WRITER_SCRIPT, "writer"))
    with pytest.raises(ServeError, match="two jobs are named writer"):
        JobAgent([one, two])


async def test_a_served_runs_trace_is_named_by_its_run_id(tmp_path: Path) -> None:
    job = load_served(write_job(tmp_path, WRITER, WRITER_SCRIPT, "writer"))
    runs = tmp_path / "runs"
    async with served([job], runs) as url:
        [response] = await ask_once(url, "Write it", streaming=False)
    said = MessageToDict(response.task.status.message)["parts"][1]["data"]
    [path] = runs.glob("*.jsonl")
    events = list(trace_lines(path))
    assert {event["run"] for event in events} == {said["run"]}
    assert path.name.startswith(said["run"] + "-a2a-") and str(path) == said["trace"]
