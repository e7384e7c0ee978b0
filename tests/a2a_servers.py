"""A2A servers we did not write the protocol side of, on 127.0.0.1, for the client's tests.

- `sdk_agent`: an agent built with the Python SDK alone (its card and JSON-RPC routes, its
  request handler), whose executor echoes the task, or waits until it is cancelled.
- `hostile_agent`: a hand-made HTTP server with a valid card whose task endpoint misbehaves
  (never answers, drops the stream, sends a malformed event, sends its card's interface
  to another host, floods appended artifact chunks or artifacts of new, huge names, chatters
  status updates without end,
  or echoes the caller's `Authorization` header back).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from typing import Any, Literal

import uvicorn
from a2a.helpers import get_message_text
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
    Task,
    TaskState,
    TaskStatus,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


class EchoAgent(AgentExecutor):
    """Echoes the task's text, with an artifact and the usage it reports (`reported` input
    tokens); with `hang`, waits until `release` is set (or it is cancelled) first; the first
    `fail_first` tasks fail. `cancelled` lists the task ids it was asked to cancel."""

    def __init__(self, hang: bool = False, fail_first: int = 0, reported: int = 7) -> None:
        self.hang = hang
        self.reported = reported  # the input tokens each task says it used
        self.fail_first = fail_first  # how many tasks end `failed` before one succeeds
        self.release = asyncio.Event()  # set: a hanging task goes on to its end
        self.cancelled: list[str] = []
        self.received: list[str] = []
        self.finished: list[str] = []

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = context.task_id or "", context.context_id or ""
        text = get_message_text(context.message) if context.message else ""
        self.received.append(text)
        if context.current_task is None and context.message is not None:
            await event_queue.enqueue_event(
                Task(
                    id=task_id,
                    context_id=context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[context.message],
                )
            )
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.start_work(updater.new_agent_message([Part(text="thinking")]))
        if self.hang:
            await self.release.wait()
        if self.fail_first > 0:
            self.fail_first -= 1
            await updater.update_status(
                TaskState.TASK_STATE_FAILED,
                updater.new_agent_message([Part(text="the service is down")]),
            )
            return
        await updater.add_artifact([Part(text=f"artifact of: {text[:40]}")], name="echo.txt")
        await updater.update_status(
            TaskState.TASK_STATE_COMPLETED,
            updater.new_agent_message([Part(text=f"echo: {text[:60]}")]),
            metadata={"usage": {"input_tokens": self.reported, "output_tokens": 5}},
        )
        self.finished.append(task_id)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.cancelled.append(context.task_id or "")
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()


def card(url: str, interface_url: str | None = None) -> AgentCard:
    return AgentCard(
        name="echo",
        description="Echoes what it is sent.",
        version="1",
        supported_interfaces=[
            AgentInterface(url=interface_url or url, protocol_binding="JSONRPC",
                           protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="echo", description="Echoes.", tags=["echo"])],
    )  # fmt: skip


def _socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    sock.setblocking(False)
    return sock


@contextlib.asynccontextmanager
async def _serving(app: Any, sock: socket.socket) -> AsyncIterator[None]:
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield  # the socket listens already: a connection waits in its backlog until then
    finally:
        server.should_exit = True
        server.force_exit = True
        try:
            await asyncio.wait_for(task, 5)
        except TimeoutError:
            task.cancel()
        sock.close()


@contextlib.asynccontextmanager
async def sdk_agent(agent: EchoAgent, token: str | None = None) -> AsyncIterator[str]:
    """Serve `agent` with the SDK's routes and handler (with `token`, its JSON-RPC route
    wants `Authorization: Bearer TOKEN`); yields its base URL."""
    sock = _socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    the_card = card(url)
    handler = DefaultRequestHandler(
        agent_executor=agent, task_store=InMemoryTaskStore(), agent_card=the_card
    )
    app = Starlette(
        routes=[*create_agent_card_routes(the_card), *create_jsonrpc_routes(handler, "/")]
    )

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers") or [])
        wanted = f"Bearer {token}".encode()
        if (
            scope["type"] == "http"
            and scope["method"] == "POST"
            and headers.get(b"authorization") != wanted
        ):
            await JSONResponse({"error": "unauthorized"}, status_code=401)(scope, receive, send)
            return
        await app(scope, receive, send)

    async with _serving(guarded if token is not None else app, sock):
        yield url


Misbehaviour = Literal[
    "silent",
    "drop",
    "malformed",
    "elsewhere",
    "flood",
    "names",
    "chatter",
    "echo_credentials",
]
FLOOD_CHUNKS = 40
FLOOD_CHUNK_CHARS = 1_000_000


def _agent_status(state: str, text: str) -> dict[str, Any]:
    message = {"messageId": "m1", "role": "ROLE_AGENT", "parts": [{"text": text}]}
    return {"taskId": "t1", "contextId": "c1", "status": {"state": state, "message": message}}


@contextlib.asynccontextmanager
async def hostile_agent(how: Misbehaviour) -> AsyncIterator[tuple[str, list[str]]]:
    """A server with a valid card whose task endpoint misbehaves as `how` says; yields its
    URL and the JSON-RPC methods it was called with."""
    sock = _socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    called: list[str] = []
    elsewhere = "http://127.0.0.2:9/" if how == "elsewhere" else None
    card_json = json.loads(
        json.dumps(
            {
                "name": "hostile",
                "description": "Misbehaves.",
                "version": "1",
                "supportedInterfaces": [
                    {"url": elsewhere or url, "protocolBinding": "JSONRPC",
                     "protocolVersion": "1.0"}
                ],
                "capabilities": {"streaming": True},
                "defaultInputModes": ["text/plain"],
                "defaultOutputModes": ["text/plain"],
                "skills": [{"id": "x", "name": "x", "description": "x", "tags": ["x"]}],
            }
        )
    )  # fmt: skip

    async def get_card(request: Request) -> Response:
        return JSONResponse(card_json)

    async def rpc(request: Request) -> Response:
        body = await request.json()
        called.append(body.get("method", ""))
        if body.get("method") == "CancelTask":
            return JSONResponse({"jsonrpc": "2.0", "id": body["id"], "result": {"id": "t1"}})
        if how == "silent":
            await asyncio.Event().wait()
        status = {
            "taskId": "t1",
            "contextId": "c1",
            "status": {"state": "TASK_STATE_WORKING"},
        }
        first = json.dumps({"jsonrpc": "2.0", "id": body["id"], "result": {"statusUpdate": status}})

        def event(result: dict[str, Any]) -> bytes:
            line = json.dumps({"jsonrpc": "2.0", "id": body["id"], "result": result})
            return f"data: {line}\n\n".encode()

        async def events() -> AsyncIterator[bytes]:
            yield f"data: {first}\n\n".encode()
            if how == "malformed":
                yield b"data: {this is not json\n\n"
            elif how == "flood":  # appended chunks, each within any size limit, without end
                for _ in range(FLOOD_CHUNKS):
                    artifact = {
                        "artifactId": "a1",
                        "name": "big.txt",
                        "parts": [{"text": "x" * FLOOD_CHUNK_CHARS}],
                    }
                    yield event(
                        {
                            "artifactUpdate": {
                                "taskId": "t1",
                                "contextId": "c1",
                                "artifact": artifact,
                                "append": True,
                            }
                        }
                    )
                yield event({"statusUpdate": _agent_status("TASK_STATE_COMPLETED", "done")})
            elif how == "names":  # a new artifact each time, named with 100,000 characters
                for number in range(FLOOD_CHUNKS):
                    name = f'n{number}">\n<injected/>' + "x" * 100_000
                    artifact = {"artifactId": f"a{number}", "name": name, "parts": [{"text": ""}]}
                    update = {"taskId": "t1", "contextId": "c1", "artifact": artifact}
                    yield event({"artifactUpdate": {**update, "append": True}})
                yield event({"statusUpdate": _agent_status("TASK_STATE_COMPLETED", "done")})
            elif how == "chatter":  # status updates, as fast as the caller takes them
                while True:
                    text = "still working " + "." * 400
                    yield event({"statusUpdate": _agent_status("TASK_STATE_WORKING", text)})
                    await asyncio.sleep(0)  # let the server see the caller hang up
            elif how == "echo_credentials":
                said = f"you sent {request.headers.get('authorization', '')}"
                yield event({"statusUpdate": _agent_status("TASK_STATE_WORKING", said)})
                artifact = {"artifactId": "a1", "name": said, "parts": [{"text": said}]}
                yield event(
                    {"artifactUpdate": {"taskId": "t1", "contextId": "c1", "artifact": artifact}}
                )
                yield event({"statusUpdate": _agent_status("TASK_STATE_COMPLETED", said)})

        return StreamingResponse(events(), media_type="text/event-stream")

    app = Starlette(
        routes=[
            Route("/.well-known/agent-card.json", get_card, methods=["GET"]),
            Route("/", rpc, methods=["POST"]),
        ]
    )
    async with _serving(app, sock):
        yield url, called
